/*
 * test_ops_rope.c — rope / rope_ext / rope_multi / rope_back against the
 * closed-form rotation written in double: theta = pos * base^(-2k/n_dims) /
 * freq_factor[k], YaRN blend and magnitude, normal / neox / mrope / vision
 * pairings, partial rotation (n_dims < head size), f32 and f16, strided
 * sources, 1/2/4 threads, bad input.
 */
#include "nn_test_common.h"

#define PI_D 3.14159265358979323846

struct rp {
    int n_dims, mode, n_ctx_orig;
    double base, fscale, ext, attn, beta_fast, beta_slow;
    const double * ff;   /* freq factors or NULL */
    const int * sections; /* multi-rope or NULL */
};

static void ref_corr_dims(const struct rp * p, double dims[2]) {
    const double lo = p->n_dims * log(p->n_ctx_orig / (p->beta_fast * 2 * PI_D)) / (2 * log(p->base));
    const double hi = p->n_dims * log(p->n_ctx_orig / (p->beta_slow * 2 * PI_D)) / (2 * log(p->base));
    dims[0] = fmax(0.0, floor(lo));
    dims[1] = fmin(p->n_dims - 1.0, ceil(hi));
}

/* cos/sin (with magnitude) of pair k at position `pos` (exponent index e) */
static void ref_angle(const struct rp * p, double pos, int64_t e, int64_t k, double sign, double * c, double * s) {
    const double ff = p->ff ? p->ff[k] : 1.0;
    const double te = pos * pow(p->base, -2.0 * e / p->n_dims) / ff;
    double theta = p->fscale * te, mag = p->attn;
    if (p->ext != 0.0) {
        double dims[2];
        ref_corr_dims(p, dims);
        double y = (k - dims[0]) / fmax(0.001, dims[1] - dims[0]);
        y = fmin(1.0, fmax(0.0, y));
        const double mix = (1.0 - y) * p->ext;
        theta = p->fscale * te * (1 - mix) + te * mix;
        mag *= 1.0 + 0.1 * log(1.0 / p->fscale);
    }
    *c = cos(theta) * mag;
    *s = sign * sin(theta) * mag;
}

/* x, y logical [ne0, ne1, ne2, ne3]; pos has ne2 (or 4*ne2) entries */
static void ref_rope(const struct rp * p, const double * x, double * y, const int64_t * ne, const int32_t * pos, bool forward) {
    const double sign = forward ? 1.0 : -1.0;
    const int64_t n0 = ne[0];
    const bool vision = p->mode == KILN_ROPE_TYPE_VISION, mrope = (p->mode & KILN_ROPE_TYPE_MROPE) != 0;
    for (int64_t i3 = 0; i3 < ne[3]; i3++) for (int64_t i2 = 0; i2 < ne[2]; i2++) for (int64_t i1 = 0; i1 < ne[1]; i1++) {
        const double * xr = x + ((i3 * ne[2] + i2) * ne[1] + i1) * n0;
        double * yr = y + ((i3 * ne[2] + i2) * ne[1] + i1) * n0;
        for (int64_t i = 0; i < n0; i++) yr[i] = xr[i];
        const int64_t n_pairs = vision ? n0 / 2 : p->n_dims / 2;
        for (int64_t k = 0; k < n_pairs; k++) {
            double position = pos[i2];
            int64_t e = k;
            if (mrope) {
                const int * s = p->sections;
                const int sd = s[0] + s[1] + s[2] + s[3];
                const int sector = (int)(k % sd);
                int sec = 0, start = 0;
                if (sector >= s[0] + s[1] + s[2]) { sec = 3; start = s[0] + s[1] + s[2]; }
                else if (sector >= s[0] + s[1]) { sec = 2; start = s[0] + s[1]; }
                else if (sector >= s[0]) { sec = 1; start = s[0]; }
                position = pos[i2 + sec * ne[2]];
                if (vision) e = sector - start; /* each section restarts its frequencies */
            }
            double c, s;
            ref_angle(p, position, e, k, sign, &c, &s);
            int64_t a, b;
            if (vision)                       { a = k; b = k + p->n_dims; }
            else if (mrope || p->mode == KILN_ROPE_TYPE_NEOX) { a = k; b = k + p->n_dims / 2; }
            else                              { a = 2 * k; b = 2 * k + 1; }
            yr[a] = xr[a] * c - xr[b] * s;
            yr[b] = xr[a] * s + xr[b] * c;
        }
    }
}

struct rcase {
    int64_t ne[4];
    int n_dims, mode;
    bool ff, yarn;
};

static void run_case(const struct rcase * rc, enum kiln_type type, int layout, bool back) {
    char what[200];
    const int64_t * ne = rc->ne;
    struct kiln_context * ctx = tu_ctx(8 << 20);
    struct kiln_tensor * a;
    if (layout == 1) {
        /* every other row of a larger buffer: rows contiguous, nb1 doubled */
        struct kiln_tensor * base = kiln_new_tensor_4d(ctx, type, ne[0], 2 * ne[1], ne[2], ne[3]);
        a = kiln_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], 2 * base->nb[1], base->nb[2], base->nb[3], base->nb[1]);
    } else {
        a = kiln_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
    tu_fill_uniform(a, -1.0f, 1.0f);
    const bool mrope = (rc->mode & KILN_ROPE_TYPE_MROPE) != 0;
    const int64_t npos = mrope ? 4 * ne[2] : ne[2];
    struct kiln_tensor * pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, npos);
    int32_t * pv = (int32_t *) pos->data;
    for (int64_t i = 0; i < npos; i++) pv[i] = (int32_t)(tu_rand_u64() % 60);
    double ffv[64];
    struct kiln_tensor * ff = NULL;
    if (rc->ff) {
        ff = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, ne[0] / 2);
        tu_fill_uniform(ff, 0.5f, 4.0f);
        double * t = tu_to_f64(ff);
        for (int64_t i = 0; i < ne[0] / 2; i++) ffv[i] = t[i];
        free(t);
    }
    static int sec_mrope[4] = { 2, 3, 3, 0 };
    static int sec_vision[4] = { 2, 2, 0, 0 };
    struct rp p = { rc->n_dims, rc->mode, rc->yarn ? 4096 : 0, 10000.0, 1.0, 0.0, 1.0, 32.0, 1.0,
                    rc->ff ? ffv : NULL, NULL };
    if (rc->yarn) { p.base = 500000.0; p.fscale = 0.25; p.ext = 1.0; p.attn = 0.9; }
    if (mrope) p.sections = rc->mode == KILN_ROPE_TYPE_VISION ? sec_vision : sec_mrope;

    struct kiln_tensor * y;
    if (mrope) {
        y = kiln_rope_multi(ctx, a, pos, ff, p.n_dims, (int *) p.sections, p.mode, p.n_ctx_orig, (float) p.base, (float) p.fscale,
                            (float) p.ext, (float) p.attn, (float) p.beta_fast, (float) p.beta_slow);
    } else if (back) {
        y = kiln_rope_back(ctx, a, pos, ff, p.n_dims, p.mode, p.n_ctx_orig, (float) p.base, (float) p.fscale,
                           (float) p.ext, (float) p.attn, (float) p.beta_fast, (float) p.beta_slow);
    } else if (!rc->ff && !rc->yarn && layout == 0) {
        y = kiln_rope(ctx, a, pos, p.n_dims, p.mode); /* the plain constructor: base 10000, no YaRN */
        p.beta_fast = p.beta_slow = 0.0; /* what ggml_rope records */
    } else {
        y = kiln_rope_ext(ctx, a, pos, ff, p.n_dims, p.mode, p.n_ctx_orig, (float) p.base, (float) p.fscale,
                          (float) p.ext, (float) p.attn, (float) p.beta_fast, (float) p.beta_slow);
    }
    snprintf(what, sizeof what, "%s [%lld,%lld,%lld,%lld] n_dims %d mode %d %s%s%s layout %d",
             back ? "rope_back" : mrope ? "rope_multi" : "rope", (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3],
             rc->n_dims, rc->mode, kiln_type_name(type), rc->ff ? " ff" : "", rc->yarn ? " yarn" : "", layout);
    if (!CHECK(y != NULL, "%s: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    CHECK(y->op == (back ? KILN_OP_ROPE_BACK : KILN_OP_ROPE) && y->type == type && kiln_are_same_shape(y, a), "%s: result", what);
    CHECK(kiln_get_op_params_i32(y, 1) == p.n_dims && kiln_get_op_params_i32(y, 2) == p.mode &&
          kiln_get_op_params_i32(y, 4) == p.n_ctx_orig && kiln_get_op_params_f32(y, 5) == (float) p.base &&
          kiln_get_op_params_f32(y, 7) == (float) p.ext && kiln_get_op_params_f32(y, 10) == (float) p.beta_slow &&
          (!mrope || kiln_get_op_params_i32(y, 12) == p.sections[1]), "%s: op_params layout", what);
    const int64_t n = kiln_nelements(a);
    double * x = tu_to_f64(a);
    double * ref = (double *) malloc(sizeof(double) * n);
    ref_rope(&p, x, ref, ne, pv, !back);
    /* float theta from repeated multiplication drifts ~1e-5 rad at pos 60; f16 adds its rounding */
    nn_expect(nn_run(ctx, y, what), ref, n, type == KILN_TYPE_F16 ? 2e-6 : 1e-8, what);
    free(x); free(ref);
    kiln_free(ctx);
}

static void test_rope(void) {
    static const struct rcase cases[] = {
        { { 64, 4, 5, 1 }, 64, 0, false, false },
        { { 64, 4, 5, 1 }, 64, KILN_ROPE_TYPE_NEOX, false, false },
        { { 10, 3, 7, 2 }, 6, 0, false, false },                    /* partial rotation */
        { { 10, 3, 7, 2 }, 6, KILN_ROPE_TYPE_NEOX, false, false },
        { { 32, 3, 6, 1 }, 32, 0, true, false },                     /* freq factors */
        { { 32, 3, 6, 1 }, 24, KILN_ROPE_TYPE_NEOX, true, true },
        { { 128, 2, 3, 1 }, 128, 0, false, true },                   /* YaRN */
        { { 128, 2, 3, 1 }, 96, KILN_ROPE_TYPE_NEOX, false, true },
        { { 2, 1, 1, 1 }, 2, 0, false, false },
    };
    tu_case = "rope";
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int layout = 0; layout < 2; layout++) {
            for (int t = 0; t < 2; t++) {
                const enum kiln_type type = t ? KILN_TYPE_F16 : KILN_TYPE_F32;
                run_case(&cases[c], type, layout, false);
                run_case(&cases[c], type, layout, true);
            }
        }
    }
    tu_case = "rope_multi";
    static const struct rcase multi[] = {
        { { 16, 3, 5, 1 }, 16, KILN_ROPE_TYPE_MROPE, false, false },   /* sections 2+3+3 = n_dims/2 */
        { { 20, 2, 4, 2 }, 16, KILN_ROPE_TYPE_MROPE, false, true },    /* partial, YaRN */
        { { 16, 3, 5, 1 }, 8, KILN_ROPE_TYPE_VISION, false, false },   /* vision: n_dims = ne0/2 */
        { { 16, 2, 3, 1 }, 8, KILN_ROPE_TYPE_VISION, true, false },
    };
    for (size_t c = 0; c < sizeof multi / sizeof multi[0]; c++) {
        run_case(&multi[c], KILN_TYPE_F32, 0, false);
        run_case(&multi[c], KILN_TYPE_F16, 1, false);
    }
}

static void test_corr_dims_and_roundtrip(void) {
    tu_case = "yarn corr dims";
    const struct { int n_dims, n_ctx; float base, bf, bs; } cs[] = {
        { 128, 4096, 10000.0f, 32.0f, 1.0f }, { 64, 2048, 500000.0f, 32.0f, 1.0f }, { 96, 8192, 1e6f, 16.0f, 2.0f },
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        float d[2];
        kiln_rope_yarn_corr_dims(cs[i].n_dims, cs[i].n_ctx, cs[i].base, cs[i].bf, cs[i].bs, d);
        struct rp p = { cs[i].n_dims, 0, cs[i].n_ctx, cs[i].base, 1, 1, 1, cs[i].bf, cs[i].bs, NULL, NULL };
        double r[2];
        ref_corr_dims(&p, r);
        CHECK(d[0] == (float) r[0] && d[1] == (float) r[1], "corr dims %d/%d: got %g %g, want %g %g",
              cs[i].n_dims, cs[i].n_ctx, d[0], d[1], r[0], r[1]);
    }
    /* rope_back(rope(x)) = x when the magnitude is 1 */
    tu_case = "rope roundtrip";
    struct kiln_context * ctx = tu_ctx(4 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 24, 3, 4);
    struct kiln_tensor * pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 4);
    tu_fill_uniform(a, -1.0f, 1.0f);
    for (int i = 0; i < 4; i++) kiln_set_i32_1d(pos, i, 7 * i + 3);
    struct kiln_tensor * y = kiln_rope_ext(ctx, a, pos, NULL, 16, KILN_ROPE_TYPE_NEOX, 0, 10000.0f, 0.5f, 0.0f, 1.0f, 0, 0);
    struct kiln_tensor * z = kiln_rope_back(ctx, y, pos, NULL, 16, KILN_ROPE_TYPE_NEOX, 0, 10000.0f, 0.5f, 0.0f, 1.0f, 0, 0);
    CHECK(tu_compute(ctx, z, 2) == KILN_STATUS_SUCCESS, "compute");
    double * av = tu_to_f64(a), * zv = tu_to_f64(z);
    nn_expect(zv, av, kiln_nelements(a), 1e-12, "back(rope(x)) = x");
    free(av);
    /* in place */
    struct kiln_tensor * yi = kiln_rope_inplace(ctx, a, pos, 16, 0);
    CHECK(yi && yi->data == a->data, "rope_inplace is a view");
    struct kiln_tensor * yo = kiln_rope(ctx, kiln_dup_tensor(ctx, a), pos, 16, 0);
    memcpy(yo->src[0]->data, a->data, kiln_nbytes(a));
    CHECK(tu_compute(ctx, yo, 1) == KILN_STATUS_SUCCESS && tu_compute(ctx, yi, 4) == KILN_STATUS_SUCCESS, "compute");
    CHECK(memcmp(yo->data, a->data, kiln_nbytes(a)) == 0, "rope_inplace equals rope");
    struct kiln_tensor * ye = kiln_rope_ext_inplace(ctx, a, pos, NULL, 16, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0, 0);
    CHECK(ye && ye->data == a->data && ye->op == KILN_OP_ROPE, "rope_ext_inplace is a view");
    kiln_free(ctx);
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 16, 2, 5);
    struct kiln_tensor * ai = kiln_new_tensor_3d(ctx, KILN_TYPE_I32, 16, 2, 5);
    struct kiln_tensor * pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 5);
    struct kiln_tensor * pos4 = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 20);
    struct kiln_tensor * pos_short = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 4);
    struct kiln_tensor * pos_f = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 5);
    struct kiln_tensor * ff_short = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * ff_f16 = kiln_new_tensor_1d(ctx, KILN_TYPE_F16, 8);
    int sec[4] = { 2, 3, 3, 0 }, sec0[4] = { 0, 0, 0, 4 };
    CHECK_FAILS(kiln_rope(ctx, NULL, pos, 16, 0), "NULL", "rope NULL a");
    CHECK_FAILS(kiln_rope(ctx, a, NULL, 16, 0), "NULL", "rope NULL b");
    CHECK_FAILS(kiln_rope(ctx, ai, pos, 16, 0), "f32 or f16", "rope i32 a");
    CHECK_FAILS(kiln_rope(ctx, a, pos_f, 16, 0), "must be i32", "rope f32 positions");
    CHECK_FAILS(kiln_rope(ctx, a, pos_short, 16, 0), "one entry per", "rope positions count");
    CHECK_FAILS(kiln_rope(ctx, a, pos, 7, 0), "even", "rope odd n_dims");
    CHECK_FAILS(kiln_rope(ctx, a, pos, 18, 0), "exceeds", "rope n_dims > ne0");
    CHECK_FAILS(kiln_rope(ctx, a, pos, 16, 1), "mode", "rope mode 1");
    CHECK_FAILS(kiln_rope(ctx, a, pos, 16, KILN_ROPE_TYPE_MROPE), "kiln_rope_multi", "rope with mrope mode");
    CHECK_FAILS(kiln_rope_ext(ctx, a, pos, ff_short, 16, 0, 0, 10000.0f, 1, 0, 1, 0, 0), "at least n_dims/2", "short freq factors");
    CHECK_FAILS(kiln_rope_ext(ctx, a, pos, ff_f16, 16, 0, 0, 10000.0f, 1, 0, 1, 0, 0), "must be f32", "f16 freq factors");
    CHECK_FAILS(kiln_rope_ext(ctx, a, pos, NULL, 16, 0, 0, 0.0f, 1, 0, 1, 0, 0), "freq_base", "zero freq_base");
    CHECK_FAILS(kiln_rope_multi(ctx, a, pos, NULL, 16, sec, KILN_ROPE_TYPE_MROPE, 0, 10000.0f, 1, 0, 1, 0, 0), "4 positions", "multi positions");
    CHECK_FAILS(kiln_rope_multi(ctx, a, pos4, NULL, 16, NULL, KILN_ROPE_TYPE_MROPE, 0, 10000.0f, 1, 0, 1, 0, 0), "sections is NULL", "multi NULL sections");
    CHECK_FAILS(kiln_rope_multi(ctx, a, pos4, NULL, 16, sec0, KILN_ROPE_TYPE_MROPE, 0, 10000.0f, 1, 0, 1, 0, 0), "sections", "multi empty sections");
    CHECK_FAILS(kiln_rope_multi(ctx, a, pos4, NULL, 16, sec, 0, 0, 10000.0f, 1, 0, 1, 0, 0), "not a multi-rope mode", "multi mode 0");
    CHECK_FAILS(kiln_rope_multi(ctx, a, pos4, NULL, 16, sec, KILN_ROPE_TYPE_VISION, 0, 10000.0f, 1, 0, 1, 0, 0), "ne0/2", "vision n_dims");
    CHECK_FAILS(kiln_rope_back(ctx, kiln_transpose(ctx, a), pos, NULL, 16, 0, 0, 10000.0f, 1, 0, 1, 0, 0), "contiguous rows", "back transposed");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(7);
    test_rope();
    test_corr_dims_and_roundtrip();
    test_bad_input();
    return tu_finish();
}
