/*
 * quants_impl.h — private helpers shared by the quantizer files.
 *
 * The arithmetic here is deliberately written in the same float operation
 * order as ggml's reference quantizers, and these files are compiled with
 * -ffp-contract=off: a fused multiply-add would change rounding, and then the
 * bytes would no longer match what llama.cpp writes for the same input.
 */
#ifndef KILN_QUANTS_IMPL_H
#define KILN_QUANTS_IMPL_H

#include <math.h>
#include <string.h>
#include <stdint.h>
#include "kiln.h"
#include "blocks.h"

#define KQ_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KQ_MIN(a, b) ((a) < (b) ? (a) : (b))

/* fp16 -> fp32 inline (exact, like kiln_fp16_to_fp32): the dot products
 * convert 2-4 scales per block, so a call per scale costs as much as the
 * block's arithmetic. SIMD files may define KQ_H2F to a hardware convert
 * before including this header. */
static inline float kq_h2f(uint16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) bits = sign | 0x7f800000u | (mant << 13);
    else if (exp != 0) bits = sign | ((exp + 112) << 23) | (mant << 13);
    else if (mant == 0) bits = sign;
    else {
        const float v = (float) mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
#ifndef KQ_H2F
#define KQ_H2F(h) kq_h2f(h)
#endif
#define KQ_F2H(f) kiln_fp32_to_fp16(f)

#define KQ_GROUP_MAX_EPS 1e-15f

/* Round-to-nearest through the float mantissa (valid for |v| < 2^22): ggml
 * uses this exact trick, which rounds ties to even, unlike lroundf. */
static inline int kq_nearest_int(float v) {
    float t = v + 12582912.f;
    int32_t i;
    memcpy(&i, &t, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

/* 6-bit scale/min pairs of q4_K/q5_K: 8 pairs packed into 12 bytes. */
static inline void kq_get_scale_min_k4(int j, const uint8_t * q, uint8_t * d, uint8_t * m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

extern const int8_t kiln_kvalues_iq4nl[16];

/* Scale searches of the k-quants (quants_search.c), same contracts as ggml's
 * make_qx_quants / make_q3_quants / make_qkx2_quants / make_qkx3_quants /
 * make_qp_quants. */
float kq_make_qx_quants(int n, int nmax, const float * x, int8_t * L, int rmse_type, const float * qw);
float kq_make_q3_quants(int n, int nmax, const float * x, int8_t * L, int do_rmse);
float kq_make_qkx2_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L,
                          float * the_min, uint8_t * Laux, float rmin, float rdelta, int nstep, int use_mad);
float kq_make_qkx3_quants(int n, int nmax, const float * x, const float * weights, uint8_t * L,
                          float * the_min, uint8_t * Laux, float rmin, float rdelta, int nstep, int use_mad);
float kq_make_qp_quants(int n, int nmax, const float * x, uint8_t * L, const float * quant_weights);

#endif
