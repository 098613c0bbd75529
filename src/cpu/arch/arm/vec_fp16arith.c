/*
 * vec_fp16arith.c — the fp16 kernels of llama.cpp's arm64 build where the
 * CPU has fp16 vector arithmetic (and dotprod, no SVE: ggml's armv8.2_2
 * variant, what it loads on Neoverse N1 / Cortex-A76 class CPUs). There
 * ggml's F16 dot product and the F16 accumulator updates of flash attention
 * compute in fp16 itself (GGML_F16x8: 8 fp16 lanes, fused multiply-adds
 * rounded to fp16), not widened to f32 as elsewhere, so the results differ
 * from vec_neon.c's by fp16 roundings. Built with -march=armv8.2-a+fp16;
 * the table takes these only where kiln_cpu_arm_f16_arith() (kernels.c).
 */
#include "../arch.h"

#include <arm_neon.h>
#include <math.h>

static inline float16x8_t ld8(const kiln_fp16_t * p) { return vreinterpretq_f16_u16(vld1q_u16(p)); }
static inline void st8(kiln_fp16_t * p, float16x8_t v) { vst1q_u16(p, vreinterpretq_u16_f16(v)); }

/* ggml_vec_dot_f16: 4 fp16 accumulators over steps of 32, reduced in fp16
 * (0 + 2, 1 + 3, then their sum), widened, halves added, across lanes; the
 * last n % 32 products (float) summed in double */
float f16_dot__neon_fp16(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
    float16x8_t s0 = vdupq_n_f16(0), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = vfmaq_f16(s0, ld8(x + i),      ld8(y + i));
        s1 = vfmaq_f16(s1, ld8(x + i + 8),  ld8(y + i + 8));
        s2 = vfmaq_f16(s2, ld8(x + i + 16), ld8(y + i + 16));
        s3 = vfmaq_f16(s3, ld8(x + i + 24), ld8(y + i + 24));
    }
    const float16x8_t s = vaddq_f16(vaddq_f16(s0, s2), vaddq_f16(s1, s3));
    double sum = vaddvq_f32(vaddq_f32(vcvt_f32_f16(vget_low_f16(s)), vcvt_f32_f16(vget_high_f16(s))));
    for (; i < n; i++) sum += (double) (kiln_fp16_to_fp32(x[i]) * kiln_fp16_to_fp32(y[i]));
    return (float) sum;
}

/* ggml_vec_mad_f16: y += x * v with v rounded to fp16, one fp16 rounding
 * per fused step, over whole steps of 32; the rest in f32 (fused, then
 * rounded to fp16) */
void f16_mad__neon_fp16(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    const float16x8_t vv = vdupq_n_f16((float16_t) v);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int j = 0; j < 32; j += 8) st8(y + i + j, vfmaq_f16(ld8(y + i + j), ld8(x + i + j), vv));
    }
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(fmaf(kiln_fp16_to_fp32(x[i]), v, kiln_fp16_to_fp32(y[i])));
}

/* ggml_vec_scale_f16: y *= v with v rounded to fp16, in fp16, over whole
 * steps of 32; the rest in f32 */
void f16_scale__neon_fp16(int64_t n, kiln_fp16_t * y, float v) {
    const float16x8_t vv = vdupq_n_f16((float16_t) v);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int j = 0; j < 32; j += 8) st8(y + i + j, vmulq_f16(ld8(y + i + j), vv));
    }
    for (; i < n; i++) y[i] = kiln_fp32_to_fp16(kiln_fp16_to_fp32(y[i]) * v);
}
