/*
 * simd128_common.h — helpers the wasm SIMD128 kernel files share.
 */
#ifndef KILN_SIMD128_COMMON_H
#define KILN_SIMD128_COMMON_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <wasm_simd128.h>

#include "kiln.h"

/* the wasm kernel files' shorthands */
static inline v128_t ld(const void * p) { return wasm_v128_load(p); }
#define RX_INLINE static inline __attribute__((always_inline))
#if defined(__wasm_relaxed_simd__)
#define RDOT16(a, b) __builtin_wasm_relaxed_dot_i8x16_i7x16_s_i16x8(a, b)
/* relaxed_swizzle: engine-independent for indices 0..15 */
#define RSWZ(t, i) __builtin_wasm_relaxed_swizzle_i8x16(t, i)
#endif

/* the 4 float lanes summed left to right (the order every kernel's results
 * depend on) */
static inline float kiln_simd128_hsum_f32(v128_t v) {
    return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) +
           wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}

/* 4 fp16 values (zero-extended u32 lanes) -> f32, exactly, without hardware
 * help and branch-free: normal values get their exponent rebiased in the
 * integer bits (+112 << 23); subnormals and zero are their 10-bit mantissa
 * converted as an integer times 2^-24; inf/nan get the all-ones exponent.
 * No float operation sees a subnormal operand: shifting a subnormal fp16
 * into a float and scaling it by 2^112, the shorter trick, costs a
 * microcode assist per value on x86 (measured: +15-25 % on a mat-vec whose
 * block scales are all subnormal, as the synthetic models' ffn_down). */
static inline v128_t kiln_simd128_f16x4_to_f32(v128_t h32) {
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x8000)), 16);
    const v128_t mag = wasm_v128_and(h32, wasm_i32x4_splat(0x7fff));
    const v128_t bits = wasm_i32x4_shl(mag, 13);
    v128_t f = wasm_i32x4_add(bits, wasm_i32x4_splat(112 << 23));
    const v128_t sub = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(mag), wasm_f32x4_splat(0x1p-24f));
    f = wasm_v128_bitselect(sub, f, wasm_i32x4_lt(mag, wasm_i32x4_splat(0x400)));
    f = wasm_v128_bitselect(wasm_v128_or(bits, wasm_i32x4_splat(0x7f800000)), f, wasm_i32x4_ge(mag, wasm_i32x4_splat(0x7c00)));
    return wasm_v128_or(f, sign);
}

/* kiln_simd128_f16x4_to_f32's results with fewer operations, for fp16 rows
 * (weights, activations): the magnitude's bits shifted into a float's place
 * and scaled by 2^112 in one multiply, which is exact for normal values and
 * subnormals alike (a subnormal fp16 becomes a subnormal float operand, and
 * x * 2^112 of it is the exact normal result); inf/nan (magnitude above
 * 0x7bff) get the all-ones exponent OR-ed in, keeping the payload. A
 * subnormal operand costs x86 a microcode assist, so this is for rows whose
 * values are rarely subnormal; block scales keep the branch-free form above.
 * 9 operations against 13: the conversion is most of wasm's F16 matmul time
 * (no hardware fp16). */
static inline v128_t kiln_simd128_f16x4_to_f32_rows(v128_t h32) {
    const v128_t mag = wasm_v128_and(h32, wasm_i32x4_splat(0x7fff));
    const v128_t sign = wasm_i32x4_shl(wasm_v128_xor(h32, mag), 16);
    const v128_t f = wasm_f32x4_mul(wasm_i32x4_shl(mag, 13), wasm_f32x4_splat(0x1p112f));
    const v128_t infnan = wasm_v128_and(wasm_i32x4_gt(mag, wasm_i32x4_splat(0x7bff)), wasm_i32x4_splat(0x7f800000));
    return wasm_v128_or(f, wasm_v128_or(sign, infnan));
}

static inline void kiln_simd128_load_f16x8_rows(const kiln_fp16_t * p, v128_t * lo, v128_t * hi) {
    const v128_t v = wasm_v128_load(p);
    *lo = kiln_simd128_f16x4_to_f32_rows(wasm_u32x4_extend_low_u16x8(v));
    *hi = kiln_simd128_f16x4_to_f32_rows(wasm_u32x4_extend_high_u16x8(v));
}

/* 8 fp16 -> 2 x 4 floats, exactly */
static inline void kiln_simd128_load_f16x8(const kiln_fp16_t * p, v128_t * lo, v128_t * hi) {
    const v128_t v = wasm_v128_load(p);
    *lo = kiln_simd128_f16x4_to_f32(wasm_u32x4_extend_low_u16x8(v));
    *hi = kiln_simd128_f16x4_to_f32(wasm_u32x4_extend_high_u16x8(v));
}

/* 4 floats -> 4 fp16 bit patterns (in u32 lanes), kiln_fp32_to_fp16's
 * results exactly, branch-free:
 *   normal: adding 0xfff plus the kept mantissa's lowest bit carries into
 *     bit 13 exactly when round-to-nearest-even rounds up;
 *   subnormal (|x| < 2^-14): x + 0.5f makes the FPU round (to nearest even,
 *     wasm's only mode) at the fp16 subnormal step, 2^-24; the bits above
 *     0.5's are the result (0 below 2^-25, as the scalar code);
 *   >= 65520 overflows to inf; inf stays inf; nan keeps its top payload bits
 *     and is made quiet. */
static inline v128_t kiln_simd128_f32x4_to_f16(v128_t x) {
    const v128_t sign = wasm_v128_and(wasm_u32x4_shr(x, 16), wasm_i32x4_splat(0x8000));
    const v128_t a = wasm_v128_and(x, wasm_i32x4_splat(0x7fffffff));
    const v128_t lsb = wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(1));
    const v128_t nrm = wasm_i32x4_sub(wasm_u32x4_shr(wasm_i32x4_add(wasm_i32x4_add(a, wasm_i32x4_splat(0xfff)), lsb), 13),
                                      wasm_i32x4_splat(112 << 10));
    const v128_t sub = wasm_i32x4_sub(wasm_f32x4_add(a, wasm_f32x4_splat(0.5f)), wasm_i32x4_splat(0x3f000000));
    const v128_t nan = wasm_v128_or(wasm_i32x4_splat(0x7e00), wasm_v128_and(wasm_u32x4_shr(a, 13), wasm_i32x4_splat(0x3ff)));
    v128_t h = wasm_v128_bitselect(sub, nrm, wasm_u32x4_lt(a, wasm_i32x4_splat(0x38800000)));
    h = wasm_v128_bitselect(wasm_i32x4_splat(0x7c00), h, wasm_u32x4_ge(a, wasm_i32x4_splat(0x477ff000)));
    h = wasm_v128_bitselect(nan, h, wasm_u32x4_gt(a, wasm_i32x4_splat(0x7f800000)));
    return wasm_v128_or(h, sign);
}

/* x rounded to the nearest fp16 value (ties to even), kept as a float:
 * f32(fp16(x)) bit for bit (kiln_simd128_f32x4_to_f16 and back; a nan may
 * come out with another payload), in fewer steps. Adding c = 2^(e + 13),
 * e the exponent of x, with x's sign, leaves a sum whose last mantissa bit
 * is worth 2^(e - 10), the fp16 step at e, so the float addition rounds x
 * there, to even, and subtracting c is exact. c is at least 0.5 (step
 * 2^-24: the fp16 subnormals) and at most 2^31; exponents that wrap (x
 * beyond 2^114, inf, nan) come out negative and take 0.5, which leaves x
 * as it is. A result of 65536 or more is fp16's overflow: inf. The sign
 * goes back on at the end, for zeros. */
static inline v128_t kiln_simd128_f32x4_round_f16(v128_t x) {
    const v128_t sign = wasm_v128_and(x, wasm_i32x4_splat((int32_t) 0x80000000u));
    v128_t c = wasm_i32x4_add(wasm_v128_and(x, wasm_i32x4_splat(0x7f800000)), wasm_i32x4_splat(13 << 23));
    c = wasm_i32x4_max(wasm_i32x4_min(c, wasm_i32x4_splat(0x4f000000)), wasm_i32x4_splat(0x3f000000));
    c = wasm_v128_or(c, sign);
    v128_t r = wasm_f32x4_sub(wasm_f32x4_add(x, c), c);
    r = wasm_v128_bitselect(wasm_i32x4_splat(0x7f800000), r, wasm_f32x4_ge(wasm_f32x4_abs(r), wasm_f32x4_splat(65536.0f)));
    return wasm_v128_or(r, sign);
}

/* 8 floats -> 8 fp16 stored */
static inline void kiln_simd128_store_f16x8(kiln_fp16_t * p, v128_t lo, v128_t hi) {
    wasm_v128_store(p, wasm_u16x8_narrow_i32x4(kiln_simd128_f32x4_to_f16(lo), kiln_simd128_f32x4_to_f16(hi)));
}

/* The 4 block scales of an x4 group times the activation block's scale:
 * fp16(dx[r]) * fp16(*dy) in lane r, both converted exactly, one rounding:
 * the same floats as KQ_H2F(dx[r]) * KQ_H2F(*dy). In vector code because
 * the scalar conversion (no F16C in wasm) is a branchy ~30 instructions per
 * block; and with the zero-extends written as an unpack and a mask, which
 * engines lower to one instruction each (an extend of a 64-bit load became a
 * byte shuffle whose mask V8 rebuilt every iteration). */
static inline v128_t kiln_simd128_scales4(const void * dx, const void * dy) {
    const v128_t zero = wasm_i32x4_splat(0);
    const v128_t hx = wasm_i16x8_shuffle(wasm_v128_load64_zero(dx), zero, 0, 8, 1, 9, 2, 10, 3, 11);
    const v128_t hy = wasm_v128_and(wasm_v128_load16_splat(dy), wasm_i32x4_splat(0xffff));
    return wasm_f32x4_mul(kiln_simd128_f16x4_to_f32(hx), kiln_simd128_f16x4_to_f32(hy));
}

/* fmaf(a, b, c) (kiln_simd128_fma_f32x4: 4 float lanes, exactly fmaf's
 * results) for 2 lanes of doubles made from floats, rounded once to
 * float: a*b is exact in double; the sum, rounded to odd (a TwoSum error
 * term decides whether an even last bit must step toward the exact value),
 * then rounds to float as the exact sum would (53 >= 24 + 2 bits). Wasm has
 * no FMA without relaxed SIMD, and relaxed_madd may not fuse. */
static inline v128_t kiln_simd128_fma_f64x2_to_f32(v128_t a, v128_t b, v128_t c) {
    const v128_t p = wasm_f64x2_mul(a, b);
    const v128_t s = wasm_f64x2_add(p, c);
    const v128_t bb = wasm_f64x2_sub(s, p);
    const v128_t err = wasm_f64x2_add(wasm_f64x2_sub(p, wasm_f64x2_sub(s, bb)), wasm_f64x2_sub(c, bb));
    const v128_t zero = wasm_f64x2_splat(0.0);
    /* err is nan where an operand is inf or nan: then nothing moves */
    const v128_t inexact = wasm_v128_or(wasm_f64x2_lt(err, zero), wasm_f64x2_gt(err, zero));
    const v128_t inexact_even = wasm_v128_and(inexact,
                                              wasm_i64x2_eq(wasm_v128_and(s, wasm_i64x2_splat(1)), wasm_i64x2_splat(0)));
    /* toward err: +1 in the bits when err and s have the same sign, else -1 */
    const v128_t same = wasm_i64x2_eq(wasm_f64x2_gt(err, zero), wasm_f64x2_gt(s, zero));
    const v128_t step = wasm_v128_bitselect(wasm_i64x2_splat(1), wasm_i64x2_splat(-1), same);
    return wasm_f32x4_demote_f64x2_zero(wasm_i64x2_add(s, wasm_v128_and(step, inexact_even)));
}

static inline v128_t kiln_simd128_fma_f32x4(v128_t a, v128_t b, v128_t c) {
    const v128_t lo = kiln_simd128_fma_f64x2_to_f32(wasm_f64x2_promote_low_f32x4(a), wasm_f64x2_promote_low_f32x4(b), wasm_f64x2_promote_low_f32x4(c));
    const v128_t a2 = wasm_i64x2_shuffle(a, a, 1, 0), b2 = wasm_i64x2_shuffle(b, b, 1, 0), c2 = wasm_i64x2_shuffle(c, c, 1, 0);
    const v128_t hi = kiln_simd128_fma_f64x2_to_f32(wasm_f64x2_promote_low_f32x4(a2), wasm_f64x2_promote_low_f32x4(b2), wasm_f64x2_promote_low_f32x4(c2));
    return wasm_i64x2_shuffle(lo, hi, 0, 2);
}

/* y += x * v over fp16 rows, 8 values per step through FMA_(a, b, c) =
 * a * b + c rounded once to float (SIMD128 emulates it, relaxed SIMD has
 * it where the engine fuses), then RNE to fp16; the tail goes to the
 * scalar kernel, whose fmaf gives the same bits */
#define KILN_SIMD128_F16_MAD_BODY(FMA_) do { \
    const v128_t vv_ = wasm_f32x4_splat(v); \
    int64_t i_ = 0; \
    for (; i_ + 8 <= n; i_ += 8) { \
        v128_t xl_, xh_, yl_, yh_; \
        kiln_simd128_load_f16x8(x + i_, &xl_, &xh_); \
        kiln_simd128_load_f16x8(y + i_, &yl_, &yh_); \
        kiln_simd128_store_f16x8(y + i_, FMA_(xl_, vv_, yl_), FMA_(xh_, vv_, yh_)); \
    } \
    f16_mad__scalar(n - i_, y + i_, x + i_, v); \
} while (0)

/* f16_mad on fp16 values held as floats (kernels.h, f16val_mad): y = the
 * float of fp16(FMA_(x, v, y)), 4 values per step; the tail in scalar
 * code, fmaf then the exact round trip through fp16 */
#define KILN_SIMD128_F16VAL_MAD_BODY(FMA_) do { \
    const v128_t vv_ = wasm_f32x4_splat(v); \
    int64_t i_ = 0; \
    for (; i_ + 4 <= n; i_ += 4) { \
        wasm_v128_store(y + i_, kiln_simd128_f32x4_round_f16(FMA_(wasm_v128_load(x + i_), vv_, wasm_v128_load(y + i_)))); \
    } \
    for (; i_ < n; i_++) y[i_] = kiln_fp16_to_fp32(kiln_fp32_to_fp16(fmaf(x[i_], v, y[i_]))); \
} while (0)

/* an integer vector's lanes summed (exact) */
static inline int32_t kiln_simd128_i32_hsum(v128_t p) {
    return wasm_i32x4_extract_lane(p, 0) + wasm_i32x4_extract_lane(p, 1) + wasm_i32x4_extract_lane(p, 2) + wasm_i32x4_extract_lane(p, 3);
}

/* 4 rows' block sums in one vector: lane r = the sum of p_r's lanes (exact);
 * then one convert, multiply and add serve the 4 rows of an x4 group */
static inline v128_t kiln_simd128_i32_hsum4(v128_t p0, v128_t p1, v128_t p2, v128_t p3) {
    const v128_t q01 = wasm_i32x4_add(wasm_i32x4_shuffle(p0, p1, 0, 1, 4, 5), wasm_i32x4_shuffle(p0, p1, 2, 3, 6, 7));
    const v128_t q23 = wasm_i32x4_add(wasm_i32x4_shuffle(p2, p3, 0, 1, 4, 5), wasm_i32x4_shuffle(p2, p3, 2, 3, 6, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(q01, q23, 0, 2, 4, 6), wasm_i32x4_shuffle(q01, q23, 1, 3, 5, 7));
}

/* fp16 -> f32 for normal values and zero only: the magnitude shifted into
 * a float and scaled by 2^112 (exact); inf/nan would come out finite and a
 * subnormal would cost a microcode assist, so callers route those to
 * kiln_simd128_f16x4_to_f32 first */
static inline v128_t kiln_simd128_f16x4_normal_to_f32(v128_t h32) {
    const v128_t sign = wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x8000)), 16);
    const v128_t mag = wasm_i32x4_shl(wasm_v128_and(h32, wasm_i32x4_splat(0x7fff)), 13);
    return wasm_v128_or(wasm_f32x4_mul(mag, wasm_i32x4_splat(0x77800000)), sign); /* 2^112 */
}

__attribute__((noinline)) static v128_t kiln_simd128_scales4_slow(const kiln_fp16_t * dx, const kiln_fp16_t * dy) {
    return kiln_simd128_scales4(dx, dy);
}

/* kiln_simd128_scales4's floats with less work: the short conversion,
 * unless one of the 4 x scales (read as one u64) or the y scale is inf,
 * nan or subnormal. SWAR on the 15 magnitude bits m of each 16-bit lane:
 * m >= 0x7c00 (inf/nan) carries into bit 15 when 0x0400 is added; a
 * subnormal has m >= 1 (bit 15 of (m | 0x8000) - 1) but not m >= 0x400
 * (bit 15 of m + 0x7c00); zero lanes pass, so the y scale alone is one
 * more call. Scalar work beside the vector pipes; with it the
 * q8_0 x4 kernels gain 7-8 % in Chromium (bench/peers). Subnormal x
 * scales are rare in real models, and repack raises a tensor's by a power
 * of two where it can (repack.h), so the exact path is mostly for
 * activations' scales and the plain kernels. */
static inline bool kiln_simd128_f16_lanes_special(uint64_t h4) {
    const uint64_t H = 0x8000800080008000ull, m = h4 & 0x7fff7fff7fff7fffull;
    const uint64_t infnan = (m + 0x0400040004000400ull) & H;
    const uint64_t nonzero = ((m | H) - 0x0001000100010001ull) & H;
    const uint64_t normal = (m + 0x7c007c007c007c00ull) & H;
    return (infnan | (nonzero & ~normal)) != 0;
}

static inline v128_t kiln_simd128_scales4_fast(const kiln_fp16_t * dx, kiln_fp16_t dy) {
    uint64_t dx4;
    memcpy(&dx4, dx, sizeof(dx4));
    if (__builtin_expect(kiln_simd128_f16_lanes_special(dx4) || kiln_simd128_f16_lanes_special(dy), 0)) return kiln_simd128_scales4_slow(dx, &dy);
    const v128_t hx = wasm_i16x8_shuffle(wasm_i64x2_splat((int64_t) dx4), wasm_i32x4_splat(0), 0, 8, 1, 9, 2, 10, 3, 11);
    return wasm_f32x4_mul(kiln_simd128_f16x4_normal_to_f32(hx), kiln_simd128_f16x4_normal_to_f32(wasm_i32x4_splat(dy)));
}

/* kiln_simd128_scales4_fast against two activation blocks (a batched
 * kernel's two columns): the same two products, the x scales checked and
 * converted once */
static inline void kiln_simd128_scales4x2_fast(const kiln_fp16_t * dx, kiln_fp16_t dya, kiln_fp16_t dyb, v128_t * da, v128_t * db) {
    uint64_t dx4;
    memcpy(&dx4, dx, sizeof(dx4));
    if (__builtin_expect(kiln_simd128_f16_lanes_special(dx4) || kiln_simd128_f16_lanes_special(dya | (uint64_t) dyb << 16), 0)) {
        *da = kiln_simd128_scales4_slow(dx, &dya);
        *db = kiln_simd128_scales4_slow(dx, &dyb);
        return;
    }
    const v128_t xf = kiln_simd128_f16x4_normal_to_f32(wasm_i16x8_shuffle(wasm_i64x2_splat((int64_t) dx4), wasm_i32x4_splat(0), 0, 8, 1, 9, 2, 10, 3, 11));
    *da = wasm_f32x4_mul(xf, kiln_simd128_f16x4_normal_to_f32(wasm_i32x4_splat(dya)));
    *db = wasm_f32x4_mul(xf, kiln_simd128_f16x4_normal_to_f32(wasm_i32x4_splat(dyb)));
}

/* Constants of the relaxed kernels' loops (kernels_wasm_relaxed.c,
 * repack_q4_K_wasm_relaxed.c), read through volatile once per call. V8
 * (x64) builds a v128.const anew at each use inside a loop, 2-3
 * instructions each, and LLVM folds the shifts and masks it is given into
 * such constants: in the relaxed q4_0 x4 loop they were about half of its
 * ~140 instructions per block. Values the engine cannot see through stay
 * in a register (or one reload) for the whole loop. Not for loops short of
 * registers: SIMD128's q4_0 x4 kernel (4 live activation vectors) measured
 * 9.1 -> 6.3 GB/s with them in Node 20 (spills) and keeps its constants.
 * m4, eight, m63, m30: 0x0f, 8, 0x3f, 0x30 in every byte; ones16: 1 in
 * every i16 lane; k7fff, p112: 0x7fff and 2^112 (f32) in every u32 lane;
 * sel: lanes -1, 0, -1, -1; zero: for y < 0 as a compare (pcmpgtb), which
 * against a literal 0 LLVM turns into an arithmetic shift by 7, emulated
 * by V8 on x64 in 5 instructions. */
struct kiln_simd128_k { v128_t m4, eight, m63, m30, ones16, k7fff, p112, sel, zero; };

static inline __attribute__((always_inline)) struct kiln_simd128_k kiln_simd128_k_load(void) {
    static volatile const uint32_t w[8] = { 0x0f0f0f0fu, 0x08080808u, 0x3f3f3f3fu, 0x30303030u, 0x00010001u, 0x7fffu, 0x77800000u, 0u };
    const struct kiln_simd128_k k = { wasm_i32x4_splat(w[0]), wasm_i32x4_splat(w[1]), wasm_i32x4_splat(w[2]), wasm_i32x4_splat(w[3]),
                                      wasm_i32x4_splat(w[4]), wasm_i32x4_splat(w[5]), wasm_i32x4_splat(w[6]),
                                      wasm_i32x4_make(~w[7], w[7], ~w[7], ~w[7]), wasm_i32x4_splat(w[7]) };
    return k;
}

/* fp16 (zero-extended u32 lanes) -> f32, exact for every finite value: the
 * magnitude's bits in a float's place times 2^112 (a subnormal fp16 is a
 * subnormal float operand there, still exact); *mx keeps the largest
 * magnitude seen, so the caller can tell afterwards (kiln_simd128_finite)
 * whether an inf/nan (>= 0x7c00) went through and redo that work with the
 * exact conversion */
static inline __attribute__((always_inline)) v128_t kiln_simd128_h2f_finite(v128_t h32, const struct kiln_simd128_k * k, v128_t * mx) {
    const v128_t mag = wasm_v128_and(h32, k->k7fff);
    *mx = wasm_i32x4_max(*mx, mag);
    return wasm_v128_or(wasm_f32x4_mul(wasm_i32x4_shl(mag, 13), k->p112), wasm_i32x4_shl(wasm_v128_xor(h32, mag), 16));
}

/* whether the magnitudes kiln_simd128_h2f_finite saw were all finite */
static inline bool kiln_simd128_finite(v128_t mx) { return wasm_i32x4_all_true(wasm_i32x4_lt(mx, wasm_i32x4_splat(0x7c00))); }

/* lane r of v in all 4 lanes */
#define KILN_SIMD128_LANE(v, r) wasm_i32x4_shuffle(v, v, r, r, r, r)

/* the fp16 at p, zero-extended into all 4 lanes */
static inline __attribute__((always_inline)) v128_t kiln_simd128_h_splat(const kiln_fp16_t * p) {
    const v128_t h = wasm_u32x4_load16x4(p); /* reads 8 bytes: p is a block's scale, its quants follow */
    return wasm_i32x4_shuffle(h, h, 0, 0, 0, 0);
}

/* d_x * d_y of an x4 block's 4 rows (the relaxed x4 kernels):
 * kiln_simd128_scales4_fast (exact, branching per block) or, in the loops'
 * fast form, kiln_simd128_h2f_finite's (its products equal for every
 * finite scale; *mx tells the caller afterwards whether to redo the call
 * exactly) */
static inline __attribute__((always_inline)) v128_t kiln_simd128_x4_scales(const kiln_fp16_t * dx, const kiln_fp16_t * dy,
                                                                           const struct kiln_simd128_k * k, v128_t * mx, bool exact) {
    if (exact) return kiln_simd128_scales4_fast(dx, *dy);
    return wasm_f32x4_mul(kiln_simd128_h2f_finite(wasm_u32x4_load16x4(dx), k, mx), kiln_simd128_h2f_finite(kiln_simd128_h_splat(dy), k, mx));
}

/* the same against two activation blocks (a batched kernel's two columns),
 * the x scales converted once */
static inline __attribute__((always_inline)) void kiln_simd128_x4_scales2(const kiln_fp16_t * dx, const kiln_fp16_t * dya, const kiln_fp16_t * dyb,
                                                                          const struct kiln_simd128_k * k, v128_t * mx, bool exact, v128_t * da,
                                                                          v128_t * db) {
    if (exact) {
        kiln_simd128_scales4x2_fast(dx, *dya, *dyb, da, db);
        return;
    }
    const v128_t xf = kiln_simd128_h2f_finite(wasm_u32x4_load16x4(dx), k, mx);
    *da = wasm_f32x4_mul(xf, kiln_simd128_h2f_finite(kiln_simd128_h_splat(dya), k, mx));
    *db = wasm_f32x4_mul(xf, kiln_simd128_h2f_finite(kiln_simd128_h_splat(dyb), k, mx));
}

/* The q4_0 x q8_0 block product in 16-bit lanes, shared by the plain and
 * the x4 kernel so both make the same i32 lanes (bit-identical floats).
 *
 * Read as i16x8, the 16 quant bytes hold in lane i: x[2i] (bits 0-3),
 * x[2i+16] (4-7), x[2i+1] (8-11), x[2i+17] (12-15); so 3 shifts and 3 ands
 * give 4 vectors of 16-bit nibbles, with no byte widening. The q8_0 side
 * splits the same way into its even and odd bytes (sign-extended), and
 * i32x4.dot_i16x8_s pairs them: i32 lane k sums elements 4k..4k+3 and
 * 16+4k..16+4k+3. */
struct kiln_simd128_q8_eo { v128_t e0, o0, e1, o1; };

static inline struct kiln_simd128_q8_eo kiln_simd128_q8_split(const int8_t * qs) {
    const v128_t y0 = wasm_v128_load(qs), y1 = wasm_v128_load(qs + 16);
    struct kiln_simd128_q8_eo r;
    r.e0 = wasm_i16x8_shr(wasm_i16x8_shl(y0, 8), 8);
    r.o0 = wasm_i16x8_shr(y0, 8);
    r.e1 = wasm_i16x8_shr(wasm_i16x8_shl(y1, 8), 8);
    r.o1 = wasm_i16x8_shr(y1, 8);
    return r;
}

/* sum over the block of nibble * y (nibbles 0..15, the -8 not applied) */
static inline v128_t kiln_simd128_q4_dot(v128_t b, const struct kiln_simd128_q8_eo * y) {
    const v128_t m4 = wasm_i16x8_splat(0x0f);
    v128_t p = wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_v128_and(b, m4), y->e0),
                              wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(b, 8), m4), y->o0));
    p = wasm_i32x4_add(p, wasm_i32x4_dot_i16x8(wasm_v128_and(wasm_u16x8_shr(b, 4), m4), y->e1));
    return wasm_i32x4_add(p, wasm_i32x4_dot_i16x8(wasm_u16x8_shr(b, 12), y->o1));
}

/* 8 * (the y values each i32 lane of kiln_simd128_q4_dot covers): the -8 offset */
static inline v128_t kiln_simd128_q4_corr(const struct kiln_simd128_q8_eo * y) {
    const v128_t s = wasm_i16x8_add(wasm_i16x8_add(y->e0, y->o0), wasm_i16x8_add(y->e1, y->o1));
    return wasm_i32x4_dot_i16x8(s, wasm_i16x8_splat(8));
}

/* The body of the 2x16 packed GEMM microkernel (kernels.h,
 * kiln_gemm_packed_t), shared by the SIMD128 kernel and the relaxed one,
 * which differ only in MADD_(a, b, c) = a * b + c: separate multiply and
 * add, or f32x4.relaxed_madd. */
#define KILN_SIMD128_GEMM_2X16_BODY(MADD_) do { \
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00, c12 = c00, c13 = c00; \
    const float * a0 = a, * a1 = a + lda; \
    for (int p = (int) k; p > 0; p--) { \
        const v128_t y0 = wasm_v128_load(bp), y1 = wasm_v128_load(bp + 4); \
        const v128_t y2 = wasm_v128_load(bp + 8), y3 = wasm_v128_load(bp + 12); \
        const v128_t x0 = wasm_v128_load32_splat(a0), x1 = wasm_v128_load32_splat(a1); \
        c00 = MADD_(x0, y0, c00); c01 = MADD_(x0, y1, c01); c02 = MADD_(x0, y2, c02); c03 = MADD_(x0, y3, c03); \
        c10 = MADD_(x1, y0, c10); c11 = MADD_(x1, y1, c11); c12 = MADD_(x1, y2, c12); c13 = MADD_(x1, y3, c13); \
        bp += 16; a0++; a1++; \
    } \
    const v128_t r_[2][4] = { { c00, c01, c02, c03 }, { c10, c11, c12, c13 } }; \
    for (int j = 0; j < 2; j++) { \
        float * cj = c + j * ldc; \
        for (int v = 0; v < 4; v++) { \
            wasm_v128_store(cj + 4 * v, accumulate ? wasm_f32x4_add(wasm_v128_load(cj + 4 * v), r_[j][v]) : r_[j][v]); \
        } \
    } \
} while (0)

/* The body of the 3x3 register tile (kernels.h, kiln_gemm_tile_t): 3 src0
 * rows x 3 src1 rows, 4 lanes of k at a time, then each lane sum reduced
 * and the k % 4 tail added in scalar; MADD_ as for the 2x16 body. */
#define KILN_SIMD128_GEMM_3X3_BODY(MADD_) do { \
    v128_t c00 = wasm_f32x4_splat(0), c01 = c00, c02 = c00, c10 = c00, c11 = c00, c12 = c00, c20 = c00, c21 = c00, c22 = c00; \
    const float * a0 = a, * a1 = a + lda, * a2 = a + 2 * lda; \
    const float * b0 = b, * b1 = b + ldb, * b2 = b + 2 * ldb; \
    int64_t p = 0; \
    for (; p + 4 <= k; p += 4) { \
        const v128_t x0 = wasm_v128_load(a0 + p), x1 = wasm_v128_load(a1 + p), x2 = wasm_v128_load(a2 + p); \
        v128_t y = wasm_v128_load(b0 + p); \
        c00 = MADD_(x0, y, c00); c01 = MADD_(x1, y, c01); c02 = MADD_(x2, y, c02); \
        y = wasm_v128_load(b1 + p); \
        c10 = MADD_(x0, y, c10); c11 = MADD_(x1, y, c11); c12 = MADD_(x2, y, c12); \
        y = wasm_v128_load(b2 + p); \
        c20 = MADD_(x0, y, c20); c21 = MADD_(x1, y, c21); c22 = MADD_(x2, y, c22); \
    } \
    const float r_[3][3] = { \
        { kiln_simd128_hsum_f32(c00), kiln_simd128_hsum_f32(c01), kiln_simd128_hsum_f32(c02) }, \
        { kiln_simd128_hsum_f32(c10), kiln_simd128_hsum_f32(c11), kiln_simd128_hsum_f32(c12) }, \
        { kiln_simd128_hsum_f32(c20), kiln_simd128_hsum_f32(c21), kiln_simd128_hsum_f32(c22) }, \
    }; \
    for (int j = 0; j < 3; j++) { \
        for (int i = 0; i < 3; i++) { \
            float s = r_[j][i]; \
            for (int64_t q = p; q < k; q++) s += a[i * lda + q] * b[j * ldb + q]; \
            c[j * ldc + i] = s; \
        } \
    } \
} while (0)

/* ---- llama.cpp's x86 orders (kernels.h: f32_gemm_tile8, f32_dot8,
 * f32_dot_ggml). An AVX2 accumulator of 8 lanes is held as two f32x4, lo
 * (lanes 0-3) and hi (4-7); MADD_(a, b, c) = a * b + c, fused where the ISA
 * can (relaxed SIMD), so with it the sums are llama.cpp's bit for bit. */

/* llamafile's hsum of one 8-lane accumulator: t = lo + hi, then
 * (t0 + t2) + (t1 + t3) */
static inline float kiln_simd128_hsum8(v128_t lo, v128_t hi) {
    const v128_t t = wasm_f32x4_add(lo, hi);
    const float a = wasm_f32x4_extract_lane(t, 0) + wasm_f32x4_extract_lane(t, 2);
    const float b = wasm_f32x4_extract_lane(t, 1) + wasm_f32x4_extract_lane(t, 3);
    return a + b;
}

/* ggml's AVX2 reduction of 4 accumulators (GGML_F32x8_REDUCE): s = (a0 +
 * a2) + (a1 + a3) lane by lane, t = s.lo + s.hi, then two horizontal adds:
 * (t0 + t1) + (t2 + t3) */
static inline float kiln_simd128_reduce4x8(v128_t a0l, v128_t a0h, v128_t a1l, v128_t a1h,
                                           v128_t a2l, v128_t a2h, v128_t a3l, v128_t a3h) {
    const v128_t sl = wasm_f32x4_add(wasm_f32x4_add(a0l, a2l), wasm_f32x4_add(a1l, a3l));
    const v128_t sh = wasm_f32x4_add(wasm_f32x4_add(a0h, a2h), wasm_f32x4_add(a1h, a3h));
    const v128_t t = wasm_f32x4_add(sl, sh);
    const float a = wasm_f32x4_extract_lane(t, 0) + wasm_f32x4_extract_lane(t, 1);
    const float b = wasm_f32x4_extract_lane(t, 2) + wasm_f32x4_extract_lane(t, 3);
    return a + b;
}

/* one product in tinyBLAS's order (n % 8 == 0) */
#define KILN_SIMD128_DOT8_BODY(MADD_) do { \
    v128_t l_ = wasm_f32x4_splat(0), h_ = l_; \
    for (int64_t i_ = 0; i_ + 8 <= n; i_ += 8) { \
        l_ = MADD_(wasm_v128_load(x + i_), wasm_v128_load(y + i_), l_); \
        h_ = MADD_(wasm_v128_load(x + i_ + 4), wasm_v128_load(y + i_ + 4), h_); \
    } \
    return kiln_simd128_hsum8(l_, h_); \
} while (0)

/* 2 src0 rows x 2 src1 rows in tinyBLAS's order (k % 8 == 0): 8
 * accumulators and 4 loads per half step, under the 16 registers engines
 * map v128 onto */
#define KILN_SIMD128_GEMM8_2X2_BODY(MADD_) do { \
    v128_t c00l = wasm_f32x4_splat(0), c00h = c00l, c01l = c00l, c01h = c00l, c10l = c00l, c10h = c00l, c11l = c00l, c11h = c00l; \
    const float * a0 = a, * a1 = a + lda, * b0 = b, * b1 = b + ldb; \
    for (int64_t p = 0; p + 8 <= k; p += 8) { \
        v128_t x0 = wasm_v128_load(a0 + p), x1 = wasm_v128_load(a1 + p); \
        v128_t y = wasm_v128_load(b0 + p); \
        c00l = MADD_(x0, y, c00l); c01l = MADD_(x1, y, c01l); \
        y = wasm_v128_load(b1 + p); \
        c10l = MADD_(x0, y, c10l); c11l = MADD_(x1, y, c11l); \
        x0 = wasm_v128_load(a0 + p + 4); x1 = wasm_v128_load(a1 + p + 4); \
        y = wasm_v128_load(b0 + p + 4); \
        c00h = MADD_(x0, y, c00h); c01h = MADD_(x1, y, c01h); \
        y = wasm_v128_load(b1 + p + 4); \
        c10h = MADD_(x0, y, c10h); c11h = MADD_(x1, y, c11h); \
    } \
    c[0] = kiln_simd128_hsum8(c00l, c00h); c[1] = kiln_simd128_hsum8(c01l, c01h); \
    c[ldc] = kiln_simd128_hsum8(c10l, c10h); c[ldc + 1] = kiln_simd128_hsum8(c11l, c11h); \
} while (0)

/* ggml_vec_dot_f32 as llama.cpp's AVX2 build computes it: 4 accumulators
 * of 8 lanes over steps of 32, reduced; then the rest as its compiler
 * vectorized that loop: groups of 4 products rounded, added one by one,
 * and the last n % 4 fused (fmaf: exact in software where wasm has no
 * FMA; at most 3 per product) */
#define KILN_SIMD128_DOT_GGML_BODY(MADD_) do { \
    v128_t a0l = wasm_f32x4_splat(0), a0h = a0l, a1l = a0l, a1h = a0l, a2l = a0l, a2h = a0l, a3l = a0l, a3h = a0l; \
    int64_t i_ = 0; \
    for (; i_ + 32 <= n; i_ += 32) { \
        a0l = MADD_(wasm_v128_load(x + i_),      wasm_v128_load(y + i_),      a0l); \
        a0h = MADD_(wasm_v128_load(x + i_ + 4),  wasm_v128_load(y + i_ + 4),  a0h); \
        a1l = MADD_(wasm_v128_load(x + i_ + 8),  wasm_v128_load(y + i_ + 8),  a1l); \
        a1h = MADD_(wasm_v128_load(x + i_ + 12), wasm_v128_load(y + i_ + 12), a1h); \
        a2l = MADD_(wasm_v128_load(x + i_ + 16), wasm_v128_load(y + i_ + 16), a2l); \
        a2h = MADD_(wasm_v128_load(x + i_ + 20), wasm_v128_load(y + i_ + 20), a2h); \
        a3l = MADD_(wasm_v128_load(x + i_ + 24), wasm_v128_load(y + i_ + 24), a3l); \
        a3h = MADD_(wasm_v128_load(x + i_ + 28), wasm_v128_load(y + i_ + 28), a3h); \
    } \
    float s_ = kiln_simd128_reduce4x8(a0l, a0h, a1l, a1h, a2l, a2h, a3l, a3h); \
    for (; i_ + 4 <= n; i_ += 4) { \
        const v128_t p_ = wasm_f32x4_mul(wasm_v128_load(x + i_), wasm_v128_load(y + i_)); \
        s_ += wasm_f32x4_extract_lane(p_, 0); s_ += wasm_f32x4_extract_lane(p_, 1); \
        s_ += wasm_f32x4_extract_lane(p_, 2); s_ += wasm_f32x4_extract_lane(p_, 3); \
    } \
    for (; i_ < n; i_++) s_ = fmaf(x[i_], y[i_], s_); \
    return s_; \
} while (0)

/* NAME_(x): exp(x) for 4 lanes with the arithmetic of llama.cpp's AVX2
 * build (ggml's vector expf, exp8 in vec_avx2.c), its fused multiply-adds
 * through FMA_ (an exact fmaf), so silu gets llama.cpp's floats: a SwiGLU
 * FFN's output moved by an ulp with the other exp4, enough to move a
 * decoder's F16 KV cache and fp16 V accumulator by a whole fp16 step now
 * and then (stories260K's embedding). Several times exp4's work; the
 * decoders' silu only. */
#define KILN_SIMD128_DEFINE_EXP4_GGML(NAME_, FMA_) \
static inline v128_t NAME_(v128_t x) { \
    const v128_t shift = wasm_f32x4_splat(0x1.8p23f); \
    const v128_t z = FMA_(x, wasm_f32x4_splat(0x1.715476p+0f), shift); \
    const v128_t nn = wasm_f32x4_sub(z, shift); \
    const v128_t b = FMA_(wasm_f32x4_neg(nn), wasm_f32x4_splat(0x1.7f7d1cp-20f), \
                               FMA_(wasm_f32x4_neg(nn), wasm_f32x4_splat(0x1.62e4p-1f), x)); \
    const v128_t e = wasm_i32x4_shl(z, 23); \
    const v128_t k = wasm_i32x4_add(e, wasm_i32x4_splat(0x3f800000)); \
    const v128_t an = wasm_f32x4_abs(nn); \
    const v128_t big = wasm_f32x4_gt(an, wasm_f32x4_splat(126.0f)); \
    const v128_t u = wasm_f32x4_mul(b, b); \
    const v128_t hi = FMA_(wasm_f32x4_splat(0x1.0e4020p-7f), b, wasm_f32x4_splat(0x1.573e2ep-5f)); \
    const v128_t lo = FMA_(wasm_f32x4_splat(0x1.555e66p-3f), b, wasm_f32x4_splat(0x1.fffdb6p-2f)); \
    const v128_t j = FMA_(FMA_(hi, u, lo), u, wasm_f32x4_mul(wasm_f32x4_splat(0x1.ffffecp-1f), b)); \
    const v128_t normal = FMA_(j, k, k); \
    if (!wasm_v128_any_true(big)) return normal; \
    /* 2^n = s1 * s2 with s1 = 2^127 or 2^-125 (by the sign of n) */ \
    const v128_t g = wasm_v128_and(wasm_f32x4_le(nn, wasm_f32x4_splat(0.0f)), wasm_i32x4_splat((int32_t) 0x82000000u)); \
    const v128_t s1 = wasm_i32x4_add(g, wasm_i32x4_splat(0x7f000000)); \
    const v128_t s2 = wasm_i32x4_sub(e, g); \
    const v128_t huge = wasm_f32x4_gt(an, wasm_f32x4_splat(192.0f)); \
    const v128_t scaled = wasm_f32x4_mul(FMA_(s2, j, s2), s1); \
    return wasm_v128_bitselect(wasm_f32x4_mul(s1, s1), wasm_v128_bitselect(scaled, normal, big), huge); \
}

#endif
