/*
 * repack_q4_0x16_x86.h — the 256-bit Q4_0 16-row batched kernels (avx2 and
 * avxvnni rows): the weights' regrouping and the cache-blocked driver
 * around a per-ISA pass. Include after <immintrin.h>, in files compiled
 * with at least -mavx2 -mfma -mf16c.
 *
 * Per block, each pair of groups' nibbles is transposed once into 8 rows x
 * 4 bytes per register (unpack of dwords, then of qwords, inside the
 * 128-bit lanes: register k holds bytes 4k..4k+3 of 8 rows, lanes in the
 * order rows 0 2 4 6 1 3 5 7 of the pair) and split into low (elements
 * 4k..4k+3) and high (16 + 4k..) nibbles: 16 registers for the 16 rows,
 * shared by every activation row of the pass. Per activation row, block
 * and 8 rows, the ISA's pass (PASS) sums the unsigned nibbles times the
 * broadcast 4-byte activation groups exactly (avx2: vpmaddubsw in i16,
 * then vpmaddwd; avxvnni: vpdpbusd) and adds the block's -8 * sum(y)
 * (kiln_q8_0_aux): each lane holds its row's whole block sum, the exact
 * integer of the x4 kernels. The float step is theirs, fma((float) isum,
 * d_x * d_y, acc) per row and block in block order; the lanes go back to
 * row order at the store. Every output is bit-identical to
 * q4_0x4_q8_0_vec_dot__avx2's.
 */
#ifndef KILN_REPACK_Q4_0X16_X86_H
#define KILN_REPACK_Q4_0X16_X86_H

#include <string.h>

#include "../../repack.h"

static inline __m256i q4_0x16_bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* blocks i0 .. i0 + nb of the 4 groups: w[16 b + 8 h + k] for the rows of
 * groups 2h, 2h + 1 (k < 4: low nibbles of bytes 4k..4k+3, k >= 4: high
 * nibbles of bytes 4(k-4)..), dx[2 b + h] their scales in the same lanes */
static inline void q4_0x16_prep_wide(const char * x, size_t xs, int64_t i0, int nb, __m256i * w, __m256 * dx) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), to_lanes = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int b = 0; b < nb; b++) {
        for (int h = 0; h < 2; h++) {
            const block_q4_0x4 * xa = (const block_q4_0x4 *) (x + (size_t) (2 * h) * xs) + i0 + b;
            const block_q4_0x4 * xc = (const block_q4_0x4 *) (x + (size_t) (2 * h + 1) * xs) + i0 + b;
            /* 128-bit lanes: rows 0 | 1, 2 | 3 of group a, then of group c */
            const __m256i a01 = load32(xa->qs), a23 = load32(xa->qs + 32), c01 = load32(xc->qs), c23 = load32(xc->qs + 32);
            const __m256i t0 = _mm256_unpacklo_epi32(a01, a23), t1 = _mm256_unpackhi_epi32(a01, a23);
            const __m256i t2 = _mm256_unpacklo_epi32(c01, c23), t3 = _mm256_unpackhi_epi32(c01, c23);
            const __m256i q[4] = { _mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                   _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3) };
            for (int k = 0; k < 4; k++) {
                w[16 * b + 8 * h + k] = _mm256_and_si256(q[k], m4);
                w[16 * b + 8 * h + 4 + k] = _mm256_and_si256(_mm256_srli_epi16(q[k], 4), m4);
            }
            long long da, dc;
            memcpy(&da, xa->d, sizeof da);
            memcpy(&dc, xc->d, sizeof dc);
            dx[2 * b + h] = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_set_epi64x(dc, da)), to_lanes);
        }
    }
}

/* Cache blocking as the avx512 kernel: Q4_0X16_KB blocks prepared once
 * (4.6 KB) for up to Q4_0X16_NC activation rows, the accumulators kept in
 * memory between block ranges (the same FMA chain per lane). */
#define Q4_0X16_KB 8
#define Q4_0X16_NC 32
#define KILN_Q4_0X16_GEMM(PASS, S) \
void q4_0x16_q8_0_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys, \
                             const void * aux, size_t as) { \
    const __m256i to_rows = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); \
    const int64_t nblk = n / QK8_0; \
    __m256i w[16 * Q4_0X16_KB]; \
    __m256 dx[2 * Q4_0X16_KB], accm[2 * Q4_0X16_NC]; \
    for (int c0 = 0; c0 < ncols; c0 += Q4_0X16_NC) { \
        const int nc = ncols - c0 < Q4_0X16_NC ? ncols - c0 : Q4_0X16_NC; \
        const char * yc = (const char *) y + (size_t) c0 * ys, * ac = (const char *) aux + (size_t) c0 * as; \
        for (int64_t i0 = 0; i0 < nblk; i0 += Q4_0X16_KB) { \
            const int nb = nblk - i0 < Q4_0X16_KB ? (int) (nblk - i0) : Q4_0X16_KB; \
            q4_0x16_prep_wide((const char *) x, xs, i0, nb, w, dx); \
            int c = 0; \
            for (; c + 4 <= nc; c += 4) PASS(i0, nb, 4, accm + 2 * c, w, dx, yc + (size_t) c * ys, ys, ac + (size_t) c * as, as); \
            for (; c + 2 <= nc; c += 2) PASS(i0, nb, 2, accm + 2 * c, w, dx, yc + (size_t) c * ys, ys, ac + (size_t) c * as, as); \
            if (c < nc) PASS(i0, nb, 1, accm + 2 * c, w, dx, yc + (size_t) c * ys, ys, ac + (size_t) c * as, as); \
        } \
        for (int c = 0; c < nc; c++) { \
            float * o = s + (size_t) (c0 + c) * ss; \
            _mm256_storeu_ps(o, _mm256_permutevar8x32_ps(accm[2 * c], to_rows)); \
            _mm256_storeu_ps(o + 8, _mm256_permutevar8x32_ps(accm[2 * c + 1], to_rows)); \
        } \
    } \
}

#endif
