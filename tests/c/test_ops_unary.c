/*
 * test_ops_unary.c — one-input elementwise ops (sqr, sqrt, log, sin, cos,
 * scale, clamp, leaky_relu, the 14 UNARY ops) against double references:
 * F32/F16/BF16, several shapes and layouts, in-place twins, 1/2/4 threads
 * (bit-identical), NaN/Inf behaviour, large rows, empty tensors, bad input.
 */
#include "util/elem_check.h"

struct op1 {
    const char * name;
    int kind;     /* 0 = math op, 1 = unary op id, 2 = scale, 3 = clamp, 4 = leaky_relu */
    int id;       /* enum kiln_op or enum kiln_unary_op */
    float lo, hi; /* input range */
    bool transcendental;
};

static const float P_SCALE = -0.75f, P_CMIN = -0.5f, P_CMAX = 0.8f, P_SLOPE = 0.1f;

static double ref1(const struct op1 * op, double x) {
    if (op->kind == 2) return x * (double) P_SCALE;
    if (op->kind == 3) return fmin(fmax(x, P_CMIN), P_CMAX);
    if (op->kind == 4) return x > 0 ? x : x * (double) P_SLOPE;
    if (op->kind == 0) {
        switch (op->id) {
            case KILN_OP_SQR:  return x * x;
            case KILN_OP_SQRT: return sqrt(x);
            case KILN_OP_LOG:  return log(x);
            case KILN_OP_SIN:  return sin(x);
            case KILN_OP_COS:  return cos(x);
        }
        return NAN;
    }
    switch (op->id) {
        case KILN_UNARY_OP_ABS:  return fabs(x);
        case KILN_UNARY_OP_SGN:  return x > 0 ? 1 : (x < 0 ? -1 : 0);
        case KILN_UNARY_OP_NEG:  return -x;
        case KILN_UNARY_OP_STEP: return x > 0 ? 1 : 0;
        case KILN_UNARY_OP_TANH: return tanh(x);
        case KILN_UNARY_OP_ELU:  return x > 0 ? x : exp(x) - 1;
        case KILN_UNARY_OP_RELU: return x > 0 ? x : 0;
        case KILN_UNARY_OP_SIGMOID: return 1 / (1 + exp(-x));
        case KILN_UNARY_OP_GELU: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case KILN_UNARY_OP_GELU_QUICK: return x / (1 + exp(-1.702 * x));
        case KILN_UNARY_OP_SILU: return x / (1 + exp(-x));
        case KILN_UNARY_OP_HARDSWISH: return x * fmin(1, fmax(0, (x + 3) / 6));
        case KILN_UNARY_OP_HARDSIGMOID: return fmin(1, fmax(0, (x + 3) / 6));
        case KILN_UNARY_OP_EXP: return exp(x);
    }
    return NAN;
}

static struct kiln_tensor * build1(struct kiln_context * ctx, const struct op1 * op, struct kiln_tensor * a, bool inplace) {
    switch (op->kind) {
        case 2: return inplace ? kiln_scale_inplace(ctx, a, P_SCALE) : kiln_scale(ctx, a, P_SCALE);
        case 3: return kiln_clamp(ctx, a, P_CMIN, P_CMAX);
        case 4: return kiln_leaky_relu(ctx, a, P_SLOPE, inplace);
        case 1: return inplace ? kiln_unary_inplace(ctx, a, (enum kiln_unary_op) op->id) : kiln_unary(ctx, a, (enum kiln_unary_op) op->id);
    }
    switch (op->id) {
        case KILN_OP_SQR:  return inplace ? kiln_sqr_inplace(ctx, a)  : kiln_sqr(ctx, a);
        case KILN_OP_SQRT: return inplace ? kiln_sqrt_inplace(ctx, a) : kiln_sqrt(ctx, a);
        case KILN_OP_LOG:  return inplace ? kiln_log_inplace(ctx, a)  : kiln_log(ctx, a);
        case KILN_OP_SIN:  return inplace ? kiln_sin_inplace(ctx, a)  : kiln_sin(ctx, a);
        case KILN_OP_COS:  return inplace ? kiln_cos_inplace(ctx, a)  : kiln_cos(ctx, a);
    }
    return NULL;
}

static const struct op1 OPS[] = {
    { "sqr",  0, KILN_OP_SQR,  -3, 3, false },
    { "sqrt", 0, KILN_OP_SQRT, 0.01f, 9, true },
    { "log",  0, KILN_OP_LOG,  0.01f, 9, true },
    { "sin",  0, KILN_OP_SIN,  -6, 6, true },
    { "cos",  0, KILN_OP_COS,  -6, 6, true },
    { "scale", 2, 0, -3, 3, false },
    { "clamp", 3, 0, -2, 2, false },
    { "leaky_relu", 4, 0, -3, 3, false },
    { "abs",  1, KILN_UNARY_OP_ABS,  -3, 3, false },
    { "sgn",  1, KILN_UNARY_OP_SGN,  -3, 3, false },
    { "neg",  1, KILN_UNARY_OP_NEG,  -3, 3, false },
    { "step", 1, KILN_UNARY_OP_STEP, -3, 3, false },
    { "tanh", 1, KILN_UNARY_OP_TANH, -4, 4, true },
    { "elu",  1, KILN_UNARY_OP_ELU,  -4, 4, true },
    { "relu", 1, KILN_UNARY_OP_RELU, -3, 3, false },
    { "sigmoid", 1, KILN_UNARY_OP_SIGMOID, -6, 6, true },
    { "gelu", 1, KILN_UNARY_OP_GELU, -5, 5, true },
    { "gelu_quick", 1, KILN_UNARY_OP_GELU_QUICK, -5, 5, true },
    { "silu", 1, KILN_UNARY_OP_SILU, -6, 6, true },
    { "hardswish", 1, KILN_UNARY_OP_HARDSWISH, -5, 5, false },
    { "hardsigmoid", 1, KILN_UNARY_OP_HARDSIGMOID, -5, 5, false },
    { "exp", 1, KILN_UNARY_OP_EXP, -5, 5, true },
};
#define N_OPS ((int) (sizeof(OPS) / sizeof(OPS[0])))

static char case_name[160];

/* one op, type, shape, layout: 1/2/4 threads, NMSE vs reference, bitwise agreement */
static void run1(const struct op1 * op, enum kiln_type type, const int64_t ne[4], int layout, bool inplace) {
    snprintf(case_name, sizeof case_name, "%s%s %s [%lld,%lld,%lld,%lld] %s", op->name, inplace ? "_inplace" : "",
             kiln_type_name(type), (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3], ec_layout_names[layout]);
    tu_case = case_name;
    ec_cases++;
    struct ec_bits bits = { 0 };
    const int64_t n = ec_nel(ne);
    for (int t = 0; t < 3; t++) {
        struct kiln_context * ctx = tu_ctx((size_t) n * 64 + (1 << 20));
        tu_seed(1234 + (uint64_t) op->id * 7 + (uint64_t) layout);
        struct kiln_tensor * a = ec_new(ctx, type, ne, layout);
        tu_fill_uniform(a, op->lo, op->hi);
        double * x = tu_to_f64(a);
        struct kiln_tensor * r = build1(ctx, op, a, inplace);
        if (!CHECK(r != NULL, "constructor failed: %s", kiln_last_error())) { free(x); kiln_free(ctx); break; }
        CHECK(r->type == type && kiln_are_same_shape(r, a), "result type/shape");
        if (inplace || op->kind == 3) CHECK(r->view_src != NULL && r->data == a->data, "in-place result is a view of a");
        enum kiln_status st = tu_compute(ctx, r, ec_threads[t]);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { free(x); kiln_free(ctx); break; }
        double * y = tu_to_f64(r);
        double * ref = (double *) malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        for (int64_t i = 0; i < n; i++) ref[i] = ref1(op, x[i]);
        const double e = tu_nmse(y, ref, n);
        CHECK(e <= ec_thr(type, op->transcendental), "nmse %g with %d threads", e, ec_threads[t]);
        ec_bits_check(&bits, y, n, ec_threads[t]);
        free(x); free(y); free(ref);
        kiln_free(ctx);
    }
    ec_bits_free(&bits);
}

static void test_all_ops(void) {
    static const int64_t shapes[][4] = {
        { 7, 5, 3, 2 }, { 1, 1, 1, 1 }, { 33, 4, 1, 1 },
    };
    static const enum kiln_type types[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };
    for (int o = 0; o < N_OPS; o++) {
        /* every type on a 4-D odd shape, contiguous */
        for (int t = 0; t < 3; t++) run1(&OPS[o], types[t], shapes[0], EC_CONT, false);
        /* every layout in f32, and one in f16 */
        for (int l = 1; l < EC_LAYOUTS; l++) run1(&OPS[o], KILN_TYPE_F32, shapes[0], l, false);
        run1(&OPS[o], KILN_TYPE_F16, shapes[2], EC_PERM, false);
        run1(&OPS[o], KILN_TYPE_F32, shapes[1], EC_CONT, false);
        /* the in-place twin, also on a non-contiguous view */
        if (!(OPS[o].kind == 1 && (OPS[o].id == KILN_UNARY_OP_HARDSWISH || OPS[o].id == KILN_UNARY_OP_HARDSIGMOID))) {
            run1(&OPS[o], KILN_TYPE_F32, shapes[2], EC_CONT, true);
            run1(&OPS[o], KILN_TYPE_BF16, shapes[0], EC_TRANS, true);
        }
    }
}

/* the named constructors build the right unary op */
static void test_named_ctors(void) {
    tu_case = "named unary constructors";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    struct kiln_tensor * (*fns[])(struct kiln_context *, struct kiln_tensor *) = {
        kiln_abs, kiln_sgn, kiln_neg, kiln_step, kiln_tanh, kiln_elu, kiln_relu, kiln_sigmoid,
        kiln_gelu, kiln_gelu_quick, kiln_silu, kiln_hardswish, kiln_hardsigmoid, kiln_exp };
    struct kiln_tensor * (*ifns[])(struct kiln_context *, struct kiln_tensor *) = {
        kiln_abs_inplace, kiln_sgn_inplace, kiln_neg_inplace, kiln_step_inplace, kiln_tanh_inplace, kiln_elu_inplace,
        kiln_relu_inplace, kiln_sigmoid_inplace, kiln_gelu_inplace, kiln_gelu_quick_inplace, kiln_silu_inplace, NULL, NULL, kiln_exp_inplace };
    for (int i = 0; i < KILN_UNARY_OP_COUNT; i++) {
        struct kiln_tensor * r = fns[i](ctx, a);
        CHECK(r && r->op == KILN_OP_UNARY && kiln_get_unary_op(r) == (enum kiln_unary_op) i && r->data != a->data,
              "constructor %d builds %s", i, kiln_unary_op_name((enum kiln_unary_op) i));
        if (ifns[i]) {
            struct kiln_tensor * ri = ifns[i](ctx, a);
            CHECK(ri && kiln_get_unary_op(ri) == (enum kiln_unary_op) i && ri->data == a->data, "in-place constructor %d", i);
        }
    }
    kiln_free(ctx);
}

/* large rows and odd sizes, F32 and F16, 1 vs 4 threads */
static void test_large(void) {
    static const int64_t shapes[][4] = { { 65537, 2, 1, 1 }, { 1, 1031, 1, 1 }, { 1025, 3, 1, 1 } };
    const struct op1 * picks[] = { &OPS[1], &OPS[12], &OPS[18], &OPS[5] }; /* sqrt, tanh, silu, scale */
    for (int s = 0; s < 3; s++) {
        for (int p = 0; p < 4; p++) run1(picks[p], s == 2 ? KILN_TYPE_F16 : KILN_TYPE_F32, shapes[s], EC_CONT, false);
    }
    run1(&OPS[16], KILN_TYPE_F32, shapes[0], EC_PADDED, false); /* gelu */
}

/* log of negatives is NaN, log(0) = -inf, exp overflows to inf, sqrt(-1) NaN; NaN flows through */
static void test_nonfinite(void) {
    tu_case = "nan/inf";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    const float xs[6] = { -1.0f, 0.0f, 100.0f, NAN, INFINITY, -INFINITY };
    struct kiln_tensor * a = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 6);
    memcpy(a->data, xs, sizeof xs);
    struct kiln_tensor * l = kiln_log(ctx, a);
    struct kiln_tensor * s = kiln_sqrt(ctx, a);
    struct kiln_tensor * e = kiln_exp(ctx, a);
    struct kiln_tensor * r = kiln_relu(ctx, a);
    struct kiln_tensor * sg = kiln_sigmoid(ctx, a);
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    kiln_build_forward_expand(g, l); kiln_build_forward_expand(g, s); kiln_build_forward_expand(g, e);
    kiln_build_forward_expand(g, r); kiln_build_forward_expand(g, sg);
    CHECK(kiln_graph_compute_with_ctx(ctx, g, 2) == KILN_STATUS_SUCCESS, "compute");
    const float * L = (const float *) l->data, * S = (const float *) s->data, * E = (const float *) e->data;
    const float * SG = (const float *) sg->data;
    CHECK(isnan(L[0]) && isinf(L[1]) && L[1] < 0 && isnan(L[3]) && isinf(L[4]) && L[4] > 0 && isnan(L[5]), "log: nan for x<0, -inf at 0, nan in -> nan out");
    CHECK(isnan(S[0]) && S[1] == 0 && isnan(S[3]) && isinf(S[4]), "sqrt of negative is nan");
    CHECK(isinf(E[2]) && isnan(E[3]) && isinf(E[4]) && E[5] == 0, "exp overflow -> inf, exp(-inf) = 0");
    CHECK(SG[4] == 1.0f && SG[5] == 0.0f && isnan(SG[3]), "sigmoid limits");
    kiln_free(ctx);
}

static void test_empty(void) {
    tu_case = "empty";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 0, 4, 2);
    struct kiln_tensor * r = kiln_gelu(ctx, kiln_sqr(ctx, kiln_scale(ctx, a, 2.0f)));
    CHECK(r && kiln_nelements(r) == 0, "empty result");
    CHECK(tu_compute(ctx, r, 4) == KILN_STATUS_SUCCESS, "empty compute: %s", kiln_last_error());
    kiln_free(ctx);
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * ai = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 4);
    struct kiln_tensor * aq = kiln_new_tensor_1d(ctx, KILN_TYPE_Q8_0, 32);
    struct kiln_tensor * a = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
#define BAD(expr, needle) do { kiln_clear_error(); CHECK((expr) == NULL && strstr(kiln_last_error(), needle) != NULL, \
        "%s -> NULL with '%s' (got '%s')", #expr, needle, kiln_last_error()); } while (0)
    BAD(kiln_sqr(ctx, NULL), "NULL");
    BAD(kiln_sqrt_inplace(ctx, NULL), "NULL");
    BAD(kiln_log(ctx, ai), "i32");
    BAD(kiln_sin(ctx, aq), "q8_0");
    BAD(kiln_cos(ctx, ai), "cos");
    BAD(kiln_scale(ctx, ai, 2.0f), "scale");
    BAD(kiln_clamp(ctx, NULL, 0, 1), "NULL");
    BAD(kiln_leaky_relu(ctx, ai, 0.1f, false), "leaky_relu");
    BAD(kiln_gelu(ctx, ai), "GELU");
    BAD(kiln_silu(ctx, NULL), "NULL");
    BAD(kiln_tanh_inplace(ctx, aq), "q8_0");
    BAD(kiln_unary(ctx, a, (enum kiln_unary_op) 99), "invalid unary op");
    BAD(kiln_unary(ctx, a, (enum kiln_unary_op) -1), "invalid unary op");
    BAD(kiln_hardswish(ctx, NULL), "NULL");
    BAD(kiln_exp(ctx, ai), "i32");
#undef BAD
    kiln_free(ctx);
}

int main(void) {
    test_all_ops();
    /* the ops that go through the kernel table, again with the scalar kernels */
    if (strcmp(kiln_cpu_isa(), "scalar") != 0) {
        kiln_cpu_force_isa("scalar");
        static const int64_t S[4] = { 33, 4, 3, 1 };
        for (int o = 0; o < N_OPS; o++) {
            run1(&OPS[o], KILN_TYPE_F32, S, EC_CONT, false);
            run1(&OPS[o], KILN_TYPE_F16, S, EC_TRANS, false);
        }
        kiln_cpu_force_isa("auto");
    }
    test_named_ctors();
    test_large();
    test_nonfinite();
    test_empty();
    test_bad_input();
    printf("%d op cases\n", ec_cases);
    return tu_finish();
}
