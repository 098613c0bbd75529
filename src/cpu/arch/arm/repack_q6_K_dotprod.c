/*
 * repack_q6_K_dotprod.c — arm64 NEON + dotprod Q6_K x8 kernels (the layout
 * and orders in src/cpu/repack.h), built with -march=armv8.2-a+dotprod.
 *
 * llama.cpp's arm64 build with dotprod repacks Q6_K matrices whose row
 * count is a multiple of 8 and sums them per super-block: the exact
 * integer I = sum_j sc_j * dot_j over its 16 sub-blocks of 16 values
 * (values q - 32), then its mat-vec (ggml_gemv_q6_K_8x4_q8_K) adds
 * (float) I * (d * d_y) rounded apart (vmulq_f32, vaddq_f32) and its
 * batched kernel (ggml_gemm_q6_K_8x4_q8_K) adds it with one FMA (vmlaq_f32,
 * fused by its clang build). Every integer here is exact (|I| < 2^28), so
 * only those float steps decide the bits, and they are taken as there.
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

/* super-block xb's integer sums for N activation rows: I[c][g] (rows 4g..4g+3) */
ALWAYS_INLINE void q6_isums(const block_q6_Kx8 * xb, const int N, const block_q8_K * const * yb, int32x4_t I[][2]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f), m3 = vdupq_n_u8(0x03);
    const int8x16_t m32 = vdupq_n_s8(32);
    for (int c = 0; c < N; c++) I[c][0] = I[c][1] = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++) {            /* values 128 h .. 128 h + 127 */
        for (int q = 0; q < 2; q++) {        /* l = 16 q .. 16 q + 15 of each 32: one scale per j */
            int32x4_t a[2][4][2];
            for (int c = 0; c < N; c++) {
                for (int j = 0; j < 4; j++) a[c][j][0] = a[c][j][1] = vdupq_n_s32(0);
            }
            for (int pp = 0; pp < 4; pp++) {
                const int p = 4 * q + pp;    /* the piece: l = 4 p .. 4 p + 3 */
                int8x16_t w[2][4];
                for (int g = 0; g < 2; g++) {
                    const uint8x16_t l0 = vld1q_u8(xb->ql + (8 * (16 * h + p) + 4 * g) * 4);     /* ql[64 h + l] */
                    const uint8x16_t l1 = vld1q_u8(xb->ql + (8 * (16 * h + 8 + p) + 4 * g) * 4); /* ql[64 h + 32 + l] */
                    const uint8x16_t hb = vld1q_u8(xb->qh + (8 * (8 * h + p) + 4 * g) * 4);      /* qh[32 h + l] */
                    w[g][0] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(hb, m3), 4))), m32);
                    w[g][1] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4))), m32);
                    w[g][2] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4))), m32);
                    w[g][3] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vshlq_n_u8(vshrq_n_u8(hb, 6), 4))), m32);
                }
                for (int c = 0; c < N; c++) {
                    for (int j = 0; j < 4; j++) {
                        /* value 128 h + 32 j + l */
                        const int8x16_t yv = bcast4(yb[c]->qs + 128 * h + 32 * j + 4 * p);
                        a[c][j][0] = vdotq_s32(a[c][j][0], w[0][j], yv);
                        a[c][j][1] = vdotq_s32(a[c][j][1], w[1][j], yv);
                    }
                }
            }
            for (int j = 0; j < 4; j++) {
                /* sub-block (16 values) 8 h + 2 j + q: its 8 rows' scales */
                const int16x8_t sc = vmovl_s8(vld1_s8(xb->scales + 8 * (8 * h + 2 * j + q)));
                const int32x4_t s0 = vmovl_s16(vget_low_s16(sc)), s1 = vmovl_s16(vget_high_s16(sc));
                for (int c = 0; c < N; c++) {
                    I[c][0] = vmlaq_s32(I[c][0], a[c][j][0], s0);
                    I[c][1] = vmlaq_s32(I[c][1], a[c][j][1], s1);
                }
            }
        }
    }
}

/* one x8 group against N activation rows (N = 1, 2): fused (batched) or
 * multiply-then-add (mat-vec) per super-block */
ALWAYS_INLINE void q6_Kx8_cols(int64_t n, const int N, const int fused, float * const * s, const block_q6_Kx8 * x,
                               const block_q8_K * const * y) {
    float32x4_t acc[2][2];
    for (int c = 0; c < N; c++) acc[c][0] = acc[c][1] = vdupq_n_f32(0);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q8_K * yb[2];
        for (int c = 0; c < N; c++) yb[c] = &y[c][b];
        int32x4_t I[2][2];
        q6_isums(&x[b], N, yb, I);
        for (int c = 0; c < N; c++) {
            const float32x4_t fy = vdupq_n_f32(yb[c]->d);
            for (int g = 0; g < 2; g++) {
                const float32x4_t dd = f16x4_mul(x[b].d + 4 * g, fy);
                const float32x4_t fi = vcvtq_f32_s32(I[c][g]);
                acc[c][g] = fused ? vfmaq_f32(acc[c][g], fi, dd) : vaddq_f32(acc[c][g], vmulq_f32(fi, dd));
            }
        }
    }
    for (int c = 0; c < N; c++) {
        vst1q_f32(s[c], acc[c][0]);
        vst1q_f32(s[c] + 4, acc[c][1]);
    }
}

void q6_Kx8_q8_K_vec_dot__neon_dotprod(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_K * yc[1] = { y };
    q6_Kx8_cols(n, 1, 0, sc, x, yc);
}

/* 2 columns per pass, then an odd last one (the batched order throughout) */
void q6_Kx8_q8_K_gemm__neon_dotprod(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 2 <= ncols; c += 2) {
        float * sc[2] = { s + (size_t) c * ss, s + (size_t) (c + 1) * ss };
        const block_q8_K * yc[2] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys),
                                     (const block_q8_K *) ((const char *) y + (size_t) (c + 1) * ys) };
        q6_Kx8_cols(n, 2, 1, sc, x, yc);
    }
    if (c < ncols) {
        float * sc[1] = { s + (size_t) c * ss };
        const block_q8_K * yc[1] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys) };
        q6_Kx8_cols(n, 1, 1, sc, x, yc);
    }
}
