/*
 * test_repack_q4_K.c — Q4_K weights repacked to the x8 layout and their
 * kernels (src/cpu/repack.h). The contract, written here again from the
 * plain Q4_K block layout (not from the x8 one): per weight row and q8_K
 * activation row, integer sub-block sums sc_s * dot_s and m_s * bsum_s, then
 *  - mat-vec order: acc = fmaf((float) sum over the super-block, d * d_y, acc)
 *  - batched order: the same per pair of sub-blocks,
 * result acc - accm (llama.cpp's AVX2 repacked kernels; tests/oracle/
 * ggml_repack_check.c checks that against llama.cpp's binary itself);
 *  - arm64 order (the NEON dotprod table, llama.cpp's arm64 8x4 kernels,
 *    both forms): per pair of sub-blocks acc = fmaf((float) pair's isum,
 *    d * d_y, acc), after the super-block acc = fmaf(-(float) msum,
 *    dmin * d_y, acc), result acc; every activation row quantized plainly.
 * Every ISA row with x8 kernels, bit for bit: the kernels at 1..9 and 40
 * super-blocks with misaligned pointers and 1..9 activation rows; mul_mat
 * on repacked weights with 1..13 activation rows (rows of full groups of
 * 4 batched with the 4-row q8_K rule, the others mat-vec), tail weight rows
 * (plain), broadcast batches, 1/2/4 threads, plus NMSE against a double
 * reference; mul_mat_id over repacked experts (every row mat-vec, plain q8_K
 * quantizer); unpack_row round trip; bad inputs.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"
#include "cpu/arch/arch.h"

static float h2f(kiln_fp16_t h) { return kiln_fp16_to_fp32(h); }

static void scale_min(const uint8_t * q, int j, int * sc, int * m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

enum { ORD_MATVEC, ORD_PAIRS, ORD_ARM };

/* one plain Q4_K row against one q8_K row, in one of the orders */
static float ref_row(int64_t n, const block_q4_K * x, const block_q8_K * y, int order) {
    const int pairs = order != ORD_MATVEC;
    float acc = 0, accm = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float dd = h2f(x[b].d) * y[b].d, dm = h2f(x[b].dmin) * y[b].d;
        int isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m, dot = 0;
            scale_min(x[b].scales, s, &sc, &m);
            for (int i = 0; i < 32; i++) {
                const uint8_t q = x[b].qs[32 * (s / 2) + i];
                dot += ((s % 2) ? q >> 4 : q & 15) * y[b].qs[32 * s + i];
            }
            int bsum = 0;
            for (int i = 0; i < 32; i++) bsum += y[b].qs[32 * s + i];
            isum += sc * dot;
            msum += m * bsum;
            if (pairs && s % 2) {
                acc = fmaf((float) isum, dd, acc);
                isum = 0;
                if (order == ORD_PAIRS) {
                    accm = fmaf((float) msum, dm, accm);
                    msum = 0;
                }
            }
        }
        if (order == ORD_ARM) acc = fmaf(-(float) msum, dm, acc);
        if (!pairs) {
            acc = fmaf((float) isum, dd, acc);
            accm = fmaf((float) msum, dm, accm);
        }
    }
    return acc - accm;
}

static void fill_q4_K(struct kiln_tensor * w) {
    const int64_t n = w->ne[0], rows = kiln_nrows(w);
    float * x = malloc(sizeof(float) * (size_t) n);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < n; i++) x[i] = tu_rand_uniform(-1, 1) + (i % 5 == 0 ? 0.5f : 0.0f);
        kiln_get_type_traits(KILN_TYPE_Q4_K)->from_float_ref(x, (char *) w->data + r * w->nb[1], n);
    }
    free(x);
}

static int n_checked;
#define X8_NC 70 /* past the x86 kernels' 64-row column chunk */

/* a special super-block scale put into row 3 (0: none): g_special_min
 * selects dmin of its last super-block, else d of its first. Results then
 * compare as equal bits or both nan (nan payloads are the engine's). */
static kiln_fp16_t g_special;
static int g_special_min;
static bool same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (g_special && isnan(a) && isnan(b)); }

/* a table's order for the mat-vec (batched = 0) or batched form: arm64's
 * in the NEON dotprod kernels, AVX2's two elsewhere */
static int table_order(const struct kiln_kernels * k, int batched) {
#if defined(__aarch64__)
    if (k->vec_dot_x4[KILN_TYPE_Q4_K] == q4_Kx8_q8_K_vec_dot__neon_dotprod) return ORD_ARM;
#endif
    return batched ? ORD_PAIRS : ORD_MATVEC;
}

/* the two kernels of one table against the contract */
static void test_kernels(const struct kiln_kernels * k, int nb) {
    const int64_t n = (int64_t) nb * QK_K;
    struct kiln_context * ctx = tu_ctx((size_t) 8 * nb * sizeof(block_q4_K) * 2 + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q4_K, n, 8);
    fill_q4_K(w);
    if (g_special) {
        block_q4_K * row3 = (block_q4_K *) ((char *) w->data + 3 * w->nb[1]);
        if (g_special_min) row3[nb - 1].dmin = g_special;
        else row3[0].d = g_special;
    }
    block_q4_K * plain = malloc(kiln_nbytes(w));
    memcpy(plain, w->data, kiln_nbytes(w));
    CHECK(kiln_repack_tensor(w), "repack: %s", kiln_last_error());
    CHECK(kiln_repacked_rows(w) == 8, "x8 groups");
    /* misaligned copies of the group and of X8_NC activation rows (the
     * batched kernels: every pass width and more than one column chunk) */
    const size_t ys = sizeof(block_q8_K) * nb + 4;
    char * xb = malloc(kiln_nbytes(w) + 8), * yb = malloc(X8_NC * ys + 8);
    char * xp = xb + 2, * yp = yb + 4;
    memcpy(xp, w->data, kiln_nbytes(w));
    float * yf = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < X8_NC; c++) {
        for (int64_t i = 0; i < n; i++) yf[i] = tu_rand_uniform(-4, 4);
        kiln_quantize_row_q8_K_x4(yf, yp + c * ys, n);
    }
    int bad = 0;
    for (int c = 0; c < 9 && !bad; c++) {
        float s[8];
        k->vec_dot_x4[KILN_TYPE_Q4_K](n, s, xp, yp + c * ys);
        for (int r = 0; r < 8; r++) {
            const float e = ref_row(n, plain + (size_t) r * nb, (const block_q8_K *) (yp + c * ys), table_order(k, 0));
            if (!same(e, s[r])) {
                CHECK(0, "%s q4_K x8 mat-vec nb=%d col %d row %d: %.9g vs %.9g", k->isa, nb, c, r, s[r], e);
                bad = 1;
            }
        }
    }
    /* the batched order's reference per activation and weight row, once */
    float eb[X8_NC][8];
    for (int c = 0; c < X8_NC; c++) {
        for (int r = 0; r < 8; r++) eb[c][r] = ref_row(n, plain + (size_t) r * nb, (const block_q8_K *) (yp + c * ys), table_order(k, 1));
    }
    for (int ncols = 1; ncols <= X8_NC && !bad; ncols++) {
        float s[X8_NC * 11];
        const size_t ss = 11;
        for (int i = 0; i < X8_NC * 11; i++) s[i] = -1234.5f;
        k->gemm_x4[KILN_TYPE_Q4_K](n, ncols, s, ss, xp, yp, ys);
        for (int c = 0; c < X8_NC; c++) {
            for (int r = 0; r < 11; r++) {
                const float got = s[c * ss + r];
                if (c >= ncols || r >= 8) {
                    if (got != -1234.5f) { CHECK(0, "%s gemm wrote outside (col %d row %d)", k->isa, c, r); bad = 1; }
                    continue;
                }
                const float e = eb[c][r];
                if (!same(e, got)) {
                    CHECK(0, "%s q4_K x8 batched nb=%d ncols %d col %d row %d: %.9g vs %.9g", k->isa, nb, ncols, c, r, got, e);
                    bad = 1;
                }
            }
        }
    }
    CHECK(!bad, "%s q4_K x8 kernels, %d super-blocks", k->isa, nb);
    n_checked++;
    /* unpacking gives the plain rows back, byte for byte */
    block_q4_K * un = malloc(sizeof(block_q4_K) * nb);
    for (int r = 0; r < 8; r++) {
        kiln_repack_unpack_row(KILN_TYPE_Q4_K, 0, w->data, r, n, un);
        CHECK(memcmp(un, plain + (size_t) r * nb, sizeof(block_q4_K) * nb) == 0, "unpack row %d (nb %d)", r, nb);
    }
    free(un); free(yf); free(xb); free(yb); free(plain);
    kiln_free(ctx);
}

/* the 16-row batched kernel (two x8 groups, gemm_x16) against the batched
 * order's reference per row, bit for bit: 1..37 activation rows (every
 * pass width and the 32-row chunks), groups apart by their bytes plus 6,
 * misaligned activations, results at a stride; nothing written outside */
static int n_x16;
static void test_gemm_x16(const struct kiln_kernels * k, int nb) {
    enum { NC = 37, SS = 19 };
    const int64_t n = (int64_t) nb * QK_K;
    struct kiln_context * ctx = tu_ctx((size_t) 16 * nb * sizeof(block_q4_K) * 2 + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_Q4_K, n, 16);
    fill_q4_K(w);
    if (g_special) {
        block_q4_K * row3 = (block_q4_K *) ((char *) w->data + 3 * w->nb[1]);
        if (g_special_min) row3[nb - 1].dmin = g_special;
        else row3[0].d = g_special;
    }
    block_q4_K * plain = malloc(kiln_nbytes(w));
    memcpy(plain, w->data, kiln_nbytes(w));
    CHECK(kiln_repack_tensor(w), "repack: %s", kiln_last_error());
    const size_t gb = kiln_nbytes(w) / 2, xs = gb + 6, ys = sizeof(block_q8_K) * nb + 4;
    char * xbuf = malloc(2 * xs + 8), * ybuf = malloc(NC * ys + 8);
    char * xp = xbuf + 2, * yp = ybuf + 4;
    for (int g = 0; g < 2; g++) memcpy(xp + g * xs, (const char *) w->data + g * gb, gb);
    float * yf = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < NC; c++) {
        for (int64_t i = 0; i < n; i++) yf[i] = c == 0 ? 3.0f : c == 1 ? -3.0f : tu_rand_uniform(-4, 4);
        kiln_quantize_row_q8_K_x4(yf, yp + c * ys, n);
    }
    float * s = malloc(sizeof(float) * NC * SS);
    int bad = 0;
    for (int ncols = 1; ncols <= NC && !bad; ncols++) {
        for (int i = 0; i < NC * SS; i++) s[i] = -1234.5f;
        k->gemm_x16[KILN_TYPE_Q4_K](n, ncols, s, SS, xp, xs, yp, ys, NULL, 0);
        for (int c = 0; c < NC && !bad; c++) {
            for (int r = 0; r < SS; r++) {
                const float got = s[c * SS + r];
                if (c >= ncols || r >= 16) {
                    if (got != -1234.5f) { CHECK(0, "%s gemm_x16 wrote outside (col %d row %d)", k->isa, c, r); bad = 1; }
                    continue;
                }
                const float e = ref_row(n, plain + (size_t) r * nb, (const block_q8_K *) (yp + c * ys), ORD_PAIRS);
                if (memcmp(&e, &got, sizeof e)) {
                    CHECK(0, "%s q4_K gemm_x16 nb=%d ncols %d col %d row %d: %.9g vs %.9g", k->isa, nb, ncols, c, r, got, e);
                    bad = 1;
                }
            }
        }
    }
    CHECK(!bad, "%s q4_K gemm_x16, %d super-blocks", k->isa, nb);
    n_x16++;
    free(s); free(yf); free(xbuf); free(ybuf); free(plain);
    kiln_free(ctx);
}

/* mul_mat on repacked weights: K values, N weight rows, M activation rows,
 * ne02 weight matrices broadcast over ne12 batches */
static void test_mul_mat(int64_t K, int64_t N, int64_t M, int64_t ne02, int64_t ne12) {
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * ne02 + K * M * ne12) * 16 + (8 << 20));
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, KILN_TYPE_Q4_K, K, N, ne02);
    struct kiln_tensor * wr = kiln_new_tensor_3d(ctx, KILN_TYPE_Q4_K, K, N, ne02);
    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, M, ne12);
    fill_q4_K(w);
    memcpy(wr->data, w->data, kiln_nbytes(w));
    tu_fill_uniform(x, -2, 2);
    CHECK(kiln_repack_tensor(wr), "repack: %s", kiln_last_error());
    struct kiln_tensor * yr = kiln_mul_mat(ctx, wr, x);
    const int64_t nb = K / QK_K;
    block_q8_K * yq = malloc(sizeof(block_q8_K) * (size_t) nb);
    float * wf = malloc(sizeof(float) * (size_t) K);
    double * ref = malloc(sizeof(double) * (size_t) (N * M * ne12));
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt || !kt->vec_dot_x4[KILN_TYPE_Q4_K]) continue;
        kiln_cpu_force_isa(kt->isa);
        for (int nth = 1; nth <= 4; nth *= 2) {
            CHECK(tu_compute(ctx, yr, nth) == KILN_STATUS_SUCCESS, "repacked: %s", kiln_last_error());
            int bad = 0;
            for (int64_t b = 0; b < ne12 && !bad; b++) {
                const int64_t wb = b / (ne12 / ne02);
                for (int64_t j = 0; j < M && !bad; j++) {
                    const float * xr = (const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]);
                    const bool grouped = M > 3 && j < M - M % 4;
                    if (grouped && kt->q8_K_x4_rule) kiln_quantize_row_q8_K_x4(xr, yq, K);
                    else kt->from_float[KILN_TYPE_Q8_K](xr, yq, K);
                    for (int64_t i = 0; i < N; i++) {
                        const block_q4_K * row = (const block_q4_K *) ((const char *) w->data + wb * w->nb[2] + i * w->nb[1]);
                        float e;
                        if (i < N - N % 8) e = ref_row(K, row, yq, table_order(kt, grouped));
                        else kt->vec_dot[KILN_TYPE_Q4_K](K, &e, row, yq); /* tail rows stay plain */
                        const float got = ((const float *) yr->data)[(b * M + j) * N + i];
                        if (memcmp(&e, &got, sizeof e)) {
                            CHECK(0, "%s K=%lld N=%lld M=%lld b=%lld/%lld %d threads: [%lld,%lld,%lld] %.9g vs %.9g", kt->isa,
                                  (long long) K, (long long) N, (long long) M, (long long) ne02, (long long) ne12, nth,
                                  (long long) i, (long long) j, (long long) b, got, e);
                            bad = 1;
                            break;
                        }
                    }
                }
            }
            CHECK(!bad, "%s mul_mat q4_K x8 K=%lld N=%lld M=%lld %d threads element by element", kt->isa, (long long) K,
                  (long long) N, (long long) M, nth);
        }
    }
    kiln_cpu_force_isa(NULL);
    /* and the numbers themselves, against double precision on the
     * dequantized weights */
    for (int64_t b = 0; b < ne12; b++) {
        const int64_t wb = b / (ne12 / ne02);
        for (int64_t i = 0; i < N; i++) {
            kiln_get_type_traits(KILN_TYPE_Q4_K)->to_float((const char *) w->data + wb * w->nb[2] + i * w->nb[1], wf, K);
            for (int64_t j = 0; j < M; j++) {
                const float * xr = (const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]);
                double s = 0;
                for (int64_t q = 0; q < K; q++) s += (double) wf[q] * xr[q];
                ref[(b * M + j) * N + i] = s;
            }
        }
    }
    double * out = tu_to_f64(yr);
    const double e = tu_nmse(out, ref, N * M * ne12);
    CHECK(e < 1e-3, "q4_K x8 K=%lld N=%lld M=%lld nmse %g", (long long) K, (long long) N, (long long) M, e);
    free(out); free(ref); free(wf); free(yq);
    kiln_free(ctx);
}

/* mul_mat_id over repacked Q4_K experts (K values, N rows per expert,
 * n_exp experts; ne11 activation rows per token, broadcast over n_used
 * slots when 1; n_tok tokens): every (slot, token) row through the plain
 * q8_K quantizer and the mat-vec order, as llama.cpp's repacked mul_mat_id */
static void test_mul_mat_id(int64_t K, int64_t N, int64_t n_exp, int64_t n_used, int64_t ne11, int64_t n_tok) {
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * n_exp + K * ne11 * n_tok) * 16 + (8 << 20));
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, KILN_TYPE_Q4_K, K, N, n_exp);
    struct kiln_tensor * wr = kiln_new_tensor_3d(ctx, KILN_TYPE_Q4_K, K, N, n_exp);
    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, ne11, n_tok);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, n_used, n_tok);
    fill_q4_K(w);
    memcpy(wr->data, w->data, kiln_nbytes(w));
    tu_fill_uniform(x, -2, 2);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t s = 0; s < n_used; s++) ((int32_t *) ids->data)[t * n_used + s] = (int32_t) ((t * 3 + s * 5) % n_exp);
    }
    CHECK(kiln_repack_tensor(wr), "repack experts: %s", kiln_last_error());
    struct kiln_tensor * y = kiln_mul_mat_id(ctx, wr, x, ids);
    block_q8_K * yq = malloc(sizeof(block_q8_K) * (size_t) (K / QK_K));
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt || !kt->vec_dot_x4[KILN_TYPE_Q4_K]) continue;
        kiln_cpu_force_isa(kt->isa);
        for (int nth = 1; nth <= 4; nth *= 2) {
            CHECK(tu_compute(ctx, y, nth) == KILN_STATUS_SUCCESS, "mul_mat_id repacked: %s", kiln_last_error());
            int bad = 0;
            for (int64_t t = 0; t < n_tok && !bad; t++) {
                for (int64_t s = 0; s < n_used && !bad; s++) {
                    const int32_t e = ((const int32_t *) ids->data)[t * n_used + s];
                    kt->from_float[KILN_TYPE_Q8_K]((const float *) ((const char *) x->data + (s % ne11) * x->nb[1] + t * x->nb[2]), yq, K);
                    for (int64_t i = 0; i < N; i++) {
                        const block_q4_K * row = (const block_q4_K *) ((const char *) w->data + e * w->nb[2] + i * w->nb[1]);
                        const float want = ref_row(K, row, yq, table_order(kt, 0));
                        const float got = *(const float *) ((const char *) y->data + i * y->nb[0] + s * y->nb[1] + t * y->nb[2]);
                        if (memcmp(&want, &got, sizeof want)) {
                            CHECK(0, "%s mul_mat_id K=%lld N=%lld %d threads: [%lld,%lld,%lld] %.9g vs %.9g", kt->isa, (long long) K,
                                  (long long) N, nth, (long long) i, (long long) s, (long long) t, got, want);
                            bad = 1;
                            break;
                        }
                    }
                }
            }
            CHECK(!bad, "%s mul_mat_id q4_K x8 K=%lld N=%lld experts=%lld used=%lld ne11=%lld tokens=%lld %d threads element by element",
                  kt->isa, (long long) K, (long long) N, (long long) n_exp, (long long) n_used, (long long) ne11, (long long) n_tok, nth);
        }
    }
    kiln_cpu_force_isa(NULL);
    free(yq);
    kiln_free(ctx);
}

static void test_bad_inputs(void) {
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * q = kiln_new_tensor_2d(ctx, KILN_TYPE_Q4_K, 256, 7);
    memset(q->data, 0, kiln_nbytes(q));
    CHECK(!kiln_repack_tensor(q) && strstr(kiln_last_error(), "7 rows") && strstr(kiln_last_error(), "group of 8"),
          "7 rows: %s", kiln_last_error());
    kiln_free(ctx);
}

int main(void) {
    tu_seed(11);
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k || !k->vec_dot_x4[KILN_TYPE_Q4_K]) continue;
        for (int nb = 1; nb <= 9; nb++) test_kernels(k, nb);
        test_kernels(k, 40);
        if (k->gemm_x16[KILN_TYPE_Q4_K]) {
            for (int nb = 1; nb <= 9; nb += 4) test_gemm_x16(k, nb);
        }
    }
    for (int64_t M = 1; M <= 13; M += (M < 9 ? 1 : 4)) test_mul_mat(512, 16, M, 1, 1);
    test_mul_mat(256, 44, 7, 1, 1);      /* 5 groups and 4 plain tail rows */
    test_mul_mat(768, 24, 30, 1, 1);
    test_mul_mat(768, 24, 70, 1, 1);     /* more activation rows than one block of them (64) */
    test_mul_mat(256, 16, 5, 2, 4);      /* broadcast batches */
    test_mul_mat_id(512, 16, 4, 2, 1, 6);  /* activations broadcast over the slots, as the decoder's */
    test_mul_mat_id(256, 40, 3, 3, 3, 5);  /* one activation row per slot; 40 rows: chunks of 32 + 8 */
    test_bad_inputs();
    /* inf / nan / subnormal super-block scales in one row: every table's
     * kernels still give the reference's results (the wasm relaxed ones
     * convert scales in a short form and redo a call that met inf/nan) */
    {
        static const kiln_fp16_t specials[] = { 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x83ff };
        for (int si = 0; si < 5; si++) {
            for (g_special_min = 0; g_special_min < 2; g_special_min++) {
                g_special = specials[si];
                for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
                    const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
                    if (k && k->vec_dot_x4[KILN_TYPE_Q4_K]) test_kernels(k, 3);
                }
            }
        }
        g_special = 0;
        g_special_min = 0;
    }
#if defined(__wasm_relaxed_simd__)
    /* both relaxed kernel pairs (repack_q4_K_wasm_relaxed.c), whichever the
     * table took: fmaf emulated in f64, and relaxed_madd where it fuses */
    {
        struct kiln_kernels kv = *kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
        kv.isa = "wasm_relaxed (f64 fmaf)";
        kv.vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__wasm_relaxed;
        kv.gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__wasm_relaxed;
        for (int nb = 1; nb <= 9; nb++) test_kernels(&kv, nb);
        test_kernels(&kv, 40);
        if (kiln_wasm_relaxed_madd_fuses()) {
            kv.isa = "wasm_relaxed (relaxed_madd)";
            kv.vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__wasm_relaxed_fma;
            kv.gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__wasm_relaxed_fma;
            for (int nb = 1; nb <= 9; nb++) test_kernels(&kv, nb);
            test_kernels(&kv, 40);
        } else {
            printf("wasm_relaxed relaxed_madd kernels NOT TESTED: this engine does not fuse relaxed_madd (the table has the f64 ones)\n");
        }
    }
#endif
#if defined(__aarch64__)
    {
        /* the NEON table holds the SDOT kernels where the CPU has dotprod:
         * the baseline ones (any arm64) are checked here as well */
        struct kiln_kernels kn = *kiln_kernels_for_isa(KILN_ISA_NEON);
        const int dp = kiln_cpu_has_dotprod();
        CHECK(kn.vec_dot_x4[KILN_TYPE_Q4_K] == (dp ? q4_Kx8_q8_K_vec_dot__neon_dotprod : q4_Kx8_q8_K_vec_dot__neon) &&
              kn.gemm_x4[KILN_TYPE_Q4_K] == (dp ? q4_Kx8_q8_K_gemm__neon_dotprod : q4_Kx8_q8_K_gemm__neon),
              "neon table's q4_K x8 kernels follow kiln_cpu_has_dotprod()");
        CHECK(!kn.q8_K_x4_rule, "neon table: plain q8_K quantizer for every row (ggml arm64's generic 4-row one)");
        if (dp) {
            kn.isa = "neon (baseline)";
            kn.vec_dot_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_vec_dot__neon;
            kn.gemm_x4[KILN_TYPE_Q4_K] = q4_Kx8_q8_K_gemm__neon;
            for (int nb = 1; nb <= 9; nb++) test_kernels(&kn, nb);
            test_kernels(&kn, 40);
        }
        printf("neon q4_K x8 kernels checked: %s\n", dp ? "dotprod (the table's, arm64 order) and baseline (AVX2 orders)" : "baseline (no dotprod here)");
    }
#endif
    printf("q4_K x8 kernels checked: %d cases\n", n_checked);
    printf("q4_K gemm_x16 (16-row) kernels == the batched order bit for bit: %d cases\n", n_x16);
    if (!kiln_kernels_for_isa(KILN_ISA_AVX512)) printf("avx512 row NOT TESTED: this CPU/build has no AVX-512 F+BW+VL+VNNI\n");
    if (!kiln_kernels_for_isa(KILN_ISA_AVXVNNI)) printf("avxvnni row NOT TESTED: this CPU/build has no AVX-VNNI\n");
    return tu_finish();
}
