/*
 * quants_iq4_tq.c — the non-linear 4-bit types IQ4_NL / IQ4_XS and the
 * ternary TQ1_0 / TQ2_0: dequantize and ggml-identical quantizers.
 */
#include "quants.h"
#include "quants_impl.h"

const int8_t kiln_kvalues_iq4nl[16] = {
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
};

/* Index of the level nearest to x in the sorted table (n a power of two);
 * ties go to the upper level. Comparing 2x with val[j-1]+val[j] keeps the
 * midpoint test exact. */
static inline int best_index_int8(int n, const int8_t * val, float x) {
    const float x2 = x + x;
    int idx = 0;
    for (int step = n >> 1; step > 0; step >>= 1) {
        const int j = idx + step;
        idx = (x2 >= (float)(val[j - 1] + val[j])) ? j : idx;
    }
    return idx;
}

/* One super-block (32 values for IQ4_NL, 256 for IQ4_XS): per 32-block,
 * fit a scale over 2*ntry+1 candidates, then (IQ4_XS) quantize the block
 * scales to 6 bits and requantize. */
static void iq4_quantize_superblock(int super_block_size, const float * x, kiln_fp16_t * dh, uint8_t * q4,
                                    uint16_t * scales_h, uint8_t * scales_l, const float * quant_weights, int ntry) {
    const int block_size = 32;
    const int8_t * values = kiln_kvalues_iq4nl;
    float scales[QK_K / 32], weight[32];
    uint8_t L[QK_K];

    float sigma2 = 0;
    for (int j = 0; j < super_block_size; ++j) sigma2 += x[j] * x[j];
    sigma2 *= 2.f / super_block_size;

    memset(q4, 0, (size_t) super_block_size / 2);
    dh[0] = KQ_F2H(0.f);

    float max_scale = 0, amax_scale = 0;
    for (int ib = 0; ib < super_block_size / block_size; ++ib) {
        const float * xb = x + ib * block_size;
        uint8_t * Lb = L + ib * block_size;
        if (quant_weights) {
            const float * qw = quant_weights + ib * block_size;
            for (int j = 0; j < block_size; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        } else {
            for (int j = 0; j < block_size; ++j) weight[j] = xb[j] * xb[j];
        }
        float amax = 0, max = 0;
        for (int j = 0; j < block_size; ++j) {
            const float ax = fabsf(xb[j]);
            if (ax > amax) { amax = ax; max = xb[j]; }
        }
        if (amax < KQ_GROUP_MAX_EPS) {
            scales[ib] = 0;
            memset(Lb, 0, (size_t) block_size);
            continue;
        }
        float d = ntry > 0 ? -max / values[0] : max / values[0];
        float id = 1 / d;
        float sumqx = 0, sumq2 = 0;
        for (int j = 0; j < block_size; ++j) {
            const float al = id * xb[j];
            const int l = best_index_int8(16, values, al);
            Lb[j] = (uint8_t) l;
            const float q = values[l];
            const float w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
        float best = d * sumqx;
        for (int itry = -ntry; itry <= ntry; ++itry) {
            id = (itry + values[0]) / max;
            sumqx = sumq2 = 0;
            for (int j = 0; j < block_size; ++j) {
                const float al = id * xb[j];
                const int l = best_index_int8(16, values, al);
                const float q = values[l];
                const float w = weight[j];
                sumqx += w * q * xb[j];
                sumq2 += w * q * q;
            }
            if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                d = sumqx / sumq2;
                best = d * sumqx;
            }
        }
        scales[ib] = d;
        const float abs_d = fabsf(d);
        if (abs_d > amax_scale) { amax_scale = abs_d; max_scale = d; }
    }

    if (super_block_size / block_size > 1) {
        const int nb = super_block_size / block_size;
        memset(scales_h, 0, (size_t)((nb + 7) / 8) * sizeof(uint16_t));
        const float d = -max_scale / 32;
        dh[0] = KQ_F2H(d);
        const float id = d ? 1 / d : 0.f;
        for (int ib = 0; ib < nb; ++ib) {
            int l = kq_nearest_int(id * scales[ib]);
            l = KQ_MAX(-32, KQ_MIN(31, l));
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            uint8_t * Lb = L + ib * block_size;
            const float * xb = x + ib * block_size;
            for (int j = 0; j < block_size; ++j) Lb[j] = (uint8_t) best_index_int8(16, values, idl * xb[j]);
            l += 32;
            const uint8_t l_l = (uint8_t)(l & 0xf), l_h = (uint8_t)(l >> 4);
            if (ib % 2 == 0) scales_l[ib / 2] = l_l;
            else scales_l[ib / 2] |= (uint8_t)(l_l << 4);
            scales_h[ib / 8] |= (uint16_t)(l_h << 2 * (ib % 8));
        }
    } else {
        dh[0] = KQ_F2H(scales[0]);
        if (ntry > 0) {
            const float id = scales[0] ? 1 / scales[0] : 0;
            for (int j = 0; j < super_block_size; ++j) L[j] = (uint8_t) best_index_int8(16, values, id * x[j]);
        }
    }
    for (int i = 0; i < super_block_size / 32; ++i) {
        for (int j = 0; j < 16; ++j) q4[16 * i + j] = (uint8_t)(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
}

void kiln_quantize_row_iq4_nl_ref(const float * x, void * vy, int64_t k) {
    block_iq4_nl * y = (block_iq4_nl *) vy;
    uint16_t unused_h;
    for (int64_t ib = 0; ib < k / QK4_NL; ++ib) {
        iq4_quantize_superblock(QK4_NL, x + QK4_NL * ib, &y[ib].d, y[ib].qs, &unused_h, NULL, NULL, -1);
    }
}

/* kiln_quantize_chunk path: ggml searches 7 candidates each side here. */
void kiln_quantize_row_iq4_nl_imat(const float * x, void * vy, int64_t k, const float * qw) {
    block_iq4_nl * y = (block_iq4_nl *) vy;
    uint16_t unused_h;
    for (int64_t ib = 0; ib < k / QK4_NL; ++ib) {
        iq4_quantize_superblock(QK4_NL, x + QK4_NL * ib, &y[ib].d, y[ib].qs, &unused_h, NULL,
                                qw ? qw + QK4_NL * ib : NULL, 7);
    }
}

void kiln_quantize_row_iq4_xs_imat(const float * x, void * vy, int64_t k, const float * qw) {
    block_iq4_xs * y = (block_iq4_xs *) vy;
    for (int64_t ib = 0; ib < k / QK_K; ++ib) {
        iq4_quantize_superblock(QK_K, x + QK_K * ib, &y[ib].d, y[ib].qs, &y[ib].scales_h, y[ib].scales_l,
                                qw ? qw + QK_K * ib : NULL, 7);
    }
}

void kiln_quantize_row_iq4_xs_ref(const float * x, void * vy, int64_t k) {
    kiln_quantize_row_iq4_xs_imat(x, vy, k, NULL);
}

void kiln_dequantize_row_iq4_nl(const void * vx, float * y, int64_t k) {
    const block_iq4_nl * x = (const block_iq4_nl *) vx;
    for (int64_t i = 0; i < k / QK4_NL; i++) {
        const uint8_t * qs = x[i].qs;
        const float d = KQ_H2F(x[i].d);
        for (int j = 0; j < QK4_NL / 2; ++j) {
            y[j] = d * kiln_kvalues_iq4nl[qs[j] & 0xf];
            y[j + QK4_NL / 2] = d * kiln_kvalues_iq4nl[qs[j] >> 4];
        }
        y += QK4_NL;
    }
}

void kiln_dequantize_row_iq4_xs(const void * vx, float * y, int64_t k) {
    const block_iq4_xs * x = (const block_iq4_xs *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const uint8_t * qs = x[i].qs;
        const float d = KQ_H2F(x[i].d);
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const float dl = d * (ls - 32);
            for (int j = 0; j < 16; ++j) {
                y[j] = dl * kiln_kvalues_iq4nl[qs[j] & 0xf];
                y[j + 16] = dl * kiln_kvalues_iq4nl[qs[j] >> 4];
            }
            y += 32;
            qs += 16;
        }
    }
}

/* ------------------------------------------------------------- ternary */

/* Five trits per byte, stored as a fixed-point fraction of 3^5 (rounded up)
 * so that multiplying by 3 pops the next trit off the top. */
static uint8_t tq1_pack(const float * x, int stride, int count, float id) {
    uint8_t q = 0;
    for (int n = 0; n < count; ++n) {
        const int xi = (int) lroundf(x[n * stride] * id) + 1;
        q = (uint8_t)(q * 3 + xi);
    }
    if (count == 4) q = (uint8_t)(q * 3);
    return (uint8_t)(((uint16_t) q * 256 + (243 - 1)) / 243);
}

void kiln_quantize_row_tq1_0_ref(const float * x, void * vy, int64_t k) {
    block_tq1_0 * y = (block_tq1_0 *) vy;
    const size_t nqs = sizeof(y->qs), nqh = sizeof(y->qh);
    for (int64_t i = 0; i < k / QK_K; i++) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = KQ_MAX(amax, fabsf(x[j]));
        const float d = amax;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        for (size_t j = 0; j < nqs - nqs % 32; j += 32) {
            for (int m = 0; m < 32; ++m) y[i].qs[j + m] = tq1_pack(x + m, 32, 5, id);
            x += 5 * 32;
        }
        for (size_t j = nqs - nqs % 32; j < nqs; j += 16) {
            for (int m = 0; m < 16; ++m) y[i].qs[j + m] = tq1_pack(x + m, 16, 5, id);
            x += 5 * 16;
        }
        for (size_t j = 0; j < nqh; ++j) y[i].qh[j] = tq1_pack(x + j, (int) nqh, 4, id);
        x += 4 * nqh;
    }
}

void kiln_quantize_row_tq2_0_ref(const float * x, void * vy, int64_t k) {
    block_tq2_0 * y = (block_tq2_0 *) vy;
    for (int64_t i = 0; i < k / QK_K; i++) {
        float amax = 0.0f;
        for (int j = 0; j < QK_K; j++) amax = KQ_MAX(amax, fabsf(x[j]));
        const float d = amax;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        for (size_t j = 0; j < sizeof(y->qs); j += 32) {
            for (int m = 0; m < 32; ++m) {
                uint8_t q = 0;
                for (int n = 0; n < 4; ++n) {
                    const int xi = (int) lroundf(x[m + n * 32] * id) + 1;
                    q = (uint8_t)(q + ((xi & 3) << (2 * n)));
                }
                y[i].qs[j + m] = q;
            }
            x += 4 * 32;
        }
    }
}

static inline float tq1_trit(uint8_t b, uint8_t pow3, float d) {
    const uint8_t q = (uint8_t)(b * pow3);
    const int16_t xi = (int16_t)(((uint16_t) q * 3) >> 8);
    return (float)(xi - 1) * d;
}

void kiln_dequantize_row_tq1_0(const void * vx, float * y, int64_t k) {
    const block_tq1_0 * x = (const block_tq1_0 *) vx;
    static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
    const size_t nqs = sizeof(x->qs), nqh = sizeof(x->qh);
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d = KQ_H2F(x[i].d);
        for (size_t j = 0; j < nqs - nqs % 32; j += 32)
            for (int n = 0; n < 5; ++n)
                for (int m = 0; m < 32; ++m) *y++ = tq1_trit(x[i].qs[j + m], pow3[n], d);
        for (size_t j = nqs - nqs % 32; j < nqs; j += 16)
            for (int n = 0; n < 5; ++n)
                for (int m = 0; m < 16; ++m) *y++ = tq1_trit(x[i].qs[j + m], pow3[n], d);
        for (int n = 0; n < 4; ++n)
            for (size_t j = 0; j < nqh; ++j) *y++ = tq1_trit(x[i].qh[j], pow3[n], d);
    }
}

void kiln_dequantize_row_tq2_0(const void * vx, float * y, int64_t k) {
    const block_tq2_0 * x = (const block_tq2_0 *) vx;
    for (int64_t i = 0; i < k / QK_K; ++i) {
        const float d = KQ_H2F(x[i].d);
        for (size_t j = 0; j < sizeof(x->qs); j += 32)
            for (int l = 0; l < 4; ++l)
                for (int m = 0; m < 32; ++m) *y++ = (float)(((x[i].qs[j + m] >> (l * 2)) & 3) - 1) * d;
    }
}
