/*
 * repack_q4_K_avx512.c — the avx512 row's Q4_K x8 kernels (layout and
 * summation orders: src/cpu/repack.h), bit-identical to the AVX2 ones
 * (repack_q4_K_avx2.c) and so to llama.cpp's haswell build: the integer
 * sums are formed another way (exact in any grouping), the float steps are
 * the shared ones of repack_q4_K_x86.h.
 *
 * Integer core: one 64-byte load is one 8-byte piece of all 8 rows; VNNI
 * (vpdpbusd, four u8 x s8 products per i32 lane) sums its low nibbles
 * against 8 q8 values of one sub-block and its high nibbles against 8 of
 * the next; per sub-block the two i32 lanes of a row are added and
 * multiplied by the row's scale in 64-bit lanes (vpmuldq), and vpmovqd
 * packs the 8 rows' sums, in row order.
 */
#include <immintrin.h>

#include "x86_common.h"
#include "repack_q4_K_x86.h"

/* a row's sum of its two i32 lanes, times its scale (64-bit lane r = row r) */
static inline __m512i scaled_sub(__m512i d, uint64_t sc8) {
    const __m512i sum = _mm512_add_epi32(d, _mm512_srli_epi64(d, 32)); /* low half of each 64-bit lane */
    return _mm512_mul_epi32(sum, _mm512_cvtepu8_epi64(_mm_cvtsi64_si128((long long) sc8)));
}

static inline void q4kx8_core_avx512(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * yb, __m256i ip[4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int p = 0; p < 4; p++) {
        __m512i lo = _mm512_setzero_si512(), hi = lo;
        for (int k = 0; k < 4; k++) {
            const __m512i w = _mm512_loadu_si512((const void *) (xb->qs + 64 * (4 * p + k)));
            long long yl, yh;
            memcpy(&yl, yb->qs + 64 * p + 8 * k, 8);
            memcpy(&yh, yb->qs + 64 * p + 32 + 8 * k, 8);
            lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(w, m4), _mm512_set1_epi64(yl));
            hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(w, 4), m4), _mm512_set1_epi64(yh));
        }
        const __m512i t = _mm512_add_epi64(scaled_sub(lo, sb->sc[2 * p]), scaled_sub(hi, sb->sc[2 * p + 1]));
        ip[p] = _mm512_cvtepi64_epi32(t);
    }
}

KILN_Q4_KX8_VEC(q4kx8_core_avx512, avx512)

/* the batched kernel: the core for 4 activation rows at once, each 64-byte
 * piece loaded and split into nibbles once for all four (same integer sums
 * per row, so the same results as the per-column core) */
static inline void q4kx8_core4_avx512(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * const yb[4],
                                      __m256i ip[4][4]) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    for (int p = 0; p < 4; p++) {
        __m512i lo[4], hi[4];
        for (int c = 0; c < 4; c++) lo[c] = hi[c] = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            const __m512i w = _mm512_loadu_si512((const void *) (xb->qs + 64 * (4 * p + k)));
            const __m512i wl = _mm512_and_si512(w, m4), wh = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
            for (int c = 0; c < 4; c++) {
                long long yl, yh;
                memcpy(&yl, yb[c]->qs + 64 * p + 8 * k, 8);
                memcpy(&yh, yb[c]->qs + 64 * p + 32 + 8 * k, 8);
                lo[c] = _mm512_dpbusd_epi32(lo[c], wl, _mm512_set1_epi64(yl));
                hi[c] = _mm512_dpbusd_epi32(hi[c], wh, _mm512_set1_epi64(yh));
            }
        }
        for (int c = 0; c < 4; c++) {
            const __m512i t = _mm512_add_epi64(scaled_sub(lo[c], sb->sc[2 * p]), scaled_sub(hi[c], sb->sc[2 * p + 1]));
            ip[c][p] = _mm512_cvtepi64_epi32(t);
        }
    }
}

void q4_Kx8_q8_K_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    const block_q4_Kx8 * x = vx;
    for (int c0 = 0; c0 < ncols; c0 += 4) {
        const int nc = ncols - c0 < 4 ? ncols - c0 : 4;
        __m256 acc[4], accm[4];
        for (int c = 0; c < 4; c++) acc[c] = accm[c] = _mm256_setzero_ps();
        for (int64_t b = 0; b < n / QK_K; b++) {
            struct q4kx8_sb sb;
            q4kx8_decode(&x[b], &sb);
            const block_q8_K * yb[4];
            for (int c = 0; c < 4; c++) yb[c] = (const block_q8_K *) ((const char *) vy + (size_t) (c0 + (c < nc ? c : nc - 1)) * ys) + b;
            __m256i ip[4][4];
            q4kx8_core4_avx512(&x[b], &sb, yb, ip);
            for (int c = 0; c < nc; c++) {
                __m256i mp[4];
                q4kx8_mins(&sb, yb[c], mp);
                q4kx8_step_pairs(&sb, yb[c]->d, ip[c], mp, &acc[c], &accm[c]);
            }
        }
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(s + (size_t) (c0 + c) * ss, _mm256_sub_ps(acc[c], accm[c]));
    }
}

/* ---- 16 rows (two x8 groups) per call ------------------------------------ */

/* One super-block of the two groups, prepared once for every activation
 * row of the call: each 8-byte piece's nibbles regrouped (vpermt2d) so that
 * one register holds 4 bytes of all 16 rows (lane r: row r, group r / 8),
 * z[p][k][h][0] the low nibbles of bytes 4h..4h+3 of piece k of pair p
 * (sub-block 2p), z[p][k][h][1] the high ones (sub-block 2p + 1); the
 * rows' scales, mins and fp32 super-block scales in the same lanes. */
struct q4kx16_prep {
    __m512i z[4][4][2][2];
    __m512i sc[8];  /* sub-block s: the rows' 6-bit scales, i32 */
    __m512i mn[4];  /* pair p: i16 (m[2p], m[2p+1]) per row (q4kx8_sb's mn) */
    __m512  d, dmin;
};

static inline __m512 cat256(__m256 a, __m256 b) {
    return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(a)), _mm256_castps_pd(b), 1));
}

static inline void q4kx16_prepare(const block_q4_Kx8 * xa, const block_q4_Kx8 * xb, struct q4kx16_prep * o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i idx[2] = { _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30),
                             _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31) };
    struct q4kx8_sb sa, sb;
    q4kx8_decode(xa, &sa);
    q4kx8_decode(xb, &sb);
    for (int p = 0; p < 4; p++) {
        for (int k = 0; k < 4; k++) {
            const __m512i wa = _mm512_loadu_si512((const void *) (xa->qs + 64 * (4 * p + k)));
            const __m512i wb = _mm512_loadu_si512((const void *) (xb->qs + 64 * (4 * p + k)));
            const __m512i la = _mm512_and_si512(wa, m4), lb = _mm512_and_si512(wb, m4);
            const __m512i ha = _mm512_and_si512(_mm512_srli_epi16(wa, 4), m4), hb = _mm512_and_si512(_mm512_srli_epi16(wb, 4), m4);
            for (int h = 0; h < 2; h++) {
                o->z[p][k][h][0] = _mm512_permutex2var_epi32(la, idx[h], lb);
                o->z[p][k][h][1] = _mm512_permutex2var_epi32(ha, idx[h], hb);
            }
        }
    }
    for (int s = 0; s < 8; s++) o->sc[s] = _mm512_cvtepu8_epi32(_mm_set_epi64x((long long) sb.sc[s], (long long) sa.sc[s]));
    for (int p = 0; p < 4; p++) o->mn[p] = _mm512_inserti64x4(_mm512_castsi256_si512(sa.mn[p]), sb.mn[p], 1);
    o->d = cat256(sa.d, sb.d);
    o->dmin = cat256(sa.dmin, sb.dmin);
}

static inline __m512i bcast4_q8(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* N activation rows against super-block b: per row and sub-block 8
 * vpdpbusd give each lane its row's whole sub-block sum (exact), times the
 * row's scale (vpmulld: |sum * scale| < 2^22, the same i32 as AVX2's
 * 64-bit products), the pair's two added: AVX2's ip[p]; mins and float
 * steps are q4kx8_mins / q4kx8_step_pairs' per lane (row). The
 * accumulators continue from am / amm (zero at the first super-block). */
static inline __attribute__((always_inline)) void q4kx16_pass(const int N, const struct q4kx16_prep * w, int64_t b, const char * y, size_t ys,
                                                              __m512 * am, __m512 * amm) {
    const block_q8_K * yb[4];
    __m512 acc[4], accm[4], dd[4], dm[4];
    int32_t bsp[4][4];
    for (int c = 0; c < N; c++) {
        yb[c] = (const block_q8_K *) (y + (size_t) c * ys) + b;
        acc[c] = b ? am[c] : _mm512_setzero_ps();
        accm[c] = b ? amm[c] : _mm512_setzero_ps();
        const __m512 vy = _mm512_set1_ps(yb[c]->d);
        dd[c] = _mm512_mul_ps(w->d, vy);
        dm[c] = _mm512_mul_ps(w->dmin, vy);
        /* the 8 sub-blocks' sums of q8 values, as i16 pairs (q4kx8_mins) */
        _mm_storeu_si128((__m128i *) bsp[c], _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) yb[c]->bsums),
                                                            _mm_loadu_si128((const __m128i *) (yb[c]->bsums + 8))));
    }
    for (int p = 0; p < 4; p++) {
        __m512i lo[4], hi[4];
        for (int c = 0; c < N; c++) lo[c] = hi[c] = _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            for (int h = 0; h < 2; h++) {
                const __m512i zl = w->z[p][k][h][0], zh = w->z[p][k][h][1];
                for (int c = 0; c < N; c++) {
                    lo[c] = _mm512_dpbusd_epi32(lo[c], zl, bcast4_q8(yb[c]->qs + 64 * p + 8 * k + 4 * h));
                    hi[c] = _mm512_dpbusd_epi32(hi[c], zh, bcast4_q8(yb[c]->qs + 64 * p + 32 + 8 * k + 4 * h));
                }
            }
        }
        for (int c = 0; c < N; c++) {
            const __m512i ip = _mm512_add_epi32(_mm512_mullo_epi32(lo[c], w->sc[2 * p]), _mm512_mullo_epi32(hi[c], w->sc[2 * p + 1]));
            const __m512i mp = _mm512_madd_epi16(w->mn[p], _mm512_set1_epi32(bsp[c][p]));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ip), dd[c], acc[c]);
            accm[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mp), dm[c], accm[c]);
        }
    }
    for (int c = 0; c < N; c++) {
        am[c] = acc[c];
        amm[c] = accm[c];
    }
}

#define Q4KX16_NC 32
void q4_Kx16_q8_K_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as) {
    (void) aux, (void) as;
    const block_q4_Kx8 * xa = x, * xb = (const block_q4_Kx8 *) ((const char *) x + xs);
    struct q4kx16_prep w;
    __m512 am[Q4KX16_NC], amm[Q4KX16_NC];
    for (int c0 = 0; c0 < ncols; c0 += Q4KX16_NC) {
        const int nc = ncols - c0 < Q4KX16_NC ? ncols - c0 : Q4KX16_NC;
        const char * yc = (const char *) y + (size_t) c0 * ys;
        for (int64_t b = 0; b < n / QK_K; b++) {
            q4kx16_prepare(&xa[b], &xb[b], &w);
            int c = 0;
            for (; c + 4 <= nc; c += 4) q4kx16_pass(4, &w, b, yc + (size_t) c * ys, ys, am + c, amm + c);
            for (; c + 2 <= nc; c += 2) q4kx16_pass(2, &w, b, yc + (size_t) c * ys, ys, am + c, amm + c);
            if (c < nc) q4kx16_pass(1, &w, b, yc + (size_t) c * ys, ys, am + c, amm + c);
        }
        for (int c = 0; c < nc; c++) _mm512_storeu_ps(s + (size_t) (c0 + c) * ss, _mm512_sub_ps(am[c], amm[c]));
    }
}
