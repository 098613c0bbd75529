/*
 * q5_K_x86.h — the batched q5_K kernels' shared parts (vec_dot_rows,
 * kernels.h): the mins term of 8 weight rows at once and the driver around
 * a per-ISA decode and integer core (quant_q5_K_rows_avx2.c,
 * quant_q5_K_rows_avx512.c). Include after <immintrin.h> and x86_common.h,
 * in files compiled with at least -mavx2 -mfma -mf16c.
 *
 * What each output must equal: q5_K_q8_K_vec_dot__avx2 (the avx512 row's
 * q5_K vec_dot is bit-identical to it), which per super-block forms
 *   sumi: 8 i32 lanes, lane j = sum over the 8 chunks c (sub-blocks of 32
 *         values) of sc[c] * D(c, j), D(c, j) the 4 byte products at bytes
 *         4j..4j+3 of chunk c;
 *   acc  = fma(d_x * d_y, (float) sumi, acc)            (8 lanes);
 *   mins = fmaf(dmin_x * d_y, (float) M, mins)          (one float),
 *         M = sum_j mn[j] * (bsums[2j] + bsums[2j + 1]) (an integer);
 * and returns hsum_ps(acc) - mins.
 *
 * The integers here: chunks c and c + 4 go together, their 16-bit words
 * interleaved (q6kr_pair: weights once per decode, activations once per
 * activation row and super-block), so of two maddubs one meets bytes 4j,
 * 4j+1 of both chunks and the other bytes 4j+2, 4j+3; their i16 sum holds
 * D(c, j) and D(c + 4, j) side by side (|D| <= 4 * 31 * 128 = 15872:
 * exact; no maddubs saturates: 2 * 31 * 128), and one madd with the scale
 * pair (sc[c], sc[c + 4]) adds both chunks' terms to lane j: 3 multiplies
 * per 64 values instead of 4, the same lane integers as sumi.
 *
 * The mins: M for the up to 8 weight rows of a group in the 8 lanes of
 * one vector (lane r = row r): the group's mins are kept transposed, word
 * pair (mn_r[2t], mn_r[2t + 1]) in lane r of mn[t], and madd against the
 * broadcast pair (bsums[4t] + bsums[4t + 1], bsums[4t + 2] + bsums[4t + 3])
 * gives lane r its share of M (the same integer, |M| < 2^24); then per
 * lane the float steps of the scalar ones: dmin_r * d_y, one FMA into the
 * lane's running mins. Lanes of rows the group does not have stay 0.
 *
 * Driver: the weight rows go Q5KR_R at a time; for each column chunk of up
 * to Q5KR_NC activation rows and each super-block, the rows' super-blocks
 * are decoded once (DECODE(const block_q5_K *, const uint8_t sc[8], ROW_T
 * *)) for every activation row of the chunk; CORE(const ROW_T * w, R,
 * const block_q8_K * yb, __m256 * acc, size_t astride) adds, per weight row
 * r, the super-block's sumi step to acc[r * astride].
 */
#ifndef KILN_Q5_K_X86_H
#define KILN_Q5_K_X86_H

#include <string.h>

#include "blocks.h"
#include "quants_impl.h"
#include "q6_K_x86.h"

#define Q5KR_R  8   /* weight rows decoded together (one mins vector) */
#define Q5KR_NC 64  /* activation rows per column chunk (accumulators on the stack): mul_mat's block, so one decode per block */

/* a group's mins, transposed (lane r = weight row r), and dmin per lane */
struct q5kr_group { __m256i mn[4]; __m256 dmin; };

/* 5-bit values of a q5_K super-block in its 8 chunks of 32 (chunk 2j: the
 * low nibbles of qs[32j..32j+31] with qh bit 2j; chunk 2j + 1: the high
 * nibbles with qh bit 2j + 1), as q5_K_q8_K_vec_dot__avx2 forms them */
static inline void q5kr_values(const block_q5_K * x, __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    const __m256i hb = load32(x->qh);
    for (int j = 0; j < 4; j++) {
        const __m256i bits = load32(x->qs + 32 * j);
        q[2 * j] = _mm256_or_si256(_mm256_and_si256(bits, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
        q[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
    }
}

/* the madd scale vector of chunk pair (c, c + 4): words (sc[c], sc[c + 4]) in every lane */
static inline int q5kr_scale_pair(const uint8_t sc[8], int c) {
    return (int) ((uint32_t) sc[c] | ((uint32_t) sc[c + 4] << 16));
}

/* lane r: M of weight row r against one activation super-block's bsums */
static inline __m256i q5kr_mins(const struct q5kr_group * g, const int16_t * bsums) {
    const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) bsums), _mm_loadu_si128((const __m128i *) (bsums + 8)));
    const __m256i p = _mm256_broadcastsi128_si256(q8s);
    const __m256i m01 = _mm256_add_epi32(_mm256_madd_epi16(g->mn[0], _mm256_shuffle_epi32(p, 0x00)),
                                         _mm256_madd_epi16(g->mn[1], _mm256_shuffle_epi32(p, 0x55)));
    const __m256i m23 = _mm256_add_epi32(_mm256_madd_epi16(g->mn[2], _mm256_shuffle_epi32(p, 0xAA)),
                                         _mm256_madd_epi16(g->mn[3], _mm256_shuffle_epi32(p, 0xFF)));
    return _mm256_add_epi32(m01, m23);
}

/* the group's mins step for one activation super-block: per lane,
 * fmaf(dmin_r * d_y, (float) M_r, mins_r) */
static inline __m256 q5kr_mins_fma(const struct q5kr_group * g, const block_q8_K * yb, __m256 macc) {
    const __m256 dm = _mm256_mul_ps(g->dmin, _mm256_set1_ps(yb->d));
    return _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(q5kr_mins(g, yb->bsums)), macc);
}

#define KILN_Q5_K_ROWS(ROW_T, DECODE, CORE, S) \
static inline __attribute__((always_inline)) void q5kr_rows_##S(int64_t nb, const int R, int nc, float * s, size_t ss, \
                                                                const char * x, size_t xs, const char * y, size_t ys) { \
    ROW_T w[Q5KR_R]; \
    struct q5kr_group g; \
    uint32_t mnp[4][Q5KR_R]; \
    float dmin[Q5KR_R], mrow[Q5KR_R]; \
    __m256 acc[Q5KR_R * Q5KR_NC], macc[Q5KR_NC]; \
    memset(mnp, 0, sizeof mnp); \
    memset(dmin, 0, sizeof dmin); \
    for (int c0 = 0; c0 < nc; c0 += Q5KR_NC) { \
        const int n1 = nc - c0 < Q5KR_NC ? nc - c0 : Q5KR_NC; \
        for (int i = 0; i < R * Q5KR_NC; i++) acc[i] = _mm256_setzero_ps(); \
        for (int c = 0; c < n1; c++) macc[c] = _mm256_setzero_ps(); \
        for (int64_t b = 0; b < nb; b++) { \
            for (int r = 0; r < R; r++) { \
                const block_q5_K * xb = (const block_q5_K *) (x + (size_t) r * xs) + b; \
                uint8_t sc[8], mn[8]; \
                for (int j = 0; j < 8; j++) kq_get_scale_min_k4(j, xb->scales, &sc[j], &mn[j]); \
                DECODE(xb, sc, &w[r]); \
                for (int t = 0; t < 4; t++) mnp[t][r] = (uint32_t) mn[2 * t] | ((uint32_t) mn[2 * t + 1] << 16); \
                dmin[r] = KQ_H2F(xb->dmin); \
            } \
            for (int t = 0; t < 4; t++) g.mn[t] = _mm256_loadu_si256((const __m256i *) mnp[t]); \
            g.dmin = _mm256_loadu_ps(dmin); \
            for (int c = 0; c < n1; c++) { \
                const block_q8_K * yb = (const block_q8_K *) (y + (size_t) (c0 + c) * ys) + b; \
                CORE(w, R, yb, &acc[c], Q5KR_NC); \
                macc[c] = q5kr_mins_fma(&g, yb, macc[c]); \
            } \
        } \
        for (int c = 0; c < n1; c++) { \
            _mm256_storeu_ps(mrow, macc[c]); \
            for (int r = 0; r < R; r++) s[(size_t) (c0 + c) * ss + r] = hsum_ps(acc[r * Q5KR_NC + c]) - mrow[r]; \
        } \
    } \
} \
void q5_K_q8_K_vec_dot_rows__##S(int64_t n, int nr, int nc, float * s, size_t ss, const void * vx, size_t xs, \
                                 const void * vy, size_t ys) { \
    const char * x = vx; \
    int r = 0; \
    for (; r + Q5KR_R <= nr; r += Q5KR_R) q5kr_rows_##S(n / QK_K, Q5KR_R, nc, s + r, ss, x + (size_t) r * xs, xs, vy, ys); \
    if (r < nr) q5kr_rows_##S(n / QK_K, nr - r, nc, s + r, ss, x + (size_t) r * xs, xs, vy, ys); \
}

#endif
