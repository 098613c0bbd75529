/*
 * repack_q4_K_neon.c — arm64 NEON Q4_K x8 kernels (the layout and the
 * summation orders in src/cpu/repack.h), built twice:
 *
 *  - baseline ARMv8-A (suffix neon): llama.cpp's AVX2 orders, bit-identical
 *    to the scalar reference (repack_q4_K_scalar.c): per row and sub-block
 *    s the exact integer dot, I = sum_s sc_s * dot_s and M = sum_s m_s *
 *    bsum_s, then acc = fma((float) I, d * d_y, acc), accm = fma((float) M,
 *    dmin * d_y, accm) once per super-block (mat-vec) or once per pair of
 *    sub-blocks (batched), result acc - accm. llama.cpp repacks nothing
 *    without dotprod, so these run only on a tensor repacked under another
 *    table.
 *  - repack_q4_K_dotprod.c includes this file with KILN_NEON_DOTPROD (SDOT,
 *    suffix neon_dotprod): llama.cpp's arm64 order, that of its
 *    ggml_gemv_q4_K_8x4_q8_K and ggml_gemm_q4_K_8x4_q8_K (the same for
 *    mat-vec and batches): one accumulator per row, per pair of sub-blocks
 *    acc = fma((float) (sc_2p * dot_2p + sc_2p+1 * dot_2p+1), d * d_y, acc),
 *    and after the super-block's 4 pairs acc = acc - (float) M * (dmin *
 *    d_y) fused (its vmlsq_f32, an FMLS in its clang build); result acc.
 *
 * The integer sums are exact, so the layout (Kiln's 8x8 one, not ggml's
 * 8x4) does not change a bit.
 */
#include <arm_neon.h>
#include <string.h>

#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "neon_common.h"

/* sub-block s's 6-bit scales of the 8 rows as i32 (sc[0] rows 0..3, sc[1]
 * rows 4..7) and its mins as i16, from its 12 bytes g (repack.h) */
ALWAYS_INLINE void x8_scales(const uint8_t * g, int32x4_t sc[2], int16x8_t * mn) {
    static const int8_t shr4_hi[8] = { 0, 0, 0, 0, -4, -4, -4, -4 };
    uint32_t w;
    memcpy(&w, g + 8, 4);
    const uint8x8_t a = vld1_u8(g);                          /* g0..g7 */
    const uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(w));  /* g8..g11 twice */
    const uint8x8_t lo6 = vand_u8(a, vdup_n_u8(63));         /* sc0..3 | m0..3 */
    const uint8x8_t b4 = vand_u8(vshl_u8(b, vld1_s8(shr4_hi)), vdup_n_u8(15));
    const uint8x8_t hi6 = vorr_u8(b4, vshl_n_u8(vshr_n_u8(a, 6), 4)); /* sc4..7 | m4..7 */
    const uint32x2_t l = vreinterpret_u32_u8(lo6), h = vreinterpret_u32_u8(hi6);
    const int16x8_t s16 = vreinterpretq_s16_u16(vmovl_u8(vreinterpret_u8_u32(vzip1_u32(l, h))));
    sc[0] = vmovl_s16(vget_low_s16(s16));
    sc[1] = vmovl_s16(vget_high_s16(s16));
    *mn = vreinterpretq_s16_u16(vmovl_u8(vreinterpret_u8_u32(vzip2_u32(l, h))));
}

/* acc += the dots of w's two 8-byte halves (rows r | r+1) with y's (the
 * same 8 activations twice): lanes [r: bytes 0..3, 4..7 | r+1: 0..3, 4..7] */
ALWAYS_INLINE int32x4_t dot_rows2(int32x4_t acc, int8x16_t w, int8x16_t y) {
#ifdef KILN_NEON_DOTPROD
    return vdotq_s32(acc, w, y);
#else
    /* products <= 15 * 128: pairs of them add exactly in i16 */
    const int16x8_t a = vmull_s8(vget_low_s8(w), vget_low_s8(y));
    const int16x8_t b = vmull_s8(vget_high_s8(w), vget_high_s8(y));
    return vpadalq_s16(acc, vpaddq_s16(a, b));
#endif
}

/* the three summation orders: llama.cpp's AVX2 mat-vec and batched ones,
 * its arm64 one */
enum { X8_MATVEC, X8_PAIRS, X8_ARM };

/* per column: the running integer sums and float accumulators, rows 0..3
 * in [0], 4..7 in [1] */
struct x8_col { int32x4_t isum[2], msum[2]; float32x4_t acc[2], accm[2]; };

ALWAYS_INLINE void x8_fma(struct x8_col * st, const block_q4_Kx8 * xb, const block_q8_K * yb) {
    const float32x4_t fy = vdupq_n_f32(yb->d);
    for (int h = 0; h < 2; h++) {
        const float32x4_t dd = f16x4_mul(xb->d + 4 * h, fy);
        const float32x4_t dm = f16x4_mul(xb->dmin + 4 * h, fy);
        st->acc[h] = vfmaq_f32(st->acc[h], vcvtq_f32_s32(st->isum[h]), dd);
        st->accm[h] = vfmaq_f32(st->accm[h], vcvtq_f32_s32(st->msum[h]), dm);
        st->isum[h] = st->msum[h] = vdupq_n_s32(0);
    }
}

/* the arm64 order's step after each pair of sub-blocks: the pair's
 * integer sum into acc (msum runs on over the super-block) */
ALWAYS_INLINE void x8_fma_pair(struct x8_col * st, const block_q4_Kx8 * xb, const block_q8_K * yb) {
    const float32x4_t fy = vdupq_n_f32(yb->d);
    for (int h = 0; h < 2; h++) {
        const float32x4_t dd = f16x4_mul(xb->d + 4 * h, fy);
        st->acc[h] = vfmaq_f32(st->acc[h], vcvtq_f32_s32(st->isum[h]), dd);
        st->isum[h] = vdupq_n_s32(0);
    }
}

/* the arm64 order's mins term at the end of a super-block: acc -= M * dm, fused */
ALWAYS_INLINE void x8_fms_mins(struct x8_col * st, const block_q4_Kx8 * xb, const block_q8_K * yb) {
    const float32x4_t fy = vdupq_n_f32(yb->d);
    for (int h = 0; h < 2; h++) {
        const float32x4_t dm = f16x4_mul(xb->dmin + 4 * h, fy);
        st->acc[h] = vfmsq_f32(st->acc[h], vcvtq_f32_s32(st->msum[h]), dm);
        st->msum[h] = vdupq_n_s32(0);
    }
}

/* sub-block sb (values 32 sb.. of the 8 rows: pieces 4p..4p+3 of pair
 * p = sb / 2, low nibbles for even sb, high for odd) against N activation
 * rows: its weights loaded and unpacked once for all N; its integer sums
 * into st, and the float step after each odd sub-block where the order has
 * one there (X8_PAIRS, X8_ARM) */
ALWAYS_INLINE void x8_sub(const block_q4_Kx8 * xb, int64_t b, const int sb, const int hi, const int N, const int order,
                          struct x8_col * st, const block_q8_K * const * y) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int p = sb / 2;
    int32x4_t a[2][4];
    for (int c = 0; c < N; c++) {
        for (int q = 0; q < 4; q++) a[c][q] = vdupq_n_s32(0);
    }
    for (int k = 0; k < 4; k++) {
        int8x16_t w[4];
        for (int q = 0; q < 4; q++) {
            const uint8x16_t v = vld1q_u8(xb->qs + (8 * (4 * p + k) + 2 * q) * 8);
            w[q] = vreinterpretq_s8_u8(hi ? vshrq_n_u8(v, 4) : vandq_u8(v, m4));
        }
        for (int c = 0; c < N; c++) {
            int64_t y8; /* activation rows need not be 8-byte aligned */
            memcpy(&y8, y[c][b].qs + 32 * sb + 8 * k, 8);
            const int8x16_t yv = vreinterpretq_s8_s64(vdupq_n_s64(y8));
            for (int q = 0; q < 4; q++) a[c][q] = dot_rows2(a[c][q], w[q], yv);
        }
    }
    int32x4_t sc[2];
    int16x8_t mn;
    x8_scales(xb->scales + 12 * sb, sc, &mn);
    for (int c = 0; c < N; c++) {
        const int16_t bs = (int16_t) (y[c][b].bsums[2 * sb] + y[c][b].bsums[2 * sb + 1]);
        st[c].isum[0] = vmlaq_s32(st[c].isum[0], sc[0], vpaddq_s32(a[c][0], a[c][1]));
        st[c].isum[1] = vmlaq_s32(st[c].isum[1], sc[1], vpaddq_s32(a[c][2], a[c][3]));
        st[c].msum[0] = vmlal_n_s16(st[c].msum[0], vget_low_s16(mn), bs);
        st[c].msum[1] = vmlal_n_s16(st[c].msum[1], vget_high_s16(mn), bs);
        if (order == X8_PAIRS && hi) x8_fma(&st[c], xb, &y[c][b]);
        if (order == X8_ARM && hi) x8_fma_pair(&st[c], xb, &y[c][b]);
    }
}

/* one x8 group against N activation rows (N = 1, 2) in one of the orders */
ALWAYS_INLINE void q4_Kx8_cols(int64_t n, const int N, const int order, float * const * s, const block_q4_Kx8 * x,
                               const block_q8_K * const * y) {
    struct x8_col st[2];
    for (int c = 0; c < N; c++) {
        for (int h = 0; h < 2; h++) {
            st[c].isum[h] = st[c].msum[h] = vdupq_n_s32(0);
            st[c].acc[h] = st[c].accm[h] = vdupq_n_f32(0);
        }
    }
    for (int64_t b = 0; b < n / QK_K; b++) {
        if (N == 1) {
            /* the two sub-blocks of a pair with their nibble half fixed */
            for (int p = 0; p < 4; p++) {
                x8_sub(&x[b], b, 2 * p, 0, N, order, st, y);
                x8_sub(&x[b], b, 2 * p + 1, 1, N, order, st, y);
            }
        } else {
            /* one sub-block per iteration: fewer registers live (the form
             * above spills with 2 columns: +5 % instructions with SDOT,
             * +40 % without, counted under qemu) */
            for (int sb = 0; sb < 8; sb++) x8_sub(&x[b], b, sb, sb % 2, N, order, st, y);
        }
        for (int c = 0; c < N; c++) {
            if (order == X8_MATVEC) x8_fma(&st[c], &x[b], &y[c][b]);
            if (order == X8_ARM) x8_fms_mins(&st[c], &x[b], &y[c][b]);
        }
    }
    for (int c = 0; c < N; c++) {
        vst1q_f32(s[c], vsubq_f32(st[c].acc[0], st[c].accm[0]));
        vst1q_f32(s[c] + 4, vsubq_f32(st[c].acc[1], st[c].accm[1]));
    }
}

/* the orders of this build: arm64's for both forms with SDOT, else AVX2's two */
#ifdef KILN_NEON_DOTPROD
#define ORDER_1 X8_ARM
#define ORDER_N X8_ARM
#else
#define ORDER_1 X8_MATVEC
#define ORDER_N X8_PAIRS
#endif

void NEON_SFX(q4_Kx8_q8_K_vec_dot)(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_K * yc[1] = { y };
    q4_Kx8_cols(n, 1, ORDER_1, sc, x, yc);
}

/* 2 columns per pass, then an odd last one (the batched order throughout) */
void NEON_SFX(q4_Kx8_q8_K_gemm)(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 2 <= ncols; c += 2) {
        float * sc[2] = { s + (size_t) c * ss, s + (size_t) (c + 1) * ss };
        const block_q8_K * yc[2] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys),
                                     (const block_q8_K *) ((const char *) y + (size_t) (c + 1) * ys) };
        q4_Kx8_cols(n, 2, ORDER_N, sc, x, yc);
    }
    if (c < ncols) {
        float * sc[1] = { s + (size_t) c * ss };
        const block_q8_K * yc[1] = { (const block_q8_K *) ((const char *) y + (size_t) c * ys) };
        q4_Kx8_cols(n, 1, ORDER_N, sc, x, yc);
    }
}
