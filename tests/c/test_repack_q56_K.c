/*
 * test_repack_q56_K.c — Q5_K and Q6_K weights repacked to the x8 layouts
 * (src/cpu/repack.h) and their kernels. The contract, written here again
 * from the plain block layouts (not from the x8 ones), is llama.cpp's
 * arm64 one (ggml_gemv / ggml_gemm_q{5,6}_K_8x4_q8_K in its dotprod build),
 * per weight row and q8_K activation row:
 *  - Q5_K, mat-vec and batched: per pair p of 32-value sub-blocks
 *    acc = fmaf((float) (sc_2p dot_2p + sc_2p+1 dot_2p+1), d * d_y, acc),
 *    after the super-block acc = fmaf(-(float) sum_s m_s bsum_s, dmin * d_y, acc);
 *  - Q6_K: per super-block I = sum_j sc_j dot_j (values q - 32), mat-vec
 *    acc = acc + (float) I * (d * d_y) rounded apart, batched
 *    acc = fmaf((float) I, d * d_y, acc).
 * Every table with x8 kernels for them (NEON with dotprod), bit for bit:
 * the kernels at 1..9 and 40 super-blocks, misaligned, on raw random
 * blocks (every scale and quant byte, -128 and 127 scales included) and
 * extreme activations, special super-block scales; mul_mat on repacked
 * weights with 1..13 and 30 activation rows (full groups of 4 batched, the
 * others mat-vec, every row quantized by the plain q8_K quantizer), tail
 * rows, broadcast batches, 1/2/4 threads. Every other table (no x8
 * kernels: it unpacks rows) gives the plain product's bits. Repack /
 * unpack round trips; kiln_repack_wanted's rule; NMSE against double.
 */
#include <stddef.h>

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

/* one plain Q5_K row against one q8_K row (both forms sum alike) */
static float ref_q5(int64_t n, const block_q5_K * x, const block_q8_K * y) {
    float acc = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float dd = h2f(x[b].d) * y[b].d, dm = h2f(x[b].dmin) * y[b].d;
        int msum = 0, isum = 0;
        for (int s = 0; s < 8; s++) {
            int sc, m, dot = 0, bsum = 0;
            scale_min(x[b].scales, s, &sc, &m);
            for (int i = 0; i < 32; i++) {
                const uint8_t q = x[b].qs[32 * (s / 2) + i];
                const int v = ((s % 2) ? q >> 4 : q & 15) | (((x[b].qh[i] >> s) & 1) << 4);
                dot += v * y[b].qs[32 * s + i];
                bsum += y[b].qs[32 * s + i];
            }
            isum += sc * dot;
            msum += m * bsum;
            if (s % 2) {
                acc = fmaf((float) isum, dd, acc);
                isum = 0;
            }
        }
        acc = fmaf(-(float) msum, dm, acc);
    }
    return acc;
}

/* one plain Q6_K row against one q8_K row; fused: the batched form */
static float ref_q6(int64_t n, const block_q6_K * x, const block_q8_K * y, int fused) {
    float acc = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float dd = h2f(x[b].d) * y[b].d;
        int isum = 0;
        for (int v = 0; v < QK_K; v++) {
            const int h = v / 128, j = (v % 128) / 32, l = v % 32;
            const uint8_t ql = x[b].ql[64 * h + 32 * (j % 2) + l], qh = x[b].qh[32 * h + l];
            const int q = ((j < 2 ? ql & 15 : ql >> 4) | (((qh >> (2 * j)) & 3) << 4)) - 32;
            isum += x[b].scales[v / 16] * q * y[b].qs[v];
        }
        if (fused) {
            acc = fmaf((float) isum, dd, acc);
        } else {
            const float t = (float) isum * dd;
            acc = acc + t;
        }
    }
    return acc;
}

static float ref_row(enum kiln_type t, int64_t n, const void * row, const block_q8_K * y, int batched) {
    return t == KILN_TYPE_Q5_K ? ref_q5(n, row, y) : ref_q6(n, row, y, batched);
}

/* a normal fp16 in [2^-14, 2^-6) of either sign (scales of real models' size) */
static kiln_fp16_t rand_scale(void) {
    return (kiln_fp16_t) ((tu_rand_u64() % 0x2000u) + 0x0400u + (tu_rand_u64() % 2 ? 0x8000u : 0));
}

/* raw random blocks: every quant and scale byte, the fp16 scales normal */
static void fill_raw(enum kiln_type t, void * data, int64_t nblocks) {
    uint8_t * p = data;
    const size_t bs = kiln_type_size(t);
    for (size_t i = 0; i < (size_t) nblocks * bs; i++) p[i] = (uint8_t) tu_rand_u64();
    for (int64_t b = 0; b < nblocks; b++) {
        if (t == KILN_TYPE_Q5_K) {
            block_q5_K * x = (block_q5_K *) p + b;
            x->d = rand_scale();
            x->dmin = rand_scale();
            if (b % 3 == 0) memset(x->scales, 0xff, sizeof x->scales); /* scales and mins 63 */
        } else {
            block_q6_K * x = (block_q6_K *) p + b;
            x->d = rand_scale();
            if (b % 3 == 0) {
                for (int j = 0; j < 16; j++) x->scales[j] = (int8_t) (j % 2 ? -128 : 127);
                memset(x->ql, 0xff, sizeof x->ql); /* q = 63 */
                memset(x->qh, 0xff, sizeof x->qh);
            }
            if (b % 3 == 1) {
                memset(x->qh, 0, sizeof x->qh); /* q = 0: -32 */
                memset(x->ql, 0, sizeof x->ql);
            }
        }
    }
}

/* a q8_K activation row: random, or (kind 1) every value +-127, (kind 2) a
 * large spike among small values */
static void fill_act(float * x, int64_t n, int kind) {
    for (int64_t i = 0; i < n; i++) {
        x[i] = kind == 1 ? ((i * 7) % 3 ? 5.0f : -5.0f) : tu_rand_uniform(-4, 4);
        if (kind == 2 && i % 97 == 3) x[i] = -60.0f;
    }
}

static kiln_fp16_t g_special;
static bool same(float a, float b) { return memcmp(&a, &b, sizeof a) == 0 || (g_special && isnan(a) && isnan(b)); }
static int n_checked;
#define NC 9

/* one table's two kernels of type t against the contract */
static void test_kernels(const struct kiln_kernels * k, enum kiln_type t, int nb) {
    const int64_t n = (int64_t) nb * QK_K;
    struct kiln_context * ctx = tu_ctx((size_t) 8 * nb * 256 * 2 + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 8);
    fill_raw(t, w->data, 8 * nb);
    if (g_special) {
        /* row 3: d of its first super-block (Q5_K: also dmin of its last) */
        char * row3 = (char *) w->data + 3 * w->nb[1];
        memcpy(row3 + (t == KILN_TYPE_Q5_K ? 0 : offsetof(block_q6_K, d)), &g_special, 2);
        if (t == KILN_TYPE_Q5_K) memcpy(row3 + (nb - 1) * sizeof(block_q5_K) + 2, &g_special, 2);
    }
    const size_t rs = w->nb[1];
    char * plain = malloc(kiln_nbytes(w));
    memcpy(plain, w->data, kiln_nbytes(w));
    CHECK(kiln_repack_tensor(w), "repack %s: %s", kiln_type_name(t), kiln_last_error());
    CHECK(kiln_repacked_rows(w) == 8, "%s x8 groups", kiln_type_name(t));
    const size_t ys = sizeof(block_q8_K) * nb + 4;
    char * xb = malloc(kiln_nbytes(w) + 8), * yb = malloc(NC * ys + 8);
    char * xp = xb + 2, * yp = yb + 4; /* misaligned */
    memcpy(xp, w->data, kiln_nbytes(w));
    float * yf = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < NC; c++) {
        fill_act(yf, n, c % 3);
        k->from_float[KILN_TYPE_Q8_K](yf, yp + c * ys, n);
    }
    int bad = 0;
    for (int c = 0; c < NC && !bad; c++) {
        float s[8];
        k->vec_dot_x4[t](n, s, xp, yp + c * ys);
        for (int r = 0; r < 8 && !bad; r++) {
            const float e = ref_row(t, n, plain + r * rs, (const block_q8_K *) (yp + c * ys), 0);
            if (!same(e, s[r])) {
                CHECK(0, "%s %s x8 mat-vec nb=%d col %d row %d: %.9g vs %.9g", k->isa, kiln_type_name(t), nb, c, r, s[r], e);
                bad = 1;
            }
        }
    }
    for (int ncols = 1; ncols <= NC && !bad; ncols++) {
        enum { SS = 11 };
        float s[NC * SS];
        for (int i = 0; i < NC * SS; i++) s[i] = -1234.5f;
        k->gemm_x4[t](n, ncols, s, SS, xp, yp, ys);
        for (int c = 0; c < NC && !bad; c++) {
            for (int r = 0; r < SS; r++) {
                const float got = s[c * SS + r];
                if (c >= ncols || r >= 8) {
                    if (got != -1234.5f) { CHECK(0, "%s %s gemm wrote outside (col %d row %d)", k->isa, kiln_type_name(t), c, r); bad = 1; }
                    continue;
                }
                const float e = ref_row(t, n, plain + r * rs, (const block_q8_K *) (yp + c * ys), 1);
                if (!same(e, got)) {
                    CHECK(0, "%s %s x8 batched nb=%d ncols %d col %d row %d: %.9g vs %.9g", k->isa, kiln_type_name(t), nb, ncols, c, r, got, e);
                    bad = 1;
                }
            }
        }
    }
    CHECK(!bad, "%s %s x8 kernels, %d super-blocks%s", k->isa, kiln_type_name(t), nb, g_special ? " (special scale)" : "");
    n_checked++;
    free(yf); free(xb); free(yb); free(plain);
    kiln_free(ctx);
}

/* repack then unpack: the plain rows back byte for byte; the layout's
 * pieces where repack.h puts them */
static void test_round_trip(enum kiln_type t, int nb) {
    const int64_t n = (int64_t) nb * QK_K;
    struct kiln_context * ctx = tu_ctx((size_t) 16 * nb * 256 + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 8);
    fill_raw(t, w->data, 8 * nb);
    const size_t rs = w->nb[1];
    char * plain = malloc(kiln_nbytes(w)), * un = malloc(rs);
    memcpy(plain, w->data, kiln_nbytes(w));
    CHECK(kiln_repack_tensor(w), "repack %s: %s", kiln_type_name(t), kiln_last_error());
    int bad = 0;
    for (int r = 0; r < 8; r++) {
        kiln_repack_unpack_row(t, 0, w->data, r, n, un);
        bad += memcmp(un, plain + r * rs, rs) != 0;
    }
    /* spot checks of the layout: row 5, super-block nb-1 */
    const int b = nb - 1, r = 5;
    if (t == KILN_TYPE_Q6_K) {
        const block_q6_Kx8 * g = (const block_q6_Kx8 *) w->data + b;
        const block_q6_K * p = (const block_q6_K *) (plain + r * rs) + b;
        bad += g->d[r] != p->d || g->scales[8 * 11 + r] != p->scales[11] || memcmp(g->ql + (8 * 17 + r) * 4, p->ql + 4 * 17, 4) ||
               memcmp(g->qh + (8 * 9 + r) * 4, p->qh + 4 * 9, 4);
    } else {
        const block_q5_Kx8 * g = (const block_q5_Kx8 *) w->data + b;
        const block_q5_K * p = (const block_q5_K *) (plain + r * rs) + b;
        int sc, m;
        scale_min(p->scales, 6, &sc, &m);
        const uint8_t * s6 = g->scales + 12 * 6; /* row 5: bytes 1, 5, 9 of group 6 */
        bad += g->d[r] != p->d || g->dmin[r] != p->dmin || memcmp(g->qs + (8 * 21 + r) * 4, p->qs + 4 * 21, 4) ||
               memcmp(g->qh + (8 * 3 + r) * 4, p->qh + 4 * 3, 4) || ((s6[9] & 15) | ((s6[1] >> 6) << 4)) != sc ||
               ((s6[9] >> 4) | ((s6[5] >> 6) << 4)) != m;
    }
    CHECK(!bad, "%s x8 repack / unpack round trip and layout, %d super-blocks", kiln_type_name(t), nb);
    free(plain); free(un);
    kiln_free(ctx);
}

/* mul_mat on repacked weights against each table's contract: K values, N
 * weight rows, M activation rows, ne02 matrices broadcast over ne12 batches */
static void test_mul_mat(enum kiln_type t, int64_t K, int64_t N, int64_t M, int64_t ne02, int64_t ne12) {
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * ne02 + K * M * ne12) * 16 + (8 << 20));
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, t, K, N, ne02);
    struct kiln_tensor * wr = kiln_new_tensor_3d(ctx, t, K, N, ne02);
    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, M, ne12);
    fill_raw(t, w->data, kiln_nelements(w) / QK_K);
    memcpy(wr->data, w->data, kiln_nbytes(w));
    tu_fill_uniform(x, -2, 2);
    CHECK(kiln_repack_tensor(wr), "repack: %s", kiln_last_error());
    struct kiln_tensor * yr = kiln_mul_mat(ctx, wr, x);
    struct kiln_tensor * yp = kiln_mul_mat(ctx, w, x);
    block_q8_K * yq = malloc(sizeof(block_q8_K) * (size_t) (K / QK_K));
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt) continue;
        kiln_cpu_force_isa(kt->isa);
        const bool x8 = kt->vec_dot_x4[t] != NULL;
        for (int nth = 1; nth <= 4; nth *= 2) {
            CHECK(tu_compute(ctx, yr, nth) == KILN_STATUS_SUCCESS, "repacked: %s", kiln_last_error());
            if (!x8) CHECK(tu_compute(ctx, yp, nth) == KILN_STATUS_SUCCESS, "plain: %s", kiln_last_error());
            int bad = 0;
            for (int64_t b = 0; b < ne12 && !bad; b++) {
                const int64_t wb = b / (ne12 / ne02);
                for (int64_t j = 0; j < M && !bad; j++) {
                    const float * xr = (const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]);
                    const bool grouped = M > 3 && j < M - M % 4;
                    kt->from_float[KILN_TYPE_Q8_K](xr, yq, K);
                    for (int64_t i = 0; i < N; i++) {
                        const char * row = (const char *) w->data + wb * w->nb[2] + i * w->nb[1];
                        float e;
                        if (!x8) e = ((const float *) yp->data)[(b * M + j) * N + i];
                        else if (i < N - N % 8) e = ref_row(t, K, row, yq, grouped);
                        else kt->vec_dot[t](K, &e, row, yq); /* tail rows stay plain */
                        const float got = ((const float *) yr->data)[(b * M + j) * N + i];
                        if (memcmp(&e, &got, sizeof e)) {
                            CHECK(0, "%s %s K=%lld N=%lld M=%lld b=%lld/%lld %d threads: [%lld,%lld,%lld] %.9g vs %.9g", kt->isa,
                                  kiln_type_name(t), (long long) K, (long long) N, (long long) M, (long long) ne02, (long long) ne12, nth,
                                  (long long) i, (long long) j, (long long) b, got, e);
                            bad = 1;
                            break;
                        }
                    }
                }
            }
            CHECK(!bad, "%s mul_mat %s x8 K=%lld N=%lld M=%lld batches %lld/%lld %d threads element by element (%s)", kt->isa,
                  kiln_type_name(t), (long long) K, (long long) N, (long long) M, (long long) ne02, (long long) ne12, nth,
                  x8 ? "x8 kernels: arm64 orders" : "rows unpacked: the plain product's bits");
        }
    }
    kiln_cpu_force_isa(NULL);
    /* the numbers themselves, against double precision on the dequantized weights */
    double * ref = malloc(sizeof(double) * (size_t) (N * M * ne12));
    float * wf = malloc(sizeof(float) * (size_t) K);
    for (int64_t b = 0; b < ne12; b++) {
        const int64_t wb = b / (ne12 / ne02);
        for (int64_t i = 0; i < N; i++) {
            kiln_get_type_traits(t)->to_float((const char *) w->data + wb * w->nb[2] + i * w->nb[1], wf, K);
            for (int64_t j = 0; j < M; j++) {
                const float * xr = (const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]);
                double s = 0;
                for (int64_t q = 0; q < K; q++) s += (double) wf[q] * xr[q];
                ref[(b * M + j) * N + i] = s;
            }
        }
    }
    CHECK(tu_compute(ctx, yr, 2) == KILN_STATUS_SUCCESS, "repacked: %s", kiln_last_error());
    double * out = tu_to_f64(yr);
    const double e = tu_nmse(out, ref, N * M * ne12);
    CHECK(e < 1e-3, "%s x8 K=%lld N=%lld M=%lld nmse %g", kiln_type_name(t), (long long) K, (long long) N, (long long) M, e);
    free(out); free(ref); free(wf); free(yq);
    kiln_free(ctx);
}

/* which tables repack them: NEON with dotprod, ne[1] % 8 == 0 */
/* The types checked: Q5_K and Q6_K; in wasm builds Q6_K's repacked layout
 * is the x4 one instead (src/cpu/repack.h, test_repack_q6_K.c) */
#ifdef __EMSCRIPTEN__
#define N_TYPES 1
#else
#define N_TYPES 2
#endif

static void test_wanted(void) {
    struct kiln_context * ctx = tu_ctx(1 << 20);
    const struct kiln_kernels * k = kiln_kernels();
    bool dp = false;
#if defined(__aarch64__)
    dp = k->isa_id == KILN_ISA_NEON && kiln_cpu_has_dotprod();
#endif
    static const int64_t rows[] = { 8, 16, 12, 4, 24 };
    int bad = 0;
    for (int ti = 0; ti < N_TYPES; ti++) {
        const enum kiln_type t = ti ? KILN_TYPE_Q6_K : KILN_TYPE_Q5_K;
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, 256, rows[ri]);
            const bool want = dp && rows[ri] % 8 == 0;
            if (kiln_repack_wanted(w) != want) {
                bad++;
                printf("  %s %s rows %lld: wanted %d, expected %d\n", k->isa, kiln_type_name(t), (long long) rows[ri], kiln_repack_wanted(w), want);
            }
        }
    }
    CHECK(!bad, "kiln_repack_wanted: q5_K / q6_K repacked on %s %s", k->isa, dp ? "(dotprod: when ne[1] % 8 == 0)" : "never");
    struct kiln_tensor * q = kiln_new_tensor_2d(ctx, N_TYPES == 2 ? KILN_TYPE_Q6_K : KILN_TYPE_Q5_K, 256, 7);
    memset(q->data, 0, kiln_nbytes(q));
    CHECK(!kiln_repack_tensor(q) && strstr(kiln_last_error(), "group of 8"), "%s with 7 rows refused: %s", kiln_type_name(q->type),
          kiln_last_error());
    kiln_free(ctx);
}

int main(void) {
    tu_seed(23);
    test_wanted();
    for (int ti = 0; ti < N_TYPES; ti++) {
        const enum kiln_type t = ti ? KILN_TYPE_Q6_K : KILN_TYPE_Q5_K;
        for (int nb = 1; nb <= 3; nb++) test_round_trip(t, nb);
        for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
            const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
            if (!k || !k->vec_dot_x4[t]) continue;
            for (int nb = 1; nb <= 9; nb++) test_kernels(k, t, nb);
            test_kernels(k, t, 40);
            static const kiln_fp16_t specials[] = { 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x83ff };
            for (int si = 0; si < 5; si++) {
                g_special = specials[si];
                test_kernels(k, t, 3);
            }
            g_special = 0;
        }
        for (int64_t M = 1; M <= 13; M += (M < 9 ? 1 : 4)) test_mul_mat(t, 512, 16, M, 1, 1);
        test_mul_mat(t, 256, 44, 7, 1, 1);  /* 5 groups and 4 plain tail rows */
        test_mul_mat(t, 768, 24, 30, 1, 1);
        test_mul_mat(t, 256, 16, 5, 2, 4);  /* broadcast batches */
    }
#if defined(__aarch64__)
    {
        const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
        const int dp = kiln_cpu_has_dotprod();
        CHECK(kn->vec_dot_x4[KILN_TYPE_Q5_K] == (dp ? q5_Kx8_q8_K_vec_dot__neon_dotprod : NULL) &&
              kn->gemm_x4[KILN_TYPE_Q6_K] == (dp ? q6_Kx8_q8_K_gemm__neon_dotprod : NULL) &&
              kn->repack_rows[KILN_TYPE_Q5_K] == (dp ? 8 : 0) && kn->repack_rows[KILN_TYPE_Q6_K] == (dp ? 8 : 0),
              "neon table's q5_K / q6_K x8 kernels follow kiln_cpu_has_dotprod()");
        printf("neon q5_K / q6_K x8 kernels: %s\n", dp ? "checked (dotprod)" : "NOT TESTED: no dotprod on this CPU (none in the table)");
    }
#else
    printf("q5_K / q6_K x8 kernels NOT TESTED here: only the arm64 dotprod table has them (scripts/test-neon.sh); "
           "repacked rows checked through unpacking\n");
#endif
    printf("q5_K / q6_K x8 kernels checked: %d cases\n", n_checked);
    return tu_finish();
}
