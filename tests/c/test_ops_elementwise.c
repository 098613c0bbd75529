/*
 * test_ops_elementwise.c — two-input elementwise ops (add, sub, mul, div,
 * add1, add_cast, silu_back), acc, set*, the copy family (dup, cpy, cont*,
 * cast) and the custom maps, against double references: every supported
 * type, src1 broadcast in every dim, non-contiguous views, 1/2/4 threads
 * (bit-identical), empty tensors and bad input.
 */
#include "util/elem_check.h"

static char case_name[200];

/* ------------------------------------------------------------- binary */

enum bop { B_ADD, B_SUB, B_MUL, B_DIV, B_SILU_BACK, B_ADD1, B_ADD_CAST };
static const char * const bop_names[] = { "add", "sub", "mul", "div", "silu_back", "add1", "add_cast" };

static double bref(int op, double x, double y) {
    switch (op) {
        case B_ADD: case B_ADD1: case B_ADD_CAST: return x + y;
        case B_SUB: return x - y;
        case B_MUL: return x * y;
        case B_DIV: return x / y;
        case B_SILU_BACK: { const double s = 1 / (1 + exp(-x)); return y * s * (1 + x * (1 - s)); }
    }
    return NAN;
}

static struct kiln_tensor * bbuild(struct kiln_context * ctx, int op, struct kiln_tensor * a, struct kiln_tensor * b, bool inplace, enum kiln_type cast) {
    switch (op) {
        case B_ADD: return inplace ? kiln_add_inplace(ctx, a, b) : kiln_add(ctx, a, b);
        case B_SUB: return inplace ? kiln_sub_inplace(ctx, a, b) : kiln_sub(ctx, a, b);
        case B_MUL: return inplace ? kiln_mul_inplace(ctx, a, b) : kiln_mul(ctx, a, b);
        case B_DIV: return inplace ? kiln_div_inplace(ctx, a, b) : kiln_div(ctx, a, b);
        case B_SILU_BACK: return kiln_silu_back(ctx, a, b);
        case B_ADD1: return inplace ? kiln_add1_inplace(ctx, a, b) : kiln_add1(ctx, a, b);
        case B_ADD_CAST: return kiln_add_cast(ctx, a, b, cast);
    }
    return NULL;
}

static void run2(int op, enum kiln_type ta, enum kiln_type tb, const int64_t nea[4], const int64_t neb[4],
                 int la, int lb, bool inplace, enum kiln_type cast) {
    snprintf(case_name, sizeof case_name, "%s%s %s[%lld,%lld,%lld,%lld] %s + %s[%lld,%lld,%lld,%lld] %s", bop_names[op], inplace ? "_inplace" : "",
             kiln_type_name(ta), (long long) nea[0], (long long) nea[1], (long long) nea[2], (long long) nea[3], ec_layout_names[la],
             kiln_type_name(tb), (long long) neb[0], (long long) neb[1], (long long) neb[2], (long long) neb[3], ec_layout_names[lb]);
    tu_case = case_name;
    ec_cases++;
    struct ec_bits bits = { 0 };
    const int64_t n = ec_nel(nea);
    for (int t = 0; t < 3; t++) {
        struct kiln_context * ctx = tu_ctx((size_t) n * 80 + (1 << 20));
        tu_seed(99 + (uint64_t) op);
        struct kiln_tensor * a = ec_new(ctx, ta, nea, la);
        struct kiln_tensor * b = ec_new(ctx, tb, neb, lb);
        tu_fill_uniform(a, -2, 2);
        if (op == B_DIV) {
            /* divisors away from zero, both signs */
            tu_fill_uniform(b, 0.5f, 2.0f);
            double * v = tu_to_f64(b);
            for (int64_t i = 0; i < ec_nel(neb); i++) if (i % 3 == 1) v[i] = -v[i];
            tu_from_f64(b, v);
            free(v);
        } else {
            tu_fill_uniform(b, -2, 2);
        }
        double * x = tu_to_f64(a);
        double * y = tu_to_f64(b);
        struct kiln_tensor * r = bbuild(ctx, op, a, b, inplace, cast);
        if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { free(x); free(y); kiln_free(ctx); break; }
        const enum kiln_type tr = op == B_ADD_CAST ? cast : ta;
        CHECK(r->type == tr && kiln_are_same_shape(r, a), "result type/shape");
        if (inplace) CHECK(r->data == a->data && r->view_src, "in-place result is a view of a");
        enum kiln_status st = tu_compute(ctx, r, ec_threads[t]);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { free(x); free(y); kiln_free(ctx); break; }
        double * out = tu_to_f64(r);
        double * ref = (double *) malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        for (int64_t i = 0; i < n; i++) {
            const int64_t i0 = i % nea[0], i1 = (i / nea[0]) % nea[1], i2 = (i / (nea[0] * nea[1])) % nea[2], i3 = i / (nea[0] * nea[1] * nea[2]);
            const int64_t j = (i0 % neb[0]) + neb[0] * ((i1 % neb[1]) + neb[1] * ((i2 % neb[2]) + neb[2] * (i3 % neb[3])));
            ref[i] = bref(op, x[i], y[j]);
        }
        const double e = tu_nmse(out, ref, n);
        CHECK(e <= ec_thr(tr, op == B_SILU_BACK), "nmse %g with %d threads", e, ec_threads[t]);
        ec_bits_check(&bits, out, n, ec_threads[t]);
        free(x); free(y); free(out); free(ref);
        kiln_free(ctx);
    }
    ec_bits_free(&bits);
}

static void test_binary(void) {
    static const int64_t A[4] = { 7, 5, 3, 2 };
    static const int64_t B[][4] = {
        { 7, 5, 3, 2 }, { 1, 5, 3, 2 }, { 7, 1, 3, 2 }, { 7, 5, 1, 2 }, { 7, 5, 3, 1 }, { 1, 1, 1, 1 }, { 7, 1, 1, 1 }, { 1, 5, 1, 2 },
    };
    static const enum kiln_type TA[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_BF16, KILN_TYPE_F32 };
    static const enum kiln_type TB[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_F32, KILN_TYPE_BF16, KILN_TYPE_F32, KILN_TYPE_F16 };
    for (int op = B_ADD; op <= B_DIV; op++) {
        /* broadcasting in every dim, f32 */
        for (int b = 0; b < 8; b++) run2(op, KILN_TYPE_F32, KILN_TYPE_F32, A, B[b], EC_CONT, EC_CONT, false, 0);
        /* type combinations */
        for (int t = 1; t < 6; t++) run2(op, TA[t], TB[t], A, B[t % 2 ? 0 : 1], EC_CONT, EC_CONT, false, 0);
        /* non-contiguous a and b */
        for (int l = 1; l < EC_LAYOUTS; l++) {
            run2(op, KILN_TYPE_F32, KILN_TYPE_F32, A, B[0], l, (l + 1) % EC_LAYOUTS, false, 0);
            run2(op, KILN_TYPE_F16, KILN_TYPE_F32, A, B[2], l, l, false, 0);
        }
        /* in place */
        run2(op, KILN_TYPE_F32, KILN_TYPE_F32, A, B[1], EC_CONT, EC_CONT, true, 0);
        run2(op, KILN_TYPE_F32, KILN_TYPE_F32, A, B[3], EC_TRANS, EC_CONT, true, 0);
        run2(op, KILN_TYPE_BF16, KILN_TYPE_F32, A, B[6], EC_CONT, EC_PERM, true, 0);
    }
    /* long rows, odd sizes */
    static const int64_t L[4] = { 65537, 2, 1, 1 }, L1[4] = { 65537, 1, 1, 1 }, L2[4] = { 1, 2, 1, 1 };
    run2(B_ADD, KILN_TYPE_F32, KILN_TYPE_F32, L, L1, EC_CONT, EC_CONT, false, 0);
    run2(B_MUL, KILN_TYPE_F32, KILN_TYPE_F32, L, L2, EC_CONT, EC_CONT, false, 0);
    run2(B_SUB, KILN_TYPE_F16, KILN_TYPE_F32, L, L, EC_CONT, EC_PADDED, false, 0);
    static const int64_t O[4] = { 33, 1, 1, 1 }, O1[4] = { 1, 7, 1, 1 }, O2[4] = { 1, 1, 1, 1 };
    run2(B_DIV, KILN_TYPE_F32, KILN_TYPE_F32, O, O2, EC_CONT, EC_CONT, false, 0);
    run2(B_ADD, KILN_TYPE_F32, KILN_TYPE_F32, O1, O2, EC_TRANS, EC_CONT, false, 0);

    /* silu_back (same shapes), add1 (scalar b), add_cast (result type) */
    for (int t = 0; t < 6; t++) run2(B_SILU_BACK, TA[t], TA[t], A, A, EC_CONT, EC_CONT, false, 0);
    run2(B_SILU_BACK, KILN_TYPE_F32, KILN_TYPE_F32, A, A, EC_PERM, EC_TRANS, false, 0);
    static const int64_t S[4] = { 1, 1, 1, 1 };
    for (int t = 0; t < 6; t++) run2(B_ADD1, TA[t], TB[t], A, S, t % 2 ? EC_TRANS : EC_CONT, EC_CONT, t == 3, 0);
    run2(B_ADD_CAST, KILN_TYPE_F16, KILN_TYPE_F32, A, B[1 + 1], EC_CONT, EC_CONT, false, KILN_TYPE_F32);
    run2(B_ADD_CAST, KILN_TYPE_F32, KILN_TYPE_F32, A, B[0], EC_CONT, EC_CONT, false, KILN_TYPE_BF16);
    run2(B_ADD_CAST, KILN_TYPE_BF16, KILN_TYPE_F16, A, B[4], EC_PERM, EC_CONT, false, KILN_TYPE_F16);
}

/* ------------------------------------------------------------ acc/set */

enum { W_ACC, W_SET, W_SET_1D, W_SET_2D };

static void run_write(int kind, enum kiln_type type, const int64_t nea[4], const int64_t neb[4], int nb1_rows, size_t offset_elems, bool inplace) {
    snprintf(case_name, sizeof case_name, "%s%s %s [%lld,%lld,%lld] <- [%lld,%lld,%lld] off %zu",
             kind == W_ACC ? "acc" : kind == W_SET ? "set" : kind == W_SET_1D ? "set_1d" : "set_2d", inplace ? "_inplace" : "",
             kiln_type_name(type), (long long) nea[0], (long long) nea[1], (long long) nea[2],
             (long long) neb[0], (long long) neb[1], (long long) neb[2], offset_elems);
    tu_case = case_name;
    ec_cases++;
    struct ec_bits bits = { 0 };
    const int64_t n = ec_nel(nea);
    for (int t = 0; t < 3; t++) {
        struct kiln_context * ctx = tu_ctx((size_t) n * 64 + (1 << 20));
        tu_seed(4242);
        struct kiln_tensor * a = ec_new(ctx, type, nea, EC_CONT);
        struct kiln_tensor * b = ec_new(ctx, type, neb, EC_CONT);
        tu_fill_uniform(a, -50, 50);
        tu_fill_uniform(b, -50, 50);
        double * x = tu_to_f64(a);
        double * y = tu_to_f64(b);
        const size_t esz = kiln_type_size(type);
        size_t nb1 = a->nb[1] * (size_t) nb1_rows, nb2 = a->nb[2], nb3 = a->nb[3];
        const size_t off = offset_elems * esz;
        struct kiln_tensor * r = NULL;
        switch (kind) {
            case W_ACC: r = inplace ? kiln_acc_inplace(ctx, a, b, nb1, nb2, nb3, off) : kiln_acc(ctx, a, b, nb1, nb2, nb3, off); break;
            case W_SET: r = inplace ? kiln_set_inplace(ctx, a, b, nb1, nb2, nb3, off) : kiln_set(ctx, a, b, nb1, nb2, nb3, off); break;
            case W_SET_1D: nb1 = a->nb[1]; r = inplace ? kiln_set_1d_inplace(ctx, a, b, off) : kiln_set_1d(ctx, a, b, off); break;
            case W_SET_2D: r = inplace ? kiln_set_2d_inplace(ctx, a, b, nb1, off) : kiln_set_2d(ctx, a, b, nb1, off); break;
        }
        if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { free(x); free(y); kiln_free(ctx); break; }
        CHECK(r->op_params[0] == (int32_t) nb1 && r->op_params[3] == (int32_t) off && r->op_params[4] == (inplace ? 1 : 0), "op_params layout");
        if (!CHECK(tu_compute(ctx, r, ec_threads[t]) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { free(x); free(y); kiln_free(ctx); break; }
        double * out = tu_to_f64(r);
        double * ref = (double *) malloc(sizeof(double) * (size_t) n);
        memcpy(ref, x, sizeof(double) * (size_t) n);
        for (int64_t j = 0; j < ec_nel(neb); j++) {
            const int64_t j0 = j % neb[0], j1 = (j / neb[0]) % neb[1], j2 = (j / (neb[0] * neb[1])) % neb[2], j3 = j / (neb[0] * neb[1] * neb[2]);
            const size_t byte = off + (size_t) j0 * esz + (size_t) j1 * nb1 + (size_t) j2 * nb2 + (size_t) j3 * nb3;
            const int64_t k = (int64_t)(byte / esz);
            ref[k] = kind == W_ACC ? ec_round(type, ref[k] + y[j]) : y[j];
        }
        const double e = tu_nmse(out, ref, n);
        CHECK(e <= 1e-14, "nmse %g with %d threads", e, ec_threads[t]);
        ec_bits_check(&bits, out, n, ec_threads[t]);
        if (!inplace) {
            double * x2 = tu_to_f64(a);
            CHECK(memcmp(x, x2, sizeof(double) * (size_t) n) == 0, "a is unchanged by the non-inplace op");
            free(x2);
        }
        free(x); free(y); free(out); free(ref);
        kiln_free(ctx);
    }
    ec_bits_free(&bits);
}

static void test_acc_set(void) {
    static const int64_t A[4] = { 8, 6, 3, 1 }, B[4] = { 3, 2, 2, 1 }, B1[4] = { 13, 1, 1, 1 }, A4[4] = { 5, 4, 3, 2 }, B4[4] = { 2, 2, 2, 2 };
    for (int ip = 0; ip < 2; ip++) {
        run_write(W_ACC, KILN_TYPE_F32, A, B, 1, 10, ip);
        run_write(W_ACC, KILN_TYPE_F32, A, B, 2, 3, ip);
        run_write(W_ACC, KILN_TYPE_F32, A4, B4, 1, 1, ip);
        run_write(W_SET, KILN_TYPE_F32, A, B, 1, 10, ip);
        run_write(W_SET, KILN_TYPE_I32, A, B, 2, 0, ip);
        run_write(W_SET, KILN_TYPE_F16, A4, B4, 1, 2, ip);
        run_write(W_SET_1D, KILN_TYPE_F32, A, B1, 1, 5, ip);
        run_write(W_SET_1D, KILN_TYPE_BF16, A, B1, 1, 0, ip);
        run_write(W_SET_2D, KILN_TYPE_F32, A, B, 2, 1, ip);
        run_write(W_SET_2D, KILN_TYPE_I16, A, B, 1, 4, ip);
    }
}

/* ------------------------------------------------------- copy family */

enum { C_DUP, C_CPY, C_CONT, C_CAST, C_CONT_SHAPE };

static void run_copy(int kind, enum kiln_type ts, enum kiln_type td, const int64_t ne[4], int ls, const int64_t ned[4], int ld) {
    snprintf(case_name, sizeof case_name, "%s %s[%lld,%lld,%lld,%lld] %s -> %s[%lld,%lld,%lld,%lld] %s",
             kind == C_DUP ? "dup" : kind == C_CPY ? "cpy" : kind == C_CONT ? "cont" : kind == C_CAST ? "cast" : "cont_nd",
             kiln_type_name(ts), (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3], ec_layout_names[ls],
             kiln_type_name(td), (long long) ned[0], (long long) ned[1], (long long) ned[2], (long long) ned[3], ec_layout_names[ld]);
    tu_case = case_name;
    ec_cases++;
    struct ec_bits bits = { 0 };
    const int64_t n = ec_nel(ne);
    const bool ints = !(ts == KILN_TYPE_F32 || ts == KILN_TYPE_F16 || ts == KILN_TYPE_BF16 || ts == KILN_TYPE_F64);
    for (int t = 0; t < 3; t++) {
        struct kiln_context * ctx = tu_ctx((size_t) n * 80 + (1 << 20));
        tu_seed(777);
        struct kiln_tensor * a = ec_new(ctx, ts, ne, ls);
        tu_fill_uniform(a, ints ? -100.0f : -120.5f, ints ? 100.0f : 120.5f);
        double * x = tu_to_f64(a);
        struct kiln_tensor * r = NULL;
        switch (kind) {
            case C_DUP:  r = kiln_dup(ctx, a); break;
            case C_CPY:  r = kiln_cpy(ctx, a, ec_new(ctx, td, ned, ld)); break;
            case C_CONT: r = kiln_cont(ctx, a); break;
            case C_CAST: r = kiln_cast(ctx, a, td); break;
            case C_CONT_SHAPE:
                if (ned[3] > 1) r = kiln_cont_4d(ctx, a, ned[0], ned[1], ned[2], ned[3]);
                else if (ned[2] > 1) r = kiln_cont_3d(ctx, a, ned[0], ned[1], ned[2]);
                else if (ned[1] > 1) r = kiln_cont_2d(ctx, a, ned[0], ned[1]);
                else r = kiln_cont_1d(ctx, a, ned[0]);
                break;
        }
        if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { free(x); kiln_free(ctx); break; }
        CHECK(r->type == td && r->ne[0] == ned[0] && r->ne[1] == ned[1] && r->ne[2] == ned[2] && r->ne[3] == ned[3], "result type/shape");
        if (kind == C_CONT || kind == C_CONT_SHAPE || kind == C_CAST) CHECK(kiln_is_contiguous(r), "result is contiguous");
        if (!CHECK(tu_compute(ctx, r, ec_threads[t]) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { free(x); kiln_free(ctx); break; }
        double * out = tu_to_f64(r);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) {
            const double want = ec_round(td, x[i]);
            if (!(out[i] == want)) bad++;
        }
        CHECK(bad == 0, "%d of %lld elements differ from the exact conversion (%d threads)", bad, (long long) n, ec_threads[t]);
        ec_bits_check(&bits, out, n, ec_threads[t]);
        free(x); free(out);
        kiln_free(ctx);
    }
    ec_bits_free(&bits);
}

static void test_copy(void) {
    static const int64_t S[4] = { 7, 5, 3, 2 };
    static const enum kiln_type F[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_I32 };
    /* every conversion between f32, f16, bf16, i32, from a permuted source into contiguous and transposed destinations */
    for (int s = 0; s < 4; s++) {
        for (int d = 0; d < 4; d++) {
            run_copy(C_CPY, F[s], F[d], S, EC_PERM, S, EC_CONT);
            run_copy(C_CPY, F[s], F[d], S, EC_CONT, S, EC_TRANS);
            if (s != d) run_copy(C_CAST, F[s], F[d], S, EC_PADDED, S, EC_CONT);
        }
    }
    /* same-type copies of every element type, any layout */
    static const enum kiln_type ALL[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_I8, KILN_TYPE_I16, KILN_TYPE_I32, KILN_TYPE_I64, KILN_TYPE_F64 };
    for (int i = 0; i < 8; i++) {
        run_copy(C_DUP, ALL[i], ALL[i], S, EC_PERM, S, EC_CONT);
        run_copy(C_CONT, ALL[i], ALL[i], S, EC_TRANS, S, EC_CONT);
        run_copy(C_CPY, ALL[i], ALL[i], S, EC_PADDED, S, EC_PERM);
    }
    /* wider and narrower integer conversions, f64 */
    run_copy(C_CPY, KILN_TYPE_I32, KILN_TYPE_I64, S, EC_CONT, S, EC_CONT);
    run_copy(C_CPY, KILN_TYPE_I64, KILN_TYPE_I16, S, EC_TRANS, S, EC_CONT);
    run_copy(C_CPY, KILN_TYPE_F64, KILN_TYPE_F32, S, EC_CONT, S, EC_PERM);
    run_copy(C_CAST, KILN_TYPE_F32, KILN_TYPE_F64, S, EC_CONT, S, EC_CONT);
    run_copy(C_CAST, KILN_TYPE_F32, KILN_TYPE_I8, S, EC_TRANS, S, EC_CONT);
    /* reshaping copies: the element order is logical row-major */
    static const int64_t R2[4] = { 15, 14, 1, 1 }, R1[4] = { 210, 1, 1, 1 }, R3[4] = { 6, 5, 7, 1 }, R4[4] = { 3, 5, 7, 2 };
    run_copy(C_CONT_SHAPE, KILN_TYPE_F32, KILN_TYPE_F32, S, EC_TRANS, R2, EC_CONT);
    run_copy(C_CONT_SHAPE, KILN_TYPE_F16, KILN_TYPE_F16, S, EC_PERM, R1, EC_CONT);
    run_copy(C_CONT_SHAPE, KILN_TYPE_I32, KILN_TYPE_I32, S, EC_PADDED, R3, EC_CONT);
    run_copy(C_CONT_SHAPE, KILN_TYPE_F32, KILN_TYPE_F32, S, EC_CONT, R4, EC_CONT);
    run_copy(C_CPY, KILN_TYPE_F32, KILN_TYPE_F16, S, EC_PERM, R2, EC_TRANS);
    run_copy(C_CPY, KILN_TYPE_I32, KILN_TYPE_F32, S, EC_TRANS, R3, EC_PADDED);
    run_copy(C_CPY, KILN_TYPE_BF16, KILN_TYPE_BF16, S, EC_TRANS, R2, EC_PERM);
    /* into a contiguous destination of another shape, converting (as a KV
     * cache row is written): each source row lands at its flat offset */
    run_copy(C_CPY, KILN_TYPE_F32, KILN_TYPE_F16, S, EC_PERM, R2, EC_CONT);
    run_copy(C_CPY, KILN_TYPE_F16, KILN_TYPE_F32, S, EC_PADDED, R3, EC_CONT);
    run_copy(C_CPY, KILN_TYPE_I32, KILN_TYPE_F32, S, EC_TRANS, R1, EC_CONT);
    /* long row */
    static const int64_t L[4] = { 65537, 2, 1, 1 };
    run_copy(C_CPY, KILN_TYPE_F32, KILN_TYPE_F16, L, EC_CONT, L, EC_CONT);
    run_copy(C_CONT, KILN_TYPE_F32, KILN_TYPE_F32, L, EC_PADDED, L, EC_CONT);
}

/* copies into quantized types: through from_float where the type has one,
 * else a clean UNSUPPORTED with a message */
static void test_copy_quant(void) {
    tu_case = "cpy f32 -> quantized";
    static const enum kiln_type Q[] = { KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q4_K, KILN_TYPE_IQ2_XXS };
    for (int q = 0; q < 4; q++) {
        struct kiln_context * ctx = tu_ctx(1 << 22);
        const int64_t ne0 = 512;
        struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne0, 3);
        tu_fill_uniform(a, -1, 1);
        struct kiln_tensor * b = kiln_new_tensor_2d(ctx, Q[q], ne0, 3);
        struct kiln_tensor * r = kiln_cpy(ctx, a, b);
        CHECK(r != NULL, "cpy to %s builds", kiln_type_name(Q[q]));
        const struct kiln_type_traits * tt = kiln_get_type_traits(Q[q]);
        enum kiln_status st = tu_compute(ctx, r, 2);
        if (!tt->from_float_ref) {
            CHECK(st == KILN_STATUS_UNSUPPORTED && strstr(kiln_last_error(), kiln_type_name(Q[q])), "unsupported %s: %s",
                  kiln_type_name(Q[q]), kiln_last_error());
        } else {
            CHECK(st == KILN_STATUS_SUCCESS, "cpy to %s: %s", kiln_type_name(Q[q]), kiln_last_error());
            if (tt->to_float) {
                /* round trip back to f32 (the dequantizing path of cpy) */
                struct kiln_tensor * back = kiln_cpy(ctx, b, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne0, 3));
                CHECK(tu_compute(ctx, back, 2) == KILN_STATUS_SUCCESS, "dequantize: %s", kiln_last_error());
                double * x = tu_to_f64(a), * y = tu_to_f64(back);
                const double e = tu_nmse(y, x, ne0 * 3);
                CHECK(e < 2e-2, "%s round trip nmse %g", kiln_type_name(Q[q]), e);
                free(x); free(y);
            }
        }
        kiln_free(ctx);
    }
}

/* add with a quantized src0 (add_cast to f32, and add keeping the quantized type) */
static void test_add_quant(void) {
    static const enum kiln_type Q[] = { KILN_TYPE_Q8_0, KILN_TYPE_Q4_K };
    for (int q = 0; q < 2; q++) {
        const struct kiln_type_traits * tt = kiln_get_type_traits(Q[q]);
        snprintf(case_name, sizeof case_name, "add %s + f32", kiln_type_name(Q[q]));
        tu_case = case_name;
        if (!tt->to_float || !tt->from_float_ref) continue;
        for (int t = 0; t < 3; t++) {
            struct kiln_context * ctx = tu_ctx(1 << 22);
            const int64_t ne0 = 512, ne1 = 3;
            float src[512 * 3], deq[512 * 3];
            tu_seed(5);
            for (int i = 0; i < ne0 * ne1; i++) src[i] = tu_rand_uniform(-1, 1);
            struct kiln_tensor * a = kiln_new_tensor_2d(ctx, Q[q], ne0, ne1);
            tt->from_float_ref(src, a->data, ne0 * ne1);
            tt->to_float(a->data, deq, ne0 * ne1);
            struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne0, 1);
            tu_fill_uniform(b, -1, 1);
            struct kiln_tensor * rc = kiln_add_cast(ctx, a, b, KILN_TYPE_F32);
            struct kiln_tensor * rq = kiln_add(ctx, a, b);
            CHECK(rc && rq && rc->type == KILN_TYPE_F32 && rq->type == Q[q], "types");
            struct kiln_cgraph * g = kiln_new_graph(ctx);
            kiln_build_forward_expand(g, rc);
            kiln_build_forward_expand(g, rq);
            if (!CHECK(kiln_graph_compute_with_ctx(ctx, g, ec_threads[t]) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { kiln_free(ctx); break; }
            double * ref = (double *) malloc(sizeof(double) * (size_t)(ne0 * ne1));
            double * outc = tu_to_f64(rc);
            for (int64_t i = 0; i < ne0 * ne1; i++) ref[i] = (double) deq[i] + kiln_get_f32_1d(b, (int) (i % ne0));
            CHECK(tu_nmse(outc, ref, ne0 * ne1) < 1e-12, "add_cast to f32 = dequantized a + b (%d threads)", ec_threads[t]);
            float back[512 * 3];
            tt->to_float(rq->data, back, ne0 * ne1);
            double * outq = (double *) malloc(sizeof(double) * (size_t)(ne0 * ne1));
            for (int64_t i = 0; i < ne0 * ne1; i++) outq[i] = back[i];
            const double e = tu_nmse(outq, ref, ne0 * ne1);
            CHECK(e < (q == 0 ? 1e-4 : 1e-2), "add into %s: nmse %g", kiln_type_name(Q[q]), e);
            free(ref); free(outc); free(outq);
            kiln_free(ctx);
        }
    }
}

static void test_dup_inplace(void) {
    tu_case = "dup_inplace";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    static const int64_t S[4] = { 7, 5, 3, 1 };
    struct kiln_tensor * a = ec_new(ctx, KILN_TYPE_F16, S, EC_TRANS);
    tu_fill_uniform(a, -1, 1);
    double * x = tu_to_f64(a);
    struct kiln_tensor * r = kiln_dup_inplace(ctx, a);
    CHECK(r && r->data == a->data && kiln_are_same_stride(r, a), "view of a");
    CHECK(tu_compute(ctx, r, 4) == KILN_STATUS_SUCCESS, "compute");
    double * y = tu_to_f64(r);
    CHECK(memcmp(x, y, sizeof(double) * 105) == 0, "values unchanged");
    free(x); free(y);
    kiln_free(ctx);
}

/* ------------------------------------------------------- custom maps */

static volatile int g_calls[8];
static void custom1_double(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * ud) {
    const float k = *(const float *) ud;
    g_calls[ith] = nth;
    const int64_t n = kiln_nelements(dst);
    for (int64_t i = ith; i < n; i += nth) ((float *) dst->data)[i] = k * ((const float *) a->data)[i];
}
static void custom2_add(struct kiln_tensor * dst, const struct kiln_tensor * a, const struct kiln_tensor * b, int ith, int nth, void * ud) {
    (void) ud;
    g_calls[ith] = nth;
    const int64_t n = kiln_nelements(dst);
    for (int64_t i = ith; i < n; i += nth) ((float *) dst->data)[i] = ((const float *) a->data)[i] + ((const float *) b->data)[i];
}
static void custom3_fma(struct kiln_tensor * dst, const struct kiln_tensor * a, const struct kiln_tensor * b, const struct kiln_tensor * c, int ith, int nth, void * ud) {
    (void) ud;
    g_calls[ith] = nth;
    const int64_t n = kiln_nelements(dst);
    for (int64_t i = ith; i < n; i += nth)
        ((float *) dst->data)[i] = ((const float *) a->data)[i] * ((const float *) b->data)[i] + ((const float *) c->data)[i];
}

static void test_custom(void) {
    static const int tasks[] = { 1, 2, 3, KILN_N_TASKS_MAX };
    float k = 3.0f;
    for (int ti = 0; ti < 4; ti++) {
        for (int which = 1; which <= 3; which++) {
            for (int ip = 0; ip < 2; ip++) {
                snprintf(case_name, sizeof case_name, "map_custom%d%s n_tasks %d", which, ip ? "_inplace" : "", tasks[ti]);
                tu_case = case_name;
                struct kiln_context * ctx = tu_ctx(1 << 20);
                struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 37, 3);
                struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 37, 3);
                struct kiln_tensor * c = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 37, 3);
                tu_fill_uniform(a, -1, 1); tu_fill_uniform(b, -1, 1); tu_fill_uniform(c, -1, 1);
                double * x = tu_to_f64(a), * y = tu_to_f64(b), * z = tu_to_f64(c);
                struct kiln_tensor * r =
                    which == 1 ? (ip ? kiln_map_custom1_inplace(ctx, a, custom1_double, tasks[ti], &k) : kiln_map_custom1(ctx, a, custom1_double, tasks[ti], &k)) :
                    which == 2 ? (ip ? kiln_map_custom2_inplace(ctx, a, b, custom2_add, tasks[ti], NULL) : kiln_map_custom2(ctx, a, b, custom2_add, tasks[ti], NULL)) :
                                 (ip ? kiln_map_custom3_inplace(ctx, a, b, c, custom3_fma, tasks[ti], NULL) : kiln_map_custom3(ctx, a, b, c, custom3_fma, tasks[ti], NULL));
                if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { kiln_free(ctx); continue; }
                CHECK(ip ? r->data == a->data : r->data != a->data, "in-place is a view");
                for (int i = 0; i < 8; i++) g_calls[i] = 0;
                CHECK(tu_compute(ctx, r, 4) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error());
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
                const int pool = 1; /* wasm without pthreads: every job runs on one thread */
#else
                const int pool = 4;
#endif
                const int want = tasks[ti] == KILN_N_TASKS_MAX || tasks[ti] > pool ? pool : tasks[ti];
                int ok = 1;
                for (int i = 0; i < 8; i++) ok &= g_calls[i] == (i < want ? want : 0);
                CHECK(ok, "called by exactly %d tasks with nth = %d", want, want);
                double * o = tu_to_f64(r);
                double worst = 0;
                for (int i = 0; i < 111; i++) {
                    const double want_v = which == 1 ? (float) (3.0 * x[i]) : which == 2 ? (float) (x[i] + y[i]) : (float) (x[i] * y[i] + z[i]);
                    worst = fmax(worst, fabs(o[i] - want_v));
                }
                CHECK(worst < 1e-6, "values (max diff %g)", worst);
                free(x); free(y); free(z); free(o);
                kiln_free(ctx);
            }
        }
    }
}

/* --------------------------------------------------------- edge cases */

static void test_empty(void) {
    tu_case = "empty";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 0, 2);
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 1, 0, 1);
    struct kiln_tensor * r = kiln_add(ctx, kiln_mul(ctx, a, b), a);
    CHECK(r != NULL, "empty binary builds: %s", kiln_last_error());
    struct kiln_tensor * c = kiln_cpy(ctx, r, kiln_new_tensor_1d(ctx, KILN_TYPE_F16, 0));
    struct kiln_tensor * d = kiln_cont(ctx, kiln_transpose(ctx, a));
    CHECK(c && d, "empty copies build");
    CHECK(tu_compute(ctx, c, 4) == KILN_STATUS_SUCCESS && tu_compute(ctx, d, 4) == KILN_STATUS_SUCCESS, "empty compute");
    kiln_free(ctx);
}

static void test_nonfinite(void) {
    tu_case = "nan/inf";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    const float xs[4] = { 1.0f, -1.0f, 0.0f, NAN };
    struct kiln_tensor * a = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    struct kiln_tensor * z = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1);
    memcpy(a->data, xs, sizeof xs);
    kiln_set_f32(z, 0.0f);
    struct kiln_tensor * q = kiln_div(ctx, a, z);
    struct kiln_tensor * h = kiln_cast(ctx, kiln_scale(ctx, a, 1e6f), KILN_TYPE_F16);
    CHECK(tu_compute(ctx, q, 2) == KILN_STATUS_SUCCESS && tu_compute(ctx, h, 2) == KILN_STATUS_SUCCESS, "compute");
    const float * Q = (const float *) q->data;
    CHECK(isinf(Q[0]) && Q[0] > 0 && isinf(Q[1]) && Q[1] < 0 && isnan(Q[2]) && isnan(Q[3]), "x/0: +-inf, 0/0 nan, nan/0 nan");
    CHECK(isinf(kiln_get_f32_1d(h, 0)) && isinf(kiln_get_f32_1d(h, 1)) && isnan(kiln_get_f32_1d(h, 3)), "f16 cast overflows to inf, keeps nan");
    kiln_free(ctx);
}

static void nop1(struct kiln_tensor * d, const struct kiln_tensor * a, int ith, int nth, void * ud) { (void) d; (void) a; (void) ith; (void) nth; (void) ud; }

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 7, 5);
    struct kiln_tensor * b3 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 5);
    struct kiln_tensor * ai = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 7, 5);
    struct kiln_tensor * a16 = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 7, 5);
    struct kiln_tensor * s = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1);
    struct kiln_tensor * small = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 3);
    struct kiln_tensor * big = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 5);
#define BAD(expr, needle) do { kiln_clear_error(); CHECK((expr) == NULL && strstr(kiln_last_error(), needle) != NULL, \
        "%s -> NULL with '%s' (got '%s')", #expr, needle, kiln_last_error()); } while (0)
    BAD(kiln_add(ctx, NULL, a), "NULL");
    BAD(kiln_add(ctx, a, NULL), "NULL");
    BAD(kiln_sub(ctx, a, b3), "does not broadcast");
    BAD(kiln_mul(ctx, b3, a), "does not broadcast");
    BAD(kiln_div(ctx, ai, a), "i32");
    BAD(kiln_add(ctx, a, ai), "i32");
    BAD(kiln_add_inplace(ctx, a, big), "does not broadcast");
    BAD(kiln_mul_inplace(ctx, NULL, a), "NULL");
    BAD(kiln_div_inplace(ctx, a, b3), "broadcast");
    BAD(kiln_sub_inplace(ctx, ai, a), "i32");
    BAD(kiln_add1(ctx, a, a), "scalar");
    BAD(kiln_add1_inplace(ctx, a, ai), "i32");
    BAD(kiln_add_cast(ctx, a, b3, KILN_TYPE_F32), "rows differ");
    BAD(kiln_add_cast(ctx, a, a, (enum kiln_type) 4), "result type");
    BAD(kiln_silu_back(ctx, a, b3), "shapes differ");
    BAD(kiln_silu_back(ctx, ai, ai), "i32");
    BAD(kiln_acc(ctx, a16, s, a16->nb[1], a16->nb[2], a16->nb[3], 0), "f16");
    BAD(kiln_acc(ctx, a, b3, a->nb[1], a->nb[2], a->nb[3], 5 * sizeof(float)), "past");
    BAD(kiln_acc(ctx, a, big, a->nb[1], a->nb[2], a->nb[3], 0), "more elements");
    BAD(kiln_acc(ctx, kiln_transpose(ctx, a), small, 20, 140, 140, 0), "contiguous");
    BAD(kiln_set(ctx, a, ai, a->nb[1], a->nb[2], a->nb[3], 0), "i32");
    BAD(kiln_set_1d(ctx, a, small, 33 * sizeof(float)), "past");
    BAD(kiln_set_2d(ctx, a, b3, 1u << 31, 0), "int32");
    BAD(kiln_set_inplace(ctx, NULL, s, 0, 0, 0, 0), "NULL");
    BAD(kiln_cpy(ctx, a, b3), "element counts");
    BAD(kiln_cpy(ctx, NULL, a), "NULL");
    BAD(kiln_cast(ctx, a, (enum kiln_type) 5), "invalid type");
    BAD(kiln_cont_2d(ctx, a, 6, 6), "elements");
    BAD(kiln_cont_4d(ctx, a, -35, -1, 1, 1), "negative");
    BAD(kiln_cont(ctx, NULL), "NULL");
    BAD(kiln_dup(ctx, NULL), "NULL");
    BAD(kiln_map_custom1(ctx, a, NULL, 1, NULL), "function is NULL");
    BAD(kiln_map_custom1(ctx, a, nop1, 0, NULL), "n_tasks");
    BAD(kiln_map_custom2(ctx, a, NULL, NULL, 1, NULL), "NULL");
    BAD(kiln_map_custom3_inplace(ctx, a, a, NULL, NULL, 1, NULL), "NULL");
#undef BAD
    /* a kernel meeting an unsupported combination reports it at compute */
    struct kiln_tensor * q = kiln_new_tensor_1d(ctx, KILN_TYPE_Q4_0, 32);
    struct kiln_tensor * cq = kiln_cpy(ctx, q, kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 32));
    CHECK(cq && tu_compute(ctx, cq, 1) == KILN_STATUS_UNSUPPORTED && strstr(kiln_last_error(), "q4_0"), "q4_0 -> i32 unsupported: %s", kiln_last_error());
    kiln_free(ctx);
}

int main(void) {
    test_binary();
    /* add/mul/f16 conversions go through the kernel table: again with the scalar kernels */
    if (strcmp(kiln_cpu_isa(), "scalar") != 0) {
        kiln_cpu_force_isa("scalar");
        static const int64_t A[4] = { 33, 5, 3, 2 }, B[4] = { 33, 1, 3, 1 };
        for (int op = B_ADD; op <= B_DIV; op++) {
            run2(op, KILN_TYPE_F32, KILN_TYPE_F32, A, B, EC_CONT, EC_CONT, false, 0);
            run2(op, KILN_TYPE_F16, KILN_TYPE_F16, A, B, EC_CONT, EC_PERM, false, 0);
        }
        kiln_cpu_force_isa("auto");
    }
    test_acc_set();
    test_copy();
    test_copy_quant();
    test_add_quant();
    test_dup_inplace();
    test_custom();
    test_empty();
    test_nonfinite();
    test_bad_input();
    printf("%d op cases\n", ec_cases);
    return tu_finish();
}
