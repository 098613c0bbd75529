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
