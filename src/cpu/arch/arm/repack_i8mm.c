/*
 * repack_i8mm.c — the batched Q4_0 / IQ4_NL x4 kernels through SMMLA
 * (vmmlaq_s32, ARMv8.6 I8MM), built with -march=armv8.2-a+dotprod+i8mm from
 * repack_neon.c (KILN_NEON_I8MM); bit-identical to the SDOT x4 kernels,
 * in the NEON table where kiln_cpu_has_dotprod() && kiln_cpu_has_i8mm().
 */
#define KILN_NEON_DOTPROD 1
#define KILN_NEON_I8MM 1
#include "repack_neon.c"
