/*
 * quants.h — reference quantize / dequantize rows for the GGUF block types.
 *
 * Naming: kiln_dequantize_row_<type>(x, y, k) turns k values (a multiple of
 * the block size) of blocks into floats; kiln_quantize_row_<type>_ref(x, y, k)
 * is the reference quantizer, producing the same bytes as ggml's.
 * kiln_quantize_row_<type>_imat(x, y, n_per_row, imatrix_row) is the
 * importance-weighted quantizer ggml's quantize_chunk uses when given an
 * imatrix (one row at a time).
 *
 * KILN_QFN_TO / KILN_QFN_FROM name them for the traits table.
 */
#ifndef KILN_QUANTS_H
#define KILN_QUANTS_H

#include "kiln.h"

#define KILN_QUANT_TYPES_WITH_REF(X) \
    X(q4_0) X(q4_1) X(q5_0) X(q5_1) X(q8_0) X(q8_1) \
    X(q2_K) X(q3_K) X(q4_K) X(q5_K) X(q6_K) X(q8_K) \
    X(iq4_nl) X(iq4_xs) X(tq1_0) X(tq2_0)

#define KILN_QUANT_TYPES_DEQ_ONLY(X) \
    X(iq2_xxs) X(iq2_xs) X(iq2_s) X(iq3_xxs) X(iq3_s) X(iq1_s) X(iq1_m)

#define KILN_QDECL_TO(t)   void kiln_dequantize_row_##t(const void * x, float * y, int64_t k);
#define KILN_QDECL_FROM(t) void kiln_quantize_row_##t##_ref(const float * x, void * y, int64_t k);
KILN_QUANT_TYPES_WITH_REF(KILN_QDECL_TO)
KILN_QUANT_TYPES_WITH_REF(KILN_QDECL_FROM)
KILN_QUANT_TYPES_DEQ_ONLY(KILN_QDECL_TO)
#undef KILN_QDECL_TO
#undef KILN_QDECL_FROM

#define KILN_QDECL_IMAT(t) void kiln_quantize_row_##t##_imat(const float * x, void * y, int64_t n, const float * qw);
KILN_QDECL_IMAT(q4_0) KILN_QDECL_IMAT(q4_1) KILN_QDECL_IMAT(q5_0) KILN_QDECL_IMAT(q5_1)
KILN_QDECL_IMAT(q2_K) KILN_QDECL_IMAT(q3_K) KILN_QDECL_IMAT(q4_K) KILN_QDECL_IMAT(q5_K) KILN_QDECL_IMAT(q6_K)
KILN_QDECL_IMAT(iq4_nl) KILN_QDECL_IMAT(iq4_xs)
#undef KILN_QDECL_IMAT

/* mul_mat's activation quantizers (ggml x86 rounding; see quants_legacy.c) */
void kiln_quantize_row_q8_0_act(const float * x, void * y, int64_t k);
void kiln_quantize_row_q8_1_act(const float * x, void * y, int64_t k);
/* the same with ggml arm64's scale (1 / (amax / 127)); NEON's from_float */
void kiln_quantize_row_q8_0_act_arm(const float * x, void * y, int64_t k);
void kiln_quantize_row_q8_1_act_arm(const float * x, void * y, int64_t k);

#define KILN_QFN_TO(t)   kiln_dequantize_row_##t
#define KILN_QFN_FROM(t) kiln_quantize_row_##t##_ref

#endif
