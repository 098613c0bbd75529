/*
 * repack_q8_0x16_avx512.c — the avx512 row's Q8_0 16-row batched kernel
 * (gemm_x16[Q8_0]): 4 repacked x4 groups against many q8_0 activation
 * rows. Compiled with the avx512 flags (F/BW/VL/VNNI); selected at run time.
 *
 * The order to keep is the plain q8_0 dot's (AVX2, llama.cpp's haswell
 * ggml_vec_dot_q8_0_q8_0): per row and block, 8 i32 lanes, lane j the
 * exact sum of the products of elements 4j..4j+3; each lane goes to float
 * and into its own accumulator, acc_j = fma(d_x * d_y, (float) lane_j,
 * acc_j), block after block; at the end hsum_ps's reduction
 * ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 *
 * Here a register holds one lane index j for all 16 rows instead of the 8
 * lanes of one row: per block the 16 rows' bytes are transposed once into 8
 * registers (register j: bytes 4j..4j+3 of every row, lane 4 r + g for row
 * r of group g, the q4_0x16 kernel's lane order), offset to unsigned (x +
 * 128), and shared by every activation row of the call. Per activation row
 * and block: one scale product d_x * d_y for the 16 rows (one multiply, not
 * one per pair of rows), and per j one vpdpbusd against the broadcast 4
 * activation bytes, started from -128 times their sum (kiln_q8_0_aux8,
 * formed once per activation row by mul_mat, or here when the caller has
 * none; so the lane is the exact sum of x * y), one conversion and one FMA
 * into accumulator j. The
 * final reduction is hsum_ps's, done across the 8 accumulators lane by
 * lane; the lanes go back to row order at the store. Every output is
 * bit-identical to q8_0x4_q8_0_vec_dot__avx512 (and so to the AVX2 x4 and
 * plain kernels) for its row; tests/c/test_repack.c checks it.
 */
#include <immintrin.h>
#include <string.h>

#include "x86_common.h"
#include "../../repack.h"
#include "blocks.h"

/* Cache blocking: Q8_0X16_KB blocks' weights prepared once (4 KB) for up
 * to Q8_0X16_NC activation rows, whose 8 accumulators each (17 KB) stay in
 * memory between block ranges (the same FMA chain per lane: the same
 * results as one pass over all blocks). */
#define Q8_0X16_KB 8
#define Q8_0X16_NC 33 /* a multiple of the widest pass (3 rows) */

/* lane 4 r + g <-> row 4 g + r (its own inverse) */
static inline __m512i q8_0x16_lanes(void) { return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

static inline __m512i q8_0x16_bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* blocks i0 .. i0 + nb of the 4 groups: w[8 b + j] bytes 4j..4j+3 of every
 * row plus 128 (unsigned), dx[b] the 16 rows' scales, in the same lanes */
static inline void q8_0x16_prep(const char * x, size_t xs, int64_t i0, int nb, __m512i * w, __m512 * dx) {
    const __m512i off = _mm512_set1_epi8((char) 0x80), tr = q8_0x16_lanes();
    for (int b = 0; b < nb; b++) {
        const block_q8_0x4 * xb[4];
        for (int g = 0; g < 4; g++) xb[g] = (const block_q8_0x4 *) (x + (size_t) g * xs) + i0 + b;
        /* per group: 128-bit lane r = row r's bytes 0..15 (lo) or 16..31 (hi) */
        __m512i lo[4], hi[4];
        for (int g = 0; g < 4; g++) {
            const __m512i r01 = _mm512_xor_si512(_mm512_loadu_si512((const void *) xb[g]->qs), off);
            const __m512i r23 = _mm512_xor_si512(_mm512_loadu_si512((const void *) (xb[g]->qs + 64)), off);
            lo[g] = _mm512_shuffle_i32x4(r01, r23, _MM_SHUFFLE(2, 0, 2, 0));
            hi[g] = _mm512_shuffle_i32x4(r01, r23, _MM_SHUFFLE(3, 1, 3, 1));
        }
        /* a 4 x 4 dword transpose inside each 128-bit lane: dword k of the lane's row in every group */
        for (int h = 0; h < 2; h++) {
            const __m512i * v = h ? hi : lo;
            const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
            w[8 * b + 4 * h + 0] = _mm512_unpacklo_epi64(t0, t2);
            w[8 * b + 4 * h + 1] = _mm512_unpackhi_epi64(t0, t2);
            w[8 * b + 4 * h + 2] = _mm512_unpacklo_epi64(t1, t3);
            w[8 * b + 4 * h + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        /* each group's four fp16 scales as one 8-byte value (unaligned: memcpy) */
        long long dg[4];
        for (int g = 0; g < 4; g++) memcpy(&dg[g], xb[g]->d, sizeof dg[g]);
        dx[b] = _mm512_permutexvar_ps(tr, _mm512_cvtph_ps(_mm256_setr_epi64x(dg[0], dg[1], dg[2], dg[3])));
    }
}

/* the activation blocks' kiln_q8_0_aux8 (repack.h: -128 times the sum of
 * each 4 quants, the start of lane j; the scale as f32) where the caller
 * has none: blocks i0 .. i0 + nb of nc rows, KB entries a row */
static inline void q8_0x16_aux_prep(const char * y, size_t ys, int nc, int64_t i0, int nb, kiln_q8_0_aux8 * a) {
    const __m256i off = _mm256_set1_epi8((char) 0x80), zero = _mm256_setzero_si256();
    for (int c = 0; c < nc; c++) {
        for (int b = 0; b < nb; b++) {
            const block_q8_0 * yb = (const block_q8_0 *) (y + (size_t) c * ys) + i0 + b;
            const __m256i s = _mm256_dpbusd_epi32(zero, off, load32(yb->qs));
            _mm256_storeu_si256((__m256i *) a[c * Q8_0X16_KB + b].m128, _mm256_sub_epi32(zero, s));
            a[c * Q8_0X16_KB + b].d = KQ_H2F(yb->d);
        }
    }
}

/* N <= 3 activation rows against the prepared blocks i0 .. i0 + nb; the
 * accumulators (8 per row: 24 registers at N = 3) continue from accm
 * unless first */
static inline __attribute__((always_inline)) void q8_0x16_pass(int64_t i0, int nb, const int N, int first, __m512 * accm, const __m512i * w,
                                                               const __m512 * dx, const char * y, size_t ys, const char * a, size_t as) {
    __m512 acc[3][8];
    for (int c = 0; c < N; c++) {
        for (int j = 0; j < 8; j++) acc[c][j] = first ? _mm512_setzero_ps() : accm[8 * c + j];
    }
    for (int b = 0; b < nb; b++) {
        __m512 d[3];
        const int8_t * yq[3];
        const kiln_q8_0_aux8 * ya[3];
        for (int c = 0; c < N; c++) {
            ya[c] = (const kiln_q8_0_aux8 *) (a + (size_t) c * as) + b;
            d[c] = _mm512_mul_ps(dx[b], _mm512_set1_ps(ya[c]->d));
            yq[c] = ((const block_q8_0 *) (y + (size_t) c * ys) + i0 + b)->qs;
        }
        for (int j = 0; j < 8; j++) {
            const __m512i wj = w[8 * b + j];
            for (int c = 0; c < N; c++) {
                const __m512i p = _mm512_dpbusd_epi32(_mm512_set1_epi32(ya[c]->m128[j]), wj, q8_0x16_bcast4(yq[c] + 4 * j));
                acc[c][j] = _mm512_fmadd_ps(d[c], _mm512_cvtepi32_ps(p), acc[c][j]);
            }
        }
    }
    for (int c = 0; c < N; c++) {
        for (int j = 0; j < 8; j++) accm[8 * c + j] = acc[c][j];
    }
}

void q8_0x16_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as) {
    const __m512i tr = q8_0x16_lanes();
    const int64_t nblk = n / QK8_0;
    __m512i w[8 * Q8_0X16_KB];
    __m512 dx[Q8_0X16_KB], accm[8 * Q8_0X16_NC];
    kiln_q8_0_aux8 own[Q8_0X16_NC * Q8_0X16_KB]; /* the aux blocks when the caller passes none */
    if (nblk == 0) {
        for (int c = 0; c < ncols; c++) _mm512_storeu_ps(s + (size_t) c * ss, _mm512_setzero_ps());
        return;
    }
    for (int c0 = 0; c0 < ncols; c0 += Q8_0X16_NC) {
        const int nc = ncols - c0 < Q8_0X16_NC ? ncols - c0 : Q8_0X16_NC;
        const char * yc = (const char *) y + (size_t) c0 * ys;
        for (int64_t i0 = 0; i0 < nblk; i0 += Q8_0X16_KB) {
            const int nb = nblk - i0 < Q8_0X16_KB ? (int) (nblk - i0) : Q8_0X16_KB;
            q8_0x16_prep((const char *) x, xs, i0, nb, w, dx);
            /* the next range's weights, while this one's passes run */
            if (i0 + Q8_0X16_KB < nblk) {
                const int nn = nblk - (i0 + Q8_0X16_KB) < Q8_0X16_KB ? (int) (nblk - (i0 + Q8_0X16_KB)) : Q8_0X16_KB;
                for (int g = 0; g < 4; g++) {
                    const char * nx = (const char *) ((const block_q8_0x4 *) ((const char *) x + (size_t) g * xs) + i0 + Q8_0X16_KB);
                    for (size_t o = 0; o < nn * sizeof(block_q8_0x4); o += 64) _mm_prefetch(nx + o, _MM_HINT_T0);
                }
            }
            /* ab: block i0's aux entry of row c0, row after row at abs */
            const char * ab = aux ? (const char *) ((const kiln_q8_0_aux8 *) ((const char *) aux + (size_t) c0 * as) + i0) : (const char *) own;
            const size_t abs = aux ? as : sizeof(kiln_q8_0_aux8) * Q8_0X16_KB;
            if (!aux) q8_0x16_aux_prep(yc, ys, nc, i0, nb, own);
            int c = 0;
#define Q8_0X16_PASS(N) q8_0x16_pass(i0, nb, N, i0 == 0, accm + 8 * c, w, dx, yc + (size_t) c * ys, ys, ab + (size_t) c * abs, abs)
            for (; c + 3 <= nc; c += 3) Q8_0X16_PASS(3);
            for (; c + 2 <= nc; c += 2) Q8_0X16_PASS(2);
            if (c < nc) Q8_0X16_PASS(1);
#undef Q8_0X16_PASS
        }
        for (int c = 0; c < nc; c++) {
            const __m512 * a = accm + 8 * c;
            /* hsum_ps's order, lane by lane */
            const __m512 r = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a[0], a[4]), _mm512_add_ps(a[2], a[6])),
                                           _mm512_add_ps(_mm512_add_ps(a[1], a[5]), _mm512_add_ps(a[3], a[7])));
            _mm512_storeu_ps(s + (size_t) (c0 + c) * ss, _mm512_permutexvar_ps(tr, r));
        }
    }
}
