/*
 * quant_k_avx512.c — the avx512 row's plain q4_K, q5_K and q6_K dot
 * products. Compiled with the avx512 row's flags (CMakeLists.txt) and
 * selected at run time with the rest of that row.
 *
 * Exactness rule (the row's, quant_avx512.c): bit-identical to the AVX2
 * kernel of the same slot (quant_dot_avx2.c). The AVX2 kernels form, per
 * super-block, an 8-lane i32 vector sumi (lane j: sub-block scale times the
 * 4 byte products at bytes 4j..4j+3 of each 32-byte chunk, summed over the
 * chunks; q6_K's lane j then minus the -32 offset of values 32j..32j+31,
 * q6_offset_lanes) and add it with one FMA. Here two 32-byte chunks go through one
 * 512-bit maddubs/madd (the same i16 and i32 values, so no new saturation),
 * and the two 256-bit halves are added at the end: lane j still holds the
 * same integer sum, exact in any grouping. The float steps (the FMA, the
 * mins term, the final reduction) are AVX2's, one for one.
 */
#include <immintrin.h>
#include <math.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "blocks.h"
#include "quants_impl.h"
#include "q6_K_x86.h"

/* the 8 lanes of AVX2's sumi: halves added */
static inline __m256i fold_halves(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* i16 scales after maddubs on [chunk a | chunk b] of a q4_K / q5_K
 * sub-block pair: sa for the low 256 bits, sb for the high */
static inline __m512i scales_2x32(int sa, int sb) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short) sa), _mm256_set1_epi16((short) sb), 1);
}

/* the mins term, as quant_dot_avx2.c sums it */
static inline int k4_mins(const uint8_t mn[8], const int16_t * bsums) {
    int s = 0;
    for (int j = 0; j < 8; ++j) s += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

/* 32 quant bytes as [low nibbles | high nibbles] (sub-blocks 2j, 2j + 1) */
static inline __m512i nibble_pair(const uint8_t * q) {
    const __m512i b = _mm512_broadcast_i64x4(load32(q));
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(b, shift), _mm512_set1_epi8(0x0f));
}

void q4_K_q8_K_vec_dot__avx512(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    __m128 mins = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        __m512i sumi = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m512i q = nibble_pair(x[i].qs + 32 * j);
            const __m512i yq = _mm512_loadu_si512((const void *) (y[i].qs + 64 * j));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yq), scales_2x32(sc[2 * j], sc[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold_halves(sumi)), acc);
        mins = k4_mins_fma(mins, mn, y[i].bsums, KQ_H2F(x[i].dmin) * y[i].d);
    }
    *s = hsum_ps(acc) - k4_mins_sum(mins);
}

void q5_K_q8_K_vec_dot__avx512(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    float mins = 0;
    const __m512i one = _mm512_set1_epi8(1);
    for (int64_t i = 0; i < n / QK_K; ++i) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) kq_get_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
        /* qh bit 2j of a byte is the fifth bit of sub-block 2j, bit 2j + 1 of 2j + 1 */
        const __m512i hb = _mm512_broadcast_i64x4(load32(x[i].qh));
        __m512i sumi = _mm512_setzero_si512();
        for (int j = 0; j < 4; ++j) {
            const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16((short) (2 * j)), _mm256_set1_epi16((short) (2 * j + 1)), 1);
            const __m512i h = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(hb, shift), one), 4);
            const __m512i q = _mm512_or_si512(nibble_pair(x[i].qs + 32 * j), h);
            const __m512i yq = _mm512_loadu_si512((const void *) (y[i].qs + 64 * j));
            sumi = _mm512_add_epi32(sumi, _mm512_madd_epi16(_mm512_maddubs_epi16(q, yq), scales_2x32(sc[2 * j], sc[2 * j + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x[i].d) * y[i].d), _mm256_cvtepi32_ps(fold_halves(sumi)), acc);
        mins = fmaf(KQ_H2F(x[i].dmin) * y[i].d, (float) k4_mins(mn, y[i].bsums), mins);
    }
    *s = hsum_ps(acc) - mins;
}

/* i16 scales for two 32-byte chunks of q6_K: 16 values per scale, so
 * sc[a], sc[a + 1] over the low 256 bits and sc[a + 2], sc[a + 3] over the
 * high (a = 0 or 4 of the half's 8 scales s8) */
static inline __m512i q6_scales(__m128i s8, int a) {
    const __m256i idx = _mm256_setr_epi8(a, a, a, a, a, a, a, a, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1,
                                         a + 2, a + 2, a + 2, a + 2, a + 2, a + 2, a + 2, a + 2,
                                         a + 3, a + 3, a + 3, a + 3, a + 3, a + 3, a + 3, a + 3);
    return _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(_mm256_broadcastsi128_si256(s8), idx));
}

/* a half super-block of q6_K (128 values) as unsigned 6-bit bytes: q01
 * = chunks [0 | 1], q23 = chunks [2 | 3] (32 bytes each), and their i16
 * scales (q6_scales) */
struct q6_half { __m512i q01, q23, s01, s23; };

static inline struct q6_half q6_decode_half(const uint8_t * ql, const uint8_t * qh, const int8_t * sc) {
    const __m512i m4 = _mm512_set1_epi8(0xF), m2 = _mm512_set1_epi8(3);
    /* the high 2 bits of chunks 0, 1 sit at bits 0-1, 2-3 of qh; of chunks 2, 3 at 4-5, 6-7 */
    const __m512i sh01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i l = _mm512_loadu_si512((const void *) ql); /* [l0 | l1] */
    const __m512i h = _mm512_broadcast_i64x4(load32(qh));
    struct q6_half r;
    r.q01 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh01), m2), 4));
    r.q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                            _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, sh23), m2), 4));
    const __m128i s8 = _mm_loadl_epi64((const __m128i *) sc);
    r.s01 = q6_scales(s8, 0);
    r.s23 = q6_scales(s8, 4);
    return r;
}

/* unsigned q times y; the -32 offset comes off per lane after the loop
 * (AVX2's form). vpdpwssd is madd + add in one (no saturation either way:
 * the same i32 sums) */
static inline __m512i q6_half_dot(__m512i sumi, const struct q6_half * h, const int8_t * q8) {
    const __m512i y01 = _mm512_loadu_si512((const void *) q8), y23 = _mm512_loadu_si512((const void *) (q8 + 64));
    sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(h->q01, y01), h->s01);
    return _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(h->q23, y23), h->s23);
}

/* the float step of one super-block, as AVX2's */
static inline __m256 q6_block_fma(__m512i sumi, const block_q6_K * x, const block_q8_K * y, __m256 acc) {
    const __m256i lanes = _mm256_sub_epi32(fold_halves(sumi), q6_offset_lanes(x->scales, y->bsums));
    return _mm256_fmadd_ps(_mm256_set1_ps(KQ_H2F(x->d) * y->d), _mm256_cvtepi32_ps(lanes), acc);
}

void q6_K_q8_K_vec_dot__avx512(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK_K; ++i) {
        __m512i sumi = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
            const struct q6_half h = q6_decode_half(x[i].ql + 64 * half, x[i].qh + 32 * half, x[i].scales + 8 * half);
            sumi = q6_half_dot(sumi, &h, y[i].qs + 128 * half);
        }
        acc = q6_block_fma(sumi, &x[i], &y[i], acc);
    }
    *s = hsum_ps(acc);
}

/* One q6_K row against 4 activation rows (vy + c * ys bytes): each half
 * super-block is decoded once for the 4, and every s[c * ss] is summed as
 * q6_K_q8_K_vec_dot__avx512 sums it (the same integer lanes, the same float
 * steps per row), so bit-identical to 4 calls of it. */
void q6_K_q8_K_vec_dot_y4__avx512(int64_t n, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    const block_q6_K * x = vx;
    const block_q8_K * y[4];
    for (int c = 0; c < 4; ++c) y[c] = (const block_q8_K *) ((const char *) vy + (size_t) c * ys);
    __m256 acc[4] = { _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps() };
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const struct q6_half h0 = q6_decode_half(x[i].ql, x[i].qh, x[i].scales);
        const struct q6_half h1 = q6_decode_half(x[i].ql + 64, x[i].qh + 32, x[i].scales + 8);
        for (int c = 0; c < 4; ++c) {
            __m512i sumi = q6_half_dot(_mm512_setzero_si512(), &h0, y[c][i].qs);
            sumi = q6_half_dot(sumi, &h1, y[c][i].qs + 128);
            acc[c] = q6_block_fma(sumi, &x[i], &y[c][i], acc[c]);
        }
    }
    for (int c = 0; c < 4; ++c) s[(size_t) c * ss] = hsum_ps(acc[c]);
}

/* ---- batched q6_K (vec_dot_rows, kernels.h; driver and integer scheme in
 * q6_K_x86.h): AVX2's chunk pairs (c, c + 4), two pairs per 512-bit
 * register (pairs 2u | 2u + 1 in its halves), maddubs, vpdpwssd with the
 * scale pairs, halves folded: the same lane integers; then AVX2's offset
 * and float step. */
struct q6kr_row512 { __m512i qx[2], qy[2], sc[2]; __m256i sc16; float dx; };

static inline void q6kr_pair512(__m512i a, __m512i b, __m512i * x, __m512i * y) {
    *x = _mm512_mask_blend_epi16(0xAAAAAAAAu, a, _mm512_slli_epi32(b, 16));
    *y = _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(a, 16), b);
}

static inline void q6kr_decode_avx512(const block_q6_K * x, struct q6kr_row512 * o) {
    const struct q6_half h0 = q6_decode_half(x->ql, x->qh, x->scales);
    const struct q6_half h1 = q6_decode_half(x->ql + 64, x->qh + 32, x->scales + 8);
    /* h0.q01 = chunks [0 | 1], h1.q01 = [4 | 5]: pairs (0, 4) | (1, 5) */
    q6kr_pair512(h0.q01, h1.q01, &o->qx[0], &o->qy[0]);
    q6kr_pair512(h0.q23, h1.q23, &o->qx[1], &o->qy[1]);
    for (int u = 0; u < 2; u++) {
        o->sc[u] = _mm512_inserti64x4(_mm512_castsi256_si512(q6kr_pair_scales(x->scales, 2 * u)), q6kr_pair_scales(x->scales, 2 * u + 1), 1);
    }
    o->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    o->dx = KQ_H2F(x->d);
}

static inline __attribute__((always_inline)) void q6kr_core_avx512(const struct q6kr_row512 * w, const int R, const block_q8_K * yb,
                                                                   __m256 * acc, size_t as) {
    __m512i yx[2], yy[2];
    for (int u = 0; u < 2; u++) {
        q6kr_pair512(_mm512_loadu_si512((const void *) (yb->qs + 64 * u)), _mm512_loadu_si512((const void *) (yb->qs + 128 + 64 * u)),
                     &yx[u], &yy[u]);
    }
    const __m256i bs = _mm256_loadu_si256((const __m256i *) yb->bsums);
    const float dy = yb->d;
    for (int r = 0; r < R; r++) {
        __m512i sum = _mm512_setzero_si512();
        for (int u = 0; u < 2; u++) {
            const __m512i d16 = _mm512_add_epi16(_mm512_maddubs_epi16(w[r].qx[u], yx[u]), _mm512_maddubs_epi16(w[r].qy[u], yy[u]));
            sum = _mm512_dpwssd_epi32(sum, d16, w[r].sc[u]);
        }
        const __m256i lanes = _mm256_sub_epi32(fold_halves(sum), _mm256_slli_epi32(_mm256_madd_epi16(bs, w[r].sc16), 5));
        acc[r * as] = _mm256_fmadd_ps(_mm256_set1_ps(w[r].dx * dy), _mm256_cvtepi32_ps(lanes), acc[r * as]);
    }
}

KILN_Q6_K_ROWS(struct q6kr_row512, q6kr_decode_avx512, q6kr_core_avx512, avx512)
