/*
 * q6_K_x86.h — what the AVX2 and AVX-512 q6_K kernels share: the AVX2
 * decode of half a super-block, and the batched driver (vec_dot_rows,
 * kernels.h) around a per-ISA decode and integer core. Include after
 * <immintrin.h> and x86_common.h, in files compiled with at least -mavx2
 * -mfma -mf16c.
 */
#ifndef KILN_Q6_K_X86_H
#define KILN_Q6_K_X86_H

#include "blocks.h"

/* half a q6_K super-block's 128 6-bit values (0..63) from its 64 low-nibble
 * bytes l0, l1 and 32 high-bit bytes h, as 4 registers of 32 */
static inline void q6_decode_half256(__m256i l0, __m256i l1, __m256i h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m2), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m2), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m2), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m2), 4));
}

/* ---- batched: a block of plain q6_K rows against a block of activation rows ----
 * The integers. q6_K_q8_K_vec_dot__avx2's lane j (of 8 i32) holds, before
 * the offset, sum over the 8 chunks c (32 values each) of s(c, j) * D(c, j),
 * D(c, j) the 4 byte products at bytes 4j..4j+3 of chunk c, s(c, j) the
 * chunk's scale 2c (j < 4) or 2c + 1. There each chunk costs a maddubs and
 * a madd. Here chunks c and c + 4 go together: their 16-bit words are
 * interleaved (weights once per decode, activations once per row and
 * super-block, q6kr_pair), so that of two maddubs, one meets bytes 4j, 4j+1
 * of both chunks and the other bytes 4j+2, 4j+3; their i16 sum holds D(c, j)
 * and D(c + 4, j) side by side (|D| <= 4 * 63 * 128 = 32256: exact, and no
 * maddubs saturates: 2 * 63 * 128), and one madd with the scale pairs
 * (s(c, j), s(c + 4, j)) adds both chunks' terms to lane j: 3 multiplies per
 * 64 values instead of 4, the same lane integers. Then the offset
 * (q6_offset_lanes), the FMA with d_x * d_y and hsum_ps as the mat-vec
 * kernel, so every output is bit-identical to vec_dot for the pair, which the
 * batched path must equal (llama.cpp's x86 build has no repacked q6_K: its
 * batches call vec_dot).
 *
 * Driver: the weight rows go Q6KR_R at a time; for each column chunk of up
 * to Q6KR_NC activation rows and each super-block, the R rows' super-blocks
 * are decoded once (DECODE(const block_q6_K *, ROW_T *)) for every
 * activation row of the chunk; CORE(const ROW_T * w, R, const block_q8_K *
 * yb, __m256 * acc, size_t astride) adds, per weight row r, the super-block
 * to acc[r * astride]. */
#define Q6KR_R  8   /* weight rows decoded together */
#define Q6KR_NC 32  /* activation rows per column chunk (accumulators on the stack) */

/* chunks a and b (32 bytes each) -> the two word-interleaved registers:
 * x = words 2j of a and b, y = words 2j + 1 of a and b, per dword j */
static inline void q6kr_pair(__m256i a, __m256i b, __m256i * x, __m256i * y) {
    *x = _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA);
    *y = _mm256_blend_epi16(_mm256_srli_epi32(a, 16), b, 0xAA);
}

/* the madd scale vector of chunk pair (c, c + 4): words (sc[2c], sc[2c + 8])
 * over lanes 0..3, (sc[2c + 1], sc[2c + 9]) over lanes 4..7 */
static inline __m256i q6kr_pair_scales(const int8_t * sc, int c) {
    const short a = sc[2 * c], b = sc[2 * c + 8], e = sc[2 * c + 1], f = sc[2 * c + 9];
    return _mm256_setr_epi16(a, b, a, b, a, b, a, b, e, f, e, f, e, f, e, f);
}

#define KILN_Q6_K_ROWS(ROW_T, DECODE, CORE, S) \
static inline __attribute__((always_inline)) void q6kr_rows_##S(int64_t nb, const int R, int nc, float * s, size_t ss, \
                                                                const char * x, size_t xs, const char * y, size_t ys) { \
    ROW_T w[Q6KR_R]; \
    __m256 acc[Q6KR_R * Q6KR_NC]; \
    for (int c0 = 0; c0 < nc; c0 += Q6KR_NC) { \
        const int n1 = nc - c0 < Q6KR_NC ? nc - c0 : Q6KR_NC; \
        for (int i = 0; i < R * Q6KR_NC; i++) acc[i] = _mm256_setzero_ps(); \
        for (int64_t b = 0; b < nb; b++) { \
            for (int r = 0; r < R; r++) DECODE((const block_q6_K *) (x + (size_t) r * xs) + b, &w[r]); \
            for (int c = 0; c < n1; c++) CORE(w, R, (const block_q8_K *) (y + (size_t) (c0 + c) * ys) + b, &acc[c], Q6KR_NC); \
        } \
        for (int c = 0; c < n1; c++) { \
            for (int r = 0; r < R; r++) s[(size_t) (c0 + c) * ss + r] = hsum_ps(acc[r * Q6KR_NC + c]); \
        } \
    } \
} \
void q6_K_q8_K_vec_dot_rows__##S(int64_t n, int nr, int nc, float * s, size_t ss, const void * vx, size_t xs, \
                                 const void * vy, size_t ys) { \
    const char * x = vx; \
    int r = 0; \
    for (; r + Q6KR_R <= nr; r += Q6KR_R) q6kr_rows_##S(n / QK_K, Q6KR_R, nc, s + r, ss, x + (size_t) r * xs, xs, vy, ys); \
    for (; r < nr; r++) q6kr_rows_##S(n / QK_K, 1, nc, s + r, ss, x + (size_t) r * xs, xs, vy, ys); \
}

#endif
