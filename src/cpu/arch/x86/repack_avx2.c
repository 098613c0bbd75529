/*
 * repack_avx2.c — AVX2 x4 mat-vec kernels (see src/cpu/repack.h).
 *
 * q8_0: per row, the float arithmetic of q8_0_q8_0_vec_dot__avx2 exactly
 * (the same per-lane i32 sums, one FMA accumulator per row in block order,
 * the same final reduction), so results are bit-identical to the plain path.
 *
 * q4_0, iq4_nl: llama.cpp's repacked order, bit-identical to the scalar x4
 * kernels (repack_scalar.c).
 */
#include <immintrin.h>
#include <string.h>

#include "x86_common.h"
#include "../../repack.h"
#include "quants_impl.h"
#include "repack_q4_0x16_x86.h"

/* lanes 0..3: the 4 rows' d * d_y, each the same fp32 product as the plain
 * kernel's (F16C converts exactly either way) */
static inline __m256 scales_x4(const kiln_fp16_t * d, kiln_fp16_t dy) {
    const __m128 dx = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) d));
    return _mm256_castps128_ps256(_mm_mul_ps(dx, _mm_set1_ps(KQ_H2F(dy))));
}

static inline __m256i dot_i8(__m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* q4_0 and iq4_nl: llama.cpp's repacked order (see repack.h) — per row and
 * block, acc = fma((float) isum, d_x * d_y, acc), the 4 rows in the lanes
 * of one 128-bit accumulator. Integer sums are exact in any grouping. */
/* llama.cpp's repacked order: p01 holds rows 0 | 1 and p23 rows 2 | 3 of a
 * block, 4 i32 lanes each; their whole-block sums ([r0 r0 r2 r2 | r1 r1 r3
 * r3], then [r0 r2 . . | r1 r3 . .]) times d_x * d_y, one FMA per row */
static inline __m128 blocksum_fma_x4(__m256i p01, __m256i p23, const kiln_fp16_t * dx, kiln_fp16_t dy, __m128 acc) {
    const __m256i h = _mm256_hadd_epi32(p01, p23);
    const __m256i h2 = _mm256_hadd_epi32(h, h);
    const __m128i isum = _mm_unpacklo_epi32(_mm256_castsi256_si128(h2), _mm256_extracti128_si256(h2, 1));
    return _mm_fmadd_ps(_mm_cvtepi32_ps(isum), _mm256_castps256_ps128(scales_x4(dx, dy)), acc);
}

/* q4_0x4: one activation block (halves broadcast as ya, yh) against the
 * nibbles of rows 0|1 (l01 low, h01 high) and 2|3: the i32 lane sums p01,
 * p23 (rows r and r+1 in the two 128-bit halves; each lane: elements
 * 4j..4j+3 and 16+4j..16+4j+3; maddubs pairs stay below 2*15*127, two of
 * them fit in i16). The nibbles stay unsigned; their -8 comes off as 8 *
 * (the same sums of y). */
static inline void q4_0x4_isums(__m256i l01, __m256i h01, __m256i l23, __m256i h23, __m256i ya, __m256i yh,
                                __m256i * p01, __m256i * p23) {
    const __m256i ones16 = _mm256_set1_epi16(1), eights = _mm256_set1_epi8(8);
    const __m256i corr = _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(eights, ya),
                                                             _mm256_maddubs_epi16(eights, yh)), ones16);
    *p01 = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(l01, ya), _mm256_maddubs_epi16(h01, yh)), ones16), corr);
    *p23 = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(l23, ya), _mm256_maddubs_epi16(h23, yh)), ones16), corr);
}

static inline __m256i bcast16(const int8_t * p) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *) p)); }

void q4_0x4_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0x4 * x = vx;
    const block_q8_0 * y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m128 acc = _mm_setzero_ps();
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        /* one 32-byte load holds rows r and r+1 (16 bytes of nibbles each):
         * low nibbles are elements 0..15 of both, high nibbles 16..31, so
         * the activations are broadcast per half instead of the weights
         * being regrouped */
        const __m256i v01 = load32(x[i].qs), v23 = load32(x[i].qs + 32);
        __m256i p01, p23;
        q4_0x4_isums(_mm256_and_si256(v01, m4), _mm256_and_si256(_mm256_srli_epi16(v01, 4), m4),
                     _mm256_and_si256(v23, m4), _mm256_and_si256(_mm256_srli_epi16(v23, 4), m4),
                     bcast16(y[i].qs), bcast16(y[i].qs + 16), &p01, &p23);
        acc = blocksum_fma_x4(p01, p23, x[i].d, y[i].d, acc);
    }
    _mm_storeu_ps(s, acc);
}

/* iq4_nl x4: one block's levels (rows 0|1 low / high nibbles, rows 2|3),
 * looked up once per block for every activation row that follows */
struct iq4_nlx4_levels { __m256i l01, h01, l23, h23; };

static inline struct iq4_nlx4_levels iq4_nlx4_lookup(const block_iq4_nlx4 * xb, __m256i lut) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v01 = load32(xb->qs), v23 = load32(xb->qs + 32);
    struct iq4_nlx4_levels w;
    w.l01 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v01, m4));
    w.h01 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v01, 4), m4));
    w.l23 = _mm256_shuffle_epi8(lut, _mm256_and_si256(v23, m4));
    w.h23 = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v23, 4), m4));
    return w;
}

/* as q4_0x4 above: activations broadcast per half; the levels are signed,
 * so each half's dot goes through dot_i8 and adds in i32 */
static inline __m128 iq4_nlx4_step(const struct iq4_nlx4_levels * w, const block_iq4_nlx4 * xb, const block_q8_0 * yb, __m128 acc) {
    const __m256i ya = bcast16(yb->qs), yh = bcast16(yb->qs + 16);
    const __m256i p01 = _mm256_add_epi32(dot_i8(w->l01, ya), dot_i8(w->h01, yh));
    const __m256i p23 = _mm256_add_epi32(dot_i8(w->l23, ya), dot_i8(w->h23, yh));
    return blocksum_fma_x4(p01, p23, xb->d, yb->d, acc);
}

static inline __m256i iq4_nl_lut(void) {
    const __m128i values = _mm_loadu_si128((const __m128i *) kiln_kvalues_iq4nl);
    return _mm256_set_m128i(values, values);
}

void iq4_nlx4_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_nlx4 * x = vx;
    const block_q8_0 * y = vy;
    const __m256i lut = iq4_nl_lut();
    __m128 acc = _mm_setzero_ps();
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const struct iq4_nlx4_levels w = iq4_nlx4_lookup(&x[i], lut);
        acc = iq4_nlx4_step(&w, &x[i], &y[i], acc);
    }
    _mm_storeu_ps(s, acc);
}

void q8_0x4_q8_0_vec_dot__avx2(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
    const int64_t nb = n / QK8_0;
#define ROW(i, r, acc) do { \
        const __m256 d = _mm256_permutevar8x32_ps(dd, _mm256_set1_epi32(r)); \
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_i8(load32(x[i].qs + 32 * (r)), yq)), acc); \
    } while (0)
#define STEP(i, A0, A1, A2, A3) do { \
        const __m256i yq = load32(y[i].qs); \
        const __m256 dd = scales_x4(x[i].d, y[i].d); \
        ROW(i, 0, A0); ROW(i, 1, A1); ROW(i, 2, A2); ROW(i, 3, A3); \
    } while (0)
    for (int64_t i = 0; i < nb; i++) STEP(i, a00, a01, a02, a03);
#undef STEP
#undef ROW
    s[0] = hsum_ps(a00);
    s[1] = hsum_ps(a01);
    s[2] = hsum_ps(a02);
    s[3] = hsum_ps(a03);
}

/* ---- batched (prompt processing): one x4 group, several activation rows -- */

/* q4_0 against 2 activation rows: the nibbles are masked and shifted once
 * per block for both. Per row the integer block sums are q4_0x4's exactly
 * (any grouping of exact i32 adds), and the float step is the same
 * fma(isum, d_x * d_y, acc) per row and block, the 2 x 4 rows in the 8
 * lanes of one accumulator: bit-identical to two q4_0x4 calls. */
static void q4_0x4_2cols(int64_t n, float * s0, float * s1, const block_q4_0x4 * x, const block_q8_0 * y0, const block_q8_0 * y1) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    /* hadd(hadd(p01, p23) of column 0, of column 1) leaves [r0 r2 r0' r2' | r1 r3 r1' r3'] */
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256 acc = _mm256_setzero_ps();
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i v01 = load32(x[i].qs), v23 = load32(x[i].qs + 32);
        const __m256i l01 = _mm256_and_si256(v01, m4), h01 = _mm256_and_si256(_mm256_srli_epi16(v01, 4), m4);
        const __m256i l23 = _mm256_and_si256(v23, m4), h23 = _mm256_and_si256(_mm256_srli_epi16(v23, 4), m4);
        __m256i p01, p23, q01, q23;
        q4_0x4_isums(l01, h01, l23, h23, bcast16(y0[i].qs), bcast16(y0[i].qs + 16), &p01, &p23);
        q4_0x4_isums(l01, h01, l23, h23, bcast16(y1[i].qs), bcast16(y1[i].qs + 16), &q01, &q23);
        const __m256i isum = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(_mm256_hadd_epi32(p01, p23), _mm256_hadd_epi32(q01, q23)), order);
        acc = q4_0x4_2cols_fma(isum, x[i].d, y0[i].d, y1[i].d, acc);
    }
    _mm_storeu_ps(s0, _mm256_castps256_ps128(acc));
    _mm_storeu_ps(s1, _mm256_extractf128_ps(acc, 1));
}

void q4_0x4_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q4_0x4_2cols, q4_0x4_q8_0_vec_dot__avx2, n, ncols, s, ss, x, y, ys);
}

/* iq4_nl against 2 activation rows: the levels looked up once per block for
 * both, then per column iq4_nlx4's very steps (bit-identical to it) */
static void iq4_nlx4_2cols(int64_t n, float * s0, float * s1, const block_iq4_nlx4 * x, const block_q8_0 * y0, const block_q8_0 * y1) {
    const __m256i lut = iq4_nl_lut();
    __m128 a0 = _mm_setzero_ps(), a1 = a0;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        const struct iq4_nlx4_levels w = iq4_nlx4_lookup(&x[i], lut);
        a0 = iq4_nlx4_step(&w, &x[i], &y0[i], a0);
        a1 = iq4_nlx4_step(&w, &x[i], &y1[i], a1);
    }
    _mm_storeu_ps(s0, a0);
    _mm_storeu_ps(s1, a1);
}

void iq4_nlx4_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(iq4_nlx4_2cols, iq4_nlx4_q8_0_vec_dot__avx2, n, ncols, s, ss, x, y, ys);
}

/* q8_0 against 2 activation rows: per row and column the very operations of
 * q8_0x4 (so of the plain kernel), the weights loaded and their |w| taken
 * once per block for both columns; 8 accumulators of 8 lanes. */
static void q8_0x4_2cols(int64_t n, float * s0, float * s1, const block_q8_0x4 * x, const block_q8_0 * y0, const block_q8_0 * y1) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 a0[4], a1[4];
    for (int r = 0; r < 4; r++) a0[r] = a1[r] = _mm256_setzero_ps();
    const int64_t nb = n / QK8_0;
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q0 = load32(y0[i].qs), q1 = load32(y1[i].qs);
        const __m256 d0 = scales_x4(x[i].d, y0[i].d), d1 = scales_x4(x[i].d, y1[i].d);
        for (int r = 0; r < 4; r++) {
            const __m256i w = load32(x[i].qs + 32 * r), aw = _mm256_sign_epi8(w, w);
            const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(q0, w)), ones16);
            const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(q1, w)), ones16);
            const __m256i lane = _mm256_set1_epi32(r);
            a0[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d0, lane), _mm256_cvtepi32_ps(p0), a0[r]);
            a1[r] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(d1, lane), _mm256_cvtepi32_ps(p1), a1[r]);
        }
    }
    for (int r = 0; r < 4; r++) {
        s0[r] = hsum_ps(a0[r]);
        s1[r] = hsum_ps(a1[r]);
    }
}

void q8_0x4_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q8_0x4_2cols, q8_0x4_q8_0_vec_dot__avx2, n, ncols, s, ss, x, y, ys);
}

/* ---- q4_0, 4 x4 groups (16 rows) at once (repack_q4_0x16_x86.h) ------- */

/* per activation row, block and 8 rows: 8 vpmaddubsw against the broadcast
 * 4-byte activation groups summed in i16 (each lane at most 8 x 2 x 15 x
 * 128 = 30720 in magnitude: exact), one vpmaddwd to i32, + the block's
 * -8 * sum(y) */
static inline __attribute__((always_inline)) void q4_0x16_pass_avx2(int64_t i0, int nb, const int N, __m256 * accm, const __m256i * w,
                                                                    const __m256 * dx, const char * y, size_t ys, const char * aux, size_t as) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    __m256 acc[8];
    for (int c = 0; c < 2 * N; c++) acc[c] = i0 ? accm[c] : _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i s16[8];
        for (int c = 0; c < 2 * N; c++) s16[c] = _mm256_setzero_si256();
        for (int k = 0; k < 8; k++) {
            const __m256i w0 = w[16 * b + k], w1 = w[16 * b + 8 + k];
            const int off = k < 4 ? 4 * k : 16 + 4 * (k - 4);
            for (int c = 0; c < N; c++) {
                const __m256i yk = q4_0x16_bcast4(((const block_q8_0 *) (y + (size_t) c * ys) + i0 + b)->qs + off);
                s16[2 * c] = _mm256_add_epi16(s16[2 * c], _mm256_maddubs_epi16(w0, yk));
                s16[2 * c + 1] = _mm256_add_epi16(s16[2 * c + 1], _mm256_maddubs_epi16(w1, yk));
            }
        }
        for (int c = 0; c < N; c++) {
            const kiln_q8_0_aux * ya = (const kiln_q8_0_aux *) (aux + (size_t) c * as) + i0 + b;
            const __m256i m8 = _mm256_set1_epi32(ya->m8sum);
            const __m256 dy = _mm256_set1_ps(ya->d);
            for (int h = 0; h < 2; h++) {
                const __m256i p = _mm256_add_epi32(_mm256_madd_epi16(s16[2 * c + h], ones16), m8);
                acc[2 * c + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dx[2 * b + h], dy), acc[2 * c + h]);
            }
        }
    }
    for (int c = 0; c < 2 * N; c++) accm[c] = acc[c];
}

KILN_Q4_0X16_GEMM(q4_0x16_pass_avx2, avx2)
