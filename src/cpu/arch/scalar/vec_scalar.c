/*
 * vec_scalar.c — the reference vector primitives. Reductions accumulate in
 * double so they are the accurate side of every SIMD comparison; this is
 * also the fallback on CPUs without a SIMD table.
 */
#include "../arch.h"

#include <math.h>

float f32_dot__scalar(int64_t n, const float * x, const float * y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double) x[i] * (double) y[i];
    return (float) s;
}

float f16_dot__scalar(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double) kiln_fp16_to_fp32(x[i]) * (double) kiln_fp16_to_fp32(y[i]);
    return (float) s;
}

float bf16_dot__scalar(int64_t n, const kiln_bf16_t * x, const kiln_bf16_t * y) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double) kiln_bf16_to_fp32(x[i]) * (double) kiln_bf16_to_fp32(y[i]);
    return (float) s;
}

double f32_softmax_exp__scalar(int64_t n, const float * x, float * y, float max) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float v = expf(x[i] - max);
        y[i] = v;
        s += v;
    }
    return s;
}

void f32_axpy__scalar(int64_t n, float a, const float * x, float * y) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

void f32_scale__scalar(int64_t n, float a, const float * x, float * y) {
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i];
}

void f32_add__scalar(int64_t n, const float * x, const float * y, float * z) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] + y[i];
}

void f32_mul__scalar(int64_t n, const float * x, const float * y, float * z) {
    for (int64_t i = 0; i < n; i++) z[i] = x[i] * y[i];
}

void f32_exp__scalar(int64_t n, const float * x, float * y) {
    for (int64_t i = 0; i < n; i++) y[i] = expf(x[i]);
}

void f32_silu__scalar(int64_t n, const float * x, float * y) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* ggml's tanh approximation, written as 0.5 x (1 + tanh(u)) == x / (1 +
 * exp(-2u)): the same function without the cancellation of 1 + tanh(u)
 * for negative x (the tanhf form loses most digits below x = -3). */
void f32_gelu__scalar(int64_t n, const float * x, float * y) {
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        const float u = KILN_SQRT_2_OVER_PI * v * (1.0f + KILN_GELU_COEF_A * v * v);
        y[i] = v / (1.0f + expf(-2.0f * u));
    }
}

void f32_to_f16__scalar(int64_t n, const float * x, kiln_fp16_t * y) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp32_to_fp16(x[i]);
}

void f16_to_f32__scalar(int64_t n, const kiln_fp16_t * x, float * y) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp16_to_fp32(x[i]);
}

void f32_gemm_1x1__scalar(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    (void) lda; (void) ldb; (void) ldc;
    c[0] = f32_dot__scalar(k, a, b);
}

/* reference of the panel packing contract (kernels.h), NR = 4 */
void f32_gemm_pack4__scalar(int64_t k, const float * a, int64_t lda, int nr, float * bp) {
    for (int r = 0; r < 4; r++) {
        const float * src = a + r * lda;
        for (int64_t q = 0; q < k; q++) bp[q * 4 + r] = r < nr ? src[q] : 0.0f;
    }
}

/* reference of the packed microkernel contract (kernels.h), 4 x 4 */
void f32_gemm_4x4__scalar(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate) {
    float acc[4][4] = { { 0 } };
    for (int64_t p = 0; p < k; p++) {
        for (int j = 0; j < 4; j++) {
            const float x = a[j * lda + p];
            for (int i = 0; i < 4; i++) acc[j][i] += x * bp[p * 4 + i];
        }
    }
    for (int j = 0; j < 4; j++) {
        for (int i = 0; i < 4; i++) c[j * ldc + i] = accumulate ? c[j * ldc + i] + acc[j][i] : acc[j][i];
    }
}

void f16_mad__scalar(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp32_to_fp16(fmaf(kiln_fp16_to_fp32(x[i]), v, kiln_fp16_to_fp32(y[i])));
}

void f16_scale__scalar(int64_t n, kiln_fp16_t * y, float v) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp32_to_fp16(kiln_fp16_to_fp32(y[i]) * v);
}
