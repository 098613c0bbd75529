/*
 * test_ops_pool.c — pool_1d, pool_2d (max / avg, with padding) and
 * pool_2d_back against direct double-precision loops, with 1/2/4 threads,
 * F32 and F16 inputs, contiguous and permuted; plus bad-input errors.
 */
#include "ops_conv_check.h"

#include <float.h>

/* ggml pooling: window starts at o*s - p, out-of-range positions skipped,
 * MAX from -FLT_MAX, AVG divided by the full window size. */
static double ref_pool(const double * x, int64_t n, int64_t stride, int64_t o, int k, int s, int p, enum kiln_op_pool op) {
    double acc = op == KILN_OP_POOL_MAX ? -FLT_MAX : 0.0;
    for (int j = 0; j < k; j++) {
        const int64_t i = o * s - p + j;
        if (i < 0 || i >= n) continue;
        const double v = x[i * stride];
        if (op == KILN_OP_POOL_AVG) acc += v;
        else if (v > acc) acc = v;
    }
    return op == KILN_OP_POOL_AVG ? acc / k : acc;
}

static struct kiln_tensor * make_input(struct kiln_context * ctx, enum kiln_type type, const int64_t * ne, bool permuted) {
    struct kiln_tensor * a;
    if (permuted) {
        struct kiln_tensor * raw = kiln_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
        a = kiln_permute(ctx, raw, 1, 0, 2, 3);
    } else {
        a = kiln_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
    tu_fill_uniform(a, -3.0f, 3.0f);
    return a;
}

static void test_pool_1d(void) {
    tu_case = "pool_1d";
    /* ne0, ne1, ne2, ne3, k, s, p */
    static const int cases[][7] = {
        { 8, 3, 1, 1, 2, 2, 0 }, { 9, 2, 2, 2, 3, 3, 0 }, { 7, 1, 1, 1, 7, 7, 0 }, /* the forms ggml runs */
        { 10, 3, 2, 1, 3, 2, 1 }, { 5, 4, 1, 1, 4, 1, 2 }, { 1, 1, 1, 1, 1, 1, 0 },
    };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int * c = cases[ci];
        const int64_t ne[4] = { c[0], c[1], c[2], c[3] };
        for (int op = 0; op < 2; op++) {
            for (int v = 0; v < 3; v++) { /* f32, f16, f32 permuted */
                const enum kiln_type type = v == 1 ? KILN_TYPE_F16 : KILN_TYPE_F32;
                struct kiln_context * ctx = tu_ctx(8 << 20);
                struct kiln_tensor * a = make_input(ctx, type, ne, v == 2);
                struct kiln_tensor * out = kiln_pool_1d(ctx, a, (enum kiln_op_pool) op, c[4], c[5], c[6]);
                if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
                const int64_t OW = (c[0] + 2 * c[6] - c[4]) / c[5] + 1;
                CHECK(out->ne[0] == OW && out->ne[1] == c[1] && out->ne[2] == c[2] && out->ne[3] == c[3], "pool_1d shape");
                CHECK(out->op_params[0] == op && out->op_params[1] == c[4] && out->op_params[2] == c[5] && out->op_params[3] == c[6],
                      "pool_1d op_params");
                double * av = tu_to_f64(a);
                double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
                const int64_t rows = (int64_t) c[1] * c[2] * c[3];
                for (int64_t r = 0; r < rows; r++) {
                    for (int64_t o = 0; o < OW; o++) ref[r * OW + o] = ref_pool(av + r * c[0], c[0], 1, o, c[4], c[5], c[6], (enum kiln_op_pool) op);
                }
                char what[96];
                snprintf(what, sizeof what, "pool_1d case %zu %s %s%s", ci, op ? "avg" : "max", kiln_type_name(type), v == 2 ? " permuted" : "");
                cc_check_threads(ctx, out, ref, 1e-12, what);
                free(av);
                free(ref);
                kiln_free(ctx);
            }
        }
    }
}

struct pool2d_case { int64_t ne[4]; int k0, k1, s0, s1; float p0, p1; };

static const struct pool2d_case cases2d[] = {
    { { 8, 8, 3, 2 }, 2, 2, 2, 2, 0, 0 },   /* the MNIST CNN pool */
    { { 7, 5, 2, 1 }, 3, 3, 2, 2, 1, 1 },
    { { 9, 6, 1, 3 }, 3, 2, 1, 2, 0, 1 },
    { { 5, 5, 4, 1 }, 5, 5, 5, 5, 2, 2 },
    { { 1, 1, 1, 1 }, 1, 1, 1, 1, 0, 0 },
    { { 6, 7, 2, 2 }, 2, 3, 3, 1, 1.5f, 0 }, /* float padding, truncated like ggml */
};

static int64_t pool_size(int64_t n, int k, int s, float p) { return (int64_t)(((float) n + 2 * p - (float) k) / (float) s + 1); }

static void test_pool_2d(void) {
    tu_case = "pool_2d";
    for (size_t ci = 0; ci < sizeof(cases2d) / sizeof(cases2d[0]); ci++) {
        const struct pool2d_case c = cases2d[ci];
        for (int op = 0; op < 2; op++) {
            for (int v = 0; v < 3; v++) {
                const enum kiln_type type = v == 1 ? KILN_TYPE_F16 : KILN_TYPE_F32;
                struct kiln_context * ctx = tu_ctx(8 << 20);
                struct kiln_tensor * a = make_input(ctx, type, c.ne, v == 2);
                struct kiln_tensor * out = kiln_pool_2d(ctx, a, (enum kiln_op_pool) op, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1);
                if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
                const int64_t OW = pool_size(c.ne[0], c.k0, c.s0, c.p0), OH = pool_size(c.ne[1], c.k1, c.s1, c.p1);
                CHECK(out->ne[0] == OW && out->ne[1] == OH && out->ne[2] == c.ne[2] && out->ne[3] == c.ne[3], "pool_2d shape");
                CHECK(out->op_params[5] == (int) c.p0 && out->op_params[6] == (int) c.p1 && out->op_params[3] == c.s0, "pool_2d op_params");
                const int p0 = (int) c.p0, p1 = (int) c.p1;
                double * av = tu_to_f64(a);
                double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
                const int64_t planes = c.ne[2] * c.ne[3];
                for (int64_t q = 0; q < planes; q++)
                for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    double acc = op == KILN_OP_POOL_MAX ? -FLT_MAX : 0.0;
                    for (int ky = 0; ky < c.k1; ky++)
                    for (int kx = 0; kx < c.k0; kx++) {
                        const int64_t x = ox * c.s0 - p0 + kx, y = oy * c.s1 - p1 + ky;
                        if (x < 0 || x >= c.ne[0] || y < 0 || y >= c.ne[1]) continue;
                        const double val = av[(q * c.ne[1] + y) * c.ne[0] + x];
                        if (op == KILN_OP_POOL_AVG) acc += val;
                        else if (val > acc) acc = val;
                    }
                    ref[(q * OH + oy) * OW + ox] = op == KILN_OP_POOL_AVG ? acc / (c.k0 * c.k1) : acc;
                }
                char what[96];
                snprintf(what, sizeof what, "pool_2d case %zu %s %s%s", ci, op ? "avg" : "max", kiln_type_name(type), v == 2 ? " permuted" : "");
                cc_check_threads(ctx, out, ref, 1e-12, what);
                free(av);
                free(ref);
                kiln_free(ctx);
            }
        }
    }
}

static void test_pool_2d_back(void) {
    tu_case = "pool_2d_back";
    for (size_t ci = 0; ci < sizeof(cases2d) / sizeof(cases2d[0]); ci++) {
        const struct pool2d_case c = cases2d[ci];
        for (int op = 0; op < 2; op++) {
            for (int f16 = 0; f16 < 2; f16++) {
                struct kiln_context * ctx = tu_ctx(8 << 20);
                /* f16 inputs have ties: the first maximum in scan order wins */
                struct kiln_tensor * af = make_input(ctx, f16 ? KILN_TYPE_F16 : KILN_TYPE_F32, c.ne, false);
                const int64_t OW = pool_size(c.ne[0], c.k0, c.s0, c.p0), OH = pool_size(c.ne[1], c.k1, c.s1, c.p1);
                struct kiln_tensor * dy = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, OW, OH, c.ne[2], c.ne[3]);
                tu_fill_uniform(dy, -1.0f, 1.0f);
                struct kiln_tensor * out = kiln_pool_2d_back(ctx, dy, af, (enum kiln_op_pool) op, c.k0, c.k1, c.s0, c.s1, c.p0, c.p1);
                if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
                CHECK(kiln_are_same_shape(out, af) && out->type == KILN_TYPE_F32, "pool_2d_back shape");
                const int p0 = (int) c.p0, p1 = (int) c.p1;
                double * fv = tu_to_f64(af);
                double * gv = tu_to_f64(dy);
                double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
                const int64_t planes = c.ne[2] * c.ne[3];
                for (int64_t q = 0; q < planes; q++)
                for (int64_t oy = 0; oy < OH; oy++)
                for (int64_t ox = 0; ox < OW; ox++) {
                    const double g = gv[(q * OH + oy) * OW + ox];
                    double best = -FLT_MAX;
                    int64_t bi = -1;
                    for (int ky = 0; ky < c.k1; ky++)
                    for (int kx = 0; kx < c.k0; kx++) {
                        const int64_t x = ox * c.s0 - p0 + kx, y = oy * c.s1 - p1 + ky;
                        if (x < 0 || x >= c.ne[0] || y < 0 || y >= c.ne[1]) continue;
                        const int64_t i = (q * c.ne[1] + y) * c.ne[0] + x;
                        if (op == KILN_OP_POOL_AVG) ref[i] += g / (c.k0 * c.k1);
                        else if (fv[i] > best) { best = fv[i]; bi = i; }
                    }
                    if (op == KILN_OP_POOL_MAX && bi >= 0) ref[bi] += g;
                }
                char what[96];
                snprintf(what, sizeof what, "pool_2d_back case %zu %s input %s", ci, op ? "avg" : "max", f16 ? "f16" : "f32");
                cc_check_threads(ctx, out, ref, 1e-12, what);
                free(fv);
                free(gv);
                free(ref);
                kiln_free(ctx);
            }
        }
    }
}

/* ggml's comparisons: MAX never picks a NaN (v > acc is false) but does pick
 * +inf; AVG propagates both. */
static void test_pool_nonfinite(void) {
    tu_case = "pool non-finite";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 2);
    const float v[8] = { 1.0f, NAN, 3.0f, 2.0f,   INFINITY, -1.0f, -2.0f, -3.0f };
    memcpy(a->data, v, sizeof v);
    struct kiln_tensor * mx = kiln_pool_1d(ctx, a, KILN_OP_POOL_MAX, 2, 2, 0);
    struct kiln_tensor * av = kiln_pool_2d(ctx, a, KILN_OP_POOL_AVG, 2, 1, 2, 1, 0, 0);
    CHECK(tu_compute(ctx, mx, 2) == KILN_STATUS_SUCCESS && tu_compute(ctx, av, 2) == KILN_STATUS_SUCCESS, "compute");
    const float * m = (const float *) mx->data;
    const float * g = (const float *) av->data;
    CHECK(m[0] == 1.0f && m[1] == 3.0f && isinf(m[2]) && m[2] > 0 && m[3] == -2.0f,
          "max skips NaN, keeps +inf: %g %g %g %g", m[0], m[1], m[2], m[3]);
    CHECK(isnan(g[0]) && g[1] == 2.5f && isinf(g[2]) && g[3] == -2.5f, "avg propagates: %g %g %g %g", g[0], g[1], g[2], g[3]);
    kiln_free(ctx);
}

static void test_bad_inputs(void) {
    tu_case = "bad inputs";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 6, 6, 2, 1);
    struct kiln_tensor * ai = kiln_new_tensor_4d(ctx, KILN_TYPE_I32, 6, 6, 2, 1);
    CHECK_FAILS(kiln_pool_1d(ctx, NULL, KILN_OP_POOL_MAX, 2, 2, 0), "NULL");
    CHECK_FAILS(kiln_pool_1d(ctx, ai, KILN_OP_POOL_MAX, 2, 2, 0), "f32 or f16");
    CHECK_FAILS(kiln_pool_1d(ctx, a, KILN_OP_POOL_COUNT, 2, 2, 0), "pool op");
    CHECK_FAILS(kiln_pool_1d(ctx, a, KILN_OP_POOL_MAX, 0, 2, 0), "kernel");
    CHECK_FAILS(kiln_pool_1d(ctx, a, KILN_OP_POOL_MAX, 2, 0, 0), "stride");
    CHECK_FAILS(kiln_pool_1d(ctx, a, KILN_OP_POOL_MAX, 2, 2, -1), "padding");
    CHECK_FAILS(kiln_pool_1d(ctx, a, KILN_OP_POOL_MAX, 9, 1, 0), "too short");
    CHECK_FAILS(kiln_pool_2d(ctx, a, KILN_OP_POOL_AVG, 7, 2, 1, 1, 0, 0), "too small");
    CHECK_FAILS(kiln_pool_2d(ctx, a, KILN_OP_POOL_AVG, 2, 2, 1, 1, 0, NAN), "padding");
    CHECK_FAILS(kiln_pool_2d(ctx, a, (enum kiln_op_pool) 7, 2, 2, 1, 1, 0, 0), "pool op");
    CHECK_FAILS(kiln_pool_2d(ctx, ai, KILN_OP_POOL_AVG, 2, 2, 1, 1, 0, 0), "f32 or f16");
    struct kiln_tensor * dy = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, 2, 1);
    CHECK(kiln_pool_2d_back(ctx, dy, a, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0) != NULL, "pool_2d_back ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_pool_2d_back(ctx, dy, a, KILN_OP_POOL_MAX, 2, 2, 1, 1, 0, 0), "does not match");
    CHECK_FAILS(kiln_pool_2d_back(ctx, dy, NULL, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0), "NULL");
    CHECK_FAILS(kiln_pool_2d_back(ctx, ai, a, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0), "must be f32");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(42);
    test_pool_1d();
    test_pool_2d();
    test_pool_2d_back();
    test_pool_nonfinite();
    test_bad_inputs();
    return tu_finish();
}
