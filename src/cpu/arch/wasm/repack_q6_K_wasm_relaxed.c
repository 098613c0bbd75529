/*
 * repack_q6_K_wasm_relaxed.c — relaxed-SIMD kernels for Q6_K weights in the
 * x4 layout (src/cpu/repack.h): mat-vec (4 rows against one q8_K row) and
 * batched (4 rows against several), each row's result bit-identical to
 * q6_K_q8_K_vec_dot__wasm_relaxed (and so to SIMD128's, ggml's wasm order).
 *
 * Per chunk c (16 values) of a super-block, the 4 rows' quants come as 4
 * vectors of 4 values per row (the 6-bit form q + 32, 0..63: relaxed_dot's
 * 7-bit operand, so exact in any engine), each against a 4-byte activation
 * piece in all lanes: i16 lanes (2r, 2r + 1) hold row r's pair sums (at
 * most 2 * 63 * 128 = 16128 in magnitude, so two pieces add in i16), and
 * i32x4.dot_i16x8_s with the rows' scales of the chunk (2 lanes each) puts
 * sc_r * dot_r in i32 lane r. The 32 * sum(sc * bsum) offset of the +32 is
 * taken off once per super-block, from the chunk pairs' scales against
 * pairs of bsums. Per row the integer isum is then exactly the plain
 * kernel's, and the float step is its: acc_r += (d_r * d_y) * (float) isum_r
 * per super-block in order, lane r of f32x4 operations (no fusion in wasm).
 * The fp16 scales convert exactly (kiln_simd128_f16x4_to_f32).
 */
#if defined(__wasm_relaxed_simd__)
#include <string.h>
#include <wasm_simd128.h>

#include "../arch.h"
#include "../../repack.h"
#include "blocks.h"
#include "simd128_common.h"

/* RSWZ (simd128_common.h): every index below is 0..7, so relaxed_swizzle's
 * result does not depend on the engine, and V8 makes it one pshufb (the
 * plain swizzle adds a saturating add and its constant for the
 * out-of-range rule) */


/* the pair's 8 scale bytes (s_0c s_0c' s_1c ...) -> each chunk's 4 rows,
 * 2 bytes each: s_0c s_0c s_1c s_1c ... s_3c, then the same for c'. Read
 * through volatile once per call (as kiln_simd128_k_load: V8 rebuilds a
 * v128.const at each use inside a loop). */
static inline v128_t sc_idx(void) {
    static volatile const uint32_t w[4] = { 0x02020000u, 0x06060404u, 0x03030101u, 0x07070505u };
    return wasm_u32x4_make(w[0], w[1], w[2], w[3]);
}

/* the 4 quant vectors of chunk c (48 bytes at q): 4 values of each row,
 * 0..63 (repack.h: the top 2 bits of V_0, V_1, V_2 make the fourth; the
 * 16-bit shifts carry in nothing, the bits below the ones kept being 0) */
RX_INLINE void q6x4_chunk_quants(const uint8_t * q, v128_t m63, v128_t w[4]) {
    const v128_t v0 = ld(q), v1 = ld(q + 16), v2 = ld(q + 32);
    w[0] = wasm_v128_and(v0, m63);
    w[1] = wasm_v128_and(v1, m63);
    w[2] = wasm_v128_and(v2, m63);
    v128_t t = wasm_u16x8_shr(wasm_v128_andnot(v2, m63), 2);
    t = wasm_u16x8_shr(wasm_v128_or(t, wasm_v128_andnot(v1, m63)), 2);
    w[3] = wasm_u16x8_shr(wasm_v128_or(t, wasm_v128_andnot(v0, m63)), 2);
}

/* sc_r * (the chunk's 16 values of row r . q8[0..15]) in i32 lane r */
RX_INLINE v128_t q6x4_chunk_dot(const int8_t * q8, const v128_t w[4], v128_t sc) {
    const v128_t s01 = wasm_i16x8_add(RDOT16(wasm_v128_load32_splat(q8), w[0]), RDOT16(wasm_v128_load32_splat(q8 + 4), w[1]));
    const v128_t s23 = wasm_i16x8_add(RDOT16(wasm_v128_load32_splat(q8 + 8), w[2]), RDOT16(wasm_v128_load32_splat(q8 + 12), w[3]));
    return wasm_i32x4_add(wasm_i32x4_dot_i16x8(s01, sc), wasm_i32x4_dot_i16x8(s23, sc));
}

/* the offset's scales of pair p, i16: s_0c s_0c' s_1c s_1c' ... (against a
 * pair of bsums in every i32 lane) */
RX_INLINE v128_t q6x4_pair_scales(const int8_t * scales, int p) {
    return wasm_i16x8_extend_low_i8x16(wasm_v128_load64_zero(scales + 8 * p));
}

/* the row sums' float step: acc + (d * d_y) * (float) isum, per lane (d:
 * the 4 rows' scales as f32) */
RX_INLINE v128_t q6x4_step(v128_t acc, v128_t d, float dy, v128_t isum) {
    return wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_mul(d, wasm_f32x4_splat(dy)), wasm_f32x4_convert_i32x4(isum)));
}

RX_INLINE v128_t q6x4_d(const kiln_fp16_t * d) { return kiln_simd128_f16x4_to_f32(wasm_u32x4_load16x4(d)); }

void q6_Kx4_q8_K_vec_dot__wasm_relaxed(int64_t n, float * s, const void * vx, const void * vy) {
    const block_q6_Kx4 * x = vx;
    const block_q8_K * y = vy;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const v128_t m63 = k.m63, idx = sc_idx();
    v128_t acc = wasm_f32x4_splat(0);
    for (int64_t b = 0; b < n / QK_K; b++) {
        const uint8_t * q = x[b].qs;
        const int8_t * q8 = y[b].qs;
        v128_t isum = wasm_i32x4_splat(0), off = isum, w[4];
        for (int p = 0; p < 8; p++) {
            const v128_t e = RSWZ(wasm_v128_load64_zero(x[b].scales + 8 * p), idx);
            q6x4_chunk_quants(q, m63, w);
            isum = wasm_i32x4_add(isum, q6x4_chunk_dot(q8, w, wasm_i16x8_extend_low_i8x16(e)));
            q6x4_chunk_quants(q + 48, m63, w);
            isum = wasm_i32x4_add(isum, q6x4_chunk_dot(q8 + 16, w, wasm_i16x8_extend_high_i8x16(e)));
            off = wasm_i32x4_add(off, wasm_i32x4_dot_i16x8(q6x4_pair_scales(x[b].scales, p), wasm_v128_load32_splat(y[b].bsums + 2 * p)));
            q += 96;
            q8 += 32;
        }
        acc = q6x4_step(acc, q6x4_d(x[b].d), y[b].d, wasm_i32x4_sub(isum, wasm_i32x4_shl(off, 5)));
    }
    wasm_v128_store(s, acc);
}

/* The batched form: per super-block the group's quants and scales are
 * decoded once (1.4 KB) for up to Q6X4_NC activation rows, then each row
 * takes the mat-vec kernel's integer sums (grouped otherwise: exact) and
 * its float step, super-block after super-block. */
#define Q6X4_NC 64
struct q6x4_dec { v128_t w[64], sc[16], osc[8], d; };

RX_INLINE void q6x4_decode(const block_q6_Kx4 * x, v128_t m63, v128_t idx, struct q6x4_dec * o) {
    for (int p = 0; p < 8; p++) {
        const v128_t e = RSWZ(wasm_v128_load64_zero(x->scales + 8 * p), idx);
        o->sc[2 * p] = wasm_i16x8_extend_low_i8x16(e);
        o->sc[2 * p + 1] = wasm_i16x8_extend_high_i8x16(e);
        o->osc[p] = q6x4_pair_scales(x->scales, p);
    }
    for (int c = 0; c < 16; c++) q6x4_chunk_quants(x->qs + 48 * c, m63, &o->w[4 * c]);
    o->d = q6x4_d(x->d);
}

RX_INLINE v128_t q6x4_dec_isum(const struct q6x4_dec * w, const block_q8_K * y) {
    v128_t isum = wasm_i32x4_splat(0), off = isum;
    for (int c = 0; c < 16; c++) isum = wasm_i32x4_add(isum, q6x4_chunk_dot(y->qs + 16 * c, &w->w[4 * c], w->sc[c]));
    for (int p = 0; p < 8; p++) off = wasm_i32x4_add(off, wasm_i32x4_dot_i16x8(w->osc[p], wasm_v128_load32_splat(y->bsums + 2 * p)));
    return wasm_i32x4_sub(isum, wasm_i32x4_shl(off, 5));
}

void q6_Kx4_q8_K_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) {
    const block_q6_Kx4 * x = vx;
    const struct kiln_simd128_k k = kiln_simd128_k_load();
    const v128_t m63 = k.m63, idx = sc_idx();
    struct q6x4_dec w;
    v128_t acc[Q6X4_NC];
    for (int c0 = 0; c0 < ncols; c0 += Q6X4_NC) {
        const int nc = ncols - c0 < Q6X4_NC ? ncols - c0 : Q6X4_NC;
        for (int c = 0; c < nc; c++) acc[c] = wasm_f32x4_splat(0);
        for (int64_t b = 0; b < n / QK_K; b++) {
            q6x4_decode(&x[b], m63, idx, &w);
            for (int c = 0; c < nc; c++) {
                const block_q8_K * y = (const block_q8_K *) ((const char *) vy + (size_t) (c0 + c) * ys) + b;
                acc[c] = q6x4_step(acc[c], w.d, y->d, q6x4_dec_isum(&w, y));
            }
        }
        for (int c = 0; c < nc; c++) wasm_v128_store(s + (size_t) (c0 + c) * ss, acc[c]);
    }
}

#endif /* __wasm_relaxed_simd__ */
