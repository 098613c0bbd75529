/*
 * kernels_wasm_relaxed.c — the kernels a relaxed-SIMD build (-mrelaxed-simd,
 * kiln-st-relaxed / kiln-mt-relaxed) swaps into the SIMD128 table, as the
 * "wasm_relaxed" ISA. Everything else in that table is SIMD128.
 *
 * Why these: SIMD128 has no 8-bit dot product and no FMA, so q8_0 mat-vec
 * and the f32 GEMM are compute-bound in a browser (bench/peers). Relaxed
 * SIMD adds both, lowered by V8 on x86 to pmaddubsw(+pmaddwd) or, for the
 * i32 dot-add where the CPU has AVX-VNNI, vpdpbusd; and vfmadd. The q4_0
 * and q8_0 kernels come in two versions, one per lowering (the q4_0
 * section), picked at load by kiln_wasm_relaxed_dot_add_direct().
 *
 * Determinism. The integer dots are exact whatever the engine does, as long
 * as the second operand of relaxed_dot is in 0..127 (x86 reads it unsigned,
 * arm signed; they agree there) — both kernels below keep it so:
 *   q4_0: the nibbles 0..15, with the -8 offset taken off as a per-block sum
 *         (the SIMD128 kernel's correction). The i16 products stay below
 *         2*15*128, so adding the two halves in i16 cannot overflow, and the
 *         i32 lanes cover the same elements as simd128_common.h's: plain
 *         and x4 kernels are bit-identical to SIMD128's, whose lanes are
 *         those of ggml's own wasm kernel (wllama's results). llama.cpp's
 *         AVX2 repacked order (one fma per block sum) was tried here with a
 *         fused relaxed_madd: bit-identical to the scalar x4 kernel, 10-15 %
 *         faster, but greedy tokens on bench/peers' synthetic Q4_0 model then
 *         matched neither wllama nor native llama.cpp (the other wasm ops
 *         round unlike AVX2's), so the lane order stays.
 *   q8_0: |y| as the 7-bit operand and the weights with y's sign moved onto
 *         them, (w ^ m) - m with m = (y < 0). The activation side is prepared once
 *         per block and shared by the x4 kernel's 4 rows. A weight of -128
 *         with a negative y would wrap; ggml's and Kiln's quantizers write
 *         -127..127 only. Each block's integer sum is exact, and the float
 *         work follows the scalar reference (sum += isum * (dx * dy)), so
 *         plain, x4 and scalar kernels agree bit for bit (SIMD128's, now in
 *         the same order, too).
 * relaxed_madd is fused or not at the engine's choice (fused on x86 with
 * FMA3 and on arm64), so the f32 GEMM rounds per machine; it is tested
 * against the double-precision reference with a tolerance like every float
 * kernel. The f32 dot of mat-vec is memory-bound (no gain measured) and
 * keeps SIMD128's bit-reproducible sums. Where kiln_wasm_relaxed_madd_fuses()
 * finds a real FMA, the table also takes the fp16 accumulator, whose results
 * must equal the scalar fmaf ones bit for bit.
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


#define hsum_f32 kiln_simd128_hsum_f32

#define RMADD(a, b, c) __builtin_wasm_relaxed_madd_f32x4(a, b, c)
#define LANE KILN_SIMD128_LANE
#define RDOTADD(a, b, c) __builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4(a, b, c)

/* ---- q4_0 -------------------------------------------------------------- */

/* Two ways to the same i32 lanes (lane k: elements 4k..4k+3 and
 * 16+4k..16+4k+3 of the block, as kiln_simd128_q4_dot's), both exact:
 *  - i16 (dotadd = false): two relaxed_dot i8 x i7 -> i16 pair sums (V8 on
 *    x64: pmaddubsw), added in i16 (no overflow below 2*15*128), widened
 *    in pairs, and 8 * (the y values of the lane) subtracted for the -8;
 *  - dotadd (true): i32x4.relaxed_dot_i8x16_i7x16_add_s twice, starting
 *    from -(8 * the y values of the lane). Where the engine lowers it to
 *    one instruction (V8: vpdpbusd on x64 with AVX-VNNI; sdot on arm64)
 *    that is 2 instructions per row and block instead of 5; elsewhere V8
 *    emits pmaddubsw + pmaddwd + paddd and a constant for each, slower
 *    than the i16 way. kiln_wasm_relaxed_dot_add_direct() tells them apart.
 * The nibbles (0..15) are relaxed_dot's 7-bit operand, so results do not
 * depend on the engine. */

/* the column's correction: 8 * the y values of each lane (i16 way), or its
 * negation (dotadd way, the accumulator the block's dot starts from) */
RX_INLINE v128_t q4_corr(v128_t y0, v128_t y1, const struct kiln_simd128_k * k, bool dotadd) {
    if (dotadd) return wasm_i32x4_neg(RDOTADD(y1, k->eight, RDOTADD(y0, k->eight, wasm_i32x4_splat(0))));
    return wasm_i32x4_dot_i16x8(wasm_i16x8_add(RDOT16(y0, k->eight), RDOT16(y1, k->eight)), k->ones16);
}

/* sum over the block of (nibble - 8) * y: lo, hi the low and high nibbles */
RX_INLINE v128_t q4_lanes(v128_t lo, v128_t hi, v128_t y0, v128_t y1, v128_t corr, const struct kiln_simd128_k * k, bool dotadd) {
    if (dotadd) return RDOTADD(y1, hi, RDOTADD(y0, lo, corr));
    return wasm_i32x4_sub(wasm_i32x4_dot_i16x8(wasm_i16x8_add(RDOT16(y0, lo), RDOT16(y1, hi)), k->ones16), corr);
}

/* the low and high nibbles of 16 quant bytes (a 16-bit shift: its bits
 * that cross bytes are masked off anyway) */
RX_INLINE v128_t q4_lo(v128_t b, const struct kiln_simd128_k * k) { return wasm_v128_and(b, k->m4); }
RX_INLINE v128_t q4_hi(v128_t b, const struct kiln_simd128_k * k) { return wasm_v128_and(wasm_u16x8_shr(b, 4), k->m4); }

RX_INLINE v128_t q4_block(v128_t b, v128_t y0, v128_t y1, v128_t corr, const struct kiln_simd128_k * k, bool dotadd) {
    return q4_lanes(q4_lo(b, k), q4_hi(b, k), y0, y1, corr, k, dotadd);
}

RX_INLINE void q4_0_vec_dot(int64_t n, float * s, const void * vx, const void * vy, bool dotadd) {
    const block_q4_0 * x = vx;
    const block_q8_0 * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    v128_t acc = wasm_f32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t p = q4_block(ld(x[i].qs), y0, y1, q4_corr(y0, y1, &k, dotadd), &k, dotadd);
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), wasm_f32x4_splat(KQ_H2F(x[i].d) * KQ_H2F(y[i].d))));
    }
    *s = hsum_f32(acc);
}

/* exact: the scales through kiln_simd128_scales4_fast; otherwise the
 * loop's fast form, which returns false where a scale was inf/nan (the
 * caller then runs the exact form: same results for every finite input) */
RX_INLINE bool q4_0x4_vec_dot(int64_t n, float * s, const void * vx, const void * vy, bool dotadd, bool exact) {
    const block_q4_0x4 * x = vx;
    const block_q8_0 * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0, mx = wasm_i32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t corr = q4_corr(y0, y1, &k, dotadd);
        const v128_t d = kiln_simd128_x4_scales(x[i].d, &y[i].d, &k, &mx, exact);
#define ROW(r, acc) do { \
            const v128_t p = q4_block(ld(x[i].qs + 16 * (r)), y0, y1, corr, &k, dotadd); \
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), LANE(d, r))); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
    return exact || kiln_simd128_finite(mx);
}

/* q4_0x4 against 2 activation rows (prompt processing): the nibbles are
 * split and the x scales converted once per block and row for both; per
 * row and column the very lanes and float steps of the x4 kernel above
 * (bit-identical); exact as there */
RX_INLINE bool q4_0x4_2cols(int64_t n, float * s0, float * s1, const block_q4_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb,
                            bool dotadd, bool exact) {
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    v128_t a0[4], a1[4], mx = wasm_i32x4_splat(0);
    for (int r = 0; r < 4; r++) a0[r] = a1[r] = wasm_f32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const v128_t ya0 = ld(ya[i].qs), ya1 = ld(ya[i].qs + 16), yb0 = ld(yb[i].qs), yb1 = ld(yb[i].qs + 16);
        const v128_t ca = q4_corr(ya0, ya1, &k, dotadd), cb = q4_corr(yb0, yb1, &k, dotadd);
        v128_t da, db;
        kiln_simd128_x4_scales2(x[i].d, &ya[i].d, &yb[i].d, &k, &mx, exact, &da, &db);
#define ROW(r) do { \
            const v128_t b = ld(x[i].qs + 16 * (r)); \
            const v128_t lo = q4_lo(b, &k), hi = q4_hi(b, &k); \
            const v128_t pa = q4_lanes(lo, hi, ya0, ya1, ca, &k, dotadd); \
            const v128_t pb = q4_lanes(lo, hi, yb0, yb1, cb, &k, dotadd); \
            a0[r] = wasm_f32x4_add(a0[r], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(pa), LANE(da, r))); \
            a1[r] = wasm_f32x4_add(a1[r], wasm_f32x4_mul(wasm_f32x4_convert_i32x4(pb), LANE(db, r))); \
        } while (0)
        ROW(0); ROW(1); ROW(2); ROW(3);
#undef ROW
    }
    for (int r = 0; r < 4; r++) {
        s0[r] = hsum_f32(a0[r]);
        s1[r] = hsum_f32(a1[r]);
    }
    return exact || kiln_simd128_finite(mx);
}

static void q4_0x4_2cols_i16(int64_t n, float * s0, float * s1, const block_q4_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!q4_0x4_2cols(n, s0, s1, x, ya, yb, false, false)) q4_0x4_2cols(n, s0, s1, x, ya, yb, false, true);
}

static void q4_0x4_2cols_dotadd(int64_t n, float * s0, float * s1, const block_q4_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!q4_0x4_2cols(n, s0, s1, x, ya, yb, true, false)) q4_0x4_2cols(n, s0, s1, x, ya, yb, true, true);
}

void q4_0_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    q4_0_vec_dot(n, s, vx, vy, false);
}

void q4_0x4_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    if (!q4_0x4_vec_dot(n, s, vx, vy, false, false)) q4_0x4_vec_dot(n, s, vx, vy, false, true);
}

void q4_0x4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q4_0x4_2cols_i16, q4_0x4_q8_0_vec_dot__wasm_relaxed, n, ncols, s, ss, x, y, ys);
}

void q4_0_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * vx, const void * vy) {
    q4_0_vec_dot(n, s, vx, vy, true);
}

void q4_0x4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * vx, const void * vy) {
    if (!q4_0x4_vec_dot(n, s, vx, vy, true, false)) q4_0x4_vec_dot(n, s, vx, vy, true, true);
}

void q4_0x4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q4_0x4_2cols_dotadd, q4_0x4_q8_0_vec_dot__wasm_relaxed_dotadd, n, ncols, s, ss, x, y, ys);
}

/* ---- q8_0 -------------------------------------------------------------- */

/* the activation side of a q8_0 block: |y| and y's sign mask, per half */
struct q8_act { v128_t a0, m0, a1, m1; };

static inline struct q8_act q8_act_load(const int8_t * qs, const struct kiln_simd128_k * k) {
    const v128_t y0 = ld(qs), y1 = ld(qs + 16);
    struct q8_act r = { wasm_i8x16_abs(y0), wasm_i8x16_gt(k->zero, y0), wasm_i8x16_abs(y1), wasm_i8x16_gt(k->zero, y1) };
    return r;
}

/* sum over the block of w * y: lane k holds elements 4k..4k+3 and
 * 16+4k..16+4k+3. The i16 way (dotadd = false): each half through the i16
 * dot (pairs of products, at most 2*128*127: no saturation), widened on its
 * own, as two halves together could overflow i16; the dotadd way: two i32
 * dot-adds (the q4_0 section says when each is faster). Exact either way. */
RX_INLINE v128_t q8_dot(const int8_t * w, const struct q8_act * a, const struct kiln_simd128_k * k, bool dotadd) {
    const v128_t w0 = wasm_i8x16_sub(wasm_v128_xor(ld(w), a->m0), a->m0);
    const v128_t w1 = wasm_i8x16_sub(wasm_v128_xor(ld(w + 16), a->m1), a->m1);
    if (dotadd) return RDOTADD(w1, a->a1, RDOTADD(w0, a->a0, wasm_i32x4_splat(0)));
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(RDOT16(w0, a->a0), k->ones16), wasm_i32x4_dot_i16x8(RDOT16(w1, a->a1), k->ones16));
}

RX_INLINE void q8_0_vec_dot(int64_t n, float * s, const void * vx, const void * vy, bool dotadd) {
    const block_q8_0 * x = vx;
    const block_q8_0 * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    float sumf = 0;
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const struct q8_act a = q8_act_load(y[i].qs, &k);
        sumf += (float) kiln_simd128_i32_hsum(q8_dot(x[i].qs, &a, &k, dotadd)) * (KQ_H2F(x[i].d) * KQ_H2F(y[i].d));
    }
    *s = sumf;
}

/* Per row and block: the exact integer sum times fp16(dx) * fp16(dy), added
 * to the row's float: the scalar reference's operations in its order, so
 * this kernel and the plain one above are bit-identical to
 * q8_0x4_q8_0_vec_dot__scalar. Summing the 4 rows' integers across lanes
 * first leaves one convert, multiply and add per block for all 4 rows
 * (7-8 % over per-row float lanes in Chromium, bench/peers). The scales:
 * kiln_simd128_x4_scales, fast or exact as in q4_0x4_vec_dot. */
RX_INLINE bool q8_0x4_vec_dot(int64_t n, float * s, const void * vx, const void * vy, bool dotadd, bool exact) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    v128_t acc = wasm_f32x4_splat(0), mx = wasm_i32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const struct q8_act a = q8_act_load(y[i].qs, &k);
        const v128_t d = kiln_simd128_x4_scales(x[i].d, &y[i].d, &k, &mx, exact);
        const v128_t p = kiln_simd128_i32_hsum4(q8_dot(x[i].qs, &a, &k, dotadd), q8_dot(x[i].qs + 32, &a, &k, dotadd),
                                                q8_dot(x[i].qs + 64, &a, &k, dotadd), q8_dot(x[i].qs + 96, &a, &k, dotadd));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), d));
    }
    wasm_v128_store(s, acc);
    return exact || kiln_simd128_finite(mx);
}

/* q8_0x4 against 2 activation rows (prompt processing): the weights are
 * loaded and the x scales converted once per block for both rows; per row
 * and column the integer sums (exact) and float steps of the x4 kernel
 * above, so the results are bit-identical to it */
RX_INLINE bool q8_0x4_2cols(int64_t n, float * s0, float * s1, const block_q8_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb,
                            bool dotadd, bool exact) {
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, mx = wasm_i32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const struct q8_act a = q8_act_load(ya[i].qs, &k), b = q8_act_load(yb[i].qs, &k);
        v128_t da, db;
        kiln_simd128_x4_scales2(x[i].d, &ya[i].d, &yb[i].d, &k, &mx, exact, &da, &db);
        const int8_t * w = x[i].qs;
        const v128_t pa = kiln_simd128_i32_hsum4(q8_dot(w, &a, &k, dotadd), q8_dot(w + 32, &a, &k, dotadd), q8_dot(w + 64, &a, &k, dotadd),
                                                 q8_dot(w + 96, &a, &k, dotadd));
        const v128_t pb = kiln_simd128_i32_hsum4(q8_dot(w, &b, &k, dotadd), q8_dot(w + 32, &b, &k, dotadd), q8_dot(w + 64, &b, &k, dotadd),
                                                 q8_dot(w + 96, &b, &k, dotadd));
        acc0 = wasm_f32x4_add(acc0, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(pa), da));
        acc1 = wasm_f32x4_add(acc1, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(pb), db));
    }
    wasm_v128_store(s0, acc0);
    wasm_v128_store(s1, acc1);
    return exact || kiln_simd128_finite(mx);
}

static void q8_0x4_2cols_i16(int64_t n, float * s0, float * s1, const block_q8_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!q8_0x4_2cols(n, s0, s1, x, ya, yb, false, false)) q8_0x4_2cols(n, s0, s1, x, ya, yb, false, true);
}

static void q8_0x4_2cols_dotadd(int64_t n, float * s0, float * s1, const block_q8_0x4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!q8_0x4_2cols(n, s0, s1, x, ya, yb, true, false)) q8_0x4_2cols(n, s0, s1, x, ya, yb, true, true);
}

void q8_0_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    q8_0_vec_dot(n, s, vx, vy, false);
}

void q8_0x4_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    if (!q8_0x4_vec_dot(n, s, vx, vy, false, false)) q8_0x4_vec_dot(n, s, vx, vy, false, true);
}

void q8_0_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * vx, const void * vy) {
    q8_0_vec_dot(n, s, vx, vy, true);
}

void q8_0x4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * vx, const void * vy) {
    if (!q8_0x4_vec_dot(n, s, vx, vy, true, false)) q8_0x4_vec_dot(n, s, vx, vy, true, true);
}

void q8_0x4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q8_0x4_2cols_i16, q8_0x4_q8_0_vec_dot__wasm_relaxed, n, ncols, s, ss, x, y, ys);
}

void q8_0x4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(q8_0x4_2cols_dotadd, q8_0x4_q8_0_vec_dot__wasm_relaxed_dotadd, n, ncols, s, ss, x, y, ys);
}

/* The relaxed i32 dot-add of 4 lanes of constants a (the i8 operand) and
 * b (the 7-bit one), lane 0; through volatile so nothing is folded */
static int32_t dot_add_probe(int8_t a, int8_t b) {
    static volatile int8_t in[2];
    in[0] = a; in[1] = b;
    const v128_t r = RDOTADD(wasm_i8x16_splat(in[0]), wasm_i8x16_splat(in[1]), wasm_i32x4_splat(0));
    return wasm_i32x4_extract_lane(r, 0);
}

/* Whether i32x4.relaxed_dot_i8x16_i7x16_add_s is one dot instruction here
 * (the dotadd kernels' case), told apart by a 7-bit operand out of range,
 * where the relaxed results may differ: 127 * 255 four times is 129540
 * through vpdpbusd (x64 AVX-VNNI: unsigned, no intermediate saturation),
 * -508 through a signed dot (arm64 sdot, x64 vpdpbssd), and 65534 through
 * V8's x64 fallback of pmaddubsw's saturated i16 pairs (slower than the
 * i16 kernels; and wrong in Node 20's V8 11.3, which adds the dot twice
 * there in some code shapes). Then the right results in range:
 * 4 * 5 * 3 = 60 and 4 * -1 * 127 = -508. */
bool kiln_wasm_relaxed_dot_add_direct(void) {
    const int32_t out_of_range = dot_add_probe(127, -1);
    if (!(out_of_range == 129540 || out_of_range == -508) || dot_add_probe(5, 3) != 60 || dot_add_probe(-1, 127) != -508) return false;
    /* and the dotadd kernels agree with the i16 ones on 2 blocks spanning
     * every value (an engine's miscompile must not reach the table) */
    block_q4_0 x4[2];
    block_q8_0 x8[2], y[2];
    for (int b = 0; b < 2; b++) {
        x4[b].d = x8[b].d = y[b].d = 0x3c00; /* 1.0 */
        for (int j = 0; j < 32; j++) {
            if (j < 16) x4[b].qs[j] = (uint8_t) ((j + 5 * b) % 16 | ((15 - j + 3 * b) % 16) << 4);
            x8[b].qs[j] = (int8_t) (((j * 37 + 91 * b) % 255) - 127);
            y[b].qs[j] = (int8_t) (((j * 53 + 17 + 77 * b) % 255) - 127);
        }
    }
    float a, c, e, f;
    q4_0_vec_dot(64, &a, x4, y, false); q4_0_vec_dot(64, &c, x4, y, true);
    q8_0_vec_dot(64, &e, x8, y, false); q8_0_vec_dot(64, &f, x8, y, true);
    /* and iq4_nl's x4 (repack_iq4_nl_wasm_relaxed.c), its 4 rows the q4_0
     * nibbles rotated */
    block_iq4_nlx4 g[2];
    for (int b = 0; b < 2; b++) {
        for (int r = 0; r < 4; r++) {
            g[b].d[r] = 0x3c00;
            for (int j = 0; j < 16; j++) g[b].qs[16 * r + j] = x4[b].qs[(j + 5 * r) % 16];
        }
    }
    float ga[4], gc[4];
    iq4_nlx4_q8_0_vec_dot__wasm_relaxed(64, ga, g, y);
    iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd(64, gc, g, y);
    return a == c && e == f && memcmp(ga, gc, sizeof ga) == 0;
}

/* ---- f32 ---------------------------------------------------------------- */

/* f32_gemm_2x16__wasm_simd128 with fused multiply-adds: 8 FMAs against 4
 * panel loads and 2 broadcasts per k */
void f32_gemm_2x16__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate) {
    KILN_SIMD128_GEMM_2X16_BODY(RMADD);
}

/* f32_gemm_3x3__wasm_simd128 with fused multiply-adds: 9 FMAs against 6
 * loads per 4 lanes of k (the tiles take products whose src0 has fewer rows
 * than a packed panel, e.g. Silero VAD's convolutions) */
void f32_gemm_3x3__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    KILN_SIMD128_GEMM_3X3_BODY(RMADD);
}

/* llama.cpp's x86 orders (kernels.h: f32_gemm_tile8, f32_dot8,
 * f32_dot_ggml) with relaxed_madd: where the engine fuses it (x86 with
 * FMA3, arm64), llama.cpp's AVX2 sums bit for bit */
void f32_gemm8_2x2__wasm_relaxed(int64_t k, const float * a, int64_t lda, const float * b, int64_t ldb, float * c, int64_t ldc) {
    KILN_SIMD128_GEMM8_2X2_BODY(RMADD);
}

float f32_dot8__wasm_relaxed(int64_t n, const float * x, const float * y) {
    KILN_SIMD128_DOT8_BODY(RMADD);
}

float f32_dot_ggml__wasm_relaxed(int64_t n, const float * x, const float * y) {
    KILN_SIMD128_DOT_GGML_BODY(RMADD);
}

/* silu with llama.cpp's AVX2 floats (simd128_common.h's exp4), its FMAs
 * as relaxed_madd: the table takes it only where the engine fuses, and
 * then it equals SIMD128's silu (fmaf emulated in f64) bit for bit, at a
 * fraction of the work */
KILN_SIMD128_DEFINE_EXP4_GGML(exp4_ggml_rx, RMADD)

void f32_silu__wasm_relaxed(int64_t n, const float * x, float * y) {
    const int64_t nv = n - n % 8;
    int64_t i = 0;
    for (; i < nv; i += 4) {
        const v128_t v = wasm_v128_load(x + i);
        wasm_v128_store(y + i, wasm_f32x4_div(v, wasm_f32x4_add(wasm_f32x4_splat(1.0f), exp4_ggml_rx(wasm_f32x4_sub(wasm_f32x4_splat(0.0f), v)))));
    }
    for (; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

/* ---- fp16 accumulator ---------------------------------------------------- */

/* Engines fuse relaxed_madd where the CPU has FMA (V8 on x86 with FMA3, and
 * on arm64) and round twice elsewhere. One case tells them apart: with
 * a = b = 1 + 2^-12 and c = -(1 + 2^-11), a*b + c is 2^-24 exactly, while
 * a*b rounded first (a tie, to even) leaves 0. The operands come through
 * volatile so the compiler cannot fold the answer in. */
bool kiln_wasm_relaxed_madd_fuses(void) {
    static volatile float in[3] = { 1.0f + 0x1p-12f, 1.0f + 0x1p-12f, -(1.0f + 0x1p-11f) };
    const v128_t r = RMADD(wasm_f32x4_splat(in[0]), wasm_f32x4_splat(in[1]), wasm_f32x4_splat(in[2]));
    return wasm_f32x4_extract_lane(r, 0) == 0x1p-24f;
}

/* y += x * v in fp16, each step fmaf then round to fp16: the scalar
 * kernel's (and llama.cpp's F16C + FMA) results. The table takes it only
 * where kiln_wasm_relaxed_madd_fuses(); SIMD128's version gets the same
 * bits through an exact fma emulated in f64, several times the work, and
 * flash attention's V accumulation runs this per cached position. */
void f16_mad__wasm_relaxed(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    KILN_SIMD128_F16_MAD_BODY(RMADD);
}

/* the same on fp16 values held as floats (kernels.h, f16val_mad) */
void f16val_mad__wasm_relaxed(int64_t n, float * y, const float * x, float v) {
    KILN_SIMD128_F16VAL_MAD_BODY(RMADD);
}

#endif /* __wasm_relaxed_simd__ */
