/*
 * ggml_repack_check.c — Kiln's Q4_K x8 kernels against llama.cpp's own, bit
 * for bit: loads node-llama-cpp's libggml-base.so and one
 * libggml-cpu-<variant>.so (the oracle's pinned haswell build) and calls its
 * exported ggml_gemv_q4_K_8x8_q8_K / ggml_gemm_q4_K_8x8_q8_K /
 * ggml_quantize_mat_q8_K_4x8 / quantize_row_q8_K_ref on the bytes Kiln's
 * kiln_repack_tensor wrote (the layout is ggml's block_q4_Kx8, so the same
 * bytes feed both), for every Kiln kernel row with Q4_K x8 kernels; and
 * every Kiln row's plain Q5_K and Q6_K dot (those types are not repacked on
 * x86) and plain Q4_K dot (Q4_K weights with a row count that is not a
 * multiple of 8) against the build's ggml_vec_dot_q{4,5,6}_K_q8_K, and the
 * batched q6_K kernel (vec_dot_rows, which llama.cpp's x86 batches stand for
 * by calling that vec_dot per pair) against the same.
 *
 *   ggml_repack_check <dir with libggml-base.so> <libggml-cpu-VARIANT.so>
 *
 * Built and run by scripts/test-oracle.sh. Prints one line per check and
 * "N passed, M failed"; exit status 1 on any mismatch.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "blocks.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"

typedef void (*ggml_gemx_t)(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
typedef void (*ggml_qmat_t)(const float * x, void * vy, int64_t k);
typedef void (*ggml_qrow_t)(const float * x, void * vy, int64_t k);
typedef void (*ggml_vdot_t)(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc);

static int passed, failed;

static void check(int ok, const char * what) {
    if (ok) passed++; else failed++;
    printf("%s %s\n", ok ? "pass" : "FAIL", what);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (uint32_t) (rng >> 16);
}
static float next_f(void) { return (float) ((int) (next_u32() % 2000001) - 1000000) / 1000000.0f; }

/* random valid Q4_K rows: any byte pattern is a valid block given finite
 * fp16 scales */
static void fill_q4_K(block_q4_K * b, size_t nblocks) {
    for (size_t i = 0; i < nblocks; i++) {
        for (size_t k = 0; k < sizeof b[i].scales; k++) b[i].scales[k] = (uint8_t) next_u32();
        for (size_t k = 0; k < sizeof b[i].qs; k++) b[i].qs[k] = (uint8_t) next_u32();
        b[i].d = kiln_fp32_to_fp16(ldexpf(0.5f + (float) (next_u32() % 1000) / 1000.0f, -(int) (next_u32() % 12) - 4));
        b[i].dmin = kiln_fp32_to_fp16(ldexpf(0.5f + (float) (next_u32() % 1000) / 1000.0f, -(int) (next_u32() % 12) - 4));
    }
}

/* random valid Q5_K / Q6_K rows (any bytes, finite fp16 scales; Q6_K's
 * int8 sub-block scales over their whole range) */
static kiln_fp16_t rand_scale(void) {
    return kiln_fp32_to_fp16(ldexpf(0.5f + (float) (next_u32() % 1000) / 1000.0f, -(int) (next_u32() % 12) - 4));
}
static void fill_bytes(void * p, size_t n) {
    for (size_t k = 0; k < n; k++) ((uint8_t *) p)[k] = (uint8_t) next_u32();
}

/* the plain (not repacked) Q4_K, Q5_K and Q6_K dots of every Kiln row against
 * the build's own, bit for bit, over 1..40 super-blocks */
static void check_plain_dots(void * cpu, ggml_qrow_t g_qrow) {
    static const enum kiln_type types[3] = { KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K };
    static const char * names[3] = { "ggml_vec_dot_q4_K_q8_K", "ggml_vec_dot_q5_K_q8_K", "ggml_vec_dot_q6_K_q8_K" };
    static const int nbs[4] = { 1, 3, 16, 40 };
    /* these dots read fp16 through ggml's table, which ggml_cpu_init fills */
    void (*g_init)(void) = (void (*)(void)) dlsym(cpu, "ggml_cpu_init");
    if (!g_init) { check(0, "ggml_cpu_init"); return; }
    g_init();
    for (int t = 0; t < 3; t++) {
        ggml_vdot_t g_dot = (ggml_vdot_t) dlsym(cpu, names[t]);
        if (!g_dot) { check(0, names[t]); continue; }
        for (int si = 0; si < 4; si++) {
            const int nb = nbs[si], n = nb * QK_K, rows = 16;
            const size_t bsz = kiln_type_size(types[t]);
            uint8_t * w = malloc(bsz * (size_t) nb * rows);
            for (int b = 0; b < nb * rows; b++) {
                uint8_t * blk = w + bsz * (size_t) b;
                fill_bytes(blk, bsz);
                if (types[t] == KILN_TYPE_Q4_K) {
                    ((block_q4_K *) blk)->d = rand_scale();
                    ((block_q4_K *) blk)->dmin = rand_scale();
                } else if (types[t] == KILN_TYPE_Q5_K) {
                    ((block_q5_K *) blk)->d = rand_scale();
                    ((block_q5_K *) blk)->dmin = rand_scale();
                } else {
                    ((block_q6_K *) blk)->d = rand_scale();
                }
            }
            float * act = malloc(sizeof(float) * (size_t) n);
            for (int i = 0; i < n; i++) act[i] = next_f() * (i % 7 == 0 ? 4.0f : 1.0f);
            block_q8_K * y = malloc(sizeof(block_q8_K) * (size_t) nb);
            g_qrow(act, y, n);
            float ref[16];
            int differ_scalar = 0;
            for (int r = 0; r < rows; r++) g_dot(n, &ref[r], 0, w + bsz * (size_t) nb * r, 0, y, 0, 1);
            for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
                const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
                if (!k || isa == KILN_ISA_SCALAR) continue;
                int same = 0;
                for (int r = 0; r < rows; r++) {
                    float got = 0;
                    k->vec_dot[types[t]](n, &got, w + bsz * (size_t) nb * r, y);
                    same += memcmp(&got, &ref[r], sizeof got) == 0;
                }
                char what[160];
                snprintf(what, sizeof what, "%s %s plain dot == %s (%d super-blocks, %d of %d rows)", k->isa,
                         kiln_type_name(types[t]), names[t], nb, same, rows);
                check(same == rows, what);
                if (k->vec_dot_rows[types[t]]) {
                    /* the batched kernel, all 16 weight rows in one call */
                    float got[16];
                    k->vec_dot_rows[types[t]](n, rows, 1, got, (size_t) rows, w, bsz * (size_t) nb, y, sizeof(block_q8_K) * (size_t) nb);
                    same = 0;
                    for (int r = 0; r < rows; r++) same += memcmp(&got[r], &ref[r], sizeof got[r]) == 0;
                    snprintf(what, sizeof what, "%s %s vec_dot_rows == %s (%d super-blocks, %d of %d rows)", k->isa,
                             kiln_type_name(types[t]), names[t], nb, same, rows);
                    check(same == rows, what);
                }
            }
            {   /* the scalar reference's order is another one: say how often it differs */
                const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
                for (int r = 0; r < rows; r++) {
                    float got = 0;
                    ks->vec_dot[types[t]](n, &got, w + bsz * (size_t) nb * r, y);
                    differ_scalar += memcmp(&got, &ref[r], sizeof got) != 0;
                }
                printf("info: %s: Kiln's scalar order differs from ggml's in %d of %d rows (%d super-blocks)\n",
                       kiln_type_name(types[t]), differ_scalar, rows, nb);
            }
            free(w); free(act); free(y);
        }
    }
}

/* ggml's block_q8_Kx4 (4 rows' q8_K interleaved by its 4x8 quantizer) */
typedef struct { float d[4]; int8_t qs[QK_K * 4]; int16_t bsums[QK_K / 4]; } block_q8_Kx4;

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: ggml_repack_check <libggml-base.so> <libggml-cpu-VARIANT.so>\n");
        return 2;
    }
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "ggml_repack_check: %s\n", dlerror());
        return 2;
    }
    void * cpu = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (!cpu) {
        fprintf(stderr, "ggml_repack_check: %s\n", dlerror());
        return 2;
    }
    ggml_gemx_t g_gemv = (ggml_gemx_t) dlsym(cpu, "ggml_gemv_q4_K_8x8_q8_K");
    ggml_gemx_t g_gemm = (ggml_gemx_t) dlsym(cpu, "ggml_gemm_q4_K_8x8_q8_K");
    ggml_qmat_t g_qmat = (ggml_qmat_t) dlsym(cpu, "ggml_quantize_mat_q8_K_4x8");
    ggml_qrow_t g_qrow = (ggml_qrow_t) dlsym(RTLD_DEFAULT, "quantize_row_q8_K_ref");
    if (!g_gemv || !g_gemm || !g_qmat || !g_qrow) {
        fprintf(stderr, "ggml_repack_check: %s lacks a q4_K 8x8 / q8_K symbol\n", argv[2]);
        return 2;
    }

    for (int shape = 0; shape < 3; shape++) {
        const int nb = shape == 0 ? 1 : shape == 1 ? 3 : 16;   /* super-blocks per row */
        const int n = nb * QK_K, nrows = shape == 2 ? 32 : 8, ncols = shape == 0 ? 4 : shape == 1 ? 8 : 16;
        struct kiln_init_params ip = { .mem_size = (size_t) nrows * nb * sizeof(block_q4_K) + (1 << 20) };
        struct kiln_context * ctx = kiln_init(ip);
        struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q4_K, n, nrows);
        fill_q4_K(w->data, (size_t) nrows * nb);
        if (!kiln_repack_tensor(w)) {
            fprintf(stderr, "ggml_repack_check: repack failed\n");
            return 1;
        }
        float * act = malloc(sizeof(float) * (size_t) n * ncols);
        for (int i = 0; i < n * ncols; i++) act[i] = next_f() * (i % 7 == 0 ? 4.0f : 1.0f);
        /* activations the way each path quantizes them */
        block_q8_K * yrow = malloc(sizeof(block_q8_K) * (size_t) nb * ncols);     /* ggml, per row */
        block_q8_K * yk = malloc(sizeof(block_q8_K) * (size_t) nb * ncols);       /* Kiln, 4-row rule */
        block_q8_Kx4 * ymat = malloc(sizeof(block_q8_Kx4) * (size_t) nb * (ncols / 4));
        for (int c = 0; c < ncols; c++) {
            g_qrow(act + (size_t) c * n, yrow + (size_t) c * nb, n);
            kiln_quantize_row_q8_K_x4(act + (size_t) c * n, yk + (size_t) c * nb, n);
        }
        for (int g = 0; g < ncols / 4; g++) g_qmat(act + (size_t) g * 4 * n, ymat + (size_t) g * nb, n);

        float * ref_v = malloc(sizeof(float) * (size_t) nrows * ncols);
        float * ref_m = malloc(sizeof(float) * (size_t) nrows * ncols);
        float * got = malloc(sizeof(float) * (size_t) nrows * ncols);
        for (int c = 0; c < ncols; c++) g_gemv(n, ref_v + (size_t) c * nrows, 0, w->data, yrow + (size_t) c * nb, 1, nrows);
        g_gemm(n, ref_m, nrows, w->data, ymat, ncols, nrows);
        {   /* the two orders must differ somewhere, or the checks below tell nothing */
            int differ = 0;
            for (int i = 0; i < nrows * ncols; i++) differ += ref_v[i] != ref_m[i];
            printf("info: ggml's mat-vec and batched orders differ in %d of %d results\n", differ, nrows * ncols);
        }

        for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
            const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
            if (!k || !k->vec_dot_x4[KILN_TYPE_Q4_K]) continue;
            char what[160];
            /* mat-vec order, activations quantized per row */
            for (int c = 0; c < ncols; c++) {
                for (int g = 0; g < nrows / 8; g++) {
                    k->vec_dot_x4[KILN_TYPE_Q4_K](n, got + (size_t) c * nrows + 8 * g,
                                                  (const char *) w->data + (size_t) g * 8 * w->nb[1], yrow + (size_t) c * nb);
                }
            }
            snprintf(what, sizeof what, "%s q4_K x8 mat-vec == ggml_gemv_q4_K_8x8_q8_K (%d super-blocks, %d rows, %d columns)",
                     k->isa, nb, nrows, ncols);
            check(memcmp(got, ref_v, sizeof(float) * (size_t) nrows * ncols) == 0, what);
            /* batched order, activations quantized with the 4-row rule */
            for (int g = 0; g < nrows / 8; g++) {
                k->gemm_x4[KILN_TYPE_Q4_K](n, ncols, got + 8 * g, nrows, (const char *) w->data + (size_t) g * 8 * w->nb[1], yk,
                                           sizeof(block_q8_K) * nb);
            }
            snprintf(what, sizeof what, "%s q4_K x8 batched == ggml_gemm_q4_K_8x8_q8_K (%d super-blocks, %d rows, %d columns)",
                     k->isa, nb, nrows, ncols);
            check(memcmp(got, ref_m, sizeof(float) * (size_t) nrows * ncols) == 0, what);
        }
        /* the 4-row quantizer: same scales as ggml's (its quants are interleaved) */
        int dsame = 1;
        for (int g = 0; g < ncols / 4; g++) {
            for (int b = 0; b < nb; b++) {
                for (int r = 0; r < 4; r++) dsame &= ymat[g * nb + b].d[r] == yk[(size_t) (4 * g + r) * nb + b].d;
            }
        }
        check(dsame, "kiln_quantize_row_q8_K_x4 scales == ggml_quantize_mat_q8_K_4x8's");
        free(act); free(yrow); free(yk); free(ymat); free(ref_v); free(ref_m); free(got);
        kiln_free(ctx);
    }
    /* a super-block whose largest magnitude occurs with both signs, the
     * negative one first: the per-row rule and the 4-row rule differ */
    {
        float x[4 * QK_K];
        for (int i = 0; i < 4 * QK_K; i++) x[i] = next_f() * 0.5f;
        for (int r = 0; r < 4; r++) { x[r * QK_K + 3] = -1.0f; x[r * QK_K + 200] = 1.0f; }
        block_q8_Kx4 m;
        block_q8_K k[4];
        g_qmat(x, &m, QK_K);
        for (int r = 0; r < 4; r++) kiln_quantize_row_q8_K_x4(x + r * QK_K, &k[r], QK_K);
        int same = 1;
        for (int r = 0; r < 4; r++) same &= m.d[r] == k[r].d;
        check(same, "kiln_quantize_row_q8_K_x4 == ggml_quantize_mat_q8_K_4x8 on a +-max tie");
    }
    check_plain_dots(cpu, g_qrow);
    if (!kiln_kernels_for_isa(KILN_ISA_AVX512)) printf("avx512 row NOT TESTED: this CPU has no AVX-512 F+BW+VL+VNNI\n");
    if (!kiln_kernels_for_isa(KILN_ISA_AVXVNNI)) printf("avxvnni row NOT TESTED: this CPU has no AVX-VNNI\n");
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
