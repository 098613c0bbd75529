/*
 * kernels.h — the kernel table: the vector primitives and matmul tiles the
 * ops call, as function pointers chosen once per ISA.
 *
 * Natively the table is picked at first use by runtime CPU detection (AVX2
 * needs avx2+fma+f16c, avx512 also AVX-512 F+BW+VL+VNNI), so one library binary runs on any x86-64 / arm64;
 * in wasm the ISA is fixed by the build flags. kiln_cpu_force_isa() (kiln.h)
 * swaps the table, for tests and benchmarks that compare ISAs.
 *
 * Contract of every entry: pure functions — pointers and counts in, no
 * allocation, no threads, any alignment, n may be 0. The scalar entries are
 * the reference each SIMD variant is tested against (tests/c/test_kernels.c).
 *
 * ---- Quantized types (src/quant/) ---------------------------------------
 * The per-type slots vec_dot[t], vec_dot_type[t] and from_float[t] are filled
 * for F32/F16/BF16 by kernels.c. For quantized types, kernels.c calls
 *
 *     void kiln_quant_register_kernels(struct kiln_kernels * k);
 *
 * once per table after the float entries are set. It must fill, for each
 * quantized type t it supports, k->vec_dot[t] (x: a row of t, y: a row of
 * k->vec_dot_type[t], n values), k->vec_dot_type[t] (the activation type,
 * as ggml pairs them: q8_0 / q8_1 / q8_K) and k->from_float[vec_dot_type]
 * (f32 row -> activation blocks), choosing the variant for k->isa_id (it may
 * call kiln_cpu_has_dotprod() etc. for sub-features). A NULL vec_dot[t]
 * makes mul_mat report "type t unsupported" instead of crashing.
 */
#ifndef KILN_KERNELS_H
#define KILN_KERNELS_H

#include "kiln.h"
#include "arch/vec_list.h"

#ifdef __cplusplus
extern "C" {
#endif

enum kiln_isa {
    KILN_ISA_SCALAR = 0,
    KILN_ISA_AVX2,          /* x86-64: AVX2 + FMA + F16C */
    KILN_ISA_NEON,          /* arm64 */
    KILN_ISA_WASM_SIMD128,  /* wasm: compile-time */
    KILN_ISA_WASM_RELAXED,  /* wasm built with -mrelaxed-simd: SIMD128 + relaxed kernels */
    KILN_ISA_AVX512,        /* x86-64: AVX2's table with AVX-512 F+BW+VL+VNNI kernels, bit-identical to it */
    KILN_ISA_AVXVNNI,       /* x86-64: AVX2's table with AVX-VNNI kernels (no AVX-512), bit-identical to it */
    KILN_ISA_COUNT,
};

/* s = dot(x, y) over n values; x is a row of the weight type, y of its vec_dot_type */
typedef void (*kiln_vec_dot_t)(int64_t n, float * s, const void * x, const void * y);

/* One interleaved group of 4 weight rows (repack.h) against ncols
 * activation rows y + c * ys bytes: s[c * ss + r] (ss in floats) for r < 4,
 * c < ncols, bit-identical to ncols calls of the table's vec_dot_x4. */
typedef void (*kiln_gemm_x4_t)(int64_t n, int ncols, float * s, size_t ss, const void * x, const void * y, size_t ys);
/* The same for 16 weight rows: 16 / R consecutive groups of the type's R
 * rows (4; Q4_K: 8), group g at x + g * xs bytes: s[c * ss + R g + r],
 * bit-identical to 16 / R gemm_x4 calls. aux: for
 * Q8_0 activations, each row's aux blocks (repack.h; Q4_0 weights:
 * kiln_q8_0_aux, Q8_0 weights: kiln_q8_0_aux8), row c at aux + c * as
 * bytes; a kernel that needs it (Q4_0's) is only called with aux != NULL,
 * Q8_0's forms its own when aux is NULL. */
typedef void (*kiln_gemm_x16_t)(int64_t n, int ncols, float * s, size_t ss, const void * x, size_t xs, const void * y, size_t ys,
                                const void * aux, size_t as);
/* One weight row against 4 activation rows y + c * ys bytes: s[c * ss]
 * (ss in floats) for c < 4, bit-identical to 4 vec_dot calls. */
typedef void (*kiln_vec_dot_y4_t)(int64_t n, float * s, size_t ss, const void * x, const void * y, size_t ys);
/* nr weight rows (x + r * xs bytes) against nc activation rows (y + c *
 * ys): s[c * ss + r] (ss in floats), bit-identical to vec_dot per pair. */
typedef void (*kiln_vec_dot_rows_t)(int64_t n, int nr, int nc, float * s, size_t ss, const void * x, size_t xs,
                                    const void * y, size_t ys);

/* A register tile of dot products for mul_mat: for i < MR rows of a (src0)
 * and j < NR rows of b (src1), c[j*ldc + i] = dot(a + i*lda, b + j*ldb) over
 * k values. Strides lda, ldb, ldc are in floats. */
typedef void (*kiln_gemm_tile_t)(int64_t k, const float * a, int64_t lda,
                                 const float * b, int64_t ldb, float * c, int64_t ldc);

/* A packed-panel GEMM microkernel (the classic outer-product form): for
 * j < MR rows of a (src1, stride lda floats) and i < NR columns,
 * acc[j][i] = sum_p a[j*lda + p] * bp[p*NR + i] over k values, where bp is a
 * panel of NR src0 rows packed k-major. c[j*ldc + i] = acc (accumulate = 0)
 * or c[j*ldc + i] += acc (accumulate = 1). MR, NR <= KILN_GEMM_MAX_MR/NR. */
typedef void (*kiln_gemm_packed_t)(int64_t k, const float * a, int64_t lda, const float * bp,
                                   float * c, int64_t ldc, int accumulate);
#define KILN_GEMM_MAX_MR 8
#define KILN_GEMM_MAX_NR 16

/* Packs the panel kiln_gemm_packed_t reads: for q < k and r < nr,
 * bp[q*NR + r] = a[r*lda + q] (rows of src0, stride lda floats), and 0 for
 * nr <= r < NR (the missing rows of the last panel). 1 <= nr <= NR. */
typedef void (*kiln_gemm_pack_t)(int64_t k, const float * a, int64_t lda, int nr, float * bp);

struct kiln_kernels {
    const char *  isa;     /* "scalar", "avx2", "neon", "wasm_simd128", "wasm_relaxed", "avx512", "avxvnni" */
    enum kiln_isa isa_id;

    /* the vector kernels of every ISA, one field each (src/cpu/arch/vec_list.h
     * has the list and their contracts) */
    KILN_VEC_LIST(KILN_VEC_FIELD, _)
    /* F16 accumulators: y = fp16(fma(fp32(x), v, fp32(y))), y = fp16(fp32(y) * v) */
    void (*f16_mad)  (int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v);
    void (*f16_scale)(int64_t n, kiln_fp16_t * y, float v);
    /* The same three on fp16 values held as floats (each float exactly an
     * fp16 value; flash attention converts a K or V row once for several
     * query rows), bit-identical to this table's fp16 kernels on those
     * values: f16val_dot = f16_dot, y = float(f16_mad), y = float(f16_scale).
     * For ISAs without hardware fp16 conversion (wasm); NULL elsewhere,
     * where attention calls the fp16 kernels. */
    float (*f16val_dot)  (int64_t n, const float * x, const float * y);
    void  (*f16val_mad)  (int64_t n, float * y, const float * x, float v);
    void  (*f16val_scale)(int64_t n, float * y, float v);

    /* mul_mat: a register tile of dot products (MR src0 rows x NR src1 rows) */
    kiln_gemm_tile_t f32_gemm_tile;
    int gemm_mr, gemm_nr;
    /* mul_mat with batch > 1 prefers the packed microkernel when there is one */
    kiln_gemm_packed_t f32_gemm_packed;
    int pack_mr, pack_nr;
    kiln_gemm_pack_t f32_gemm_pack;   /* its panel packing (NULL: the driver packs) */

    /* f32 x f32 products in llama.cpp's x86 (AVX2) order, for mul_mat's
     * ggml order (ops_matmul.c): f32_gemm_tile8 is a register tile
     * (tile8_mr src0 rows x tile8_nr src1 rows, as kiln_gemm_tile_t, k a
     * multiple of 8) and f32_dot8 one product, each summed as llamafile's
     * tinyBLAS sums: 8 lanes, lane l the products l mod 8 in k order by
     * fused multiply-adds, then (l0+l4 + l2+l6) + (l1+l5 + l3+l7);
     * f32_dot_ggml sums as ggml_vec_dot_f32 does in llama.cpp's AVX2 build
     * (4 such 8-lane accumulators over steps of 32, reduced, then the tail:
     * groups of 4 products rounded and added in order, the last n % 4
     * fused). Where the ISA has no fused multiply-add (wasm SIMD128) the
     * lanes multiply, round and add. NULL where the table has none: mul_mat
     * then keeps its own orders. */
    /* C[m x n] += A[m x k] B[k x n] (row-major, n a multiple of 8), every
     * C value one chain of multiply-adds in k order from its value in C,
     * fused where the table's f32_axpy fuses (x86, arm64; wasm multiplies
     * then adds): bit-identical to f32_axpy(n, A[i][q], B row q, C row i)
     * for q in order (ggml's simd_gemm, flash attention's tiled path).
     * NULL: those f32_axpy calls. */
    void (*f32_gemm_fma)(int m, int k, int n, float * C, const float * A, const float * B);
    kiln_gemm_tile_t f32_gemm_tile8;
    int tile8_mr, tile8_nr;
    float (*f32_dot8)(int64_t n, const float * x, const float * y);
    float (*f32_dot_ggml)(int64_t n, const float * x, const float * y);
    /* arm64 (NEON, no tile8): one f32 x f32 product summed as llamafile's
     * tinyBLAS<4> on NEON (n a multiple of 4): 4 lanes, lane l the products
     * l mod 4 in k order by fused multiply-adds, then (l0+l1) + (l2+l3).
     * mul_mat's ggml order takes it where llama.cpp's arm64 build hands the
     * product to sgemm; elsewhere f32_dot, ggml_vec_dot_f32's order there */
    float (*f32_dot4)(int64_t n, const float * x, const float * y);

    /* per weight type: the dot product against its activation type */
    kiln_vec_dot_t    vec_dot     [KILN_TYPE_COUNT];
    enum kiln_type    vec_dot_type[KILN_TYPE_COUNT];
    kiln_from_float_t from_float  [KILN_TYPE_COUNT]; /* f32 row -> type (activations) */
    /* per weight type repacked by kiln_repack_tensor (src/cpu/repack.h): the
     * 4 dots of one interleaved group of rows, s[0..3] (the K-quants: 8
     * rows, s[0..7]): bit-identical to 4 vec_dot calls of the same table,
     * except q4_0 / iq4_nl on scalar, AVX2 and NEON, q8_0 on NEON with
     * dotprod and the K-quants everywhere, which sum in llama.cpp's
     * repacked orders (repack.h; NEON with dotprod: its arm64 8x4 orders
     * for q4_K, q5_K and q6_K). NULL: mul_mat unpacks rows instead. */
    kiln_vec_dot_t    vec_dot_x4  [KILN_TYPE_COUNT];
    /* the same for a batch of activation rows (prompt processing); NULL:
     * vec_dot_x4 per row */
    kiln_gemm_x4_t    gemm_x4     [KILN_TYPE_COUNT];
    /* 16 rows (4 groups) per call, where wider registers let one pass over
     * the activations serve them all; NULL: gemm_x4 per group */
    kiln_gemm_x16_t   gemm_x16    [KILN_TYPE_COUNT];
    /* per weight type, mat-vec only (src1 is one row): where llama.cpp's CPU
     * build sums a type in another order there than in its batched kernels
     * (IQ4_NL on AVX2: two accumulators), so results match it in both.
     * NULL: vec_dot. */
    kiln_vec_dot_t    vec_dot_1   [KILN_TYPE_COUNT];
    /* per weight type not repacked, mul_mat with 2+ src1 rows only: where
     * llama.cpp's batched path sums in another order than its vec_dot, and
     * vec_dot is that vec_dot (Q4_0 / Q8_0 on arm64 with dotprod:
     * llamafile's tinyBLAS_Q0_ARM; mul_mat_id keeps vec_dot, as ggml's
     * does). NULL: vec_dot. */
    kiln_vec_dot_t    vec_dot_n   [KILN_TYPE_COUNT];
    /* per weight type not repacked: one row against 4 activation rows
     * (prompt processing decodes each weight block once for the 4); NULL:
     * vec_dot per pair */
    kiln_vec_dot_y4_t vec_dot_y4  [KILN_TYPE_COUNT];
    /* the same for a whole block of weight rows and activation rows (each
     * weight block decoded once per block); NULL: vec_dot_y4 */
    kiln_vec_dot_rows_t vec_dot_rows[KILN_TYPE_COUNT];
    /* per weight type: the row counts kiln_repack_wanted() repacks, a
     * multiple of this (0: never): where llama.cpp's CPU build for this
     * ISA repacks the type, so that the x4 kernels' order is its order
     * (x86: Q4_0 / IQ4_NL / Q4_K when ne[1] % 8 == 0; arm64 with dotprod:
     * Q4_0 / IQ4_NL / Q8_0 when % 4, Q4_K / Q5_K / Q6_K when % 8; arm64
     * without: none). Q8_0 on x86 and wasm: 1, Q6_K on wasm relaxed: 4
     * (their x4 kernels keep the plain order). */
    uint8_t repack_rows[KILN_TYPE_COUNT];
    /* true: in a mul_mat with repacked Q4_K, the src1 rows of full groups
     * of 4 (those its batched kernel takes) quantize to q8_K with
     * kiln_quantize_row_q8_K_x4, the sign rule of llama.cpp's x86 4-row
     * quantizer; false (NEON: ggml's arm64 build runs the generic 4-row
     * quantizer, the plain one's bytes, for Q4_K, Q5_K and Q6_K alike):
     * from_float like the others */
    bool q8_K_x4_rule;
    /* true: the type's gemm_x4 prepares each weight block once per call
     * for many activation rows (the x86 rows' Q4_K, repack_q4_K_x86.h;
     * wasm relaxed's Q6_K, repack_q6_K_wasm_relaxed.c), so
     * mul_mat gives it as many src1 rows per chunk as a 16-row kernel */
    bool gemm_wide[KILN_TYPE_COUNT];
};

/* The table in use (selected once, or forced). Never NULL. */
const struct kiln_kernels * kiln_kernels(void);
/* The table of one ISA, or NULL when it is not compiled in or the CPU lacks
 * it — tests iterate over every ISA with this. */
const struct kiln_kernels * kiln_kernels_for_isa(enum kiln_isa isa);
const char * kiln_isa_name(enum kiln_isa isa);

#ifdef __cplusplus
}
#endif

#endif /* KILN_KERNELS_H */
