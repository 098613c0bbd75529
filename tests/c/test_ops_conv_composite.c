/*
 * test_ops_conv_composite.c — the convolutions built from im2col + mul_mat
 * (conv_1d, conv_1d_ph, conv_1d_dw, conv_2d, conv_2d_sk_p0, conv_2d_s1_ph,
 * conv_depthwise_2d) against direct double-precision convolution loops,
 * with 1/2/4 threads, F32 and F16 kernels; plus bad inputs.
 */
#include "ops_conv_check.h"

/* direct 2D convolution: kernel [KW, KH, IC, OC], image [W, H, IC, N] */
static double conv2d_at(const double * k, const double * x, int64_t KW, int64_t KH, int64_t IC, int64_t W, int64_t H,
                        int64_t n, int64_t oc, int64_t ox, int64_t oy, int s0, int s1, int p0, int p1, int d0, int d1) {
    double acc = 0.0;
    for (int64_t c = 0; c < IC; c++)
    for (int64_t kh = 0; kh < KH; kh++)
    for (int64_t kw = 0; kw < KW; kw++) {
        const int64_t x0 = ox * s0 + kw * d0 - p0, y0 = oy * s1 + kh * d1 - p1;
        if (x0 < 0 || x0 >= W || y0 < 0 || y0 >= H) continue;
        acc += k[((oc * IC + c) * KH + kh) * KW + kw] * x[((n * IC + c) * H + y0) * W + x0];
    }
    return acc;
}

struct c2 { int64_t W, H, IC, N, KW, KH, OC; int s0, s1, p0, p1, d0, d1; };

static const struct c2 cases2d[] = {
    { 28, 28, 1, 2, 3, 3, 4, 1, 1, 1, 1, 1, 1 },  /* MNIST-like first layer */
    { 14, 14, 4, 3, 3, 3, 5, 1, 1, 1, 1, 1, 1 },  /* and the second */
    {  9,  7, 3, 2, 3, 2, 2, 2, 1, 0, 1, 1, 2 },
    {  8, 10, 2, 1, 2, 3, 3, 1, 2, 2, 0, 2, 1 },
    {  5,  5, 1, 1, 5, 5, 1, 1, 1, 0, 0, 1, 1 },
};

enum c2_form { C2_PLAIN, C2_SK_P0, C2_S1_PH };

static void run_conv2d(const struct c2 * cc, enum kiln_type ktype, enum c2_form form) {
    struct c2 c = *cc;
    if (form == C2_SK_P0) { c.s0 = (int) c.KW; c.s1 = (int) c.KH; c.p0 = c.p1 = 0; c.d0 = c.d1 = 1; }
    if (form == C2_S1_PH) { c.s0 = c.s1 = 1; c.p0 = (int)(c.KW / 2); c.p1 = (int)(c.KH / 2); c.d0 = c.d1 = 1; }
    struct kiln_context * ctx = tu_ctx(32 << 20);
    struct kiln_tensor * k = kiln_new_tensor_4d(ctx, ktype, c.KW, c.KH, c.IC, c.OC);
    struct kiln_tensor * x = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c.W, c.H, c.IC, c.N);
    tu_fill_uniform(k, -1.0f, 1.0f);
    tu_fill_uniform(x, -1.0f, 1.0f);
    struct kiln_tensor * out = form == C2_SK_P0 ? kiln_conv_2d_sk_p0(ctx, k, x)
                             : form == C2_S1_PH ? kiln_conv_2d_s1_ph(ctx, k, x)
                             : kiln_conv_2d(ctx, k, x, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
    if (!CHECK(out != NULL, "conv_2d: %s", kiln_last_error())) { kiln_free(ctx); return; }
    const int64_t OW = (c.W + 2 * c.p0 - c.d0 * (c.KW - 1) - 1) / c.s0 + 1;
    const int64_t OH = (c.H + 2 * c.p1 - c.d1 * (c.KH - 1) - 1) / c.s1 + 1;
    CHECK(out->ne[0] == OW && out->ne[1] == OH && out->ne[2] == c.OC && out->ne[3] == c.N && kiln_is_contiguous(out),
          "conv_2d shape [%lld %lld %lld %lld]", (long long) out->ne[0], (long long) out->ne[1], (long long) out->ne[2], (long long) out->ne[3]);
    double * kv = tu_to_f64(k);
    double * xv = tu_to_f64(x);
    double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
    for (int64_t n = 0; n < c.N; n++)
    for (int64_t oc = 0; oc < c.OC; oc++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        ref[cc_idx(out, ox, oy, oc, n)] = conv2d_at(kv, xv, c.KW, c.KH, c.IC, c.W, c.H, n, oc, ox, oy, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
    }
    static const char * forms[3] = { "conv_2d", "conv_2d_sk_p0", "conv_2d_s1_ph" };
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lldx%lldx%lld kernel %s", forms[form], (long long) c.W, (long long) c.H,
             (long long) c.IC, (long long) c.N, kiln_type_name(ktype));
    cc_check_threads(ctx, out, ref, ktype == KILN_TYPE_F32 ? 1e-10 : 1e-5, what);
    free(kv);
    free(xv);
    free(ref);
    kiln_free(ctx);
}

static void test_conv_2d(void) {
    tu_case = "conv_2d";
    for (size_t ci = 0; ci < sizeof(cases2d) / sizeof(cases2d[0]); ci++) {
        run_conv2d(&cases2d[ci], KILN_TYPE_F32, C2_PLAIN);
        run_conv2d(&cases2d[ci], KILN_TYPE_F16, C2_PLAIN);
    }
    run_conv2d(&cases2d[2], KILN_TYPE_F32, C2_SK_P0);
    run_conv2d(&cases2d[3], KILN_TYPE_F16, C2_SK_P0);
    run_conv2d(&cases2d[1], KILN_TYPE_F32, C2_S1_PH);
    run_conv2d(&cases2d[3], KILN_TYPE_F32, C2_S1_PH);
}

/* conv_1d: kernel [K, IC, OC], data [L, IC, N]. ggml reshapes the
 * [N*OL, OC] product straight to [OL, OC, N]: for N = 1 that is the
 * convolution; for N > 1 element f of the result is conv(n, oc, ol) with
 * f = (n*OL + ol) + N*OL*oc. Both are checked. */
static void test_conv_1d(void) {
    tu_case = "conv_1d";
    /* L, IC, N, K, OC, s, p, d, ph */
    static const int cases[][9] = {
        { 12, 1, 1, 3, 2, 1, 0, 1, 0 }, { 15, 3, 1, 4, 5, 2, 1, 1, 0 }, { 10, 2, 1, 3, 3, 1, 2, 2, 0 },
        { 11, 2, 3, 3, 4, 1, 1, 1, 0 }, { 9, 4, 1, 5, 2, 1, 0, 1, 1 }, { 9, 2, 2, 3, 3, 2, 0, 1, 1 },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int * c = cases[ci];
        const int64_t L = c[0], IC = c[1], N = c[2], K = c[3], OC = c[4];
        const bool ph = c[8] != 0;
        const int s = c[5], p = ph ? (int)(K / 2) : c[6], d = c[7];
        for (int f16 = 0; f16 < 2; f16++) {
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * k = kiln_new_tensor_3d(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, K, IC, OC);
            struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, L, IC, N);
            tu_fill_uniform(k, -1.0f, 1.0f);
            tu_fill_uniform(x, -1.0f, 1.0f);
            struct kiln_tensor * out = ph ? kiln_conv_1d_ph(ctx, k, x, s, d) : kiln_conv_1d(ctx, k, x, s, p, d);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OL = (L + 2 * p - d * (K - 1) - 1) / s + 1;
            CHECK(out->ne[0] == OL && out->ne[1] == OC && out->ne[2] == N, "conv_1d shape");
            double * kv = tu_to_f64(k);
            double * xv = tu_to_f64(x);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t f = 0; f < OL * OC * N; f++) {
                const int64_t oc = f / (N * OL), n = (f % (N * OL)) / OL, ol = f % OL;
                ref[f] = conv2d_at(kv, xv, K, 1, IC, L, 1, n, oc, ol, 0, s, 1, p, 0, d, 1);
            }
            char what[64];
            snprintf(what, sizeof what, "conv_1d%s case %zu kernel %s", ph ? "_ph" : "", ci, f16 ? "f16" : "f32");
            cc_check_threads(ctx, out, ref, 1e-5, what);
            free(kv);
            free(xv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

/* conv_1d_dw: kernel [K, 1, C], data [L, C] -> [OL, C, 1] */
static void test_conv_1d_dw(void) {
    tu_case = "conv_1d_dw";
    static const int cases[][5] = { { 12, 3, 3, 1, 1 }, { 16, 5, 4, 2, 1 }, { 9, 1, 2, 1, 0 }, { 10, 4, 5, 3, 2 } }; /* L, C, K, s, p */
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t L = cases[ci][0], C = cases[ci][1], K = cases[ci][2];
        const int s = cases[ci][3], p = cases[ci][4], d = 1;
        for (int f16 = 0; f16 < 2; f16++) {
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * k = kiln_new_tensor_3d(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, K, 1, C);
            struct kiln_tensor * x = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, L, C);
            tu_fill_uniform(k, -1.0f, 1.0f);
            tu_fill_uniform(x, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_conv_1d_dw(ctx, k, x, s, p, d);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OL = (L + 2 * p - d * (K - 1) - 1) / s + 1;
            CHECK(out->ne[0] == OL && out->ne[1] == C && out->ne[2] == 1, "conv_1d_dw shape");
            double * kv = tu_to_f64(k);
            double * xv = tu_to_f64(x);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t c = 0; c < C; c++)
            for (int64_t ol = 0; ol < OL; ol++) {
                ref[c * OL + ol] = conv2d_at(kv + c * K, xv + c * L, K, 1, 1, L, 1, 0, 0, ol, 0, s, 1, p, 0, d, 1);
            }
            char what[64];
            snprintf(what, sizeof what, "conv_1d_dw case %zu kernel %s", ci, f16 ? "f16" : "f32");
            cc_check_threads(ctx, out, ref, 1e-5, what);
            free(kv);
            free(xv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

/* conv_depthwise_2d: kernel [KW, KH, 1, C], data [W, H, C, N] -> [OW, OH, C, N] */
static void test_conv_depthwise_2d(void) {
    tu_case = "conv_depthwise_2d";
    static const struct c2 cases[] = {
        { 8, 8, 3, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1 },
        { 9, 6, 4, 1, 3, 2, 4, 2, 1, 0, 1, 1, 2 },
        { 7, 7, 1, 3, 5, 5, 1, 1, 1, 2, 2, 1, 1 },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const struct c2 c = cases[ci];
        for (int f16 = 0; f16 < 2; f16++) {
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * k = kiln_new_tensor_4d(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, c.KW, c.KH, 1, c.IC);
            struct kiln_tensor * x = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c.W, c.H, c.IC, c.N);
            tu_fill_uniform(k, -1.0f, 1.0f);
            tu_fill_uniform(x, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_conv_depthwise_2d(ctx, k, x, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OW = (c.W + 2 * c.p0 - c.d0 * (c.KW - 1) - 1) / c.s0 + 1;
            const int64_t OH = (c.H + 2 * c.p1 - c.d1 * (c.KH - 1) - 1) / c.s1 + 1;
            CHECK(out->ne[0] == OW && out->ne[1] == OH && out->ne[2] == c.IC && out->ne[3] == c.N, "depthwise shape");
            double * kv = tu_to_f64(k);
            double * xv = tu_to_f64(x);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t n = 0; n < c.N; n++)
            for (int64_t ch = 0; ch < c.IC; ch++)
            for (int64_t oy = 0; oy < OH; oy++)
            for (int64_t ox = 0; ox < OW; ox++) {
                ref[cc_idx(out, ox, oy, ch, n)] = conv2d_at(kv + ch * c.KW * c.KH, xv + (n * c.IC + ch) * c.W * c.H,
                                                            c.KW, c.KH, 1, c.W, c.H, 0, 0, ox, oy, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1);
            }
            char what[64];
            snprintf(what, sizeof what, "conv_depthwise_2d case %zu kernel %s", ci, f16 ? "f16" : "f32");
            cc_check_threads(ctx, out, ref, 1e-5, what);
            free(kv);
            free(xv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

/* ref of pool_2d (no padding) over [W, H, C, N] doubles */
static void ref_pool2(const double * x, int64_t W, int64_t H, int64_t CN, int k, bool avg, double * out) {
    const int64_t OW = (W - k) / k + 1, OH = (H - k) / k + 1;
    for (int64_t q = 0; q < CN; q++)
    for (int64_t oy = 0; oy < OH; oy++)
    for (int64_t ox = 0; ox < OW; ox++) {
        double acc = avg ? 0.0 : -1e300;
        for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            const double v = x[(q * H + oy * k + ky) * W + ox * k + kx];
            if (avg) acc += v;
            else if (v > acc) acc = v;
        }
        out[(q * OH + oy) * OW + ox] = avg ? acc / (k * k) : acc;
    }
}

/* The MNIST CNN's shape of graph: conv -> max pool -> conv -> avg pool, in
 * one graph; computed once in a context and once with the graph allocator
 * (buffers reused between nodes, work buffer shared). */
static void test_cnn_chain(void) {
    tu_case = "cnn chain";
    const int64_t W = 12, H = 12, IC = 2, N = 3, C1 = 4, C2 = 5;
    for (int galloc = 0; galloc < 2; galloc++) {
        struct kiln_init_params ip = { 32 << 20, NULL, galloc == 1 };
        struct kiln_context * ctx = kiln_init(ip);
        struct kiln_tensor * x  = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, W, H, IC, N);
        struct kiln_tensor * k1 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, IC, C1);
        struct kiln_tensor * k2 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, C1, C2);
        kiln_set_input(x); kiln_set_input(k1); kiln_set_input(k2);
        struct kiln_tensor * c1 = kiln_conv_2d(ctx, k1, x, 1, 1, 1, 1, 1, 1);          /* [12, 12, 4, 3] */
        struct kiln_tensor * p1 = kiln_pool_2d(ctx, c1, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0); /* [6, 6, 4, 3] */
        struct kiln_tensor * c2 = kiln_conv_2d(ctx, k2, p1, 1, 1, 0, 0, 1, 1);         /* [4, 4, 5, 3] */
        struct kiln_tensor * out = kiln_pool_2d(ctx, c2, KILN_OP_POOL_AVG, 2, 2, 2, 2, 0, 0); /* [2, 2, 5, 3] */
        if (!CHECK(out != NULL, "build: %s", kiln_last_error())) { kiln_free(ctx); continue; }
        CHECK(out->ne[0] == 2 && out->ne[1] == 2 && out->ne[2] == C2 && out->ne[3] == N, "chain shape");
        struct kiln_gallocr * ga = NULL;
        struct kiln_cgraph * g = NULL;
        if (galloc) {
            g = kiln_new_graph(ctx);
            kiln_build_forward_expand(g, out);
            ga = kiln_gallocr_new();
            if (!CHECK(kiln_gallocr_alloc_graph(ga, g), "gallocr: %s", kiln_last_error())) { kiln_gallocr_free(ga); kiln_free(ctx); continue; }
        }
        tu_fill_uniform(x, -1.0f, 1.0f);
        tu_fill_uniform(k1, -1.0f, 1.0f);
        tu_fill_uniform(k2, -1.0f, 1.0f);
        double * xv = tu_to_f64(x), * k1v = tu_to_f64(k1), * k2v = tu_to_f64(k2);
        double * r1 = (double *) malloc(sizeof(double) * (size_t)(W * H * C1 * N));
        double * r2 = (double *) malloc(sizeof(double) * (size_t)(6 * 6 * C1 * N));
        double * r3 = (double *) malloc(sizeof(double) * (size_t)(4 * 4 * C2 * N));
        double * ref = (double *) malloc(sizeof(double) * (size_t)(2 * 2 * C2 * N));
        for (int64_t n = 0; n < N; n++) for (int64_t oc = 0; oc < C1; oc++)
        for (int64_t y = 0; y < H; y++) for (int64_t xx = 0; xx < W; xx++)
            r1[((n * C1 + oc) * H + y) * W + xx] = conv2d_at(k1v, xv, 3, 3, IC, W, H, n, oc, xx, y, 1, 1, 1, 1, 1, 1);
        ref_pool2(r1, W, H, C1 * N, 2, false, r2);
        for (int64_t n = 0; n < N; n++) for (int64_t oc = 0; oc < C2; oc++)
        for (int64_t y = 0; y < 4; y++) for (int64_t xx = 0; xx < 4; xx++)
            r3[((n * C2 + oc) * 4 + y) * 4 + xx] = conv2d_at(k2v, r2, 3, 3, C1, 6, 6, n, oc, xx, y, 1, 1, 0, 0, 1, 1);
        ref_pool2(r3, 4, 4, C2 * N, 2, true, ref);
        if (galloc) {
            for (int nt = 1; nt <= 4; nt *= 2) {
                const enum kiln_status st = kiln_graph_compute_with_ctx(ctx, g, nt);
                if (!CHECK(st == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) break;
                double * got = tu_to_f64(out);
                const double e = tu_nmse(got, ref, kiln_nelements(out));
                CHECK(e < 1e-10, "gallocr chain, %d threads: nmse %.3g", nt, e);
                free(got);
            }
            kiln_gallocr_free(ga);
        } else {
            cc_check_threads(ctx, out, ref, 1e-10, "cnn chain");
        }
        free(xv); free(k1v); free(k2v); free(r1); free(r2); free(r3); free(ref);
        kiln_free(ctx);
    }
}

static void test_bad_inputs(void) {
    tu_case = "bad inputs";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * k = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, 2, 4);
    struct kiln_tensor * x = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 8, 8, 2, 1);
    struct kiln_tensor * x3 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 8, 8, 3, 1);
    CHECK(kiln_conv_2d(ctx, k, x, 1, 1, 0, 0, 1, 1) != NULL, "conv_2d ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_conv_2d(ctx, k, x3, 1, 1, 0, 0, 1, 1), "conv_2d: im2col: kernel a has 2 input channels");
    CHECK_FAILS(kiln_conv_2d(ctx, k, x, 0, 1, 0, 0, 1, 1), "conv_2d: im2col: strides");
    CHECK_FAILS(kiln_conv_2d(ctx, kiln_transpose(ctx, k), x, 1, 1, 0, 0, 1, 1), "contiguous");
    CHECK_FAILS(kiln_conv_2d(ctx, NULL, x, 1, 1, 0, 0, 1, 1), "NULL");
    CHECK_FAILS(kiln_conv_2d_sk_p0(ctx, NULL, x), "NULL");
    CHECK_FAILS(kiln_conv_2d_s1_ph(ctx, k, NULL), "NULL");
    struct kiln_tensor * k1 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 2, 4);
    struct kiln_tensor * s1 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 10, 3, 1);
    CHECK_FAILS(kiln_conv_1d(ctx, k1, s1, 1, 0, 1), "conv_1d: im2col");
    CHECK_FAILS(kiln_conv_1d(ctx, k, x, 1, 0, 1), "3D");
    CHECK_FAILS(kiln_conv_1d_ph(ctx, NULL, s1, 1, 1), "NULL");
    struct kiln_tensor * kd = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 1, 4);
    struct kiln_tensor * sd = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 10, 3);
    CHECK_FAILS(kiln_conv_1d_dw(ctx, kd, sd, 1, 0, 1), "conv_1d_dw");
    struct kiln_tensor * kdw = kiln_new_tensor_4d(ctx, KILN_TYPE_F16, 3, 3, 1, 3);
    CHECK_FAILS(kiln_conv_depthwise_2d(ctx, kdw, x, 1, 1, 0, 0, 1, 1), "conv_depthwise_2d");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(2024);
    test_conv_2d();
    test_conv_1d();
    test_conv_1d_dw();
    test_conv_depthwise_2d();
    test_cnn_chain();
    test_bad_inputs();
    return tu_finish();
}
