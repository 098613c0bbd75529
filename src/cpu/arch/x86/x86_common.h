/*
 * x86_common.h — helpers the x86 quantized-dot files share (AVX2 and the
 * avx512 row, which must reduce exactly as AVX2 does). Include after
 * <immintrin.h>, in files compiled with at least -mavx2 -mfma -mf16c.
 */
#ifndef KILN_X86_COMMON_H
#define KILN_X86_COMMON_H

#include "kiln.h"

/* F16C: exact fp16 -> fp32 in one instruction (the quant headers' KQ_H2F) */
#define KQ_H2F(h) _cvtsh_ss(h)

/* an 8-lane float accumulator's total: halves, then pairs, then the last
 * two (the order every AVX2 dot's result depends on) */
static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i load32(const void * p) { return _mm256_loadu_si256((const __m256i *) p); }

/* The mins term of a q4_K block in ggml x86's form: 4 f32 lanes, lane k
 * accumulating m_2k * (bsums[4k] + bsums[4k+1]) + m_2k+1 * (bsums[4k+2] +
 * bsums[4k+3]) with one FMA per block (dm = dmin_x * d_y); k4_mins_sum
 * reduces them as ggml does: (0 + 2) + (1 + 3). */
static inline __m128 k4_mins_fma(__m128 acc_m, const uint8_t mn[8], const int16_t * bsums, float dm) {
    const __m128i q8s = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) bsums), _mm_loadu_si128((const __m128i *) (bsums + 8)));
    const __m128i prod = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *) mn)), q8s);
    return _mm_fmadd_ps(_mm_set1_ps(dm), _mm_cvtepi32_ps(prod), acc_m);
}
static inline float k4_mins_sum(__m128 acc_m) {
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    return _mm_cvtss_f32(_mm_add_ss(acc_m, _mm_movehdup_ps(acc_m)));
}

/* The -32 offset of a q6_K block times its q8_K partner, in ggml x86's
 * lanes: lane j holds 32 * (bsums[2j] * sc[2j] + bsums[2j + 1] * sc[2j + 1]),
 * the offset of sub-blocks 2j, 2j + 1 (elements 32j..32j + 31). Subtracted
 * from the lanes of sum(q * y * sc) over unsigned q, it gives each f32 lane
 * the same integer as ggml's AVX2 q6_K dot before its FMA. */
static inline __m256i q6_offset_lanes(const int8_t * scales, const int16_t * bsums) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) scales));
    return _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *) bsums), sc16), 5);
}

/* the batched q4_0x4 kernels' float step for 2 activation rows: lanes
 * 0..3 the 4 weight rows against row y0, 4..7 against y1;
 * acc = fma((float) isum, d_x * d_y, acc) per lane */
static inline __m256 q4_0x4_2cols_fma(__m256i isum, const kiln_fp16_t * dx4, kiln_fp16_t dy0, kiln_fp16_t dy1, __m256 acc) {
    const __m128 dx = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *) dx4));
    const __m256 d = _mm256_mul_ps(_mm256_set_m128(dx, dx), _mm256_set_m128(_mm_set1_ps(KQ_H2F(dy1)), _mm_set1_ps(KQ_H2F(dy0))));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, acc);
}

#endif
