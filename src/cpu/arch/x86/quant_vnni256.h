/*
 * quant_vnni256.h — the q4_0 / q8_0 plain dot products on 256-bit VNNI
 * (vpdpbusd), shared by the avx512 row (AVX512-VNNI + VL) and the avxvnni
 * row (AVX-VNNI), which differ only in the instruction's encoding:
 * KILN_VNNI256_DOTS(S, DPBUSD) defines q4_0_q8_0_vec_dot__S and
 * q8_0_q8_0_vec_dot__S with DPBUSD(acc, u8, s8). Bit-identical to the AVX2
 * kernels (quant_avx512.c says why). Include after <immintrin.h> and
 * x86_common.h.
 */
#ifndef KILN_QUANT_VNNI256_H
#define KILN_QUANT_VNNI256_H

#include "blocks.h"

#define KILN_VNNI256_DOTS(S, DPBUSD) \
void q4_0_q8_0_vec_dot__##S(int64_t n, float * s, const void * vx, const void * vy) { \
    const block_q4_0 * x = vx; \
    const block_q8_0 * y = vy; \
    const __m256i m4 = _mm256_set1_epi8(0x0f), eights = _mm256_set1_epi8(8); \
    __m256 acc = _mm256_setzero_ps(); \
    for (int64_t i = 0; i < n / QK8_0; ++i) { \
        const __m128i b = _mm_loadu_si128((const __m128i *) x[i].qs); \
        const __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), m4); \
        const __m256i yq = load32(y[i].qs); \
        /* (q - 8) . y per lane, as sum(q * y) - sum(8 * y): exact */ \
        const __m256i p = _mm256_sub_epi32(DPBUSD(_mm256_setzero_si256(), q, yq), DPBUSD(_mm256_setzero_si256(), eights, yq)); \
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d)); \
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc); \
    } \
    *s = hsum_ps(acc); \
} \
void q8_0_q8_0_vec_dot__##S(int64_t n, float * s, const void * vx, const void * vy) { \
    const block_q8_0 * x = vx; \
    const block_q8_0 * y = vy; \
    __m256 acc = _mm256_setzero_ps(); \
    for (int64_t i = 0; i < n / QK8_0; ++i) { \
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d)); \
        const __m256i xq = load32(x[i].qs), yq = load32(y[i].qs); \
        /* signed x signed: |x| * sign(y, x) */ \
        const __m256i p = DPBUSD(_mm256_setzero_si256(), _mm256_sign_epi8(xq, xq), _mm256_sign_epi8(yq, xq)); \
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(p), acc); \
    } \
    *s = hsum_ps(acc); \
}

#endif
