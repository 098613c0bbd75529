/*
 * kernels.c — builds one kernel table per ISA and selects the best one the
 * CPU supports, once. See kernels.h for the contract (and for how the
 * quantized types register their per-type dot products).
 */
#include "kernels.h"
#include "arch/arch.h"
#include "arch/quant_dot.h"
#include "repack.h"
#include "../core/internal.h"

#include <stdatomic.h>

#include "../quant/quant_kernels.h"

/* every kernel of the list (arch/vec_list.h) into table k, from ISA S */
#define KILN_VEC_SET(ret, name, params, S) k_->name = name##__##S;
#define FILL_VEC(k, S) do { struct kiln_kernels * k_ = (k); KILN_VEC_LIST(KILN_VEC_SET, S) } while (0)

/* vec_dot wrappers per ISA so the per-type slots call that ISA's kernel
 * directly (and not whatever table is current). */
#define DEFINE_TYPE_DOTS(S) \
    static void vec_dot_f32__##S(int64_t n, float * s, const void * x, const void * y) { \
        *s = f32_dot__##S(n, (const float *) x, (const float *) y); } \
    static void vec_dot_f16__##S(int64_t n, float * s, const void * x, const void * y) { \
        *s = f16_dot__##S(n, (const kiln_fp16_t *) x, (const kiln_fp16_t *) y); } \
    static void vec_dot_bf16__##S(int64_t n, float * s, const void * x, const void * y) { \
        *s = bf16_dot__##S(n, (const kiln_bf16_t *) x, (const kiln_bf16_t *) y); } \
    static void from_float_f16__##S(const float * x, void * y, int64_t n) { \
        f32_to_f16__##S(n, x, (kiln_fp16_t *) y); }

DEFINE_TYPE_DOTS(scalar)
#ifdef KILN_ARCH_X86
DEFINE_TYPE_DOTS(avx2)
#endif
#ifdef KILN_ARCH_ARM
DEFINE_TYPE_DOTS(neon)
static void vec_dot_f16__neon_fp16(int64_t n, float * s, const void * x, const void * y) {
    *s = f16_dot__neon_fp16(n, (const kiln_fp16_t *) x, (const kiln_fp16_t *) y);
}
#endif
#ifdef KILN_ARCH_WASM_SIMD
DEFINE_TYPE_DOTS(wasm_simd128)
#endif


static void from_float_f32(const float * x, void * y, int64_t n) {
    memcpy(y, x, (size_t) n * sizeof(float));
}
static void from_float_bf16(const float * x, void * y, int64_t n) {
    kiln_fp32_to_bf16_row(x, (kiln_bf16_t *) y, n);
}

#define FILL_TYPES(k, S) do { \
    (k)->vec_dot[KILN_TYPE_F32]  = vec_dot_f32__##S;  (k)->vec_dot_type[KILN_TYPE_F32]  = KILN_TYPE_F32; \
    (k)->vec_dot[KILN_TYPE_F16]  = vec_dot_f16__##S;  (k)->vec_dot_type[KILN_TYPE_F16]  = KILN_TYPE_F16; \
    (k)->vec_dot[KILN_TYPE_BF16] = vec_dot_bf16__##S; (k)->vec_dot_type[KILN_TYPE_BF16] = KILN_TYPE_BF16; \
    (k)->from_float[KILN_TYPE_F32] = from_float_f32; \
    (k)->from_float[KILN_TYPE_F16] = from_float_f16__##S; \
    (k)->from_float[KILN_TYPE_BF16] = from_float_bf16; \
} while (0)

static struct kiln_kernels g_tables[KILN_ISA_COUNT];
static bool g_available[KILN_ISA_COUNT];
static _Atomic(const struct kiln_kernels *) g_current = NULL;
static atomic_int g_init_state = 0; /* 0 none, 1 building, 2 ready */

static const char * const isa_names[KILN_ISA_COUNT] = { "scalar", "avx2", "neon", "wasm_simd128", "wasm_relaxed", "avx512", "avxvnni" };

const char * kiln_isa_name(enum kiln_isa isa) {
    return (isa >= 0 && isa < KILN_ISA_COUNT) ? isa_names[isa] : "unknown";
}

static void table_base(struct kiln_kernels * k, enum kiln_isa isa) {
    memset(k, 0, sizeof(*k));
    k->isa = isa_names[isa];
    k->isa_id = isa;
    for (int t = 0; t < KILN_TYPE_COUNT; t++) k->vec_dot_type[t] = KILN_TYPE_COUNT; /* none */
    k->f16_mad = f16_mad__scalar;
    k->f16_scale = f16_scale__scalar;
    k->repack_rows[KILN_TYPE_Q4_0] = k->repack_rows[KILN_TYPE_IQ4_NL] = k->repack_rows[KILN_TYPE_Q4_K] = 8;
    k->repack_rows[KILN_TYPE_Q8_0] = 1;
    k->q8_K_x4_rule = true;
}

static void table_finish(struct kiln_kernels * k) {
    kiln_quant_register_kernels(k);
}

#ifdef KILN_ARCH_X86
/* isa's table as a copy of base's, its quant kernels registered for isa
 * (the x86 rows that extend AVX2's) */
static struct kiln_kernels * table_from(enum kiln_isa isa, enum kiln_isa base) {
    struct kiln_kernels * k = &g_tables[isa];
    *k = g_tables[base];
    k->isa = isa_names[isa];
    k->isa_id = isa;
    table_finish(k);
    return k;
}
#endif

static void build_tables(void) {
    struct kiln_kernels * k = &g_tables[KILN_ISA_SCALAR];
    table_base(k, KILN_ISA_SCALAR);
    FILL_VEC(k, scalar);
    FILL_TYPES(k, scalar);
    k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__scalar;
    k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__scalar;
    k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__scalar;
    k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__scalar;
    k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__scalar;
    k->f32_gemm_tile = f32_gemm_1x1__scalar; k->gemm_mr = 1; k->gemm_nr = 1;
    k->f32_gemm_packed = f32_gemm_4x4__scalar; k->pack_mr = 4; k->pack_nr = 4; k->f32_gemm_pack = f32_gemm_pack4__scalar;
    table_finish(k);
    g_available[KILN_ISA_SCALAR] = true;

#ifdef KILN_ARCH_X86
    if (kiln_cpu_has_avx2() && kiln_cpu_has_fma() && kiln_cpu_has_f16c()) {
        k = &g_tables[KILN_ISA_AVX2];
        table_base(k, KILN_ISA_AVX2);
        FILL_VEC(k, avx2);
        FILL_TYPES(k, avx2);
        k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__avx2;
        k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__avx2;
        k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__avx2;
        k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__avx2;
        k->gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__avx2;
        k->gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__avx2;
        k->gemm_x16[KILN_TYPE_Q4_0] = q4_0x16_q8_0_gemm__avx2;
        k->gemm_x16[KILN_TYPE_Q8_0] = q8_0x16_q8_0_gemm__avx2;
        k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__avx2;
        k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__avx2;
        k->gemm_wide[KILN_TYPE_Q4_K] = true; /* the avxvnni and avx512 rows inherit it */
        k->f16_mad = f16_mad__avx2;
        k->f16_scale = f16_scale__avx2;
        k->f32_gemm_tile = f32_gemm_3x4__avx2; k->gemm_mr = 3; k->gemm_nr = 4;
        k->f32_gemm_packed = f32_gemm_6x16__avx2; k->pack_mr = 6; k->pack_nr = 16;
        /* the 3x4 tile and f32_dot are llama.cpp's orders already */
        k->f32_gemm_tile8 = f32_gemm_3x4__avx2; k->tile8_mr = 3; k->tile8_nr = 4;
        k->f32_dot8 = f32_dot8__avx2; k->f32_dot_ggml = f32_dot__avx2;
        k->f32_gemm_fma = f32_gemm_fma__avx2;
        table_finish(k);
        g_available[KILN_ISA_AVX2] = true;
    }
    /* AVX2's table with the AVX-512 kernels in; each bit-identical to the
     * AVX2 one it replaces (quant_avx512.c), so results do not depend on
     * which of the two rows a machine runs */
    if (g_available[KILN_ISA_AVX2] && kiln_cpu_has_avx512_vnni()) {
        k = table_from(KILN_ISA_AVX512, KILN_ISA_AVX2);
        k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__avx512;
        k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__avx512;
        k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__avx512;
        k->gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__avx512;
        k->gemm_x16[KILN_TYPE_Q4_0] = q4_0x16_q8_0_gemm__avx512;
        k->gemm_x16[KILN_TYPE_Q8_0] = q8_0x16_q8_0_gemm__avx512;
        k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__avx512;
        k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__avx512;
        k->gemm_x16[KILN_TYPE_Q4_K] = q4_Kx16_q8_K_gemm__avx512;
        k->f32_gemm_packed = f32_gemm_8x16__avx512; k->pack_mr = 8;
        k->f32_gemm_fma = f32_gemm_fma__avx512;
        g_available[KILN_ISA_AVX512] = true;
    }
    /* AVX2's table with AVX-VNNI kernels, bit-identical to AVX2's: for CPUs
     * with AVX-VNNI and no AVX-512 (Intel client); where both exist the
     * avx512 row is preferred (best_table) */
    if (g_available[KILN_ISA_AVX2] && kiln_cpu_has_avxvnni()) {
        k = table_from(KILN_ISA_AVXVNNI, KILN_ISA_AVX2);
        k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__avxvnni;
        k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__avxvnni;
        k->gemm_x16[KILN_TYPE_Q4_0] = q4_0x16_q8_0_gemm__avxvnni;
        g_available[KILN_ISA_AVXVNNI] = true;
    }
#endif
#ifdef KILN_ARCH_ARM
    k = &g_tables[KILN_ISA_NEON];
    table_base(k, KILN_ISA_NEON);
    FILL_VEC(k, neon);
    FILL_TYPES(k, neon);
    k->f32_gemm_tile = f32_gemm_4x4__neon; k->gemm_mr = 4; k->gemm_nr = 4;
    k->f32_dot4 = f32_dot4__neon;
    k->f32_gemm_fma = f32_gemm_fma__neon; /* fused, as its f32_axpy */
    k->q8_K_x4_rule = false;
    /* x4 / x8 kernels (arch/arm/repack_neon.c, repack_q4_K_neon.c), the
     * SDOT builds where the plain dotprod kernels run too (q8_0, q5_K,
     * q6_K: with dotprod only, in llama.cpp's repacked orders; q4_K's SDOT
     * build sums in llama.cpp's arm64 order, its baseline one in AVX2's) */
#define NEON_X4(S) do { \
        k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__##S; k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__##S; \
        k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__##S; k->gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__##S; \
        k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__##S; k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__##S; \
    } while (0)
    if (kiln_cpu_has_dotprod()) {
        NEON_X4(neon_dotprod);
        k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__neon_dotprod; k->gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__neon_dotprod;
        k->repack_rows[KILN_TYPE_Q4_0] = k->repack_rows[KILN_TYPE_IQ4_NL] = k->repack_rows[KILN_TYPE_Q8_0] = 4;
        /* the K-quants x8 in llama.cpp's arm64 8x4 orders (Q4_K's through
         * NEON_X4; repack_q5_K_dotprod.c, repack_q6_K_dotprod.c) */
        k->vec_dot_x4[KILN_TYPE_Q5_K] = q5_Kx8_q8_K_vec_dot__neon_dotprod; k->gemm_x4[KILN_TYPE_Q5_K] = q5_Kx8_q8_K_gemm__neon_dotprod;
        k->vec_dot_x4[KILN_TYPE_Q6_K] = q6_Kx8_q8_K_vec_dot__neon_dotprod; k->gemm_x4[KILN_TYPE_Q6_K] = q6_Kx8_q8_K_gemm__neon_dotprod;
        k->repack_rows[KILN_TYPE_Q5_K] = k->repack_rows[KILN_TYPE_Q6_K] = 8;
    } else {
        /* llama.cpp repacks nothing here: its plain kernels' orders. No
         * Q8_0 x4 kernel either (its plain order, ggml's two fused
         * accumulators over block pairs, is not the x4 kernels'); a Q8_0
         * matrix repacked anyway is unpacked row by row */
        NEON_X4(neon);
        k->repack_rows[KILN_TYPE_Q4_0] = k->repack_rows[KILN_TYPE_IQ4_NL] = k->repack_rows[KILN_TYPE_Q4_K] = 0;
        k->repack_rows[KILN_TYPE_Q8_0] = 0;
    }
    /* the batched 4-bit ones through SMMLA: the SDOT kernels' bits */
    if (kiln_cpu_has_dotprod() && kiln_cpu_has_i8mm()) {
        k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__neon_i8mm;
        k->gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__neon_i8mm;
    }
#undef NEON_X4
    /* F16 dots and flash attention's fp16 accumulator in fp16 arithmetic
     * where llama.cpp's arm64 build does (its armv8.2_2 variant) */
    if (kiln_cpu_arm_f16_arith()) {
        k->f16_dot = f16_dot__neon_fp16;
        k->vec_dot[KILN_TYPE_F16] = vec_dot_f16__neon_fp16;
        k->f16_mad = f16_mad__neon_fp16;
        k->f16_scale = f16_scale__neon_fp16;
    }
    table_finish(k);
    g_available[KILN_ISA_NEON] = true;
#endif
#ifdef KILN_ARCH_WASM_SIMD
    k = &g_tables[KILN_ISA_WASM_SIMD128];
    table_base(k, KILN_ISA_WASM_SIMD128);
    FILL_VEC(k, wasm_simd128);
    FILL_TYPES(k, wasm_simd128);
    k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__wasm_simd128;
    k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__wasm_simd128;
    /* iq4_nl x4: the plain SIMD128 kernel's bits (repack.h on its order),
     * 1.14-1.37x its speed (bench/peers/x4kern) */
    k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__wasm_simd128;
    k->f16_mad = f16_mad__wasm_simd128;
    k->f16_scale = f16_scale__wasm_simd128;
    k->f16val_dot = f16val_dot__wasm_simd128;
    k->f16val_mad = f16val_mad__wasm_simd128;
    k->f16val_scale = f16val_scale__wasm_simd128;
    k->f32_gemm_tile = f32_gemm_3x3__wasm_simd128; k->gemm_mr = 3; k->gemm_nr = 3;
    k->f32_gemm_packed = f32_gemm_2x16__wasm_simd128; k->pack_mr = 2; k->pack_nr = 16; k->f32_gemm_pack = f32_gemm_pack16__wasm_simd128;
    k->f32_gemm_tile8 = f32_gemm8_2x2__wasm_simd128; k->tile8_mr = 2; k->tile8_nr = 2;
    k->f32_dot8 = f32_dot8__wasm_simd128; k->f32_dot_ggml = f32_dot_ggml__wasm_simd128;
    k->f32_gemm_fma = f32_gemm_fma__wasm_simd128; /* multiply then add, as its f32_axpy */
    table_finish(k);
    g_available[KILN_ISA_WASM_SIMD128] = true;
#endif
#ifdef KILN_ARCH_WASM_RELAXED
    /* SIMD128's table with the relaxed kernels in (kernels_wasm_relaxed.c);
     * the quant registration sees the ISA and swaps q4_0/q8_0 */
    k = &g_tables[KILN_ISA_WASM_RELAXED];
    *k = g_tables[KILN_ISA_WASM_SIMD128];
    k->isa = isa_names[KILN_ISA_WASM_RELAXED];
    k->isa_id = KILN_ISA_WASM_RELAXED;
    k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__wasm_relaxed;
    k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__wasm_relaxed;
    /* batched q4_0: +7-13 % over x4 per column in Chromium (chunk-shaped,
     * L2-resident); SIMD128 versions of it and of q8_0 measured 0.96-1.08x
     * and were left out */
    k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__wasm_relaxed;
    /* iq4_nl x4 and batched (repack_iq4_nl_wasm_relaxed.c): the plain
     * SIMD128 kernel's bits */
    k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__wasm_relaxed;
    k->gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__wasm_relaxed;
    /* q4_0, q8_0 and iq4_nl through i32 dot-adds where the engine makes each one
     * instruction (AVX-VNNI, arm64 sdot); the same bits either way */
    if (kiln_wasm_relaxed_dot_add_direct()) {
        k->vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__wasm_relaxed_dotadd;
        k->gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__wasm_relaxed_dotadd;
        k->vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__wasm_relaxed_dotadd;
        k->vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd;
        k->gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__wasm_relaxed_dotadd;
        /* batched q8_0 only in this form: 1.11-1.29x over x4 per column in
         * Chromium; the i16 form measured 0.90x (Node 20) and stays out */
        k->gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__wasm_relaxed_dotadd;
    }
    k->f32_gemm_packed = f32_gemm_2x16__wasm_relaxed;
    k->f32_gemm_tile = f32_gemm_3x3__wasm_relaxed;
    k->f32_gemm_tile8 = f32_gemm8_2x2__wasm_relaxed;
    k->f32_dot8 = f32_dot8__wasm_relaxed; k->f32_dot_ggml = f32_dot_ggml__wasm_relaxed;
    /* Q4_K repacked to x8 (llama.cpp's layout and sums, as natively): the
     * scalar reference's bits, its fmaf through relaxed_madd where that fuses */
    k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__wasm_relaxed;
    k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__wasm_relaxed;
    /* bit-identical to the scalar fmaf kernel only where the engine fuses */
    if (kiln_wasm_relaxed_madd_fuses()) {
        k->f16_mad = f16_mad__wasm_relaxed;
        k->f16val_mad = f16val_mad__wasm_relaxed;
        k->f32_silu = f32_silu__wasm_relaxed;
        k->vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__wasm_relaxed_fma;
        k->gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__wasm_relaxed_fma;
    }
    /* Q6_K repacked to x4 (repack.h; here only: llama.cpp repacks no Q6_K
     * on x86): the plain relaxed kernel's bits; the batched kernel decodes
     * each super-block once per 64 activation rows (gemm_wide), as the
     * plain path's vec_dot_rows does */
    k->vec_dot_x4[KILN_TYPE_Q6_K] = q6_Kx4_q8_K_vec_dot__wasm_relaxed;
    k->gemm_x4[KILN_TYPE_Q6_K] = q6_Kx4_q8_K_gemm__wasm_relaxed;
    k->gemm_wide[KILN_TYPE_Q6_K] = true;
    k->repack_rows[KILN_TYPE_Q6_K] = 4;
    table_finish(k);
    g_available[KILN_ISA_WASM_RELAXED] = true;
#endif
}

static const struct kiln_kernels * best_table(void) {
    static const enum kiln_isa pref[] = { KILN_ISA_AVX512, KILN_ISA_AVXVNNI, KILN_ISA_AVX2, KILN_ISA_NEON,
                                          KILN_ISA_WASM_RELAXED, KILN_ISA_WASM_SIMD128 };
    for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++) {
        if (g_available[pref[i]]) return &g_tables[pref[i]];
    }
    return &g_tables[KILN_ISA_SCALAR];
}

static void ensure_init(void) {
    if (atomic_load_explicit(&g_init_state, memory_order_acquire) == 2) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&g_init_state, &expected, 1)) {
        build_tables();
        atomic_store(&g_current, best_table());
        atomic_store_explicit(&g_init_state, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&g_init_state, memory_order_acquire) != 2) { /* another thread builds */ }
}

const struct kiln_kernels * kiln_kernels(void) {
    const struct kiln_kernels * k = atomic_load_explicit(&g_current, memory_order_acquire);
    if (k) return k;
    ensure_init();
    return atomic_load(&g_current);
}

const struct kiln_kernels * kiln_kernels_for_isa(enum kiln_isa isa) {
    ensure_init();
    if (isa < 0 || isa >= KILN_ISA_COUNT || !g_available[isa]) return NULL;
    return &g_tables[isa];
}

const char * kiln_cpu_isa(void) {
    return kiln_kernels()->isa;
}

/* NULL or "" or "auto": back to the detected best. An ISA this build or CPU
 * lacks leaves the table unchanged and records an error; callers check
 * kiln_cpu_isa() afterwards. */
void kiln_cpu_force_isa(const char * isa) {
    ensure_init();
    if (!isa || !*isa || strcmp(isa, "auto") == 0) { atomic_store(&g_current, best_table()); return; }
    for (int i = 0; i < KILN_ISA_COUNT; i++) {
        if (strcmp(isa, isa_names[i]) == 0) {
            if (!g_available[i]) { kiln_set_error("cpu_force_isa: %s is not available on this CPU/build", isa); return; }
            atomic_store(&g_current, &g_tables[i]);
            return;
        }
    }
    kiln_set_error("cpu_force_isa: unknown isa '%s'", isa);
}
