/*
 * ggml_repack_check_arm.c — Kiln's arm64 K-quant x8 kernels against
 * llama.cpp's own, bit for bit: an aarch64 program (run under qemu on a
 * dotprod CPU by scripts/test-arm-oracle.sh) that loads node-llama-cpp's
 * linux-arm64 libggml-base.so and one libggml-cpu-<variant>.so (armv8.2_2:
 * dotprod, no i8mm) and calls its exported ggml_gemv_q{4,5,6}_K_8x4_q8_K,
 * ggml_gemm_q{4,5,6}_K_8x4_q8_K and ggml_quantize_mat_q8_K_4x4 on the same
 * weights as Kiln's NEON table's vec_dot_x4 / gemm_x4 (Q5_K / Q6_K: the
 * bytes kiln_repack_tensor wrote, which are ggml's block_q{5,6}_Kx8; Q4_K:
 * ggml's 8x4 interleave made here from the plain rows, Kiln's own layout
 * being its 8x8 one). Also: its 4-row quantizer's bytes against Kiln's
 * from_float[Q8_K] row by row (llama.cpp's arm64 4-row quantizer is the
 * plain one), and how many results its gemv and gemm orders differ in (so
 * the check is known to discriminate where they differ: Q6_K).
 *
 *   ggml_repack_check_arm <libggml-base.so> <libggml-cpu-VARIANT.so>
 *
 * Prints one line per check and "N passed, M failed"; exit status 1 on any
 * mismatch, 2 when the libraries or symbols cannot be loaded.
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
static kiln_fp16_t rand_scale(void) {
    const float v = ldexpf(0.5f + (float) (next_u32() % 1000) / 1000.0f, -(int) (next_u32() % 12) - 4);
    return kiln_fp32_to_fp16(next_u32() % 4 ? v : -v);
}

/* random valid rows of t (any bytes, finite fp16 super-block scales) */
static void fill_rows(enum kiln_type t, void * data, size_t nblocks) {
    const size_t bs = kiln_type_size(t);
    for (size_t i = 0; i < nblocks * bs; i++) ((uint8_t *) data)[i] = (uint8_t) next_u32();
    for (size_t b = 0; b < nblocks; b++) {
        char * blk = (char *) data + b * bs;
        if (t == KILN_TYPE_Q6_K) {
            ((block_q6_K *) blk)->d = rand_scale();
        } else {
            /* Q4_K and Q5_K: d, dmin first */
            ((kiln_fp16_t *) blk)[0] = rand_scale();
            ((kiln_fp16_t *) blk)[1] = rand_scale();
        }
    }
}

/* ggml's Q4_K 8x4 interleave (its block_q4_Kx8 with 4-byte pieces) from
 * Kiln's x8 group (8x8 pieces): d, dmin and the 96 scale bytes are the
 * same; qs piece k (4 bytes) of row r at (8 k + r) * 4 */
static void q4_K_to_8x4(const block_q4_Kx8 * in, int64_t nb, block_q4_Kx8 * out) {
    for (int64_t b = 0; b < nb; b++) {
        out[b] = in[b];
        for (int r = 0; r < 8; r++) {
            for (int k = 0; k < 32; k++) memcpy(out[b].qs + (8 * k + r) * 4, in[b].qs + (8 * (k / 2) + r) * 8 + 4 * (k % 2), 4);
        }
    }
}

/* ggml's block_q8_Kx4 (4 rows per super-block: d[4], 4-byte interleaved
 * quants, bsums 4 at a time per row) back to 4 plain q8_K rows */
static void q8_Kx4_to_rows(const char * in, int64_t nb, block_q8_K * rows[4]) {
    const size_t xb = 4 * sizeof(float) + 4 * QK_K + 4 * (QK_K / 16) * sizeof(int16_t);
    for (int64_t b = 0; b < nb; b++) {
        const char * blk = in + (size_t) b * xb;
        const int8_t * qs = (const int8_t *) (blk + 16);
        int16_t bs[64];
        memcpy(bs, blk + 16 + 4 * QK_K, sizeof bs);
        for (int r = 0; r < 4; r++) {
            memcpy(&rows[r][b].d, blk + 4 * r, 4);
            for (int j = 0; j < QK_K / 4; j++) memcpy(rows[r][b].qs + 4 * j, qs + 16 * j + 4 * r, 4);
            /* the 16 bsums of row r: groups of 4, row after row */
            for (int g = 0; g < 4; g++) {
                for (int i = 0; i < 4; i++) rows[r][b].bsums[4 * g + i] = bs[16 * g + 4 * r + i];
            }
        }
    }
}

static void check_type(enum kiln_type t, const struct kiln_kernels * kn, void * cpu, int nb, int * n_order_diff) {
    static const char * names[3][2] = { { "ggml_gemv_q4_K_8x4_q8_K", "ggml_gemm_q4_K_8x4_q8_K" },
                                        { "ggml_gemv_q5_K_8x4_q8_K", "ggml_gemm_q5_K_8x4_q8_K" },
                                        { "ggml_gemv_q6_K_8x4_q8_K", "ggml_gemm_q6_K_8x4_q8_K" } };
    const int ti = t == KILN_TYPE_Q4_K ? 0 : t == KILN_TYPE_Q5_K ? 1 : 2;
    ggml_gemx_t g_gemv = (ggml_gemx_t) dlsym(cpu, names[ti][0]);
    ggml_gemx_t g_gemm = (ggml_gemx_t) dlsym(cpu, names[ti][1]);
    ggml_qmat_t g_qmat = (ggml_qmat_t) dlsym(cpu, "ggml_quantize_mat_q8_K_4x4");
    char what[200];
    if (!g_gemv || !g_gemm || !g_qmat) {
        snprintf(what, sizeof what, "%s / %s / ggml_quantize_mat_q8_K_4x4 exported", names[ti][0], names[ti][1]);
        check(0, what);
        return;
    }
    const int64_t n = (int64_t) nb * QK_K;
    struct kiln_init_params ip = { (size_t) 8 * nb * 256 * 2 + (1 << 20), NULL, false };
    struct kiln_context * ctx = kiln_init(ip);
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 8);
    fill_rows(t, w->data, (size_t) 8 * nb);
    const size_t rs = w->nb[1];
    char * plain = malloc(kiln_nbytes(w));
    memcpy(plain, w->data, kiln_nbytes(w));
    if (!kiln_repack_tensor(w)) {
        check(0, kiln_last_error());
        kiln_free(ctx);
        return;
    }
    void * gx = w->data;
    block_q4_Kx8 * q48x4 = NULL;
    if (t == KILN_TYPE_Q4_K) {
        q48x4 = malloc(sizeof(block_q4_Kx8) * (size_t) nb);
        q4_K_to_8x4(w->data, nb, q48x4);
        gx = q48x4;
    }
    /* 4 activation rows: random, all +-large, a spike, near-ties of |max| */
    float * xf = malloc(sizeof(float) * (size_t) (4 * n));
    for (int r = 0; r < 4; r++) {
        for (int64_t i = 0; i < n; i++) {
            float v = (float) ((int) (next_u32() % 2000001) - 1000000) / 250000.0f;
            if (r == 1) v = (i * 7) % 3 ? 5.0f : -5.0f;
            if (r == 2 && i % 97 == 3) v = -60.0f;
            if (r == 3 && i % 64 == 5) v = i % 128 == 5 ? 9.0f : -9.0f;
            xf[r * n + i] = v;
        }
    }
    const size_t x4b = (4 * sizeof(float) + 4 * QK_K + 4 * (QK_K / 16) * sizeof(int16_t)) * (size_t) nb;
    char * yq4 = malloc(x4b);
    g_qmat(xf, yq4, n);
    /* Kiln's activation rows, one after another (row stride ys) */
    const size_t ys = sizeof(block_q8_K) * (size_t) nb;
    block_q8_K * kqa = malloc(4 * ys);
    block_q8_K * rows[4], * kq[4];
    for (int r = 0; r < 4; r++) {
        rows[r] = malloc(ys);
        kq[r] = kqa + (size_t) r * nb;
        kn->from_float[KILN_TYPE_Q8_K](xf + r * n, kq[r], n);
    }
    q8_Kx4_to_rows(yq4, nb, rows);
    int qbad = 0;
    for (int r = 0; r < 4; r++) qbad += memcmp(rows[r], kq[r], sizeof(block_q8_K) * (size_t) nb) != 0;
    snprintf(what, sizeof what, "%s nb=%d: ggml_quantize_mat_q8_K_4x4's bytes == Kiln's q8_K rows (4 rows)", kiln_type_name(t), nb);
    check(!qbad, what);

    /* mat-vec: each row alone */
    int bad = 0, diff_orders = 0;
    float gm[4][8], gv[4][8], ks[4][8];
    for (int r = 0; r < 4; r++) {
        g_gemv((int) n, gv[r], 8, gx, kq[r], 1, 8);
        kn->vec_dot_x4[t](n, ks[r], w->data, kq[r]);
        bad += memcmp(gv[r], ks[r], sizeof ks[r]) != 0;
    }
    /* how many of them the other orders at hand differ in: Kiln's plain
     * (not repacked) NEON dot, and for Q4_K its x8 kernels in AVX2's
     * mat-vec order (the baseline NEON build) */
    int d_plain = 0, d_avx2 = 0;
    for (int r = 0; r < 4; r++) {
        for (int i = 0; i < 8; i++) {
            float v;
            kn->vec_dot[t](n, &v, plain + i * rs, kq[r]);
            d_plain += memcmp(&v, &gv[r][i], sizeof v) != 0;
        }
        if (t == KILN_TYPE_Q4_K) {
            float v8[8];
            q4_Kx8_q8_K_vec_dot__neon(n, v8, w->data, kq[r]);
            for (int i = 0; i < 8; i++) d_avx2 += memcmp(&v8[i], &gv[r][i], sizeof(float)) != 0;
        }
    }
    char avx2[48] = "";
    if (t == KILN_TYPE_Q4_K) snprintf(avx2, sizeof avx2, ", AVX2's x8 order in %d", d_avx2);
    snprintf(what, sizeof what, "%s nb=%d: Kiln vec_dot_x4 (%s) == %s, 4 x 8 results (the plain dot differs in %d%s)",
             kiln_type_name(t), nb, kn->isa, names[ti][0], d_plain, avx2);
    check(!bad, what);
    /* batched: the 4 rows at once */
    g_gemm((int) n, &gm[0][0], 8, gx, yq4, 4, 8);
    float kg[4 * 8];
    kn->gemm_x4[t](n, 4, kg, 8, w->data, kqa, ys);
    bad = 0;
    for (int r = 0; r < 4; r++) {
        bad += memcmp(gm[r], kg + 8 * r, 8 * sizeof(float)) != 0;
        for (int c = 0; c < 8; c++) diff_orders += memcmp(&gm[r][c], &gv[r][c], sizeof(float)) != 0;
    }
    snprintf(what, sizeof what, "%s nb=%d: Kiln gemm_x4 == %s, 4 x 8 results (gemv and gemm orders differ in %d)", kiln_type_name(t), nb,
             names[ti][1], diff_orders);
    check(!bad, what);
    *n_order_diff += diff_orders;
    for (int r = 0; r < 4; r++) free(rows[r]);
    free(kqa);
    free(yq4); free(xf); free(q48x4); free(plain);
    kiln_free(ctx);
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s <libggml-base.so> <libggml-cpu-VARIANT.so>\n", argv[0]);
        return 2;
    }
    if (!dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 2;
    }
    void * cpu = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (!cpu) {
        fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
        return 2;
    }
    void (*g_init)(void) = (void (*)(void)) dlsym(cpu, "ggml_cpu_init");
    if (g_init) g_init();
    const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
    if (!kn || !kiln_cpu_has_dotprod() || !kn->vec_dot_x4[KILN_TYPE_Q6_K]) {
        fprintf(stderr, "this CPU has no dotprod: Kiln's NEON table has no arm64-order K-quant x8 kernels to compare (run on neoverse-n1)\n");
        return 2;
    }
    static const enum kiln_type types[3] = { KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K };
    static const int nbs[4] = { 1, 3, 16, 40 };
    for (int ti = 0; ti < 3; ti++) {
        int order_diff = 0;
        for (int i = 0; i < 4; i++) check_type(types[ti], kn, cpu, nbs[i], &order_diff);
        printf("%s: llama.cpp's gemv and gemm results differed in %d of %d\n", kiln_type_name(types[ti]), order_diff, 4 * 4 * 8);
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
