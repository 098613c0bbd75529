/*
 * quant_avx512.c — the avx512 row's q4_0 and q8_0 dot products (plain, x4
 * repacked, batched) and iq4_nl's plain ones (both of AVX2's orders).
 * Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni (plus
 * AVX2/FMA/F16C) for this file only; the kernel table selects them at run
 * time (kiln_cpu_has_avx512_vnni).
 *
 * Exactness rule: every kernel here is bit-identical to the AVX2 kernel of
 * the same slot (quant_dot_avx2.c, repack_avx2.c), so the oracle's
 * comparison with llama.cpp's haswell variant holds for this row too. The
 * integer block sums are formed with VNNI (vpdpbusd: four u8 x s8 products
 * per i32 lane, exact) and 512-bit registers; integer sums are exact in any
 * grouping, so they equal AVX2's maddubs/madd sums. The float steps (one FMA
 * per block and row, in block order, the same lanes, the same final
 * reduction) are AVX2's, one for one. Inputs are q8_0 blocks as the
 * quantizers write them (values in -127..127: AVX2's maddubs cannot
 * saturate on them, so the two integer paths agree).
 */
#include <immintrin.h>
#include <string.h>
#include <math.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "quant_vnni256.h"
#include "quant_iq4nl_x86.h"

/* signed x signed bytes -> 16 i32 lanes of 4 products (AVX-512 has no sign_epi8: negate y where x < 0) */
static inline __m512i dot_i8_512(__m512i x, __m512i y) {
    const __m512i ys = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x), ys);
}

/* ---- plain rows ---------------------------------------------------------- */

KILN_VNNI256_DOTS(avx512, _mm256_dpbusd_epi32)

/* ---- iq4_nl: AVX2's two orders (quant_iq4nl_x86.h), a block's lanes by one vpdpbusd ---- */

static inline __m256i iq4nl_isums_avx512(const uint8_t * qs, const int8_t * yq) {
    const __m256i q = iq4nl_lookup(qs), y = load32(yq);
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
}

KILN_IQ4NL_DOTS(avx512, iq4nl_isums_avx512)

/* ---- q8_0 x4 -------------------------------------------------------------- */

/* lanes 0..3: the 4 rows' d * d_y (AVX2's scales_x4) */
static inline __m128 scales_x4(const kiln_fp16_t * d, kiln_fp16_t dy) {
    const __m128 dx = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) d));
    return _mm_mul_ps(dx, _mm_set1_ps(KQ_H2F(dy)));
}

/* rows r, r+1 of one block: AVX2's two 8-lane steps in the halves of one
 * 16-lane accumulator (lane j of half h: row r+h, the same i32 sum and the
 * same FMA as AVX2's lane j of that row) */
static inline __m512 q8_0x4_step(__m512 acc, const int8_t * xq, __m512i yq, __m128 dd, int r) {
    const __m512i sel = _mm512_set_epi32(r + 1, r + 1, r + 1, r + 1, r + 1, r + 1, r + 1, r + 1, r, r, r, r, r, r, r, r);
    const __m512 d = _mm512_permutexvar_ps(sel, _mm512_castps128_ps512(dd));
    const __m512i p = dot_i8_512(_mm512_loadu_si512((const void *) xq), yq);
    return _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(p), acc);
}

static inline __m256 hi256(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

static inline void store_rows(float * s, __m512 a01, __m512 a23) {
    s[0] = hsum_ps(_mm512_castps512_ps256(a01));
    s[1] = hsum_ps(hi256(a01));
    s[2] = hsum_ps(_mm512_castps512_ps256(a23));
    s[3] = hsum_ps(hi256(a23));
}

static inline __m512i bcast32(const int8_t * p) { return _mm512_broadcast_i64x4(load32(p)); }

void q8_0x4_q8_0_vec_dot__avx512(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    __m512 a01 = _mm512_setzero_ps(), a23 = a01;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m512i yq = bcast32(y[i].qs);
        const __m128 dd = scales_x4(x[i].d, y[i].d);
        a01 = q8_0x4_step(a01, x[i].qs, yq, dd, 0);
        a23 = q8_0x4_step(a23, x[i].qs + 64, yq, dd, 2);
    }
    store_rows(s, a01, a23);
}

static void q8_0x4_2cols(int64_t n, float * s0, float * s1, const block_q8_0x4 * x, const block_q8_0 * y0, const block_q8_0 * y1) {
    __m512 a01 = _mm512_setzero_ps(), a23 = a01, b01 = a01, b23 = a01;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m512i q0 = bcast32(y0[i].qs), q1 = bcast32(y1[i].qs);
        const __m128 d0 = scales_x4(x[i].d, y0[i].d), d1 = scales_x4(x[i].d, y1[i].d);
        a01 = q8_0x4_step(a01, x[i].qs, q0, d0, 0);
        a23 = q8_0x4_step(a23, x[i].qs + 64, q0, d0, 2);
        b01 = q8_0x4_step(b01, x[i].qs, q1, d1, 0);
        b23 = q8_0x4_step(b23, x[i].qs + 64, q1, d1, 2);
    }
    store_rows(s0, a01, a23);
    store_rows(s1, b01, b23);
}

/* four activation rows: per block the weights' magnitudes, signs and
 * scales are prepared once for all of them; per row and column the i32
 * lanes, the scale d_x * d_y and the FMA are q8_0x4_step's (so AVX2's) */
static void q8_0x4_4cols(int64_t n, float * s, size_t ss, const block_q8_0x4 * x, const char * y, size_t ys) {
    const __m512i sel01 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i sel23 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
    __m512 a01[4], a23[4];
    for (int c = 0; c < 4; c++) a01[c] = a23[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m512i w01 = _mm512_loadu_si512((const void *) x[i].qs), w23 = _mm512_loadu_si512((const void *) (x[i].qs + 64));
        const __m512i u01 = _mm512_abs_epi8(w01), u23 = _mm512_abs_epi8(w23);
        const __mmask64 n01 = _mm512_movepi8_mask(w01), n23 = _mm512_movepi8_mask(w23);
        const __m512 dx = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) x[i].d)));
        const __m512 dx01 = _mm512_permutexvar_ps(sel01, dx), dx23 = _mm512_permutexvar_ps(sel23, dx);
        for (int c = 0; c < 4; c++) {
            const block_q8_0 * yb = (const block_q8_0 *) (y + (size_t) c * ys) + i;
            const __m512i yq = bcast32(yb->qs);
            const __m512 dy = _mm512_set1_ps(KQ_H2F(yb->d));
            const __m512i p01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u01, _mm512_mask_sub_epi8(yq, n01, _mm512_setzero_si512(), yq));
            const __m512i p23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u23, _mm512_mask_sub_epi8(yq, n23, _mm512_setzero_si512(), yq));
            a01[c] = _mm512_fmadd_ps(_mm512_mul_ps(dx01, dy), _mm512_cvtepi32_ps(p01), a01[c]);
            a23[c] = _mm512_fmadd_ps(_mm512_mul_ps(dx23, dy), _mm512_cvtepi32_ps(p23), a23[c]);
        }
    }
    for (int c = 0; c < 4; c++) store_rows(s + (size_t) c * ss, a01[c], a23[c]);
}

void q8_0x4_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 4 <= ncols; c += 4) q8_0x4_4cols(n, s + (size_t) c * ss, ss, x, (const char *) y + (size_t) c * ys, ys);
    KILN_GEMM_X4_BY_PAIRS(q8_0x4_2cols, q8_0x4_q8_0_vec_dot__avx512, n, ncols - c, s + (size_t) c * ss, ss, x,
                          (const char *) y + (size_t) c * ys, ys);
}

/* q8_0, 4 x4 groups (16 rows) per call: repack_q8_0x16_avx512.c */

/* ---- q4_0 x4 (llama.cpp's repacked order, as repack_avx2.c) ---------------- */

/* One block of 4 rows (16 bytes of nibbles each, one 128-bit lane per row)
 * against activations ya (elements 0..15) and yh (16..31), broadcast per
 * lane: 16 i32 lanes, 4 per row, each row's lanes summing to its block sum
 * (sum (q - 8) * y, exact). */
static inline __m512i q4_0x4_isums(__m512i v, __m512i ya, __m512i yh, __m512i corr) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    const __m512i p = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), l, ya), h, yh);
    return _mm512_sub_epi32(p, corr);
}

/* sum(8 * y) per 4 bytes of each half, broadcast to the 4 row lanes */
static inline __m512i q4_0x4_corr(__m512i ya, __m512i yh) {
    const __m512i eights = _mm512_set1_epi8(8);
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, ya), eights, yh);
}

/* every lane of a row's group of 4 -> that row's total */
static inline __m512i rowsum4(__m512i p) {
    p = _mm512_add_epi32(p, _mm512_shuffle_epi32(p, _MM_PERM_BADC));
    return _mm512_add_epi32(p, _mm512_shuffle_epi32(p, _MM_PERM_CDAB));
}

static inline __m512i bcast16(const int8_t * p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *) p)); }

void q4_0x4_q8_0_vec_dot__avx512(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0x4 * x = vx;
    const block_q8_0 * y = vy;
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m512i ya = bcast16(y[i].qs), yh = bcast16(y[i].qs + 16);
        const __m512i p = rowsum4(q4_0x4_isums(_mm512_loadu_si512((const void *) x[i].qs), ya, yh, q4_0x4_corr(ya, yh)));
        const __m128i isum = _mm512_castsi512_si128(_mm512_permutexvar_epi32(pick, p));
        /* AVX2's float step: fma((float) isum, d_x * d_y, acc), rows in lanes */
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), scales_x4(x[i].d, y[i].d), acc);
    }
    _mm_storeu_ps(s, acc);
}

/* two activation rows: the nibbles are loaded once; the 2 x 4 rows in the
 * 8 lanes of one accumulator, as q4_0x4_2cols of repack_avx2.c */
static void q4_0x4_2cols(int64_t n, float * s0, float * s1, const block_q4_0x4 * x, const block_q8_0 * y0, const block_q8_0 * y1) {
    const __m512i pick = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const __m512i v = _mm512_loadu_si512((const void *) x[i].qs);
        const __m512i ya0 = bcast16(y0[i].qs), yh0 = bcast16(y0[i].qs + 16);
        const __m512i ya1 = bcast16(y1[i].qs), yh1 = bcast16(y1[i].qs + 16);
        const __m512i p0 = rowsum4(q4_0x4_isums(v, ya0, yh0, q4_0x4_corr(ya0, yh0)));
        const __m512i p1 = rowsum4(q4_0x4_isums(v, ya1, yh1, q4_0x4_corr(ya1, yh1)));
        const __m256i isum = _mm512_castsi512_si256(_mm512_permutex2var_epi32(p0, pick, p1));
        acc = q4_0x4_2cols_fma(isum, x[i].d, y0[i].d, y1[i].d, acc);
    }
    _mm_storeu_ps(s0, _mm256_castps256_ps128(acc));
    _mm_storeu_ps(s1, _mm256_extractf128_ps(acc, 1));
}

void q4_0x4_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q4_0x4_2cols, q4_0x4_q8_0_vec_dot__avx512, n, ncols, s, ss, x, y, ys);
}

/* ---- q4_0, 4 x4 groups (16 rows) at once --------------------------------- */

/* Per block, the 4 groups' nibbles are transposed once into 16 rows x 4
 * bytes per register (a 4 x 4 dword transpose inside each 128-bit lane:
 * register k holds bytes 4k..4k+3 of every row, lane 4 r + g for row r of
 * group g) and split into low (elements 4k..4k+3) and high (16 + 4k..)
 * nibbles, 8 registers shared by every activation row of the pass. Per
 * activation row and block, 8 vpdpbusd against the broadcast 4-byte
 * activation groups give each lane its row's whole block sum directly,
 * started from the block's -8 * sum(y) (kiln_q8_0_aux): sum (q - 8) * y,
 * exact, so equal to AVX2's maddubs/madd sum. The float step is AVX2's
 * fma((float) isum, d_x * d_y, acc) per row and block, the scales
 * permuted into the same lanes; the lanes go back to row order at the
 * store. Every output is bit-identical to q4_0x4_q8_0_vec_dot__avx2's. */
static inline __m512i bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm512_set1_epi32(v);
}

/* lane 4 r + g <-> row 4 g + r (its own inverse) */
static inline __m512i q4_0x16_lanes(void) { return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15); }

/* blocks i0 .. i0 + nb of the 4 groups, transposed and split: w[8 b + k]
 * low nibbles of bytes 4k..4k+3 of every row (k < 4), w[8 b + 4 + k] the
 * high ones; dx[b] the 16 rows' scales, in the same lanes */
static inline void q4_0x16_prep(const char * x, size_t xs, int64_t i0, int nb, __m512i * w, __m512 * dx) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), tr = q4_0x16_lanes();
    for (int b = 0; b < nb; b++) {
        const block_q4_0x4 * xb[4];
        for (int g = 0; g < 4; g++) xb[g] = (const block_q4_0x4 *) (x + (size_t) g * xs) + i0 + b;
        __m512i v[4];
        for (int g = 0; g < 4; g++) v[g] = _mm512_loadu_si512((const void *) xb[g]->qs);
        const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
        const __m512i q[4] = { _mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                               _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3) };
        for (int k = 0; k < 4; k++) {
            w[8 * b + k] = _mm512_and_si512(q[k], m4);
            w[8 * b + 4 + k] = _mm512_and_si512(_mm512_srli_epi16(q[k], 4), m4);
        }
        /* each group's four fp16 scales as one 8-byte value (unaligned: memcpy) */
        long long dg[4];
        for (int g = 0; g < 4; g++) memcpy(&dg[g], xb[g]->d, sizeof dg[g]);
        dx[b] = _mm512_permutexvar_ps(tr, _mm512_cvtph_ps(_mm256_setr_epi64x(dg[0], dg[1], dg[2], dg[3])));
    }
}

/* N activation rows against the prepared blocks i0 .. i0 + nb: per row and
 * block 8 vpdpbusd from the block's m8sum, then AVX2's float step; the
 * accumulators continue from acc (zero at the first blocks) */
static inline __attribute__((always_inline)) void q4_0x16_pass(int64_t i0, int nb, const int N, __m512 * accm, const __m512i * w,
                                                               const __m512 * dx, const char * y, size_t ys, const char * aux, size_t as) {
    __m512 acc[8];
    for (int c = 0; c < N; c++) acc[c] = i0 ? accm[c] : _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        for (int c = 0; c < N; c++) {
            const int8_t * yq = ((const block_q8_0 *) (y + (size_t) c * ys) + i0 + b)->qs;
            const kiln_q8_0_aux * ya = (const kiln_q8_0_aux *) (aux + (size_t) c * as) + i0 + b;
            __m512i p = _mm512_set1_epi32(ya->m8sum);
            for (int k = 0; k < 4; k++) p = _mm512_dpbusd_epi32(p, w[8 * b + k], bcast4(yq + 4 * k));
            for (int k = 0; k < 4; k++) p = _mm512_dpbusd_epi32(p, w[8 * b + 4 + k], bcast4(yq + 16 + 4 * k));
            const __m512 d = _mm512_mul_ps(dx[b], _mm512_set1_ps(ya->d));
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), d, acc[c]);
        }
    }
    for (int c = 0; c < N; c++) accm[c] = acc[c];
}

/* Cache blocking: the weights of Q4_0X16_KB blocks are prepared once (4.5
 * KB) for every activation row of the call, Q4_0X16_NC rows at a time, the
 * accumulators kept in memory between block ranges (the same FMA chain per
 * lane, so the same results as one pass over all blocks). */
#define Q4_0X16_KB 8
#define Q4_0X16_NC 32
void q4_0x16_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as) {
    const __m512i tr = q4_0x16_lanes();
    const int64_t nblk = n / QK8_0;
    __m512i w[8 * Q4_0X16_KB];
    __m512 dx[Q4_0X16_KB], accm[Q4_0X16_NC];
    for (int c0 = 0; c0 < ncols; c0 += Q4_0X16_NC) {
        const int nc = ncols - c0 < Q4_0X16_NC ? ncols - c0 : Q4_0X16_NC;
        const char * yc = (const char *) y + (size_t) c0 * ys, * ac = (const char *) aux + (size_t) c0 * as;
        for (int64_t i0 = 0; i0 < nblk; i0 += Q4_0X16_KB) {
            const int nb = nblk - i0 < Q4_0X16_KB ? (int) (nblk - i0) : Q4_0X16_KB;
            q4_0x16_prep((const char *) x, xs, i0, nb, w, dx);
            int c = 0;
#define Q4_0X16_PASS(NC) q4_0x16_pass(i0, nb, NC, accm + c, w, dx, yc + (size_t) c * ys, ys, ac + (size_t) c * as, as)
            for (; c + 8 <= nc; c += 8) Q4_0X16_PASS(8);
            for (; c + 4 <= nc; c += 4) Q4_0X16_PASS(4);
            for (; c + 2 <= nc; c += 2) Q4_0X16_PASS(2);
            if (c < nc) Q4_0X16_PASS(1);
#undef Q4_0X16_PASS
        }
        for (int c = 0; c < nc; c++) _mm512_storeu_ps(s + (size_t) (c0 + c) * ss, _mm512_permutexvar_ps(tr, accm[c]));
    }
}
