/*
 * repack_wasm_simd128.c — wasm SIMD128 x4 mat-vec kernels (see
 * src/cpu/repack.h). Per row, the float arithmetic of
 * q4_0/q8_0_q8_0_vec_dot__wasm_simd128 exactly; what is shared across the
 * 4 rows is the activation side: y's bytes widen to i16 once per block
 * (the plain kernel widens them once per row), and for q4_0 the -8 offset
 * comes off as one per-block correction (8 * pair sums of y), so every i32
 * lane equals the plain kernel's lane.
 */
#include <wasm_simd128.h>

#include "../../repack.h"
#include "quants_impl.h"

static inline v128_t ld(const void * p) { return wasm_v128_load(p); }

static inline float hsum_f32(v128_t v) {
    return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) +
           wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3);
}

static inline v128_t fma4(v128_t acc, v128_t isum, float d) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), wasm_f32x4_splat(d)));
}

/* sum over the 4 i16 quarters: a (16 bytes of x, 0..255 or signed) against y widened */
static inline v128_t dot_u8w(v128_t a, v128_t ylo, v128_t yhi) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_u16x8_extend_low_u8x16(a), ylo),
                          wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(a), yhi));
}
static inline v128_t dot_i8w(v128_t a, v128_t ylo, v128_t yhi) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), ylo),
                          wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), yhi));
}

void q4_0x4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0x4 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const v128_t m4 = wasm_i8x16_splat(0x0f), k8 = wasm_i16x8_splat(8);
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t y0l = wasm_i16x8_extend_low_i8x16(y0), y0h = wasm_i16x8_extend_high_i8x16(y0);
        const v128_t y1l = wasm_i16x8_extend_low_i8x16(y1), y1h = wasm_i16x8_extend_high_i8x16(y1);
        /* lane k: 8 * (the y values lane k of the plain kernel pairs with) */
        const v128_t corr = wasm_i32x4_add(
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(k8, y0l), wasm_i32x4_dot_i16x8(k8, y0h)),
            wasm_i32x4_add(wasm_i32x4_dot_i16x8(k8, y1l), wasm_i32x4_dot_i16x8(k8, y1h)));
        const float dy = KQ_H2F(y[i].d);
#define ROW(r, acc) do { \
            const v128_t b = ld(x[i].qs + 16 * (r)); \
            const v128_t p = wasm_i32x4_add(dot_u8w(wasm_v128_and(b, m4), y0l, y0h), dot_u8w(wasm_u8x16_shr(b, 4), y1l, y1h)); \
            acc = fma4(acc, wasm_i32x4_sub(p, corr), KQ_H2F(x[i].d[r]) * dy); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
}

void q8_0x4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    for (int64_t i = 0; i < n / QK8_0; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t y0l = wasm_i16x8_extend_low_i8x16(y0), y0h = wasm_i16x8_extend_high_i8x16(y0);
        const v128_t y1l = wasm_i16x8_extend_low_i8x16(y1), y1h = wasm_i16x8_extend_high_i8x16(y1);
        const float dy = KQ_H2F(y[i].d);
#define ROW(r, acc) do { \
            const int8_t * q = x[i].qs + 32 * (r); \
            const v128_t p = wasm_i32x4_add(dot_i8w(ld(q), y0l, y0h), dot_i8w(ld(q + 16), y1l, y1h)); \
            acc = fma4(acc, p, KQ_H2F(x[i].d[r]) * dy); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
}
