/*
 * quant_dot.h — the quantized dot products and activation quantizers, per
 * ISA, named what-then-how (q4_0_q8_0_vec_dot__avx2). Signature of every dot:
 * s = dot(x, y) over n values, x a row of the weight type, y a row of its
 * activation type (q8_0 / q8_1 / q8_K, as ggml pairs them), n a multiple of
 * the block size. Pointers need only the blocks' natural C alignment (2
 * bytes; 4 for q8_K), never SIMD alignment. src/quant/quant_kernels.c puts them into
 * the kernel table.
 */
#ifndef KILN_QUANT_DOT_H
#define KILN_QUANT_DOT_H

#include "kiln.h"

#include <stdbool.h>

#define KILN_QDOT(name, S) void name##_vec_dot__##S(int64_t n, float * s, const void * x, const void * y);

/* the types with SIMD variants on every ISA */
#define KILN_QDOT_SIMD_LIST(X, S) \
    X(q4_0_q8_0, S) X(q4_1_q8_1, S) X(q5_0_q8_0, S) X(q5_1_q8_1, S) X(q8_0_q8_0, S) \
    X(q2_K_q8_K, S) X(q3_K_q8_K, S) X(q4_K_q8_K, S) X(q5_K_q8_K, S) X(q6_K_q8_K, S) \
    X(iq4_nl_q8_0, S) X(iq4_xs_q8_K, S)

/* scalar only */
#define KILN_QDOT_SCALAR_ONLY_LIST(X, S) \
    X(tq1_0_q8_K, S) X(tq2_0_q8_K, S) \
    X(iq2_xxs_q8_K, S) X(iq2_xs_q8_K, S) X(iq2_s_q8_K, S) X(iq3_xxs_q8_K, S) X(iq3_s_q8_K, S) \
    X(iq1_s_q8_K, S) X(iq1_m_q8_K, S)

KILN_QDOT_SIMD_LIST(KILN_QDOT, scalar)
KILN_QDOT_SCALAR_ONLY_LIST(KILN_QDOT, scalar)

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
KILN_QDOT_SIMD_LIST(KILN_QDOT, avx2)
/* mat-vec variant in llama.cpp's order there (kernels.h, vec_dot_1) */
void iq4_nl_q8_0_vec_dot_gemv__avx2(int64_t n, float * s, const void * vx, const void * vy);
/* the avx512 row (F + BW + VL + VNNI): these; the other types keep AVX2's */
KILN_QDOT(q4_0_q8_0, avx512)
KILN_QDOT(q8_0_q8_0, avx512)
KILN_QDOT(q4_K_q8_K, avx512)
KILN_QDOT(q5_K_q8_K, avx512)
KILN_QDOT(q6_K_q8_K, avx512)
void kiln_quantize_row_q8_0_act__avx2(const float * x, void * y, int64_t k);
void q6_K_q8_K_vec_dot_y4__avx2(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q6_K_q8_K_vec_dot_y4__avx512(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q6_K_q8_K_vec_dot_rows__avx2(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys);
void q6_K_q8_K_vec_dot_rows__avx512(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys);
void q5_K_q8_K_vec_dot_rows__avx2(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys);
void q5_K_q8_K_vec_dot_rows__avx512(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys);
KILN_QDOT(iq4_nl_q8_0, avx512)
void iq4_nl_q8_0_vec_dot_gemv__avx512(int64_t n, float * s, const void * vx, const void * vy);
/* the avxvnni row (AVX2 + AVX-VNNI, no AVX-512): q4_0, q8_0, iq4_nl */
KILN_QDOT(q4_0_q8_0, avxvnni)
KILN_QDOT(q8_0_q8_0, avxvnni)
KILN_QDOT(iq4_nl_q8_0, avxvnni)
void iq4_nl_q8_0_vec_dot_gemv__avxvnni(int64_t n, float * s, const void * vx, const void * vy);
#endif
#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
KILN_QDOT_SIMD_LIST(KILN_QDOT, neon)
KILN_QDOT_SIMD_LIST(KILN_QDOT, neon_dotprod)
/* mul_mat's batched order on arm64 with dotprod (llamafile's tinyBLAS_Q0_ARM) */
void q4_0_q8_0_vec_dot_n__neon_dotprod(int64_t n, float * s, const void * x, const void * y);
void q8_0_q8_0_vec_dot_n__neon_dotprod(int64_t n, float * s, const void * x, const void * y);
#endif
#if defined(__wasm_simd128__)
KILN_QDOT_SIMD_LIST(KILN_QDOT, wasm_simd128)
/* kiln_quantize_row_q8_0_act's bytes on SIMD128 vectors */
void kiln_quantize_row_q8_0_act__wasm_simd128(const float * x, void * y, int64_t k);
#endif
#if defined(__wasm_simd128__) && defined(__wasm_relaxed_simd__)
/* relaxed SIMD replaces these two; the other types keep SIMD128's */
KILN_QDOT(q4_0_q8_0, wasm_relaxed)
KILN_QDOT(q8_0_q8_0, wasm_relaxed)
/* bit-identical to wasm_simd128's (repack_q4_K_wasm_relaxed.c) */
KILN_QDOT(q6_K_q8_K, wasm_relaxed)
KILN_QDOT(q5_K_q8_K, wasm_relaxed)
/* q6_K batched (kernels.h vec_dot_rows), bit-identical to the one above */
void q6_K_q8_K_vec_dot_rows__wasm_relaxed(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y,
                                          size_t ys);
/* q5_K batched, bit-identical to q5_K_q8_K_vec_dot__wasm_simd128 (the table's) */
void q5_K_q8_K_vec_dot_rows__wasm_relaxed(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs, const void * y,
                                          size_t ys);
/* q4_0 and q8_0 through i32 dot-adds, for engines where each is one
 * instruction (kernels_wasm_relaxed.c); bit-identical to the ones above */
KILN_QDOT(q4_0_q8_0, wasm_relaxed_dotadd)
KILN_QDOT(q8_0_q8_0, wasm_relaxed_dotadd)
bool kiln_wasm_relaxed_dot_add_direct(void);
#endif

#endif
