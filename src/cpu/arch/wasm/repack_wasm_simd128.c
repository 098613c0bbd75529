/*
 * repack_wasm_simd128.c — wasm SIMD128 x4 mat-vec kernels (see
 * src/cpu/repack.h). Per row, the float arithmetic of
 * q4_0/q8_0/iq4_nl_q8_0_vec_dot__wasm_simd128 exactly (for q8_0 that is the
 * scalar reference's: sum += isum * (dx * dy) per block); what is shared across the
 * 4 rows is the activation side: y's bytes widen (q8_0, iq4_nl) or split
 * into even/odd i16 (q4_0, simd128_common.h) once per block, and for q4_0 the
 * -8 offset comes off as one per-block correction, so every i32 lane
 * equals the plain kernel's lane; the 4 block scales convert to f32 in one
 * vector (exact, as the plain kernel's scalar conversions).
 */
#include <wasm_simd128.h>

#include "../../repack.h"
#include "blocks.h"
#include "quants_impl.h"
#include "simd128_common.h"


#define hsum_f32 kiln_simd128_hsum_f32

/* sum over the 4 i16 quarters: a (16 signed bytes of x) against y widened */
static inline v128_t dot_i8w(v128_t a, v128_t ylo, v128_t yhi) {
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(a), ylo),
                          wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(a), yhi));
}


#define LANE(v, r) wasm_i32x4_shuffle(v, v, r, r, r, r)

void q4_0x4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q4_0x4 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const struct kiln_simd128_q8_eo ys = kiln_simd128_q8_split(y[i].qs);
        const v128_t corr = kiln_simd128_q4_corr(&ys);
        const v128_t d = kiln_simd128_scales4_fast(x[i].d, y[i].d);
#define ROW(r, acc) do { \
            const v128_t p = wasm_i32x4_sub(kiln_simd128_q4_dot(ld(x[i].qs + 16 * (r)), &ys), corr); \
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), LANE(d, r))); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
}

void q8_0x4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q8_0x4 * x = vx;
    const block_q8_0 * y = vy;
    v128_t acc = wasm_f32x4_splat(0);
    const int nb = (int) (n / QK8_0);
    for (int i = 0; i < nb; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t y0l = wasm_i16x8_extend_low_i8x16(y0), y0h = wasm_i16x8_extend_high_i8x16(y0);
        const v128_t y1l = wasm_i16x8_extend_low_i8x16(y1), y1h = wasm_i16x8_extend_high_i8x16(y1);
        const v128_t d = kiln_simd128_scales4_fast(x[i].d, y[i].d);
#define ROW(r) wasm_i32x4_add(dot_i8w(ld(x[i].qs + 32 * (r)), y0l, y0h), dot_i8w(ld(x[i].qs + 32 * (r) + 16), y1l, y1h))
        const v128_t p = kiln_simd128_i32_hsum4(ROW(0), ROW(1), ROW(2), ROW(3));
#undef ROW
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), d));
    }
    wasm_v128_store(s, acc);
}

/* iq4_nl: per row the levels of the nibbles (the plain kernel's swizzle),
 * then the plain kernel's i16 widening and dots against y widened once
 * per block: the same i32 lanes (lane k: values 2k, 2k+1, 8+2k, 9+2k of
 * each half), so bit-identical to iq4_nl_q8_0_vec_dot__wasm_simd128; its
 * two scalar fp16 conversions per row and block become one vector one for
 * the 4 rows (repack.h on this order) */
void iq4_nlx4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * vx, const void * vy) {
    const block_iq4_nlx4 * x = vx;
    const block_q8_0 * y = vy;
    const v128_t values = ld(kiln_kvalues_iq4nl), m4 = wasm_i8x16_splat(0x0f);
    v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;
    const int nb = (int) (n / QK4_NL);
    for (int i = 0; i < nb; ++i) {
        const v128_t y0 = ld(y[i].qs), y1 = ld(y[i].qs + 16);
        const v128_t y0l = wasm_i16x8_extend_low_i8x16(y0), y0h = wasm_i16x8_extend_high_i8x16(y0);
        const v128_t y1l = wasm_i16x8_extend_low_i8x16(y1), y1h = wasm_i16x8_extend_high_i8x16(y1);
        const v128_t d = kiln_simd128_scales4_fast(x[i].d, y[i].d);
#define ROW(r, acc) do { \
            const v128_t b = ld(x[i].qs + 16 * (r)); \
            const v128_t lo = wasm_i8x16_swizzle(values, wasm_v128_and(b, m4)), hi = wasm_i8x16_swizzle(values, wasm_u8x16_shr(b, 4)); \
            const v128_t p = wasm_i32x4_add(dot_i8w(lo, y0l, y0h), dot_i8w(hi, y1l, y1h)); \
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_convert_i32x4(p), LANE(d, r))); \
        } while (0)
        ROW(0, acc0); ROW(1, acc1); ROW(2, acc2); ROW(3, acc3);
#undef ROW
    }
    s[0] = hsum_f32(acc0); s[1] = hsum_f32(acc1); s[2] = hsum_f32(acc2); s[3] = hsum_f32(acc3);
}
