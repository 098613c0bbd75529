/*
 * test_ops_attn.c — flash_attn_ext against the naive attention in double:
 * softmax(Q K^T * scale [softcap] + slope*mask) V with GQA head broadcast,
 * K/V f32 and f16, masks f16/f32 (padded, broadcast over heads, with -inf),
 * ALiBi, logit softcap, DK != DV, a permuted Q and a K/V view of a larger
 * cache, fully masked rows, 1/2/4 threads, bad input; ggml's tiled prompt
 * and split-KV decode paths (test_paths).
 */
#include "nn_test_common.h"
#include "cpu/kernels.h"

struct acase {
    int64_t DK, DV, n_batch, n_head, n_kv, n_head_kv, ne3;
    int64_t mask_rows, mask_heads; /* 0 rows: no mask */
    float max_bias, softcap;
};

static double ref_slope(double max_bias, int h, int n_head) {
    if (!(max_bias > 0)) return 1.0;
    int n2 = 1;
    while (n2 * 2 <= n_head) n2 *= 2;
    return h < n2 ? pow(pow(2.0, -max_bias / n2), h + 1) : pow(pow(2.0, -max_bias / 2.0 / n2), 2 * (h - n2) + 1);
}

/* q [DK, nb, nh, ne3], k [DK, nkv, nhkv, ne3], v [DV, nkv, nhkv, ne3] (logical
 * order), mask [mne0, mne1, mne2, 1] or NULL -> out [DV, nh, nb, ne3] */
static void ref_attn(const struct acase * c, const double * q, const double * k, const double * v, const double * mask,
                     int64_t mne0, int64_t mne1, double scale, double * out) {
    const int64_t rg = c->n_head / c->n_head_kv;
    double * sc = (double *) malloc(sizeof(double) * (size_t) c->n_kv);
    for (int64_t i3 = 0; i3 < c->ne3; i3++) for (int64_t h = 0; h < c->n_head; h++) for (int64_t t = 0; t < c->n_batch; t++) {
        const double * qr = q + ((i3 * c->n_head + h) * c->n_batch + t) * c->DK;
        const int64_t hk = h / rg;
        const double slope = ref_slope(c->max_bias, (int) h, (int) c->n_head);
        double mx = -INFINITY;
        for (int64_t j = 0; j < c->n_kv; j++) {
            const double * kr = k + ((i3 * c->n_head_kv + hk) * c->n_kv + j) * c->DK;
            double d = 0;
            for (int64_t e = 0; e < c->DK; e++) d += qr[e] * kr[e];
            d *= scale;
            if (c->softcap != 0.0f) d = c->softcap * tanh(d / c->softcap);
            if (mask) d += slope * mask[((h % c->mask_heads) * mne1 + t) * mne0 + j];
            sc[j] = d;
            if (d > mx) mx = d;
        }
        double * o = out + ((i3 * c->n_batch + t) * c->n_head + h) * c->DV;
        for (int64_t e = 0; e < c->DV; e++) o[e] = 0;
        if (mx == -INFINITY) continue; /* fully masked: 0 */
        double s = 0;
        for (int64_t j = 0; j < c->n_kv; j++) s += exp(sc[j] - mx);
        for (int64_t j = 0; j < c->n_kv; j++) {
            const double p = exp(sc[j] - mx) / s;
            const double * vr = v + ((i3 * c->n_head_kv + hk) * c->n_kv + j) * c->DV;
            for (int64_t e = 0; e < c->DV; e++) o[e] += p * vr[e];
        }
    }
    free(sc);
}

/* run_case's thread count (0: 1, 2 and 4, which must agree bit for bit)
 * and NMSE bound (< 0: by K/V type) */
static int g_threads = 0;
static double g_tol = -1;

static void run_case(const struct acase * c, enum kiln_type kvt, enum kiln_type mt, bool views) {
    char what[220];
    struct kiln_context * ctx = tu_ctx(16 << 20);
    struct kiln_tensor * q, * k, * v;
    if (views) {
        /* q as llama builds it: [DK, n_head, n_batch] permuted to [DK, n_batch, n_head];
         * k, v: the first n_kv rows of a larger cache */
        struct kiln_tensor * qb = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c->DK, c->n_head, c->n_batch, c->ne3);
        q = kiln_permute(ctx, qb, 0, 2, 1, 3);
        struct kiln_tensor * kc = kiln_new_tensor_4d(ctx, kvt, c->DK, c->n_kv + 5, c->n_head_kv, c->ne3);
        struct kiln_tensor * vc = kiln_new_tensor_4d(ctx, kvt, c->DV, c->n_kv + 5, c->n_head_kv, c->ne3);
        k = kiln_view_4d(ctx, kc, c->DK, c->n_kv, c->n_head_kv, c->ne3, kc->nb[1], kc->nb[2], kc->nb[3], 0);
        v = kiln_view_4d(ctx, vc, c->DV, c->n_kv, c->n_head_kv, c->ne3, vc->nb[1], vc->nb[2], vc->nb[3], 0);
    } else {
        q = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c->DK, c->n_batch, c->n_head, c->ne3);
        k = kiln_new_tensor_4d(ctx, kvt, c->DK, c->n_kv, c->n_head_kv, c->ne3);
        v = kiln_new_tensor_4d(ctx, kvt, c->DV, c->n_kv, c->n_head_kv, c->ne3);
    }
    tu_fill_uniform(q, -1.0f, 1.0f);
    tu_fill_uniform(k, -1.0f, 1.0f);
    tu_fill_uniform(v, -1.0f, 1.0f);
    struct kiln_tensor * m = NULL;
    if (c->mask_rows) {
        m = kiln_new_tensor_3d(ctx, mt, c->n_kv, c->mask_rows, c->mask_heads);
        tu_fill_uniform(m, -1.0f, 0.5f);
        /* causal-style -inf pattern plus random holes; row 0 keeps column 0 */
        for (int64_t h = 0; h < c->mask_heads; h++) for (int64_t t = 0; t < c->mask_rows; t++) for (int64_t j = 1; j < c->n_kv; j++) {
            if (j > c->n_kv - c->n_batch + t || tu_rand_u64() % 5 == 0) kiln_set_f32_nd(m, (int) j, (int) t, (int) h, 0, -INFINITY);
        }
    }
    const float scale = 1.0f / sqrtf((float) c->DK);
    struct kiln_tensor * r = kiln_flash_attn_ext(ctx, q, k, v, m, scale, c->max_bias, c->softcap);
    snprintf(what, sizeof what, "fa DK %lld DV %lld batch %lld heads %lld/%lld kv %lld ne3 %lld mask %lldx%lld %s bias %g cap %g kv %s%s",
             (long long) c->DK, (long long) c->DV, (long long) c->n_batch, (long long) c->n_head, (long long) c->n_head_kv,
             (long long) c->n_kv, (long long) c->ne3, (long long) c->mask_rows, (long long) c->mask_heads,
             m ? kiln_type_name(mt) : "-", (double) c->max_bias, (double) c->softcap, kiln_type_name(kvt), views ? " views" : "");
    if (!CHECK(r != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    CHECK(r->type == KILN_TYPE_F32 && r->ne[0] == c->DV && r->ne[1] == c->n_head && r->ne[2] == c->n_batch && r->ne[3] == c->ne3,
          "%s: result shape [DV, n_head, n_batch, ne3]", what);
    CHECK(kiln_get_op_params_f32(r, 0) == scale && kiln_get_op_params_f32(r, 1) == c->max_bias &&
          kiln_get_op_params_f32(r, 2) == c->softcap && kiln_get_op_params_i32(r, 3) == KILN_PREC_DEFAULT, "%s: op_params", what);
    double * qv = tu_to_f64(q), * kv = tu_to_f64(k), * vv = tu_to_f64(v), * mv = m ? tu_to_f64(m) : NULL;
    const int64_t n = kiln_nelements(r);
    double * ref = (double *) malloc(sizeof(double) * n);
    ref_attn(c, qv, kv, vv, mv, c->n_kv, c->mask_rows, scale, ref);
    /* F16 K/V: ggml's arithmetic (Q rounded to F16, F16 accumulator) costs ~1e-6 */
    const double tol = g_tol >= 0 ? g_tol : kvt == KILN_TYPE_F16 ? 5e-6 : 1e-10;
    if (g_threads > 0) {
        memset(r->data, 0xA5, kiln_nbytes(r));
        if (CHECK(tu_compute(ctx, r, g_threads) == KILN_STATUS_SUCCESS, "%s: compute: %s", what, kiln_last_error())) {
            char w2[260];
            snprintf(w2, sizeof w2, "%s, %d threads", what, g_threads);
            nn_expect(tu_to_f64(r), ref, n, tol, w2);
        }
    } else {
        nn_expect(nn_run(ctx, r, what), ref, n, tol, what);
    }
    free(qv); free(kv); free(vv); free(mv); free(ref);
    kiln_free(ctx);
}

static void test_flash_attn(void) {
    static const struct acase cases[] = {
        { 16, 16, 5, 4, 19, 4, 1, 8, 1, 0.0f, 0.0f },    /* GQA ratio 1, padded mask */
        { 16, 16, 5, 4, 19, 2, 1, 5, 1, 0.0f, 0.0f },    /* ratio 2 */
        { 16, 16, 5, 4, 19, 1, 2, 5, 2, 0.0f, 0.0f },    /* ratio 4, ne3 = 2, mask per head pair */
        { 24, 8, 3, 6, 11, 3, 1, 3, 6, 8.0f, 0.0f },     /* DK != DV, ALiBi over 6 heads */
        { 32, 32, 7, 2, 33, 2, 1, 32, 1, 0.0f, 30.0f },  /* softcap */
        { 8, 8, 1, 3, 1, 3, 1, 0, 0, 0.0f, 0.0f },       /* single kv, no mask */
        { 64, 64, 4, 8, 40, 2, 1, 0, 0, 0.0f, 0.0f },    /* no mask, ratio 4 */
        { 5, 3, 2, 2, 7, 1, 1, 2, 1, 2.0f, 5.0f },       /* odd sizes, everything on */
    };
    tu_case = "flash_attn_ext";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int kvt = 0; kvt < 2; kvt++) {
            const enum kiln_type t = kvt ? KILN_TYPE_F16 : KILN_TYPE_F32;
            run_case(&cases[i], t, (i + kvt) % 2 ? KILN_TYPE_F16 : KILN_TYPE_F32, false);
            run_case(&cases[i], t, (i + kvt) % 2 ? KILN_TYPE_F32 : KILN_TYPE_F16, true);
        }
    }
}

/* ggml's two other paths, against the same double reference:
 * - the tiled prompt path (>= 64 query rows, K = V type F32 or F16, DV % 8
 *   == 0): scores and accumulators in f32, so F16 K/V agree to 1e-10 like
 *   F32 ones (the row path's F16 Q and accumulator cost ~1e-6: a tight
 *   bound shows the tiled path ran). Ragged last Q and KV tiles, causal
 *   masks with -inf holes (whole KV tiles skipped), GQA, ALiBi, DK != DV,
 *   softcap without a mask (ggml gives the KV tile's padding -softcap
 *   instead of -inf: weight e^-30 here, below the bound).
 * - >= 64 rows with DV % 8 != 0 stays on the row path (~1e-6 with F16).
 * - the split decode (1 query row, >= 512 positions) at 1, 2, 3 and 4
 *   threads: each chunk by the row path, merged. */
static void test_paths(void) {
    static const struct acase tiled[] = {
        { 16, 16, 64, 4, 70, 2, 1, 64, 1, 0.0f, 0.0f },     /* one full Q tile, 2 KV tiles (ragged) */
        { 8, 8, 150, 2, 150, 1, 1, 160, 1, 0.0f, 0.0f },    /* Q tiles 64+64+22, causal */
        { 24, 8, 80, 6, 90, 3, 1, 96, 6, 8.0f, 0.0f },      /* DK != DV, ALiBi, mask per head */
        { 32, 32, 100, 2, 200, 2, 1, 0, 0, 0.0f, 30.0f },   /* softcap, no mask */
        { 64, 64, 65, 4, 128, 1, 2, 96, 1, 0.0f, 0.0f },    /* ne3 = 2, GQA 4 */
    };
    static const struct acase rowpath = { 12, 12, 64, 2, 80, 1, 1, 64, 1, 0.0f, 0.0f };
    static const struct acase split[] = {
        { 16, 16, 1, 4, 600, 2, 1, 1, 1, 0.0f, 0.0f },
        { 64, 64, 1, 8, 1030, 2, 1, 1, 1, 0.0f, 25.0f },
        { 8, 24, 1, 3, 512, 3, 1, 0, 0, 0.0f, 0.0f },
    };
    tu_case = "flash_attn_ext paths";
    for (int kvt = 0; kvt < 2; kvt++) {
        const enum kiln_type t = kvt ? KILN_TYPE_F16 : KILN_TYPE_F32;
        g_tol = 1e-10;
        for (size_t i = 0; i < sizeof tiled / sizeof tiled[0]; i++) {
            run_case(&tiled[i], t, i % 2 ? KILN_TYPE_F16 : KILN_TYPE_F32, false);
            run_case(&tiled[i], t, KILN_TYPE_F16, true);
        }
        g_tol = -1;
        run_case(&rowpath, t, KILN_TYPE_F16, false);
        /* F16 accumulators over 512-1030 positions: measured 1.7e-5 at 1
         * thread, less as the chunks shorten (5.4e-6 at 3) */
        g_tol = kvt ? 5e-5 : 1e-10;
        for (g_threads = 1; g_threads <= 4; g_threads++) {
            for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) run_case(&split[i], t, KILN_TYPE_F16, i == 0);
        }
        g_threads = 0;
        g_tol = -1;
    }
}

/* F16 K/V: ggml's CPU arithmetic written out here one query row at a time
 * with the kernel table's fp16 kernels (Q rounded to F16, the ISA's f16
 * dot, the F16 accumulator updated by f16_scale / f16_mad) must give the
 * op's bits exactly, whichever way the op gets there (wasm: K and V rows
 * converted once for a tile of query rows, accumulators held as floats) */
static void f16_bits_case(int64_t DK, int64_t DV, int64_t nb, int64_t nh, int64_t nhkv, int64_t n_kv) {
    char what[160];
    snprintf(what, sizeof what, "fa f16 bits DK %lld DV %lld batch %lld heads %lld/%lld kv %lld", (long long) DK, (long long) DV,
             (long long) nb, (long long) nh, (long long) nhkv, (long long) n_kv);
    struct kiln_context * ctx = tu_ctx(16 << 20);
    struct kiln_tensor * q = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, DK, nb, nh);
    struct kiln_tensor * k = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, DK, n_kv, nhkv);
    struct kiln_tensor * v = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, DV, n_kv, nhkv);
    struct kiln_tensor * m = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, n_kv, nb);
    tu_fill_uniform(q, -2.0f, 2.0f);
    tu_fill_uniform(k, -1.0f, 1.0f);
    tu_fill_uniform(v, -1.0f, 1.0f);
    tu_fill_uniform(m, -1.0f, 0.5f);
    for (int64_t t = 0; t < nb; t++) for (int64_t j = 1; j < n_kv; j++) {
        if (j > n_kv - nb + t || tu_rand_u64() % 7 == 0) kiln_set_f32_nd(m, (int) j, (int) t, 0, 0, -INFINITY);
    }
    const float scale = 1.0f / sqrtf((float) DK);
    struct kiln_tensor * r = kiln_flash_attn_ext(ctx, q, k, v, m, scale, 0.0f, 0.0f);
    if (!CHECK(r != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    double * got = nn_run(ctx, r, what);
    if (!got) { kiln_free(ctx); return; }
    const struct kiln_kernels * kk = kiln_kernels();
    kiln_fp16_t * q16 = malloc(sizeof(kiln_fp16_t) * (size_t) DK), * acc16 = malloc(sizeof(kiln_fp16_t) * (size_t) DV);
    int bad = 0;
    for (int64_t h = 0; h < nh; h++) for (int64_t t = 0; t < nb; t++) {
        const int64_t hk = h / (nh / nhkv);
        kk->f32_to_f16(DK, (const float *) ((const char *) q->data + t * q->nb[1] + h * q->nb[2]), q16);
        for (int64_t d = 0; d < DV; d++) acc16[d] = 0;
        float M = -INFINITY, S = 0.0f;
        for (int64_t j = 0; j < n_kv; j++) {
            const float mv = kiln_fp16_to_fp32(((const kiln_fp16_t *) ((const char *) m->data + t * m->nb[1]))[j]);
            if (mv == -INFINITY) continue;
            const kiln_fp16_t * kr = (const kiln_fp16_t *) ((const char *) k->data + j * k->nb[1] + hk * k->nb[2]);
            const kiln_fp16_t * vr = (const kiln_fp16_t *) ((const char *) v->data + j * v->nb[1] + hk * v->nb[2]);
            float s = kk->f16_dot(DK, kr, q16) * scale;
            s += mv;
            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                ms = expf(M - s);
                M = s;
                kk->f16_scale(DV, acc16, ms);
            } else {
                vs = expf(s - M);
            }
            kk->f16_mad(DV, acc16, vr, vs);
#if defined(__aarch64__)
            S = fmaf(S, ms, vs); /* llama.cpp's arm64 build contracts it */
#else
            S = S * ms + vs;
#endif
        }
        const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
        for (int64_t d = 0; d < DV; d++) {
            const float want = kiln_fp16_to_fp32(acc16[d]) * S_inv;
            bad += (float) got[(t * nh + h) * DV + d] != want;
        }
    }
    CHECK(!bad, "%s: %d values differ from the row-by-row F16 arithmetic (%s)", what, bad, kk->isa);
    free(q16); free(acc16); free(got);
    kiln_free(ctx);
}

static void test_f16_bits(void) {
    tu_case = "fa f16 bits";
    f16_bits_case(64, 64, 13, 8, 2, 37);  /* a prompt batch: tiles of positions within a head */
    f16_bits_case(128, 128, 1, 16, 4, 29); /* one token: tiles of the 4 heads sharing K/V */
    f16_bits_case(40, 24, 9, 3, 3, 21);    /* DK != DV, no GQA, lengths off the vector width */
}

static void test_fully_masked(void) {
    tu_case = "fa fully masked";
    struct kiln_context * ctx = tu_ctx(2 << 20);
    struct kiln_tensor * q = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 3, 2);
    struct kiln_tensor * k = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 8, 6, 1);
    struct kiln_tensor * v = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 8, 6, 1);
    struct kiln_tensor * m = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 6, 32);
    tu_fill_uniform(q, -1, 1); tu_fill_uniform(k, -1, 1); tu_fill_uniform(v, -1, 1);
    kiln_set_zero(m);
    for (int j = 0; j < 6; j++) kiln_set_f32_nd(m, j, 1, 0, 0, -INFINITY);
    struct kiln_tensor * r = kiln_flash_attn_ext(ctx, q, k, v, m, 0.3f, 0.0f, 0.0f);
    CHECK(tu_compute(ctx, r, 2) == KILN_STATUS_SUCCESS, "compute");
    int zero = 0, fin = 0;
    for (int h = 0; h < 2; h++) for (int e = 0; e < 8; e++) {
        zero += kiln_get_f32_nd(r, e, h, 1, 0) == 0.0f;
        fin += isfinite(kiln_get_f32_nd(r, e, h, 0, 0)) && isfinite(kiln_get_f32_nd(r, e, h, 2, 0));
    }
    CHECK(zero == 16, "a fully masked query row gives 0, not NaN (%d zeros)", zero);
    CHECK(fin == 16, "the other rows are finite");
    kiln_flash_attn_ext_set_prec(r, KILN_PREC_F32);
    CHECK(kiln_get_op_params_i32(r, 3) == KILN_PREC_F32, "set_prec records op_params[3]");
    kiln_free(ctx);
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * q = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 16, 5, 4);
    struct kiln_tensor * q16 = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 16, 5, 4);
    struct kiln_tensor * k = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 16, 9, 2);
    struct kiln_tensor * v = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 8, 9, 2);
    struct kiln_tensor * k_dk = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 12, 9, 2);
    struct kiln_tensor * k_h3 = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 16, 9, 3);
    struct kiln_tensor * v_kv = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 8, 10, 2);
    struct kiln_tensor * k_q = kiln_new_tensor_3d(ctx, KILN_TYPE_Q8_0, 32, 9, 2);
    struct kiln_tensor * m_ok = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 9, 5);
    struct kiln_tensor * m_rows = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 9, 4);
    struct kiln_tensor * m_kv = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 8, 8);
    struct kiln_tensor * m_h = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 9, 5, 3);
    struct kiln_tensor * m_i = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 9, 5);
    CHECK(kiln_flash_attn_ext(ctx, q, k, v, m_ok, 0.25f, 0.0f, 0.0f) != NULL, "valid call: %s", kiln_last_error());
    CHECK_FAILS(kiln_flash_attn_ext(ctx, NULL, k, v, NULL, 1, 0, 0), "NULL", "q NULL");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, NULL, NULL, 1, 0, 0), "NULL", "v NULL");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q16, k, v, NULL, 1, 0, 0), "must be f32", "q f16");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k_dk, v, NULL, 1, 0, 0), "head size", "DK mismatch");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k_h3, k_h3, NULL, 1, 0, 0), "broadcast", "heads not a multiple");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v_kv, NULL, 1, 0, 0), "n_kv", "v n_kv mismatch");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k_q, k_q, NULL, 1, 0, 0), "f32, f16 or bf16", "quantized k");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v, m_rows, 1, 0, 0), "does not fit", "mask rows");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v, m_kv, 1, 0, 0), "does not fit", "mask n_kv");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v, m_h, 1, 0, 0), "does not fit", "mask heads");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v, m_i, 1, 0, 0), "f16 or f32", "mask i32");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, k, v, NULL, 1, 4.0f, 0), "needs a mask", "alibi no mask");
    CHECK_FAILS(kiln_flash_attn_ext(ctx, q, kiln_transpose(ctx, k), v, NULL, 1, 0, 0), "contiguous rows", "k transposed");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(4242);
    test_flash_attn();
    test_paths();
    test_f16_bits();
    test_fully_masked();
    test_bad_input();
    return tu_finish();
}
