/*
 * quants_k.c — the 256-element "k-quant" super-blocks Q2_K..Q6_K and the
 * Q8_K activation type: dequantize, ggml-identical reference quantizers and
 * the imatrix-weighted quantizers.
 */
#include "quants.h"
#include "quants_impl.h"

/* Four 2-bit planes per 32 bytes: element j+32*s of each 128-chunk lives in
 * bits 2s..2s+1 of byte j (shared by q2_K and q3_K). */
static void pack_2bit_planes(const uint8_t * L, uint8_t * qs) {
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

/* ------------------------------------------------------------------ q2_K */

static void q2_K_finish(const float * x, block_q2_K * y, uint8_t * L) {
    const float dm = KQ_H2F(y->d), mm = KQ_H2F(y->dmin);
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = dm * (y->scales[j] & 0xF);
        if (!d) continue;
        const float m = mm * (y->scales[j] >> 4);
        for (int ii = 0; ii < 16; ++ii) {
            int l = kq_nearest_int((x[16 * j + ii] + m) / d);
            L[16 * j + ii] = (uint8_t) KQ_MAX(0, KQ_MIN(3, l));
        }
    }
    pack_2bit_planes(L, y->qs);
}

void kiln_quantize_row_q2_K_ref(const float * x, void * vy, int64_t k) {
    block_q2_K * y = (block_q2_K *) vy;
    const int64_t nb = k / QK_K;
    uint8_t L[QK_K], Laux[16];
    float weights[16], mins[QK_K / 16], scales[QK_K / 16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = kq_make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = (uint8_t) kq_nearest_int(iscale * scales[j]);
            y[i].d = KQ_F2H(max_scale / q4scale);
        } else {
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = 0;
            y[i].d = KQ_F2H(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] |= (uint8_t)(kq_nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = KQ_F2H(max_min / q4scale);
        } else {
            y[i].dmin = KQ_F2H(0.f);
        }
        q2_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

static void quantize_row_q2_K_imat(const float * x, block_q2_K * y, int64_t n, const float * quant_weights) {
    uint8_t L[QK_K], Laux[16], Ls[QK_K / 16], Lm[QK_K / 16];
    float mins[QK_K / 16], scales[QK_K / 16], sw[QK_K / 16], weight[16];
    for (int64_t i = 0; i < n / QK_K; i++) {
        memset(sw, 0, sizeof(sw));
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float * qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            for (int l = 0; l < QK_K / 16; ++l) sw[j] += weight[l];
            scales[j] = kq_make_qkx3_quants(16, 3, x + 16 * j, weight, L + 16 * j, &mins[j], Laux, -0.9f, 0.05f, 36, 0);
        }
        const float dm = kq_make_qp_quants(QK_K / 16, 15, scales, Ls, sw);
        const float mm = kq_make_qp_quants(QK_K / 16, 15, mins, Lm, sw);
        y[i].d = KQ_F2H(dm);
        y[i].dmin = KQ_F2H(mm);
        for (int j = 0; j < QK_K / 16; ++j) y[i].scales[j] = (uint8_t)(Ls[j] | (Lm[j] << 4));
        q2_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

void kiln_dequantize_row_q2_K(const void * vx, float * y, int64_t k) {
    const block_q2_K * x = (const block_q2_K *) vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d), min = KQ_H2F(x[i].dmin);
        const uint8_t * q = x[i].qs;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; ++half) {
                    const uint8_t sc = x[i].scales[is++];
                    const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
                    for (int l = 0; l < 16; ++l) *y++ = dl * ((q[l + 16 * half] >> shift) & 3) - ml;
                }
            }
            q += 32;
        }
    }
}

/* ------------------------------------------------------------------ q3_K */

/* 16 signed 6-bit scales (offset 32): low nibbles in bytes 0..7, the top two
 * bits in bytes 8..11. */
static void q3_K_put_scale(uint8_t * s, int j, int l) {
    if (j < 8) s[j] = (uint8_t)(l & 0xF);
    else s[j - 8] |= (uint8_t)((l & 0xF) << 4);
    l >>= 4;
    s[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
}

static int q3_K_get_scale(const uint8_t * s, int j) {
    int8_t sc = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    sc = (int8_t)((sc | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    return sc;
}

static void q3_K_finish(const float * x, block_q3_K * y, int8_t * L) {
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = KQ_H2F(y->d) * q3_K_get_scale(y->scales, j);
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = kq_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(KQ_MAX(-4, KQ_MIN(3, l)) + 4);
        }
    }
    memset(y->hmask, 0, QK_K / 8);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK_K; ++j) {
        if (L[j] > 3) {
            y->hmask[m] |= hm;
            L[j] -= 4;
        }
        if (++m == QK_K / 8) { m = 0; hm <<= 1; }
    }
    pack_2bit_planes((const uint8_t *) L, y->qs);
}

void kiln_quantize_row_q3_K_ref(const float * x, void * vy, int64_t k) {
    block_q3_K * y = (block_q3_K *) vy;
    const int64_t nb = k / QK_K;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < nb; i++) {
        float max_scale = 0, amax = 0;
        for (int j = 0; j < QK_K / 16; ++j) {
            scales[j] = kq_make_q3_quants(16, 4, x + 16 * j, L + 16 * j, 1);
            const float scale = fabsf(scales[j]);
            if (scale > amax) { amax = scale; max_scale = scales[j]; }
        }
        memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; ++j) {
                int8_t l = (int8_t) kq_nearest_int(iscale * scales[j]);
                l = (int8_t)(KQ_MAX(-32, KQ_MIN(31, l)) + 32);
                q3_K_put_scale(y[i].scales, j, l);
            }
            y[i].d = KQ_F2H(1 / iscale);
        } else {
            y[i].d = KQ_F2H(0.f);
        }
        q3_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

static void quantize_row_q3_K_imat(const float * x, block_q3_K * y, int64_t n, const float * quant_weights) {
    int8_t L[QK_K], Ls[QK_K / 16];
    float scales[QK_K / 16], weight[16], sw[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++) {
        float sumx2 = 0;
        for (int j = 0; j < QK_K; ++j) sumx2 += x[j] * x[j];
        const float sigma2 = 2 * sumx2 / QK_K;
        for (int j = 0; j < QK_K / 16; ++j) {
            const float * qw = quant_weights + QK_K * i + 16 * j;
            for (int l = 0; l < 16; ++l) weight[l] = qw[l] * sqrtf(sigma2 + x[16 * j + l] * x[16 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 16; ++l) sumw += weight[l];
            sw[j] = sumw;
            scales[j] = kq_make_qx_quants(16, 4, x + 16 * j, L + 16 * j, 1, weight);
        }
        memset(y[i].scales, 0, 12);
        const float d_block = kq_make_qx_quants(QK_K / 16, 32, scales, Ls, 1, sw);
        for (int j = 0; j < QK_K / 16; ++j) q3_K_put_scale(y[i].scales, j, Ls[j]);
        y[i].d = KQ_F2H(d_block);
        q3_K_finish(x, &y[i], L);
        x += QK_K;
    }
}

void kiln_dequantize_row_q3_K(const void * vx, float * y, int64_t k) {
    const block_q3_K * x = (const block_q3_K *) vx;
    const int64_t nb = k / QK_K;
    for (int64_t i = 0; i < nb; i++) {
        const float d_all = KQ_H2F(x[i].d);
        const uint8_t * q = x[i].qs;
        const uint8_t * hm = x[i].hmask;
        uint8_t m = 1;
        int is = 0;
        for (int n = 0; n < QK_K; n += 128) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int half = 0; half < 2; ++half) {
                    const float dl = d_all * q3_K_get_scale(x[i].scales, is++);
                    for (int l = 0; l < 16; ++l) {
                        const int o = l + 16 * half;
                        *y++ = dl * ((int8_t)((q[o] >> shift) & 3) - ((hm[o] & m) ? 0 : 4));
                    }
                }
                m <<= 1;
            }
            q += 32;
        }
    }
}

/* ------------------------------------------------------------ q4_K, q5_K */

static void k4_put_scale_min(uint8_t * s, int j, uint8_t ls, uint8_t lm) {
    if (j < 4) {
        s[j] = ls;
        s[j + 4] = lm;
    } else {
        s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
        s[j - 4] |= (uint8_t)((ls >> 4) << 6);
        s[j] |= (uint8_t)((lm >> 4) << 6);
    }
}

/* Shared by q4_K (nmax 15) and q5_K (nmax 31): sub-block fit, then the
 * 6-bit scale/min quantization, then requantize with the stored scales. */
static void qk45_ref_block(const float * x, uint8_t * scales_out, kiln_fp16_t * dd, kiln_fp16_t * dmin,
                           uint8_t * L, int nmax, float rmin, float rdelta, int nstep) {
    uint8_t Laux[32];
    float weights[32], mins[QK_K / 32], scales[QK_K / 32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = kq_make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t ls = (uint8_t) kq_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t) kq_nearest_int(inv_min * mins[j]);
        ls = KQ_MIN(63, ls);
        lm = KQ_MIN(63, lm);
        k4_put_scale_min(scales_out, j, ls, lm);
    }
    *dd = KQ_F2H(max_scale / 63.f);
    *dmin = KQ_F2H(max_min / 63.f);
}

static void qk45_imat_block(const float * x, const float * qwb, uint8_t * scales_out, kiln_fp16_t * dd,
                            kiln_fp16_t * dmin, uint8_t * L, int nmax) {
    uint8_t Laux[32], Ls[QK_K / 32], Lm[QK_K / 32];
    float weights[32], sw[QK_K / 32], mins[QK_K / 32], scales[QK_K / 32];
    float sum_x2 = 0;
    for (int l = 0; l < QK_K; ++l) sum_x2 += x[l] * x[l];
    const float sigma2 = 2 * sum_x2 / QK_K;
    const float av_x = sqrtf(sigma2);
    for (int j = 0; j < QK_K / 32; ++j) {
        if (qwb) {
            const float * qw = qwb + 32 * j;
            for (int l = 0; l < 32; ++l) weights[l] = qw[l] * sqrtf(sigma2 + x[32 * j + l] * x[32 * j + l]);
        } else {
            for (int l = 0; l < 32; ++l) weights[l] = av_x + fabsf(x[32 * j + l]);
        }
        float sumw = 0;
        for (int l = 0; l < 32; ++l) sumw += weights[l];
        sw[j] = sumw;
        scales[j] = kq_make_qkx3_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.9f, 0.05f, 36, 0);
    }
    const float d_block = kq_make_qp_quants(QK_K / 32, 63, scales, Ls, sw);
    const float m_block = kq_make_qp_quants(QK_K / 32, 63, mins, Lm, sw);
    for (int j = 0; j < QK_K / 32; ++j) k4_put_scale_min(scales_out, j, KQ_MIN(63, Ls[j]), KQ_MIN(63, Lm[j]));
    *dd = KQ_F2H(d_block);
    *dmin = KQ_F2H(m_block);
}

static void qk45_requant(const float * x, const uint8_t * sc6, kiln_fp16_t dd, kiln_fp16_t dmin, uint8_t * L, int nmax) {
    for (int j = 0; j < QK_K / 32; ++j) {
        uint8_t sc, m;
        kq_get_scale_min_k4(j, sc6, &sc, &m);
        const float d = KQ_H2F(dd) * sc;
        if (!d) continue;
        const float dm = KQ_H2F(dmin) * m;
        for (int ii = 0; ii < 32; ++ii) {
            int l = kq_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t) KQ_MAX(0, KQ_MIN(nmax, l));
        }
    }
}

static void q4_K_pack(const uint8_t * L, uint8_t * q) {
    for (int j = 0; j < QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

static void q5_K_pack(const uint8_t * L, uint8_t * ql, uint8_t * qh) {
    memset(qh, 0, QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < QK_K; n += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j];
            if (l1 > 15) { l1 -= 16; qh[j] |= m1; }
            int l2 = L[n + j + 32];
            if (l2 > 15) { l2 -= 16; qh[j] |= m2; }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 <<= 2; m2 <<= 2;
        ql += 32;
    }
}

void kiln_quantize_row_q4_K_ref(const float * x, void * vy, int64_t k) {
    block_q4_K * y = (block_q4_K *) vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < k / QK_K; i++) {
        qk45_ref_block(x, y[i].scales, &y[i].d, &y[i].dmin, L, 15, -1.f, 0.1f, 20);
        qk45_requant(x, y[i].scales, y[i].d, y[i].dmin, L, 15);
        q4_K_pack(L, y[i].qs);
        x += QK_K;
    }
}

void kiln_quantize_row_q5_K_ref(const float * x, void * vy, int64_t k) {
    block_q5_K * y = (block_q5_K *) vy;
    uint8_t L[QK_K];
    for (int64_t i = 0; i < k / QK_K; i++) {
        qk45_ref_block(x, y[i].scales, &y[i].d, &y[i].dmin, L, 31, -0.5f, 0.1f, 15);
        qk45_requant(x, y[i].scales, y[i].d, y[i].dmin, L, 31);
        q5_K_pack(L, y[i].qs, y[i].qh);
        x += QK_K;
    }
}

static void quantize_row_q4_K_imat(const float * x, block_q4_K * y, int64_t n, const float * qw) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        qk45_imat_block(x, qw ? qw + QK_K * i : NULL, y[i].scales, &y[i].d, &y[i].dmin, L, 15);
        qk45_requant(x, y[i].scales, y[i].d, y[i].dmin, L, 15);
        q4_K_pack(L, y[i].qs);
        x += QK_K;
    }
}

static void quantize_row_q5_K_imat(const float * x, block_q5_K * y, int64_t n, const float * qw) {
    uint8_t L[QK_K];
    for (int64_t i = 0; i < n / QK_K; i++) {
        qk45_imat_block(x, qw ? qw + QK_K * i : NULL, y[i].scales, &y[i].d, &y[i].dmin, L, 31);
        qk45_requant(x, y[i].scales, y[i].d, y[i].dmin, L, 31);
        q5_K_pack(L, y[i].qs, y[i].qh);
        x += QK_K;
    }
}

void kiln_dequantize_row_q4_K(const void * vx, float * y, int64_t k) {
    const block_q4_K * x = (const block_q4_K *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const uint8_t * q = x[i].qs;
        const float d = KQ_H2F(x[i].d), min = KQ_H2F(x[i].dmin);
        int is = 0;
        uint8_t sc, m;
        for (int j = 0; j < QK_K; j += 64) {
            kq_get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            kq_get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
            q += 32;
            is += 2;
        }
    }
}

void kiln_dequantize_row_q5_K(const void * vx, float * y, int64_t k) {
    const block_q5_K * x = (const block_q5_K *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const uint8_t * ql = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const float d = KQ_H2F(x[i].d), min = KQ_H2F(x[i].dmin);
        int is = 0;
        uint8_t sc, m, u1 = 1, u2 = 2;
        for (int j = 0; j < QK_K; j += 64) {
            kq_get_scale_min_k4(is + 0, x[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            kq_get_scale_min_k4(is + 1, x[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
            ql += 32;
            is += 2;
            u1 <<= 2; u2 <<= 2;
        }
    }
}

/* ------------------------------------------------------------------ q6_K */

static void q6_K_from_scales(const float * x, block_q6_K * y, const float * scales, int8_t * L) {
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < QK_K / 16; ++ib) {
        const float abs_scale = fabsf(scales[ib]);
        if (abs_scale > max_abs_scale) { max_abs_scale = abs_scale; max_scale = scales[ib]; }
    }
    if (max_abs_scale < KQ_GROUP_MAX_EPS) {
        memset(y, 0, sizeof(*y));
        y->d = KQ_F2H(0.f);
        return;
    }
    const float iscale = -128.f / max_scale;
    y->d = KQ_F2H(1 / iscale);
    for (int ib = 0; ib < QK_K / 16; ++ib) y->scales[ib] = (int8_t) KQ_MIN(127, kq_nearest_int(iscale * scales[ib]));
    for (int j = 0; j < QK_K / 16; ++j) {
        const float d = KQ_H2F(y->d) * y->scales[j];
        if (!d) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int l = kq_nearest_int(x[16 * j + ii] / d);
            L[16 * j + ii] = (int8_t)(KQ_MAX(-32, KQ_MIN(31, l)) + 32);
        }
    }
    uint8_t * ql = y->ql;
    uint8_t * qh = y->qh;
    for (int j = 0; j < QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
            ql[l] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

static void quantize_row_q6_K_any(const float * x, block_q6_K * y, int64_t n, const float * quant_weights) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t i = 0; i < n / QK_K; i++) {
        for (int ib = 0; ib < QK_K / 16; ++ib) {
            const float * qw = quant_weights ? quant_weights + QK_K * i + 16 * ib : NULL;
            scales[ib] = kq_make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib, 1, qw);
        }
        q6_K_from_scales(x, &y[i], scales, L);
        x += QK_K;
    }
}

void kiln_quantize_row_q6_K_ref(const float * x, void * vy, int64_t k) {
    quantize_row_q6_K_any(x, (block_q6_K *) vy, k, NULL);
}

void kiln_dequantize_row_q6_K(const void * vx, float * y, int64_t k) {
    const block_q6_K * x = (const block_q6_K *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        for (int n = 0; n < QK_K; n += 128) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int8_t q1 = (int8_t)((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int8_t q2 = (int8_t)((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int8_t q3 = (int8_t)((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int8_t q4 = (int8_t)((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * sc[is + 0] * q1;
                y[l + 32] = d * sc[is + 2] * q2;
                y[l + 64] = d * sc[is + 4] * q3;
                y[l + 96] = d * sc[is + 6] * q4;
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}

/* ------------------------------------------------------------------ q8_K */

void kiln_quantize_row_q8_K_ref(const float * x, void * vy, int64_t k) {
    block_q8_K * y = (block_q8_K *) vy;
    for (int64_t i = 0; i < k / QK_K; i++) {
        float max = 0, amax = 0;
        for (int j = 0; j < QK_K; ++j) {
            const float ax = fabsf(x[j]);
            if (ax > amax) { amax = ax; max = x[j]; }
        }
        if (!amax) {
            y[i].d = 0;
            memset(y[i].qs, 0, QK_K);
            memset(y[i].bsums, 0, sizeof(y[i].bsums));
            x += QK_K;
            continue;
        }
        /* -127 (not -128) keeps every product of two quants in i16 range */
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; ++j) {
            const int v = kq_nearest_int(iscale * x[j]);
            y[i].qs[j] = (int8_t) KQ_MIN(127, v);
        }
        for (int j = 0; j < QK_K / 16; ++j) {
            int sum = 0;
            for (int ii = 0; ii < 16; ++ii) sum += y[i].qs[j * 16 + ii];
            y[i].bsums[j] = (int16_t) sum;
        }
        y[i].d = 1 / iscale;
        x += QK_K;
    }
}

void kiln_dequantize_row_q8_K(const void * vx, float * y, int64_t k) {
    const block_q8_K * x = (const block_q8_K *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        for (int j = 0; j < QK_K; ++j) *y++ = x[i].d * x[i].qs[j];
    }
}

/* ---- imatrix entry points for kiln_quantize_chunk ---------------------- */

void kiln_quantize_row_q2_K_imat(const float * x, void * y, int64_t n, const float * qw) {
    quantize_row_q2_K_imat(x, (block_q2_K *) y, n, qw);
}
void kiln_quantize_row_q3_K_imat(const float * x, void * y, int64_t n, const float * qw) {
    quantize_row_q3_K_imat(x, (block_q3_K *) y, n, qw);
}
void kiln_quantize_row_q4_K_imat(const float * x, void * y, int64_t n, const float * qw) {
    quantize_row_q4_K_imat(x, (block_q4_K *) y, n, qw);
}
void kiln_quantize_row_q5_K_imat(const float * x, void * y, int64_t n, const float * qw) {
    quantize_row_q5_K_imat(x, (block_q5_K *) y, n, qw);
}
void kiln_quantize_row_q6_K_imat(const float * x, void * y, int64_t n, const float * qw) {
    quantize_row_q6_K_any(x, (block_q6_K *) y, n, qw);
}
