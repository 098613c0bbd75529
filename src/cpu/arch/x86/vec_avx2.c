/*
 * vec_avx2.c — vector primitives for x86-64 with AVX2 + FMA + F16C.
 * Compiled with -mavx2 -mfma -mf16c (this file only); the kernel table
 * calls it only after cpuid says the CPU has all three.
 */
#include "../arch.h"
#include "../gemm_fma_block.h"

#include <immintrin.h>
#include <math.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* exp(x) for 8 lanes, with the arithmetic of llama.cpp's AVX2 build
 * (ggml's vector expf, after Arm's optimized-routines expf: ~1.5 ulp), so
 * silu and softmax match it bit for bit (scripts/ggml-op-compare).
 * n = round(x / ln2) by the 1.5 * 2^23 trick, b = x - n ln2 in two parts,
 * e^b by a degree-5 polynomial, times 2^n from n's bits; |n| > 126 needs
 * the scale split in two factors, |n| > 192 saturates to 0 or inf. */
static inline __m256 exp8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256i e = _mm256_slli_epi32(_mm256_castps_si256(z), 23);
    const __m256 k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_set1_epi32(0x3f800000)));
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(126.0f), _CMP_GT_OQ);
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 hi = _mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f));
    const __m256 lo = _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f));
    const __m256 j = _mm256_fmadd_ps(_mm256_fmadd_ps(hi, u, lo), u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256 normal = _mm256_fmadd_ps(j, k, k);
    if (!_mm256_movemask_ps(big)) return normal;
    /* 2^n = s1 * s2 with s1 = 2^127 or 2^-125 (by the sign of n) */
    const __m256i g = _mm256_and_si256(_mm256_castps_si256(_mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)),
                                       _mm256_set1_epi32((int) 0x82000000u));
    const __m256 s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f000000)));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    const __m256 huge = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 scaled = _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1);
    return _mm256_blendv_ps(_mm256_blendv_ps(normal, scaled, big), _mm256_mul_ps(s1, s1), huge);
}

/* masked tail: lanes [0, n) of p, zeros elsewhere */
static inline __m256i tail_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int) n), idx);
}

/* The reduction of llama.cpp's AVX2 dot products: accumulators 0+2 and
 * 1+3, then their sum, halves, and two horizontal adds. */
static inline float reduce4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    return _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
}

/* llama.cpp's order (ggml_vec_dot_f32 on AVX2): 4 accumulators over steps
 * of 32, reduced, then the last n % 32 products as its compiler vectorized
 * that loop (llama.cpp's libggml-cpu-haswell.so): groups of 4 products
 * rounded, then added one by one; the last n % 4 fused */
float f32_dot__avx2(int64_t n, const float * x, const float * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i),      _mm256_loadu_ps(y + i),      a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8),  _mm256_loadu_ps(y + i + 8),  a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    float s = reduce4(a0, a1, a2, a3);
    for (; i + 4 <= n; i += 4) {
        const float p0 = x[i] * y[i], p1 = x[i + 1] * y[i + 1], p2 = x[i + 2] * y[i + 2], p3 = x[i + 3] * y[i + 3];
        s += p0; s += p1; s += p2; s += p3;
    }
    for (; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* one product in tinyBLAS's order (kernels.h f32_dot8; n % 8 == 0): what
 * f32_gemm_3x4__avx2 computes per output, for the tile's edges */
float f32_dot8__avx2(int64_t n, const float * x, const float * y) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t i = 0; i + 8 <= n; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a);
    return hsum8(a);
}

static inline __m256 load_f16x8(const kiln_fp16_t * p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) p));
}
static inline __m256 load_bf16x8(const kiln_bf16_t * p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

/* llama.cpp's order (ggml_vec_dot_f16 on AVX2), as f32_dot__avx2 */
float f16_dot__avx2(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_f16x8(x + i),      load_f16x8(y + i),      a0);
        a1 = _mm256_fmadd_ps(load_f16x8(x + i + 8),  load_f16x8(y + i + 8),  a1);
        a2 = _mm256_fmadd_ps(load_f16x8(x + i + 16), load_f16x8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_f16x8(x + i + 24), load_f16x8(y + i + 24), a3);
    }
    double s = reduce4(a0, a1, a2, a3);
    for (; i < n; i++) s += kiln_fp16_to_fp32(x[i]) * kiln_fp16_to_fp32(y[i]);
    return (float) s;
}

float bf16_dot__avx2(int64_t n, const kiln_bf16_t * x, const kiln_bf16_t * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load_bf16x8(x + i),      load_bf16x8(y + i),      a0);
        a1 = _mm256_fmadd_ps(load_bf16x8(x + i + 8),  load_bf16x8(y + i + 8),  a1);
        a2 = _mm256_fmadd_ps(load_bf16x8(x + i + 16), load_bf16x8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load_bf16x8(x + i + 24), load_bf16x8(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load_bf16x8(x + i), load_bf16x8(y + i), a0);
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; i++) s += kiln_bf16_to_fp32(x[i]) * kiln_bf16_to_fp32(y[i]);
    return s;
}

/* llama.cpp's order (ggml_vec_soft_max_f32 on AVX2): each vector of
 * exponentials summed horizontally into a double, the tail by expf */
double f32_softmax_exp__avx2(int64_t n, const float * x, float * y, float max) {
    const __m256 vmax = _mm256_set1_ps(max);
    double s = 0;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmax));
        _mm256_storeu_ps(y + i, v);
        s += hsum8(v);
    }
    for (; i < n; i++) { const float v = expf(x[i] - max); y[i] = v; s += v; }
    return s;
}

void f32_axpy__avx2(int64_t n, float a, const float * x, float * y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void f32_scale__avx2(int64_t n, float a, const float * x, float * y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = a * x[i];
}

void f32_add__avx2(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(z + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) z[i] = x[i] + y[i];
}

void f32_mul__avx2(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(z + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) z[i] = x[i] * y[i];
}

/* The tails of the transcendental maps go through one padded vector so
 * every element gets the same formula, whatever its position. */
#define MAP_TAIL(n, i, x, y, EXPR) \
    if (i < n) { \
        float bx[8] = {0}, by[8]; \
        for (int64_t j = i; j < n; j++) bx[j - i] = x[j]; \
        const __m256 v = _mm256_loadu_ps(bx); \
        _mm256_storeu_ps(by, EXPR); \
        for (int64_t j = i; j < n; j++) y[j] = by[j - i]; \
    }

void f32_exp__avx2(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, exp8(_mm256_loadu_ps(x + i)));
    MAP_TAIL(n, i, x, y, exp8(v))
}

static inline __m256 silu8(__m256 v) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), v));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* as llama.cpp: vectors of 8, then the scalar formula with expf */
void f32_silu__avx2(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, silu8(_mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* 0.5 x (1 + tanh(u)) == x / (1 + exp(-2u)): no cancellation near u = 0 */
static inline __m256 gelu8(__m256 v) {
    const __m256 v2 = _mm256_mul_ps(v, v);
    const __m256 u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-2.0f * KILN_SQRT_2_OVER_PI), v),
                                   _mm256_fmadd_ps(_mm256_set1_ps(KILN_GELU_COEF_A), v2, _mm256_set1_ps(1.0f)));
    return _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(u)));
}

void f32_gelu__avx2(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
    MAP_TAIL(n, i, x, y, gelu8(v))
}

void f32_to_f16__avx2(int64_t n, const float * x, kiln_fp16_t * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(x[i]);
}

void f16_to_f32__avx2(int64_t n, const kiln_fp16_t * x, float * y) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, load_f16x8(x + i));
    for (; i < n; i++) y[i] = kiln_fp16_to_fp32(x[i]);
}

/* 3 src0 rows x 4 src1 rows: 12 accumulators + 3 row loads + 1 = all 16 ymm.
 * Each accumulator is a plain dot product over k, reduced at the end. */
void f32_gemm_3x4__avx2(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c02 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps(), c12 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c22 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps(), c32 = _mm256_setzero_ps();
    const float * a0 = a, * a1 = a + lda, * a2 = a + 2 * lda;
    const float * b0 = b, * b1 = b + ldb, * b2 = b + 2 * ldb, * b3 = b + 3 * ldb;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        const __m256 x0 = _mm256_loadu_ps(a0 + i), x1 = _mm256_loadu_ps(a1 + i), x2 = _mm256_loadu_ps(a2 + i);
        __m256 y = _mm256_loadu_ps(b0 + i);
        c00 = _mm256_fmadd_ps(x0, y, c00); c01 = _mm256_fmadd_ps(x1, y, c01); c02 = _mm256_fmadd_ps(x2, y, c02);
        y = _mm256_loadu_ps(b1 + i);
        c10 = _mm256_fmadd_ps(x0, y, c10); c11 = _mm256_fmadd_ps(x1, y, c11); c12 = _mm256_fmadd_ps(x2, y, c12);
        y = _mm256_loadu_ps(b2 + i);
        c20 = _mm256_fmadd_ps(x0, y, c20); c21 = _mm256_fmadd_ps(x1, y, c21); c22 = _mm256_fmadd_ps(x2, y, c22);
        y = _mm256_loadu_ps(b3 + i);
        c30 = _mm256_fmadd_ps(x0, y, c30); c31 = _mm256_fmadd_ps(x1, y, c31); c32 = _mm256_fmadd_ps(x2, y, c32);
    }
    if (i < k) {
        const __m256i m = tail_mask(k - i);
        const __m256 x0 = _mm256_maskload_ps(a0 + i, m), x1 = _mm256_maskload_ps(a1 + i, m), x2 = _mm256_maskload_ps(a2 + i, m);
        __m256 y = _mm256_maskload_ps(b0 + i, m);
        c00 = _mm256_fmadd_ps(x0, y, c00); c01 = _mm256_fmadd_ps(x1, y, c01); c02 = _mm256_fmadd_ps(x2, y, c02);
        y = _mm256_maskload_ps(b1 + i, m);
        c10 = _mm256_fmadd_ps(x0, y, c10); c11 = _mm256_fmadd_ps(x1, y, c11); c12 = _mm256_fmadd_ps(x2, y, c12);
        y = _mm256_maskload_ps(b2 + i, m);
        c20 = _mm256_fmadd_ps(x0, y, c20); c21 = _mm256_fmadd_ps(x1, y, c21); c22 = _mm256_fmadd_ps(x2, y, c22);
        y = _mm256_maskload_ps(b3 + i, m);
        c30 = _mm256_fmadd_ps(x0, y, c30); c31 = _mm256_fmadd_ps(x1, y, c31); c32 = _mm256_fmadd_ps(x2, y, c32);
    }
    c[0] = hsum8(c00); c[1] = hsum8(c01); c[2] = hsum8(c02);
    c += ldc; c[0] = hsum8(c10); c[1] = hsum8(c11); c[2] = hsum8(c12);
    c += ldc; c[0] = hsum8(c20); c[1] = hsum8(c21); c[2] = hsum8(c22);
    c += ldc; c[0] = hsum8(c30); c[1] = hsum8(c31); c[2] = hsum8(c32);
}

/* 6 src1 rows x 16 packed src0 columns: 12 accumulators, 2 panel loads and
 * one broadcast per row and k (15 of 16 ymm). */
void f32_gemm_6x16__avx2(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps(), c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps(), c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps(), c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    const float * a0 = a, * a1 = a + lda, * a2 = a + 2 * lda, * a3 = a + 3 * lda, * a4 = a + 4 * lda, * a5 = a + 5 * lda;
    for (int64_t p = 0; p < k; p++) {
        const __m256 y0 = _mm256_loadu_ps(bp + 16 * p), y1 = _mm256_loadu_ps(bp + 16 * p + 8);
        __m256 x = _mm256_broadcast_ss(a0 + p);
        c00 = _mm256_fmadd_ps(x, y0, c00); c01 = _mm256_fmadd_ps(x, y1, c01);
        x = _mm256_broadcast_ss(a1 + p);
        c10 = _mm256_fmadd_ps(x, y0, c10); c11 = _mm256_fmadd_ps(x, y1, c11);
        x = _mm256_broadcast_ss(a2 + p);
        c20 = _mm256_fmadd_ps(x, y0, c20); c21 = _mm256_fmadd_ps(x, y1, c21);
        x = _mm256_broadcast_ss(a3 + p);
        c30 = _mm256_fmadd_ps(x, y0, c30); c31 = _mm256_fmadd_ps(x, y1, c31);
        x = _mm256_broadcast_ss(a4 + p);
        c40 = _mm256_fmadd_ps(x, y0, c40); c41 = _mm256_fmadd_ps(x, y1, c41);
        x = _mm256_broadcast_ss(a5 + p);
        c50 = _mm256_fmadd_ps(x, y0, c50); c51 = _mm256_fmadd_ps(x, y1, c51);
    }
    const __m256 r[6][2] = { { c00, c01 }, { c10, c11 }, { c20, c21 }, { c30, c31 }, { c40, c41 }, { c50, c51 } };
    for (int j = 0; j < 6; j++) {
        float * cj = c + j * ldc;
        if (accumulate) {
            _mm256_storeu_ps(cj,     _mm256_add_ps(_mm256_loadu_ps(cj),     r[j][0]));
            _mm256_storeu_ps(cj + 8, _mm256_add_ps(_mm256_loadu_ps(cj + 8), r[j][1]));
        } else {
            _mm256_storeu_ps(cj, r[j][0]);
            _mm256_storeu_ps(cj + 8, r[j][1]);
        }
    }
}

/* F16C converts both ways exactly / with round-to-nearest-even, and the
 * FMA rounds once: bit-identical to the scalar kernels */
void f16_mad__avx2(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    const __m256 vv = _mm256_set1_ps(v);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 r = _mm256_fmadd_ps(load_f16x8(x + i), vv, load_f16x8(y + i));
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(fmaf(kiln_fp16_to_fp32(x[i]), v, kiln_fp16_to_fp32(y[i])));
}

void f16_scale__avx2(int64_t n, kiln_fp16_t * y, float v) {
    const __m256 vv = _mm256_set1_ps(v);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 r = _mm256_mul_ps(load_f16x8(y + i), vv);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(kiln_fp16_to_fp32(y[i]) * v);
}

/* C[m x n] += A[m x k] B[k x n], n % 8 == 0: register blocks of 4 rows x 16
 * columns (then 4 x 8, then single rows), each C value one fmadd chain in k
 * order, so the blocking does not change a bit (kernels.h) */
#define GEMM_BLOCK(R, V) KILN_GEMM_FMA_BLOCK(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, R, V)

void f32_gemm_fma__avx2(int m, int k, int n, float * C, const float * A, const float * B) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        int j = 0;
        for (; j + 16 <= n; j += 16) GEMM_BLOCK(4, 2);
        for (; j + 8 <= n; j += 8) GEMM_BLOCK(4, 1);
    }
    for (; i < m; i++) {
        int j = 0;
        for (; j + 16 <= n; j += 16) GEMM_BLOCK(1, 2);
        for (; j + 8 <= n; j += 8) GEMM_BLOCK(1, 1);
    }
}
#undef GEMM_BLOCK
