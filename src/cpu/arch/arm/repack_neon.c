/*
 * repack_neon.c — arm64 NEON x4 kernels (layouts: src/cpu/repack.h): the
 * mat-vec form (vec_dot_x4: one x4 group of 4 weight rows against one
 * q8_0 activation row) and the batched form (gemm_x4: against several
 * activation rows, each weight block loaded and unpacked once per pass
 * for 4, 2 or 1 of them). Baseline ARMv8-A here; repack_dotprod.c builds
 * this file again with KILN_NEON_DOTPROD (SDOT) under the suffix
 * neon_dotprod, which the table picks where kiln_cpu_has_dotprod(), and
 * repack_i8mm.c once more with KILN_NEON_I8MM for the batched Q4_0 /
 * IQ4_NL kernels alone through SMMLA (where kiln_cpu_has_i8mm() too).
 *
 * Q4_0 and IQ4_NL: llama.cpp's repacked order, bit-identical to the scalar
 * x4 kernels (repack_scalar.c): per row and block the whole block's integer
 * dot, then one fused acc = fma((float) isum, d_x * d_y, acc), the 4 rows
 * in the 4 lanes of one accumulator. llama.cpp's own ARM build repacks
 * Q4_0 and IQ4_NL (4 rows, ne[1] % 4 == 0) where the CPU has dotprod, and
 * its mat-vec kernels (arch/arm/repack.cpp, ggml_gemv_q4_0_4x4_q8_0,
 * ..._4x8_ with i8mm, ggml_gemv_iq4_nl_4x4_q8_0) sum the same way, read
 * from the source: its block_q4_0x4 interleaves 4- or 8-byte pieces with
 * the nibbles xor 0x88, its SDOTs give 16 * isum per row, which
 * vcvtq_n_f32_s32(.., 4) turns into exactly (float) isum, then one
 * vfmaq_f32 with d_y * d_x per block. Integer sums are exact in any
 * grouping, so on the same q8_0 activations the two agree bit for bit
 * although the layouts differ (not run here: no arm64 llama.cpp under
 * qemu). Without dotprod llama.cpp does not repack; Kiln's plain NEON
 * kernels do not follow its ARM order either, so nothing is lost there.
 *
 * Q8_0: llama.cpp's arm64 build repacks it too where the CPU has dotprod
 * (4 rows, ne[1] % 4 == 0; kernels.c's repack_rows) and its mat-vec
 * (ggml_gemv_q8_0_4x4_q8_0, ..._4x8_ with i8mm) sums as for Q4_0: one fused
 * acc = fma((float) isum, d_y * d_x, acc) per block; its batched kernel
 * (ggml_gemm_q8_0_4x4_q8_0) the same per column. The SDOT build here does
 * that; the baseline build has no Q8_0 kernels (llama.cpp does not repack
 * there, and its plain order, two fused accumulators over pairs of blocks,
 * is quant_dot_neon.c's).
 */
#include <arm_neon.h>
#include <string.h>

#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "neon_common.h"

/* the 4 rows' d_x * d_y (exact f16 -> f32, one rounding: the scalar and
 * plain kernels' product) */
ALWAYS_INLINE float32x4_t scales_x4(const kiln_fp16_t * d, kiln_fp16_t dy) {
    const float32x4_t dx = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(d)));
    const float32x4_t fy = vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(dy)));
    return vmulq_f32(dx, fy);
}

/* [sum p0, sum p1, sum p2, sum p3] (exact i32 adds) */
ALWAYS_INLINE int32x4_t hsum_x4(int32x4_t p0, int32x4_t p1, int32x4_t p2, int32x4_t p3) {
    return vpaddq_s32(vpaddq_s32(p0, p1), vpaddq_s32(p2, p3));
}

/* ---- 4-bit codes (Q4_0, IQ4_NL): one block's 4 rows as signed bytes ----
 * w[2r] = elements 0..15 of row r (low nibbles), w[2r + 1] = 16..31. */

#ifdef KILN_NEON_DOTPROD
/* Q4_0 with SDOT: (q - 8) * 16 in each byte (the nibbles xor 8 put in the
 * top half, as llama.cpp's ARM kernels do), so the integer sums are
 * 16 * isum and Q4_0_FBITS = 4 takes the 16 off exactly in the conversion */
#define Q4_0_FBITS 4
ALWAYS_INLINE void q4_0_weights(const block_q4_0x4 * xb, int8x16_t w[8]) {
    const uint8x16_t k88 = vdupq_n_u8(0x88), f0 = vdupq_n_u8(0xf0);
    for (int r = 0; r < 4; r++) {
        const uint8x16_t e = veorq_u8(vld1q_u8(xb->qs + 16 * r), k88);
        w[2 * r] = vreinterpretq_s8_u8(vshlq_n_u8(e, 4));
        w[2 * r + 1] = vreinterpretq_s8_u8(vandq_u8(e, f0));
    }
}
#else
/* Q4_0 without SDOT: q - 8 (at most 8 * 128 per product, so 4 products
 * add exactly in i16) */
#define Q4_0_FBITS 0
ALWAYS_INLINE void q4_0_weights(const block_q4_0x4 * xb, int8x16_t w[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    const int8x16_t k8 = vdupq_n_s8(8);
    for (int r = 0; r < 4; r++) {
        const uint8x16_t b = vld1q_u8(xb->qs + 16 * r);
        w[2 * r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(b, m4)), k8);
        w[2 * r + 1] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(b, 4)), k8);
    }
}
#endif

ALWAYS_INLINE void iq4_nl_weights(const block_iq4_nlx4 * xb, int8x16_t lut, int8x16_t w[8]) {
    const uint8x16_t m4 = vdupq_n_u8(0x0f);
    for (int r = 0; r < 4; r++) {
        const uint8x16_t b = vld1q_u8(xb->qs + 16 * r);
        w[2 * r] = vqtbl1q_s8(lut, vandq_u8(b, m4));
        w[2 * r + 1] = vqtbl1q_s8(lut, vshrq_n_u8(b, 4));
    }
}

/* a block's 4-bit codes of the 4 rows as signed bytes: IQ4_NL's levels
 * (iq4) or Q4_0's */
ALWAYS_INLINE void codes_x4(const block_q4_0x4 * xb, int iq4, int8x16_t lut, int8x16_t w[8]) {
    if (iq4) iq4_nl_weights(xb, lut, w);
    else q4_0_weights(xb, w);
}

/* [isum row 0..3] of one block against activations ya (0..15), yh (16..31) */
ALWAYS_INLINE int32x4_t isums_x4(const int8x16_t w[8], int8x16_t ya, int8x16_t yh, int small) {
#ifdef KILN_NEON_DOTPROD
    (void) small;
    int32x4_t p[4];
    for (int r = 0; r < 4; r++) p[r] = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w[2 * r], ya), w[2 * r + 1], yh);
    return hsum_x4(p[0], p[1], p[2], p[3]);
#else
    if (small) {
        /* |w| <= 8: each i16 lane sums 4 products (<= 4096), the pairwise
         * adds 16 (<= 16384); widened to i32 for the last step */
        int16x8_t m[4];
        for (int r = 0; r < 4; r++) {
            int16x8_t a = vmull_s8(vget_low_s8(w[2 * r]), vget_low_s8(ya));
            a = vmlal_s8(a, vget_high_s8(w[2 * r]), vget_high_s8(ya));
            a = vmlal_s8(a, vget_low_s8(w[2 * r + 1]), vget_low_s8(yh));
            m[r] = vmlal_s8(a, vget_high_s8(w[2 * r + 1]), vget_high_s8(yh));
        }
        const int16x8_t c = vpaddq_s16(vpaddq_s16(m[0], m[1]), vpaddq_s16(m[2], m[3]));
        return vpaddlq_s16(c);
    }
    int32x4_t p[4];
    for (int r = 0; r < 4; r++) p[r] = dot16(dot16(vdupq_n_s32(0), w[2 * r], ya), w[2 * r + 1], yh);
    return hsum_x4(p[0], p[1], p[2], p[3]);
#endif
}

ALWAYS_INLINE float32x4_t blocksum_fma(int32x4_t isum, int fbits4, const kiln_fp16_t * dx, kiln_fp16_t dy, float32x4_t acc) {
    const float32x4_t f = fbits4 ? vcvtq_n_f32_s32(isum, 4) : vcvtq_f32_s32(isum);
    return vfmaq_f32(acc, f, scales_x4(dx, dy));
}

/* one x4 group of 4-bit codes against N activation rows y[c] (N = 1, 2, 4):
 * the weights unpacked once per block for all N; per column the very
 * steps of the N = 1 case */
ALWAYS_INLINE void nibbles_x4_cols(int64_t n, const int N, int iq4, float * const * s, const block_q4_0x4 * x,
                                   const block_q8_0 * const * y) {
    float32x4_t acc[4];
    for (int c = 0; c < N; c++) acc[c] = vdupq_n_f32(0);
    const int8x16_t lut = vld1q_s8(kiln_kvalues_iq4nl);
    const int fbits4 = !iq4 && Q4_0_FBITS == 4;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8x16_t w[8];
        codes_x4(&x[i], iq4, lut, w);
        for (int c = 0; c < N; c++) {
            const int32x4_t isum = isums_x4(w, vld1q_s8(y[c][i].qs), vld1q_s8(y[c][i].qs + 16), !iq4);
            acc[c] = blocksum_fma(isum, fbits4, x[i].d, y[c][i].d, acc[c]);
        }
    }
    for (int c = 0; c < N; c++) vst1q_f32(s[c], acc[c]);
}

#ifdef KILN_NEON_DOTPROD
/* ---- Q8_0, SDOT build: llama.cpp's repacked order (blocksum_fma) -------- */

ALWAYS_INLINE void q8_0x4_cols(int64_t n, const int N, float * const * s, const block_q8_0x4 * x, const block_q8_0 * const * y) {
    float32x4_t acc[2];
    for (int c = 0; c < N; c++) acc[c] = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8x16_t w[8];
        for (int j = 0; j < 8; j++) w[j] = vld1q_s8(x[i].qs + 16 * j);
        for (int c = 0; c < N; c++) {
            const int8x16_t ya = vld1q_s8(y[c][i].qs), yh = vld1q_s8(y[c][i].qs + 16);
#define Q8_ROW(r) dot16(dot16(vdupq_n_s32(0), w[2 * (r)], ya), w[2 * (r) + 1], yh)
            const int32x4_t isum = hsum_x4(Q8_ROW(0), Q8_ROW(1), Q8_ROW(2), Q8_ROW(3));
#undef Q8_ROW
            acc[c] = blocksum_fma(isum, 0, x[i].d, y[c][i].d, acc[c]);
        }
    }
    for (int c = 0; c < N; c++) vst1q_f32(s[c], acc[c]);
}
#endif

#ifdef KILN_NEON_I8MM
/* ---- batched 4-bit codes with SMMLA (repack_i8mm.c) ---------------------
 * vmmlaq_s32(acc, a, b) adds the 2x2 products of a's two 8-byte halves
 * with b's: [a0.b0, a0.b1, a1.b0, a1.b1]. The weights of rows 2p | 2p+1
 * (m[4p + k], elements 8k..8k+7 of each) against the activations of
 * columns c | c+1 (the same 8 elements) give per block, after 4 k steps,
 * the 4 whole-block sums of rows 2p, 2p+1 x columns c, c+1, exact in i32;
 * vuzp sorts them into [row 0..3] per column, and the float step is the
 * SDOT kernels' (blocksum_fma): bit-identical to them. */
ALWAYS_INLINE int8x16_t zip64(int8x16_t a, int8x16_t b, int hi) {
    const int64x2_t x = vreinterpretq_s64_s8(a), y = vreinterpretq_s64_s8(b);
    return vreinterpretq_s8_s64(hi ? vzip2q_s64(x, y) : vzip1q_s64(x, y));
}

ALWAYS_INLINE void mmla_x4_cols(int64_t n, const int N, int iq4, float * const * s, const block_q4_0x4 * x,
                                const block_q8_0 * const * y) {
    float32x4_t acc[4];
    for (int c = 0; c < N; c++) acc[c] = vdupq_n_f32(0);
    const int8x16_t lut = vld1q_s8(kiln_kvalues_iq4nl);
    const int fbits4 = !iq4 && Q4_0_FBITS == 4;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int8x16_t w[8], m[8];
        codes_x4(&x[i], iq4, lut, w);
        for (int p = 0; p < 2; p++) {
            for (int k = 0; k < 4; k++) m[4 * p + k] = zip64(w[4 * p + k / 2], w[4 * p + 2 + k / 2], k & 1);
        }
        for (int c = 0; c < N; c += 2) {
            const int8x16_t a0 = vld1q_s8(y[c][i].qs), a1 = vld1q_s8(y[c][i].qs + 16);
            const int8x16_t b0 = vld1q_s8(y[c + 1][i].qs), b1 = vld1q_s8(y[c + 1][i].qs + 16);
            int32x4_t p01 = vdupq_n_s32(0), p23 = vdupq_n_s32(0);
            for (int k = 0; k < 4; k++) {
                const int8x16_t a = zip64(k < 2 ? a0 : a1, k < 2 ? b0 : b1, k & 1);
                p01 = vmmlaq_s32(p01, m[k], a);
                p23 = vmmlaq_s32(p23, m[4 + k], a);
            }
            acc[c] = blocksum_fma(vuzp1q_s32(p01, p23), fbits4, x[i].d, y[c][i].d, acc[c]);
            acc[c + 1] = blocksum_fma(vuzp2q_s32(p01, p23), fbits4, x[i].d, y[c + 1][i].d, acc[c + 1]);
        }
    }
    for (int c = 0; c < N; c++) vst1q_f32(s[c], acc[c]);
}

#define COL_PTRS(K) \
    float * sc[K]; const block_q8_0 * yc[K]; \
    for (int q = 0; q < (K); q++) { sc[q] = s + (size_t) (c + q) * ss; yc[q] = (const block_q8_0 *) ((const char *) y + (size_t) (c + q) * ys); }

/* 4 columns per pass, then 2; an odd last one through the SDOT x4 kernel */
void q4_0x4_q8_0_gemm__neon_i8mm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 4 <= ncols; c += 4) { COL_PTRS(4) mmla_x4_cols(n, 4, 0, sc, x, yc); }
    for (; c + 2 <= ncols; c += 2) { COL_PTRS(2) mmla_x4_cols(n, 2, 0, sc, x, yc); }
    if (c < ncols) q4_0x4_q8_0_vec_dot__neon_dotprod(n, s + (size_t) c * ss, x, (const char *) y + (size_t) c * ys);
}

void iq4_nlx4_q8_0_gemm__neon_i8mm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 4 <= ncols; c += 4) { COL_PTRS(4) mmla_x4_cols(n, 4, 1, sc, x, yc); }
    for (; c + 2 <= ncols; c += 2) { COL_PTRS(2) mmla_x4_cols(n, 2, 1, sc, x, yc); }
    if (c < ncols) iq4_nlx4_q8_0_vec_dot__neon_dotprod(n, s + (size_t) c * ss, x, (const char *) y + (size_t) c * ys);
}

#else /* the SDOT and baseline builds */
/* ---- entry points ------------------------------------------------------- */

void NEON_SFX(q4_0x4_q8_0_vec_dot)(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_0 * yc[1] = { y };
    nibbles_x4_cols(n, 1, 0, sc, x, yc);
}

void NEON_SFX(iq4_nlx4_q8_0_vec_dot)(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_0 * yc[1] = { y };
    nibbles_x4_cols(n, 1, 1, sc, x, yc);
}

#ifdef KILN_NEON_DOTPROD
void NEON_SFX(q8_0x4_q8_0_vec_dot)(int64_t n, float * s, const void * x, const void * y) {
    float * sc[1] = { s };
    const block_q8_0 * yc[1] = { y };
    q8_0x4_cols(n, 1, sc, x, yc);
}
#endif

/* columns c.. of a batched call: 4 at a time (4-bit codes), then 2, then 1 */
#define COL_PTRS(K) \
    float * sc[K]; const block_q8_0 * yc[K]; \
    for (int q = 0; q < (K); q++) { sc[q] = s + (size_t) (c + q) * ss; yc[q] = (const block_q8_0 *) ((const char *) y + (size_t) (c + q) * ys); }

ALWAYS_INLINE void nibbles_gemm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys, int iq4) {
    int c = 0;
    for (; c + 4 <= ncols; c += 4) { COL_PTRS(4) nibbles_x4_cols(n, 4, iq4, sc, x, yc); }
    for (; c + 2 <= ncols; c += 2) { COL_PTRS(2) nibbles_x4_cols(n, 2, iq4, sc, x, yc); }
    if (c < ncols) { COL_PTRS(1) nibbles_x4_cols(n, 1, iq4, sc, x, yc); }
}

void NEON_SFX(q4_0x4_q8_0_gemm)(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    nibbles_gemm(n, ncols, s, ss, x, y, ys, 0);
}

void NEON_SFX(iq4_nlx4_q8_0_gemm)(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    nibbles_gemm(n, ncols, s, ss, x, y, ys, 1);
}

#ifdef KILN_NEON_DOTPROD
/* q8_0: 2 columns per pass (8 weight registers and 8 accumulators) */
void NEON_SFX(q8_0x4_q8_0_gemm)(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    int c = 0;
    for (; c + 2 <= ncols; c += 2) { COL_PTRS(2) q8_0x4_cols(n, 2, sc, x, yc); }
    if (c < ncols) { COL_PTRS(1) q8_0x4_cols(n, 1, sc, x, yc); }
}
#endif
#endif /* KILN_NEON_I8MM */
