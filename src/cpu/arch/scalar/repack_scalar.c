/*
 * repack_scalar.c — the reference x4 mat-vec kernels (see src/cpu/repack.h):
 * q8_0 per row with the arithmetic of q8_0_q8_0_vec_dot__scalar exactly;
 * q4_0 and iq4_nl in llama.cpp's repacked order (the whole block's integer
 * dot, then one fused multiply-add per block), which the AVX2 kernels
 * reproduce bit for bit.
 */
#include <math.h>

#include "../../repack.h"
#include "quants_impl.h"

/* fmaf rounds once, like the FMA instruction of the SIMD kernels */
static inline float blocksum_step(int sumi, float dx, float dy, float acc) {
    return fmaf((float) sumi, dx * dy, acc);
}

/* 4 rows of 4-bit codes (16 bytes each per block) mapped through levels */
static void nibbles_x4_dot(int64_t n, float * s, const block_q4_0x4 * x, const block_q8_0 * y, const int8_t levels[16]) {
    float sumf[4] = { 0, 0, 0, 0 };
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        const float dy = KQ_H2F(y[ib].d);
        for (int r = 0; r < 4; r++) {
            const uint8_t * q = x[ib].qs + r * 16;
            int sumi = 0;
            for (int j = 0; j < 16; ++j) {
                sumi += levels[q[j] & 0x0F] * y[ib].qs[j];
                sumi += levels[q[j] >> 4] * y[ib].qs[j + 16];
            }
            sumf[r] = blocksum_step(sumi, KQ_H2F(x[ib].d[r]), dy, sumf[r]);
        }
    }
    for (int r = 0; r < 4; r++) s[r] = sumf[r];
}

void q4_0x4_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    static const int8_t q4_0_levels[16] = { -8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7 };
    nibbles_x4_dot(n, s, vx, vy, q4_0_levels);
}

void iq4_nlx4_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    nibbles_x4_dot(n, s, vx, vy, kiln_kvalues_iq4nl);
}

void q8_0x4_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    float sumf[4] = { 0, 0, 0, 0 };
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        const float dy = KQ_H2F(y[ib].d);
        for (int r = 0; r < 4; r++) {
            const int8_t * q = x[ib].qs + r * 32;
            int sumi = 0;
            for (int j = 0; j < QK8_0; ++j) sumi += q[j] * y[ib].qs[j];
            sumf[r] += sumi * (KQ_H2F(x[ib].d[r]) * dy);
        }
    }
    for (int r = 0; r < 4; r++) s[r] = sumf[r];
}
