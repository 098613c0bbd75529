/*
 * test_ops_recurrent.c — ssm_conv, ssm_scan, rwkv_wkv6 and
 * gated_linear_attn against double-precision recurrences written out here,
 * with 1/2/4 threads and several sequence / head layouts; plus bad inputs.
 */
#include "ops_conv_check.h"

static void test_ssm_conv(void) {
    tu_case = "ssm_conv";
    /* d_conv, n_t, d_inner, n_s */
    static const int64_t cases[][4] = { { 4, 5, 7, 2 }, { 3, 1, 5, 1 }, { 2, 9, 3, 3 }, { 4, 6, 33, 1 } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t dc = cases[ci][0], nt = cases[ci][1], di = cases[ci][2], ns = cases[ci][3];
        for (int perm = 0; perm < 2; perm++) {
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * sx;
            if (perm) sx = kiln_permute(ctx, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, di, dc - 1 + nt, ns), 1, 0, 2, 3);
            else sx = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, dc - 1 + nt, di, ns);
            struct kiln_tensor * c = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, dc, di);
            tu_fill_uniform(sx, -1.0f, 1.0f);
            tu_fill_uniform(c, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_ssm_conv(ctx, sx, c);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            CHECK(out->ne[0] == di && out->ne[1] == nt && out->ne[2] == ns, "ssm_conv shape");
            double * sv = tu_to_f64(sx);
            double * cv = tu_to_f64(c);
            double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
            for (int64_t n = 0; n < ns; n++)
            for (int64_t t = 0; t < nt; t++)
            for (int64_t i = 0; i < di; i++)
            for (int64_t k = 0; k < dc; k++) {
                ref[cc_idx(out, i, t, n, 0)] += sv[cc_idx(sx, t + k, i, n, 0)] * cv[cc_idx(c, k, i, 0, 0)];
            }
            char what[64];
            snprintf(what, sizeof what, "ssm_conv case %zu%s", ci, perm ? " permuted sx" : "");
            cc_check_threads(ctx, out, ref, 1e-12, what);
            free(sv);
            free(cv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_ssm_scan(void) {
    tu_case = "ssm_scan";
    /* d_state, d_inner, n_t, n_s */
    static const int64_t cases[][4] = { { 16, 8, 4, 1 }, { 5, 7, 3, 2 }, { 3, 2, 1, 3 }, { 4, 9, 6, 2 } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t ds = cases[ci][0], di = cases[ci][1], nt = cases[ci][2], ns = cases[ci][3];
        struct kiln_context * ctx = tu_ctx(8 << 20);
        struct kiln_tensor * s  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ds, di, ns);
        struct kiln_tensor * x  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, di, nt, ns);
        struct kiln_tensor * dt = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, di, nt, ns);
        struct kiln_tensor * A  = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ds, di);
        struct kiln_tensor * B  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ds, nt, ns);
        struct kiln_tensor * C  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ds, nt, ns);
        tu_fill_uniform(s, -1.0f, 1.0f);
        tu_fill_uniform(x, -1.0f, 1.0f);
        tu_fill_uniform(dt, -3.0f, 3.0f);
        tu_fill_uniform(A, -2.0f, -0.1f);
        tu_fill_uniform(B, -1.0f, 1.0f);
        tu_fill_uniform(C, -1.0f, 1.0f);
        /* the softplus passes large steps through unchanged: cover that branch */
        ((float *) dt->data)[0] = 25.0f;
        ((float *) dt->data)[kiln_nelements(dt) - 1] = 20.5f;
        struct kiln_tensor * out = kiln_ssm_scan(ctx, s, x, dt, A, B, C);
        if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
        CHECK(out->ne[0] == kiln_nelements(x) + kiln_nelements(s) && kiln_n_dims(out) == 1, "ssm_scan shape");
        double * sv = tu_to_f64(s);
        double * xv = tu_to_f64(x);
        double * dv = tu_to_f64(dt);
        double * av = tu_to_f64(A);
        double * bv = tu_to_f64(B);
        double * cv = tu_to_f64(C);
        double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
        double * y = ref;
        double * st = ref + kiln_nelements(x);
        memcpy(st, sv, sizeof(double) * (size_t) kiln_nelements(s));
        for (int64_t n = 0; n < ns; n++)
        for (int64_t t = 0; t < nt; t++)
        for (int64_t i = 0; i < di; i++) {
            const double d = dv[(n * nt + t) * di + i];
            const double sp = d <= 20.0 ? log1p(exp(d)) : d;
            const double xd = xv[(n * nt + t) * di + i] * sp;
            double sum = 0.0;
            for (int64_t j = 0; j < ds; j++) {
                double * sj = &st[(n * di + i) * ds + j];
                *sj = *sj * exp(sp * av[i * ds + j]) + bv[(n * nt + t) * ds + j] * xd;
                sum += *sj * cv[(n * nt + t) * ds + j];
            }
            y[(n * nt + t) * di + i] = sum;
        }
        char what[64];
        snprintf(what, sizeof what, "ssm_scan case %zu", ci);
        cc_check_threads(ctx, out, ref, 1e-10, what);
        free(sv); free(xv); free(dv); free(av); free(bv); free(cv); free(ref);
        kiln_free(ctx);
    }
}

/* wkv6 (is_gla = 0) and gla (is_gla = 1) reference over [S, H, T] inputs */
static void ref_linear_attn(bool is_gla, int64_t S, int64_t H, int64_t T, int64_t n_seqs, const double * k, const double * v,
                            const double * rq, const double * tf, const double * dk, const double * state, double scale, double * out) {
    const int64_t C = S * H, tps = T / n_seqs;
    double * st = out + C * T;
    for (int64_t q = 0; q < n_seqs; q++) {
        memcpy(st + q * S * C, state + q * S * C, sizeof(double) * (size_t)(S * C));
        for (int64_t tt = 0; tt < tps; tt++) {
            const int64_t t = q * tps + tt;
            for (int64_t h = 0; h < H; h++) {
                double * sh = st + q * S * C + h * S * S;
                for (int64_t j = 0; j < S; j++) {
                    double o = 0.0;
                    for (int64_t i = 0; i < S; i++) {
                        const double kv = k[t * C + h * S + i] * v[t * C + h * S + j];
                        const double prev = sh[i * S + j];
                        if (is_gla) o += (prev * dk[t * C + h * S + i] + kv) * rq[t * C + h * S + i] * scale;
                        else o += rq[t * C + h * S + i] * (tf[h * S + i] * kv + prev);
                    }
                    out[t * C + h * S + j] = o;
                }
                for (int64_t i = 0; i < S; i++)
                for (int64_t j = 0; j < S; j++) {
                    const double kv = k[t * C + h * S + i] * v[t * C + h * S + j];
                    sh[i * S + j] = sh[i * S + j] * dk[t * C + h * S + i] + kv;
                }
            }
        }
    }
}

static void test_linear_attn(bool is_gla) {
    tu_case = is_gla ? "gated_linear_attn" : "rwkv_wkv6";
    /* S, H, T, n_seqs */
    static const int64_t cases[][4] = { { 4, 2, 6, 2 }, { 8, 3, 5, 1 }, { 1, 1, 1, 1 }, { 16, 2, 4, 4 }, { 5, 5, 3, 3 } };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t S = cases[ci][0], H = cases[ci][1], T = cases[ci][2], ns = cases[ci][3];
        struct kiln_context * ctx = tu_ctx(8 << 20);
        struct kiln_tensor * k  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, S, H, T);
        struct kiln_tensor * v  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, S, H, T);
        struct kiln_tensor * rq = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, S, H, T);
        struct kiln_tensor * dk = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, S, H, T);
        struct kiln_tensor * tf = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, S, H);
        struct kiln_tensor * state = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, S * S * H, ns);
        tu_fill_uniform(k, -1.0f, 1.0f);
        tu_fill_uniform(v, -1.0f, 1.0f);
        tu_fill_uniform(rq, -1.0f, 1.0f);
        tu_fill_uniform(dk, 0.05f, 0.99f);
        tu_fill_uniform(tf, -1.0f, 1.0f);
        tu_fill_uniform(state, -1.0f, 1.0f);
        const float scale = 0.37f;
        struct kiln_tensor * out = is_gla ? kiln_gated_linear_attn(ctx, k, v, rq, dk, state, scale)
                                          : kiln_rwkv_wkv6(ctx, k, v, rq, tf, dk, state);
        if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
        CHECK(out->ne[0] == S * H && out->ne[1] == T + S * ns && out->ne[2] == 1, "shape");
        if (is_gla) {
            float sc;
            memcpy(&sc, &out->op_params[0], sizeof sc);
            CHECK(sc == scale, "gla scale in op_params[0]");
        }
        double * kv = tu_to_f64(k);
        double * vv = tu_to_f64(v);
        double * rv = tu_to_f64(rq);
        double * dv = tu_to_f64(dk);
        double * fv = tu_to_f64(tf);
        double * sv = tu_to_f64(state);
        double * ref = (double *) calloc((size_t) kiln_nelements(out), sizeof(double));
        ref_linear_attn(is_gla, S, H, T, ns, kv, vv, rv, fv, dv, sv, scale, ref);
        char what[64];
        snprintf(what, sizeof what, "%s case %zu", tu_case, ci);
        cc_check_threads(ctx, out, ref, 1e-10, what);
        free(kv); free(vv); free(rv); free(dv); free(fv); free(sv); free(ref);
        kiln_free(ctx);
    }
}

static void test_bad_inputs(void) {
    tu_case = "bad inputs";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * sx = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 4, 1);
    struct kiln_tensor * c = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 4);
    struct kiln_tensor * c5 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 5);
    struct kiln_tensor * c9 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 9, 4);
    struct kiln_tensor * ch = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 3, 4);
    CHECK(kiln_ssm_conv(ctx, sx, c) != NULL, "ssm_conv ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_ssm_conv(ctx, sx, c5), "do not fit");
    CHECK_FAILS(kiln_ssm_conv(ctx, sx, c9), "do not fit");
    CHECK_FAILS(kiln_ssm_conv(ctx, sx, ch), "must be f32");
    CHECK_FAILS(kiln_ssm_conv(ctx, NULL, c), "NULL");

    struct kiln_tensor * s  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 6, 2);
    struct kiln_tensor * x  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 3, 2);
    struct kiln_tensor * A  = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 6);
    struct kiln_tensor * B  = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 3, 2);
    struct kiln_tensor * x5 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 5, 3, 2);
    struct kiln_tensor * B2 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 2, 2);
    CHECK(kiln_ssm_scan(ctx, s, x, x, A, B, B) != NULL, "ssm_scan ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_ssm_scan(ctx, s, x5, x5, A, B, B), "do not fit");
    CHECK_FAILS(kiln_ssm_scan(ctx, s, x, x5, A, B, B), "same shape");
    CHECK_FAILS(kiln_ssm_scan(ctx, s, x, x, A, B2, B2), "do not fit");
    CHECK_FAILS(kiln_ssm_scan(ctx, s, x, x, A, B, B2), "same shape");
    CHECK_FAILS(kiln_ssm_scan(ctx, s, x, x, NULL, B, B), "NULL");
    CHECK_FAILS(kiln_ssm_scan(ctx, s, kiln_transpose(ctx, x), x, A, B, B), "contiguous");

    struct kiln_tensor * k = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 2, 6);
    struct kiln_tensor * k3 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 3, 6);
    struct kiln_tensor * tf = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 2);
    struct kiln_tensor * tf3 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3);
    struct kiln_tensor * st = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 32, 2);
    struct kiln_tensor * st4 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 32, 4);
    struct kiln_tensor * stbad = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 31, 2);
    CHECK(kiln_rwkv_wkv6(ctx, k, k, k, tf, k, st) != NULL, "wkv6 ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_rwkv_wkv6(ctx, k, k3, k, tf, k, st), "must have the shape");
    CHECK_FAILS(kiln_rwkv_wkv6(ctx, k, k, k, tf3, k, st), "tf");
    CHECK_FAILS(kiln_rwkv_wkv6(ctx, k, k, k, tf, k, stbad), "state");
    CHECK_FAILS(kiln_rwkv_wkv6(ctx, k, k, k, tf, k, st4), "multiple");
    CHECK_FAILS(kiln_rwkv_wkv6(ctx, k, k, NULL, tf, k, st), "NULL");
    CHECK(kiln_gated_linear_attn(ctx, k, k, k, k, st, 1.0f) != NULL, "gla ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_gated_linear_attn(ctx, k, k, k3, k, st, 1.0f), "must have the shape");
    CHECK_FAILS(kiln_gated_linear_attn(ctx, k, k, k, k, stbad, 1.0f), "state");
    CHECK_FAILS(kiln_gated_linear_attn(ctx, kiln_permute(ctx, k, 0, 2, 1, 3), k, k, k, st, 1.0f), "contiguous");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(7);
    test_ssm_conv();
    test_ssm_scan();
    test_linear_attn(false);
    test_linear_attn(true);
    test_bad_inputs();
    return tu_finish();
}
