/*
 * quant_q6_K_rows_avx2.c — AVX2 batched q6_K (vec_dot_rows, kernels.h): a
 * block of plain q6_K weight rows against a block of q8_K activation rows,
 * each weight super-block decoded once per column chunk (q6_K_x86.h's
 * driver) instead of once per activation row (vec_dot) or per 4
 * (vec_dot_y4). Per weight row, activation row and super-block: the 8
 * i32 lanes of q6_K_q8_K_vec_dot__avx2, from chunk pairs (c, c + 4), two
 * maddubs and one madd each (the scheme and why it is exact: q6_K_x86.h);
 * minus q6_offset_lanes; one FMA with d_x * d_y; hsum_ps at the end. So
 * every output equals that vec_dot bit for bit.
 */
#include <immintrin.h>
#include <string.h>

#include "x86_common.h"
#include "../quant_dot.h"
#include "blocks.h"
#include "q6_K_x86.h"

/* one weight row's super-block, decoded: the 6-bit values of chunk pairs
 * (c, c + 4) interleaved (q6kr_pair), their scale pairs, the 16 scales as
 * i16 for the offset, d as f32 */
struct q6kr_row { __m256i qx[4], qy[4], sc[4], sc16; float dx; };

static inline void q6kr_decode_avx2(const block_q6_K * x, struct q6kr_row * o) {
    __m256i q[8];
    for (int half = 0; half < 2; half++) {
        const uint8_t * ql = x->ql + 64 * half;
        q6_decode_half256(load32(ql), load32(ql + 32), load32(x->qh + 32 * half), &q[4 * half]);
    }
    for (int c = 0; c < 4; c++) {
        q6kr_pair(q[c], q[c + 4], &o->qx[c], &o->qy[c]);
        o->sc[c] = q6kr_pair_scales(x->scales, c);
    }
    o->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *) x->scales));
    o->dx = KQ_H2F(x->d);
}

static inline __attribute__((always_inline)) void q6kr_core_avx2(const struct q6kr_row * w, const int R, const block_q8_K * yb,
                                                                 __m256 * acc, size_t as) {
    __m256i yx[4], yy[4];
    for (int c = 0; c < 4; c++) q6kr_pair(load32(yb->qs + 32 * c), load32(yb->qs + 32 * c + 128), &yx[c], &yy[c]);
    const __m256i bs = _mm256_loadu_si256((const __m256i *) yb->bsums);
    const float dy = yb->d;
    for (int r = 0; r < R; r++) {
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i d16 = _mm256_add_epi16(_mm256_maddubs_epi16(w[r].qx[c], yx[c]), _mm256_maddubs_epi16(w[r].qy[c], yy[c]));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(d16, w[r].sc[c]));
        }
        const __m256i lanes = _mm256_sub_epi32(sum, _mm256_slli_epi32(_mm256_madd_epi16(bs, w[r].sc16), 5));
        acc[r * as] = _mm256_fmadd_ps(_mm256_set1_ps(w[r].dx * dy), _mm256_cvtepi32_ps(lanes), acc[r * as]);
    }
}

KILN_Q6_K_ROWS(struct q6kr_row, q6kr_decode_avx2, q6kr_core_avx2, avx2)
