/*
 * quant_dot_neon.c — arm64 NEON quantized dot products (baseline ARMv8-A,
 * no dotprod: i8 x i8 products widen to i16 with vmull_s8 and pairwise-add
 * into i32 with vpadalq_s16). Quants are first turned into signed bytes;
 * each (sub-)block's integer sum then meets its scale once.
 *
 * quant_dot_dotprod.c compiles this same file again with KILN_NEON_DOTPROD
 * (ARMv8.2 SDOT: 16 i8 products into 4 i32 lanes in one instruction) under
 * the suffix neon_dotprod; the kernel table picks it when the CPU has it.
 */
#include <arm_neon.h>
#include <math.h>
#include <string.h>

/* the hardware fp16 -> fp32 conversion (exact) */
static inline float neon_h2f(uint16_t h) { __fp16 v; memcpy(&v, &h, 2); return (float) v; }
#define KQ_H2F(h) neon_h2f(h)
#include "../quant_dot.h"
#include "blocks.h"
#include "quants_impl.h"
#include "neon_common.h"

static inline int dot16_sum(int8x16_t a, int8x16_t b) {
    return vaddvq_s32(dot16(vdupq_n_s32(0), a, b));
}

/* 32 bits -> two 16-byte masks (0xff where the bit is set) */
static inline void bits_32(const uint8_t * p, uint8x16_t * lo, uint8x16_t * hi) {
    static const uint8_t sel_lo[16] = {0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1};
    static const uint8_t sel_hi[16] = {2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3};
    static const uint8_t bit[16] = {1,2,4,8,16,32,64,128,1,2,4,8,16,32,64,128};
    uint32_t u;
    memcpy(&u, p, 4);
    const uint8x16_t b = vreinterpretq_u8_u32(vdupq_n_u32(u));
    const uint8x16_t m = vld1q_u8(bit);
    *lo = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(sel_lo)), m);
    *hi = vtstq_u8(vqtbl1q_u8(b, vld1q_u8(sel_hi)), m);
}

/* ---- 32-element blocks -------------------------------------------------- */

/* Each kernel computes llama.cpp's arm64 arithmetic (ggml_vec_dot_*_q8_0 /
 * _q8_1 on NEON, the compiler's contractions included): the i32 lanes of
 * the block's two 16-byte dots (the same lanes with or without SDOT), then
 * blocks in pairs: the even block's lanes into one f32x4 accumulator and
 * the odd block's into another, acc = fma(f32(lanes), dx * dy, acc); the
 * two reduced across lanes (pairwise) and added. A last unpaired block
 * (n / 32 odd) is added as a scalar, in the form each type's tail has. */

ALWAYS_INLINE float32x4_t blk_fma(float32x4_t acc, int32x4_t p, float d) {
    return vfmaq_n_f32(acc, vcvtq_f32_s32(p), d);
}

ALWAYS_INLINE int32x4_t q4_0_lanes(const block_q4_0 * x, const block_q8_0 * y) {
    const uint8x16_t b = vld1q_u8(x->qs);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f))), vdupq_n_s8(8));
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), vdupq_n_s8(8));
    return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

ALWAYS_INLINE int32x4_t q4_1_lanes(const block_q4_1 * x, const block_q8_1 * y) {
    const uint8x16_t b = vld1q_u8(x->qs);
    const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(b, vdupq_n_u8(0x0f)));
    const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(b, 4));
    return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

ALWAYS_INLINE int32x4_t q5_0_lanes(const block_q5_0 * x, const block_q8_0 * y) {
    uint8x16_t hlo, hhi;
    bits_32(x->qh, &hlo, &hhi);
    const uint8x16_t b = vld1q_u8(x->qs);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), f0 = vdupq_n_u8(0xf0);
    /* nibble | 0xf0 where the 5th bit is clear reads as nibble - 16 */
    const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b, m4), vbicq_u8(f0, hlo)));
    const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b, 4), vbicq_u8(f0, hhi)));
    return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

ALWAYS_INLINE int32x4_t q5_1_lanes(const block_q5_1 * x, const block_q8_1 * y) {
    uint8x16_t hlo, hhi;
    bits_32(x->qh, &hlo, &hhi);
    const uint8x16_t b = vld1q_u8(x->qs);
    const uint8x16_t m4 = vdupq_n_u8(0x0f), k10 = vdupq_n_u8(0x10);
    const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b, m4), vandq_u8(hlo, k10)));
    const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b, 4), vandq_u8(hhi, k10)));
    return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

ALWAYS_INLINE int32x4_t q8_0_lanes(const block_q8_0 * x, const block_q8_0 * y) {
    return dot16(dot16(vdupq_n_s32(0), vld1q_s8(x->qs), vld1q_s8(y->qs)), vld1q_s8(x->qs + 16), vld1q_s8(y->qs + 16));
}

static inline void iq4nl_lookup(const uint8_t * qs, int8x16_t * lo, int8x16_t * hi) {
    const int8x16_t values = vld1q_s8(kiln_kvalues_iq4nl);
    const uint8x16_t b = vld1q_u8(qs);
    *lo = vqtbl1q_s8(values, vandq_u8(b, vdupq_n_u8(0x0f)));
    *hi = vqtbl1q_s8(values, vshrq_n_u8(b, 4));
}

ALWAYS_INLINE int32x4_t iq4_nl_lanes(const block_iq4_nl * x, const block_q8_0 * y) {
    int8x16_t lo, hi;
    iq4nl_lookup(x->qs, &lo, &hi);
    return dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(y->qs)), hi, vld1q_s8(y->qs + 16));
}

#define D2(a, b) (KQ_H2F((a).d) * KQ_H2F((b).d))

/* the pair loop the kernels here start with: blocks 2k into a0, 2k + 1
 * into a1, after the pair's other statements, if any (x, y, i, nb, a0, a1
 * in scope; i ends at the unpaired block) */
#define PAIRED_BLOCKS(LANES, ...) \
    for (; i + 1 < nb; i += 2) { \
        __VA_ARGS__; \
        a0 = blk_fma(a0, LANES(x + i, y + i), D2(x[i], y[i])); \
        a1 = blk_fma(a1, LANES(x + i + 1, y + i + 1), D2(x[i + 1], y[i + 1])); \
    }

void q4_0_q8_0_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    const int64_t nb = n / QK8_0;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    PAIRED_BLOCKS(q4_0_lanes, )
    float sumf = vaddvq_f32(a0) + vaddvq_f32(a1);
    for (; i < nb; ++i) {
        sumf = fmaf((float) vaddvq_s32(q4_0_lanes(x + i, y + i)) * KQ_H2F(x[i].d), KQ_H2F(y[i].d), sumf);
    }
    *s = sumf;
}

void q4_1_q8_1_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_1 * x = vx;
    const block_q8_1 * y = vy;
    const int64_t nb = n / QK8_1;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    float summs = 0;
    int64_t i = 0;
    PAIRED_BLOCKS(q4_1_lanes, summs += fmaf(KQ_H2F(x[i].m), KQ_H2F(y[i].s), KQ_H2F(x[i + 1].m) * KQ_H2F(y[i + 1].s)))
    float sumf = vaddvq_f32(a0) + vaddvq_f32(a1) + summs;
    for (; i < nb; ++i) {
        sumf += fmaf(D2(x[i], y[i]), (float) vaddvq_s32(q4_1_lanes(x + i, y + i)), KQ_H2F(x[i].m) * KQ_H2F(y[i].s));
    }
    *s = sumf;
}

void q5_0_q8_0_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_0 * x = vx;
    const block_q8_0 * y = vy;
    const int64_t nb = n / QK8_0;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    PAIRED_BLOCKS(q5_0_lanes, )
    float sumf = vaddvq_f32(a0) + vaddvq_f32(a1);
    for (; i < nb; ++i) {
        sumf = fmaf(D2(x[i], y[i]), (float) vaddvq_s32(q5_0_lanes(x + i, y + i)), sumf);
    }
    *s = sumf;
}

void q5_1_q8_1_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_1 * x = vx;
    const block_q8_1 * y = vy;
    const int64_t nb = n / QK8_1;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    float summs0 = 0, summs1 = 0;
    int64_t i = 0;
    PAIRED_BLOCKS(q5_1_lanes, summs0 = fmaf(KQ_H2F(x[i].m), KQ_H2F(y[i].s), summs0);
                              summs1 = fmaf(KQ_H2F(x[i + 1].m), KQ_H2F(y[i + 1].s), summs1))
    float sumf = vaddvq_f32(a0) + vaddvq_f32(a1) + summs0 + summs1;
    for (; i < nb; ++i) {
        sumf += fmaf(D2(x[i], y[i]), (float) vaddvq_s32(q5_1_lanes(x + i, y + i)), KQ_H2F(x[i].m) * KQ_H2F(y[i].s));
    }
    *s = sumf;
}

void q8_0_q8_0_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    const int64_t nb = n / QK8_0;
    float32x4_t a0 = vdupq_n_f32(0), a1 = vdupq_n_f32(0);
    int64_t i = 0;
    PAIRED_BLOCKS(q8_0_lanes, )
    float sumf = vaddvq_f32(a0) + vaddvq_f32(a1);
    for (; i < nb; ++i) {
        sumf = fmaf((float) vaddvq_s32(q8_0_lanes(x + i, y + i)), D2(x[i], y[i]), sumf);
    }
    *s = sumf;
}

#ifdef KILN_NEON_DOTPROD
/* mul_mat with 2+ activation rows (kernels.h vec_dot_n): llama.cpp's arm64
 * build with dotprod hands Q4_0 and Q8_0 to llamafile's tinyBLAS_Q0_ARM,
 * which sums every block into one accumulator, acc = fma(f32(lanes),
 * dx * dy, acc), reduced across lanes (pairwise) at the end */
void q4_0_q8_0_vec_dot_n__neon_dotprod(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK8_0; ++i) acc = blk_fma(acc, q4_0_lanes(x + i, y + i), D2(x[i], y[i]));
    *s = vaddvq_f32(acc);
}

void q8_0_q8_0_vec_dot_n__neon_dotprod(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK8_0; ++i) acc = blk_fma(acc, q8_0_lanes(x + i, y + i), D2(x[i], y[i]));
    *s = vaddvq_f32(acc);
}
#endif

/* iq4_nl sums in scalar floats: per pair of blocks
 * sumf += fma(d0, f32(sum0), d1 * f32(sum1)), then one fma per last block */
void iq4_nl_q8_0_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_nl * x = vx;
    const block_q8_0 * y = vy;
    const int64_t nb = n / QK4_NL;
    float sumf = 0;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        const float p0 = (float) vaddvq_s32(iq4_nl_lanes(x + i, y + i));
        const float p1 = (float) vaddvq_s32(iq4_nl_lanes(x + i + 1, y + i + 1));
        sumf += fmaf(D2(x[i], y[i]), p0, D2(x[i + 1], y[i + 1]) * p1);
    }
    for (; i < nb; ++i) {
        sumf = fmaf(KQ_H2F(y[i].d) * KQ_H2F(x[i].d), (float) vaddvq_s32(iq4_nl_lanes(x + i, y + i)), sumf);
    }
    *s = sumf;
}

/* ---- k-quants ----------------------------------------------------------- */

void q2_K_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q2_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int k = 0; k < 2; ++k) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * k), b1 = vld1q_u8(x[i].qs + 32 * k + 16);
            for (int p = 0; p < 4; ++p) {
                const int8x16_t sh = vdupq_n_s8((int8_t) (-2 * p));
                const int8x16_t q0 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b0, sh), m3));
                const int8x16_t q1 = vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b1, sh), m3));
                const int is = 8 * k + 2 * p;
                isum += (x[i].scales[is] & 0xF) * dot16_sum(q0, vld1q_s8(q8));
                isum += (x[i].scales[is + 1] & 0xF) * dot16_sum(q1, vld1q_s8(q8 + 16));
                q8 += 32;
            }
        }
        sumf += y[i].d * KQ_H2F(x[i].d) * isum - y[i].d * KQ_H2F(x[i].dmin) * summs;
    }
    *s = sumf;
}

void q3_K_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q3_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sc[16];
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xF : x[i].scales[j - 8] >> 4;
            sc[j] = (lo | (((x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        }
        const uint8x16_t h0 = vld1q_u8(x[i].hmask), h1 = vld1q_u8(x[i].hmask + 16);
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int k = 0; k < 2; ++k) {
            const uint8x16_t b0 = vld1q_u8(x[i].qs + 32 * k), b1 = vld1q_u8(x[i].qs + 32 * k + 16);
            for (int p = 0; p < 4; ++p) {
                const int8x16_t sh = vdupq_n_s8((int8_t) (-2 * p));
                const uint8x16_t hm = vdupq_n_u8((uint8_t) (1u << (4 * k + p)));
                /* subtract 4 where the high bit is clear */
                const uint8x16_t n0 = vandq_u8(vceqq_u8(vandq_u8(h0, hm), vdupq_n_u8(0)), vdupq_n_u8(4));
                const uint8x16_t n1 = vandq_u8(vceqq_u8(vandq_u8(h1, hm), vdupq_n_u8(0)), vdupq_n_u8(4));
                const int8x16_t q0 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b0, sh), m3)), vreinterpretq_s8_u8(n0));
                const int8x16_t q1 = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(vshlq_u8(b1, sh), m3)), vreinterpretq_s8_u8(n1));
                const int is = 8 * k + 2 * p;
                isum += sc[is] * dot16_sum(q0, vld1q_s8(q8));
                isum += sc[is + 1] * dot16_sum(q1, vld1q_s8(q8 + 16));
                q8 += 32;
            }
        }
        sumf += y[i].d * KQ_H2F(x[i].d) * isum;
    }
    *s = sumf;
}

static inline int k4_mins_dot(const uint8_t mn[8], const int16_t * bsums) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

void q4_K_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const uint8x16_t m4 = vdupq_n_u8(0xf);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const uint8_t * q4 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t b0 = vld1q_u8(q4), b1 = vld1q_u8(q4 + 16);
            int32x4_t lo = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vandq_u8(b0, m4)), vld1q_s8(q8));
            lo = dot16(lo, vreinterpretq_s8_u8(vandq_u8(b1, m4)), vld1q_s8(q8 + 16));
            int32x4_t hi = dot16(vdupq_n_s32(0), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), vld1q_s8(q8 + 32));
            hi = dot16(hi, vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)), vld1q_s8(q8 + 48));
            isum += sc[2 * j] * vaddvq_s32(lo) + sc[2 * j + 1] * vaddvq_s32(hi);
            q4 += 32;
            q8 += 64;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum - KQ_H2F(x[i].dmin) * y[i].d * k4_mins_dot(mn, y[i].bsums);
    }
    *s = sumf;
}

void q5_K_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const uint8x16_t m4 = vdupq_n_u8(0xf);
    const uint8x16_t k10 = vdupq_n_u8(0x10);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const uint8x16_t qh0 = vld1q_u8(x[i].qh), qh1 = vld1q_u8(x[i].qh + 16);
        const uint8_t * q5 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 4; ++j) {
            const uint8x16_t b0 = vld1q_u8(q5), b1 = vld1q_u8(q5 + 16);
            const uint8x16_t ulo = vdupq_n_u8((uint8_t) (1u << (2 * j))), uhi = vdupq_n_u8((uint8_t) (2u << (2 * j)));
            const int8x16_t l0 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b0, m4), vandq_u8(vtstq_u8(qh0, ulo), k10)));
            const int8x16_t l1 = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(b1, m4), vandq_u8(vtstq_u8(qh1, ulo), k10)));
            const int8x16_t g0 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b0, 4), vandq_u8(vtstq_u8(qh0, uhi), k10)));
            const int8x16_t g1 = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(b1, 4), vandq_u8(vtstq_u8(qh1, uhi), k10)));
            const int32x4_t lo = dot16(dot16(vdupq_n_s32(0), l0, vld1q_s8(q8)), l1, vld1q_s8(q8 + 16));
            const int32x4_t hi = dot16(dot16(vdupq_n_s32(0), g0, vld1q_s8(q8 + 32)), g1, vld1q_s8(q8 + 48));
            isum += sc[2 * j] * vaddvq_s32(lo) + sc[2 * j + 1] * vaddvq_s32(hi);
            q5 += 32;
            q8 += 64;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum - KQ_H2F(x[i].dmin) * y[i].d * k4_mins_dot(mn, y[i].bsums);
    }
    *s = sumf;
}

void q6_K_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const uint8x16_t m4 = vdupq_n_u8(0xf), m3 = vdupq_n_u8(3);
    const int8x16_t k32 = vdupq_n_s8(32);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int half = 0; half < 2; ++half) {
            for (int h16 = 0; h16 < 2; ++h16) {
                const uint8x16_t l0 = vld1q_u8(ql + 16 * h16), l1 = vld1q_u8(ql + 32 + 16 * h16);
                const uint8x16_t hb = vld1q_u8(qh + 16 * h16);
                int8x16_t q[4];
                q[0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4))), k32);
                q[1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4))), k32);
                q[2] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4))), k32);
                q[3] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4))), k32);
                for (int p = 0; p < 4; ++p) {
                    isum += sc[2 * p + h16] * dot16_sum(q[p], vld1q_s8(q8 + 32 * p + 16 * h16));
                }
            }
            ql += 64; qh += 32; sc += 8; q8 += 128;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

void iq4_xs_q8_K_vec_dot__neon(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_xs * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            int8x16_t lo, hi;
            iq4nl_lookup(x[i].qs + 16 * ib, &lo, &hi);
            const int32x4_t p = dot16(dot16(vdupq_n_s32(0), lo, vld1q_s8(q8)), hi, vld1q_s8(q8 + 16));
            isum += (ls - 32) * vaddvq_s32(p);
            q8 += 32;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}
