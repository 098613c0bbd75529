/*
 * repack_iq4_nl_wasm_relaxed.c — relaxed-SIMD kernels for IQ4_NL weights in
 * the x4 layout (src/cpu/repack.h): mat-vec over one x4 group
 * (iq4_nlx4_q8_0_vec_dot) and its batched form over several activation
 * rows (iq4_nlx4_q8_0_gemm), each in an i16 and a dot-add version like
 * kernels_wasm_relaxed.c's q4_0 / q8_0 ones (kiln_wasm_relaxed_dot_add_direct()
 * picks).
 *
 * Summation order: each result here equals, bit for bit, the table's plain
 * kernel, iq4_nl_q8_0_vec_dot__wasm_simd128 (quant_dot_wasm_simd128.c), for
 * that row: the same i32 lanes, then per block acc += (float) lanes *
 * (d_x * d_y) in 4 float lanes, summed left to right at the end (so a
 * repacked model gives the results of a plain one). That is not
 * llama.cpp's wasm order for IQ4_NL (repack.h). The plain kernel's
 * lane k holds elements {2k, 2k+1, 8+2k, 9+2k} of each 16-value half (the
 * i16 widening of bytes 0-7 and 8-15 before i32x4.dot_i16x8_s); relaxed_dot
 * sums 4 consecutive bytes into lane k, so the weights' bytes and the
 * activations are first put in that order by one swizzle (PERM below): once
 * per row and block for the weights (both nibble halves share it), once per
 * activation block for the activations.
 *
 * The integer dot: the levels (-127..113) through a swizzle of the nibbles,
 * |y| as relaxed_dot's 7-bit operand and y's sign moved onto the levels,
 * (w ^ m) - m with m = (y < 0), as the q8_0 kernels do; the activation side
 * (|y|, m) is made once per block and shared by the 4 rows (and, batched,
 * the weights' levels by the 2 columns of a pair). Every product is exact,
 * whatever the engine, as long as y is not -128 (ggml's and Kiln's q8_0
 * quantizers write -127..127): |products| <= 127 * 127, so the i16 pair
 * sums of the i16 way (V8 x64: pmaddubsw) never saturate; the two halves
 * are widened apart (together they could overflow i16).
 */
#if defined(__wasm_relaxed_simd__)
#include <wasm_simd128.h>

#include "../arch.h"
#include "../quant_dot.h"
#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "simd128_common.h"


#define hsum_f32 kiln_simd128_hsum_f32
#define LANE KILN_SIMD128_LANE
#define RDOTADD(a, b, c) __builtin_wasm_relaxed_dot_i8x16_i7x16_add_s_i32x4(a, b, c)
/* every index below is 0..15: relaxed_swizzle's result does not depend on
 * the engine then, and V8 on x64 emits a lone pshufb for it */

/* The loops' constants besides kiln_simd128_k's: the 16 levels
 * (kiln_kvalues_iq4nl) and PERM, byte 4k + t <- byte 2k + (t & 1) + 8 (t >> 1).
 * Read through volatile once per call, for kiln_simd128_k_load's reason
 * (V8 rebuilds a v128.const at each use inside a loop). */
struct iq4_k { v128_t levels, perm; };

#define B4(a, b, c, d) ((uint32_t) (uint8_t) (a) | (uint32_t) (uint8_t) (b) << 8 | (uint32_t) (uint8_t) (c) << 16 | (uint32_t) (uint8_t) (d) << 24)

RX_INLINE struct iq4_k iq4_k_load(void) {
    static volatile const uint32_t w[8] = {
        B4(-127, -104, -83, -65), B4(-49, -35, -22, -10), B4(1, 13, 25, 38), B4(53, 69, 89, 113),
        B4(0, 1, 8, 9), B4(2, 3, 10, 11), B4(4, 5, 12, 13), B4(6, 7, 14, 15),
    };
    const struct iq4_k c = { wasm_i32x4_make(w[0], w[1], w[2], w[3]), wasm_i32x4_make(w[4], w[5], w[6], w[7]) };
    return c;
}

/* the activation side of a q8_0 block in PERM order: |y| and y's sign mask, per half */
struct iq4_act { v128_t a0, m0, a1, m1; };

RX_INLINE struct iq4_act iq4_act_load(const int8_t * qs, const struct iq4_k * c, const struct kiln_simd128_k * k) {
    const v128_t y0 = RSWZ(ld(qs), c->perm), y1 = RSWZ(ld(qs + 16), c->perm);
    /* y < 0 against kiln_simd128_k's zero: a compare, not a shift */
    const struct iq4_act r = { wasm_i8x16_abs(y0), wasm_i8x16_gt(k->zero, y0), wasm_i8x16_abs(y1), wasm_i8x16_gt(k->zero, y1) };
    return r;
}

/* a row's 16 quant bytes -> the levels of its low (*lo: values 0..15 of the
 * block) and high nibbles (*hi: 16..31), in PERM order (a 16-bit shift:
 * the bits it moves across bytes are masked off) */
RX_INLINE void iq4_levels(const uint8_t * qs, const struct iq4_k * c, const struct kiln_simd128_k * k, v128_t * lo, v128_t * hi) {
    const v128_t b = RSWZ(ld(qs), c->perm);
    *lo = RSWZ(c->levels, wasm_v128_and(b, k->m4));
    *hi = RSWZ(c->levels, wasm_v128_and(wasm_u16x8_shr(b, 4), k->m4));
}

/* sum over the block of level * y, in the plain kernel's i32 lanes: the
 * i16 way (dotadd = false) or two i32 dot-adds (kernels_wasm_relaxed.c's
 * q4_0 section says when each is faster); exact either way */
RX_INLINE v128_t iq4_dot(v128_t lo, v128_t hi, const struct iq4_act * a, const struct kiln_simd128_k * k, bool dotadd) {
    const v128_t w0 = wasm_i8x16_sub(wasm_v128_xor(lo, a->m0), a->m0);
    const v128_t w1 = wasm_i8x16_sub(wasm_v128_xor(hi, a->m1), a->m1);
    if (dotadd) return RDOTADD(w1, a->a1, RDOTADD(w0, a->a0, wasm_i32x4_splat(0)));
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(RDOT16(w0, a->a0), k->ones16), wasm_i32x4_dot_i16x8(RDOT16(w1, a->a1), k->ones16));
}

/* exact: the scales through kiln_simd128_scales4_fast; otherwise the
 * loop's fast form, which returns false where a scale was inf/nan (the
 * caller then runs the exact form: same results for every finite input) */
RX_INLINE bool iq4_nlx4_vec_dot(int64_t n, float * s, const void * vx, const void * vy, bool dotadd, bool exact) {
    const block_iq4_nlx4 * x = vx;
    const block_q8_0 * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const struct iq4_k c = iq4_k_load();
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0, mx = wasm_i32x4_splat(0);
    const int nb = (int) (n / QK4_NL);
    for (int i = 0; i < nb; ++i) {
        const struct iq4_act a = iq4_act_load(y[i].qs, &c, &k);
        const v128_t d = kiln_simd128_x4_scales(x[i].d, &y[i].d, &k, &mx, exact);
#define ROW(r, acc) do { \
            v128_t lo, hi; \
            iq4_levels(x[i].qs + 16 * (r), &c, &k, &lo, &hi); \
            const v128_t p = iq4_dot(lo, hi, &a, &k, dotadd); \
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), LANE(d, r))); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
    return exact || kiln_simd128_finite(mx);
}

/* an x4 group against 2 activation rows (prompt processing): each row's
 * levels made and the x scales converted once per block for both; per row
 * and column the very lanes and float steps of the x4 kernel above
 * (bit-identical); exact as there */
RX_INLINE bool iq4_nlx4_2cols(int64_t n, float * s0, float * s1, const block_iq4_nlx4 * x, const block_q8_0 * ya, const block_q8_0 * yb,
                              bool dotadd, bool exact) {
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const struct iq4_k c = iq4_k_load();
    v128_t a0[4], a1[4], mx = wasm_i32x4_splat(0);
    for (int r = 0; r < 4; r++) a0[r] = a1[r] = wasm_f32x4_splat(0);
    const int nb = (int) (n / QK4_NL);
    for (int i = 0; i < nb; ++i) {
        const struct iq4_act aa = iq4_act_load(ya[i].qs, &c, &k), ab = iq4_act_load(yb[i].qs, &c, &k);
        v128_t da, db;
        kiln_simd128_x4_scales2(x[i].d, &ya[i].d, &yb[i].d, &k, &mx, exact, &da, &db);
#define ROW(r) do { \
            v128_t lo, hi; \
            iq4_levels(x[i].qs + 16 * (r), &c, &k, &lo, &hi); \
            const v128_t pa = iq4_dot(lo, hi, &aa, &k, dotadd); \
            const v128_t pb = iq4_dot(lo, hi, &ab, &k, dotadd); \
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

static void iq4_nlx4_2cols_i16(int64_t n, float * s0, float * s1, const block_iq4_nlx4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!iq4_nlx4_2cols(n, s0, s1, x, ya, yb, false, false)) iq4_nlx4_2cols(n, s0, s1, x, ya, yb, false, true);
}

static void iq4_nlx4_2cols_dotadd(int64_t n, float * s0, float * s1, const block_iq4_nlx4 * x, const block_q8_0 * ya, const block_q8_0 * yb) {
    if (!iq4_nlx4_2cols(n, s0, s1, x, ya, yb, true, false)) iq4_nlx4_2cols(n, s0, s1, x, ya, yb, true, true);
}

void iq4_nlx4_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    if (!iq4_nlx4_vec_dot(n, s, vx, vy, false, false)) iq4_nlx4_vec_dot(n, s, vx, vy, false, true);
}

void iq4_nlx4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(iq4_nlx4_2cols_i16, iq4_nlx4_q8_0_vec_dot__wasm_relaxed, n, ncols, s, ss, x, y, ys);
}

void iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * vx, const void * vy) {
    if (!iq4_nlx4_vec_dot(n, s, vx, vy, true, false)) iq4_nlx4_vec_dot(n, s, vx, vy, true, true);
}

void iq4_nlx4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys) {
    KILN_GEMM_X4_BY_PAIRS(iq4_nlx4_2cols_dotadd, iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd, n, ncols, s, ss, x, y, ys);
}

#endif /* __wasm_relaxed_simd__ */
