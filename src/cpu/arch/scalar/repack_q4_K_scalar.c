/*
 * repack_q4_K_scalar.c — the reference Q4_K x8 kernels (layout and the two
 * summation orders in src/cpu/repack.h), and the 4-row q8_K sign rule.
 * The AVX2 / AVX-512 kernels reproduce these bit for bit; these in turn
 * reproduce llama.cpp's AVX2 repacked Q4_K (tests/oracle/ggml_repack_check).
 */
#include <math.h>
#include <string.h>

#include "../../repack.h"
#include "quants_impl.h"

/* the 6-bit scales and mins of sub-block s of the 8 rows */
static void x8_scales(const uint8_t * g, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) {
        sc[j] = g[j] & 63;
        mn[j] = g[4 + j] & 63;
        sc[j + 4] = (uint8_t) ((g[8 + j] & 15) | ((g[j] >> 6) << 4));
        mn[j + 4] = (uint8_t) ((g[8 + j] >> 4) | ((g[4 + j] >> 6) << 4));
    }
}

/* integer dot of sub-block s (32 values) of row r with the q8 values */
static int x8_sub_dot(const block_q4_Kx8 * x, int r, int s, const int8_t * q8) {
    const int p = s / 2, hi = s % 2;
    int sum = 0;
    for (int i = 0; i < 32; i++) {
        const int byte = 32 * p + i; /* of the row's plain qs */
        const uint8_t b = x->qs[((byte / 8) * 8 + r) * 8 + byte % 8];
        sum += (hi ? b >> 4 : b & 15) * q8[32 * s + i];
    }
    return sum;
}

/* one row r of the group against one q8_K row; pairs: the batched order */
static float x8_row(int64_t n, const block_q4_Kx8 * x, int r, const block_q8_K * y, int pairs) {
    float acc = 0, accm = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float dd = KQ_H2F(x[b].d[r]) * y[b].d;
        const float dm = KQ_H2F(x[b].dmin[r]) * y[b].d;
        int isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            uint8_t sc[8], mn[8];
            x8_scales(x[b].scales + 12 * s, sc, mn);
            isum += sc[r] * x8_sub_dot(&x[b], r, s, y[b].qs);
            msum += mn[r] * (y[b].bsums[2 * s] + y[b].bsums[2 * s + 1]);
            if (pairs && s % 2 == 1) {
                acc = fmaf((float) isum, dd, acc);
                accm = fmaf((float) msum, dm, accm);
                isum = msum = 0;
            }
        }
        if (!pairs) {
            acc = fmaf((float) isum, dd, acc);
            accm = fmaf((float) msum, dm, accm);
        }
    }
    return acc - accm;
}

void q4_Kx8_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    for (int r = 0; r < 8; r++) s[r] = x8_row(n, vx, r, vy, 0);
}

void q4_Kx8_q8_K_gemm__scalar(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    for (int c = 0; c < ncols; c++) {
        const block_q8_K * y = (const block_q8_K *) ((const char *) vy + (size_t) c * ys);
        for (int r = 0; r < 8; r++) s[(size_t) c * ss + r] = x8_row(n, vx, r, y, 1);
    }
}

void kiln_quantize_row_q8_K_x4(const float * x, void * vy, int64_t n) {
    block_q8_K * y = vy;
    for (int64_t i = 0; i < n / QK_K; i++, x += QK_K) {
        /* fmaxf's value (a NaN is skipped) in 8 independent chains, which
         * compile to max instructions instead of a libm call per value */
        float m8[8] = { 0 };
        for (int j = 0; j < QK_K; j += 8) {
            for (int l = 0; l < 8; l++) {
                const float ax = fabsf(x[j + l]);
                m8[l] = ax > m8[l] ? ax : m8[l];
            }
        }
        float amax = 0;
        for (int l = 0; l < 8; l++) amax = m8[l] > amax ? m8[l] : amax;
        int positive = 0;
        for (int j = 0; j < QK_K; j++) positive |= x[j] == amax;
        if (amax == 0) {
            memset(&y[i], 0, sizeof y[i]);
            continue;
        }
        const float iscale = positive ? -127.f / amax : 127.f / amax;
        for (int j = 0; j < QK_K; j++) {
            const int v = kq_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t) (v > 127 ? 127 : v);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++) sum += y[i].qs[16 * j + k];
            y[i].bsums[j] = (int16_t) sum;
        }
        y[i].d = 1 / iscale;
    }
}
