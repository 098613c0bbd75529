/*
 * repack_q4_K_avx2.c — AVX2 Q4_K x8 kernels (layout and summation orders:
 * src/cpu/repack.h), bit-identical to the scalar ones (repack_q4_K_scalar.c)
 * and so to llama.cpp's AVX2 repacked Q4_K.
 *
 * Integer core: a 32-byte load holds one 8-byte piece of 4 rows; its low
 * nibbles meet 8 q8 values of one sub-block, its high nibbles 8 of the next
 * (maddubs, i16 sums of at most 8 products of 15 x 127: exact), then madd
 * with the row's scale gives i32 — every step exact, so any grouping gives
 * llama.cpp's integers.
 */
#include <immintrin.h>

#include "x86_common.h"
#include "repack_q4_K_x86.h"

static inline void q4kx8_core_avx2(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * yb, __m256i ip[4]) {
    /* i16 lanes of 64-bit lane r: row r's scale (rows 0..3 / 4..7) */
    const __m256i pick_a = _mm256_setr_epi8(0, -1, 0, -1, 0, -1, 0, -1, 1, -1, 1, -1, 1, -1, 1, -1,
                                            2, -1, 2, -1, 2, -1, 2, -1, 3, -1, 3, -1, 3, -1, 3, -1);
    const __m256i pick_b = _mm256_add_epi8(pick_a, _mm256_setr_epi8(4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0,
                                                                    4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0));
    const __m256i to_rows = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int p = 0; p < 4; p++) {
        __m256i lo_a = _mm256_setzero_si256(), lo_b = lo_a, hi_a = lo_a, hi_b = lo_a;
        for (int k = 0; k < 4; k++) {
            const struct q4kx8_piece w = q4kx8_load_piece(xb, yb, p, k);
            lo_a = _mm256_add_epi16(lo_a, _mm256_maddubs_epi16(w.lo_a, w.vl));
            lo_b = _mm256_add_epi16(lo_b, _mm256_maddubs_epi16(w.lo_b, w.vl));
            hi_a = _mm256_add_epi16(hi_a, _mm256_maddubs_epi16(w.hi_a, w.vh));
            hi_b = _mm256_add_epi16(hi_b, _mm256_maddubs_epi16(w.hi_b, w.vh));
        }
        const __m256i s0 = _mm256_set1_epi64x((long long) sb->sc[2 * p]), s1 = _mm256_set1_epi64x((long long) sb->sc[2 * p + 1]);
        const __m256i ia = _mm256_add_epi32(_mm256_madd_epi16(lo_a, _mm256_shuffle_epi8(s0, pick_a)),
                                            _mm256_madd_epi16(hi_a, _mm256_shuffle_epi8(s1, pick_a)));
        const __m256i ib = _mm256_add_epi32(_mm256_madd_epi16(lo_b, _mm256_shuffle_epi8(s0, pick_b)),
                                            _mm256_madd_epi16(hi_b, _mm256_shuffle_epi8(s1, pick_b)));
        /* lanes (row, half) -> rows 0,1,4,5 | 2,3,6,7 -> row order */
        ip[p] = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(ia, ib), to_rows);
    }
}

KILN_Q4_KX8_VEC(q4kx8_core_avx2, avx2)

/* batched (repack_q4_K_x86.h, KILN_Q4_KX8_GEMM_WIDE): per activation row
 * and sub-block, 8 vpmaddubsw against the broadcast 4-byte activation
 * groups summed in i16 (each lane at most 8 x 2 x 15 x 128 = 30720 in
 * magnitude: exact), one vpmaddwd with the rows' scales (i16 pairs) */
static inline __attribute__((always_inline)) void q4kx8_sub_avx2(const struct q4kx8_prep * w, int sub, const int N,
                                                                 const block_q8_K * const * yb, int off, __m256i * out) {
    __m256i s16[4];
    for (int c = 0; c < N; c++) s16[c] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i wj = w->w[sub][j];
        for (int c = 0; c < N; c++) s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(wj, q4kx8_bcast4(yb[c]->qs + off + 4 * j)));
    }
    for (int c = 0; c < N; c++) out[c] = _mm256_madd_epi16(s16[c], w->scv[sub]);
}

KILN_Q4_KX8_GEMM_WIDE(q4kx8_sub_avx2, avx2)
