/*
 * test_repack_q6_K.c — Q6_K weights in the x4 layout (src/cpu/repack.h; wasm
 * builds only, where it is Q6_K's repacked layout) and the wasm
 * relaxed-SIMD kernels that read it. The contract: every row's
 * result bit-identical to the table's plain q6_K vec_dot (on the relaxed
 * table q6_K_q8_K_vec_dot__wasm_relaxed, SIMD128's bits: ggml's wasm
 * order, wllama's results), checked against both plain kernels:
 *  - mat-vec and batched kernels at 1..9 and 40 super-blocks, misaligned
 *    pointers, 1..70 activation rows (past the batched kernel's 64), on
 *    quantized rows, random bytes, the extremes (6-bit values 0 / 63,
 *    scales -128 / 127, activations -128 / 127: i16 pair sums of +-16128
 *    added in pairs) and inf / nan / subnormal / zero super-block scales;
 *  - that the comparison catches a 1-ulp change of one row's result and a
 *    flipped quant bit of the layout (a perturbation must fail);
 *  - mul_mat on repacked weights on every table, element by element
 *    against the table's vec_dot on the plain rows and against mul_mat on
 *    the plain tensor (1..13, 64 + 6 activation rows, tail rows, broadcast
 *    batches, 1/2/4 threads), and by NMSE against double precision: the
 *    tables without the x4 kernels (wasm SIMD128, scalar) read the layout
 *    through kiln_repack_unpack_row;
 *  - unpacking gives the plain bytes back; which tables repack Q6_K (wasm
 *    relaxed only); bad input.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "cpu/kernels.h"
#include "cpu/arch/quant_dot.h"
#include "cpu/repack.h"

#include <math.h>
#include <stddef.h>

#define NC 70 /* activation rows: past the batched kernel's 64 per pass */

/* weights: 0 quantized from floats, 1 random bytes, 2 extremes (all 63 or
 * all 0 by row, scales -128 / 127) */
static void fill_q6_K(char * rows, int nrows, int64_t n, int mode) {
    const size_t rs = kiln_row_size(KILN_TYPE_Q6_K, n);
    float * x = malloc(sizeof(float) * (size_t) n);
    for (int r = 0; r < nrows; r++) {
        block_q6_K * b = (block_q6_K *) (rows + (size_t) r * rs);
        if (mode == 0) {
            for (int64_t i = 0; i < n; i++) x[i] = tu_rand_uniform(-1, 1) + (i % 7 == 0 ? 0.5f : 0.0f);
            kiln_get_type_traits(KILN_TYPE_Q6_K)->from_float_ref(x, b, n);
            continue;
        }
        for (int64_t j = 0; j < n / QK_K; j++) {
            const uint8_t v = mode == 2 ? (r % 2 ? 0xff : 0) : 0;
            for (int i = 0; i < 128; i++) b[j].ql[i] = mode == 1 ? (uint8_t) tu_rand_u64() : v;
            for (int i = 0; i < 64; i++) b[j].qh[i] = mode == 1 ? (uint8_t) tu_rand_u64() : v;
            for (int i = 0; i < 16; i++) b[j].scales[i] = (int8_t) (mode == 2 ? (i % 2 ? 127 : -128) : (int8_t) tu_rand_u64());
            b[j].d = (kiln_fp16_t) (0x2400 + (tu_rand_u64() & 0x3ff) + (tu_rand_u64() & 1 ? 0x8000 : 0));
        }
    }
    free(x);
}

/* activation row c: random floats quantized (mode < 2), or all -128 / 127
 * by row (mode 2, bsums recomputed) */
static void fill_act(const struct kiln_kernels * k, char * y, int64_t n, int c, int mode) {
    float * f = malloc(sizeof(float) * (size_t) n);
    for (int64_t i = 0; i < n; i++) f[i] = tu_rand_uniform(-4, 4) * (c % 3 == 2 ? 40.0f : 1.0f);
    k->from_float[KILN_TYPE_Q8_K](f, y, n);
    free(f);
    if (mode != 2) return;
    block_q8_K * b = (block_q8_K *) y;
    for (int64_t j = 0; j < n / QK_K; j++) {
        for (int i = 0; i < QK_K; i++) b[j].qs[i] = (int8_t) (c % 2 ? 127 : -128);
        for (int i = 0; i < 16; i++) b[j].bsums[i] = (int16_t) (16 * b[j].qs[0]);
    }
}

static bool g_special; /* nan results compare as both nan (payloads are the engine's) */
static bool same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (g_special && isnan(a) && isnan(b)); }

/* mismatches of an x4 mat-vec kernel against the plain kernel `plain` on
 * the 4 rows of a group (plain rows at p, packed group at xp), ncol rows
 * of activations */
static int cmp_matvec(kiln_vec_dot_t x4, kiln_vec_dot_t plain, int64_t n, const char * p, size_t rs, const char * xp, const char * yp,
                      size_t ys, int ncol, const char * what) {
    int bad = 0;
    for (int c = 0; c < ncol; c++) {
        float s[4], e;
        x4(n, s, xp, yp + c * ys);
        for (int r = 0; r < 4; r++) {
            plain(n, &e, p + r * rs, yp + c * ys);
            if (!same(s[r], e)) {
                if (what && bad < 3) printf("  %s: col %d row %d: %.9g vs plain %.9g\n", what, c, r, s[r], e);
                bad++;
            }
        }
    }
    return bad;
}

static kiln_vec_dot_t g_real_x4;
static void x4_one_ulp_off(int64_t n, float * s, const void * x, const void * y) {
    g_real_x4(n, s, x, y);
    s[2] = nextafterf(s[2], INFINITY);
}

static int n_cases, n_gemm, n_ulp, n_flip, n_perturbed;

/* one table's x4 and batched kernels on 2 groups (8 rows) of nb super-blocks */
static void test_kernels(const struct kiln_kernels * k, int nb, int mode, kiln_fp16_t special) {
    const int64_t n = (int64_t) nb * QK_K;
    const size_t rs = kiln_row_size(KILN_TYPE_Q6_K, n), ys = kiln_row_size(KILN_TYPE_Q8_K, n) + 4;
    struct kiln_context * ctx = tu_ctx(8 * rs + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q6_K, n, 8);
    fill_q6_K(w->data, 8, n, mode);
    g_special = special != 0;
    if (special) ((block_q6_K *) ((char *) w->data + 2 * rs))[nb - 1].d = special; /* row 2, last super-block */
    char * plain = malloc(8 * rs);
    memcpy(plain, w->data, 8 * rs);
    CHECK(kiln_repack_tensor(w) && kiln_repacked_rows(w) == 4, "repack: %s", kiln_last_error());
    char * xb = malloc(8 * rs + 8), * yb = malloc(NC * ys + 8);
    char * xp = xb + 2, * yp = yb + 4; /* misaligned, keeping fp16 / float alignment */
    memcpy(xp, w->data, 8 * rs);
    for (int c = 0; c < NC; c++) fill_act(k, yp + c * ys, n, c, mode);
    const kiln_vec_dot_t x4 = k->vec_dot_x4[KILN_TYPE_Q6_K], vd = k->vec_dot[KILN_TYPE_Q6_K];
    char what[96];
    snprintf(what, sizeof what, "%s q6_K x4 nb=%d mode %d special 0x%04x", k->isa, nb, mode, special);
    int bad = 0;
    for (int g = 0; g < 2; g++) {
        bad += cmp_matvec(x4, vd, n, plain + g * 4 * rs, rs, xp + g * 4 * rs, yp, ys, 9, what);
#if defined(__wasm_simd128__)
        /* SIMD128's kernel, the order the relaxed one keeps */
        bad += cmp_matvec(x4, q6_K_q8_K_vec_dot__wasm_simd128, n, plain + g * 4 * rs, rs, xp + g * 4 * rs, yp, ys, 3, what);
#endif
    }
    CHECK(!bad, "%s: mat-vec == plain bit for bit (%d mismatches)", what, bad);
    n_cases++;
    /* the batched kernel: every column count for small nb, the edges of the
     * 64-row pass for nb = 40 */
    float * e = malloc(sizeof(float) * NC * 4);
    for (int c = 0; c < NC; c++) {
        for (int r = 0; r < 4; r++) vd(n, &e[4 * c + r], plain + r * rs, yp + c * ys);
    }
    enum { SS = 11 };
    float * s = malloc(sizeof(float) * NC * SS);
    bad = 0;
    for (int ncols = 1; ncols <= NC && !bad; ncols++) {
        if (nb > 9 && !(ncols <= 2 || (ncols >= 63 && ncols <= 65) || ncols == NC)) continue;
        for (int i = 0; i < NC * SS; i++) s[i] = -1234.5f;
        k->gemm_x4[KILN_TYPE_Q6_K](n, ncols, s, SS, xp, yp, ys);
        for (int c = 0; c < NC; c++) {
            for (int r = 0; r < SS; r++) {
                const float got = s[c * SS + r];
                if (c >= ncols || r >= 4) {
                    if (got != -1234.5f) { CHECK(0, "%s: gemm ncols %d wrote outside (col %d row %d)", what, ncols, c, r); bad++; }
                } else if (!same(got, e[4 * c + r])) {
                    if (bad < 3) printf("  %s: gemm ncols %d col %d row %d: %.9g vs plain %.9g\n", what, ncols, c, r, got, e[4 * c + r]);
                    bad++;
                }
            }
        }
    }
    CHECK(!bad, "%s: batched == plain bit for bit", what);
    n_gemm++;
    /* the comparison can fail: one row 1 ulp off, one quant bit flipped */
    if (!special && mode < 2) {
        g_real_x4 = x4;
        const int ulp = cmp_matvec(x4_one_ulp_off, vd, n, plain, rs, xp, yp, ys, 9, NULL);
        CHECK(ulp == 9, "%s: a 1-ulp change of row 2 is caught (%d of 9 columns)", what, ulp);
        xp[offsetof(block_q6_Kx4, qs) + 48 * 5 + 16 + 4 * 1] ^= 0x40; /* chunk 5, V_1, row 1: bit 2 of its fourth piece's value */
        const int flip = cmp_matvec(x4, vd, n, plain, rs, xp, yp, ys, 9, NULL);
        CHECK(flip > 0, "%s: a flipped quant bit is caught (%d of 36 results differ)", what, flip);
        n_ulp += ulp;
        n_flip += flip;
        n_perturbed++;
    }
    /* unpacking gives the plain rows back, byte for byte */
    char * un = malloc(rs);
    for (int r = 0; r < 8; r++) {
        kiln_repack_unpack_row(KILN_TYPE_Q6_K, 0, (const char *) w->data + (r / 4) * 4 * rs, r % 4, n, un);
        CHECK(memcmp(un, plain + r * rs, rs) == 0, "unpack row %d (nb %d mode %d)", r, nb, mode);
    }
    g_special = false;
    free(un); free(s); free(e); free(xb); free(yb); free(plain);
    kiln_free(ctx);
}

/* mul_mat on repacked weights (K values, N rows, M activation rows, ne02
 * matrices broadcast over ne12 batches) on every table: per element the
 * table's vec_dot on the plain row, and mul_mat on the plain tensor */
static void test_mul_mat(int64_t K, int64_t N, int64_t M, int64_t ne02, int64_t ne12) {
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * ne02 + K * M * ne12) * 16 + (8 << 20));
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, KILN_TYPE_Q6_K, K, N, ne02);
    struct kiln_tensor * wr = kiln_new_tensor_3d(ctx, KILN_TYPE_Q6_K, K, N, ne02);
    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, M, ne12);
    fill_q6_K(w->data, (int) (N * ne02), K, 0);
    memcpy(wr->data, w->data, kiln_nbytes(w));
    tu_fill_uniform(x, -2, 2);
    CHECK(kiln_repack_tensor(wr), "repack: %s", kiln_last_error());
    struct kiln_tensor * yr = kiln_mul_mat(ctx, wr, x), * yp = kiln_mul_mat(ctx, w, x);
    block_q8_K * yq = malloc(sizeof(block_q8_K) * (size_t) (K / QK_K));
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt) continue;
        kiln_cpu_force_isa(kt->isa);
        for (int nth = 1; nth <= 4; nth *= 2) {
            CHECK(tu_compute(ctx, yr, nth) == KILN_STATUS_SUCCESS && tu_compute(ctx, yp, nth) == KILN_STATUS_SUCCESS, "mul_mat: %s",
                  kiln_last_error());
            int bad = 0;
            for (int64_t b = 0; b < ne12 && !bad; b++) {
                const int64_t wb = b / (ne12 / ne02);
                for (int64_t j = 0; j < M && !bad; j++) {
                    kt->from_float[KILN_TYPE_Q8_K]((const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]), yq, K);
                    for (int64_t i = 0; i < N; i++) {
                        float e;
                        kt->vec_dot[KILN_TYPE_Q6_K](K, &e, (const char *) w->data + wb * w->nb[2] + i * w->nb[1], yq);
                        const float got = ((const float *) yr->data)[(b * M + j) * N + i], pl = ((const float *) yp->data)[(b * M + j) * N + i];
                        if (memcmp(&e, &got, sizeof e) || memcmp(&pl, &got, sizeof e)) {
                            CHECK(0, "%s K=%lld N=%lld M=%lld %d threads: [%lld,%lld,%lld] repacked %.9g, vec_dot %.9g, plain mul_mat %.9g",
                                  kt->isa, (long long) K, (long long) N, (long long) M, nth, (long long) i, (long long) j, (long long) b, got,
                                  e, pl);
                            bad = 1;
                            break;
                        }
                    }
                }
            }
            CHECK(!bad, "%s mul_mat q6_K x4 K=%lld N=%lld M=%lld batches %lld/%lld %d threads element by element (%s)", kt->isa,
                  (long long) K, (long long) N, (long long) M, (long long) ne02, (long long) ne12, nth,
                  kt->vec_dot_x4[KILN_TYPE_Q6_K] ? "x4 kernels" : "unpacked rows");
        }
    }
    kiln_cpu_force_isa(NULL);
    /* the numbers themselves, against double precision */
    double * ref = malloc(sizeof(double) * (size_t) (N * M * ne12));
    float * wf = malloc(sizeof(float) * (size_t) K);
    for (int64_t b = 0; b < ne12; b++) {
        const int64_t wb = b / (ne12 / ne02);
        for (int64_t i = 0; i < N; i++) {
            kiln_get_type_traits(KILN_TYPE_Q6_K)->to_float((const char *) w->data + wb * w->nb[2] + i * w->nb[1], wf, K);
            for (int64_t j = 0; j < M; j++) {
                const float * xr = (const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]);
                double acc = 0;
                for (int64_t q = 0; q < K; q++) acc += (double) wf[q] * xr[q];
                ref[(b * M + j) * N + i] = acc;
            }
        }
    }
    double * out = tu_to_f64(yr);
    const double err = tu_nmse(out, ref, N * M * ne12);
    CHECK(err < 1e-3, "q6_K x4 K=%lld N=%lld M=%lld nmse %g", (long long) K, (long long) N, (long long) M, err);
    free(out); free(ref); free(wf); free(yq);
    kiln_free(ctx);
}

/* which wasm tables repack Q6_K: the relaxed one (4 rows), not SIMD128 */
static void test_wanted(void) {
    struct kiln_context * ctx = tu_ctx(1 << 20);
    int bad = 0, relaxed = 0;
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt) continue;
        const bool rx = kt->isa_id == KILN_ISA_WASM_RELAXED;
        relaxed += rx;
        if (kt->repack_rows[KILN_TYPE_Q6_K] != (rx ? 4 : 0) || (kt->vec_dot_x4[KILN_TYPE_Q6_K] != NULL) != rx ||
            (kt->gemm_x4[KILN_TYPE_Q6_K] != NULL) != rx) {
            printf("  %s: q6_K repack_rows %d, x4 kernel %d, batched %d\n", kt->isa, kt->repack_rows[KILN_TYPE_Q6_K],
                   kt->vec_dot_x4[KILN_TYPE_Q6_K] != NULL, kt->gemm_x4[KILN_TYPE_Q6_K] != NULL);
            bad++;
        }
        kiln_cpu_force_isa(kt->isa);
        for (int64_t rows = 4; rows <= 10; rows++) {
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q6_K, 256, rows);
            if (kiln_repack_wanted(w) != (rx && rows % 4 == 0)) bad++;
        }
    }
    kiln_cpu_force_isa(NULL);
    CHECK(!bad, "q6_K is repacked by the wasm relaxed table only (%d wrong)", bad);
#if defined(__wasm_relaxed_simd__)
    const struct kiln_kernels * kr = kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
    CHECK(relaxed == 1 && kr->vec_dot_x4[KILN_TYPE_Q6_K] == q6_Kx4_q8_K_vec_dot__wasm_relaxed &&
              kr->gemm_x4[KILN_TYPE_Q6_K] == q6_Kx4_q8_K_gemm__wasm_relaxed && kr->gemm_wide[KILN_TYPE_Q6_K] &&
              kr->vec_dot[KILN_TYPE_Q6_K] == q6_K_q8_K_vec_dot__wasm_relaxed,
          "the relaxed table: q6_K x4 and batched kernels, plain relaxed vec_dot");
#else
    (void) relaxed;
#endif
    struct kiln_tensor * q = kiln_new_tensor_2d(ctx, KILN_TYPE_Q6_K, 256, 3);
    memset(q->data, 0, kiln_nbytes(q));
    CHECK(!kiln_repack_tensor(q) && strstr(kiln_last_error(), "3 rows") && strstr(kiln_last_error(), "group of 4"), "3 rows: %s",
          kiln_last_error());
    kiln_free(ctx);
}

int main(void) {
    tu_seed(61);
    test_wanted();
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k || !k->vec_dot_x4[KILN_TYPE_Q6_K]) continue;
        for (int mode = 0; mode < 3; mode++) {
            for (int nb = 1; nb <= 9; nb++) test_kernels(k, nb, mode, 0);
            test_kernels(k, 40, mode, 0);
        }
        static const kiln_fp16_t specials[] = { 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x83ff, 0x0000, 0x03ff };
        for (size_t si = 0; si < sizeof specials / sizeof specials[0]; si++) test_kernels(k, 3, 1, specials[si]);
    }
    /* the layout alone, on a table without the kernels: unpacking round trip */
    if (!n_cases) {
        const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
        const int64_t n = 3 * QK_K;
        const size_t rs = kiln_row_size(KILN_TYPE_Q6_K, n);
        struct kiln_context * ctx = tu_ctx(8 * rs + (1 << 20));
        struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q6_K, n, 8);
        fill_q6_K(w->data, 8, n, 1);
        char * plain = malloc(8 * rs), * un = malloc(rs);
        memcpy(plain, w->data, 8 * rs);
        CHECK(kiln_repack_tensor(w), "repack: %s", kiln_last_error());
        int bad = 0;
        for (int r = 0; r < 8; r++) {
            kiln_repack_unpack_row(KILN_TYPE_Q6_K, 0, (const char *) w->data + (r / 4) * 4 * rs, r % 4, n, un);
            bad += memcmp(un, plain + r * rs, rs) != 0;
        }
        CHECK(!bad && memcmp(w->data, plain, 8 * rs) != 0, "%s: q6_K x4 layout unpacks to the plain bytes", ks->isa);
        free(plain); free(un);
        kiln_free(ctx);
    }
    for (int64_t M = 1; M <= 13; M += (M < 9 ? 1 : 4)) test_mul_mat(512, 16, M, 1, 1);
    test_mul_mat(256, 46, 7, 1, 1);   /* 11 groups and 2 plain tail rows */
    test_mul_mat(768, 24, 70, 1, 1);  /* more activation rows than one block of them (64) */
    test_mul_mat(256, 16, 5, 2, 4);   /* broadcast batches */
    test_mul_mat(256, 100, 1, 1, 1);  /* mat-vec: chunks of 32 rows, 25 groups */
    printf("q6_K x4 kernels == plain bit for bit: %d mat-vec and %d batched cases\n", n_cases, n_gemm);
    if (n_perturbed) {
        printf("perturbations caught in %d cases: row 2 one ulp off %d of %d results, one quant bit flipped %d of %d\n", n_perturbed, n_ulp,
               9 * n_perturbed, n_flip, 36 * n_perturbed);
    }
    if (!n_cases) printf("q6_K x4 kernels NOT TESTED on this build: only the wasm relaxed table has them (layout and unpacking path checked)\n");
    return tu_finish();
}
