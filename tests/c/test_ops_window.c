/*
 * test_ops_window.c — win_part, win_unpart, get_rel_pos and add_rel_pos
 * (+ in place) against direct double-precision index arithmetic, with
 * 1/2/4 threads; a win_part -> win_unpart round trip; bad inputs.
 */
#include "ops_conv_check.h"

/* C, W, H, w */
static const int64_t win_cases[][4] = { { 3, 5, 7, 2 }, { 1, 4, 4, 4 }, { 2, 9, 3, 4 }, { 4, 1, 1, 3 }, { 5, 14, 14, 7 } };

static void test_win_part(void) {
    tu_case = "win_part";
    for (size_t ci = 0; ci < sizeof(win_cases) / sizeof(win_cases[0]); ci++) {
        const int64_t C = win_cases[ci][0], W = win_cases[ci][1], H = win_cases[ci][2];
        const int w = (int) win_cases[ci][3];
        for (int perm = 0; perm < 2; perm++) {
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * a = perm ? kiln_permute(ctx, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, W, C, H), 1, 0, 2, 3)
                                          : kiln_new_tensor_3d(ctx, KILN_TYPE_F32, C, W, H);
            tu_fill_uniform(a, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_win_part(ctx, a, w);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            const int64_t npx = (W + w - 1) / w, npy = (H + w - 1) / w;
            CHECK(out->ne[0] == C && out->ne[1] == w && out->ne[2] == w && out->ne[3] == npx * npy, "win_part shape");
            CHECK(out->op_params[0] == npx && out->op_params[1] == npy && out->op_params[2] == w, "win_part op_params");
            double * av = tu_to_f64(a);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t py = 0; py < npy; py++)
            for (int64_t px = 0; px < npx; px++)
            for (int64_t i2 = 0; i2 < w; i2++)
            for (int64_t i1 = 0; i1 < w; i1++)
            for (int64_t c = 0; c < C; c++) {
                const int64_t x = px * w + i1, y = py * w + i2;
                ref[cc_idx(out, c, i1, i2, py * npx + px)] = (x < W && y < H) ? av[cc_idx(a, c, x, y, 0)] : 0.0;
            }
            char what[64];
            snprintf(what, sizeof what, "win_part case %zu%s", ci, perm ? " permuted" : "");
            cc_check_threads(ctx, out, ref, 0.0, what);

            /* and back: unpart(part(a)) == a */
            struct kiln_tensor * back = kiln_win_unpart(ctx, out, (int) W, (int) H, w);
            if (CHECK(back != NULL, "win_unpart: %s", kiln_last_error())) {
                CHECK(back->ne[0] == C && back->ne[1] == W && back->ne[2] == H && back->ne[3] == 1, "win_unpart shape");
                snprintf(what, sizeof what, "win_part -> win_unpart case %zu%s", ci, perm ? " permuted" : "");
                cc_check_threads(ctx, back, av, 0.0, what);
            }
            free(av);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_win_unpart(void) {
    tu_case = "win_unpart";
    for (size_t ci = 0; ci < sizeof(win_cases) / sizeof(win_cases[0]); ci++) {
        const int64_t C = win_cases[ci][0], W = win_cases[ci][1], H = win_cases[ci][2];
        const int w = (int) win_cases[ci][3];
        const int64_t npx = (W + w - 1) / w, npy = (H + w - 1) / w;
        struct kiln_context * ctx = tu_ctx(8 << 20);
        struct kiln_tensor * a = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, C, w, w, npx * npy);
        tu_fill_uniform(a, -1.0f, 1.0f);
        struct kiln_tensor * out = kiln_win_unpart(ctx, a, (int) W, (int) H, w);
        if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
        CHECK(out->op_params[0] == w, "win_unpart op_params");
        double * av = tu_to_f64(a);
        double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
        for (int64_t y = 0; y < H; y++)
        for (int64_t x = 0; x < W; x++)
        for (int64_t c = 0; c < C; c++) {
            ref[cc_idx(out, c, x, y, 0)] = av[cc_idx(a, c, x % w, y % w, (y / w) * npx + x / w)];
        }
        char what[64];
        snprintf(what, sizeof what, "win_unpart case %zu", ci);
        cc_check_threads(ctx, out, ref, 0.0, what);
        free(av);
        free(ref);
        kiln_free(ctx);
    }
}

static void test_get_rel_pos(void) {
    tu_case = "get_rel_pos";
    static const int64_t cases[][2] = { { 4, 3 }, { 1, 1 }, { 7, 5 }, { 16, 8 } }; /* C, k */
    const enum kiln_type types[3] = { KILN_TYPE_F16, KILN_TYPE_F32, KILN_TYPE_BF16 };
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t C = cases[ci][0], K = cases[ci][1];
        for (int ti = 0; ti < 3; ti++) {
            struct kiln_context * ctx = tu_ctx(4 << 20);
            struct kiln_tensor * a = kiln_new_tensor_2d(ctx, types[ti], C, 2 * K - 1);
            tu_fill_uniform(a, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_get_rel_pos(ctx, a, (int) K, (int) K);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            CHECK(out->type == KILN_TYPE_F16 && out->ne[0] == C && out->ne[1] == K && out->ne[2] == K, "get_rel_pos shape/type");
            double * av = tu_to_f64(a);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t i2 = 0; i2 < K; i2++)
            for (int64_t i1 = 0; i1 < K; i1++)
            for (int64_t c = 0; c < C; c++) ref[cc_idx(out, c, i1, i2, 0)] = av[cc_idx(a, c, K - 1 - i1 + i2, 0, 0)];
            char what[64];
            snprintf(what, sizeof what, "get_rel_pos case %zu %s", ci, kiln_type_name(types[ti]));
            cc_check_threads(ctx, out, ref, types[ti] == KILN_TYPE_F16 ? 0.0 : 1e-6, what);
            free(av);
            free(ref);
            kiln_free(ctx);
        }
    }
}

struct rel_pos_reset { struct kiln_tensor * a; const double * orig; };
static void restore_a(void * user) {
    struct rel_pos_reset * r = (struct rel_pos_reset *) user;
    tu_from_f64(r->a, r->orig);
}

static void test_add_rel_pos(void) {
    tu_case = "add_rel_pos";
    static const int64_t cases[][4] = { { 3, 2, 4, 1 }, { 1, 1, 1, 1 }, { 5, 3, 3, 4 }, { 8, 4, 2, 3 } }; /* K, qw, qh, B */
    for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const int64_t K = cases[ci][0], qw = cases[ci][1], qh = cases[ci][2], B = cases[ci][3];
        for (int inplace = 0; inplace < 2; inplace++) {
            struct kiln_context * ctx = tu_ctx(4 << 20);
            struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K * K, qw * qh, B);
            struct kiln_tensor * pw = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, K, qw, qh, B);
            struct kiln_tensor * ph = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, K, qw, qh, B);
            tu_fill_uniform(a, -1.0f, 1.0f);
            tu_fill_uniform(pw, -1.0f, 1.0f);
            tu_fill_uniform(ph, -1.0f, 1.0f);
            struct kiln_tensor * out = inplace ? kiln_add_rel_pos_inplace(ctx, a, pw, ph) : kiln_add_rel_pos(ctx, a, pw, ph);
            if (!CHECK(out != NULL, "case %zu: %s", ci, kiln_last_error())) { kiln_free(ctx); continue; }
            CHECK(kiln_are_same_shape(out, a) && out->op_params[0] == inplace, "add_rel_pos shape / op_params");
            CHECK(!inplace || out->data == a->data, "in place result is a view of a");
            double * av = tu_to_f64(a);
            double * wv = tu_to_f64(pw);
            double * hv = tu_to_f64(ph);
            double * ref = (double *) malloc(sizeof(double) * (size_t) kiln_nelements(out));
            for (int64_t r = 0; r < qw * qh * B; r++)
            for (int64_t kh = 0; kh < K; kh++)
            for (int64_t kw = 0; kw < K; kw++) {
                const int64_t i = r * K * K + kh * K + kw;
                ref[i] = av[i] + hv[r * K + kh] + wv[r * K + kw];
            }
            char what[64];
            snprintf(what, sizeof what, "add_rel_pos%s case %zu", inplace ? "_inplace" : "", ci);
            struct rel_pos_reset rr = { a, av };
            cc_check_threads_reset(ctx, out, ref, 1e-12, what, inplace ? restore_a : NULL, &rr);
            free(av);
            free(wv);
            free(hv);
            free(ref);
            kiln_free(ctx);
        }
    }
}

static void test_bad_inputs(void) {
    tu_case = "bad inputs";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 5, 5);
    struct kiln_tensor * a4 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 5, 5, 2);
    struct kiln_tensor * ah = kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 3, 5, 5);
    CHECK_FAILS(kiln_win_part(ctx, a, 0), ">= 1");
    CHECK_FAILS(kiln_win_part(ctx, a4, 2), "3D");
    CHECK_FAILS(kiln_win_part(ctx, ah, 2), "f32");
    CHECK_FAILS(kiln_win_part(ctx, NULL, 2), "NULL");
    struct kiln_tensor * p = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 2, 2, 9);
    CHECK(kiln_win_unpart(ctx, p, 5, 5, 2) != NULL, "win_unpart ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_win_unpart(ctx, p, 5, 7, 2), "must be");
    CHECK_FAILS(kiln_win_unpart(ctx, p, 5, 5, 3), "must be");
    CHECK_FAILS(kiln_win_unpart(ctx, p, 0, 5, 2), ">= 1");

    struct kiln_tensor * rp = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 4, 5);
    CHECK(kiln_get_rel_pos(ctx, rp, 3, 3) != NULL, "get_rel_pos ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_get_rel_pos(ctx, rp, 3, 2), "equal");
    CHECK_FAILS(kiln_get_rel_pos(ctx, rp, 4, 4), "2*max");
    CHECK_FAILS(kiln_get_rel_pos(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 4, 5), 3, 3), "f16, f32 or bf16");

    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 9, 6, 2);
    struct kiln_tensor * pw = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 2, 3, 2);
    struct kiln_tensor * pw2 = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 3, 3, 3, 2);
    CHECK(kiln_add_rel_pos(ctx, x, pw, pw) != NULL, "add_rel_pos ok: %s", kiln_last_error());
    CHECK_FAILS(kiln_add_rel_pos(ctx, x, pw, pw2), "same shape");
    CHECK_FAILS(kiln_add_rel_pos(ctx, x, pw2, pw2), "must be");
    CHECK_FAILS(kiln_add_rel_pos_inplace(ctx, kiln_transpose(ctx, x), pw, pw), "contiguous");
    CHECK_FAILS(kiln_add_rel_pos(ctx, x, NULL, pw), "NULL");
    kiln_free(ctx);
}

int main(void) {
    tu_seed(99);
    test_win_part();
    test_win_unpart();
    test_get_rel_pos();
    test_add_rel_pos();
    test_bad_inputs();
    return tu_finish();
}
