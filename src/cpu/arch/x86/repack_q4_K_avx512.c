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

KILN_Q4_KX8_KERNELS(q4kx8_core_avx512, avx512)
