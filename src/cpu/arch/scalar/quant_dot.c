/*
 * quant_dot.c — scalar reference dot products of every quantized type
 * against its activation type. Integer sums per (sub-)block, then one float
 * multiply by the scales, the same way the SIMD variants accumulate; every
 * SIMD variant is tested against these.
 */
#include "../quant_dot.h"
#include "blocks.h"
#include "quants_impl.h"
#include "iq_grids.h"

/* ---- 32-element blocks -------------------------------------------------- */

void q4_0_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += ((x[ib].qs[j] & 0x0F) - 8) * y[ib].qs[j];
            sumi += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        }
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d));
    }
    *s = sumf;
}

void q4_1_q8_1_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_1 * x = vx;
    const block_q8_1 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += (x[ib].qs[j] & 0x0F) * y[ib].qs[j];
            sumi += (x[ib].qs[j] >> 4) * y[ib].qs[j + 16];
        }
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d)) + KQ_H2F(x[ib].m) * KQ_H2F(y[ib].s);
    }
    *s = sumf;
}

void q5_0_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_0 * x = vx;
    const block_q8_0 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            sumi += (((x[ib].qs[j] & 0x0F) | h0) - 16) * y[ib].qs[j];
            sumi += (((x[ib].qs[j] >> 4) | h1) - 16) * y[ib].qs[j + 16];
        }
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d));
    }
    *s = sumf;
}

void q5_1_q8_1_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_1 * x = vx;
    const block_q8_1 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK8_1; ++ib) {
        uint32_t qh;
        memcpy(&qh, x[ib].qh, 4);
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            sumi += ((x[ib].qs[j] & 0x0F) | h0) * y[ib].qs[j];
            sumi += ((x[ib].qs[j] >> 4) | h1) * y[ib].qs[j + 16];
        }
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d)) + KQ_H2F(x[ib].m) * KQ_H2F(y[ib].s);
    }
    *s = sumf;
}

void q8_0_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; ++j) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d));
    }
    *s = sumf;
}

void iq4_nl_q8_0_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_nl * x = vx;
    const block_q8_0 * y = vy;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / QK4_NL; ++ib) {
        int sumi = 0;
        for (int j = 0; j < 16; ++j) {
            sumi += kiln_kvalues_iq4nl[x[ib].qs[j] & 0xf] * y[ib].qs[j];
            sumi += kiln_kvalues_iq4nl[x[ib].qs[j] >> 4] * y[ib].qs[j + 16];
        }
        sumf += sumi * (KQ_H2F(x[ib].d) * KQ_H2F(y[ib].d));
    }
    *s = sumf;
}

/* ---- k-quants ----------------------------------------------------------- */

void q2_K_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q2_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * q2 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        int isum = 0, is = 0;
        for (int k = 0; k < QK_K / 128; ++k) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; ++half) {
                    const int d = x[i].scales[is++] & 0xF;
                    int isuml = 0;
                    for (int l = 0; l < 16; ++l) isuml += q8[l] * ((q2[l + 16 * half] >> shift) & 3);
                    isum += d * isuml;
                    q8 += 16;
                }
            }
            q2 += 32;
        }
        const float dall = y[i].d * KQ_H2F(x[i].d);
        const float dmin = y[i].d * KQ_H2F(x[i].dmin);
        sumf += dall * isum - dmin * summs;
    }
    *s = sumf;
}

static int q3_K_scale(const uint8_t * s, int j) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

void q3_K_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q3_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * q3 = x[i].qs;
        const uint8_t * hm = x[i].hmask;
        const int8_t * q8 = y[i].qs;
        uint8_t m = 1;
        int isum = 0, is = 0;
        for (int k = 0; k < QK_K / 128; ++k) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; ++half) {
                    int isuml = 0;
                    for (int l = 0; l < 16; ++l) {
                        const int o = l + 16 * half;
                        const int q = ((q3[o] >> shift) & 3) - ((hm[o] & m) ? 0 : 4);
                        isuml += q8[l] * q;
                    }
                    isum += q3_K_scale(x[i].scales, is++) * isuml;
                    q8 += 16;
                }
                m <<= 1;
            }
            q3 += 32;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

/* q4_K / q5_K: 8 sub-blocks of 32 with 6-bit scale and min */
static void k4_unpack_scales(const uint8_t * scales, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, scales, &sc[j], &mn[j]);
}

void q4_K_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        k4_unpack_scales(x[i].scales, sc, mn);
        const uint8_t * q4 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; ++j) summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        for (int j = 0; j < QK_K / 64; ++j) {
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; ++l) {
                s0 += (q4[l] & 0xF) * q8[l];
                s1 += (q4[l] >> 4) * q8[l + 32];
            }
            isum += sc[2 * j] * s0 + sc[2 * j + 1] * s1;
            q4 += 32;
            q8 += 64;
        }
        const float d = KQ_H2F(x[i].d) * y[i].d;
        const float dmin = KQ_H2F(x[i].dmin) * y[i].d;
        sumf += d * isum - dmin * summs;
    }
    *s = sumf;
}

void q5_K_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        k4_unpack_scales(x[i].scales, sc, mn);
        const uint8_t * ql = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const int8_t * q8 = y[i].qs;
        int isum = 0, summs = 0;
        for (int j = 0; j < 8; ++j) summs += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        uint8_t u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K / 64; ++j) {
            int s0 = 0, s1 = 0;
            for (int l = 0; l < 32; ++l) {
                s0 += ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) * q8[l];
                s1 += ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) * q8[l + 32];
            }
            isum += sc[2 * j] * s0 + sc[2 * j + 1] * s1;
            ql += 32;
            q8 += 64;
            u1 <<= 2; u2 <<= 2;
        }
        const float d = KQ_H2F(x[i].d) * y[i].d;
        const float dmin = KQ_H2F(x[i].dmin) * y[i].d;
        sumf += d * isum - dmin * summs;
    }
    *s = sumf;
}

void q6_K_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int nn = 0; nn < QK_K; nn += 128) {
            int sums[8] = {0};
            for (int l = 0; l < 32; ++l) {
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                const int is = l / 16;
                sums[is + 0] += q1 * q8[l];
                sums[is + 2] += q2 * q8[l + 32];
                sums[is + 4] += q3 * q8[l + 64];
                sums[is + 6] += q4 * q8[l + 96];
            }
            for (int j = 0; j < 8; ++j) isum += sc[j] * sums[j];
            ql += 64; qh += 32; sc += 8; q8 += 128;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

void iq4_xs_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_xs * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * qs = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            int sumi = 0;
            for (int j = 0; j < 16; ++j) {
                sumi += kiln_kvalues_iq4nl[qs[j] & 0xf] * q8[j];
                sumi += kiln_kvalues_iq4nl[qs[j] >> 4] * q8[j + 16];
            }
            isum += (ls - 32) * sumi;
            qs += 16;
            q8 += 32;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

/* ---- ternary ------------------------------------------------------------ */

static inline int tq1_trit(uint8_t b, int pow3) {
    const uint8_t q = (uint8_t)(b * pow3);
    return (((uint16_t) q * 3) >> 8) - 1;
}

void tq1_0_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_tq1_0 * x = vx;
    const block_q8_K * y = vy;
    static const int pow3[5] = {1, 3, 9, 27, 81};
    const int nqs = (int) sizeof(x->qs), nqh = (int) sizeof(x->qh);
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int sum = 0;
        for (int j = 0; j < nqs - nqs % 32; j += 32)
            for (int l = 0; l < 5; ++l)
                for (int m = 0; m < 32; ++m) sum += tq1_trit(x[i].qs[j + m], pow3[l]) * *q8++;
        for (int j = nqs - nqs % 32; j < nqs; j += 16)
            for (int l = 0; l < 5; ++l)
                for (int m = 0; m < 16; ++m) sum += tq1_trit(x[i].qs[j + m], pow3[l]) * *q8++;
        for (int l = 0; l < 4; ++l)
            for (int j = 0; j < nqh; ++j) sum += tq1_trit(x[i].qh[j], pow3[l]) * *q8++;
        sumf += (float) sum * (KQ_H2F(x[i].d) * y[i].d);
    }
    *s = sumf;
}

void tq2_0_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_tq2_0 * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int sum = 0;
        for (int j = 0; j < (int) sizeof(x->qs); j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) sum += (((x[i].qs[j + m] >> (2 * l)) & 3) - 1) * *q8++;
        sumf += (float) sum * (KQ_H2F(x[i].d) * y[i].d);
    }
    *s = sumf;
}

/* ---- grid i-quants ------------------------------------------------------ */

/* sum over 8 values of grid byte * sign * activation */
static inline int grid8_dot(const uint8_t * grid, uint8_t signs, const int8_t * q8) {
    int sum = 0;
    for (int j = 0; j < 8; ++j) sum += grid[j] * ((signs >> j) & 1 ? -q8[j] : q8[j]);
    return sum;
}

void iq2_xxs_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq2_xxs * x = vx;
    const block_q8_K * y = vy;
    uint32_t aux32[2];
    const uint8_t * aux8 = (const uint8_t *) aux32;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            memcpy(aux32, x[i].qs + 4 * ib32, 8);
            const int ls = 2 * (aux32[1] >> 28) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; ++l) {
                sumi += grid8_dot((const uint8_t *) (kiln_iq2xxs_grid + aux8[l]),
                                  kiln_ksigns_iq2xs[(aux32[1] >> 7 * l) & 127], q8);
                q8 += 8;
            }
            bsum += sumi * ls;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * bsum * 0.125f;
    }
    *s = sumf;
}

void iq2_xs_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq2_xs * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            const int ls1 = 2 * (x[i].scales[ib32] & 0xf) + 1;
            const int ls2 = 2 * (x[i].scales[ib32] >> 4) + 1;
            int sumi[2] = {0, 0};
            for (int l = 0; l < 4; ++l) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                sumi[l / 2] += grid8_dot((const uint8_t *) (kiln_iq2xs_grid + (q & 511)), kiln_ksigns_iq2xs[q >> 9], q8);
                q8 += 8;
            }
            bsum += sumi[0] * ls1 + sumi[1] * ls2;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * bsum * 0.125f;
    }
    *s = sumf;
}

void iq2_s_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq2_s * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const uint8_t * signs = qs + QK_K / 8;
        const int8_t * q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            const int ls1 = 2 * (x[i].scales[ib32] & 0xf) + 1;
            const int ls2 = 2 * (x[i].scales[ib32] >> 4) + 1;
            int sumi[2] = {0, 0};
            for (int l = 0; l < 4; ++l) {
                const uint8_t * grid = (const uint8_t *) (kiln_iq2s_grid + (qs[l] | (qh[ib32] << (8 - 2 * l) & 0x300)));
                sumi[l / 2] += grid8_dot(grid, signs[l], q8);
                q8 += 8;
            }
            bsum += sumi[0] * ls1 + sumi[1] * ls2;
            qs += 4;
            signs += 4;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * bsum * 0.125f;
    }
    *s = sumf;
}

static inline int grid4x2_dot(const uint8_t * g1, const uint8_t * g2, uint8_t signs, const int8_t * q8) {
    int sum = 0;
    for (int j = 0; j < 4; ++j) {
        sum += g1[j] * ((signs >> j) & 1 ? -q8[j] : q8[j]);
        sum += g2[j] * ((signs >> (j + 4)) & 1 ? -q8[j + 4] : q8[j + 4]);
    }
    return sum;
}

void iq3_xxs_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq3_xxs * x = vx;
    const block_q8_K * y = vy;
    uint32_t aux32;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * q3 = x[i].qs;
        const uint8_t * gas = x[i].qs + QK_K / 4;
        const int8_t * q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            memcpy(&aux32, gas + 4 * ib32, 4);
            const int ls = 2 * (aux32 >> 28) + 1;
            int sumi = 0;
            for (int l = 0; l < 4; ++l) {
                sumi += grid4x2_dot((const uint8_t *) (kiln_iq3xxs_grid + q3[2 * l]),
                                    (const uint8_t *) (kiln_iq3xxs_grid + q3[2 * l + 1]),
                                    kiln_ksigns_iq2xs[(aux32 >> 7 * l) & 127], q8);
                q8 += 8;
            }
            q3 += 8;
            bsum += sumi * ls;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * bsum * 0.25f;
    }
    *s = sumf;
}

void iq3_s_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq3_s * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const uint8_t * signs = x[i].signs;
        const int8_t * q8 = y[i].qs;
        int32_t bsum = 0;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32 += 2) {
            for (int half = 0; half < 2; ++half) {
                const int ls = 2 * ((x[i].scales[ib32 / 2] >> (4 * half)) & 0xf) + 1;
                int sumi = 0;
                for (int l = 0; l < 4; ++l) {
                    const uint8_t * g1 = (const uint8_t *) (kiln_iq3s_grid + (qs[2 * l + 0] | ((qh[half] << (8 - 2 * l)) & 256)));
                    const uint8_t * g2 = (const uint8_t *) (kiln_iq3s_grid + (qs[2 * l + 1] | ((qh[half] << (7 - 2 * l)) & 256)));
                    sumi += grid4x2_dot(g1, g2, signs[l], q8);
                    q8 += 8;
                }
                qs += 8;
                signs += 4;
                bsum += sumi * ls;
            }
            qh += 2;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * bsum;
    }
    *s = sumf;
}

void iq1_s_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq1_s * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        const uint8_t * qs = x[i].qs;
        const uint16_t * qh = x[i].qh;
        int sumi = 0, sumi1 = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = 2 * ((qh[ib] >> 12) & 7) + 1;
            const int delta = qh[ib] & 0x8000 ? -1 : 1;
            int lsum = 0;
            for (int l = 0; l < 4; ++l) {
                const int8_t * grid = (const int8_t *) (kiln_iq1s_grid + (qs[l] | (((qh[ib] >> 3 * l) & 7) << 8)));
                for (int j = 0; j < 8; ++j) lsum += q8[j] * grid[j];
                q8 += 8;
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (y[i].bsums[2 * ib] + y[i].bsums[2 * ib + 1]);
            qs += 4;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * (sumi + KILN_IQ1S_DELTA * sumi1);
    }
    *s = sumf;
}

void iq1_m_q8_K_vec_dot__scalar(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq1_m * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint16_t sc[4];
        memcpy(sc, x[i].scales, 8);
        const uint16_t u = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
        const float d = KQ_H2F(u);
        const int8_t * q8 = y[i].qs;
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        int sumi1 = 0, sumi2 = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls1 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1;
            const int ls2 = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1;
            const int idx[4] = { qs[0] | ((qh[0] << 8) & 0x700), qs[1] | ((qh[0] << 4) & 0x700),
                                 qs[2] | ((qh[1] << 8) & 0x700), qs[3] | ((qh[1] << 4) & 0x700) };
            const int dl[4] = { qh[0] & 0x08 ? -1 : 1, qh[0] & 0x80 ? -1 : 1,
                                qh[1] & 0x08 ? -1 : 1, qh[1] & 0x80 ? -1 : 1 };
            int s1[2] = {0, 0}, s2[2] = {0, 0};
            for (int l = 0; l < 4; ++l) {
                const int8_t * grid = (const int8_t *) (kiln_iq1s_grid + idx[l]);
                int lsum1 = 0, lsum2 = 0;
                for (int j = 0; j < 8; ++j) {
                    lsum1 += q8[j] * grid[j];
                    lsum2 += q8[j];
                }
                q8 += 8;
                s1[l / 2] += lsum1;
                s2[l / 2] += lsum2 * dl[l];
            }
            sumi1 += s1[0] * ls1 + s1[1] * ls2;
            sumi2 += s2[0] * ls1 + s2[1] * ls2;
            qs += 4;
            qh += 2;
        }
        sumf += d * y[i].d * (sumi1 + KILN_IQ1M_DELTA * sumi2);
    }
    *s = sumf;
}
