/*
 * quant_iq4nl_x86.h — iq4_nl's plain dot products in both of AVX2's orders,
 * shared by the avx2 and avx512 rows, which differ only in how a block's
 * 8 i32 lanes are formed (maddubs + madd, or one vpdpbusd: the same exact
 * integers). KILN_IQ4NL_DOTS(S, ISUMS) defines iq4_nl_q8_0_vec_dot__S and
 * iq4_nl_q8_0_vec_dot_gemv__S with ISUMS(qs, yq): the __m256i lanes of one
 * block (lane j: the products of bytes 4j..4j+3). Include after
 * <immintrin.h>, <math.h> and x86_common.h.
 */
#ifndef KILN_QUANT_IQ4NL_X86_H
#define KILN_QUANT_IQ4NL_X86_H

#include "blocks.h"
#include "quants_impl.h"

/* 16 bytes of nibbles -> 32 signed levels: low nibbles first, then high */
static inline __m256i iq4nl_lookup(const uint8_t * qs) {
    const __m128i values = _mm_loadu_si128((const __m128i *) kiln_kvalues_iq4nl);
    const __m128i b = _mm_loadu_si128((const __m128i *) qs);
    const __m128i m = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(b, m));
    const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b, 4), m));
    return _mm256_set_m128i(hi, lo);
}

static inline int iq4nl_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* _vec_dot: one accumulator, one FMA per block (the batched order of
 * llama.cpp's AVX2 build); _gemv: llama.cpp's mat-vec order there, blocks
 * in pairs into two accumulators summed at the end, an odd last block
 * added in scalar as (d_x * d_y) * isum */
#define KILN_IQ4NL_DOTS(S, ISUMS) \
void iq4_nl_q8_0_vec_dot__##S(int64_t n, float * s, const void * vx, const void * vy) { \
    const block_iq4_nl * x = vx; \
    const block_q8_0 * y = vy; \
    __m256 acc = _mm256_setzero_ps(); \
    for (int64_t i = 0; i < n / QK4_NL; ++i) { \
        const __m256 d = _mm256_set1_ps(KQ_H2F(x[i].d) * KQ_H2F(y[i].d)); \
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(ISUMS(x[i].qs, y[i].qs)), acc); \
    } \
    *s = hsum_ps(acc); \
} \
void iq4_nl_q8_0_vec_dot_gemv__##S(int64_t n, float * s, const void * vx, const void * vy) { \
    const block_iq4_nl * x = vx; \
    const block_q8_0 * y = vy; \
    const int64_t nb = n / QK4_NL; \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(); \
    int64_t i = 0; \
    for (; i + 1 < nb; i += 2) { \
        const __m256 d0 = _mm256_set1_ps(KQ_H2F(y[i].d) * KQ_H2F(x[i].d)); \
        const __m256 d1 = _mm256_set1_ps(KQ_H2F(y[i + 1].d) * KQ_H2F(x[i + 1].d)); \
        acc0 = _mm256_fmadd_ps(d0, _mm256_cvtepi32_ps(ISUMS(x[i].qs, y[i].qs)), acc0); \
        acc1 = _mm256_fmadd_ps(d1, _mm256_cvtepi32_ps(ISUMS(x[i + 1].qs, y[i + 1].qs)), acc1); \
    } \
    float sum = hsum_ps(_mm256_add_ps(acc0, acc1)); \
    for (; i < nb; i++) { \
        sum = fmaf(KQ_H2F(x[i].d) * KQ_H2F(y[i].d), (float) iq4nl_hsum_i32(ISUMS(x[i].qs, y[i].qs)), sum); \
    } \
    *s = sum; \
}

#endif
