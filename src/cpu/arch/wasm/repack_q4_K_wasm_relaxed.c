/*
 * repack_q4_K_wasm_relaxed.c — relaxed-SIMD kernels for Q4_K weights in the
 * x8 layout (src/cpu/repack.h) and for plain Q6_K, the two types of a
 * Q4_K_M model's weights.
 *
 * Q4_K x8: the scalar reference's sums (repack_q4_K_scalar.c), bit for bit.
 * Per super-block and sub-block pair p, the 16-byte loads of the x8 quants
 * hold 8 bytes of each of two rows (a row pair), so one activation piece of
 * 8 bytes, loaded once into both halves, serves all 8 rows.
 * i32x4.relaxed_dot_i8x16_i7x16_s (i16 pair sums; V8 on x64: pmaddubsw)
 * takes the activations as the signed operand and the nibbles (0..15) as
 * the 7-bit one, so results do not depend on the engine; the 4 pieces of a
 * sub-block add up in i16 (at most 8 * 15 * 128 = 15360), then one
 * i32x4.dot_i16x8_s against the rows' 6-bit scales gives sc * dot exactly.
 * The integer sums I and M per row are those of the reference; the floats
 * then take its steps: acc = fmaf((float) I, d * d_y, acc) per super-block
 * (mat-vec) or per sub-block pair (gemm), the same for the mins, result
 * acc - accm. fmaf is relaxed_madd where the engine fuses it
 * (kiln_wasm_relaxed_madd_fuses()), the exact f64 emulation otherwise; the
 * kernel table takes the matching pair.
 *
 * Q6_K: the SIMD128 kernel's float steps (sumf += d * d_y * isum per
 * super-block), the exact integer isum computed with relaxed_dot on q + 32
 * (0..63, the 7-bit operand) and the 32 * sum(sc * bsum) offset taken off
 * once per super-block: bit-identical to q6_K_q8_K_vec_dot__wasm_simd128.
 */
#if defined(__wasm_relaxed_simd__)
#include <string.h>
#include <wasm_simd128.h>

#include "../arch.h"
#include "../quant_dot.h"
#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "simd128_common.h"

#define RMADD(a, b, c) __builtin_wasm_relaxed_madd_f32x4(a, b, c)


RX_INLINE v128_t fma4(v128_t a, v128_t b, v128_t c, bool fused) {
    return fused ? RMADD(a, b, c) : kiln_simd128_fma_f32x4(a, b, c);
}

/* the scales and mins of sub-block s of the 8 rows (repack.h's 12 bytes at
 * g) as u8 lanes 0..7 of *sc and *mn, lanes 8..15 unused (16-bit shifts:
 * the masks keep each byte's own bits). The shuffles are 32-bit ones V8
 * makes one instruction each (pshufd, punpckldq); a byte shuffle that
 * matches no such pattern costs a pshufb and the rebuild of its mask */
RX_INLINE void x8_scales(const uint8_t * g, const struct kiln_simd128_k * k, v128_t * sc, v128_t * mn) {
    const v128_t v = wasm_v128_load64_zero(g);
    const v128_t w = wasm_v128_load32_zero(g + 8);
    /* lanes 0..7: sc[0..3], mn[0..3] */
    const v128_t lo = wasm_v128_and(v, k->m63);
    /* lanes 0..7: g[8 + j] & 15 (j < 4), g[8 + j - 4] >> 4 (j >= 4), then
     * the top 2 bits of g[j] above them: sc[4..7], mn[4..7] */
    const v128_t t = wasm_i32x4_shuffle(w, w, 0, 0, 0, 0);
    const v128_t nib = wasm_v128_bitselect(wasm_v128_and(t, k->m4), wasm_v128_and(wasm_u16x8_shr(t, 4), k->m4), k->sel);
    const v128_t hi = wasm_v128_or(nib, wasm_v128_and(wasm_u16x8_shr(v, 2), k->m30));
    *sc = wasm_i32x4_shuffle(lo, hi, 0, 4, 1, 5);
    *mn = wasm_i32x4_shuffle(*sc, *sc, 2, 3, 2, 3);
}

/* The u8 scales of rows 2q and 2q + 1 (lanes 2q, 2q + 1 of sc) as i16
 * lanes, 4 of row 2q then 4 of row 2q + 1: a relaxed swizzle spreads rows
 * 0..3 (t0) or 4..7 (t1) to 4 bytes each, and a zero-extend of its low or
 * high half gives row pair q. Its indices are 0..7, where relaxed_swizzle
 * is the plain one in every engine (V8: one pshufb, without the plain
 * swizzle's out-of-range fix-up), and they come through volatile once per
 * call (V8 rebuilds a v128.const at each use inside a loop). */
struct x8_idx { v128_t r0123, r4567; };

static inline struct x8_idx x8_idx_load(void) {
    static volatile const uint32_t w[8] = { 0, 0x01010101u, 0x02020202u, 0x03030303u, 0x04040404u, 0x05050505u, 0x06060606u, 0x07070707u };
    const struct x8_idx r = { wasm_u32x4_make(w[0], w[1], w[2], w[3]), wasm_u32x4_make(w[4], w[5], w[6], w[7]) };
    return r;
}

/* row pair q's scales from t0 = rows 0..3 spread, t1 = rows 4..7 spread */
#define PAIR_SCALES(t0, t1, q) ((q) == 0 ? wasm_u16x8_extend_low_u8x16(t0) : (q) == 1 ? wasm_u16x8_extend_high_u8x16(t0) : \
                                (q) == 2 ? wasm_u16x8_extend_low_u8x16(t1) : wasm_u16x8_extend_high_u8x16(t1))

/* rows' (4 lanes) i32 sums of lanes (0,1) and (2,3) of a and b: rows of the
 * pairs a = (r, r + 1), b = (r + 2, r + 3) */
static inline v128_t rows4(v128_t a, v128_t b) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), wasm_i32x4_shuffle(a, b, 1, 3, 5, 7));
}

/* M for the 8 rows of sub-blocks s, s + 1: mn_s[r] * bs_s + mn_{s+1}[r] * bs_{s+1},
 * rows 0..3 in *m0, 4..7 in *m1 (bs: the sub-blocks' 32-value sums, i16 lanes s, s + 1) */
RX_INLINE void mins2(v128_t mna, v128_t mnb, v128_t bs2, v128_t * m0, v128_t * m1) {
    /* i16 lanes mn_s[r], mn_{s+1}[r] per row (an interleave, then zero-extends) */
    const v128_t ab = wasm_i8x16_shuffle(mna, mnb, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const v128_t lo = wasm_u16x8_extend_low_u8x16(ab);
    const v128_t hi = wasm_u16x8_extend_high_u8x16(ab);
    *m0 = wasm_i32x4_add(*m0, wasm_i32x4_dot_i16x8(lo, bs2));
    *m1 = wasm_i32x4_add(*m1, wasm_i32x4_dot_i16x8(hi, bs2));
}

/* one super-block's sub-block pair p of the 8 rows against the activations
 * q8 (the super-block's 256): sc * dot into the row-pair accumulators a[4]
 * (lanes 0, 1: row 2q; 2, 3: row 2q + 1) */
RX_INLINE void x8_pair(const uint8_t * qs, const int8_t * q8, int p, v128_t sclo, v128_t schi, v128_t a[4], v128_t m4,
                       const struct x8_idx * ix) {
    const int8_t * ylo = q8 + 64 * p, * yhi = q8 + 64 * p + 32;
    const v128_t lo0 = RSWZ(sclo, ix->r0123), lo1 = RSWZ(sclo, ix->r4567), hi0 = RSWZ(schi, ix->r0123), hi1 = RSWZ(schi, ix->r4567);
    /* the activation pieces are reloaded per row pair (L1 hits): kept in
     * registers for all 4 they would push the accumulators out of them */
    for (int q = 0; q < 4; q++) {
        v128_t slo = wasm_i16x8_splat(0), shi = slo;
        for (int j = 0; j < 4; j++) {
            const v128_t b = ld(qs + 256 * p + (8 * j + 2 * q) * 8);
            /* high nibbles by a 16-bit shift and the mask: V8 has no byte shift on x64 */
            slo = wasm_i16x8_add(slo, RDOT16(wasm_v128_load64_splat(ylo + 8 * j), wasm_v128_and(b, m4)));
            shi = wasm_i16x8_add(shi, RDOT16(wasm_v128_load64_splat(yhi + 8 * j), wasm_v128_and(wasm_u16x8_shr(b, 4), m4)));
        }
        a[q] = wasm_i32x4_add(a[q], wasm_i32x4_add(wasm_i32x4_dot_i16x8(slo, PAIR_SCALES(lo0, lo1, q)),
                                                   wasm_i32x4_dot_i16x8(shi, PAIR_SCALES(hi0, hi1, q))));
    }
}

/* 8 fp16 -> f32: exact (kiln_simd128_load_f16x8) or the short form
 * (kiln_simd128_h2f_finite), a call that met an inf/nan redone exactly */
RX_INLINE void x8_h2f(const kiln_fp16_t * p, const struct kiln_simd128_k * k, v128_t * mx, bool exact, v128_t * lo, v128_t * hi) {
    if (exact) {
        kiln_simd128_load_f16x8(p, lo, hi);
        return;
    }
    const v128_t v = wasm_v128_load(p);
    *lo = kiln_simd128_h2f_finite(wasm_u32x4_extend_low_u16x8(v), k, mx);
    *hi = kiln_simd128_h2f_finite(wasm_u32x4_extend_high_u16x8(v), k, mx);
}

/* the 8 rows of an x8 group against one q8_K row, into s[0..7]; pairs: the
 * batched order (one fma per sub-block pair), else the mat-vec one; false
 * where the short scale conversion met an inf/nan (x8_h2f) */
RX_INLINE bool x8_rows(int64_t n, float * s, const block_q4_Kx8 * x, const block_q8_K * y, bool pairs, bool fused, bool exact) {
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const struct x8_idx ix = x8_idx_load();
    const v128_t m4 = k.m4;
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, accm0 = acc0, accm1 = acc0, mx = wasm_i32x4_splat(0);
    for (int64_t b = 0; b < n / QK_K; b++) {
        v128_t d0, d1, m0f, m1f;
        x8_h2f(x[b].d, &k, &mx, exact, &d0, &d1);
        x8_h2f(x[b].dmin, &k, &mx, exact, &m0f, &m1f);
        const v128_t yd = wasm_f32x4_splat(y[b].d);
        const v128_t dd0 = wasm_f32x4_mul(d0, yd), dd1 = wasm_f32x4_mul(d1, yd);
        const v128_t dm0 = wasm_f32x4_mul(m0f, yd), dm1 = wasm_f32x4_mul(m1f, yd);
        /* the sub-blocks' 32-value activation sums, i16 lanes 0..7 */
        const v128_t b0 = ld(y[b].bsums), b1 = ld(y[b].bsums + 8);
        const v128_t bs = wasm_i16x8_add(wasm_i16x8_shuffle(b0, b1, 0, 2, 4, 6, 8, 10, 12, 14),
                                         wasm_i16x8_shuffle(b0, b1, 1, 3, 5, 7, 9, 11, 13, 15));
        int32_t bsw[4];
        wasm_v128_store(bsw, bs);
        v128_t a[4], i0 = wasm_i32x4_splat(0), i1 = i0, mm0 = i0, mm1 = i0;
        for (int q = 0; q < 4; q++) a[q] = i0;
        for (int p = 0; p < 4; p++) {
            v128_t sclo, mnlo, schi, mnhi;
            x8_scales(x[b].scales + 24 * p, &k, &sclo, &mnlo);
            x8_scales(x[b].scales + 24 * p + 12, &k, &schi, &mnhi);
            x8_pair(x[b].qs, y[b].qs, p, sclo, schi, a, m4, &ix);
            const v128_t bs2 = wasm_v128_load32_splat(&bsw[p]); /* i16 lanes bs_2p, bs_2p+1 */
            mins2(mnlo, mnhi, bs2, &mm0, &mm1);
            if (pairs) {
                acc0 = fma4(wasm_f32x4_convert_i32x4(rows4(a[0], a[1])), dd0, acc0, fused);
                acc1 = fma4(wasm_f32x4_convert_i32x4(rows4(a[2], a[3])), dd1, acc1, fused);
                accm0 = fma4(wasm_f32x4_convert_i32x4(mm0), dm0, accm0, fused);
                accm1 = fma4(wasm_f32x4_convert_i32x4(mm1), dm1, accm1, fused);
                for (int q = 0; q < 4; q++) a[q] = i0;
                mm0 = mm1 = i0;
            }
        }
        if (!pairs) {
            i0 = rows4(a[0], a[1]);
            i1 = rows4(a[2], a[3]);
            acc0 = fma4(wasm_f32x4_convert_i32x4(i0), dd0, acc0, fused);
            acc1 = fma4(wasm_f32x4_convert_i32x4(i1), dd1, acc1, fused);
            accm0 = fma4(wasm_f32x4_convert_i32x4(mm0), dm0, accm0, fused);
            accm1 = fma4(wasm_f32x4_convert_i32x4(mm1), dm1, accm1, fused);
        }
    }
    wasm_v128_store(s, wasm_f32x4_sub(acc0, accm0));
    wasm_v128_store(s + 4, wasm_f32x4_sub(acc1, accm1));
    return exact || kiln_simd128_finite(mx);
}

RX_INLINE void x8_rows_any(int64_t n, float * s, const block_q4_Kx8 * x, const block_q8_K * y, bool pairs, bool fused) {
    if (!x8_rows(n, s, x, y, pairs, fused, false)) x8_rows(n, s, x, y, pairs, fused, true);
}

RX_INLINE void x8_gemm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys, bool fused) {
    for (int c = 0; c < ncols; c++) {
        float out[8];
        x8_rows_any(n, out, x, (const block_q8_K *) ((const char *) y + (size_t) c * ys), true, fused);
        memcpy(s + (size_t) c * ss, out, sizeof out);
    }
}

void q4_Kx8_q8_K_vec_dot__wasm_relaxed(int64_t n, float * s, const void * x, const void * y) {
    float out[8];
    x8_rows_any(n, out, x, y, false, false);
    memcpy(s, out, sizeof out);
}

void q4_Kx8_q8_K_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    x8_gemm(n, ncols, s, ss, x, y, ys, false);
}

void q4_Kx8_q8_K_vec_dot__wasm_relaxed_fma(int64_t n, float * s, const void * x, const void * y) {
    float out[8];
    x8_rows_any(n, out, x, y, false, true);
    memcpy(s, out, sizeof out);
}

void q4_Kx8_q8_K_gemm__wasm_relaxed_fma(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    x8_gemm(n, ncols, s, ss, x, y, ys, true);
}

/* ---- q6_K ------------------------------------------------------------------ */

void q6_K_q8_K_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_K * x = vx;
    const block_q8_K * y = vy;
    float sumf = 0;
    /* masks through volatile (kiln_simd128_k_load); every shift is a 16-bit
     * one and the mask keeps the bits of the lane's own byte */
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const v128_t m4 = k.m4, m30 = k.m30;
    for (int64_t i = 0; i < n / QK_K; ++i) {
        const uint8_t * ql = x[i].ql;
        const uint8_t * qh = x[i].qh;
        const int8_t * sc = x[i].scales;
        const int8_t * q8 = y[i].qs;
        v128_t acc = wasm_i32x4_splat(0);
        for (int half = 0; half < 2; ++half) {
            for (int h16 = 0; h16 < 2; ++h16) {
                const v128_t l0 = ld(ql + 16 * h16), l1 = ld(ql + 32 + 16 * h16);
                const v128_t hb = ld(qh + 16 * h16);
                /* q + 32: 0..63 */
                v128_t q[4];
                q[0] = wasm_v128_or(wasm_v128_and(l0, m4), wasm_v128_and(wasm_i16x8_shl(hb, 4), m30));
                q[1] = wasm_v128_or(wasm_v128_and(l1, m4), wasm_v128_and(wasm_i16x8_shl(hb, 2), m30));
                q[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 4), m4), wasm_v128_and(hb, m30));
                q[3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), m4), wasm_v128_and(wasm_u16x8_shr(hb, 2), m30));
                for (int p = 0; p < 4; ++p) {
                    /* pair sums at most 2 * 63 * 128 = 16128: no i16 saturation */
                    const v128_t d = RDOT16(ld(q8 + 32 * p + 16 * h16), q[p]);
                    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(d, wasm_i16x8_splat(sc[2 * p + h16])));
                }
            }
            ql += 64; qh += 32; sc += 8; q8 += 128;
        }
        /* the +32 offset: 32 * sum over the 16 sub-blocks of sc * bsum */
        const v128_t s8 = wasm_v128_load64_zero(x[i].scales), s8h = wasm_v128_load64_zero(x[i].scales + 8);
        const v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(s8), ld(y[i].bsums)),
                                          wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(s8h), ld(y[i].bsums + 8)));
        const int isum = kiln_simd128_i32_hsum(acc) - 32 * kiln_simd128_i32_hsum(off);
        sumf += KQ_H2F(x[i].d) * y[i].d * isum;
    }
    *s = sumf;
}

/* q6_K batched (vec_dot_rows, kernels.h): each weight row's super-block is
 * decoded once, into q + 32 (the 7-bit operand) and its 16 scales as i16
 * splats, for every activation row of the call; then per activation row
 * the very integer sum of q6_K_q8_K_vec_dot__wasm_relaxed (exact: only its
 * grouping differs) and its float step, sumf += d * d_y * isum, per
 * super-block in order: bit-identical to that vec_dot. Per 16 values and
 * activation row: 2 loads, the i16 dot, the scale dot and an add, against
 * the plain kernel's decode and scale splat for each. */
struct q6r_dec { v128_t q[16], sc[16], sc16[2]; float d; };

RX_INLINE void q6r_decode(const block_q6_K * x, const struct kiln_simd128_k * k, struct q6r_dec * o) {
    const uint8_t * ql = x->ql, * qh = x->qh;
    for (int half = 0; half < 2; ++half) {
        for (int h16 = 0; h16 < 2; ++h16) {
            const v128_t l0 = ld(ql + 16 * h16), l1 = ld(ql + 32 + 16 * h16), hb = ld(qh + 16 * h16);
            v128_t * q = &o->q[8 * half + h16];
            q[0] = wasm_v128_or(wasm_v128_and(l0, k->m4), wasm_v128_and(wasm_i16x8_shl(hb, 4), k->m30));
            q[2] = wasm_v128_or(wasm_v128_and(l1, k->m4), wasm_v128_and(wasm_i16x8_shl(hb, 2), k->m30));
            q[4] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l0, 4), k->m4), wasm_v128_and(hb, k->m30));
            q[6] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(l1, 4), k->m4), wasm_v128_and(wasm_u16x8_shr(hb, 2), k->m30));
        }
        ql += 64; qh += 32;
    }
    /* q[8 half + 2 p + h16] pairs with scale 8 half + 2 p + h16 and the
     * activations at 128 half + 32 p + 16 h16, the plain kernel's chunks */
    for (int j = 0; j < 16; j++) o->sc[j] = wasm_i16x8_splat(x->scales[j]);
    /* the 16 scales as i16, for the +32 offset against the bsums */
    o->sc16[0] = wasm_i16x8_extend_low_i8x16(wasm_v128_load64_zero(x->scales));
    o->sc16[1] = wasm_i16x8_extend_low_i8x16(wasm_v128_load64_zero(x->scales + 8));
    o->d = KQ_H2F(x->d);
}

RX_INLINE void q6r_step(const struct q6r_dec * w, const block_q8_K * y, float * sumf) {
    v128_t acc = wasm_i32x4_splat(0);
    for (int j = 0; j < 16; j++) acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(RDOT16(ld(y->qs + 16 * j), w->q[j]), w->sc[j]));
    const v128_t off = wasm_i32x4_add(wasm_i32x4_dot_i16x8(w->sc16[0], ld(y->bsums)), wasm_i32x4_dot_i16x8(w->sc16[1], ld(y->bsums + 8)));
    const int isum = kiln_simd128_i32_hsum(acc) - 32 * kiln_simd128_i32_hsum(off);
    *sumf += w->d * y->d * isum;
}

/* the batched kernels' loop (vec_dot_rows, kernels.h): per weight row, up
 * to RX_ROWS_NC activation rows at a time (their float sums on the stack),
 * each super-block decoded once (DECODE) and stepped through for each of
 * them (STEP) in super-block order */
#define RX_ROWS_NC 64
#define RX_ROWS(NAME, XT, DEC_T, DECODE, STEP) \
void NAME(int64_t n, int nr, int nc, float * s, size_t ss, const void * vx, size_t xs, const void * vy, size_t ys) { \
    const struct kiln_simd128_k k = kiln_simd128_k_load(); \
    const int64_t nb = n / QK_K; \
    DEC_T w; \
    float sumf[RX_ROWS_NC]; \
    for (int r = 0; r < nr; r++) { \
        const XT * x = (const XT *) ((const char *) vx + (size_t) r * xs); \
        for (int c0 = 0; c0 < nc; c0 += RX_ROWS_NC) { \
            const int n1 = nc - c0 < RX_ROWS_NC ? nc - c0 : RX_ROWS_NC; \
            for (int c = 0; c < n1; c++) sumf[c] = 0; \
            for (int64_t b = 0; b < nb; b++) { \
                DECODE(&x[b], &k, &w); \
                for (int c = 0; c < n1; c++) STEP(&w, (const block_q8_K *) ((const char *) vy + (size_t) (c0 + c) * ys) + b, &sumf[c]); \
            } \
            for (int c = 0; c < n1; c++) s[(size_t) (c0 + c) * ss + r] = sumf[c]; \
        } \
    } \
}

RX_ROWS(q6_K_q8_K_vec_dot_rows__wasm_relaxed, block_q6_K, struct q6r_dec, q6r_decode, q6r_step)

/* q5_K batched (vec_dot_rows), bit-identical to the table's q5_K vec_dot
 * (q5_K_q8_K_vec_dot__wasm_simd128): each weight row's super-block is
 * decoded once per call into its 5-bit values (0..31: relaxed_dot's 7-bit
 * operand, so exact in any engine) and its 6-bit scales and mins; per
 * activation row the same integers, isum = sum_j sc_j * dot_j and
 * mins = sum_j mn_j * bsum_j, then that kernel's float step,
 * sumf += d * d_y * isum - dmin * d_y * mins, per super-block in order.
 * An i16 pair sum is at most 2 * 31 * 128, two of them fit in i16. */
struct q5r_dec { v128_t q[16], sc[8]; uint8_t mn[8]; float d, dmin; };

RX_INLINE void q5r_decode(const block_q5_K * x, const struct kiln_simd128_k * k, struct q5r_dec * o) {
    const v128_t qh0 = ld(x->qh), qh1 = ld(x->qh + 16), zero = wasm_i32x4_splat(0), h16 = wasm_i8x16_splat(0x10);
    for (int j = 0; j < 4; ++j) {
        const v128_t b0 = ld(x->qs + 32 * j), b1 = ld(x->qs + 32 * j + 16);
        const v128_t ulo = wasm_i8x16_splat((int8_t) (1u << (2 * j))), uhi = wasm_i8x16_splat((int8_t) (2u << (2 * j)));
        o->q[4 * j + 0] = wasm_v128_or(wasm_v128_and(b0, k->m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh0, ulo), zero), h16));
        o->q[4 * j + 1] = wasm_v128_or(wasm_v128_and(b1, k->m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh1, ulo), zero), h16));
        o->q[4 * j + 2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(b0, 4), k->m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh0, uhi), zero), h16));
        o->q[4 * j + 3] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(b1, 4), k->m4), wasm_v128_and(wasm_i8x16_ne(wasm_v128_and(qh1, uhi), zero), h16));
    }
    for (int j = 0; j < 8; ++j) {
        uint8_t sc;
        kq_get_scale_min_k4(j, x->scales, &sc, &o->mn[j]);
        o->sc[j] = wasm_i16x8_splat(sc);
    }
    o->d = KQ_H2F(x->d);
    o->dmin = KQ_H2F(x->dmin);
}

RX_INLINE void q5r_step(const struct q5r_dec * w, const block_q8_K * y, float * sumf) {
    v128_t acc = wasm_i32x4_splat(0);
    for (int j = 0; j < 4; ++j) {
        const int8_t * q8 = y->qs + 64 * j;
        const v128_t lo = wasm_i16x8_add(RDOT16(ld(q8), w->q[4 * j]), RDOT16(ld(q8 + 16), w->q[4 * j + 1]));
        const v128_t hi = wasm_i16x8_add(RDOT16(ld(q8 + 32), w->q[4 * j + 2]), RDOT16(ld(q8 + 48), w->q[4 * j + 3]));
        acc = wasm_i32x4_add(acc, wasm_i32x4_add(wasm_i32x4_dot_i16x8(lo, w->sc[2 * j]), wasm_i32x4_dot_i16x8(hi, w->sc[2 * j + 1])));
    }
    const int isum = kiln_simd128_i32_hsum(acc);
    int mins = 0;
    for (int j = 0; j < 8; ++j) mins += w->mn[j] * (y->bsums[2 * j] + y->bsums[2 * j + 1]);
    *sumf += w->d * y->d * isum - w->dmin * y->d * mins;
}

/* the mat-vec form: decode and step per super-block (the relaxed dots in
 * place of SIMD128's widening ones), the same bits as SIMD128's */
void q5_K_q8_K_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const block_q5_K * x = vx;
    const block_q8_K * y = vy;
    struct q5r_dec w;
    float sumf = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        q5r_decode(&x[b], &k, &w);
        q5r_step(&w, &y[b], &sumf);
    }
    *s = sumf;
}

RX_ROWS(q5_K_q8_K_vec_dot_rows__wasm_relaxed, block_q5_K, struct q5r_dec, q5r_decode, q5r_step)

#endif /* __wasm_relaxed_simd__ */
