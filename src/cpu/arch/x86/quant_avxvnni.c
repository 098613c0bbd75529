/*
 * quant_avxvnni.c — the avxvnni row: AVX2's table with the q4_0 / q8_0 /
 * iq4_nl plain dot products and the Q4_K x8 kernels on AVX-VNNI (the
 * VEX-encoded 256-bit vpdpbusd of Intel client CPUs since Alder Lake, and
 * of AMD Zen 5), for CPUs that have it without AVX-512. Compiled with
 * -mavxvnni for this file only; selected at run time (kiln_cpu_has_avxvnni).
 * Every kernel is bit-identical to the AVX2 one of its slot: integer sums
 * are exact in any grouping, the float steps are AVX2's (quant_vnni256.h,
 * repack_q4_K_x86.h, quant_iq4nl_x86.h).
 */
#include <immintrin.h>
#include <math.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "quants_impl.h"
#include "quant_vnni256.h"
#include "repack_q4_K_x86.h"
#include "repack_q4_0x16_x86.h"
#include "quant_iq4nl_x86.h"

KILN_VNNI256_DOTS(avxvnni, _mm256_dpbusd_avx_epi32)

/* iq4_nl in AVX2's two orders, a block's lanes by one vpdpbusd */
static inline __m256i iq4nl_isums_avxvnni(const uint8_t * qs, const int8_t * yq) {
    const __m256i q = iq4nl_lookup(qs), y = load32(yq);
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), _mm256_sign_epi8(q, q), _mm256_sign_epi8(y, q));
}

KILN_IQ4NL_DOTS(avxvnni, iq4nl_isums_avxvnni)

/* rows r..r+3 of a Q4_K x8 group: each row's two i32 lanes added and
 * multiplied by its scale in 64-bit lanes */
static inline __m256i scaled_sub4(__m256i d, uint32_t sc4) {
    const __m256i sum = _mm256_add_epi32(d, _mm256_srli_epi64(d, 32));
    return _mm256_mul_epi32(sum, _mm256_cvtepu8_epi64(_mm_cvtsi32_si128((int) sc4)));
}

/* Q4_K x8 integer core: a 32-byte load is one 8-byte piece of 4 rows
 * (repack_q4_K_avx512.c does the same with all 8 rows per load) */
static inline void q4kx8_core_avxvnni(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * yb, __m256i ip[4]) {
    const __m256i evens = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
    for (int p = 0; p < 4; p++) {
        __m256i lo_a = _mm256_setzero_si256(), lo_b = lo_a, hi_a = lo_a, hi_b = lo_a;
        for (int k = 0; k < 4; k++) {
            const struct q4kx8_piece w = q4kx8_load_piece(xb, yb, p, k);
            lo_a = _mm256_dpbusd_avx_epi32(lo_a, w.lo_a, w.vl);
            lo_b = _mm256_dpbusd_avx_epi32(lo_b, w.lo_b, w.vl);
            hi_a = _mm256_dpbusd_avx_epi32(hi_a, w.hi_a, w.vh);
            hi_b = _mm256_dpbusd_avx_epi32(hi_b, w.hi_b, w.vh);
        }
        const uint64_t s0 = sb->sc[2 * p], s1 = sb->sc[2 * p + 1];
        const __m256i ta = _mm256_add_epi64(scaled_sub4(lo_a, (uint32_t) s0), scaled_sub4(hi_a, (uint32_t) s1));
        const __m256i tb = _mm256_add_epi64(scaled_sub4(lo_b, (uint32_t) (s0 >> 32)), scaled_sub4(hi_b, (uint32_t) (s1 >> 32)));
        /* the low 32 bits of each 64-bit sum (they fit), rows 0..3 then 4..7 */
        ip[p] = _mm256_set_m128i(_mm256_castsi256_si128(_mm256_permutevar8x32_epi32(tb, evens)),
                                 _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(ta, evens)));
    }
}

KILN_Q4_KX8_VEC(q4kx8_core_avxvnni, avxvnni)

/* batched (repack_q4_K_x86.h, KILN_Q4_KX8_GEMM_WIDE): per activation row
 * and sub-block, 8 vpdpbusd against the broadcast 4-byte activation groups
 * (exact i32 sums, |dot| <= 32 x 15 x 128), times the rows' scales by
 * vpmulld (|sc * dot| < 2^22: the same i32 as AVX2's vpmaddwd) */
static inline __attribute__((always_inline)) void q4kx8_sub_avxvnni(const struct q4kx8_prep * w, int sub, const int N,
                                                                    const block_q8_K * const * yb, int off, __m256i * out) {
    __m256i d[2];
    for (int c = 0; c < N; c++) d[c] = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        const __m256i wj = w->w[sub][j];
        for (int c = 0; c < N; c++) d[c] = _mm256_dpbusd_avx_epi32(d[c], wj, q4kx8_bcast4(yb[c]->qs + off + 4 * j));
    }
    for (int c = 0; c < N; c++) out[c] = _mm256_mullo_epi32(d[c], w->sc32[sub]);
}

KILN_Q4_KX8_GEMM_WIDE(q4kx8_sub_avxvnni, avxvnni)

/* Q4_0, 16 rows (repack_q4_0x16_x86.h): per activation row, block and 8
 * rows, 8 vpdpbusd from the block's -8 * sum(y) (exact i32: sum (q - 8) y),
 * then AVX2's float step fma((float) isum, d_x * d_y, acc) per lane */
static inline __attribute__((always_inline)) void q4_0x16_pass_avxvnni(int64_t i0, int nb, const int N, __m256 * accm, const __m256i * w,
                                                                       const __m256 * dx, const char * y, size_t ys, const char * aux, size_t as) {
    __m256 acc[8];
    for (int c = 0; c < 2 * N; c++) acc[c] = i0 ? accm[c] : _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i p[8];
        for (int c = 0; c < N; c++) p[2 * c] = p[2 * c + 1] = _mm256_set1_epi32(((const kiln_q8_0_aux *) (aux + (size_t) c * as) + i0 + b)->m8sum);
        for (int k = 0; k < 8; k++) {
            const __m256i w0 = w[16 * b + k], w1 = w[16 * b + 8 + k];
            const int off = k < 4 ? 4 * k : 16 + 4 * (k - 4);
            for (int c = 0; c < N; c++) {
                const __m256i yk = q4_0x16_bcast4(((const block_q8_0 *) (y + (size_t) c * ys) + i0 + b)->qs + off);
                p[2 * c] = _mm256_dpbusd_avx_epi32(p[2 * c], w0, yk);
                p[2 * c + 1] = _mm256_dpbusd_avx_epi32(p[2 * c + 1], w1, yk);
            }
        }
        for (int c = 0; c < N; c++) {
            const __m256 dy = _mm256_set1_ps(((const kiln_q8_0_aux *) (aux + (size_t) c * as) + i0 + b)->d);
            for (int h = 0; h < 2; h++) {
                acc[2 * c + h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[2 * c + h]), _mm256_mul_ps(dx[2 * b + h], dy), acc[2 * c + h]);
            }
        }
    }
    for (int c = 0; c < 2 * N; c++) accm[c] = acc[c];
}

KILN_Q4_0X16_GEMM(q4_0x16_pass_avxvnni, avxvnni)
