/*
 * repack_q5_K_dotprod.c — arm64 NEON + dotprod Q5_K x8 kernels (the layout
 * and order in src/cpu/repack.h), built with -march=armv8.2-a+dotprod.
 *
 * llama.cpp's arm64 build with dotprod repacks Q5_K matrices whose row
 * count is a multiple of 8 and sums them, in its mat-vec and batched
 * kernels alike (ggml_gemv / ggml_gemm_q5_K_8x4_q8_K), as its Q4_K: one
 * accumulator per row, per pair p of 32-value sub-blocks acc = fma((float)
 * (sc_2p * dot_2p + sc_2p+1 * dot_2p+1), d * d_y, acc), and after the 4
 * pairs acc = acc - (float) M * (dmin * d_y) fused (its vmlsq_f32, an FMLS
 * in its clang build), M = sum_s m_s * bsum_s. The integer sums are exact.
 *
 * A 16-byte load of the x8 layout is one 4-byte piece of 4 rows: SDOT
 * against the same 4 activations in every lane gives the 4 rows' partial
 * dots in the lanes, rows 0..3 and 4..7 in two vectors.
 */
#include <arm_neon.h>
#include <string.h>

#include "../../repack.h"
#include "blocks.h"
#include "neon_common.h"

/* the 4 activations at p in all 4 lanes (rows need no alignment) */
ALWAYS_INLINE int8x16_t bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, 4);
    return vreinterpretq_s8_s32(vdupq_n_s32(v));
}

/* sub-block s's 6-bit scales (sc, rows 0..3 | 4..7) and mins of the 8 rows
 * from its 12 bytes g (repack.h: Q4_K's x8 scales) */
ALWAYS_INLINE void x8_scales5(const uint8_t * g, int32x4_t sc[2], int16x8_t * mn) {
    int32_t s[8];
    int16_t m[8];
    for (int j = 0; j < 4; j++) {
        s[j] = g[j] & 63;
        m[j] = (int16_t) (g[4 + j] & 63);
        s[j + 4] = (g[8 + j] & 15) | ((g[j] >> 6) << 4);
        m[j + 4] = (int16_t) ((g[8 + j] >> 4) | ((g[4 + j] >> 6) << 4));
    }
    sc[0] = vld1q_s32(s);
    sc[1] = vld1q_s32(s + 4);
    *mn = vld1q_s16(m);
}

/* one x8 group against N activation rows (N = 1, 2) */
ALWAYS_INLINE void q5_Kx8_cols(int64_t n, const int N, float * const * s, const block_q5_Kx8 * x, const block_q8_K * const * y) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    float32x4_t acc[2][2];
    for (int c = 0; c < N; c++) acc[c][0] = acc[c][1] = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q5_Kx8 * xb = &x[b];
        float32x4_t dd[2][2], dm[2][2];
        for (int c = 0; c < N; c++) {
            const float32x4_t fy = vdupq_n_f32(y[c][b].d);
            for (int g = 0; g < 2; g++) {
                dd[c][g] = f16x4_mul(xb->d + 4 * g, fy);
                dm[c][g] = f16x4_mul(xb->dmin + 4 * g, fy);
            }
        }
        int32x4_t msum[2][2];
        for (int c = 0; c < N; c++) msum[c][0] = msum[c][1] = vdupq_n_s32(0);
        for (int p = 0; p < 4; p++) {        /* values 64 p .. 64 p + 63: sub-blocks 2p (low nibbles), 2p+1 (high) */
            const int8x16_t sh = vdupq_n_s8((int8_t) (-2 * p));
            int32x4_t alo[2][2], ahi[2][2];
            for (int c = 0; c < N; c++) alo[c][0] = alo[c][1] = ahi[c][0] = ahi[c][1] = vdupq_n_s32(0);
            for (int i = 0; i < 8; i++) {    /* the piece: i = 4 i' .. of the 32 */
                int8x16_t wlo[2], whi[2];
                for (int g = 0; g < 2; g++) {
                    const uint8x16_t qs = vld1q_u8(xb->qs + (8 * (8 * p + i) + 4 * g) * 4); /* qs[32 p + 4 i ..] */
                    const uint8x16_t qh = vshlq_u8(vld1q_u8(xb->qh + (8 * i + 4 * g) * 4), sh); /* qh[4 i ..] >> 2p */
                    wlo[g] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(qs, m4), vshlq_n_u8(vandq_u8(qh, one), 4)));
                    whi[g] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(qs, 4), vshlq_n_u8(vandq_u8(qh, two), 3)));
                }
                for (int c = 0; c < N; c++) {
                    const int8x16_t ylo = bcast4(y[c][b].qs + 64 * p + 4 * i);
                    const int8x16_t yhi = bcast4(y[c][b].qs + 64 * p + 32 + 4 * i);
                    for (int g = 0; g < 2; g++) {
                        alo[c][g] = vdotq_s32(alo[c][g], wlo[g], ylo);
                        ahi[c][g] = vdotq_s32(ahi[c][g], whi[g], yhi);
                    }
                }
            }
            int32x4_t sclo[2], schi[2];
            int16x8_t mnlo, mnhi;
            x8_scales5(xb->scales + 12 * (2 * p), sclo, &mnlo);
            x8_scales5(xb->scales + 12 * (2 * p + 1), schi, &mnhi);
            for (int c = 0; c < N; c++) {
                const int16_t * bs = y[c][b].bsums;
                const int16_t blo = (int16_t) (bs[4 * p] + bs[4 * p + 1]), bhi = (int16_t) (bs[4 * p + 2] + bs[4 * p + 3]);
                for (int g = 0; g < 2; g++) {
                    const int32x4_t isum = vmlaq_s32(vmulq_s32(sclo[g], alo[c][g]), schi[g], ahi[c][g]);
                    acc[c][g] = vfmaq_f32(acc[c][g], vcvtq_f32_s32(isum), dd[c][g]);
                }
                msum[c][0] = vmlal_n_s16(msum[c][0], vget_low_s16(mnlo), blo);
                msum[c][0] = vmlal_n_s16(msum[c][0], vget_low_s16(mnhi), bhi);
                msum[c][1] = vmlal_n_s16(msum[c][1], vget_high_s16(mnlo), blo);
                msum[c][1] = vmlal_n_s16(msum[c][1], vget_high_s16(mnhi), bhi);
            }
        }
        for (int c = 0; c < N; c++) {
            for (int g = 0; g < 2; g++) acc[c][g] = vfmsq_f32(acc[c][g], vcvtq_f32_s32(msum[c][g]), dm[c][g]);
        }
    }
    for (int c = 0; c < N; c++) {
        vst1q_f32(s[c], acc[c][0]);
        vst1q_f32(s[c] + 4, acc[c][1]);
    }
}

void q5_Kx8_q8_K_vec_dot__neon_dotprod(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_K * yc[1] = { y };
    q5_Kx8_cols(n, 1, sc, x, yc);
}

/* 2 columns per pass, then an odd last one (one order for both forms) */
void q5_Kx8_q8_K_gemm__neon_dotprod(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 2 <= ncols; c += 2) {
        float * sc[2] = { s + (size_t) c * ss, s + (size_t) (c + 1) * ss };
        const block_q8_K * yc[2] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys),
                                     (const block_q8_K *) ((const char *) y + (size_t) (c + 1) * ys) };
        q5_Kx8_cols(n, 2, sc, x, yc);
    }
    if (c < ncols) {
        float * sc[1] = { s + (size_t) c * ss };
        const block_q8_K * yc[1] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys) };
        q5_Kx8_cols(n, 1, sc, x, yc);
    }
}
