/*
 * test_ops_conv.c — im2col (1D/2D, F32/F16 results), im2col_back,
 * conv_transpose_1d and conv_transpose_2d_p0 against direct double-precision
 * loops, with 1/2/4 threads; plus the constructors' bad-input errors.
 */
#include "ops_conv_check.h"

struct conv2d_case {
    int64_t IW, IH, IC, N, KW, KH;
    int s0, s1, p0, p1, d0, d1;
};

static const struct conv2d_case cases2d[] = {
    {  5,  4, 1, 1, 3, 3, 1, 1, 0, 0, 1, 1 },
    {  7,  6, 3, 2, 3, 2, 2, 1, 1, 0, 1, 2 },
    {  9,  8, 2, 3, 2, 3, 1, 2, 2, 1, 2, 1 },
    {  1,  1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1 },
    { 11,  5, 4, 1, 5, 3, 3, 2, 2, 1, 1, 1 },
    {  4,  4, 2, 2, 5, 5, 1, 1, 2, 2, 1, 1 }, /* kernel larger than the image */
    { 13,  3, 1, 1, 2, 2, 4, 3, 0, 0, 3, 1 },
};

struct conv1d_case { int64_t IW, IC, N, K; int s, p, d; };

static const struct conv1d_case cases1d[] = {
    { 10, 1, 1, 3, 1, 0, 1 },
    { 13, 3, 2, 4, 2, 1, 1 },
    {  8, 2, 3, 3, 1, 2, 2 },
    {  5, 5, 1, 5, 3, 2, 1 },
};

/* data b [IW, IH, IC, N]; when permuted, b is a non-contiguous view */
static struct kiln_tensor * make_image(struct kiln_context * ctx, enum kiln_type type, int64_t IW, int64_t IH, int64_t IC, int64_t N, bool permuted) {
    struct kiln_tensor * b;
    if (permuted) {
        struct kiln_tensor * raw = kiln_new_tensor_4d(ctx, type, IH, IW, IC, N);
        b = kiln_permute(ctx, raw, 1, 0, 2, 3);
    } else {
        b = kiln_new_tensor_4d(ctx, type, IW, IH, IC, N);
    }
    tu_fill_uniform(b, -1.0f, 1.0f);
    return b;
}

static void test_im2col_2d(void) {
    tu_case = "im2col_2d";
    const enum kiln_type dtypes[2] = { KILN_TYPE_F32, KILN_TYPE_F16 };
    /* data: f32 contiguous, f16 permuted (a non-contiguous view), bf16 contiguous */
    const enum kiln_type btypes[3] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };
    for (size_t ci = 0; ci < sizeof(cases2d) / sizeof(cases2d[0]); ci++) {
        const struct conv2d_case c = cases2d[ci];
        for (int ti = 0; ti < 2; ti++) {
            for (int perm = 0; perm < 3; perm++) {
                struct kiln_context * ctx = tu_ctx(16 << 20);
                struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F16, c.KW, c.KH, c.IC, 3);
                struct kiln_tensor * b = make_image(ctx, btypes[perm], c.IW, c.IH, c.IC, c.N, perm == 1);
                struct kiln_tensor * out = kiln_im2col(ctx, a, b, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, true, dtypes[ti]);
                if (!CHECK(out != NULL, "case %zu: im2col: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
                const int64_t OW = (c.IW + 2 * c.p0 - c.d0 * (c.KW - 1) - 1) / c.s0 + 1;
                const int64_t OH = (c.IH + 2 * c.p1 - c.d1 * (c.KH - 1) - 1) / c.s1 + 1;
                CHECK(out->ne[0] == c.IC * c.KH * c.KW && out->ne[1] == OW && out->ne[2] == OH && out->ne[3] == c.N,
                      "case %zu: shape", ci);
                CHECK(out->op_params[0] == c.s0 && out->op_params[5] == c.d1 && out->op_params[6] == 1, "op_params layout");
                double * bv = tu_to_f64(b);
                double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
                for (int64_t n = 0; n < c.N; n++)
                for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t ic = 0; ic < c.IC; ic++)
                for (int64_t kh = 0; kh < c.KH; kh++)
                for (int64_t kw = 0; kw < c.KW; kw++) {
                    const int64_t x = ow * c.s0 + kw * c.d0 - c.p0, y = oh * c.s1 + kh * c.d1 - c.p1;
                    const double v = (x < 0 || x >= c.IW || y < 0 || y >= c.IH) ? 0.0 : bv[cc_idx(b, x, y, ic, n)];
                    ref[cc_idx(out, (ic * c.KH + kh) * c.KW + kw, ow, oh, n)] = v;
                }
                char what[128];
                snprintf(what, sizeof what, "im2col 2D case %zu dst %s data %s%s", ci, kiln_type_name(dtypes[ti]),
                         kiln_type_name(btypes[perm]), perm == 1 ? " permuted" : "");
                cc_check_threads(ctx, out, ref, dtypes[ti] == KILN_TYPE_F32 && btypes[perm] == KILN_TYPE_F32 ? 0.0 : 1e-6, what);
                free(bv);
                free(ref);
                kiln_free(ctx);
            }
        }
    }
}

static void test_im2col_1d(void) {
    tu_case = "im2col_1d";
    for (size_t ci = 0; ci < sizeof(cases1d) / sizeof(cases1d[0]); ci++) {
        const struct conv1d_case c = cases1d[ci];
        for (int ti = 0; ti < 2; ti++) {
            const enum kiln_type dt = ti ? KILN_TYPE_F16 : KILN_TYPE_F32;
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, c.K, c.IC, 2);
            struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, c.IW, c.IC, c.N);
            tu_fill_uniform(b, -2.0f, 2.0f);
            /* the 1D form ignores s1/p1/d1, as ggml's conv_1d passes zeros */
            struct kiln_tensor * out = kiln_im2col(ctx, a, b, c.s, 0, c.p, 0, c.d, 0, false, dt);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OW = (c.IW + 2 * c.p - c.d * (c.K - 1) - 1) / c.s + 1;
            CHECK(out->ne[0] == c.IC * c.K && out->ne[1] == OW && out->ne[2] == c.N && out->ne[3] == 1, "1D shape");
            CHECK(out->op_params[6] == 0, "is_2D flag");
            double * bv = tu_to_f64(b);
            double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
            for (int64_t n = 0; n < c.N; n++)
            for (int64_t ow = 0; ow < OW; ow++)
            for (int64_t ic = 0; ic < c.IC; ic++)
            for (int64_t k = 0; k < c.K; k++) {
                const int64_t x = ow * c.s + k * c.d - c.p;
                ref[cc_idx(out, ic * c.K + k, ow, n, 0)] = (x < 0 || x >= c.IW) ? 0.0 : bv[cc_idx(b, x, ic, n, 0)];
            }
            char what[96];
            snprintf(what, sizeof what, "im2col 1D case %zu dst %s", ci, kiln_type_name(dt));
            cc_check_threads(ctx, out, ref, dt == KILN_TYPE_F32 ? 0.0 : 1e-6, what);
            free(bv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

/* im2col_back against the adjoint of im2col: scatter-add every column
 * element back to the pixel it was copied from. */
static void test_im2col_back(void) {
    tu_case = "im2col_back";
    for (int dim = 1; dim <= 2; dim++) {
        const size_t nc = dim == 2 ? sizeof(cases2d) / sizeof(cases2d[0]) : sizeof(cases1d) / sizeof(cases1d[0]);
        for (size_t ci = 0; ci < nc; ci++) {
            struct conv2d_case c;
            if (dim == 2) c = cases2d[ci];
            else {
                const struct conv1d_case d = cases1d[ci];
                c = (struct conv2d_case){ d.IW, 1, d.IC, d.N, d.K, 1, d.s, 1, d.p, 0, d.d, 1 };
            }
            const bool is_2D = dim == 2;
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * kern = is_2D ? kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c.KW, c.KH, c.IC, 2)
                                              : kiln_new_tensor_3d(ctx, KILN_TYPE_F32, c.KW, c.IC, 2);
            const int64_t OW = (c.IW + 2 * c.p0 - c.d0 * (c.KW - 1) - 1) / c.s0 + 1;
            const int64_t OH = is_2D ? (c.IH + 2 * c.p1 - c.d1 * (c.KH - 1) - 1) / c.s1 + 1 : 1;
            const int64_t K = c.IC * c.KH * c.KW;
            struct kiln_tensor * g = is_2D ? kiln_new_tensor_4d(ctx, KILN_TYPE_F32, K, OW, OH, c.N)
                                           : kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, OW, c.N);
            tu_fill_uniform(g, -1.0f, 1.0f);
            int64_t ne[4] = { c.IW, is_2D ? c.IH : c.IC, is_2D ? c.IC : c.N, is_2D ? c.N : 1 };
            struct kiln_tensor * out = kiln_im2col_back(ctx, g, kern, ne, c.s0, c.s1, c.p0, c.p1, c.d0, c.d1, is_2D);
            if (!CHECK(out != NULL, "%dD case %zu: %s", dim, ci, kiln_last_error())) { kiln_free(ctx); continue; }
            double * gv = tu_to_f64(g);
            double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
            for (int64_t n = 0; n < c.N; n++)
            for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
            for (int64_t ic = 0; ic < c.IC; ic++)
            for (int64_t kh = 0; kh < c.KH; kh++)
            for (int64_t kw = 0; kw < c.KW; kw++) {
                const int64_t x = ow * c.s0 + kw * c.d0 - c.p0;
                const int64_t y = is_2D ? oh * c.s1 + kh * c.d1 - c.p1 : 0;
                if (x < 0 || x >= c.IW || y < 0 || y >= c.IH) continue;
                const int64_t col = (ic * c.KH + kh) * c.KW + kw;
                const double v = is_2D ? gv[cc_idx(g, col, ow, oh, n)] : gv[cc_idx(g, col, ow, n, 0)];
                if (is_2D) ref[cc_idx(out, x, y, ic, n)] += v;
                else       ref[cc_idx(out, x, ic, n, 0)] += v;
            }
            char what[64];
            snprintf(what, sizeof what, "im2col_back %dD case %zu", dim, ci);
            cc_check_threads(ctx, out, ref, 1e-12, what);
            free(gv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_conv_transpose_1d(void) {
    tu_case = "conv_transpose_1d";
    /* L, IC, OC, K, s */
    static const int64_t cases[][5] = { { 5, 1, 1, 3, 1 }, { 7, 3, 2, 4, 2 }, { 9, 4, 5, 2, 3 }, { 1, 2, 3, 5, 1 }, { 6, 17, 3, 3, 1 } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t L = cases[ci][0], IC = cases[ci][1], OC = cases[ci][2], K = cases[ci][3];
        const int s = (int) cases[ci][4];
        for (int v = 0; v < 3; v++) { /* f32 kernel, f16 kernel, f32 kernel with transposed data */
            const int f16 = v == 1;
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * a = kiln_new_tensor_3d(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, K, OC, IC);
            struct kiln_tensor * b = v == 2 ? kiln_transpose(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, IC, L))
                                            : kiln_new_tensor_2d(ctx, KILN_TYPE_F32, L, IC);
            tu_fill_uniform(a, -1.0f, 1.0f);
            tu_fill_uniform(b, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_conv_transpose_1d(ctx, a, b, s, 0, 1);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OL = (L - 1) * s + K;
            CHECK(out->ne[0] == OL && out->ne[1] == OC && out->ne[2] == 1, "shape");
            CHECK(out->op_params[0] == s && out->op_params[1] == 0 && out->op_params[2] == 1, "op_params");
            double * av = tu_to_f64(a);
            double * bv = tu_to_f64(b);
            double * ref = (double *) calloc((size_t)(OL * OC), sizeof(double));
            for (int64_t oc = 0; oc < OC; oc++)
            for (int64_t l = 0; l < L; l++)
            for (int64_t k = 0; k < K; k++)
            for (int64_t c = 0; c < IC; c++) {
                ref[oc * OL + l * s + k] += av[cc_idx(a, k, oc, c, 0)] * bv[cc_idx(b, l, c, 0, 0)];
            }
            char what[64];
            snprintf(what, sizeof what, "conv_transpose_1d case %zu kernel %s%s", ci, f16 ? "f16" : "f32", v == 2 ? " transposed b" : "");
            cc_check_threads(ctx, out, ref, f16 ? 1e-5 : 1e-10, what);
            free(av);
            free(bv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_conv_transpose_2d(void) {
    tu_case = "conv_transpose_2d";
    /* W, H, IC, N, KW, KH, OC, stride */
    static const int64_t cases[][8] = {
        { 3, 3, 1, 1, 2, 2, 1, 1 }, { 4, 3, 3, 2, 3, 2, 2, 2 }, { 5, 2, 2, 1, 3, 3, 4, 3 }, { 1, 1, 5, 3, 4, 3, 2, 2 }, { 6, 5, 9, 1, 2, 3, 3, 1 },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t W = cases[ci][0], H = cases[ci][1], IC = cases[ci][2], N = cases[ci][3];
        const int64_t KW = cases[ci][4], KH = cases[ci][5], OC = cases[ci][6];
        const int s = (int) cases[ci][7];
        for (int v = 0; v < 3; v++) { /* f32 kernel, f16 kernel, f32 kernel with permuted data */
            const int f16 = v == 1;
            struct kiln_context * ctx = tu_ctx(16 << 20);
            struct kiln_tensor * a = kiln_new_tensor_4d(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, KW, KH, OC, IC);
            struct kiln_tensor * b = v == 2 ? kiln_permute(ctx, kiln_new_tensor_4d(ctx, KILN_TYPE_F32, IC, W, H, N), 2, 0, 1, 3)
                                            : kiln_new_tensor_4d(ctx, KILN_TYPE_F32, W, H, IC, N);
            tu_fill_uniform(a, -1.0f, 1.0f);
            tu_fill_uniform(b, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_conv_transpose_2d_p0(ctx, a, b, s);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t OW = (W - 1) * s + KW, OH = (H - 1) * s + KH;
            CHECK(out->ne[0] == OW && out->ne[1] == OH && out->ne[2] == OC && out->ne[3] == N, "shape");
            CHECK(out->op == KILN_OP_CONV_TRANSPOSE_2D && out->op_params[0] == s, "op and op_params");
            double * av = tu_to_f64(a);
            double * bv = tu_to_f64(b);
            double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
            for (int64_t n = 0; n < N; n++)
            for (int64_t oc = 0; oc < OC; oc++)
            for (int64_t h = 0; h < H; h++)
            for (int64_t w = 0; w < W; w++)
            for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++)
            for (int64_t c = 0; c < IC; c++) {
                ref[cc_idx(out, w * s + kw, h * s + kh, oc, n)] += av[cc_idx(a, kw, kh, oc, c)] * bv[cc_idx(b, w, h, c, n)];
            }
            char what[64];
            snprintf(what, sizeof what, "conv_transpose_2d case %zu kernel %s%s", ci, f16 ? "f16" : "f32", v == 2 ? " permuted b" : "");
            cc_check_threads(ctx, out, ref, f16 ? 1e-5 : 1e-10, what);
            free(av);
            free(bv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_bad_inputs(void) {
    tu_case = "bad inputs";
    struct kiln_context * ctx = tu_ctx(4 << 20);
    struct kiln_tensor * k2 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, 2, 4);
    struct kiln_tensor * img = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 8, 8, 2, 1);
    struct kiln_tensor * img3 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 8, 8, 3, 1);
    struct kiln_tensor * tiny = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 2, 2, 2, 1);
    struct kiln_tensor * imgi = kiln_new_tensor_4d(ctx, KILN_TYPE_I32, 8, 8, 2, 1);

    CHECK_FAILS(kiln_im2col(ctx, NULL, img, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "argument a is NULL");
    CHECK_FAILS(kiln_im2col(ctx, k2, NULL, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "argument b is NULL");
    CHECK_FAILS(kiln_im2col(ctx, k2, img3, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "input channels");
    CHECK_FAILS(kiln_im2col(ctx, k2, tiny, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "too small");
    CHECK_FAILS(kiln_im2col(ctx, k2, img, 0, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "strides");
    CHECK_FAILS(kiln_im2col(ctx, k2, img, 1, 1, -1, 0, 1, 1, true, KILN_TYPE_F32), "paddings");
    CHECK_FAILS(kiln_im2col(ctx, k2, img, 1, 1, 0, 0, 1, 0, true, KILN_TYPE_F32), "dilations");
    CHECK_FAILS(kiln_im2col(ctx, k2, img, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_Q4_0), "dst_type");
    CHECK_FAILS(kiln_im2col(ctx, k2, imgi, 1, 1, 0, 0, 1, 1, true, KILN_TYPE_F32), "f32, f16 or bf16");
    struct kiln_tensor * k1 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 2, 4);
    struct kiln_tensor * sig = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 10, 3, 1);
    CHECK_FAILS(kiln_im2col(ctx, k1, sig, 1, 0, 0, 0, 1, 0, false, KILN_TYPE_F32), "input channels");
    CHECK_FAILS(kiln_im2col(ctx, k1, img, 1, 0, 0, 0, 1, 0, false, KILN_TYPE_F32), "input channels");

    {   /* sizes from outside can overflow int64: an error, not UB */
        struct kiln_init_params ip = { 1 << 16, NULL, true };
        struct kiln_context * nctx = kiln_init(ip);
        struct kiln_tensor * huge = kiln_new_tensor_4d(nctx, KILN_TYPE_F32, (int64_t) 1 << 40, 1, 1, 1);
        struct kiln_tensor * data = kiln_new_tensor_4d(nctx, KILN_TYPE_F32, 8, 8, 1, 1);
        CHECK_FAILS(kiln_im2col(nctx, huge, data, 1, 1, 0, 0, 0x7fffffff, 1, true, KILN_TYPE_F32), "overflows");
        kiln_free(nctx);
    }

    int64_t ne[4] = { 8, 8, 2, 1 };
    struct kiln_tensor * g = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 18, 6, 6, 1);
    CHECK(kiln_im2col_back(ctx, g, k2, ne, 1, 1, 0, 0, 1, 1, true) != NULL, "im2col_back good shape: %s", kiln_last_error());
    CHECK_FAILS(kiln_im2col_back(ctx, g, k2, NULL, 1, 1, 0, 0, 1, 1, true), "ne");
    CHECK_FAILS(kiln_im2col_back(ctx, g, k2, ne, 2, 1, 0, 0, 1, 1, true), "does not match");
    int64_t bad_ne[4] = { 8, 0, 2, 1 };
    CHECK_FAILS(kiln_im2col_back(ctx, g, k2, bad_ne, 1, 1, 0, 0, 1, 1, true), "must be >= 1");

    struct kiln_tensor * kt = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 4, 2);
    struct kiln_tensor * x2 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 7, 2);
    struct kiln_tensor * x3 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 7, 3);
    CHECK(kiln_conv_transpose_1d(ctx, kt, x2, 2, 0, 1) != NULL, "conv_transpose_1d ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, kt, x3, 2, 0, 1), "input channels");
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, kt, x2, 2, 1, 1), "padding");
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, kt, x2, 2, 0, 2), "dilation");
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, kt, x2, 0, 0, 1), "stride");
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, kt, img, 1, 0, 1), "matrix");
    CHECK_FAILS(kiln_conv_transpose_1d(ctx, imgi, x2, 1, 0, 1), "f32 or f16");

    struct kiln_tensor * kt2 = kiln_new_tensor_4d(ctx, KILN_TYPE_F16, 3, 3, 4, 2);
    CHECK(kiln_conv_transpose_2d_p0(ctx, kt2, img, 2) != NULL, "conv_transpose_2d_p0 ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_conv_transpose_2d_p0(ctx, kt2, img3, 2), "input channels");
    CHECK_FAILS(kiln_conv_transpose_2d_p0(ctx, kt2, img, 0), "stride");
    CHECK_FAILS(kiln_conv_transpose_2d_p0(ctx, NULL, img, 1), "NULL");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(1234);
    test_im2col_2d();
    test_im2col_1d();
    test_im2col_back();
    test_conv_transpose_1d();
    test_conv_transpose_2d();
    test_bad_inputs();
    return tu_finish();
}
