/*
 * test_ops_softmax.c — soft_max, soft_max_ext (mask f16/f32 with -inf entries
 * and broadcasting, scale, ALiBi) and soft_max_ext_back against double
 * references; long rows, fully masked rows, 1/2/4 threads, bad input.
 */
#include "nn_test_common.h"

/* ALiBi slope, written out in double from the definition */
static double ref_slope(double max_bias, int h, int n_head) {
    if (!(max_bias > 0)) return 1.0;
    int n2 = 1;
    while (n2 * 2 <= n_head) n2 *= 2;
    const double m0 = pow(2.0, -max_bias / n2);
    const double m1 = pow(2.0, -max_bias / 2.0 / n2);
    return h < n2 ? pow(m0, h + 1) : pow(m1, 2 * (h - n2) + 1);
}

/* y = softmax(x*scale + slope*mask) per row; mask (may be NULL) in logical
 * order with shape mne, indexed (i0, i1, i2 % mne2, i3 % mne3) */
static void ref_soft_max(const double * x, const int64_t * ne, const double * mask, const int64_t * mne,
                         double scale, double max_bias, double * y) {
    const int64_t n = ne[0];
    double * w = (double *) malloc(sizeof(double) * (size_t) n); /* heap: wasm stacks are small */
    for (int64_t i3 = 0; i3 < ne[3]; i3++) for (int64_t i2 = 0; i2 < ne[2]; i2++) for (int64_t i1 = 0; i1 < ne[1]; i1++) {
        const int64_t r = (i3 * ne[2] + i2) * ne[1] + i1;
        const double slope = ref_slope(max_bias, (int) i2, (int) ne[2]);
        double mx = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            w[i] = x[r * n + i] * scale;
            if (mask) {
                const int64_t mr = ((i3 % mne[3]) * mne[2] + (i2 % mne[2])) * mne[1] + i1;
                w[i] += slope * mask[mr * mne[0] + i];
            }
            if (w[i] > mx) mx = w[i];
        }
        double s = 0;
        for (int64_t i = 0; i < n; i++) s += exp(w[i] - mx);
        for (int64_t i = 0; i < n; i++) y[r * n + i] = exp(w[i] - mx) / s;
    }
    free(w);
}

static void test_soft_max_plain(void) {
    static const int64_t shapes[][4] = { { 1, 1, 1, 1 }, { 7, 3, 1, 1 }, { 33, 5, 4, 2 }, { 256, 2, 1, 1 }, { 65536 + 7, 2, 1, 1 } };
    char what[128];
    tu_case = "soft_max";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        struct kiln_context * ctx = tu_ctx(16 << 20);
        const int64_t * ne = shapes[s];
        struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        tu_fill_uniform(a, -8.0f, 8.0f);
        struct kiln_tensor * y = kiln_soft_max(ctx, a);
        snprintf(what, sizeof what, "soft_max [%lld,%lld,%lld,%lld]", (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3]);
        if (!CHECK(y != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
        CHECK(kiln_get_op_params_f32(y, 0) == 1.0f && kiln_get_op_params_f32(y, 1) == 0.0f, "%s: op_params scale=1 max_bias=0", what);
        const int64_t n = kiln_nelements(a);
        double * x = tu_to_f64(a);
        double * ref = (double *) malloc(sizeof(double) * n);
        ref_soft_max(x, ne, NULL, NULL, 1.0, 0.0, ref);
        nn_expect(nn_run(ctx, y, what), ref, n, 1e-10, what);
        struct kiln_tensor * yi = kiln_soft_max_inplace(ctx, a);
        CHECK(yi && yi->data == a->data, "%s: inplace is a view", what);
        if (yi) {
            CHECK(tu_compute(ctx, yi, 4) == KILN_STATUS_SUCCESS, "%s: inplace compute", what);
            nn_expect(tu_to_f64(a), ref, n, 1e-10, what);
        }
        free(x); free(ref);
        kiln_free(ctx);
    }
}

static void test_soft_max_ext(void) {
    /* a shape, mask shape (ne1 may be padded, ne2/ne3 broadcast) */
    static const struct { int64_t ne[4]; int64_t mne[4]; } cases[] = {
        { { 16, 5, 1, 1 }, { 16, 5, 1, 1 } },
        { { 19, 5, 6, 1 }, { 19, 8, 1, 1 } },   /* padded rows, 6 heads (ALiBi second series) */
        { { 19, 5, 6, 2 }, { 19, 5, 2, 1 } },   /* mask per head pair */
        { { 7, 3, 4, 2 }, { 7, 3, 4, 2 } },
        { { 33, 1, 8, 1 }, { 33, 32, 1, 1 } },
    };
    char what[160];
    tu_case = "soft_max_ext";
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int mt = 0; mt < 2; mt++) {
            for (int alibi = 0; alibi < 2; alibi++) {
                const int64_t * ne = cases[c].ne, * mne = cases[c].mne;
                const enum kiln_type mtype = mt ? KILN_TYPE_F16 : KILN_TYPE_F32;
                const float scale = 0.37f, max_bias = alibi ? 8.0f : 0.0f;
                struct kiln_context * ctx = tu_ctx(8 << 20);
                struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
                struct kiln_tensor * m = kiln_new_tensor_4d(ctx, mtype, mne[0], mne[1], mne[2], mne[3]);
                tu_fill_uniform(a, -6.0f, 6.0f);
                tu_fill_uniform(m, -2.0f, 1.0f);
                /* -inf in about a quarter of the mask, never a whole row (first column stays finite) */
                const int64_t mn = kiln_nelements(m);
                for (int64_t i = 0; i < mn; i++) {
                    if (i % mne[0] != 0 && tu_rand_u64() % 4 == 0) {
                        int64_t i0, i1, i2, i3;
                        kiln_unravel_index(m, i, &i0, &i1, &i2, &i3);
                        kiln_set_f32_nd(m, (int) i0, (int) i1, (int) i2, (int) i3, -INFINITY);
                    }
                }
                struct kiln_tensor * y = kiln_soft_max_ext(ctx, a, m, scale, max_bias);
                snprintf(what, sizeof what, "soft_max_ext [%lld,%lld,%lld,%lld] mask [%lld,%lld,%lld,%lld] %s%s",
                         (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3],
                         (long long) mne[0], (long long) mne[1], (long long) mne[2], (long long) mne[3],
                         mt ? "f16" : "f32", alibi ? " alibi" : "");
                if (!CHECK(y != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
                CHECK(kiln_get_op_params_f32(y, 0) == scale && kiln_get_op_params_f32(y, 1) == max_bias && y->src[1] == m,
                      "%s: op_params/src", what);
                const int64_t n = kiln_nelements(a);
                double * x = tu_to_f64(a), * mv = tu_to_f64(m);
                double * ref = (double *) malloc(sizeof(double) * n);
                ref_soft_max(x, ne, mv, mne, scale, max_bias, ref);
                double * out = nn_run(ctx, y, what);
                if (out) {
                    int zeros_ok = 1;
                    for (int64_t i = 0; i < n; i++) if (ref[i] == 0.0 && out[i] != 0.0) zeros_ok = 0;
                    CHECK(zeros_ok, "%s: -inf mask entries give exact zeros", what);
                }
                nn_expect(out, ref, n, 1e-10, what);
                free(x); free(mv); free(ref);
                kiln_free(ctx);
            }
        }
    }
}

static void test_fully_masked(void) {
    tu_case = "fully masked";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 6, 3);
    struct kiln_tensor * m = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 6, 3);
    tu_fill_uniform(a, -1.0f, 1.0f);
    kiln_set_zero(m);
    for (int i = 0; i < 6; i++) kiln_set_f32_nd(m, i, 1, 0, 0, -INFINITY);
    struct kiln_tensor * y = kiln_soft_max_ext(ctx, a, m, 1.0f, 0.0f);
    CHECK(tu_compute(ctx, y, 2) == KILN_STATUS_SUCCESS, "compute");
    int nan1 = 0, fin = 0;
    double s0 = 0;
    for (int i = 0; i < 6; i++) {
        nan1 += isnan(kiln_get_f32_nd(y, i, 1, 0, 0));
        fin += isfinite(kiln_get_f32_nd(y, i, 0, 0, 0)) + isfinite(kiln_get_f32_nd(y, i, 2, 0, 0));
        s0 += kiln_get_f32_nd(y, i, 0, 0, 0);
    }
    /* as ggml: no finite logit means no maximum, exp(-inf - -inf) = NaN */
    CHECK(nan1 == 6, "fully masked row is NaN (%d)", nan1);
    CHECK(fin == 12 && fabs(s0 - 1.0) < 1e-6, "other rows unaffected (%d finite, sum %g)", fin, s0);
    /* NaN in the input spreads over its row only */
    kiln_set_f32_nd(a, 3, 2, 0, 0, NAN);
    struct kiln_tensor * y2 = kiln_soft_max(ctx, a);
    CHECK(tu_compute(ctx, y2, 2) == KILN_STATUS_SUCCESS, "compute");
    CHECK(isnan(kiln_get_f32_nd(y2, 0, 2, 0, 0)) && isfinite(kiln_get_f32_nd(y2, 0, 0, 0, 0)), "NaN stays in its row");
    kiln_free(ctx);
}

static void test_soft_max_back(void) {
    static const int64_t shapes[][4] = { { 1, 1, 1, 1 }, { 9, 4, 1, 1 }, { 32, 3, 5, 2 }, { 1025, 2, 1, 1 } };
    char what[128];
    tu_case = "soft_max_ext_back";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t * ne = shapes[s];
        struct kiln_context * ctx = tu_ctx(8 << 20);
        struct kiln_tensor * dy = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        struct kiln_tensor * x = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        tu_fill_uniform(dy, -1.0f, 1.0f);
        tu_fill_uniform(x, -3.0f, 3.0f);
        const int64_t n = kiln_nelements(x);
        double * xv = tu_to_f64(x);
        double * yv = (double *) malloc(sizeof(double) * n);
        ref_soft_max(xv, ne, NULL, NULL, 1.0, 0.0, yv);
        struct kiln_tensor * y = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        tu_from_f64(y, yv);
        double * yf = tu_to_f64(y), * dyv = tu_to_f64(dy);
        const float scale = 0.5f;
        double * ref = (double *) malloc(sizeof(double) * n);
        for (int64_t r = 0; r < n / ne[0]; r++) {
            double dot = 0;
            for (int64_t i = 0; i < ne[0]; i++) dot += yf[r * ne[0] + i] * dyv[r * ne[0] + i];
            for (int64_t i = 0; i < ne[0]; i++) ref[r * ne[0] + i] = scale * yf[r * ne[0] + i] * (dyv[r * ne[0] + i] - dot);
        }
        snprintf(what, sizeof what, "soft_max_ext_back [%lld,%lld,%lld,%lld]", (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3]);
        struct kiln_tensor * dx = kiln_soft_max_ext_back(ctx, dy, y, scale, 0.0f);
        if (CHECK(dx != NULL, "%s: %s", what, kiln_last_error())) {
            /* ne0 = 1: dx is exactly 0 up to rounding, compare absolutely */
            double * out = nn_run(ctx, dx, what);
            if (ne[0] == 1 && out) { CHECK(tu_max_abs_diff(out, ref, n) < 1e-6, "%s: abs diff", what); free(out); }
            else nn_expect(out, ref, n, 1e-9, what);
        }
        struct kiln_tensor * dxi = kiln_soft_max_ext_back_inplace(ctx, dy, y, scale, 0.0f);
        CHECK(dxi && dxi->data == dy->data, "%s: inplace is a view of dy", what);
        if (dxi && ne[0] > 1) {
            CHECK(tu_compute(ctx, dxi, 2) == KILN_STATUS_SUCCESS, "%s: inplace compute", what);
            nn_expect(tu_to_f64(dy), ref, n, 1e-9, what);
        }
        free(xv); free(yv); free(yf); free(dyv); free(ref);
        kiln_free(ctx);
    }
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 4, 6);
    struct kiln_tensor * ai = kiln_new_tensor_3d(ctx, KILN_TYPE_I32, 8, 4, 6);
    struct kiln_tensor * m_short = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * m_wide = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 9, 4);
    struct kiln_tensor * m_heads = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 4, 4);
    struct kiln_tensor * m_i32 = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 8, 4);
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 4, 5);
    CHECK_FAILS(kiln_soft_max(ctx, NULL), "NULL", "soft_max NULL");
    CHECK_FAILS(kiln_soft_max(ctx, ai), "must be f32", "soft_max i32");
    CHECK_FAILS(kiln_soft_max_inplace(ctx, kiln_transpose(ctx, a)), "contiguous rows", "soft_max transposed");
    CHECK_FAILS(kiln_soft_max_ext(ctx, a, m_short, 1.0f, 0.0f), "does not fit", "mask too few rows");
    CHECK_FAILS(kiln_soft_max_ext(ctx, a, m_wide, 1.0f, 0.0f), "does not fit", "mask wrong width");
    CHECK_FAILS(kiln_soft_max_ext(ctx, a, m_heads, 1.0f, 0.0f), "does not fit", "mask heads do not divide");
    CHECK_FAILS(kiln_soft_max_ext(ctx, a, m_i32, 1.0f, 0.0f), "f16 or f32", "mask i32");
    CHECK_FAILS(kiln_soft_max_ext(ctx, a, NULL, 1.0f, 8.0f), "needs a mask", "alibi without mask");
    CHECK_FAILS(kiln_soft_max_ext_back(ctx, a, b, 1.0f, 0.0f), "shapes differ", "back shapes");
    CHECK_FAILS(kiln_soft_max_ext_back(ctx, a, a, 1.0f, 2.0f), "max_bias", "back with max_bias");
    CHECK_FAILS(kiln_soft_max_ext_back_inplace(ctx, NULL, a, 1.0f, 0.0f), "NULL", "back NULL");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(99);
    test_soft_max_plain();
    test_soft_max_ext();
    test_fully_masked();
    test_soft_max_back();
    test_bad_input();
    return tu_finish();
}
