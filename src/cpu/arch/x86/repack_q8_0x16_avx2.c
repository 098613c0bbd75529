/*
 * repack_q8_0x16_avx2.c — the avx2 row's Q8_0 16-row batched kernel
 * (gemm_x16[Q8_0]): 4 repacked x4 groups against many q8_0 activation
 * rows; the avxvnni row inherits it.
 *
 * The order to keep is the plain q8_0 dot's (q8_0_q8_0_vec_dot__avx2,
 * llama.cpp's haswell ggml_vec_dot_q8_0_q8_0): per row and block, 8 i32
 * lanes, lane j = vpmaddwd(vpmaddubsw(|x|, sign(y, x)), 1) over elements
 * 4j..4j+3 (the same operands, so the same integers, saturation included);
 * acc_j = fma(d_x * d_y, (float) lane_j, acc_j), block after block; at the
 * end hsum_ps's ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)).
 *
 * Here a register holds one lane index j for 8 rows instead of the 8 lanes
 * of one row: per block, each half of the 16 rows (groups 2h and 2h + 1)
 * is transposed once (dword unpacks inside the 128-bit lanes of [row k |
 * row k + 4] registers, so the lanes come out in row order) into 8
 * registers, kept with their |x| in an L1 scratch shared by every
 * activation row of the call. Per activation row, block, half and j: one
 * broadcast 4-byte load of y, vpsignb, vpmaddubsw, vpmaddwd, one
 * conversion and one FMA into that row's accumulator for lane j, the
 * scale (the 8 rows' d_x times d_y) formed once per activation row, block
 * and half. No lane permute. The d_y comes from the caller's
 * kiln_q8_0_aux8 (mul_mat forms it for the Q8_0 16-row kernels) when given.
 * Every output is bit-identical to q8_0x4_q8_0_vec_dot__avx2 for its row;
 * tests/c/test_repack.c checks it.
 */
#include <immintrin.h>
#include <string.h>

#include "x86_common.h"
#include "../../repack.h"
#include "quants_impl.h"

/* Cache blocking: Q8_0X16A_KB blocks' weights prepared once (8 KB: x and
 * |x| of 16 rows) for up to Q8_0X16A_NC activation rows, whose 16
 * accumulators each (32 KB in all) stay in memory between block ranges
 * (the same FMA chain per lane: the same results as one pass over all
 * blocks). */
#define Q8_0X16A_KB 8
#define Q8_0X16A_NC 64

static inline __m256i q8_0x16a_bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

static inline __m256i q8_0x16a_load2(const int8_t * lo, const int8_t * hi) {
    return _mm256_set_m128i(_mm_loadu_si128((const __m128i *) hi), _mm_loadu_si128((const __m128i *) lo));
}

/* blocks i0 .. i0 + nb of the 4 groups: for block b and half h, w[32 b + 16 h
 * + j] = |x| and w[32 b + 16 h + 8 + j] = x of bytes 4j..4j+3 of the half's
 * 8 rows (lane r: row 8 h + r); dx[2 b + h] their scales, same lanes */
static inline void q8_0x16a_prep(const char * x, size_t xs, int64_t i0, int nb, __m256i * w, __m256 * dx) {
    for (int b = 0; b < nb; b++) {
        for (int h = 0; h < 2; h++) {
            const block_q8_0x4 * xa = (const block_q8_0x4 *) (x + (size_t) (2 * h) * xs) + i0 + b;
            const block_q8_0x4 * xc = (const block_q8_0x4 *) (x + (size_t) (2 * h + 1) * xs) + i0 + b;
            for (int e = 0; e < 2; e++) { /* bytes 16 e .. 16 e + 15 */
                __m256i v[4]; /* [row k of group a | row k of group c] */
                for (int k = 0; k < 4; k++) v[k] = q8_0x16a_load2(xa->qs + 32 * k + 16 * e, xc->qs + 32 * k + 16 * e);
                const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
                const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
                const __m256i q[4] = { _mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                                       _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3) };
                for (int k = 0; k < 4; k++) {
                    w[32 * b + 16 * h + 4 * e + k] = _mm256_sign_epi8(q[k], q[k]);
                    w[32 * b + 16 * h + 8 + 4 * e + k] = q[k];
                }
            }
            long long da, dc;
            memcpy(&da, xa->d, sizeof da);
            memcpy(&dc, xc->d, sizeof dc);
            dx[2 * b + h] = _mm256_cvtph_ps(_mm_set_epi64x(dc, da));
        }
    }
}

/* one activation row against half h of the prepared blocks i0 .. i0 + nb:
 * its 8 accumulators (one per lane j, the half's 8 rows in each) continue
 * from acc unless first. Per block and lane: broadcast y's bytes 4j..4j+3,
 * sign them by x, vpmaddubsw with |x|, vpmaddwd to i32, convert, one FMA
 * with the 8 rows' d_x * d_y. (Measured alternatives on the 2-core Zen 5
 * VM: 2..4 activation rows per pass over 2 or 4 lanes, y widened to i16
 * with vpmaddwd only, the sign as xor/sub: all slower.) */
static inline void q8_0x16a_pass(int64_t i0, int nb, int h, int first, __m256 * acc8, const __m256i * w, const __m256 * dx,
                                 const block_q8_0 * y, const kiln_q8_0_aux8 * a) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = first ? _mm256_setzero_ps() : acc8[j];
    for (int b = 0; b < nb; b++) {
        const block_q8_0 * yb = y + i0 + b;
        const __m256 d = _mm256_mul_ps(dx[2 * b + h], _mm256_set1_ps(a ? a[i0 + b].d : KQ_H2F(yb->d)));
        const __m256i * wb = w + 32 * b + 16 * h;
        for (int j = 0; j < 8; j++) {
            const __m256i yv = _mm256_sign_epi8(q8_0x16a_bcast4(yb->qs + 4 * j), wb[8 + j]);
            const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(wb[j], yv), ones16);
            acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc[j]);
        }
    }
    for (int j = 0; j < 8; j++) acc8[j] = acc[j];
}

void q8_0x16_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                             const void * aux, size_t as) {
    const int64_t nblk = n / QK8_0;
    __m256i w[32 * Q8_0X16A_KB];
    __m256 dx[2 * Q8_0X16A_KB], accm[16 * Q8_0X16A_NC];
    if (nblk == 0) {
        for (int c = 0; c < ncols; c++) {
            _mm256_storeu_ps(s + (size_t) c * ss, _mm256_setzero_ps());
            _mm256_storeu_ps(s + (size_t) c * ss + 8, _mm256_setzero_ps());
        }
        return;
    }
    for (int c0 = 0; c0 < ncols; c0 += Q8_0X16A_NC) {
        const int nc = ncols - c0 < Q8_0X16A_NC ? ncols - c0 : Q8_0X16A_NC;
        const char * yc = (const char *) y + (size_t) c0 * ys;
        const char * ac = aux ? (const char *) aux + (size_t) c0 * as : NULL;
        for (int64_t i0 = 0; i0 < nblk; i0 += Q8_0X16A_KB) {
            const int nb = nblk - i0 < Q8_0X16A_KB ? (int) (nblk - i0) : Q8_0X16A_KB;
            q8_0x16a_prep((const char *) x, xs, i0, nb, w, dx);
            /* the next range's weights, while this one's passes run */
            if (i0 + Q8_0X16A_KB < nblk) {
                const int nn = nblk - (i0 + Q8_0X16A_KB) < Q8_0X16A_KB ? (int) (nblk - (i0 + Q8_0X16A_KB)) : Q8_0X16A_KB;
                for (int g = 0; g < 4; g++) {
                    const char * nx = (const char *) ((const block_q8_0x4 *) ((const char *) x + (size_t) g * xs) + i0 + Q8_0X16A_KB);
                    for (size_t o = 0; o < nn * sizeof(block_q8_0x4); o += 64) _mm_prefetch(nx + o, _MM_HINT_T0);
                }
            }
            for (int c = 0; c < nc; c++) {
                const block_q8_0 * yr = (const block_q8_0 *) (yc + (size_t) c * ys);
                const kiln_q8_0_aux8 * ar = ac ? (const kiln_q8_0_aux8 *) (ac + (size_t) c * as) : NULL;
                for (int h = 0; h < 2; h++) q8_0x16a_pass(i0, nb, h, i0 == 0, accm + 16 * c + 8 * h, w, dx, yr, ar);
            }
        }
        for (int c = 0; c < nc; c++) {
            for (int h = 0; h < 2; h++) {
                const __m256 * a = accm + 16 * c + 8 * h;
                /* hsum_ps's order, lane by lane */
                const __m256 r = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6])),
                                               _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7])));
                _mm256_storeu_ps(s + (size_t) (c0 + c) * ss + 8 * h, r);
            }
        }
    }
}
