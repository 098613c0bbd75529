/*
 * repack.h — interleaved ("x4") layouts of Q4_0 / Q8_0 / IQ4_NL weights,
 * "x8" ones of the K-quants (Q4_K, Q5_K, Q6_K; below) and, in wasm builds,
 * an x4 one of Q6_K, for mat-vec.
 *
 * kiln_repack_tensor() rewrites a weight matrix in place: every group of 4
 * consecutive rows becomes one run of x4 blocks, x4 block b holding block b
 * of each of the 4 rows side by side (scales first, then quants). A group
 * has exactly the bytes of its 4 rows, so row offsets (nb[1]) still locate
 * groups, and the rows past the last full group keep the plain layout.
 *
 * Why: a mat-vec kernel walks one stream of weights instead of four and
 * loads / prepares each activation block once per 4 rows.
 *
 * Summation order. Q8_0: the x4 kernels run per row the very float
 * operations, in the same order, as the plain vec_dot of the same ISA, so
 * the result is bit-identical to the non-repacked path (llama.cpp does not
 * repack Q8_0 on x86 either); except on arm64 with dotprod, where
 * llama.cpp repacks Q8_0 (4 rows, ne[1] % 4 == 0) and sums it as below,
 * and so does Kiln (arch/arm/repack_neon.c; which matrices are repacked
 * where: kiln_repack_wanted). Q4_0 and IQ4_NL: llama.cpp repacks these on
 * AVX2 (8 rows, when ne[1] % 8 == 0) and its kernels then add, per row and
 * block, the block's whole integer dot with one FMA:
 *     acc = fma((float) isum_b, d_x * d_y, acc)
 * instead of the plain kernel's 8 lane accumulators. The scalar, AVX2 and
 * NEON x4 kernels of those two types follow that order (bit-identical to
 * each other; llama.cpp's ARM build repacks Q4_0 / IQ4_NL 4x4 with dotprod
 * and sums the same way), so Kiln's greedy output equals llama.cpp's on
 * such models; the
 * wasm x4 kernels of Q4_0 and IQ4_NL keep their plain kernel's order
 * (llama.cpp's wasm build repacks neither). For Q4_0 that is ggml's wasm
 * kernel's, so wllama's results; for IQ4_NL it is not: ggml's wasm build
 * has no IQ4_NL kernel and runs its generic loop (one float sum, sum +=
 * (dy * dx) * isum per block: Kiln's scalar order), while Kiln's wasm
 * IQ4_NL kernels keep 4 float lanes per row, so they round differently
 * from wllama (bench/peers/RESULTS-2026-12-03-s15-iq4wasm.txt).
 *
 * The layout is ISA-independent (one repacked model serves every kernel
 * table); an ISA without x4 kernels unpacks a group's rows into scratch and
 * calls its plain vec_dot. A repacked tensor is marked by tensor->extra and
 * is only valid as src0 of mul_mat.
 */
#ifndef KILN_REPACK_H
#define KILN_REPACK_H

#include "kiln.h"
#include "blocks.h"

#define KILN_REPACK_ROWS 4

typedef struct { kiln_fp16_t d[4]; uint8_t qs[4 * QK4_0 / 2]; } block_q4_0x4;
typedef struct { kiln_fp16_t d[4]; int8_t qs[4 * QK8_0]; } block_q8_0x4;
typedef block_q4_0x4 block_iq4_nlx4; /* same geometry: fp16 scale + 16 bytes of nibbles */

/* Per q8_0 activation block, what the Q4_0 16-row kernels (avx2, avx512) need
 * besides the quants: -8 times the sum of the 32 quants (the nibbles' -8
 * offset applied once per block: sum (q - 8) y = sum q y + m8sum, exact)
 * and the block's scale as f32 (exact conversion). One per block, row
 * after row (kiln_q8_0_aux_row). */
typedef struct { int32_t m8sum; float d; } kiln_q8_0_aux;
void kiln_q8_0_aux_row(const void * y, int64_t n, kiln_q8_0_aux * a);
/* What the Q8_0 16-row kernel (avx512) needs per activation block: -128
 * times the sum of each 4 quants qs[4j..4j+3] (its unsigned weights' +128
 * offset taken off: sum (x + 128) y + m128[j] = sum x y, exact) and the
 * block's scale as f32 (exact; the avx2 16-row kernel reads only this).
 * kiln_q8_0_aux8_row writes a row's. */
typedef struct { int32_t m128[8]; float d; } kiln_q8_0_aux8;
void kiln_q8_0_aux8_row(const void * y, int64_t n, kiln_q8_0_aux8 * a);

/*
 * Q4_K, 8 rows per group ("x8", also Q5_K and Q6_K below): byte for byte ggml's block_q4_Kx8 (its
 * CPU "repack" buffer, 8x8 interleave), one per 256-value super-block:
 *   d[8], dmin[8]  the 8 rows' fp16 super-block scales, row order;
 *   scales[96]     8 groups of 12 bytes, group s (sub-block s, 0..7) holding
 *                  the 6-bit scale sc[r] and min m[r] of sub-block s of the
 *                  8 rows r: byte j (j < 4)   = sc[j]   & 63 | (sc[j+4] >> 4) << 6
 *                                 byte 4 + j  = m[j]    & 63 | (m[j+4]  >> 4) << 6
 *                                 byte 8 + j  = sc[j+4] & 15 | (m[j+4] & 15) << 4
 *   qs[1024]       the rows' 128 quant bytes in 8-byte pieces: piece k
 *                  (bytes 8k..8k+7 of the row's plain qs) of row r at byte
 *                  (8 k + r) * 8. Plain qs byte 32 p + i holds value
 *                  64 p + i (low nibble) and 64 p + 32 + i (high nibble).
 * 8 x 144 bytes, exactly the 8 plain rows', so it is done in place.
 *
 * Summation order: llama.cpp's AVX2 build repacks Q4_K this way when
 * ne[1] % 8 == 0 and sums two ways, and Kiln's scalar, x86, wasm and
 * baseline NEON kernels follow both (repack_q4_K_*.c):
 *  - mat-vec (a src1 row outside a full group of 4: every row when ne11 < 4,
 *    the last ne11 % 4 rows otherwise): per super-block, the integer sums
 *    I = sum_s sc_s * dot_s and M = sum_s m_s * bsum_s over its 8 sub-blocks,
 *    then acc = fma((float) I, d * d_y, acc), accm = fma((float) M,
 *    dmin * d_y, accm); result acc - accm;
 *  - batched (the src1 rows of each full group of 4): the same with one
 *    fma per pair of sub-blocks (4 per super-block) instead of one.
 * And the activation rows of a full group of 4 are quantized to q8_K with
 * the sign rule of llama.cpp's x86 4-row quantizer (kiln_quantize_row_q8_K_x4;
 * kernels.h q8_K_x4_rule).
 * llama.cpp's arm64 build with dotprod (no i8mm) repacks Q4_K too, into its
 * 8x4 interleave, and sums one way for both (ggml_gemv / ggml_gemm_q4_K_8x4_q8_K),
 * which Kiln's NEON dotprod kernels follow (repack_q4_K_neon.c built with
 * SDOT): per super-block and pair p of sub-blocks, acc = fma((float)
 * (sc_2p * dot_2p + sc_2p+1 * dot_2p+1), d * d_y, acc), then after the 4
 * pairs acc = fma(-(float) M, dmin * d_y, acc); result acc. Its 4-row
 * quantizer there is the generic one, the plain quantizer's bytes.
 * (i8mm CPUs run its 8x8 kernels, another order: not matched.)
 */
#define KILN_REPACK_ROWS_Q4_K 8
typedef struct { kiln_fp16_t d[8]; kiln_fp16_t dmin[8]; uint8_t scales[96]; uint8_t qs[1024]; } block_q4_Kx8;

/*
 * Q5_K and Q6_K, 8 rows per group (x8): byte for byte ggml's block_q5_Kx8 /
 * block_q6_Kx8 with its arm64 4-byte interleave (8x4), one per 256-value
 * super-block, 8 x 176 / 8 x 210 bytes, exactly the 8 plain rows':
 *   Q5_K: d[8], dmin[8]  the rows' fp16 super-block scales;
 *         scales[96]     as Q4_K's x8 above (group s: sub-block s of the 8 rows);
 *         qh[256]        4-byte pieces: piece k (plain qh bytes 4k..4k+3) of
 *                        row r at (8 k + r) * 4;
 *         qs[1024]       the same for the plain qs (pieces 0..31).
 *         Plain: value 64 p + i (i < 32) = qs[32 p + i] & 15 | bit 2p of qh[i] << 4,
 *         value 64 p + 32 + i = qs[32 p + i] >> 4 | bit 2p+1 of qh[i] << 4.
 *   Q6_K: d[8]           fp16 super-block scales;
 *         scales[128]    the i8 scale j (values 16 j..16 j+15) of row r at 8 j + r;
 *         ql[1024]       4-byte pieces of the plain ql, piece k of row r at (8 k + r) * 4;
 *         qh[512]        the same for the plain qh (pieces 0..15).
 * Only llama.cpp's arm64 build with dotprod repacks them (ne[1] % 8 == 0),
 * and only Kiln's NEON dotprod table has kernels for them
 * (arch/arm/repack_q5_K_dotprod.c, repack_q6_K_dotprod.c); any other table
 * unpacks rows. Their orders, llama.cpp's ggml_gemv / ggml_gemm_q{5,6}_K_8x4_q8_K:
 *  - Q5_K: Q4_K's arm64 order above (both forms);
 *  - Q6_K: per super-block the exact integer I = sum_j sc_j * dot_j
 *    (values q - 32), then mat-vec: acc = acc + (float) I * (d * d_y)
 *    (multiply and add rounded apart); batched: acc = fma((float) I,
 *    d * d_y, acc). So the mat-vec / batched split (the src1 rows of full
 *    groups of 4 batched, ops_matmul.c) decides Q6_K's bits.
 */
typedef struct { kiln_fp16_t d[8]; kiln_fp16_t dmin[8]; uint8_t scales[96]; uint8_t qh[256]; uint8_t qs[1024]; } block_q5_Kx8;
typedef struct { kiln_fp16_t d[8]; int8_t scales[128]; uint8_t ql[1024]; uint8_t qh[512]; } block_q6_Kx8;

/* The rows of a repacked Q6_K group: its x4 layout in wasm builds (below),
 * the x8 one (above) in native builds, so each build has the layout its
 * kernels read (arm64 with dotprod: x8; x86: none, kiln_repack_tensor only
 * when asked; wasm relaxed: x4) and a repacked tensor one meaning. */
#ifdef __EMSCRIPTEN__
#define KILN_REPACK_ROWS_Q6_K 4
#else
#define KILN_REPACK_ROWS_Q6_K 8
#endif

/* the K-quants repack knows (their kernels convert every fp16 scale
 * exactly: scale shift 0; their batched order may differ from the
 * mat-vec one, ops_matmul.c's block_repacked) */
static inline bool kiln_repack_is_kquant(enum kiln_type t) {
    return t == KILN_TYPE_Q4_K || t == KILN_TYPE_Q5_K || t == KILN_TYPE_Q6_K;
}

/*
 * Q6_K in wasm builds, 4 rows per group (x4), for the wasm relaxed-SIMD
 * kernels (the tables' repack_rows: 4 there, 0 on wasm SIMD128; llama.cpp's
 * wasm build repacks nothing). One per 256-value super-block, 4 x 210 bytes:
 *   d[4]          the 4 rows' fp16 scales, row order;
 *   scales[64]    the rows' 16 int8 scales (scale c: values 16c..16c+15),
 *                 chunk pairs side by side: scales[8 p + 2 r + h] is row r's
 *                 scale 2p + h (8 bytes per pair p: s_0(2p) s_0(2p+1)
 *                 s_1(2p) s_1(2p+1) ... s_3(2p+1));
 *   qs[768]       per chunk c (16 values) 48 bytes at qs + 48 c, three
 *                 16-byte vectors V_t (t < 3), byte 4 r + i of V_t holding in
 *                 its low 6 bits row r's 6-bit quant (0..63, the value + 32)
 *                 of value 16 c + 4 t + i (i < 4), and in its top 2 bits
 *                 bits 4-5 (V_0), 2-3 (V_1), 0-1 (V_2) of row r's quant of
 *                 value 16 c + 12 + i.
 * Why: one 16-byte vector holds 4 values of each of the 4 rows, so one
 * 4-byte activation piece (a splat) serves all 4 rows, the i16 pair sums of
 * relaxed_dot land in lanes (2r, 2r + 1) of row r, and one
 * i32x4.dot_i16x8_s with the chunk's scales of the 4 rows (a swizzle of the
 * pair's 8 bytes) gives each row's scale * dot in its own i32 lane; the
 * 6-bit values come out with an AND per vector and 8 operations for the
 * fourth (the plain layout: 17 per 4 vectors).
 * Summation order: per row the plain wasm kernel's (ggml's wasm q6_K):
 * the super-block's exact integer sum, then sumf += d * d_y * isum in
 * super-block order, so the x4 and batched kernels
 * (repack_q6_K_wasm_relaxed.c) are bit-identical to
 * q6_K_q8_K_vec_dot__wasm_relaxed / __wasm_simd128 (wllama's results).
 */
typedef struct { kiln_fp16_t d[4]; int8_t scales[64]; uint8_t qs[768]; } block_q6_Kx4;
KILN_STATIC_ASSERT(sizeof(block_q6_Kx4) == 4 * sizeof(block_q6_K), "block_q6_Kx4: the bytes of its 4 rows");

/* s[r] = dot(row r of the x4 group x, y) for r < 4, n values (multiple of 32) */
typedef void (*kiln_vec_dot_x4_t)(int64_t n, float * s, const void * x, const void * y);

/* The batched form (kiln_gemm_x4_t, kernels.h) runs one x4 group against
 * several activation rows, loading and unpacking the weights once per
 * block for all of them, each result bit-identical to vec_dot_x4's. This
 * is its column loop around a 2-column kernel PAIR(n, s0, s1, x, y0, y1):
 * pairs of activation rows, then an odd last one through the x4 mat-vec
 * kernel ONE. */
#define KILN_GEMM_X4_BY_PAIRS(PAIR, ONE, n, ncols, s, ss, x, y, ys) do { \
    int c_ = 0; \
    for (; c_ + 2 <= (ncols); c_ += 2) { \
        const char * yc_ = (const char *) (y) + (size_t) c_ * (ys); \
        PAIR((n), (s) + (size_t) c_ * (ss), (s) + (size_t) (c_ + 1) * (ss), (x), (const block_q8_0 *) yc_, \
             (const block_q8_0 *) (yc_ + (ys))); \
    } \
    if (c_ < (ncols)) ONE((n), (s) + (size_t) c_ * (ss), (x), (const char *) (y) + (size_t) c_ * (ys)); \
} while (0)

#define KILN_REPACK_KERNELS(S) \
    void q4_0x4_q8_0_vec_dot__##S(int64_t n, float * s, const void * x, const void * y); \
    void q8_0x4_q8_0_vec_dot__##S(int64_t n, float * s, const void * x, const void * y);
#define KILN_REPACK_GEMM_KERNELS(S) \
    void q4_0x4_q8_0_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys); \
    void q8_0x4_q8_0_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
#define KILN_REPACK_KERNELS_BLOCKSUM(S) \
    void iq4_nlx4_q8_0_vec_dot__##S(int64_t n, float * s, const void * x, const void * y);

/* Q4_K x8 (q8_K activations): s[0..7] for the 8 rows of a group, the
 * mat-vec order; gemm: the batched order for each of ncols activation rows */
#define KILN_REPACK_Q4_K_KERNELS(S) \
    void q4_Kx8_q8_K_vec_dot__##S(int64_t n, float * s, const void * x, const void * y); \
    void q4_Kx8_q8_K_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);

KILN_REPACK_KERNELS(scalar)
KILN_REPACK_KERNELS_BLOCKSUM(scalar)
KILN_REPACK_Q4_K_KERNELS(scalar)
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
KILN_REPACK_KERNELS(avx2)
KILN_REPACK_KERNELS_BLOCKSUM(avx2)
KILN_REPACK_GEMM_KERNELS(avx2)
void iq4_nlx4_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q4_0x16_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                             const void * aux, size_t as);
void q8_0x16_q8_0_gemm__avx2(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                             const void * aux, size_t as);
KILN_REPACK_Q4_K_KERNELS(avx2)
KILN_REPACK_KERNELS(avx512)
KILN_REPACK_GEMM_KERNELS(avx512)
void q4_0x16_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as);
void q8_0x16_q8_0_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as);
KILN_REPACK_Q4_K_KERNELS(avx512)
void q4_Kx16_q8_K_gemm__avx512(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                               const void * aux, size_t as);
KILN_REPACK_Q4_K_KERNELS(avxvnni)
void q4_0x16_q8_0_gemm__avxvnni(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                                const void * aux, size_t as);
#endif
#if defined(__aarch64__)
/* arch/arm/repack_neon.c, its dotprod rebuild repack_dotprod.c and the
 * batched SMMLA kernels of repack_i8mm.c */
/* (baseline NEON: no q8_0 x4 kernels; llama.cpp does not repack there) */
void q4_0x4_q8_0_vec_dot__neon(int64_t n, float * s, const void * x, const void * y);
void q4_0x4_q8_0_gemm__neon(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
KILN_REPACK_KERNELS_BLOCKSUM(neon)
void iq4_nlx4_q8_0_gemm__neon(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
KILN_REPACK_KERNELS(neon_dotprod)
KILN_REPACK_KERNELS_BLOCKSUM(neon_dotprod)
KILN_REPACK_GEMM_KERNELS(neon_dotprod)
void iq4_nlx4_q8_0_gemm__neon_dotprod(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q4_0x4_q8_0_gemm__neon_i8mm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void iq4_nlx4_q8_0_gemm__neon_i8mm(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
/* arch/arm/repack_q4_K_neon.c (AVX2's orders) and its dotprod rebuild
 * (llama.cpp arm64's order) */
KILN_REPACK_Q4_K_KERNELS(neon)
KILN_REPACK_Q4_K_KERNELS(neon_dotprod)
/* arch/arm/repack_q5_K_dotprod.c, repack_q6_K_dotprod.c: Q5_K / Q6_K x8
 * (q8_K activations), llama.cpp arm64's orders; s[0..7] as Q4_K's */
void q5_Kx8_q8_K_vec_dot__neon_dotprod(int64_t n, float * s, const void * x, const void * y);
void q5_Kx8_q8_K_gemm__neon_dotprod(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q6_Kx8_q8_K_vec_dot__neon_dotprod(int64_t n, float * s, const void * x, const void * y);
void q6_Kx8_q8_K_gemm__neon_dotprod(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
#endif
#if defined(__wasm_simd128__)
KILN_REPACK_KERNELS(wasm_simd128)
/* IQ4_NL x4: the plain wasm kernel's order (as Q4_0's) */
void iq4_nlx4_q8_0_vec_dot__wasm_simd128(int64_t n, float * s, const void * x, const void * y);
#endif
#if defined(__wasm_simd128__) && defined(__wasm_relaxed_simd__)
KILN_REPACK_KERNELS(wasm_relaxed)
void q4_0x4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q4_0x4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * x, const void * y);
void q8_0x4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * x, const void * y);
void q4_0x4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q8_0x4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void q8_0x4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
/* Q4_K x8 (repack_q4_K_wasm_relaxed.c): fmaf emulated in f64, or relaxed_madd
 * where the engine fuses it (_fma); the same bits either way */
KILN_REPACK_Q4_K_KERNELS(wasm_relaxed)
KILN_REPACK_Q4_K_KERNELS(wasm_relaxed_fma)
/* Q6_K x4 (repack_q6_K_wasm_relaxed.c): the plain relaxed kernel's bits */
void q6_Kx4_q8_K_vec_dot__wasm_relaxed(int64_t n, float * s, const void * x, const void * y);
void q6_Kx4_q8_K_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
/* IQ4_NL x4 (repack_iq4_nl_wasm_relaxed.c): the plain wasm kernel's order,
 * in an i16 and a dot-add version like q4_0's */
void iq4_nlx4_q8_0_vec_dot__wasm_relaxed(int64_t n, float * s, const void * x, const void * y);
void iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd(int64_t n, float * s, const void * x, const void * y);
void iq4_nlx4_q8_0_gemm__wasm_relaxed(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
void iq4_nlx4_q8_0_gemm__wasm_relaxed_dotadd(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
#endif

/* f32 row -> q8_K like quantize_row_q8_K, except the sign of the scale:
 * negative when any value of largest magnitude is positive (llama.cpp's
 * 4-row q8_K quantizer), not by the first such value. */
void kiln_quantize_row_q8_K_x4(const float * x, void * y, int64_t n);

/* rows per interleaved group of t (0: t is not repacked) */
int kiln_repacked_rows(const struct kiln_tensor * t);
/* Subnormal block scales: the x4 groups of a repacked tensor may hold every
 * block scale times 2^shift (0..KILN_REPACK_MAX_SHIFT, repack.c's
 * choose_shift), so an x4 kernel's results are exactly 2^shift times the
 * plain ones and mul_mat takes the factor off. */
#define KILN_REPACK_MAX_SHIFT 10
int kiln_repack_scale_shift(const struct kiln_tensor * t);
/* row r (< rows of the group) of the x4 / x8 group at `group` back to
 * plain blocks (scales shifted back), n values */
void kiln_repack_unpack_row(enum kiln_type type, int shift, const void * group, int r, int64_t n, void * out);

#endif
