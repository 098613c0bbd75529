/*
 * repack_dotprod.c — the NEON x4 kernels again (repack_neon.c), built with
 * -march=armv8.2-a+dotprod so their i8 dot products are SDOT (vdotq_s32);
 * named ..._neon_dotprod, selected by kiln_cpu_has_dotprod() with the
 * plain dotprod kernels they match.
 */
#define KILN_NEON_DOTPROD 1
#include "repack_neon.c"
