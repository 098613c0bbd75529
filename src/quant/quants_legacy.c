/*
 * quants_legacy.c — the 32-element block types Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0, Q8_1: dequantize, ggml-identical reference quantizers and the
 * imatrix-weighted quantizers used by kiln_quantize_chunk.
 */
#include "quants.h"
#include "quants_impl.h"

#include <float.h>

/* Scale from the signed value of largest magnitude, so that value lands on
 * the most negative level exactly (e.g. -8 for 4 bits). */
static float absmax_signed(const float * x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        const float v = x[j];
        if (amax < fabsf(v)) { amax = fabsf(v); max = v; }
    }
    return max;
}

void kiln_quantize_row_q4_0_ref(const float * x, void * vy, int64_t k) {
    block_q4_0 * y = (block_q4_0 *) vy;
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK4_0;
        const float d = absmax_signed(xb, QK4_0) / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            const float x0 = xb[j] * id;
            const float x1 = xb[QK4_0 / 2 + j] * id;
            const int q0 = KQ_MIN(15, (int8_t)(x0 + 8.5f));
            const int q1 = KQ_MIN(15, (int8_t)(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void kiln_quantize_row_q4_1_ref(const float * x, void * vy, int64_t k) {
    block_q4_1 * y = (block_q4_1 *) vy;
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK4_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK4_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        y[i].m = KQ_F2H(min);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[QK4_1 / 2 + j] - min) * id;
            const int q0 = KQ_MIN(15, (int8_t)(x0 + 0.5f));
            const int q1 = KQ_MIN(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Pack 32 5-bit quants (element j and j+16 share a byte): low nibbles in qs,
 * bit 4 of element j in bit j of qh. */
static void pack_q5(const uint8_t * L, uint8_t * qs, uint8_t * qh_out) {
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
        const uint8_t a = L[j], b = L[j + 16];
        qs[j] = (uint8_t)((a & 0x0F) | ((b & 0x0F) << 4));
        qh |= ((a & 0x10u) >> 4) << j;
        qh |= ((b & 0x10u) >> 4) << (j + 16);
    }
    memcpy(qh_out, &qh, 4);
}

void kiln_quantize_row_q5_0_ref(const float * x, void * vy, int64_t k) {
    block_q5_0 * y = (block_q5_0 *) vy;
    const int64_t nb = k / QK5_0;
    uint8_t L[QK5_0];
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK5_0;
        const float d = absmax_signed(xb, QK5_0) / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        for (int j = 0; j < QK5_0; ++j) {
            const float v = xb[j] * id;
            L[j] = (uint8_t) KQ_MIN(31, (int8_t)(v + 16.5f));
        }
        pack_q5(L, y[i].qs, y[i].qh);
    }
}

void kiln_quantize_row_q5_1_ref(const float * x, void * vy, int64_t k) {
    block_q5_1 * y = (block_q5_1 *) vy;
    const int64_t nb = k / QK5_1;
    uint8_t L[QK5_1];
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK5_1;
        float min = FLT_MAX, max = -FLT_MAX;
        for (int j = 0; j < QK5_1; j++) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        y[i].m = KQ_F2H(min);
        for (int j = 0; j < QK5_1; ++j) {
            const float v = (xb[j] - min) * id;
            L[j] = (uint8_t)(v + 0.5f);
        }
        pack_q5(L, y[i].qs, y[i].qh);
    }
}

void kiln_quantize_row_q8_0_ref(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK8_0;
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) amax = KQ_MAX(amax, fabsf(xb[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        for (int j = 0; j < QK8_0; ++j) y[i].qs[j] = (int8_t) roundf(xb[j] * id);
    }
}

void kiln_quantize_row_q8_1_ref(const float * x, void * vy, int64_t k) {
    block_q8_1 * y = (block_q8_1 *) vy;
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float * xb = x + i * QK8_1;
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) amax = KQ_MAX(amax, fabsf(xb[j]));
        const float d = amax / 127;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = KQ_F2H(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; ++j) {
            y[i].qs[j] = (int8_t) roundf(xb[j] * id);
            sum += y[i].qs[j];
        }
        y[i].s = KQ_F2H(sum * d);
    }
}

/* Activation quantizers for mul_mat (from_float of Q8_0/Q8_1). They differ
 * from the reference quantizers above only in rounding, and follow ggml's
 * x86 SIMD quantize_row_q8_0/q8_1 (which llama.cpp runs on x86): scale by
 * 127/amax instead of 1/(amax/127), and round half to even instead of away
 * from zero. Exact ties occur in real models, and each one that rounds the
 * other way moves an activation by one step; tests/oracle saw whole greedy
 * continuations diverge from llama.cpp on that alone. Weights keep the
 * reference quantizers (kiln-quantize must write ggml's bytes). llama.cpp's
 * arm64 build scales by 1 / (amax / 127) instead: the _arm versions below. */

/* one block of 32 values: the quants (half to even) and the scale; s: the
 * quants' sum, when not NULL */
static inline float act_block(const float * xb, int8_t * qs, int * s) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = KQ_MAX(amax, fabsf(xb[j]));
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
        /* |v| <= 127 for finite blocks; an inf or NaN activation (a
         * degenerate model) becomes 0 instead of an undefined conversion */
        const float v = xb[j] * id;
        qs[j] = (int8_t) (fabsf(v) <= 128.0f ? rintf(v) : 0.0f);
        sum += qs[j];
    }
    if (s) *s = sum;
    return amax / 127.0f;
}

void kiln_quantize_row_q8_0_act(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    for (int64_t i = 0; i < k / QK8_0; i++) y[i].d = KQ_F2H(act_block(x + i * QK8_0, y[i].qs, NULL));
}

void kiln_quantize_row_q8_1_act(const float * x, void * vy, int64_t k) {
    block_q8_1 * y = (block_q8_1 *) vy;
    for (int64_t i = 0; i < k / QK8_1; i++) {
        int sum = 0;
        const float d = act_block(x + i * QK8_1, y[i].qs, &sum);
        y[i].d = KQ_F2H(d);
        y[i].s = KQ_F2H(sum * d);
    }
}

/* The activation quantizers of ggml's arm64 build (quantize_row_q8_0 /
 * q8_1 on NEON, and its repacked-matmul quantizers): as the x86 ones above
 * but scaled by id = 1 / (amax / 127), which rounds differently from
 * 127 / amax for some amax; round half to even (vcvtnq). q8_1's s is
 * d * f32(sum of the i32 conversions). Scalar code: the same bytes as the
 * vectors, also where a subnormal amax makes the scaled values huge. */

/* max |x| over a block as NEON's FMAX tree gives it: a NaN anywhere wins
 * (the block's quants then become 0 and d NaN) */
static float amax_arm(const float * xb) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = fabsf(xb[j]);
        if (a != a) return a;
        amax = KQ_MAX(amax, a);
    }
    return amax;
}

/* vcvtnq_s32_f32: nearest, ties to even; saturating; NaN -> 0 */
static int32_t cvtn_s32(float v) {
    if (!(v == v)) return 0;
    if (v >= 2147483648.0f) return INT32_MAX;
    if (v <= -2147483648.0f) return INT32_MIN;
    return (int32_t) rintf(v);
}
/* one block: the quants (the low byte of each i32, as ggml stores them to
 * int8_t), the scale returned, the i32 conversions' sum (wrapping) */
static float act_block_arm(const float * xb, int8_t * qs, int32_t * s) {
    const float d = amax_arm(xb) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint32_t sum = 0;
    for (int j = 0; j < 32; ++j) {
        const int32_t v = cvtn_s32(xb[j] * id);
        qs[j] = (int8_t) (uint8_t) (uint32_t) v;
        sum += (uint32_t) v;
    }
    *s = (int32_t) sum;
    return d;
}

void kiln_quantize_row_q8_0_act_arm(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    int32_t sum;
    for (int64_t i = 0; i < k / QK8_0; i++) y[i].d = KQ_F2H(act_block_arm(x + i * QK8_0, y[i].qs, &sum));
}

void kiln_quantize_row_q8_1_act_arm(const float * x, void * vy, int64_t k) {
    block_q8_1 * y = (block_q8_1 *) vy;
    for (int64_t i = 0; i < k / QK8_1; i++) {
        int32_t sum;
        const float d = act_block_arm(x + i * QK8_1, y[i].qs, &sum);
        y[i].d = KQ_F2H(d);
        y[i].s = KQ_F2H(d * (float) sum);
    }
}

void kiln_dequantize_row_q4_0(const void * vx, float * y, int64_t k) {
    const block_q4_0 * x = (const block_q4_0 *) vx;
    const int64_t nb = k / QK4_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d);
        for (int j = 0; j < QK4_0 / 2; ++j) {
            y[i * QK4_0 + j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[i * QK4_0 + j + QK4_0 / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void kiln_dequantize_row_q4_1(const void * vx, float * y, int64_t k) {
    const block_q4_1 * x = (const block_q4_1 *) vx;
    const int64_t nb = k / QK4_1;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d), m = KQ_H2F(x[i].m);
        for (int j = 0; j < QK4_1 / 2; ++j) {
            y[i * QK4_1 + j] = (x[i].qs[j] & 0x0F) * d + m;
            y[i * QK4_1 + j + QK4_1 / 2] = (x[i].qs[j] >> 4) * d + m;
        }
    }
}

void kiln_dequantize_row_q5_0(const void * vx, float * y, int64_t k) {
    const block_q5_0 * x = (const block_q5_0 *) vx;
    const int64_t nb = k / QK5_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < QK5_0 / 2; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            y[i * QK5_0 + j] = (((x[i].qs[j] & 0x0F) | h0) - 16) * d;
            y[i * QK5_0 + j + QK5_0 / 2] = (((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

void kiln_dequantize_row_q5_1(const void * vx, float * y, int64_t k) {
    const block_q5_1 * x = (const block_q5_1 *) vx;
    const int64_t nb = k / QK5_1;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d), m = KQ_H2F(x[i].m);
        uint32_t qh;
        memcpy(&qh, x[i].qh, 4);
        for (int j = 0; j < QK5_1 / 2; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            y[i * QK5_1 + j] = ((x[i].qs[j] & 0x0F) | h0) * d + m;
            y[i * QK5_1 + j + QK5_1 / 2] = ((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

void kiln_dequantize_row_q8_0(const void * vx, float * y, int64_t k) {
    const block_q8_0 * x = (const block_q8_0 *) vx;
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d);
        for (int j = 0; j < QK8_0; ++j) y[i * QK8_0 + j] = x[i].qs[j] * d;
    }
}

/* ggml has no q8_1 dequantizer; this one uses d and ignores s. */
void kiln_dequantize_row_q8_1(const void * vx, float * y, int64_t k) {
    const block_q8_1 * x = (const block_q8_1 *) vx;
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; i++) {
        const float d = KQ_H2F(x[i].d);
        for (int j = 0; j < QK8_1; ++j) y[i * QK8_1 + j] = x[i].qs[j] * d;
    }
}

/* ---- imatrix-weighted variants (one row at a time, as ggml) ----------- */

static float row_sigma2(const float * x, int64_t n) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
    return sum_x2 / n;
}

void kiln_quantize_row_q4_0_imat(const float * x, void * vy, int64_t n, const float * qw_row) {
    block_q4_0 * y = (block_q4_0 *) vy;
    float weight[32];
    int8_t L[32];
    const float sigma2 = row_sigma2(x, n);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        const float * qw = qw_row + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        const float d = kq_make_qx_quants(32, 8, xb, L, 1, weight);
        y[ib].d = KQ_F2H(d);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void kiln_quantize_row_q4_1_imat(const float * x, void * vy, int64_t n, const float * qw_row) {
    block_q4_1 * y = (block_q4_1 *) vy;
    float weight[32];
    uint8_t L[32], Laux[32];
    const float sigma2 = row_sigma2(x, n);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        const float * qw = qw_row + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        const float d = kq_make_qkx3_quants(32, 15, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, 0);
        y[ib].d = KQ_F2H(d);
        y[ib].m = KQ_F2H(-min);
        for (int j = 0; j < 16; ++j) y[ib].qs[j] = (uint8_t)(L[j] | (L[j + 16] << 4));
    }
}

void kiln_quantize_row_q5_0_imat(const float * x, void * vy, int64_t n, const float * qw_row) {
    block_q5_0 * y = (block_q5_0 *) vy;
    float weight[32];
    int8_t L[32];
    const float sigma2 = row_sigma2(x, n);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        const float * qw = qw_row + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        const float d = kq_make_qx_quants(32, 16, xb, L, 1, weight);
        y[ib].d = KQ_F2H(d);
        pack_q5((const uint8_t *) L, y[ib].qs, y[ib].qh);
    }
}

void kiln_quantize_row_q5_1_imat(const float * x, void * vy, int64_t n, const float * qw_row) {
    block_q5_1 * y = (block_q5_1 *) vy;
    float weight[32];
    uint8_t L[32], Laux[32];
    const float sigma2 = row_sigma2(x, n);
    for (int64_t ib = 0; ib < n / 32; ++ib) {
        const float * xb = x + 32 * ib;
        const float * qw = qw_row + 32 * ib;
        for (int j = 0; j < 32; ++j) weight[j] = qw[j] * sqrtf(sigma2 + xb[j] * xb[j]);
        float min;
        const float d = kq_make_qkx3_quants(32, 31, xb, weight, L, &min, Laux, -0.9f, 0.05f, 36, 0);
        y[ib].d = KQ_F2H(d);
        y[ib].m = KQ_F2H(-min);
        pack_q5(L, y[ib].qs, y[ib].qh);
    }
}
