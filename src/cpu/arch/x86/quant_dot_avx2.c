/*
 * quant_dot_avx2.c — AVX2 (+FMA) quantized dot products. Compiled with
 * -mavx2 -mfma -mf16c for this file only; the kernel table selects them at
 * run time when the CPU has those features.
 *
 * Pattern: widen quants to bytes, multiply-add pairs of bytes into i16 with
 * maddubs (one operand must be unsigned: signed x signed goes through
 * |x| * sign(y, x)), then madd with the (sub-)block scales into i32, and
 * one float FMA per block. All loads are unaligned.
 */
#include <immintrin.h>
#include <string.h>
#include <math.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "blocks.h"
#include "quants_impl.h"
#include "quants.h"
#include "quant_iq4nl_x86.h"
#include "q6_K_x86.h"

static inline int hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* 16 bytes of nibbles -> 32 bytes: low nibbles first, then high nibbles */
static inline __m256i nibbles_32(const uint8_t * p) {
    const __m128i b = _mm_loadu_si128((const __m128i *) p);
    const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
    return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

/* 32 bits -> 32 bytes of 0xff (bit set) / 0x00 */
static inline __m256i bits_32(const uint8_t * p) {
    uint32_t u;
    memcpy(&u, p, 4);
    const __m256i sel = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                          0x0101010101010101LL, 0x0000000000000000LL);
    const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32((int) u), sel);
    const __m256i mask = _mm256_set1_epi64x((long long) 0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask);
}

/* signed x signed bytes -> 8 i32 pair sums */
static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* unsigned x signed bytes -> 8 i32 */
static inline __m256i dot_u8(__m256i x, __m256i y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), _mm256_set1_epi16(1));
}

/* ---- 32-element blocks -------------------------------------------------- */

void q4_0_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    /* One accumulator, in block order: the same order of additions as
     * llama.cpp's AVX2 kernel. Two accumulators were faster, but small
     * models are sensitive enough to the last bit that greedy output then
     * drifts from llama.cpp's (tests/oracle). */
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const __m256i q = _mm256_sub_epi8(nibbles_32(x[i].qs), _mm256_set1_epi8(8));
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, load32(y[i].qs))), acc);
    }
    *s = hsum_ps(acc);
}

void q4_1_q8_1_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_1 * x = vx;
    const block_q8_1 * y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK8_1; ++i) {
        summs += KQ_H2F(x[i].m) * KQ_H2F(y[i].s);
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(nibbles_32(x[i].qs), load32(y[i].qs))), acc);
    }
    *s = hsum_ps(acc) + summs;
}

void q5_0_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_0 * x = vx;
    const block_q8_0 * y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        /* nibble | 0xf0 where the 5th bit is clear reads as nibble - 16 */
        const __m256i hi = _mm256_andnot_si256(bits_32(x[i].qh), _mm256_set1_epi8((char) 0xf0));
        const __m256i q = _mm256_or_si256(nibbles_32(x[i].qs), hi);
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(q, load32(y[i].qs))), acc);
    }
    *s = hsum_ps(acc);
}

void q5_1_q8_1_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_1 * x = vx;
    const block_q8_1 * y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0;
    for (int64_t i = 0; i < n / QK8_1; ++i) {
        summs += KQ_H2F(x[i].m) * KQ_H2F(y[i].s);
        const __m256i hi = _mm256_and_si256(bits_32(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i q = _mm256_or_si256(nibbles_32(x[i].qs), hi);
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8(q, load32(y[i].qs))), acc);
    }
    *s = hsum_ps(acc) + summs;
}

void q8_0_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    /* one accumulator in block order, as llama.cpp (see q4_0 above) */
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(load32(x[i].qs), load32(y[i].qs))), acc);
    }
    *s = hsum_ps(acc);
}

/* iq4_nl's two orders (quant_iq4nl_x86.h); llama.cpp's AVX2 build sums
 * mat-vec with _gemv and batched with _vec_dot */
static inline __m256i iq4nl_isums_avx2(const uint8_t * qs, const int8_t * yq) {
    return dot_i8(iq4nl_lookup(qs), load32(yq));
}

KILN_IQ4NL_DOTS(avx2, iq4nl_isums_avx2)

/* ---- k-quants ----------------------------------------------------------- */

/* i16 scale vector for 32 bytes after maddubs: lanes 0..7 cover elements
 * 0..15 (scale a), lanes 8..15 elements 16..31 (scale b) */
static inline __m256i scales_2x16(int a, int b) {
    return _mm256_set_m128i(_mm_set1_epi16((short) b), _mm_set1_epi16((short) a));
}

void q2_K_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q2_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int summs = 0;
        for (int j = 0; j < 16; ++j) summs += y[i].bsums[j] * (x[i].scales[j] >> 4);
        const uint8_t * q2 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int k = 0; k < 2; ++k) {
            const __m256i bits = load32(q2 + 32 * k);
            for (int p = 0; p < 4; ++p) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                const int is = 8 * k + 2 * p;
                const __m256i prod = _mm256_maddubs_epi16(q, load32(q8));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(prod, scales_2x16(x[i].scales[is] & 0xF, x[i].scales[is + 1] & 0xF)));
                q8 += 32;
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * KQ_H2F(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
        mins += y[i].d * KQ_H2F(x[i].dmin) * summs;
    }
    *s = hsum_ps(acc) - mins;
}

static inline void q3_K_scales(const uint8_t * s, int8_t out[16]) {
    for (int j = 0; j < 16; ++j) {
        const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        out[j] = (int8_t) ((lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    }
}

void q3_K_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q3_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        int8_t sc[16];
        q3_K_scales(x[i].scales, sc);
        const __m256i hbits = load32(x[i].hmask);
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int k = 0; k < 2; ++k) {
            const __m256i bits = load32(x[i].qs + 32 * k);
            for (int p = 0; p < 4; ++p) {
                const int hb = 4 * k + p;
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * p), m3);
                /* 4 where the high bit is clear, subtracted after the product */
                const __m256i h = _mm256_and_si256(_mm256_srli_epi16(hbits, hb), _mm256_set1_epi8(1));
                const __m256i neg = _mm256_slli_epi16(_mm256_xor_si256(h, _mm256_set1_epi8(1)), 2);
                const __m256i y8 = load32(q8);
                const __m256i prod = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y8), _mm256_maddubs_epi16(neg, y8));
                const int is = 8 * k + 2 * p;
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(prod, scales_2x16(sc[is], sc[is + 1])));
                q8 += 32;
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(y[i].d * KQ_H2F(x[i].d)), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

static inline int k4_mins_dot(const uint8_t mn[8], const int16_t * bsums) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

/* the mins term in 4 lanes, as ggml x86's q4_K dot (k4_mins_fma) */
void q4_K_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0xF);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const uint8_t * q4 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = load32(q4 + 32 * j);
            const __m256i lo = _mm256_and_si256(bits, m4);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(q8)), _mm256_set1_epi16(sc[2 * j]));
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(q8 + 32)), _mm256_set1_epi16(sc[2 * j + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
            q8 += 64;
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
        mins = k4_mins_fma(mins, mn, y[i].bsums, KQ_H2F(x[i].dmin) * y[i].d);
    }
    *s = hsum_ps(acc) - k4_mins_sum(mins);
}

void q5_K_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    const __m256i one = _mm256_set1_epi8(1);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        const __m256i hbits = load32(x[i].qh);
        const uint8_t * q5 = x[i].qs;
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = load32(q5 + 32 * j);
            const __m256i hlo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j), one), 4);
            const __m256i hhi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hbits, 2 * j + 1), one), 4);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, m4), hlo);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4), hhi);
            const __m256i plo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load32(q8)), _mm256_set1_epi16(sc[2 * j]));
            const __m256i phi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load32(q8 + 32)), _mm256_set1_epi16(sc[2 * j + 1]));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(plo, phi));
            q8 += 64;
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
        /* one rounding per block, as ggml x86's q5_K dot accumulates its
         * mins term (an FMA) */
        mins = fmaf(KQ_H2F(x[i].dmin) * y[i].d, (float) k4_mins_dot(mn, y[i].bsums), mins);
    }
    *s = hsum_ps(acc) - mins;
}

/* ggml x86's lanes: unsigned 6-bit q times y and the scale per byte group,
 * the -32 offset taken off per lane from bsums x scales (q6_offset_lanes),
 * one FMA per super-block */
void q6_K_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const __m256i l0 = load32(ql), l1 = load32(ql + 32), h = load32(qh);
            __m256i q[4];
            q6_decode_half256(l0, l1, h, q);
            for (int p = 0; p < 4; ++p) {
                const __m256i y8 = load32(q8 + 32 * p);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(q[p], y8), scales_2x16(sc[2 * p], sc[2 * p + 1])));
            }
            ql += 64; qh += 32; sc += 8; q8 += 128;
        }
        sumi = _mm256_sub_epi32(sumi, q6_offset_lanes(x[i].scales, y[i].bsums));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
}

/* One q6_K row against 4 activation rows (vy + c * ys bytes): each half
 * super-block's 6-bit values are decoded once for the 4, then per row
 * q6_K_q8_K_vec_dot__avx2's very steps (the same i32 lane sums, exact in
 * any grouping; the same offset and float step per super-block), so every
 * s[c * ss] is bit-identical to a vec_dot call. */
void q6_K_q8_K_vec_dot_y4__avx2(int64_t n, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    const block_q6_K * x = vx;
    const block_q8_K * y[4];
    for (int c = 0; c < 4; ++c) y[c] = (const block_q8_K *) ((const char *) vy + (size_t) c * ys);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < n / QK_K; ++i) {
        __m256i sumi[4] = { _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256() };
        for (int half = 0; half < 2; ++half) {
            const uint8_t * ql = x[i].ql + 64 * half, * qh = x[i].qh + 32 * half;
            const int8_t * sc = x[i].scales + 8 * half;
            const __m256i l0 = load32(ql), l1 = load32(ql + 32), h = load32(qh);
            __m256i q[4];
            q6_decode_half256(l0, l1, h, q);
            for (int p = 0; p < 4; ++p) {
                const __m256i scp = scales_2x16(sc[2 * p], sc[2 * p + 1]);
                for (int c = 0; c < 4; ++c) {
                    const __m256i y8 = load32(y[c][i].qs + 128 * half + 32 * p);
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[p], y8), scp));
                }
            }
        }
        const float dx = KQ_H2F(x[i].d);
        for (int c = 0; c < 4; ++c) {
            const __m256i lanes = _mm256_sub_epi32(sumi[c], q6_offset_lanes(x[i].scales, y[c][i].bsums));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dx * y[c][i].d), _mm256_cvtepi32_ps(lanes), acc[c]);
        }
    }
    for (int c = 0; c < 4; ++c) s[(size_t) c * ss] = hsum_ps(acc[c]);
}

void iq4_xs_q8_K_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_xs * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const int8_t * q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
            const __m256i q = iq4nl_lookup(x[i].qs + 16 * ib);
            const __m256i y8 = load32(q8 + 32 * ib);
            const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(y8, q));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16((short) (ls - 32))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(sumi), acc);
    }
    *s = hsum_ps(acc);
    (void) hsum_i32;
}

/* kiln_quantize_row_q8_0_act on 8-lane vectors, the same bytes: amax is a
 * max (any order gives the same value without NaN), id = 127 / amax and d
 * = amax / 127 in float as there (F16C's round-to-nearest-even conversion,
 * the reference's), and vroundps/vcvtps2dq round half to even as rintf
 * does; a product over 128 in magnitude (an inf activation) becomes 0 as
 * there. A block with a NaN goes through the reference, whose max depends
 * on where the NaN sits. */
void kiln_quantize_row_q8_0_act__avx2(const float * x, void * vy, int64_t k) {
    block_q8_0 * y = (block_q8_0 *) vy;
    const __m256 sign = _mm256_set1_ps(-0.0f), lim = _mm256_set1_ps(128.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t i = 0; i < k / QK8_0; i++) {
        const float * xb = x + i * QK8_0;
        __m256 v[4], nan = _mm256_setzero_ps();
        for (int p = 0; p < 4; p++) {
            v[p] = _mm256_loadu_ps(xb + 8 * p);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[p], v[p], _CMP_UNORD_Q));
        }
        if (_mm256_movemask_ps(nan)) {
            kiln_quantize_row_q8_0_act(xb, &y[i], QK8_0);
            continue;
        }
        const __m256 m8 = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v[0]), _mm256_andnot_ps(sign, v[1])),
                                        _mm256_max_ps(_mm256_andnot_ps(sign, v[2]), _mm256_andnot_ps(sign, v[3])));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        const float d = amax / 127.0f;
        y[i].d = (kiln_fp16_t) _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        const __m256 mul = _mm256_set1_ps(id);
        __m256i q[4];
        for (int p = 0; p < 4; p++) {
            const __m256 s = _mm256_mul_ps(v[p], mul);
            const __m256 ok = _mm256_cmp_ps(_mm256_andnot_ps(sign, s), lim, _CMP_LE_OQ);
            q[p] = _mm256_and_si256(_mm256_cvtps_epi32(_mm256_round_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)),
                                    _mm256_castps_si256(ok));
        }
        /* i32 -> i8 (|q| <= 128: 128 only from a rounding tie at 127.5+, which 127 / amax never reaches) */
        const __m256i q01 = _mm256_packs_epi32(q[0], q[1]), q23 = _mm256_packs_epi32(q[2], q[3]);
        const __m256i b = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q01, q23), perm);
        _mm256_storeu_si256((__m256i *) y[i].qs, b);
    }
}
