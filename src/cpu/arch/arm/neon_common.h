/*
 * neon_common.h — what the NEON kernel files share: the name suffix of
 * their SDOT rebuilds (KILN_NEON_DOTPROD, ..._neon_dotprod) and the
 * 16-byte integer dot whose i32 lanes every plain, x4 and batched NEON
 * kernel sums the same way, and the x8 kernels' scale products.
 */
#ifndef KILN_NEON_COMMON_H
#define KILN_NEON_COMMON_H

#include <arm_neon.h>

#ifdef KILN_NEON_DOTPROD
#define NEON_SFX(name) name##__neon_dotprod
#else
#define NEON_SFX(name) name##__neon
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

/* 4 fp16 values (raw bits; exact f16 -> f32) times f: the x8 K-quant
 * kernels' d * d_y and dmin * d_y of 4 rows */
ALWAYS_INLINE float32x4_t f16x4_mul(const uint16_t * p, float32x4_t f) {
    return vmulq_f32(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))), f);
}

/* acc += sums of a[i] * b[i] over 16 signed bytes (spread over the lanes):
 * one SDOT, or widening products added pairwise (the same lane sums) */
ALWAYS_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#ifdef KILN_NEON_DOTPROD
    return vdotq_s32(acc, a, b);
#else
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_s8(vget_high_s8(a), vget_high_s8(b)));
#endif
}

#endif
