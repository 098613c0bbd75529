/*
 * test_ops_norm.c — norm, rms_norm, rms_norm_back, group_norm against plain
 * double-precision references, over odd shapes, non-contiguous inputs,
 * long rows, 1/2/4 threads, NaN/Inf propagation and bad input.
 */
#include "nn_test_common.h"

/* logical index of (i0, i1, i2, i3) in a [ne0, ne1, ne2, ne3] array */
#define IDX(ne, i0, i1, i2, i3) ((((i3) * (ne)[2] + (i2)) * (ne)[1] + (i1)) * (ne)[0] + (i0))

static void ref_norm(const double * x, double * y, const int64_t * ne, double eps, bool rms) {
    const int64_t nr = ne[1] * ne[2] * ne[3], n = ne[0];
    for (int64_t r = 0; r < nr; r++) {
        const double * xr = x + r * n;
        double * yr = y + r * n;
        double mean = 0;
        if (!rms) { for (int64_t i = 0; i < n; i++) mean += xr[i]; mean /= n; }
        double var = 0;
        for (int64_t i = 0; i < n; i++) var += (xr[i] - mean) * (xr[i] - mean);
        var /= n;
        for (int64_t i = 0; i < n; i++) yr[i] = (xr[i] - mean) / sqrt(var + eps);
    }
}

/* dx of y = x / sqrt(mean(x^2) + eps) */
static void ref_rms_norm_back(const double * x, const double * dy, double * dx, const int64_t * ne, double eps) {
    const int64_t nr = ne[1] * ne[2] * ne[3], n = ne[0];
    for (int64_t r = 0; r < nr; r++) {
        const double * xr = x + r * n, * dyr = dy + r * n;
        double ss = 0, sxd = 0;
        for (int64_t i = 0; i < n; i++) { ss += xr[i] * xr[i]; sxd += xr[i] * dyr[i]; }
        const double rr = 1.0 / sqrt(ss / n + eps);
        for (int64_t i = 0; i < n; i++) dx[r * n + i] = dyr[i] * rr - xr[i] * rr * rr * rr * sxd / n;
    }
}

static void ref_group_norm(const double * x, double * y, const int64_t * ne, int n_groups, double eps) {
    const int64_t per = (ne[2] + n_groups - 1) / n_groups;
    for (int64_t i3 = 0; i3 < ne[3]; i3++) {
        for (int g = 0; g < n_groups; g++) {
            const int64_t c0 = g * per, c1 = c0 + per < ne[2] ? c0 + per : ne[2];
            if (c0 >= c1) continue;
            double mean = 0, var = 0;
            const double cnt = (double)(ne[0] * ne[1] * (c1 - c0));
            for (int64_t c = c0; c < c1; c++) for (int64_t i1 = 0; i1 < ne[1]; i1++) for (int64_t i0 = 0; i0 < ne[0]; i0++)
                mean += x[IDX(ne, i0, i1, c, i3)];
            mean /= cnt;
            for (int64_t c = c0; c < c1; c++) for (int64_t i1 = 0; i1 < ne[1]; i1++) for (int64_t i0 = 0; i0 < ne[0]; i0++) {
                const double d = x[IDX(ne, i0, i1, c, i3)] - mean;
                var += d * d;
            }
            var /= cnt;
            for (int64_t c = c0; c < c1; c++) for (int64_t i1 = 0; i1 < ne[1]; i1++) for (int64_t i0 = 0; i0 < ne[0]; i0++)
                y[IDX(ne, i0, i1, c, i3)] = (x[IDX(ne, i0, i1, c, i3)] - mean) / sqrt(var + eps);
        }
    }
}

/* a tensor of logical shape ne, optionally as a non-contiguous view:
 * mode 0 contiguous, 1 permuted dims 1<->2 (rows stay contiguous),
 * 2 rows with a padded stride */
static struct kiln_tensor * make_input(struct kiln_context * ctx, const int64_t * ne, int mode) {
    if (mode == 1) {
        struct kiln_tensor * base = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[2], ne[1], ne[3]);
        return kiln_permute(ctx, base, 0, 2, 1, 3);
    }
    if (mode == 2) {
        struct kiln_tensor * base = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0] + 3, ne[1], ne[2], ne[3]);
        return kiln_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3], 0);
    }
    return kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
}

static void test_norms(void) {
    static const int64_t shapes[][4] = {
        { 1, 1, 1, 1 }, { 7, 3, 1, 1 }, { 64, 5, 3, 2 }, { 33, 2, 3, 1 }, { 1000, 4, 1, 1 }, { 2, 9, 1, 1 },
    };
    const float epss[2] = { 1e-5f, 1e-2f };
    char what[160];
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int mode = 0; mode < 3; mode++) {
            for (int rms = 0; rms < 2; rms++) {
                const float eps = epss[(s + mode) % 2];
                tu_case = rms ? "rms_norm" : "norm";
                struct kiln_context * ctx = tu_ctx(16 << 20);
                struct kiln_tensor * a = make_input(ctx, shapes[s], mode);
                tu_fill_uniform(a, -3.0f, 5.0f);
                struct kiln_tensor * y = rms ? kiln_rms_norm(ctx, a, eps) : kiln_norm(ctx, a, eps);
                snprintf(what, sizeof what, "%s [%lld,%lld,%lld,%lld] layout %d", tu_case,
                         (long long) shapes[s][0], (long long) shapes[s][1], (long long) shapes[s][2], (long long) shapes[s][3], mode);
                if (!CHECK(y != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
                CHECK(kiln_are_same_shape(y, a) && kiln_is_contiguous(y) && y->type == KILN_TYPE_F32, "%s: result shape", what);
                CHECK(kiln_get_op_params_f32(y, 0) == eps, "%s: op_params[0] = eps", what);
                double * x = tu_to_f64(a);
                const int64_t n = kiln_nelements(a);
                double * ref = (double *) malloc(sizeof(double) * n);
                ref_norm(x, ref, shapes[s], eps, rms);
                nn_expect(nn_run(ctx, y, what), ref, n, 1e-10, what);

                /* the in-place twin writes into a */
                struct kiln_tensor * yi = rms ? kiln_rms_norm_inplace(ctx, a, eps) : kiln_norm_inplace(ctx, a, eps);
                CHECK(yi && yi->data == a->data && yi->view_src != NULL, "%s: inplace result is a view of a", what);
                if (yi) {
                    CHECK(tu_compute(ctx, yi, 2) == KILN_STATUS_SUCCESS, "%s: inplace compute", what);
                    nn_expect(tu_to_f64(a), ref, n, 1e-10, what);
                }
                free(x);
                free(ref);
                kiln_free(ctx);
            }
        }
    }
}

static void test_long_rows(void) {
    tu_case = "long rows";
    const int64_t ne[4] = { 65536 + 17, 3, 1, 1 };
    struct kiln_context * ctx = tu_ctx(32 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne[0], ne[1]);
    tu_fill_uniform(a, -1.0f, 3.0f); /* mean far from 0: a float accumulator would drift */
    double * x = tu_to_f64(a);
    const int64_t n = kiln_nelements(a);
    double * ref = (double *) malloc(sizeof(double) * n);
    for (int rms = 0; rms < 2; rms++) {
        struct kiln_tensor * y = rms ? kiln_rms_norm(ctx, a, 1e-6f) : kiln_norm(ctx, a, 1e-6f);
        ref_norm(x, ref, ne, 1e-6, rms);
        nn_expect(nn_run(ctx, y, rms ? "rms_norm 65553" : "norm 65553"), ref, n, 1e-10, rms ? "rms_norm 65553" : "norm 65553");
    }
    free(x);
    free(ref);
    kiln_free(ctx);
}

static void test_nonfinite(void) {
    tu_case = "nan/inf";
    struct kiln_context * ctx = tu_ctx(4 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    tu_fill_uniform(a, -1.0f, 1.0f);
    kiln_set_f32_nd(a, 2, 0, 0, 0, NAN);
    kiln_set_f32_nd(a, 5, 1, 0, 0, INFINITY);
    for (int rms = 0; rms < 2; rms++) {
        struct kiln_tensor * y = rms ? kiln_rms_norm(ctx, a, 1e-5f) : kiln_norm(ctx, a, 1e-5f);
        CHECK(tu_compute(ctx, y, 2) == KILN_STATUS_SUCCESS, "compute");
        int nan0 = 0, nan1 = 0, fin2 = 0;
        for (int i = 0; i < 8; i++) {
            nan0 += isnan(kiln_get_f32_nd(y, i, 0, 0, 0));
            nan1 += isnan(kiln_get_f32_nd(y, i, 1, 0, 0));
            fin2 += isfinite(kiln_get_f32_nd(y, i, 2, 0, 0));
        }
        /* a NaN spreads over its row; an Inf makes inf/inf = NaN for rms and inf-inf for norm */
        CHECK(nan0 == 8, "%s: NaN row -> all NaN (%d)", rms ? "rms_norm" : "norm", nan0);
        CHECK(nan1 >= 1, "%s: Inf row has NaN (%d)", rms ? "rms_norm" : "norm", nan1);
        CHECK(fin2 == 8, "%s: clean row stays finite (%d)", rms ? "rms_norm" : "norm", fin2);
    }
    kiln_free(ctx);
}

/* norm's float order, bit for bit, as llama.cpp's CPU builds sum
 * ggml_vec_cvar_f32 (src/cpu/ops_norm.c): squares of x - mean in groups of
 * 8 reduced ((s0+s4)+(s2+s6))+((s1+s5)+(s3+s7)) on x86, of 4 reduced
 * (s0+s1)+(s2+s3) on arm64 (NEON), each group's float added in double, the
 * tail one by one. `group` 8 or 4. */
static void ref_norm_order(const float * x, float * y, int64_t n, float eps, int group) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double) x[i];
    const float mean = (float) sum / (float) n;
    double sum2 = 0.0;
    int64_t i = 0;
    for (; i + group <= n; i += group) {
        float q[8];
        for (int j = 0; j < group; j++) { y[i + j] = x[i + j] - mean; q[j] = y[i + j] * y[i + j]; }
        float g;
        if (group == 8) {
            const float h0 = q[0] + q[4], h1 = q[1] + q[5], h2 = q[2] + q[6], h3 = q[3] + q[7];
            g = (h0 + h2) + (h1 + h3);
        } else {
            g = (q[0] + q[1]) + (q[2] + q[3]);
        }
        sum2 += (double) g;
    }
    for (; i < n; i++) { y[i] = x[i] - mean; sum2 += (double) (y[i] * y[i]); }
    const float scale = 1.0f / sqrtf((float) (sum2 / n) + eps);
    for (int64_t k = 0; k < n; k++) y[k] *= scale;
}

static void test_norm_order(void) {
    static const char * isas[] = { "scalar", "avx2", "avx512", "avxvnni", "neon", "wasm_simd128", "wasm_relaxed" };
    static const int64_t widths[] = { 4, 8, 12, 37, 256, 2051 };
    const int rows = 64;
    tu_case = "norm order";
    int tested = 0, orders_differ = 0;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        const int64_t n = widths[w];
        float * x = (float *) malloc(sizeof(float) * (size_t) (n * rows));
        float * want = (float *) malloc(sizeof(float) * (size_t) (n * rows));
        float * other = (float *) malloc(sizeof(float) * (size_t) (n * rows));
        /* a large offset and spread: the squares' sums round differently in
         * the two orders on most rows */
        for (int64_t i = 0; i < n * rows; i++) x[i] = 1000.0f + tu_rand_uniform(-350.0f, 350.0f) * (float) (1 + i % 5);
        for (size_t k = 0; k < sizeof isas / sizeof isas[0]; k++) {
            kiln_cpu_force_isa(isas[k]);
            if (strcmp(kiln_cpu_isa(), isas[k]) != 0) continue;
            const bool arm = strcmp(isas[k], "neon") == 0;
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, n, rows);
            memcpy(a->data, x, sizeof(float) * (size_t) (n * rows));
            struct kiln_tensor * y = kiln_norm(ctx, a, 1e-5f);
            if (CHECK(y && tu_compute(ctx, y, 2) == KILN_STATUS_SUCCESS, "norm order %s n %lld: compute: %s", isas[k], (long long) n, kiln_last_error())) {
                int bad = 0;
                for (int r = 0; r < rows; r++) {
                    ref_norm_order(x + r * n, want + r * n, n, 1e-5f, arm ? 4 : 8);
                    ref_norm_order(x + r * n, other + r * n, n, 1e-5f, arm ? 8 : 4);
                    if (memcmp(want + r * n, other + r * n, sizeof(float) * (size_t) n) != 0) orders_differ++;
                }
                for (int64_t i = 0; i < n * rows; i++) bad += memcmp(&want[i], &((const float *) y->data)[i], sizeof(float)) != 0;
                CHECK(bad == 0, "norm order %s n %lld: %d of %lld values differ from the %s order", isas[k], (long long) n, bad,
                      (long long) (n * rows), arm ? "arm64" : "x86");
                tested++;
            }
            kiln_free(ctx);
        }
        kiln_cpu_force_isa(NULL);
        free(x); free(want); free(other);
    }
    CHECK(tested >= 6, "norm order: %d (ISA, width) cases ran", tested);
    /* the references tell the two orders apart (else the check above
     * could not fail on a table that takes the wrong one) */
    CHECK(orders_differ > 0, "norm order: the x86 and arm64 orders differ on %d rows", orders_differ);
}

static void test_rms_norm_back(void) {
    /* ne0 = 1 is left out: there dx = dy*r*eps/(x^2+eps) cancels to a few float ulps of noise */
    static const int64_t shapes[][4] = { { 2, 1, 1, 1 }, { 7, 3, 1, 1 }, { 64, 5, 3, 2 }, { 129, 2, 1, 1 } };
    char what[128];
    tu_case = "rms_norm_back";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        for (int mode = 0; mode < 2; mode++) {
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * x = make_input(ctx, shapes[s], mode);
            struct kiln_tensor * dy = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            tu_fill_uniform(x, -2.0f, 2.0f);
            tu_fill_uniform(dy, -1.0f, 1.0f);
            struct kiln_tensor * dx = kiln_rms_norm_back(ctx, x, dy, 1e-4f);
            snprintf(what, sizeof what, "rms_norm_back [%lld,%lld,%lld,%lld] layout %d",
                     (long long) shapes[s][0], (long long) shapes[s][1], (long long) shapes[s][2], (long long) shapes[s][3], mode);
            if (!CHECK(dx != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
            double * xv = tu_to_f64(x), * dyv = tu_to_f64(dy);
            const int64_t n = kiln_nelements(x);
            double * ref = (double *) malloc(sizeof(double) * n);
            ref_rms_norm_back(xv, dyv, ref, shapes[s], 1e-4);
            nn_expect(nn_run(ctx, dx, what), ref, n, 1e-9, what);
            free(xv); free(dyv); free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_group_norm(void) {
    static const struct { int64_t ne[4]; int groups; } cases[] = {
        { { 5, 4, 6, 2 }, 3 },
        { { 7, 3, 5, 1 }, 2 },   /* uneven: groups of 3 and 2 channels */
        { { 4, 4, 3, 2 }, 4 },   /* more groups than channels: the last is empty */
        { { 9, 1, 8, 1 }, 1 },
        { { 3, 5, 7, 3 }, 7 },
    };
    char what[128];
    tu_case = "group_norm";
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int mode = 0; mode < 3; mode += 2) {
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * a = make_input(ctx, cases[c].ne, mode);
            tu_fill_uniform(a, -2.0f, 4.0f);
            struct kiln_tensor * y = kiln_group_norm(ctx, a, cases[c].groups, 1e-6f);
            snprintf(what, sizeof what, "group_norm [%lld,%lld,%lld,%lld] groups %d layout %d",
                     (long long) cases[c].ne[0], (long long) cases[c].ne[1], (long long) cases[c].ne[2], (long long) cases[c].ne[3],
                     cases[c].groups, mode);
            if (!CHECK(y != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
            CHECK(kiln_get_op_params_i32(y, 0) == cases[c].groups && kiln_get_op_params_f32(y, 1) == 1e-6f, "%s: op_params", what);
            double * x = tu_to_f64(a);
            const int64_t n = kiln_nelements(a);
            double * ref = (double *) malloc(sizeof(double) * n);
            ref_group_norm(x, ref, cases[c].ne, cases[c].groups, 1e-6);
            nn_expect(nn_run(ctx, y, what), ref, n, 1e-10, what);
            struct kiln_tensor * yi = kiln_group_norm_inplace(ctx, a, cases[c].groups, 1e-6f);
            CHECK(yi && yi->data == a->data, "%s: inplace is a view", what);
            if (yi) {
                CHECK(tu_compute(ctx, yi, 4) == KILN_STATUS_SUCCESS, "%s: inplace compute", what);
                nn_expect(tu_to_f64(a), ref, n, 1e-10, what);
            }
            free(x); free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 4);
    struct kiln_tensor * ai = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 8, 3);
    struct kiln_tensor * t = kiln_transpose(ctx, a);
    CHECK_FAILS(kiln_norm(ctx, NULL, 1e-5f), "NULL", "norm NULL");
    CHECK_FAILS(kiln_rms_norm(ctx, NULL, 1e-5f), "NULL", "rms_norm NULL");
    CHECK_FAILS(kiln_norm(ctx, ai, 1e-5f), "must be f32", "norm i32");
    CHECK_FAILS(kiln_rms_norm_inplace(ctx, ai, 1e-5f), "must be f32", "rms_norm_inplace i32");
    CHECK_FAILS(kiln_rms_norm(ctx, t, 1e-5f), "contiguous rows", "rms_norm transposed");
    CHECK_FAILS(kiln_norm(ctx, a, -1.0f), "eps", "norm negative eps");
    CHECK_FAILS(kiln_rms_norm(ctx, a, NAN), "eps", "rms_norm NaN eps");
    CHECK_FAILS(kiln_rms_norm_back(ctx, a, b, 1e-5f), "shapes differ", "rms_norm_back shapes");
    CHECK_FAILS(kiln_rms_norm_back(ctx, a, NULL, 1e-5f), "NULL", "rms_norm_back NULL");
    CHECK_FAILS(kiln_rms_norm_back(ctx, ai, a, 1e-5f), "must be f32", "rms_norm_back i32");
    CHECK_FAILS(kiln_group_norm(ctx, a, 0, 1e-5f), "n_groups", "group_norm 0 groups");
    CHECK_FAILS(kiln_group_norm_inplace(ctx, ai, 2, 1e-5f), "must be f32", "group_norm i32");
    CHECK_FAILS(kiln_group_norm(ctx, NULL, 2, 1e-5f), "NULL", "group_norm NULL");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(1234);
    test_norms();
    test_long_rows();
    test_nonfinite();
    test_norm_order();
    test_rms_norm_back();
    test_group_norm();
    test_bad_input();
    return tu_finish();
}
