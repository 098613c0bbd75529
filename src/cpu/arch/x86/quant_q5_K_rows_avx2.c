/*
 * quant_q5_K_rows_avx2.c — AVX2 batched q5_K (vec_dot_rows, kernels.h): a
 * block of plain q5_K weight rows against a block of q8_K activation rows,
 * each weight super-block decoded once per column chunk (q5_K_x86.h's
 * driver) instead of once per activation row (vec_dot). Per weight row,
 * activation row and super-block: the 8 i32 lanes of
 * q5_K_q8_K_vec_dot__avx2, from chunk pairs (c, c + 4), two maddubs and
 * one madd each (the scheme and why it is exact: q5_K_x86.h); one FMA with
 * d_x * d_y; the mins term per lane of 8 weight rows with that kernel's
 * float steps; hsum_ps(acc) - mins at the end. So every output equals that
 * vec_dot bit for bit.
 */
#include <immintrin.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "q5_K_x86.h"

/* one weight row's super-block, decoded: the 5-bit values of chunk pairs
 * (c, c + 4) interleaved (q6kr_pair), their scale pairs, d as f32 */
struct q5kr_row { __m256i qx[4], qy[4], sc[4]; float dx; };

static inline void q5kr_decode_avx2(const block_q5_K * x, const uint8_t sc[8], struct q5kr_row * o) {
    __m256i q[8];
    q5kr_values(x, q);
    for (int c = 0; c < 4; c++) {
        q6kr_pair(q[c], q[c + 4], &o->qx[c], &o->qy[c]);
        o->sc[c] = _mm256_set1_epi32(q5kr_scale_pair(sc, c));
    }
    o->dx = KQ_H2F(x->d);
}

static inline __attribute__((always_inline)) void q5kr_core_avx2(const struct q5kr_row * w, const int R, const block_q8_K * yb,
                                                                 __m256 * acc, size_t as) {
    __m256i yx[4], yy[4];
    for (int c = 0; c < 4; c++) q6kr_pair(load32(yb->qs + 32 * c), load32(yb->qs + 32 * c + 128), &yx[c], &yy[c]);
    const float dy = yb->d;
    for (int r = 0; r < R; r++) {
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i d16 = _mm256_add_epi16(_mm256_maddubs_epi16(w[r].qx[c], yx[c]), _mm256_maddubs_epi16(w[r].qy[c], yy[c]));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(d16, w[r].sc[c]));
        }
        acc[r * as] = _mm256_fmadd_ps(_mm256_set1_ps(w[r].dx * dy), _mm256_cvtepi32_ps(sum), acc[r * as]);
    }
}

KILN_Q5_K_ROWS(struct q5kr_row, q5kr_decode_avx2, q5kr_core_avx2, avx2)
