/*
 * vec_wasm_simd128.c — vector primitives for WebAssembly SIMD128 (fixed at
 * compile time: the build is -msimd128). No FMA in plain SIMD128, so
 * multiply and add are separate (the relaxed-SIMD build swaps in
 * f32x4.relaxed_madd for the f32 GEMM: kernels_wasm_relaxed.c).
 */
#include "../arch.h"
#include "../gemm_fma_block.h"
#include "simd128_common.h"

#include <wasm_simd128.h>
#include <math.h>

#define hsum4 kiln_simd128_hsum_f32

#define MADD(a, b, c) wasm_f32x4_add(wasm_f32x4_mul(a, b), c)

/* exp(x) for 4 lanes: the scheme of exp8 in vec_avx2.c */
static inline v128_t exp4(v128_t x) {
    const v128_t not_nan = wasm_f32x4_eq(x, x);
    const v128_t xc = wasm_f32x4_min(wasm_f32x4_max(x, wasm_f32x4_splat(-104.0f)), wasm_f32x4_splat(88.8f));
    const v128_t n = wasm_f32x4_nearest(wasm_f32x4_mul(xc, wasm_f32x4_splat(1.44269504088896341f)));
    v128_t r = wasm_f32x4_sub(xc, wasm_f32x4_mul(n, wasm_f32x4_splat(0.693359375f)));
    r = wasm_f32x4_sub(r, wasm_f32x4_mul(n, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
    p = MADD(p, r, wasm_f32x4_splat(1.3981999507e-3f));
    p = MADD(p, r, wasm_f32x4_splat(8.3334519073e-3f));
    p = MADD(p, r, wasm_f32x4_splat(4.1665795894e-2f));
    p = MADD(p, r, wasm_f32x4_splat(1.6666665459e-1f));
    p = MADD(p, r, wasm_f32x4_splat(5.0000001201e-1f));
    p = MADD(p, wasm_f32x4_mul(r, r), wasm_f32x4_add(r, wasm_f32x4_splat(1.0f)));
    const v128_t ni = wasm_i32x4_trunc_sat_f32x4(n);
    const v128_t n1 = wasm_i32x4_shr(ni, 1);
    const v128_t n2 = wasm_i32x4_sub(ni, n1);
    const v128_t s1 = wasm_i32x4_shl(wasm_i32x4_add(n1, wasm_i32x4_splat(127)), 23);
    const v128_t s2 = wasm_i32x4_shl(wasm_i32x4_add(n2, wasm_i32x4_splat(127)), 23);
    const v128_t y = wasm_f32x4_mul(wasm_f32x4_mul(p, s1), s2);
    return wasm_v128_bitselect(y, x, not_nan);
}

/* f32_dot's end from element i (after its 16-float steps): the 4-float
 * steps into a0, the 4 accumulators summed, the scalar tail */
static inline float f32_dot_finish(int64_t n, int64_t i, const float * x, const float * y, v128_t a0, v128_t a1, v128_t a2, v128_t a3) {
    for (; i + 4 <= n; i += 4) a0 = MADD(wasm_v128_load(x + i), wasm_v128_load(y + i), a0);
    float s = hsum4(wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3)));
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

float f32_dot__wasm_simd128(int64_t n, const float * x, const float * y) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = wasm_f32x4_splat(0), a2 = wasm_f32x4_splat(0), a3 = wasm_f32x4_splat(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = MADD(wasm_v128_load(x + i),      wasm_v128_load(y + i),      a0);
        a1 = MADD(wasm_v128_load(x + i + 4),  wasm_v128_load(y + i + 4),  a1);
        a2 = MADD(wasm_v128_load(x + i + 8),  wasm_v128_load(y + i + 8),  a2);
        a3 = MADD(wasm_v128_load(x + i + 12), wasm_v128_load(y + i + 12), a3);
    }
    return f32_dot_finish(n, i, x, y, a0, a1, a2, a3);
}

#define load_f16x8 kiln_simd128_load_f16x8
static inline void load_bf16x8(const kiln_bf16_t * p, v128_t * lo, v128_t * hi) {
    const v128_t v = wasm_v128_load(p);
    *lo = wasm_i32x4_shl(wasm_u32x4_extend_low_u16x8(v), 16);
    *hi = wasm_i32x4_shl(wasm_u32x4_extend_high_u16x8(v), 16);
}

/* llama.cpp's order (ggml_vec_dot_f16 on AVX2, as f16_dot__avx2): 4
 * accumulators of 8 lanes over steps of 32, reduced as ggml reduces them,
 * the rest of the products added in double. A product of two fp16 values
 * is exact in float, so multiply-then-add gives AVX2's fused sums: the
 * same floats as llama.cpp's (flash attention's K.Q scores over the F16
 * cache, where one rounding apart moves the fp16 V accumulator). */
#define F16_DOT_BODY(LOAD8) do { \
    v128_t a0l = wasm_f32x4_splat(0), a0h = a0l, a1l = a0l, a1h = a0l, a2l = a0l, a2h = a0l, a3l = a0l, a3h = a0l; \
    int64_t i = 0; \
    for (; i + 32 <= n; i += 32) { \
        v128_t xl, xh, yl, yh; \
        LOAD8(x + i, &xl, &xh); LOAD8(y + i, &yl, &yh); \
        a0l = MADD(xl, yl, a0l); a0h = MADD(xh, yh, a0h); \
        LOAD8(x + i + 8, &xl, &xh); LOAD8(y + i + 8, &yl, &yh); \
        a1l = MADD(xl, yl, a1l); a1h = MADD(xh, yh, a1h); \
        LOAD8(x + i + 16, &xl, &xh); LOAD8(y + i + 16, &yl, &yh); \
        a2l = MADD(xl, yl, a2l); a2h = MADD(xh, yh, a2h); \
        LOAD8(x + i + 24, &xl, &xh); LOAD8(y + i + 24, &yl, &yh); \
        a3l = MADD(xl, yl, a3l); a3h = MADD(xh, yh, a3h); \
    } \
    double s = kiln_simd128_reduce4x8(a0l, a0h, a1l, a1h, a2l, a2h, a3l, a3h); \
    for (; i < n; i++) s += ELEM(x, i) * ELEM(y, i); \
    return (float) s; \
} while (0)

float f16_dot__wasm_simd128(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
#define ELEM(p, i) kiln_fp16_to_fp32((p)[i])
    F16_DOT_BODY(load_f16x8);
#undef ELEM
}

/* f16_dot__wasm_simd128's float for two fp16 rows given as their floats
 * (exact conversions): the same lanes, order and tail, without the
 * conversions (flash attention converts each K row once for several
 * query rows) */
static inline void load_f32x8(const float * p, v128_t * lo, v128_t * hi) {
    *lo = wasm_v128_load(p);
    *hi = wasm_v128_load(p + 4);
}

float f16val_dot__wasm_simd128(int64_t n, const float * x, const float * y) {
#define ELEM(p, i) (p)[i]
    F16_DOT_BODY(load_f32x8);
#undef ELEM
}

float bf16_dot__wasm_simd128(int64_t n, const kiln_bf16_t * x, const kiln_bf16_t * y) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = wasm_f32x4_splat(0);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t x0, x1, y0, y1;
        load_bf16x8(x + i, &x0, &x1);
        load_bf16x8(y + i, &y0, &y1);
        a0 = MADD(x0, y0, a0);
        a1 = MADD(x1, y1, a1);
    }
    float s = hsum4(wasm_f32x4_add(a0, a1));
    for (; i < n; i++) s += kiln_bf16_to_fp32(x[i]) * kiln_bf16_to_fp32(y[i]);
    return s;
}

double f32_softmax_exp__wasm_simd128(int64_t n, const float * x, float * y, float max) {
    /* each vector's sum into a double, as llama.cpp: a long row summed in
     * float lanes loses ~1e-5 relative */
    const v128_t vmax = wasm_f32x4_splat(max);
    double s = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const v128_t v = exp4(wasm_f32x4_sub(wasm_v128_load(x + i), vmax));
        wasm_v128_store(y + i, v);
        s += hsum4(v);
    }
    for (; i < n; i++) { const float v = expf(x[i] - max); y[i] = v; s += v; }
    return s;
}

void f32_axpy__wasm_simd128(int64_t n, float a, const float * x, float * y) {
    const v128_t va = wasm_f32x4_splat(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, MADD(va, wasm_v128_load(x + i), wasm_v128_load(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

/* C[m x n] += A[m x k] B[k x n] (kernels.h f32_gemm_fma): each step a
 * multiply then an add, as f32_axpy__wasm_simd128's, so every C value is the
 * chain c = a * b + c in k order, bit-identical to f32_axpy rows; blocks of
 * R rows x V vectors of 4 columns keep their sums in registers across k
 * (4 x 2: eight accumulators, which V8 keeps in registers), then columns
 * 4 at a time, then one by one. */
#define GEMM_MADD_BLOCK(R, V) KILN_GEMM_FMA_BLOCK(v128_t, 4, wasm_v128_load, wasm_v128_store, wasm_f32x4_splat, MADD, R, V)

void f32_gemm_fma__wasm_simd128(int m, int k, int n, float * C, const float * A, const float * B) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        int j = 0;
        for (; j + 8 <= n; j += 8) GEMM_MADD_BLOCK(4, 2);
        for (; j + 4 <= n; j += 4) GEMM_MADD_BLOCK(4, 1);
        for (; j < n; j++)
            for (int r = 0; r < 4; r++)
                for (int q = 0; q < k; q++) C[(i + r) * n + j] += A[(i + r) * k + q] * B[q * n + j];
    }
    for (; i < m; i++) {
        int j = 0;
        for (; j + 8 <= n; j += 8) GEMM_MADD_BLOCK(1, 2);
        for (; j + 4 <= n; j += 4) GEMM_MADD_BLOCK(1, 1);
        for (; j < n; j++)
            for (int q = 0; q < k; q++) C[i * n + j] += A[i * k + q] * B[q * n + j];
    }
}
#undef GEMM_MADD_BLOCK

void f32_scale__wasm_simd128(int64_t n, float a, const float * x, float * y) {
    const v128_t va = wasm_f32x4_splat(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, wasm_f32x4_mul(va, wasm_v128_load(x + i)));
    for (; i < n; i++) y[i] = a * x[i];
}

void f32_add__wasm_simd128(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(z + i, wasm_f32x4_add(wasm_v128_load(x + i), wasm_v128_load(y + i)));
    for (; i < n; i++) z[i] = x[i] + y[i];
}

void f32_mul__wasm_simd128(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(z + i, wasm_f32x4_mul(wasm_v128_load(x + i), wasm_v128_load(y + i)));
    for (; i < n; i++) z[i] = x[i] * y[i];
}

#define MAP_TAIL(n, i, x, y, EXPR) \
    if (i < n) { \
        float bx[4] = {0}, by[4]; \
        for (int64_t j = i; j < n; j++) bx[j - i] = x[j]; \
        const v128_t v = wasm_v128_load(bx); \
        wasm_v128_store(by, EXPR); \
        for (int64_t j = i; j < n; j++) y[j] = by[j - i]; \
    }

void f32_exp__wasm_simd128(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, exp4(wasm_v128_load(x + i)));
    MAP_TAIL(n, i, x, y, exp4(v))
}


static inline v128_t gelu4(v128_t v) {
    const v128_t v2 = wasm_f32x4_mul(v, v);
    const v128_t u = wasm_f32x4_mul(wasm_f32x4_mul(v, wasm_f32x4_splat(-2.0f * KILN_SQRT_2_OVER_PI)),
                                    MADD(wasm_f32x4_splat(KILN_GELU_COEF_A), v2, wasm_f32x4_splat(1.0f)));
    return wasm_f32x4_div(v, wasm_f32x4_add(wasm_f32x4_splat(1.0f), exp4(u)));
}

void f32_gelu__wasm_simd128(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, gelu4(wasm_v128_load(x + i)));
    MAP_TAIL(n, i, x, y, gelu4(v))
}

#define store_f16x8 kiln_simd128_store_f16x8

void f32_to_f16__wasm_simd128(int64_t n, const float * x, kiln_fp16_t * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) store_f16x8(y + i, wasm_v128_load(x + i), wasm_v128_load(x + i + 4));
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(x[i]);
}

#define fma_f32x4 kiln_simd128_fma_f32x4

/* exp(x) and silu with llama.cpp's AVX2 floats (simd128_common.h), their
 * fused multiply-adds through fma_f32x4 (exact, emulated in f64); the
 * relaxed build swaps in relaxed_madd where the engine fuses it */
KILN_SIMD128_DEFINE_EXP4_GGML(exp4_ggml, fma_f32x4)

static inline v128_t silu4(v128_t v) {
    return wasm_f32x4_div(v, wasm_f32x4_add(wasm_f32x4_splat(1.0f), exp4_ggml(wasm_f32x4_sub(wasm_f32x4_splat(0.0f), v))));
}

/* as llama.cpp's AVX2 build: vectors of 8 (here two of 4: the lanes are
 * independent), then the scalar formula with expf */
void f32_silu__wasm_simd128(int64_t n, const float * x, float * y) {
    const int64_t nv = n - n % 8;
    int64_t i = 0;
    for (; i < nv; i += 4) wasm_v128_store(y + i, silu4(wasm_v128_load(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* the F16 accumulators of flash attention: bit-identical to the scalar ones
 * (exact conversions, one rounding in the fma, RNE to fp16) */
void f16_mad__wasm_simd128(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    KILN_SIMD128_F16_MAD_BODY(fma_f32x4);
}

void f16_scale__wasm_simd128(int64_t n, kiln_fp16_t * y, float v) {
    const v128_t vv = wasm_f32x4_splat(v);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t yl, yh;
        load_f16x8(y + i, &yl, &yh);
        store_f16x8(y + i, wasm_f32x4_mul(yl, vv), wasm_f32x4_mul(yh, vv));
    }
    f16_scale__scalar(n - i, y + i, v);
}

/* f16_mad and f16_scale on fp16 values held as floats (kernels.h,
 * f16val_mad / f16val_scale): the same bits as the fp16 kernels, with no
 * conversion on the loads and a rounding in place of the one on the store */
void f16val_mad__wasm_simd128(int64_t n, float * y, const float * x, float v) {
    KILN_SIMD128_F16VAL_MAD_BODY(fma_f32x4);
}

void f16val_scale__wasm_simd128(int64_t n, float * y, float v) {
    const v128_t vv = wasm_f32x4_splat(v);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) wasm_v128_store(y + i, kiln_simd128_f32x4_round_f16(wasm_f32x4_mul(wasm_v128_load(y + i), vv)));
    for (; i < n; i++) y[i] = kiln_fp16_to_fp32(kiln_fp32_to_fp16(y[i] * v));
}

/* fp16 rows (weights widened for the F16 matmul, K/V rows): the shorter
 * exact conversion (simd128_common.h) */
void f16_to_f32__wasm_simd128(int64_t n, const kiln_fp16_t * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v128_t lo, hi;
        kiln_simd128_load_f16x8_rows(x + i, &lo, &hi);
        wasm_v128_store(y + i, lo);
        wasm_v128_store(y + i + 4, hi);
    }
    for (; i < n; i++) y[i] = kiln_fp16_to_fp32(x[i]);
}

/* 3 src0 rows x 3 src1 rows: 9 accumulators + 6 row registers, under the
 * 16 xmm registers engines map v128 onto (one is their scratch). */
void f32_gemm_3x3__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    KILN_SIMD128_GEMM_3X3_BODY(MADD);
}

/* 2 src1 rows x 16 packed src0 columns ("load-splat" form): 8 accumulators,
 * 4 panel vectors and 2 splats per k, under the 16 registers engines map
 * v128 onto. It replaced a 4x8 tile with the same 8 accumulators and 6 loads
 * per k: 2 load-splats instead of 4 (V8 on x64: vbroadcastss, which also
 * takes an FP pipe on AMD) measured 1.07-1.14x faster in paired runs under
 * V8 (Node 20). Every output is the same sum in the same order as before,
 * so results did not change. */
void f32_gemm_2x16__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate) {
    KILN_SIMD128_GEMM_2X16_BODY(MADD);
}

/* The 16-row panel of f32_gemm_2x16: 4 rows x 4 k at a time through a 4x4
 * transpose in registers (4 loads, 8 shuffles, 4 stores per 16 floats),
 * about 5x fewer instructions than the element-wise copy, which cost ~10%
 * of a 1024^3 GEMM. A partial panel (nr < 16) and the k % 4 tail go
 * element by element. */
void f32_gemm_pack16__wasm_simd128(int64_t k, const float * a, int64_t lda, int nr, float * bp) {
    enum { NR = 16 };
    const int kk = (int) k;
    if (nr < NR) {
        for (int r = 0; r < NR; r++) {
            const float * src = a + r * lda;
            for (int q = 0; q < kk; q++) bp[q * NR + r] = r < nr ? src[q] : 0.0f;
        }
        return;
    }
    for (int r = 0; r < NR; r += 4) {
        const float * s0 = a + r * lda, * s1 = s0 + lda, * s2 = s1 + lda, * s3 = s2 + lda;
        float * d = bp + r;
        int q = 0;
        for (; q + 4 <= kk; q += 4) {
            const v128_t x0 = wasm_v128_load(s0 + q), x1 = wasm_v128_load(s1 + q);
            const v128_t x2 = wasm_v128_load(s2 + q), x3 = wasm_v128_load(s3 + q);
            const v128_t t0 = wasm_i32x4_shuffle(x0, x1, 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(x2, x3, 0, 4, 1, 5);
            const v128_t t2 = wasm_i32x4_shuffle(x0, x1, 2, 6, 3, 7), t3 = wasm_i32x4_shuffle(x2, x3, 2, 6, 3, 7);
            wasm_v128_store(d + (q + 0) * NR, wasm_i64x2_shuffle(t0, t1, 0, 2));
            wasm_v128_store(d + (q + 1) * NR, wasm_i64x2_shuffle(t0, t1, 1, 3));
            wasm_v128_store(d + (q + 2) * NR, wasm_i64x2_shuffle(t2, t3, 0, 2));
            wasm_v128_store(d + (q + 3) * NR, wasm_i64x2_shuffle(t2, t3, 1, 3));
        }
        for (; q < kk; q++) {
            d[q * NR + 0] = s0[q]; d[q * NR + 1] = s1[q]; d[q * NR + 2] = s2[q]; d[q * NR + 3] = s3[q];
        }
    }
}

/* llama.cpp's x86 orders (kernels.h: f32_gemm_tile8, f32_dot8,
 * f32_dot_ggml) without FMA: each lane's products round before the add */
void f32_gemm8_2x2__wasm_simd128(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    KILN_SIMD128_GEMM8_2X2_BODY(MADD);
}

float f32_dot8__wasm_simd128(int64_t n, const float * x, const float * y) {
    KILN_SIMD128_DOT8_BODY(MADD);
}

float f32_dot_ggml__wasm_simd128(int64_t n, const float * x, const float * y) {
    KILN_SIMD128_DOT_GGML_BODY(MADD);
}
