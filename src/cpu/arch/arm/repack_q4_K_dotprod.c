/*
 * repack_q4_K_dotprod.c — the NEON Q4_K x8 kernels again
 * (repack_q4_K_neon.c), built with -march=armv8.2-a+dotprod so their i8
 * dot products are SDOT, and summing in llama.cpp's arm64 order (its
 * ggml_gemv / ggml_gemm_q4_K_8x4_q8_K, which its dotprod build runs);
 * named ..._neon_dotprod, selected by kiln_cpu_has_dotprod().
 */
#define KILN_NEON_DOTPROD 1
#include "repack_q4_K_neon.c"
