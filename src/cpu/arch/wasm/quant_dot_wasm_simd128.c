/*
 * quant_dot_wasm_simd128.c — wasm SIMD128 quantized dot products.
 *
 * i8 x i8 products: both operands widen to i16 and meet in
 * i32x4.dot_i16x8_s (dot16 below). That is the one place a relaxed-SIMD
 * build would differ: i32x4.relaxed_dot_i8x16_i7x16_add_s needs its second
 * operand in 0..127 (x86 lowers it to pmaddubsw, unsigned x signed), so a
 * relaxed variant would feed it the activations as the signed operand and
 * the weights as 7-bit unsigned values (offset quants, e.g. q4_0 as 0..15
 * with the -8 folded into a per-block sum). It would live in its own file
 * with its own ISA suffix and kernel-table entry, built separately.
 */
#include <wasm_simd128.h>
#include <string.h>

#include "../quant_dot.h"
#include "blocks.h"
#include "quants_impl.h"
#include "quants.h"
#include "simd128_common.h"

static inline v128_t dot16(v128_t acc, v128_t a, v128_t b) {
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), wasm_i16x8_extend_low_i8x16(b)));
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), wasm_i16x8_extend_high_i8x16(b)));
}

static inline int hsum_i32(v128_t v) {
    return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
           wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
}

#define hsum_f32 kiln_simd128_hsum_f32

static inline int dot16_sum(v128_t a, v128_t b) { return hsum_i32(dot16(wasm_i32x4_splat(0), a, b)); }


static inline v128_t fma4(v128_t acc, v128_t isum, float d) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), wasm_f32x4_splat(d)));
}

/* 32 bits -> two 16-byte masks (0xff where the bit is set) */
static inline void bits_32(const uint8_t * p, v128_t * lo, v128_t * hi) {
    uint32_t u;
    memcpy(&u, p, 4);
    const v128_t b = wasm_i32x4_splat((int32_t) u);
    const v128_t m = wasm_i8x16_const(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
    const v128_t s0 = wasm_i8x16_const(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const v128_t s1 = wasm_i8x16_const(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    *lo = wasm_i8x16_eq(wasm_v128_and(wasm_i8x16_swizzle(b, s0), m), m);
    *hi = wasm_i8x16_eq(wasm_v128_and(wasm_i8x16_swizzle(b, s1), m), m);
}

/* ---- 32-element blocks -------------------------------------------------- */

/* The i32 lanes of simd128_common.h's q4 product (the x4 kernel makes the
 * same ones, so repacked and plain rows give bit-identical floats). */
void q4_0_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const struct kiln_simd128_q8_eo ys = kiln_simd128_q8_split(y[i].qs);
        const v128_t p = wasm_i32x4_sub(kiln_simd128_q4_dot(ld(x[i].qs), &ys), kiln_simd128_q4_corr(&ys));
        acc = fma4(acc, p, KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = hsum_f32(acc);
}

void q4_1_q8_1_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_1 * x = vx;
    const block_q8_1 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    float summs = 0;
    const v128_t m4 = wasm_i8x16_splat(0x0f);
    for (int64_t i = 0; i < n / QK8_1; ++i) {
        summs += KQ_H2F(x[i].m) * KQ_H2F(y[i].s);
        const v128_t b = ld(x[i].qs);
        const v128_t p = dot16(dot16(wasm_i32x4_splat(0), wasm_v128_and(b, m4), ld(y[i].qs)), wasm_u8x16_shr(b, 4), ld(y[i].qs + 16));
        acc = fma4(acc, p, KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = hsum_f32(acc) + summs;
}

void q5_0_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_0 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    const v128_t m4 = wasm_i8x16_splat(0x0f), f0 = wasm_i8x16_splat((int8_t) 0xf0);
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        v128_t hlo, hhi;
        bits_32(x[i].qh, &hlo, &hhi);
        const v128_t b = ld(x[i].qs);
        /* nibble | 0xf0 where the 5th bit is clear reads as nibble - 16 */
        const v128_t lo = wasm_v128_or(wasm_v128_and(b, m4), wasm_v128_andnot(f0, hlo));
        const v128_t hi = wasm_v128_or(wasm_u8x16_shr(b, 4), wasm_v128_andnot(f0, hhi));
        const v128_t p = dot16(dot16(wasm_i32x4_splat(0), lo, ld(y[i].qs)), hi, ld(y[i].qs + 16));
        acc = fma4(acc, p, KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = hsum_f32(acc);
}

void q5_1_q8_1_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_1 * x = vx;
    const block_q8_1 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    float summs = 0;
    const v128_t m4 = wasm_i8x16_splat(0x0f), k10 = wasm_i8x16_splat(0x10);
    for (int64_t i = 0; i < n / QK8_1; ++i) {
        summs += KQ_H2F(x[i].m) * KQ_H2F(y[i].s);
        v128_t hlo, hhi;
        bits_32(x[i].qh, &hlo, &hhi);
        const v128_t b = ld(x[i].qs);
        const v128_t lo = wasm_v128_or(wasm_v128_and(b, m4), wasm_v128_and(hlo, k10));
        const v128_t hi = wasm_v128_or(wasm_u8x16_shr(b, 4), wasm_v128_and(hhi, k10));
        const v128_t p = dot16(dot16(wasm_i32x4_splat(0), lo, ld(y[i].qs)), hi, ld(y[i].qs + 16));
        acc = fma4(acc, p, KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = hsum_f32(acc) + summs;
}

void q8_0_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    /* the scalar reference's float order (one exact integer sum per
     * block), which the x4 kernel shares with one convert per 4 rows */
    float sumf = 0;
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const v128_t p = dot16(dot16(wasm_i32x4_splat(0), ld(x[i].qs), ld(y[i].qs)), ld(x[i].qs + 16), ld(y[i].qs + 16));
        sumf += (float) kiln_simd128_i32_hsum(p) * (KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = sumf;
}

static inline void iq4nl_lookup(const uint8_t * qs, v128_t * lo, v128_t * hi) {
    const v128_t values = ld(kiln_kvalues_iq4nl);
    const v128_t b = ld(qs);
    *lo = wasm_i8x16_swizzle(values, wasm_v128_and(b, wasm_i8x16_splat(0x0f)));
    *hi = wasm_i8x16_swizzle(values, wasm_u8x16_shr(b, 4));
}

void iq4_nl_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_nl * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    for (int64_t i = 0; i < n / QK4_NL; ++i) {
        v128_t lo, hi;
        iq4nl_lookup(x[i].qs, &lo, &hi);
        const v128_t p = dot16(dot16(wasm_i32x4_splat(0), lo, ld(y[i].qs)), hi, ld(y[i].qs + 16));
        acc = fma4(acc, p, KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = hsum_f32(acc);
}

/* ---- k-quants ----------------------------------------------------------- */

void q2_K_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q2_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const v128_t m3 = wasm_i8x16_splat(3);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int k = 0; k < 2; ++k) {
            const v128_t b0 = ld(x[i].qs + 32 * k), b1 = ld(x[i].qs + 32 * k + 16);
            for (int p = 0; p < 4; ++p) {
                const v128_t q0 = wasm_v128_and(wasm_u8x16_shr(b0, 2 * p), m3);
                const v128_t q1 = wasm_v128_and(wasm_u8x16_shr(b1, 2 * p), m3);
                const int is = 8 * k + 2 * p;
                isum += (x[i].scales[is] & 0xF) * dot16_sum(q0, ld(q8));
                isum += (x[i].scales[is + 1] & 0xF) * dot16_sum(q1, ld(q8 + 16));
                q8 += 32;
            }
        }
        sumf += y[i].d * KQ_H2F(x[i].d) * isum - y[i].d * KQ_H2F(x[i].dmin) * summs;
    }
    *s = sumf;
}

void q3_K_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q3_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const v128_t m3 = wasm_i8x16_splat(3), k4 = wasm_i8x16_splat(4), zero = wasm_i8x16_splat(0);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int sc[16];
        for (int j = 0; j < 16; ++j) {
            const int lo = j < 8 ? x[i].scales[j] & 0xF : x[i].scales[j - 8] >> 4;
            sc[j] = (lo | (((x[i].scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
        }
        const v128_t h0 = ld(x[i].hmask), h1 = ld(x[i].hmask + 16);
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int k = 0; k < 2; ++k) {
            const v128_t b0 = ld(x[i].qs + 32 * k), b1 = ld(x[i].qs + 32 * k + 16);
            for (int p = 0; p < 4; ++p) {
                const v128_t hm = wasm_i8x16_splat((int8_t) (1u << (4 * k + p)));
                /* subtract 4 where the high bit is clear */
                const v128_t n0 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(h0, hm), zero), k4);
                const v128_t n1 = wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(h1, hm), zero), k4);
                const v128_t q0 = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(b0, 2 * p), m3), n0);
                const v128_t q1 = wasm_i8x16_sub(wasm_v128_and(wasm_u8x16_shr(b1, 2 * p), m3), n1);
                const int is = 8 * k + 2 * p;
                isum += sc[is] * dot16_sum(q0, ld(q8));
                isum += sc[is + 1] * dot16_sum(q1, ld(q8 + 16));
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

void q4_K_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const v128_t m4 = wasm_i8x16_splat(0xf);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const uint8_t * q4 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 4; ++j) {
            const v128_t b0 = ld(q4), b1 = ld(q4 + 16);
            const v128_t lo = dot16(dot16(wasm_i32x4_splat(0), wasm_v128_and(b0, m4), ld(q8)), wasm_v128_and(b1, m4), ld(q8 + 16));
            const v128_t hi = dot16(dot16(wasm_i32x4_splat(0), wasm_u8x16_shr(b0, 4), ld(q8 + 32)), wasm_u8x16_shr(b1, 4), ld(q8 + 48));
            isum += sc[2 * j] * hsum_i32(lo) + sc[2 * j + 1] * hsum_i32(hi);
            q4 += 32;
            q8 += 64;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum - KQ_H2F(x[i].dmin) * y[i].d * k4_mins_dot(mn, y[i].bsums);
    }
    *s = sumf;
}

void q5_K_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const v128_t m4 = wasm_i8x16_splat(0xf), k10 = wasm_i8x16_splat(0x10), zero = wasm_i8x16_splat(0);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const v128_t qh0 = ld(x[i].qh), qh1 = ld(x[i].qh + 16);
        const uint8_t * q5 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int j = 0; j < 4; ++j) {
            const v128_t b0 = ld(q5), b1 = ld(q5 + 16);
            const v128_t ulo = wasm_i8x16_splat((int8_t) (1u << (2 * j))), uhi = wasm_i8x16_splat((int8_t) (2u << (2 * j)));
            const v128_t l0 = wasm_v128_or(wasm_v128_and(b0, m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh0, ulo), zero), k10));
            const v128_t l1 = wasm_v128_or(wasm_v128_and(b1, m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh1, ulo), zero), k10));
            const v128_t g0 = wasm_v128_or(wasm_u8x16_shr(b0, 4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh0, uhi), zero), k10));
            const v128_t g1 = wasm_v128_or(wasm_u8x16_shr(b1, 4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh1, uhi), zero), k10));
            const v128_t lo = dot16(dot16(wasm_i32x4_splat(0), l0, ld(q8)), l1, ld(q8 + 16));
            const v128_t hi = dot16(dot16(wasm_i32x4_splat(0), g0, ld(q8 + 32)), g1, ld(q8 + 48));
            isum += sc[2 * j] * hsum_i32(lo) + sc[2 * j + 1] * hsum_i32(hi);
            q5 += 32;
            q8 += 64;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum - KQ_H2F(x[i].dmin) * y[i].d * k4_mins_dot(mn, y[i].bsums);
    }
    *s = sumf;
}

void q6_K_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    const v128_t m4 = wasm_i8x16_splat(0xf), m3 = wasm_i8x16_splat(3), k32 = wasm_i8x16_splat(32);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int half = 0; half < 2; ++half) {
            for (int h16 = 0; h16 < 2; ++h16) {
                const v128_t l0 = ld(ql + 16 * h16), l1 = ld(ql + 32 + 16 * h16);
                const v128_t hb = ld(qh + 16 * h16);
                v128_t q[4];
                q[0] = wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(l0, m4), wasm_i8x16_shl(wasm_v128_and(hb, m3), 4)), k32);
                q[1] = wasm_i8x16_sub(wasm_v128_or(wasm_v128_and(l1, m4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 2), m3), 4)), k32);
                q[2] = wasm_i8x16_sub(wasm_v128_or(wasm_u8x16_shr(l0, 4), wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(hb, 4), m3), 4)), k32);
                q[3] = wasm_i8x16_sub(wasm_v128_or(wasm_u8x16_shr(l1, 4), wasm_i8x16_shl(wasm_u8x16_shr(hb, 6), 4)), k32);
                for (int p = 0; p < 4; ++p) isum += sc[2 * p + h16] * dot16_sum(q[p], ld(q8 + 32 * p + 16 * h16));
            }
            ql += 64; qh += 32; sc += 8; q8 += 128;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

void iq4_xs_q8_K_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_xs * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            v128_t lo, hi;
            iq4nl_lookup(x[i].qs + 16 * ib, &lo, &hi);
            isum += (ls - 32) * hsum_i32(dot16(dot16(wasm_i32x4_splat(0), lo, ld(q8)), hi, ld(q8 + 16)));
            q8 += 32;
        }
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

/* kiln_quantize_row_q8_0_act (llama.cpp's x86 rounding: id = 127 / amax,
 * round half to even) on SIMD128 vectors, the same bytes: the largest
 * magnitude is the same whatever the order of the max steps, the products
 * and roundings are per value, and a product over 128 in magnitude (an inf
 * activation) becomes 0 as there. A block with a NaN goes through the
 * reference, whose max depends on where the NaN sits. */
void kiln_quantize_row_q8_0_act__wasm_simd128(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    const v128_t lim = wasm_f32x4_splat(128.0f);
    for (int64_t i = 0; i < k / QK8_0; i++) {
        const float * xb = x + i * QK8_0;
        v128_t v[8], nan = wasm_i32x4_splat(0);
        for (int p = 0; p < 8; p++) {
            v[p] = wasm_v128_load(xb + 4 * p);
            nan = wasm_v128_or(nan, wasm_f32x4_ne(v[p], v[p]));
        }
        if (wasm_v128_any_true(nan)) {
            kiln_quantize_row_q8_0_act(xb, &y[i], QK8_0);
            continue;
        }
        v128_t m = wasm_f32x4_abs(v[0]);
        for (int p = 1; p < 8; p++) m = wasm_f32x4_max(m, wasm_f32x4_abs(v[p]));
        const float amax = KQ_MAX(KQ_MAX(wasm_f32x4_extract_lane(m, 0), wasm_f32x4_extract_lane(m, 1)),
                                  KQ_MAX(wasm_f32x4_extract_lane(m, 2), wasm_f32x4_extract_lane(m, 3)));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[i].d = KQ_F2H(amax / 127.0f);
        const v128_t mul = wasm_f32x4_splat(id);
        v128_t q[8];
        for (int p = 0; p < 8; p++) {
            const v128_t s = wasm_f32x4_mul(v[p], mul);
            const v128_t ok = wasm_f32x4_le(wasm_f32x4_abs(s), lim);
            q[p] = wasm_v128_and(wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(s)), ok);
        }
        for (int p = 0; p < 8; p += 4) {
            const v128_t lo = wasm_i16x8_narrow_i32x4(q[p], q[p + 1]), hi = wasm_i16x8_narrow_i32x4(q[p + 2], q[p + 3]);
            wasm_v128_store(y[i].qs + 4 * p, wasm_i8x16_narrow_i16x8(lo, hi));
        }
    }
}
