/*
 * quant_q5_K_rows_avx512.c — the avx512 row's batched q5_K (vec_dot_rows,
 * kernels.h; driver, mins and integer scheme in q5_K_x86.h): AVX2's chunk
 * pairs (c, c + 4), two pairs per 512-bit register (pairs 2u | 2u + 1 in
 * its halves), maddubs, vpdpwssd with the scale pairs (madd + add in one,
 * no saturation either way), halves folded: the same lane integers as
 * q5_K_q8_K_vec_dot__avx512 (= __avx2's); then AVX2's float steps, so
 * every output equals that vec_dot bit for bit. Compiled with the avx512
 * row's flags (CMakeLists.txt).
 */
#include <immintrin.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "q5_K_x86.h"

struct q5kr_row512 { __m512i qx[2], qy[2], sc[2]; float dx; };

static inline __m512i cat256(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

static inline void q5kr_pair512(__m512i a, __m512i b, __m512i * x, __m512i * y) {
    *x = _mm512_mask_blend_epi16(0xAAAAAAAAu, a, _mm512_slli_epi32(b, 16));
    *y = _mm512_mask_blend_epi16(0xAAAAAAAAu, _mm512_srli_epi32(a, 16), b);
}

static inline void q5kr_decode_avx512(const block_q5_K * x, const uint8_t sc[8], struct q5kr_row512 * o) {
    __m256i q[8];
    q5kr_values(x, q);
    for (int u = 0; u < 2; u++) {
        /* [2u | 2u + 1] with [2u + 4 | 2u + 5]: pairs (2u, 2u + 4) | (2u + 1, 2u + 5) */
        q5kr_pair512(cat256(q[2 * u], q[2 * u + 1]), cat256(q[2 * u + 4], q[2 * u + 5]), &o->qx[u], &o->qy[u]);
        o->sc[u] = cat256(_mm256_set1_epi32(q5kr_scale_pair(sc, 2 * u)), _mm256_set1_epi32(q5kr_scale_pair(sc, 2 * u + 1)));
    }
    o->dx = KQ_H2F(x->d);
}

static inline __attribute__((always_inline)) void q5kr_core_avx512(const struct q5kr_row512 * w, const int R, const block_q8_K * yb,
                                                                   __m256 * acc, size_t as) {
    __m512i yx[2], yy[2];
    for (int u = 0; u < 2; u++) {
        q5kr_pair512(_mm512_loadu_si512((const void *) (yb->qs + 64 * u)), _mm512_loadu_si512((const void *) (yb->qs + 128 + 64 * u)),
                     &yx[u], &yy[u]);
    }
    const float dy = yb->d;
    for (int r = 0; r < R; r++) {
        __m512i sum = _mm512_setzero_si512();
        for (int u = 0; u < 2; u++) {
            const __m512i d16 = _mm512_add_epi16(_mm512_maddubs_epi16(w[r].qx[u], yx[u]), _mm512_maddubs_epi16(w[r].qy[u], yy[u]));
            sum = _mm512_dpwssd_epi32(sum, d16, w[r].sc[u]);
        }
        const __m256i lanes = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
        acc[r * as] = _mm256_fmadd_ps(_mm256_set1_ps(w[r].dx * dy), _mm256_cvtepi32_ps(lanes), acc[r * as]);
    }
}

KILN_Q5_K_ROWS(struct q5kr_row512, q5kr_decode_avx512, q5kr_core_avx512, avx512)
