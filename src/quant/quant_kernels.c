/*
 * quant_kernels.c — puts the quantized dot products of each ISA into its
 * kernel table. Types without a SIMD variant on an ISA get the scalar one,
 * so every table supports every type.
 */
#include "quant_kernels.h"
#include "quants.h"
#include "cpu/kernels.h"
#include "cpu/arch/quant_dot.h"

#define SET(k, T, fn, VT) do { (k)->vec_dot[KILN_TYPE_##T] = fn; (k)->vec_dot_type[KILN_TYPE_##T] = KILN_TYPE_##VT; } while (0)

#define SET_SIMD(k, S) do { \
    SET(k, Q4_0,   q4_0_q8_0_vec_dot__##S,   Q8_0); \
    SET(k, Q4_1,   q4_1_q8_1_vec_dot__##S,   Q8_1); \
    SET(k, Q5_0,   q5_0_q8_0_vec_dot__##S,   Q8_0); \
    SET(k, Q5_1,   q5_1_q8_1_vec_dot__##S,   Q8_1); \
    SET(k, Q8_0,   q8_0_q8_0_vec_dot__##S,   Q8_0); \
    SET(k, Q2_K,   q2_K_q8_K_vec_dot__##S,   Q8_K); \
    SET(k, Q3_K,   q3_K_q8_K_vec_dot__##S,   Q8_K); \
    SET(k, Q4_K,   q4_K_q8_K_vec_dot__##S,   Q8_K); \
    SET(k, Q5_K,   q5_K_q8_K_vec_dot__##S,   Q8_K); \
    SET(k, Q6_K,   q6_K_q8_K_vec_dot__##S,   Q8_K); \
    SET(k, IQ4_NL, iq4_nl_q8_0_vec_dot__##S, Q8_0); \
    SET(k, IQ4_XS, iq4_xs_q8_K_vec_dot__##S, Q8_K); \
} while (0)

void kiln_quant_register_kernels(struct kiln_kernels * k) {
    SET_SIMD(k, scalar);
    SET(k, TQ1_0,   tq1_0_q8_K_vec_dot__scalar,   Q8_K);
    SET(k, TQ2_0,   tq2_0_q8_K_vec_dot__scalar,   Q8_K);
    SET(k, IQ2_XXS, iq2_xxs_q8_K_vec_dot__scalar, Q8_K);
    SET(k, IQ2_XS,  iq2_xs_q8_K_vec_dot__scalar,  Q8_K);
    SET(k, IQ2_S,   iq2_s_q8_K_vec_dot__scalar,   Q8_K);
    SET(k, IQ3_XXS, iq3_xxs_q8_K_vec_dot__scalar, Q8_K);
    SET(k, IQ3_S,   iq3_s_q8_K_vec_dot__scalar,   Q8_K);
    SET(k, IQ1_S,   iq1_s_q8_K_vec_dot__scalar,   Q8_K);
    SET(k, IQ1_M,   iq1_m_q8_K_vec_dot__scalar,   Q8_K);

    switch (k->isa_id) {
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
        case KILN_ISA_AVX2:
            SET_SIMD(k, avx2);
            k->vec_dot_1[KILN_TYPE_IQ4_NL] = iq4_nl_q8_0_vec_dot_gemv__avx2;
            k->vec_dot_y4[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_y4__avx2;
            k->vec_dot_rows[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_rows__avx2;
            k->vec_dot_rows[KILN_TYPE_Q5_K] = q5_K_q8_K_vec_dot_rows__avx2;
            break;
        case KILN_ISA_AVX512:
        case KILN_ISA_AVXVNNI:
            /* AVX2's kernels, q4_0 / q8_0 on VNNI and (avx512) the K-quant
             * dots on 512-bit integer steps, all bit-identical to AVX2's */
            SET_SIMD(k, avx2);
            k->vec_dot_1[KILN_TYPE_IQ4_NL] = iq4_nl_q8_0_vec_dot_gemv__avx2;
            k->vec_dot_y4[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_y4__avx2;
            k->vec_dot_rows[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_rows__avx2;
            k->vec_dot_rows[KILN_TYPE_Q5_K] = q5_K_q8_K_vec_dot_rows__avx2;
            if (k->isa_id == KILN_ISA_AVX512) {
                SET(k, Q4_0, q4_0_q8_0_vec_dot__avx512, Q8_0);
                SET(k, Q8_0, q8_0_q8_0_vec_dot__avx512, Q8_0);
                SET(k, Q4_K, q4_K_q8_K_vec_dot__avx512, Q8_K);
                SET(k, Q5_K, q5_K_q8_K_vec_dot__avx512, Q8_K);
                SET(k, Q6_K, q6_K_q8_K_vec_dot__avx512, Q8_K);
                k->vec_dot_y4[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_y4__avx512;
                k->vec_dot_rows[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_rows__avx512;
                k->vec_dot_rows[KILN_TYPE_Q5_K] = q5_K_q8_K_vec_dot_rows__avx512;
                SET(k, IQ4_NL, iq4_nl_q8_0_vec_dot__avx512, Q8_0);
                k->vec_dot_1[KILN_TYPE_IQ4_NL] = iq4_nl_q8_0_vec_dot_gemv__avx512;
            } else {
                SET(k, Q4_0, q4_0_q8_0_vec_dot__avxvnni, Q8_0);
                SET(k, Q8_0, q8_0_q8_0_vec_dot__avxvnni, Q8_0);
                SET(k, IQ4_NL, iq4_nl_q8_0_vec_dot__avxvnni, Q8_0);
                k->vec_dot_1[KILN_TYPE_IQ4_NL] = iq4_nl_q8_0_vec_dot_gemv__avxvnni;
            }
            break;
#endif
#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
        case KILN_ISA_NEON:
            if (kiln_cpu_has_dotprod()) {
                SET_SIMD(k, neon_dotprod);
                k->vec_dot_n[KILN_TYPE_Q4_0] = q4_0_q8_0_vec_dot_n__neon_dotprod;
                k->vec_dot_n[KILN_TYPE_Q8_0] = q8_0_q8_0_vec_dot_n__neon_dotprod;
            } else {
                SET_SIMD(k, neon);
            }
            break;
#endif
#if defined(__wasm_simd128__)
        case KILN_ISA_WASM_SIMD128: SET_SIMD(k, wasm_simd128); break;
#endif
#if defined(__wasm_simd128__) && defined(__wasm_relaxed_simd__)
        case KILN_ISA_WASM_RELAXED:
            SET_SIMD(k, wasm_simd128);
            /* the same bits either way (kernels_wasm_relaxed.c) */
            if (kiln_wasm_relaxed_dot_add_direct()) {
                SET(k, Q4_0, q4_0_q8_0_vec_dot__wasm_relaxed_dotadd, Q8_0);
                SET(k, Q8_0, q8_0_q8_0_vec_dot__wasm_relaxed_dotadd, Q8_0);
            } else {
                SET(k, Q4_0, q4_0_q8_0_vec_dot__wasm_relaxed, Q8_0);
                SET(k, Q8_0, q8_0_q8_0_vec_dot__wasm_relaxed, Q8_0);
            }
            SET(k, Q6_K, q6_K_q8_K_vec_dot__wasm_relaxed, Q8_K);
            SET(k, Q5_K, q5_K_q8_K_vec_dot__wasm_relaxed, Q8_K);
            k->vec_dot_rows[KILN_TYPE_Q6_K] = q6_K_q8_K_vec_dot_rows__wasm_relaxed;
            k->vec_dot_rows[KILN_TYPE_Q5_K] = q5_K_q8_K_vec_dot_rows__wasm_relaxed;
            break;
#endif
        default: break;
    }

    /* activations: the reference quantizers with ggml x86's rounding
     * (kiln_quantize_row_q8_0_act), so results track llama.cpp's */
    k->from_float[KILN_TYPE_Q8_0] = kiln_quantize_row_q8_0_act;
    k->from_float[KILN_TYPE_Q8_1] = kiln_quantize_row_q8_1_act;
    k->from_float[KILN_TYPE_Q8_K] = kiln_quantize_row_q8_K_ref;
    /* llama.cpp's arm64 build scales by 1 / (amax / 127) */
    if (k->isa_id == KILN_ISA_NEON) {
        k->from_float[KILN_TYPE_Q8_0] = kiln_quantize_row_q8_0_act_arm;
        k->from_float[KILN_TYPE_Q8_1] = kiln_quantize_row_q8_1_act_arm;
    }
#if defined(__wasm_simd128__)
    /* the same bytes on SIMD128 vectors */
    if (k->isa_id == KILN_ISA_WASM_SIMD128 || k->isa_id == KILN_ISA_WASM_RELAXED) {
        k->from_float[KILN_TYPE_Q8_0] = kiln_quantize_row_q8_0_act__wasm_simd128;
    }
#endif
#if defined(__x86_64__) && !defined(__EMSCRIPTEN__)
    /* the same bytes on 8-lane vectors */
    if (k->isa_id == KILN_ISA_AVX2 || k->isa_id == KILN_ISA_AVX512 || k->isa_id == KILN_ISA_AVXVNNI) {
        k->from_float[KILN_TYPE_Q8_0] = kiln_quantize_row_q8_0_act__avx2;
    }
#endif
}
