/*
 * quants.h — reference quantize / dequantize rows for the GGUF block types.
 *
 * Naming: kiln_dequantize_row_<type>(x, y, k) turns k values (a multiple of
 * the block size) of blocks into floats; kiln_quantize_row_<type>_ref(x, y, k)
 * is the reference quantizer, producing the same bytes as ggml's.
 *
 * KILN_QFN_TO / KILN_QFN_FROM name them for the traits table; until a type is
 * implemented its entry is NULL (define KILN_HAVE_<TYPE>_TO / _FROM when it lands).
 */
#ifndef KILN_QUANTS_H
#define KILN_QUANTS_H

#include "kiln.h"

#define KILN_QFN_TO(t)   NULL
#define KILN_QFN_FROM(t) NULL

#endif
