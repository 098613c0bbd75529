/*
 * vec_neon.c — vector primitives for arm64 NEON (baseline AArch64: always
 * present, so no runtime check beyond the architecture).
 */
#include "../arch.h"
#include "../gemm_fma_block.h"

#include <arm_neon.h>
#include <math.h>

/* exp(x) for 4 lanes with the arithmetic of llama.cpp's arm64 build
 * (ggml's NEON vector expf, after Arm's optimized-routines expf), so silu
 * and softmax match it bit for bit (scripts/test-arm-oracle.sh): n =
 * round(x / ln2) by the 1.5 * 2^23 trick, b = x - n ln2 in two parts, e^b
 * by a degree-5 polynomial, times 2^n from n's bits; |n| > 126 splits the
 * scale in two factors, |n| > 192 saturates to 0 or inf. The same steps as
 * vec_avx2.c's exp8 (ggml's AVX2 one), fused the same way. */
static inline float32x4_t exp4(float32x4_t x) {
    const float32x4_t shift = vdupq_n_f32(0x1.8p23f);
    const float32x4_t z = vfmaq_f32(shift, x, vdupq_n_f32(0x1.715476p+0f));
    const float32x4_t n = vsubq_f32(z, shift);
    const float32x4_t b = vfmsq_f32(vfmsq_f32(x, n, vdupq_n_f32(0x1.62e4p-1f)), n, vdupq_n_f32(0x1.7f7d1cp-20f));
    const uint32x4_t e = vshlq_n_u32(vreinterpretq_u32_f32(z), 23);
    const float32x4_t k = vreinterpretq_f32_u32(vaddq_u32(e, vreinterpretq_u32_f32(vdupq_n_f32(1.0f))));
    const uint32x4_t big = vcagtq_f32(n, vdupq_n_f32(126.0f));
    const float32x4_t u = vmulq_f32(b, b);
    const float32x4_t j = vfmaq_f32(vmulq_f32(vdupq_n_f32(0x1.ffffecp-1f), b),
                                    vfmaq_f32(vfmaq_f32(vdupq_n_f32(0x1.fffdb6p-2f), vdupq_n_f32(0x1.555e66p-3f), b),
                                              vfmaq_f32(vdupq_n_f32(0x1.573e2ep-5f), vdupq_n_f32(0x1.0e4020p-7f), b), u),
                                    u);
    if (vmaxvq_u32(big) == 0) return vfmaq_f32(k, j, k);
    /* 2^n = s1 * s2 with s1 = 2^127 or 2^-125 (by the sign of n) */
    const uint32x4_t g = vandq_u32(vclezq_f32(n), vdupq_n_u32(0x82000000u));
    const float32x4_t s1 = vreinterpretq_f32_u32(vaddq_u32(g, vdupq_n_u32(0x7f000000u)));
    const float32x4_t s2 = vreinterpretq_f32_u32(vsubq_u32(e, g));
    return vbslq_f32(vcagtq_f32(n, vdupq_n_f32(192.0f)), vmulq_f32(s1, s1),
                     vbslq_f32(big, vmulq_f32(vfmaq_f32(s2, s2, j), s1), vfmaq_f32(k, k, j)));
}

/* The reduction of llama.cpp's arm64 dot products (GGML_F32x4_REDUCE over
 * 4 accumulators): 0 + 2 and 1 + 3, then their sum, then across lanes. */
static inline float reduce4(float32x4_t a0, float32x4_t a1, float32x4_t a2, float32x4_t a3) {
    return vaddvq_f32(vaddq_f32(vaddq_f32(a0, a2), vaddq_f32(a1, a3)));
}

/* llama.cpp's order (ggml_vec_dot_f32 on arm64 NEON): 4 accumulators over
 * steps of 16, reduced, then the last n % 16 products one by one into the
 * float sum as its binary's `sum += x * y` loop does: where 8 or more are
 * left, 8 products rounded and added in order (that loop vectorized), the
 * rest fused */
float f32_dot__neon(int64_t n, const float * x, const float * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, vld1q_f32(x + i),      vld1q_f32(y + i));
        a1 = vfmaq_f32(a1, vld1q_f32(x + i + 4),  vld1q_f32(y + i + 4));
        a2 = vfmaq_f32(a2, vld1q_f32(x + i + 8),  vld1q_f32(y + i + 8));
        a3 = vfmaq_f32(a3, vld1q_f32(x + i + 12), vld1q_f32(y + i + 12));
    }
    float s = reduce4(a0, a1, a2, a3);
    if (n - i >= 8) {
        const float32x4_t p0 = vmulq_f32(vld1q_f32(x + i), vld1q_f32(y + i));
        const float32x4_t p1 = vmulq_f32(vld1q_f32(x + i + 4), vld1q_f32(y + i + 4));
        s += vgetq_lane_f32(p0, 0); s += vgetq_lane_f32(p0, 1); s += vgetq_lane_f32(p0, 2); s += vgetq_lane_f32(p0, 3);
        s += vgetq_lane_f32(p1, 0); s += vgetq_lane_f32(p1, 1); s += vgetq_lane_f32(p1, 2); s += vgetq_lane_f32(p1, 3);
        i += 8;
    }
    for (; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* llamafile's tinyBLAS<4> on NEON, one output: a 4-lane accumulator of
 * fused multiply-adds over steps of 4 (n a multiple of 4), then the
 * pairwise lane sum (vaddvq_f32) */
float f32_dot4__neon(int64_t n, const float * x, const float * y) {
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i + 4 <= n; i += 4) acc = vfmaq_f32(acc, vld1q_f32(x + i), vld1q_f32(y + i));
    return vaddvq_f32(acc);
}

static inline float32x4_t load_f16x4(const kiln_fp16_t * p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}
static inline float32x4_t load_bf16x4(const kiln_bf16_t * p) {
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *) p), 16));
}

/* llama.cpp's order (ggml_vec_dot_f16 on arm64 without FP16 vector
 * arithmetic: its fp16 values widened to f32): 4 accumulators over steps of
 * 16, reduced as f32_dot's; the sum then in double, with each of the last
 * n % 16 products (rounded to float) added in double */
float f16_dot__neon(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_f16x4(x + i),      load_f16x4(y + i));
        a1 = vfmaq_f32(a1, load_f16x4(x + i + 4),  load_f16x4(y + i + 4));
        a2 = vfmaq_f32(a2, load_f16x4(x + i + 8),  load_f16x4(y + i + 8));
        a3 = vfmaq_f32(a3, load_f16x4(x + i + 12), load_f16x4(y + i + 12));
    }
    double s = reduce4(a0, a1, a2, a3);
    for (; i < n; i++) s += (double) (kiln_fp16_to_fp32(x[i]) * kiln_fp16_to_fp32(y[i]));
    return (float) s;
}

float bf16_dot__neon(int64_t n, const kiln_bf16_t * x, const kiln_bf16_t * y) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0), a2 = vdupq_n_f32(0), a3 = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = vfmaq_f32(a0, load_bf16x4(x + i),      load_bf16x4(y + i));
        a1 = vfmaq_f32(a1, load_bf16x4(x + i + 4),  load_bf16x4(y + i + 4));
        a2 = vfmaq_f32(a2, load_bf16x4(x + i + 8),  load_bf16x4(y + i + 8));
        a3 = vfmaq_f32(a3, load_bf16x4(x + i + 12), load_bf16x4(y + i + 12));
    }
    for (; i + 4 <= n; i += 4) a0 = vfmaq_f32(a0, load_bf16x4(x + i), load_bf16x4(y + i));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(a0, a1), vaddq_f32(a2, a3)));
    for (; i < n; i++) s += kiln_bf16_to_fp32(x[i]) * kiln_bf16_to_fp32(y[i]);
    return s;
}

double f32_softmax_exp__neon(int64_t n, const float * x, float * y, float max) {
    /* each vector's sum into a double, as llama.cpp */
    const float32x4_t vmax = vdupq_n_f32(max);
    double s = 0;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = exp4(vsubq_f32(vld1q_f32(x + i), vmax));
        vst1q_f32(y + i, v);
        s += vaddvq_f32(v);
    }
    for (; i < n; i++) { const float v = expf(x[i] - max); y[i] = v; s += v; }
    return s;
}

void f32_axpy__neon(int64_t n, float a, const float * x, float * y) {
    const float32x4_t va = vdupq_n_f32(a);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vfmaq_f32(vld1q_f32(y + i), va, vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

/* C[m x n] += A[m x k] B[k x n] (kernels.h f32_gemm_fma): each C value the
 * chain c = fma(a, b, c) in k order, as f32_axpy__neon's, so the bits are
 * f32_axpy rows'; blocks of 4 rows x 16 columns keep their sums in
 * registers across k, then 4 columns at a time, then one by one. */
#define FMA_NEON(a, b, c) vfmaq_f32(c, a, b)
#define GEMM_FMA_BLOCK(R, V) KILN_GEMM_FMA_BLOCK(float32x4_t, 4, vld1q_f32, vst1q_f32, vdupq_n_f32, FMA_NEON, R, V)

static void gemm_fma_cols(int i, int r_end, int j, int k, int n, float * C, const float * A, const float * B) {
    for (; i < r_end; i++)
        for (int q = 0; q < k; q++) C[i * n + j] = fmaf(A[i * k + q], B[q * n + j], C[i * n + j]);
}

void f32_gemm_fma__neon(int m, int k, int n, float * C, const float * A, const float * B) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        int j = 0;
        for (; j + 16 <= n; j += 16) GEMM_FMA_BLOCK(4, 4);
        for (; j + 4 <= n; j += 4) GEMM_FMA_BLOCK(4, 1);
        for (; j < n; j++) gemm_fma_cols(i, i + 4, j, k, n, C, A, B);
    }
    for (; i < m; i++) {
        int j = 0;
        for (; j + 16 <= n; j += 16) GEMM_FMA_BLOCK(1, 4);
        for (; j + 4 <= n; j += 4) GEMM_FMA_BLOCK(1, 1);
        for (; j < n; j++) gemm_fma_cols(i, i + 1, j, k, n, C, A, B);
    }
}
#undef GEMM_FMA_BLOCK
#undef FMA_NEON

void f32_scale__neon(int64_t n, float a, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vmulq_n_f32(vld1q_f32(x + i), a));
    for (; i < n; i++) y[i] = a * x[i];
}

void f32_add__neon(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(z + i, vaddq_f32(vld1q_f32(x + i), vld1q_f32(y + i)));
    for (; i < n; i++) z[i] = x[i] + y[i];
}

void f32_mul__neon(int64_t n, const float * x, const float * y, float * z) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(z + i, vmulq_f32(vld1q_f32(x + i), vld1q_f32(y + i)));
    for (; i < n; i++) z[i] = x[i] * y[i];
}

#define MAP_TAIL(n, i, x, y, EXPR) \
    if (i < n) { \
        float bx[4] = {0}, by[4]; \
        for (int64_t j = i; j < n; j++) bx[j - i] = x[j]; \
        const float32x4_t v = vld1q_f32(bx); \
        vst1q_f32(by, EXPR); \
        for (int64_t j = i; j < n; j++) y[j] = by[j - i]; \
    }

void f32_exp__neon(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, exp4(vld1q_f32(x + i)));
    MAP_TAIL(n, i, x, y, exp4(v))
}

static inline float32x4_t silu4(float32x4_t v) {
    return vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), exp4(vsubq_f32(vdupq_n_f32(0.0f), v))));
}

/* as llama.cpp: vectors of 4, then the scalar formula with expf */
void f32_silu__neon(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, silu4(vld1q_f32(x + i)));
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

static inline float32x4_t gelu4(float32x4_t v) {
    const float32x4_t v2 = vmulq_f32(v, v);
    const float32x4_t u = vmulq_f32(vmulq_n_f32(v, -2.0f * KILN_SQRT_2_OVER_PI),
                                    vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(KILN_GELU_COEF_A), v2));
    return vdivq_f32(v, vaddq_f32(vdupq_n_f32(1.0f), exp4(u)));
}

void f32_gelu__neon(int64_t n, const float * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, gelu4(vld1q_f32(x + i)));
    MAP_TAIL(n, i, x, y, gelu4(v))
}

void f32_to_f16__neon(int64_t n, const float * x, kiln_fp16_t * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + i))));
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(x[i]);
}

void f16_to_f32__neon(int64_t n, const kiln_fp16_t * x, float * y) {
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, load_f16x4(x + i));
    for (; i < n; i++) y[i] = kiln_fp16_to_fp32(x[i]);
}

/* 4 src0 rows x 4 src1 rows: 16 accumulators + 8 row registers of 32 */
void f32_gemm_4x4__neon(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    float32x4_t acc[4][4];
    for (int j = 0; j < 4; j++) for (int i = 0; i < 4; i++) acc[j][i] = vdupq_n_f32(0);
    int64_t p = 0;
    for (; p + 4 <= k; p += 4) {
        float32x4_t x[4], y[4];
        for (int i = 0; i < 4; i++) x[i] = vld1q_f32(a + i * lda + p);
        for (int j = 0; j < 4; j++) y[j] = vld1q_f32(b + j * ldb + p);
        for (int j = 0; j < 4; j++) for (int i = 0; i < 4; i++) acc[j][i] = vfmaq_f32(acc[j][i], x[i], y[j]);
    }
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < 4; i++) {
            float s = vaddvq_f32(acc[j][i]);
            for (int64_t q = p; q < k; q++) s += a[i * lda + q] * b[j * ldb + q];
            c[j * ldc + i] = s;
        }
    }
}
