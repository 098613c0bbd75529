/*
 * test_ops_loss.c — cross_entropy_loss (+ back), opt_step_adamw and
 * timestep_embedding against double references (AdamW also against a few
 * numbers worked out by hand), 1/2/4 threads, bad input.
 */
#include "nn_test_common.h"

static void fill_probs(struct kiln_tensor * b) {
    tu_fill_uniform(b, 0.0f, 1.0f);
    const int64_t nc = b->ne[0], nr = kiln_nrows(b);
    float * d = (float *) b->data;
    for (int64_t r = 0; r < nr; r++) {
        double s = 0;
        for (int64_t i = 0; i < nc; i++) s += d[r * nc + i];
        for (int64_t i = 0; i < nc; i++) d[r * nc + i] = (float)(d[r * nc + i] / s);
    }
}

static void ref_softmax_row(const double * x, int64_t n, double * p) {
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) if (x[i] > mx) mx = x[i];
    for (int64_t i = 0; i < n; i++) s += exp(x[i] - mx);
    for (int64_t i = 0; i < n; i++) p[i] = exp(x[i] - mx) / s;
}

static void test_cross_entropy(void) {
    static const int64_t shapes[][4] = { { 10, 4, 1, 1 }, { 7, 1, 1, 1 }, { 1001, 3, 2, 1 }, { 1, 5, 1, 1 }, { 32, 37, 1, 1 } };
    char what[128];
    tu_case = "cross_entropy_loss";
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t * ne = shapes[s];
        struct kiln_context * ctx = tu_ctx(8 << 20);
        struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        struct kiln_tensor * b = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, ne[0], ne[1], ne[2], ne[3]);
        tu_fill_uniform(a, -4.0f, 4.0f);
        fill_probs(b);
        const int64_t nc = ne[0], nr = kiln_nrows(a), n = kiln_nelements(a);
        double * av = tu_to_f64(a), * bv = tu_to_f64(b);
        double * p = (double *) malloc(sizeof(double) * n);
        double loss = 0;
        for (int64_t r = 0; r < nr; r++) {
            ref_softmax_row(av + r * nc, nc, p + r * nc);
            for (int64_t i = 0; i < nc; i++) loss -= bv[r * nc + i] * log(p[r * nc + i]);
        }
        loss /= nr;

        snprintf(what, sizeof what, "cross_entropy_loss [%lld,%lld,%lld]", (long long) ne[0], (long long) ne[1], (long long) ne[2]);
        struct kiln_tensor * l = kiln_cross_entropy_loss(ctx, a, b);
        if (CHECK(l != NULL, "%s: %s", what, kiln_last_error())) {
            CHECK(l->ne[0] == 1 && kiln_nelements(l) == 1 && l->type == KILN_TYPE_F32, "%s: scalar result", what);
            double * out = nn_run(ctx, l, what);
            if (out) {
                const double rel = fabs(out[0] - loss) / fmax(fabs(loss), 1e-30);
                CHECK(rel < 1e-5 || (nc == 1 && fabs(out[0] - loss) < 1e-6), "%s: loss %.9g vs %.9g (rel %.3g)", what, out[0], loss, rel);
                free(out);
            }
        }

        /* backward: (softmax(a) - b) * g / nr */
        struct kiln_tensor * g = kiln_new_f32(ctx, 0.75f);
        struct kiln_tensor * da = kiln_cross_entropy_loss_back(ctx, g, a, b);
        snprintf(what, sizeof what, "cross_entropy_loss_back [%lld,%lld,%lld]", (long long) ne[0], (long long) ne[1], (long long) ne[2]);
        if (CHECK(da != NULL, "%s: %s", what, kiln_last_error())) {
            CHECK(kiln_are_same_shape(da, a), "%s: shape", what);
            double * ref = (double *) malloc(sizeof(double) * n);
            for (int64_t i = 0; i < n; i++) ref[i] = (p[i] - bv[i]) * 0.75 / nr;
            double * out = nn_run(ctx, da, what);
            if (nc == 1 && out) { CHECK(tu_max_abs_diff(out, ref, n) < 1e-7, "%s: abs", what); free(out); }
            else nn_expect(out, ref, n, 1e-10, what);
            free(ref);
        }
        free(av); free(bv); free(p);
        kiln_free(ctx);
    }
}

/* one AdamW step on a few numbers, everything spelled out */
static void test_adamw_hand(void) {
    tu_case = "adamw by hand";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    const float w0[3] = { 1.0f, -2.0f, 0.5f }, g0[3] = { 0.1f, -0.2f, 0.3f }, m0[3] = { 0.0f, 0.05f, -0.1f }, v0[3] = { 0.0f, 0.01f, 0.02f };
    /* the kernel sees the f32-rounded constants: 1 - 0.999f = 0.00099998713 */
    const double alpha = 0.001f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f;
    const int iter = 3;
    const double b1h = (float)(1.0 / (1.0 - pow(0.9, iter))), b2h = (float)(1.0 / (1.0 - pow(0.999, iter)));
    struct kiln_tensor * w = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * g = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * m = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * v = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * pr = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 7);
    memcpy(w->data, w0, sizeof w0); memcpy(g->data, g0, sizeof g0); memcpy(m->data, m0, sizeof m0); memcpy(v->data, v0, sizeof v0);
    const float pv[7] = { (float) alpha, (float) b1, (float) b2, (float) eps, (float) wd, (float) b1h, (float) b2h };
    memcpy(pr->data, pv, sizeof pv);
    kiln_set_param(ctx, w);
    struct kiln_tensor * r = kiln_opt_step_adamw(ctx, w, g, m, v, pr);
    if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { kiln_free(ctx); return; }
    CHECK(r->data == w->data && r->op == KILN_OP_OPT_STEP_ADAMW && r->src[4] == pr, "result is a view of the parameter");
    CHECK(tu_compute(ctx, r, 2) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error());
    /* element 0 by hand: m = 0.01, v = 1e-5, mh = 0.01/(1-0.729) = 0.036900369,
     * vh = sqrt(1e-5/(1-0.997002999)) + 1e-8 = 0.0577639...,
     * w = 1*(1-1e-5) - 1e-3*mh/vh = 0.99999 - 0.000638813 = 0.999351187 */
    CHECK(fabs(((float *) m->data)[0] - 0.01) < 1e-8, "m[0] = 0.01 (%g)", ((float *) m->data)[0]);
    CHECK(fabs(((float *) v->data)[0] - 1e-5) < 2e-10, "v[0] = 1e-5 (%g)", ((float *) v->data)[0]);
    CHECK(fabs(((float *) w->data)[0] - 0.999351187) < 2e-7, "w[0] = 0.999351187 (%.9f)", ((float *) w->data)[0]);
    for (int i = 0; i < 3; i++) {
        const double mm = b1 * m0[i] + (1 - b1) * g0[i];
        const double vv = b2 * v0[i] + (1 - b2) * g0[i] * (double) g0[i];
        const double ww = w0[i] * (1 - alpha * wd) - alpha * (mm * b1h) / (sqrt(vv * b2h) + eps);
        CHECK(fabs(((float *) m->data)[i] - mm) < 1e-7 * fmax(1, fabs(mm)), "m[%d] %g vs %g", i, ((float *) m->data)[i], mm);
        CHECK(fabs(((float *) v->data)[i] - vv) < 1e-6 * fmax(1e-6, fabs(vv)), "v[%d] %g vs %g", i, ((float *) v->data)[i], vv);
        CHECK(fabs(((float *) w->data)[i] - ww) < 2e-7 * fmax(1, fabs(ww)), "w[%d] %.9g vs %.9g", i, ((float *) w->data)[i], ww);
    }
    kiln_free(ctx);
}

/* a larger step: random state, compared to double and across thread counts */
static void test_adamw_random(void) {
    tu_case = "adamw";
    const int64_t ne0 = 37, ne1 = 5, ne2 = 3, n = ne0 * ne1 * ne2;
    struct kiln_context * ctx = tu_ctx(4 << 20);
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ne0, ne1, ne2);
    struct kiln_tensor * g = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ne0, ne1, ne2);
    struct kiln_tensor * m = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ne0, ne1, ne2);
    struct kiln_tensor * v = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ne0, ne1, ne2);
    struct kiln_tensor * pr = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 7);
    tu_fill_uniform(w, -1, 1); tu_fill_uniform(g, -1, 1); tu_fill_uniform(m, -0.1f, 0.1f); tu_fill_uniform(v, 0, 0.05f);
    const double b1h = 1.0 / (1.0 - pow(0.9, 10)), b2h = 1.0 / (1.0 - pow(0.999, 10));
    const float pv[7] = { 0.01f, 0.9f, 0.999f, 1e-8f, 0.1f, (float) b1h, (float) b2h };
    memcpy(pr->data, pv, sizeof pv);
    kiln_set_param(ctx, w);
    double * w0 = tu_to_f64(w), * g0 = tu_to_f64(g), * m0 = tu_to_f64(m), * v0 = tu_to_f64(v);
    double * rw = (double *) malloc(sizeof(double) * n), * rm = (double *) malloc(sizeof(double) * n), * rv = (double *) malloc(sizeof(double) * n);
    for (int64_t i = 0; i < n; i++) {
        rm[i] = pv[1] * m0[i] + (1 - (double) pv[1]) * g0[i];
        rv[i] = pv[2] * v0[i] + (1 - (double) pv[2]) * g0[i] * g0[i];
        rw[i] = w0[i] * (1 - (double) pv[0] * pv[4]) - pv[0] * (rm[i] * pv[5]) / (sqrt(rv[i] * pv[6]) + pv[3]);
    }
    struct kiln_tensor * r = kiln_opt_step_adamw(ctx, w, g, m, v, pr);
    const size_t nbytes = kiln_nbytes(w);
    unsigned char * first = (unsigned char *) malloc(nbytes);
    const int threads[3] = { 1, 2, 4 };
    for (int t = 0; t < 3; t++) {
        tu_from_f64(w, w0); tu_from_f64(m, m0); tu_from_f64(v, v0);
        CHECK(tu_compute(ctx, r, threads[t]) == KILN_STATUS_SUCCESS, "compute %d threads", threads[t]);
        if (t == 0) {
            memcpy(first, w->data, nbytes);
            nn_expect(tu_to_f64(w), rw, n, 1e-12, "adamw w");
            nn_expect(tu_to_f64(m), rm, n, 1e-12, "adamw m");
            nn_expect(tu_to_f64(v), rv, n, 1e-12, "adamw v");
        } else {
            CHECK(memcmp(first, w->data, nbytes) == 0, "adamw: %d threads differ from 1", threads[t]);
        }
    }
    free(first); free(w0); free(g0); free(m0); free(v0); free(rw); free(rm); free(rv);
    kiln_free(ctx);
}

static void test_timestep_embedding(void) {
    tu_case = "timestep_embedding";
    const int dims[3] = { 16, 7, 1 };
    const int periods[2] = { 10000, 100 };
    char what[96];
    for (int d = 0; d < 3; d++) {
        for (int pi = 0; pi < 2; pi++) {
            struct kiln_context * ctx = tu_ctx(1 << 20);
            const float tsv[5] = { 0.0f, 1.0f, 10.5f, 999.0f, 0.25f };
            struct kiln_tensor * ts = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 5);
            memcpy(ts->data, tsv, sizeof tsv);
            const int dim = dims[d], mp = periods[pi], half = dim / 2;
            struct kiln_tensor * e = kiln_timestep_embedding(ctx, ts, dim, mp);
            snprintf(what, sizeof what, "timestep_embedding dim %d max_period %d", dim, mp);
            if (!CHECK(e != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
            CHECK(e->ne[0] == dim && e->ne[1] == 5 && e->type == KILN_TYPE_F32, "%s: shape [dim, N]", what);
            CHECK(kiln_get_op_params_i32(e, 0) == dim && kiln_get_op_params_i32(e, 1) == mp, "%s: op_params", what);
            double * ref = (double *) malloc(sizeof(double) * dim * 5);
            for (int i = 0; i < 5; i++) {
                for (int j = 0; j < half; j++) {
                    const double f = exp(-log((double) mp) * j / half);
                    ref[i * dim + j] = cos(tsv[i] * f);
                    ref[i * dim + j + half] = sin(tsv[i] * f);
                }
                if (dim % 2) ref[i * dim + dim - 1] = 0.0;
            }
            /* arguments up to ~1000 rad: float argument rounding costs ~1e-4 */
            double * out = nn_run(ctx, e, what);
            if (out) {
                CHECK(tu_max_abs_diff(out, ref, dim * 5) < 5e-4, "%s: max abs diff %.3g", what, tu_max_abs_diff(out, ref, dim * 5));
                if (dim % 2) CHECK(out[dim - 1] == 0.0 && out[4 * dim + dim - 1] == 0.0, "%s: odd dim pads with 0", what);
                free(out);
            }
            free(ref);
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
    struct kiln_tensor * g2 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 2);
    struct kiln_tensor * g1 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1);
    CHECK_FAILS(kiln_cross_entropy_loss(ctx, a, b), "shapes differ", "ce shapes");
    CHECK_FAILS(kiln_cross_entropy_loss(ctx, NULL, a), "NULL", "ce NULL");
    CHECK_FAILS(kiln_cross_entropy_loss(ctx, ai, ai), "must be f32", "ce i32");
    CHECK_FAILS(kiln_cross_entropy_loss_back(ctx, g2, a, a), "1 element", "ce back grad size");
    CHECK_FAILS(kiln_cross_entropy_loss_back(ctx, g1, a, b), "shapes differ", "ce back shapes");
    CHECK_FAILS(kiln_cross_entropy_loss_back(ctx, NULL, a, a), "NULL", "ce back NULL");

    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * gw = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * m = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * v = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * p7 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 7);
    struct kiln_tensor * p6 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 6);
    struct kiln_tensor * p7i = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 7);
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, gw, m, v, p7), "not a parameter", "adamw without PARAM flag");
    kiln_set_param(ctx, w);
    CHECK(kiln_opt_step_adamw(ctx, w, gw, m, v, p7) != NULL, "adamw valid: %s", kiln_last_error());
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, b, m, v, p7), "shapes differ", "adamw grad shape");
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, gw, m, b, p7), "shapes differ", "adamw v shape");
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, gw, m, v, p6), "7 contiguous", "adamw 6 params");
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, gw, m, v, p7i), "must be f32", "adamw i32 params");
    CHECK_FAILS(kiln_opt_step_adamw(ctx, w, gw, NULL, v, p7), "NULL", "adamw NULL m");

    struct kiln_tensor * ts2 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 2);
    struct kiln_tensor * ts = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    struct kiln_tensor * tsi = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 4);
    CHECK_FAILS(kiln_timestep_embedding(ctx, ts2, 8, 10000), "vector", "timesteps 2d");
    CHECK_FAILS(kiln_timestep_embedding(ctx, tsi, 8, 10000), "must be f32", "timesteps i32");
    CHECK_FAILS(kiln_timestep_embedding(ctx, ts, 0, 10000), "dim", "dim 0");
    CHECK_FAILS(kiln_timestep_embedding(ctx, ts, 8, 0), "max_period", "max_period 0");
    CHECK_FAILS(kiln_timestep_embedding(ctx, NULL, 8, 10000), "NULL", "timesteps NULL");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(31337);
    test_cross_entropy();
    test_adamw_hand();
    test_adamw_random();
    test_timestep_embedding();
    test_bad_input();
    return tu_finish();
}
