/*
 * quant_dot_dotprod.c — the NEON dot products again, built with
 * -march=armv8.2-a+dotprod so dot16 is one SDOT (vdotq_s32); named
 * ..._vec_dot__neon_dotprod. Selected at run time by kiln_cpu_has_dotprod().
 */
#define KILN_NEON_DOTPROD 1
#define q4_0_q8_0_vec_dot__neon q4_0_q8_0_vec_dot__neon_dotprod
#define q4_1_q8_1_vec_dot__neon q4_1_q8_1_vec_dot__neon_dotprod
#define q5_0_q8_0_vec_dot__neon q5_0_q8_0_vec_dot__neon_dotprod
#define q5_1_q8_1_vec_dot__neon q5_1_q8_1_vec_dot__neon_dotprod
#define q8_0_q8_0_vec_dot__neon q8_0_q8_0_vec_dot__neon_dotprod
#define q2_K_q8_K_vec_dot__neon q2_K_q8_K_vec_dot__neon_dotprod
#define q3_K_q8_K_vec_dot__neon q3_K_q8_K_vec_dot__neon_dotprod
#define q4_K_q8_K_vec_dot__neon q4_K_q8_K_vec_dot__neon_dotprod
#define q5_K_q8_K_vec_dot__neon q5_K_q8_K_vec_dot__neon_dotprod
#define q6_K_q8_K_vec_dot__neon q6_K_q8_K_vec_dot__neon_dotprod
#define iq4_nl_q8_0_vec_dot__neon iq4_nl_q8_0_vec_dot__neon_dotprod
#define iq4_xs_q8_K_vec_dot__neon iq4_xs_q8_K_vec_dot__neon_dotprod
#include "quant_dot_neon.c"
