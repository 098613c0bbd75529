/*
 * arch.h — declarations of every ISA's pure kernels, named what-then-how
 * (f32_dot__avx2). Each ISA's block is visible only where its files are
 * compiled (see CMakeLists.txt); kernels.c puts them into the table.
 */
#ifndef KILN_ARCH_H
#define KILN_ARCH_H

#include "kiln.h"

#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
#define KILN_ARCH_X86 1
#endif
#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
#define KILN_ARCH_ARM 1
#endif
#if defined(__wasm_simd128__)
#define KILN_ARCH_WASM_SIMD 1
#endif
#if defined(__wasm_simd128__) && defined(__wasm_relaxed_simd__)
#define KILN_ARCH_WASM_RELAXED 1
#endif

#include "vec_list.h"

KILN_VEC_LIST(KILN_VEC_DECLARE, scalar)
void f32_gemm_4x4__scalar(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate);
void f32_gemm_pack4__scalar(int64_t k, const float * a, int64_t lda, int nr, float * bp);
void f32_gemm_1x1__scalar(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
/* F16 accumulators (flash attention's V sum, as ggml keeps it): fused
 * y = fp16(fp32(x) * v + fp32(y)), and y = fp16(fp32(y) * v), each rounded to nearest even */
void f16_mad__scalar(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
void f16_scale__scalar(int64_t n, kiln_fp16_t * y, float v);

#ifdef KILN_ARCH_X86
KILN_VEC_LIST(KILN_VEC_DECLARE, avx2)
void f32_gemm_6x16__avx2(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate);
void f32_gemm_3x4__avx2(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
float f32_dot8__avx2(int64_t n, const float * x, const float * y);
void f32_gemm_fma__avx2(int m, int k, int n, float * C, const float * A, const float * B);
void f32_gemm_fma__avx512(int m, int k, int n, float * C, const float * A, const float * B);
void f16_mad__avx2(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
void f16_scale__avx2(int64_t n, kiln_fp16_t * y, float v);
/* the avx512 row's packed microkernel, bit-identical to f32_gemm_6x16__avx2 per output */
void f32_gemm_8x16__avx512(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate);
#endif
#ifdef KILN_ARCH_ARM
KILN_VEC_LIST(KILN_VEC_DECLARE, neon)
void f32_gemm_4x4__neon(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
/* fp16 vector arithmetic (vec_fp16arith.c), as llama.cpp's armv8.2_2 build */
float f16_dot__neon_fp16(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y);
void f16_mad__neon_fp16(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
void f16_scale__neon_fp16(int64_t n, kiln_fp16_t * y, float v);
/* the CPU has what ggml's armv8.2_2 variant needs and no SVE (which ggml's
 * higher variants would use): dotprod and fp16 scalar + vector arithmetic */
int kiln_cpu_arm_f16_arith(void);
float f32_dot4__neon(int64_t n, const float * x, const float * y);
void f32_gemm_fma__neon(int m, int k, int n, float * C, const float * A, const float * B);
#endif
#ifdef KILN_ARCH_WASM_SIMD
KILN_VEC_LIST(KILN_VEC_DECLARE, wasm_simd128)
void f32_gemm_2x16__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate);
void f32_gemm_fma__wasm_simd128(int m, int k, int n, float * C, const float * A, const float * B);
void f32_gemm_pack16__wasm_simd128(int64_t k, const float * a, int64_t lda, int nr, float * bp);
void f32_gemm_3x3__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
void f16_mad__wasm_simd128(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
void f16_scale__wasm_simd128(int64_t n, kiln_fp16_t * y, float v);
float f16val_dot__wasm_simd128(int64_t n, const float * x, const float * y);
void f16val_mad__wasm_simd128(int64_t n, float * y, const float * x, float v);
void f16val_scale__wasm_simd128(int64_t n, float * y, float v);
/* llama.cpp's x86 orders (kernels.h: f32_gemm_tile8, f32_dot8, f32_dot_ggml), unfused */
void f32_gemm8_2x2__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
float f32_dot8__wasm_simd128(int64_t n, const float * x, const float * y);
float f32_dot_ggml__wasm_simd128(int64_t n, const float * x, const float * y);
#endif
#ifdef KILN_ARCH_WASM_RELAXED
/* the relaxed-SIMD kernels; the rest of that table is SIMD128's */
void f32_gemm_2x16__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate);
void f32_gemm_3x3__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
void f16_mad__wasm_relaxed(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
void f16val_mad__wasm_relaxed(int64_t n, float * y, const float * x, float v);
/* llama.cpp's x86 orders with relaxed_madd (exact where it fuses) */
void f32_gemm8_2x2__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc);
float f32_dot8__wasm_relaxed(int64_t n, const float * x, const float * y);
void f32_silu__wasm_relaxed(int64_t n, const float * x, float * y);
float f32_dot_ggml__wasm_relaxed(int64_t n, const float * x, const float * y);
/* whether this engine's f32x4.relaxed_madd rounds once (a real FMA) */
bool kiln_wasm_relaxed_madd_fuses(void);
#endif

/* the constants ggml's GELU uses (tanh approximation) */
#define KILN_GELU_COEF_A     0.044715f
#define KILN_SQRT_2_OVER_PI  0.79788456080286535587989211986876f

#endif /* KILN_ARCH_H */
