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

/* ---- batched: one x8 group, many activation rows ------------------------ */

/* Per super-block, the group's nibbles are regrouped once for every
 * activation row: register (s, j) holds bytes 4j..4j+3 of sub-block s
 * (low nibbles of the pair's bytes for even s, high for odd) of the 8
 * rows, one row per 32-bit lane in the order rows 0 1 4 5 2 3 6 7 (a
 * pshufd and a qword unpack per 8-byte piece); scv[s] the rows' 6-bit
 * scales as two i16 per lane, same order. Per activation row and
 * sub-block: 8 vpmaddubsw against the broadcast 4-byte activation groups,
 * summed in i16 (each lane at most 8 x 2 x 15 x 128 = 30720 in magnitude:
 * exact), one vpmaddwd with the scales: each lane holds sc * dot of its
 * row, the two sub-blocks of a pair added in i32, lanes back to row order:
 * the exact integers of q4kx8_core_avx2. Mins and float steps are the
 * x8 kernels' (q4kx8_mins, q4kx8_step_pairs), per row in super-block
 * order, so every output is bit-identical to KILN_Q4_KX8_GEMM's. */
struct q4kx8_prep { __m256i w[8][8]; __m256i scv[8]; };

static inline void q4kx8_prep_avx2(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, struct q4kx8_prep * o) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), lanes = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int p = 0; p < 4; p++) {
        for (int k = 0; k < 4; k++) {
            const uint8_t * q = xb->qs + 64 * (4 * p + k);
            /* qwords: rows 0 1 | 2 3 and 4 5 | 6 7; pshufd puts dword 0 of both rows of a lane first */
            const __m256i wa = _mm256_shuffle_epi32(_mm256_loadu_si256((const __m256i *) q), 0xd8);
            const __m256i wb = _mm256_shuffle_epi32(_mm256_loadu_si256((const __m256i *) (q + 32)), 0xd8);
            const __m256i d0 = _mm256_unpacklo_epi64(wa, wb), d1 = _mm256_unpackhi_epi64(wa, wb);
            o->w[2 * p][2 * k] = _mm256_and_si256(d0, m4);
            o->w[2 * p][2 * k + 1] = _mm256_and_si256(d1, m4);
            o->w[2 * p + 1][2 * k] = _mm256_and_si256(_mm256_srli_epi16(d0, 4), m4);
            o->w[2 * p + 1][2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(d1, 4), m4);
        }
    }
    for (int s = 0; s < 8; s++) {
        const __m256i v = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long) sb->sc[s])), lanes);
        o->scv[s] = _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
    }
}

/* N activation rows (y[c]) against one prepared super-block: ip[c][p] */
static inline __attribute__((always_inline)) void q4kx8_isums_avx2(const struct q4kx8_prep * w, const int N, const block_q8_K * const * yb,
                                                                   __m256i ip[][4]) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int p = 0; p < 4; p++) {
        __m256i lo[2], hi[2];
        for (int h = 0; h < 2; h++) {
            __m256i s16[2];
            for (int c = 0; c < N; c++) s16[c] = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i wj = w->w[2 * p + h][j];
                for (int c = 0; c < N; c++) {
                    int32_t v;
                    memcpy(&v, yb[c]->qs + 64 * p + 32 * h + 4 * j, sizeof v);
                    s16[c] = _mm256_add_epi16(s16[c], _mm256_maddubs_epi16(wj, _mm256_set1_epi32(v)));
                }
            }
            for (int c = 0; c < N; c++) {
                const __m256i i32 = _mm256_madd_epi16(s16[c], w->scv[2 * p + h]);
                if (h == 0) lo[c] = i32; else hi[c] = i32;
            }
        }
        for (int c = 0; c < N; c++) ip[c][p] = _mm256_permutevar8x32_epi32(_mm256_add_epi32(lo[c], hi[c]), lanes);
    }
}

#define Q4KX8_NC 32
void q4_Kx8_q8_K_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    const block_q4_Kx8 * x = vx;
    struct q4kx8_prep w;
    __m256 acc[Q4KX8_NC], accm[Q4KX8_NC];
    for (int c0 = 0; c0 < ncols; c0 += Q4KX8_NC) {
        const int nc = ncols - c0 < Q4KX8_NC ? ncols - c0 : Q4KX8_NC;
        for (int c = 0; c < nc; c++) acc[c] = accm[c] = _mm256_setzero_ps();
        for (int64_t b = 0; b < n / QK_K; b++) {
            struct q4kx8_sb sb;
            q4kx8_decode(&x[b], &sb);
            q4kx8_prep_avx2(&x[b], &sb, &w);
            for (int c = 0; c < nc; c += 2) {
                const int N = nc - c >= 2 ? 2 : 1;
                const block_q8_K * yb[2];
                for (int e = 0; e < N; e++) yb[e] = (const block_q8_K *) ((const char *) vy + (size_t) (c0 + c + e) * ys) + b;
                __m256i ip[2][4];
                if (N == 2) q4kx8_isums_avx2(&w, 2, yb, ip); else q4kx8_isums_avx2(&w, 1, yb, ip);
                for (int e = 0; e < N; e++) {
                    __m256i mp[4];
                    q4kx8_mins(&sb, yb[e], mp);
                    q4kx8_step_pairs(&sb, yb[e]->d, ip[e], mp, &acc[c + e], &accm[c + e]);
                }
            }
        }
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(s + (size_t) (c0 + c) * ss, _mm256_sub_ps(acc[c], accm[c]));
    }
}
