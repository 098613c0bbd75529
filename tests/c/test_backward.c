/*
 * test_backward.c — every backward rule against central finite differences.
 *
 * For a case f(x1..xk) the scalar loss is L = Σ f(x) ⊙ r with a fixed random
 * r (so every output element matters). The analytic gradient dL/dx comes
 * from kiln_build_backward_expand; the numeric one from (L(x+h) - L(x-h))/2h
 * per element, with the forward recomputed each time. Compared by NMSE.
 * mul_mat_id is checked w.r.t. the experts and the input (its ids are
 * integers); its products with frozen quantized experts against double.
 */
#include "util/test_util.h"

#include <math.h>

#define MAX_PARAMS 3

typedef struct kiln_tensor T;
typedef T * (*build_fn)(struct kiln_context * ctx, T ** x);

struct gcase {
    const char * name;
    build_fn     build;
    int          n_params;
    int64_t      ne[MAX_PARAMS][4];
    float        lo, hi;      /* input range */
    double       max_nmse;
};

static double loss_value(T * loss) { return kiln_get_f32_1d(loss, 0); }

/* compute with a work buffer owned here: the finite differences run the
 * forward graph hundreds of times and must not grow the context */
static enum kiln_status compute(struct kiln_cgraph * g, int n_threads) {
    static uint8_t * work = NULL;
    static size_t work_size = 0;
    struct kiln_cplan plan = kiln_graph_plan(g, n_threads, NULL);
    if (plan.work_size > work_size) {
        free(work);
        work = (uint8_t *) malloc(plan.work_size);
        work_size = plan.work_size;
    }
    plan.work_data = work;
    return kiln_graph_compute(g, &plan);
}

/* analytic gradients with 1 and 2 threads must agree exactly; the numeric
 * reference is computed once, on 1 thread */
static void run_case(const struct gcase * c) {
    tu_case = c->name;
    struct kiln_context * ctx = tu_ctx(64 << 20);
    T * x[MAX_PARAMS] = { 0 };
    for (int i = 0; i < c->n_params; i++) {
        x[i] = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, c->ne[i][0] ? c->ne[i][0] : 1, c->ne[i][1] ? c->ne[i][1] : 1,
                                  c->ne[i][2] ? c->ne[i][2] : 1, c->ne[i][3] ? c->ne[i][3] : 1);
        tu_fill_uniform(x[i], c->lo, c->hi);
        kiln_set_param(ctx, x[i]);
        kiln_format_name(x[i], "x%d", i);
    }
    T * f = c->build(ctx, x);
    if (!CHECK(f != NULL, "build failed: %s", kiln_last_error())) { kiln_free(ctx); return; }
    T * r = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, f->ne[0], f->ne[1], f->ne[2], f->ne[3]);
    tu_fill_uniform(r, -1.0f, 1.0f);
    T * loss = kiln_sum(ctx, kiln_mul(ctx, f, r));
    if (!CHECK(loss != NULL, "loss: %s", kiln_last_error())) { kiln_free(ctx); return; }
    kiln_set_loss(loss);

    struct kiln_cgraph * gf = kiln_new_graph_custom(ctx, 4096, true);
    kiln_build_forward_expand(gf, loss);
    struct kiln_cgraph * gb = kiln_graph_dup(ctx, gf);
    const enum kiln_status bst = kiln_build_backward_expand(ctx, gb, NULL);
    if (!CHECK(bst == KILN_STATUS_SUCCESS, "backward: %s", kiln_last_error())) { kiln_free(ctx); return; }
    double * ana2[MAX_PARAMS] = { 0 };
    for (int n_threads = 2; n_threads >= 1; n_threads--) {
        kiln_graph_reset(gb);
        if (!CHECK(compute(gb, n_threads) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) {
            kiln_free(ctx);
            return;
        }
        if (n_threads == 2) {
            for (int p = 0; p < c->n_params; p++) {
                T * g = kiln_graph_get_grad(gb, x[p]);
                ana2[p] = g ? tu_to_f64(g) : NULL;
            }
        }
    }
    const int n_threads = 1;
    for (int p = 0; p < c->n_params; p++) {
        T * g = kiln_graph_get_grad(gb, x[p]);
        if (!CHECK(g != NULL, "no gradient for x%d", p)) continue;
        const int64_t n = kiln_nelements(x[p]);
        double * ana = tu_to_f64(g);
        CHECK(ana2[p] && memcmp(ana, ana2[p], sizeof(double) * (size_t) n) == 0, "x%d: 1 and 2 threads give the same gradient", p);
        free(ana2[p]);
        double * num = (double *) malloc(sizeof(double) * (size_t) n);
        float * xd = (float *) x[p]->data;
        for (int64_t i = 0; i < n; i++) {
            const float x0 = xd[i];
            const float h = 1e-3f * fmaxf(1.0f, fabsf(x0));
            xd[i] = x0 + h;
            compute(gf, n_threads);
            const double lp = loss_value(loss);
            xd[i] = x0 - h;
            compute(gf, n_threads);
            const double lm = loss_value(loss);
            xd[i] = x0;
            num[i] = (lp - lm) / (2.0 * h);
        }
        const double e = tu_nmse(ana, num, n);
        CHECK(e <= c->max_nmse, "x%d (%d threads): gradient NMSE %.3g > %.3g (ana[0]=%g num[0]=%g)",
              p, n_threads, e, c->max_nmse, ana[0], num[0]);
        free(ana);
        free(num);
    }
    kiln_free(ctx);
}

/* ---- cases */
static T * b_add(struct kiln_context * c, T ** x) { return kiln_add(c, x[0], x[1]); }
static T * b_sub(struct kiln_context * c, T ** x) { return kiln_sub(c, x[0], x[1]); }
static T * b_mul(struct kiln_context * c, T ** x) { return kiln_mul(c, x[0], x[1]); }
static T * b_div(struct kiln_context * c, T ** x) { return kiln_div(c, x[0], x[1]); }
static T * b_add1(struct kiln_context * c, T ** x) { return kiln_add1(c, x[0], x[1]); }
static T * b_sqr(struct kiln_context * c, T ** x) { return kiln_sqr(c, x[0]); }
static T * b_sqrt(struct kiln_context * c, T ** x) { return kiln_sqrt(c, x[0]); }
static T * b_log(struct kiln_context * c, T ** x) { return kiln_log(c, x[0]); }
static T * b_sin(struct kiln_context * c, T ** x) { return kiln_sin(c, x[0]); }
static T * b_cos(struct kiln_context * c, T ** x) { return kiln_cos(c, x[0]); }
static T * b_sum(struct kiln_context * c, T ** x) { return kiln_sum(c, x[0]); }
static T * b_sum_rows(struct kiln_context * c, T ** x) { return kiln_sum_rows(c, x[0]); }
static T * b_mean(struct kiln_context * c, T ** x) { return kiln_mean(c, x[0]); }
static T * b_repeat(struct kiln_context * c, T ** x) {
    T * shape = kiln_new_tensor_3d(c, KILN_TYPE_F32, 6, 4, 2);
    return kiln_repeat(c, x[0], shape);
}
static T * b_repeat_back(struct kiln_context * c, T ** x) {
    T * shape = kiln_new_tensor_2d(c, KILN_TYPE_F32, 3, 2);
    return kiln_repeat_back(c, x[0], shape);
}
static T * b_concat(struct kiln_context * c, T ** x) { return kiln_concat(c, x[0], x[1], 1); }
static T * b_rms_norm(struct kiln_context * c, T ** x) { return kiln_rms_norm(c, x[0], 1e-5f); }
static T * b_mul_mat(struct kiln_context * c, T ** x) { return kiln_mul_mat(c, x[0], x[1]); }
static T * b_scale(struct kiln_context * c, T ** x) { return kiln_scale(c, x[0], -1.75f); }
static T * b_cpy(struct kiln_context * c, T ** x) {
    T * dst = kiln_new_tensor_2d(c, KILN_TYPE_F32, 4, 3);
    return kiln_cpy(c, kiln_sqr(c, x[0]), dst);
}
static T * b_cont_transpose(struct kiln_context * c, T ** x) { return kiln_cont(c, kiln_transpose(c, x[0])); }
static T * b_reshape(struct kiln_context * c, T ** x) { return kiln_reshape_2d(c, kiln_sqr(c, x[0]), 6, 2); }
static T * b_view(struct kiln_context * c, T ** x) {
    return kiln_view_2d(c, x[0], 3, 2, x[0]->nb[1], 1 * sizeof(float));
}
static T * b_permute(struct kiln_context * c, T ** x) { return kiln_cont(c, kiln_permute(c, x[0], 2, 0, 1, 3)); }
static T * b_get_rows(struct kiln_context * c, T ** x) {
    T * idx = kiln_new_tensor_1d(c, KILN_TYPE_I32, 5);
    const int32_t rows[5] = { 2, 0, 2, 3, 1 };
    for (int i = 0; i < 5; i++) kiln_set_i32_1d(idx, i, rows[i]);
    return kiln_get_rows(c, x[0], idx);
}
static T * b_soft_max(struct kiln_context * c, T ** x) {
    return kiln_soft_max(c, kiln_diag_mask_inf(c, x[0], 0));
}
static T * b_soft_max_ext(struct kiln_context * c, T ** x) {
    T * mask = kiln_new_tensor_2d(c, KILN_TYPE_F32, 5, 3);
    tu_fill_uniform(mask, -2.0f, 0.0f);
    return kiln_soft_max_ext(c, x[0], mask, 0.7f, 0.0f);
}
static T * b_rope(struct kiln_context * c, T ** x) {
    T * pos = kiln_new_tensor_1d(c, KILN_TYPE_I32, x[0]->ne[2]);
    for (int i = 0; i < x[0]->ne[2]; i++) kiln_set_i32_1d(pos, i, 3 * i + 1);
    return kiln_rope_ext(c, x[0], pos, NULL, 8, 0, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}
static T * b_rope_neox(struct kiln_context * c, T ** x) {
    T * pos = kiln_new_tensor_1d(c, KILN_TYPE_I32, x[0]->ne[2]);
    for (int i = 0; i < x[0]->ne[2]; i++) kiln_set_i32_1d(pos, i, 2 * i);
    return kiln_rope_ext(c, x[0], pos, NULL, 4, KILN_ROPE_TYPE_NEOX, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
}
static T * b_conv_2d(struct kiln_context * c, T ** x) {
    /* kernel x0 [3, 3, 2, 2], image x1 [6, 5, 2, 1] */
    return kiln_conv_2d(c, x[0], x[1], 1, 1, 1, 1, 1, 1);
}
static T * b_pool_avg(struct kiln_context * c, T ** x) { return kiln_pool_2d(c, x[0], KILN_OP_POOL_AVG, 2, 2, 2, 2, 0, 0); }
static T * b_pool_max(struct kiln_context * c, T ** x) { return kiln_pool_2d(c, x[0], KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0); }
static T * b_pool_pad(struct kiln_context * c, T ** x) { return kiln_pool_2d(c, x[0], KILN_OP_POOL_AVG, 3, 3, 2, 2, 1, 1); }
static T * b_pad(struct kiln_context * c, T ** x) { return kiln_pad(c, x[0], 2, 1, 0, 0); }
static T * b_abs(struct kiln_context * c, T ** x) { return kiln_abs(c, x[0]); }
static T * b_neg(struct kiln_context * c, T ** x) { return kiln_neg(c, x[0]); }
static T * b_relu(struct kiln_context * c, T ** x) { return kiln_relu(c, x[0]); }
static T * b_silu(struct kiln_context * c, T ** x) { return kiln_silu(c, x[0]); }
static T * b_exp(struct kiln_context * c, T ** x) { return kiln_exp(c, x[0]); }
static T * b_tanh(struct kiln_context * c, T ** x) { return kiln_tanh(c, x[0]); }
static T * b_sigmoid(struct kiln_context * c, T ** x) { return kiln_sigmoid(c, x[0]); }
static T * b_gelu(struct kiln_context * c, T ** x) { return kiln_gelu(c, x[0]); }
static T * b_gelu_quick(struct kiln_context * c, T ** x) { return kiln_gelu_quick(c, x[0]); }
static T * b_elu(struct kiln_context * c, T ** x) { return kiln_elu(c, x[0]); }
static T * b_leaky_relu(struct kiln_context * c, T ** x) { return kiln_leaky_relu(c, x[0], 0.1f, false); }
static T * b_cross_entropy(struct kiln_context * c, T ** x) {
    /* labels are not differentiated (as in ggml): random probabilities */
    T * y = kiln_new_tensor_2d(c, KILN_TYPE_F32, x[0]->ne[0], x[0]->ne[1]);
    tu_fill_uniform(y, 0.0f, 1.0f);
    for (int64_t r = 0; r < y->ne[1]; r++) {
        float * row = (float *)((char *) y->data + r * y->nb[1]);
        float s = 0;
        for (int64_t i = 0; i < y->ne[0]; i++) s += row[i];
        for (int64_t i = 0; i < y->ne[0]; i++) row[i] /= s;
    }
    return kiln_cross_entropy_loss(c, x[0], y);
}
static T * b_acc(struct kiln_context * c, T ** x) {
    return kiln_acc(c, x[0], x[1], x[0]->nb[1], x[0]->nb[2], x[0]->nb[3], 1 * x[0]->nb[1] + 2 * sizeof(float));
}
static T * b_norm(struct kiln_context * c, T ** x) { return kiln_norm(c, x[0], 1e-5f); }
static T * b_out_prod(struct kiln_context * c, T ** x) { return kiln_out_prod(c, x[0], x[1]); }
static T * b_set(struct kiln_context * c, T ** x) {
    return kiln_set(c, x[0], x[1], x[0]->nb[1], x[0]->nb[2], x[0]->nb[3], 1 * x[0]->nb[1] + 1 * sizeof(float));
}
/* ids [n_used, n_tok]: token t's slots pick distinct experts (t + 2 s) % n_as, as a top-k does */
static T * moe_ids(struct kiln_context * c, int64_t n_used, int64_t n_tok, int64_t n_as) {
    T * ids = kiln_new_tensor_2d(c, KILN_TYPE_I32, n_used, n_tok);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t s = 0; s < n_used; s++) ((int32_t *) ids->data)[t * n_used + s] = (int32_t) ((t + 2 * s) % n_as);
    }
    return ids;
}
/* x0: experts [6, 5, 4]; x1: b [6, n_b, 3] (n_b 1: one row shared by the 2 slots, as the MoE's input; 2: one per slot) */
static T * b_mul_mat_id(struct kiln_context * c, T ** x) { return kiln_mul_mat_id(c, x[0], x[1], moe_ids(c, 2, x[1]->ne[2], x[0]->ne[2])); }
static T * b_get_rows_3d(struct kiln_context * c, T ** x) {
    /* [1, 5, 3] gathered by [2, 3] indices: the router weights of the chosen experts */
    return kiln_get_rows(c, x[0], moe_ids(c, 2, x[0]->ne[2], x[0]->ne[1]));
}
static T * b_mlp(struct kiln_context * c, T ** x) {
    /* a small network: the chain rule through several rules at once */
    T * h = kiln_relu(c, kiln_add(c, kiln_mul_mat(c, x[0], x[2]), x[1]));
    return kiln_soft_max(c, h);
}

/* abs, relu and max pool are not differentiable at kinks: inputs stay away from 0 / ties by chance */
static const struct gcase cases[] = {
    { "add",        b_add,        2, {{5, 4, 3}, {5, 4, 3}},  -1, 1, 1e-5 },
    { "add_bcast",  b_add,        2, {{5, 4, 3}, {5, 1, 3}},  -1, 1, 1e-5 },
    { "sub_bcast",  b_sub,        2, {{5, 4, 2}, {1, 4, 1}},  -1, 1, 1e-5 },
    { "mul_bcast",  b_mul,        2, {{5, 4, 2}, {5, 1, 1}},  -1, 1, 1e-5 },
    { "div",        b_div,        2, {{5, 3}, {5, 3}},        0.5f, 2, 1e-5 },
    { "div_bcast",  b_div,        2, {{5, 3}, {5, 1}},        0.5f, 2, 1e-5 },
    { "add1",       b_add1,       2, {{5, 3}, {1}},           -1, 1, 1e-5 },
    { "sqr",        b_sqr,        1, {{7, 3}},                -1, 1, 1e-5 },
    { "sqrt",       b_sqrt,       1, {{7, 3}},                0.5f, 2, 1e-5 },
    { "log",        b_log,        1, {{7, 3}},                0.5f, 2, 1e-5 },
    { "sin",        b_sin,        1, {{7, 3}},                -2, 2, 1e-5 },
    { "cos",        b_cos,        1, {{7, 3}},                -2, 2, 1e-5 },
    { "sum",        b_sum,        1, {{7, 3, 2}},             -1, 1, 1e-5 },
    { "sum_rows",   b_sum_rows,   1, {{7, 3, 2}},             -1, 1, 1e-5 },
    { "mean",       b_mean,       1, {{7, 3}},                -1, 1, 1e-5 },
    { "repeat",     b_repeat,     1, {{3, 2, 1}},             -1, 1, 1e-5 },
    { "repeat_back", b_repeat_back, 1, {{6, 4}},              -1, 1, 1e-5 },
    { "concat",     b_concat,     2, {{4, 3}, {4, 2}},        -1, 1, 1e-5 },
    { "rms_norm",   b_rms_norm,   1, {{8, 3}},                -1, 1, 1e-4 },
    { "mul_mat",    b_mul_mat,    2, {{6, 4}, {6, 3}},        -1, 1, 1e-5 },
    { "mul_mat_b",  b_mul_mat,    2, {{6, 4, 2}, {6, 3, 2}},  -1, 1, 1e-5 },
    { "scale",      b_scale,      1, {{5, 3}},                -1, 1, 1e-5 },
    { "cpy",        b_cpy,        1, {{4, 3}},                -1, 1, 1e-5 },
    { "cont_T",     b_cont_transpose, 1, {{4, 3}},            -1, 1, 1e-5 },
    { "reshape",    b_reshape,    1, {{4, 3}},                -1, 1, 1e-5 },
    { "view",       b_view,       1, {{5, 3}},                -1, 1, 1e-5 },
    { "permute",    b_permute,    1, {{2, 3, 4}},             -1, 1, 1e-5 },
    { "get_rows",   b_get_rows,   1, {{4, 4}},                -1, 1, 1e-5 },
    { "soft_max",   b_soft_max,   1, {{5, 5}},                -2, 2, 1e-4 },
    { "soft_max_ext", b_soft_max_ext, 1, {{5, 3, 2}},         -2, 2, 1e-4 },
    { "rope",       b_rope,       1, {{8, 2, 3}},             -1, 1, 1e-4 },
    { "rope_neox",  b_rope_neox,  1, {{8, 2, 3}},             -1, 1, 1e-4 },
    { "conv_2d",    b_conv_2d,    2, {{3, 3, 2, 2}, {6, 5, 2, 1}}, -1, 1, 1e-4 },
    { "pool_avg",   b_pool_avg,   1, {{4, 6, 2}},             -1, 1, 1e-5 },
    { "pool_max",   b_pool_max,   1, {{4, 6, 2}},             -1, 1, 1e-4 },
    { "pool_padded", b_pool_pad,  1, {{5, 6, 2}},             -1, 1, 1e-5 },
    { "pad",        b_pad,        1, {{3, 2}},                -1, 1, 1e-5 },
    { "abs",        b_abs,        1, {{7, 3}},                0.1f, 1, 1e-5 },
    { "neg",        b_neg,        1, {{7, 3}},                -1, 1, 1e-5 },
    { "relu",       b_relu,       1, {{7, 3}},                0.1f, 1, 1e-5 },
    { "silu",       b_silu,       1, {{7, 3}},                -2, 2, 1e-4 },
    { "exp",        b_exp,        1, {{7, 3}},                -1, 1, 1e-5 },
    { "tanh",       b_tanh,       1, {{7, 3}},                -1, 1, 1e-5 },
    { "sigmoid",    b_sigmoid,    1, {{7, 3}},                -2, 2, 1e-5 },
    { "gelu",       b_gelu,       1, {{7, 3}},                -3, 3, 1e-4 },
    { "gelu_quick", b_gelu_quick, 1, {{7, 3}},                -3, 3, 1e-4 },
    { "elu",        b_elu,        1, {{7, 3}},                -2, 2, 1e-5 },
    { "leaky_relu", b_leaky_relu, 1, {{7, 3}},                -2, 2, 1e-5 },
    { "cross_entropy", b_cross_entropy, 1, {{6, 4}},          -2, 2, 1e-4 },
    { "acc",        b_acc,        2, {{6, 4}, {3, 2}},        -1, 1, 1e-5 },
    { "norm",       b_norm,       1, {{8, 3}},                -1, 1, 1e-4 },
    { "out_prod",   b_out_prod,   2, {{5, 4}, {3, 4}},        -1, 1, 1e-5 },
    { "set",        b_set,        2, {{6, 4}, {3, 2}},        -1, 1, 1e-5 },
    { "mul_mat_id", b_mul_mat_id, 2, {{6, 5, 4}, {6, 1, 3}},  -1, 1, 1e-5 },
    { "mul_mat_id_slots", b_mul_mat_id, 2, {{6, 5, 4}, {6, 2, 3}}, -1, 1, 1e-5 },
    { "mul_mat_id_wide", b_mul_mat_id, 2, {{40, 37, 3}, {40, 1, 5}}, -1, 1, 1e-5 },
    { "get_rows_3d", b_get_rows_3d, 1, {{1, 5, 3}},           -1, 1, 1e-5 },
    { "mlp",        b_mlp,        3, {{6, 5}, {5, 3}, {6, 3}}, -1, 1, 1e-4 },
};

/* mul_mat with a frozen quantized weight: the gradient flows to the input
 * only, dL/dx = W^T r, compared with that product in double over the
 * dequantized weight (finite differences would see the forward's Q8
 * quantization of the activations). The graph may hold no f32 tensor of
 * the weight's shape: the weight is never dequantized into a kept copy. */
static void test_mul_mat_frozen_quant(enum kiln_type type) {
    char name[64];
    snprintf(name, sizeof name, "mul_mat frozen %s", kiln_type_name(type));
    tu_case = name;
    const int64_t K = 256, N = 5, M = 70; /* M > 64: several blocks of out_prod's converted-row path */
    struct kiln_context * ctx = tu_ctx(16 << 20);
    T * wf = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, N);
    tu_fill_uniform(wf, -1.0f, 1.0f);
    T * w = kiln_new_tensor_2d(ctx, type, K, N);
    const struct kiln_type_traits * tr = kiln_get_type_traits(type);
    for (int64_t i = 0; i < N; i++) tr->from_float_ref((const float *) wf->data + i * K, (char *) w->data + i * w->nb[1], K);
    T * x = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, M);
    tu_fill_uniform(x, -1.0f, 1.0f);
    kiln_set_param(ctx, x);
    T * r = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, N, M);
    tu_fill_uniform(r, -1.0f, 1.0f);
    T * loss = kiln_sum(ctx, kiln_mul(ctx, kiln_mul_mat(ctx, w, x), r));
    kiln_set_loss(loss);
    struct kiln_cgraph * g = kiln_new_graph_custom(ctx, 256, true);
    kiln_build_forward_expand(g, loss);
    if (!CHECK(kiln_build_backward_expand(ctx, g, NULL) == KILN_STATUS_SUCCESS, "backward: %s", kiln_last_error())) {
        kiln_free(ctx);
        return;
    }
    CHECK(kiln_graph_get_grad(g, w) == NULL, "the frozen weight has no gradient");
    bool copy = false;
    for (int i = 0; i < kiln_graph_n_nodes(g); i++) {
        T * n = kiln_graph_node(g, i);
        if (n->type == KILN_TYPE_F32 && kiln_nelements(n) == K * N) copy = true;
    }
    CHECK(!copy, "no f32 copy of the weight in the graph");
    for (int nt = 1; nt <= 2; nt++) {
        kiln_graph_reset(g);
        if (!CHECK(compute(g, nt) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) break;
        T * gx = kiln_graph_get_grad(g, x);
        if (!CHECK(gx != NULL, "input gradient")) break;
        double * ana = tu_to_f64(gx);
        double * ref = (double *) calloc((size_t) (K * M), sizeof(double));
        float * row = (float *) malloc(sizeof(float) * (size_t) K);
        for (int64_t n = 0; n < N; n++) {
            tr->to_float((const char *) w->data + n * w->nb[1], row, K);
            for (int64_t m = 0; m < M; m++) {
                const double rv = ((const float *) r->data)[m * N + n];
                for (int64_t k = 0; k < K; k++) ref[m * K + k] += (double) row[k] * rv;
            }
        }
        const double e = tu_nmse(ana, ref, K * M);
        CHECK(e < 1e-10, "%d threads: gradient NMSE %.3g vs double W^T r", nt, e);
        free(row);
        free(ref);
        free(ana);
    }
    kiln_free(ctx);
}

/* mul_mat_id with frozen quantized experts (the MoE base weights): the
 * gradient w.r.t. b only, sum over slots of W_x^T r, against that product in
 * double over the dequantized experts; no f32 copy of the experts is made */
static void test_mul_mat_id_frozen_quant(enum kiln_type type) {
    char name[64];
    snprintf(name, sizeof name, "mul_mat_id frozen %s", kiln_type_name(type));
    tu_case = name;
    const int64_t K = 256, N = 7, X = 4, U = 2, M = 37; /* M * U > 16 entries: several chunks per expert */
    struct kiln_context * ctx = tu_ctx(16 << 20);
    T * wf = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, N, X);
    tu_fill_uniform(wf, -1.0f, 1.0f);
    T * w = kiln_new_tensor_3d(ctx, type, K, N, X);
    const struct kiln_type_traits * tr = kiln_get_type_traits(type);
    for (int64_t i = 0; i < N * X; i++) tr->from_float_ref((const float *) wf->data + i * K, (char *) w->data + i * w->nb[1], K);
    T * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, 1, M);
    tu_fill_uniform(x, -1.0f, 1.0f);
    kiln_set_param(ctx, x);
    T * ids = moe_ids(ctx, U, M, X);
    T * r = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, N, U, M);
    tu_fill_uniform(r, -1.0f, 1.0f);
    T * loss = kiln_sum(ctx, kiln_mul(ctx, kiln_mul_mat_id(ctx, w, x, ids), r));
    kiln_set_loss(loss);
    struct kiln_cgraph * g = kiln_new_graph_custom(ctx, 256, true);
    kiln_build_forward_expand(g, loss);
    if (!CHECK(kiln_build_backward_expand(ctx, g, NULL) == KILN_STATUS_SUCCESS, "backward: %s", kiln_last_error())) {
        kiln_free(ctx);
        return;
    }
    CHECK(kiln_graph_get_grad(g, w) == NULL, "the frozen experts have no gradient");
    bool copy = false;
    for (int i = 0; i < kiln_graph_n_nodes(g); i++) {
        T * n = kiln_graph_node(g, i);
        if (n->type == KILN_TYPE_F32 && n->ne[0] == K && n->ne[1] == N) copy = true;
    }
    CHECK(!copy, "no f32 copy of the experts in the graph");
    double * ref = (double *) calloc((size_t) (K * M), sizeof(double));
    float * row = (float *) malloc(sizeof(float) * (size_t) K);
    for (int64_t t = 0; t < M; t++) {
        for (int64_t s = 0; s < U; s++) {
            const int32_t e = ((const int32_t *) ids->data)[t * U + s];
            for (int64_t n = 0; n < N; n++) {
                tr->to_float((const char *) w->data + e * w->nb[2] + n * w->nb[1], row, K);
                const double rv = ((const float *) r->data)[(t * U + s) * N + n];
                for (int64_t k = 0; k < K; k++) ref[t * K + k] += (double) row[k] * rv;
            }
        }
    }
    double * first = NULL;
    for (int nt = 1; nt <= 2; nt++) {
        kiln_graph_reset(g);
        if (!CHECK(compute(g, nt) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) break;
        T * gx = kiln_graph_get_grad(g, x);
        if (!CHECK(gx != NULL, "input gradient")) break;
        double * ana = tu_to_f64(gx);
        const double e = tu_nmse(ana, ref, K * M);
        CHECK(e < 1e-10, "%d threads: gradient NMSE %.3g vs double sum of W^T r", nt, e);
        if (first) CHECK(memcmp(first, ana, sizeof(double) * (size_t) (K * M)) == 0, "1 and 2 threads give the same bits");
        free(first);
        first = ana;
    }
    free(first);
    free(row);
    free(ref);
    kiln_free(ctx);
}

/* bad input to the backward products: a clear error, no crash; an expert id
 * out of range at compute is refused like mul_mat_id's */
static void test_id_errors(void) {
    tu_case = "mul_mat_id backward errors";
    struct kiln_context * ctx = tu_ctx(4 << 20);
    T * as = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 5, 4);
    T * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 2, 3);
    T * g = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 5, 2, 3);
    T * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 1, 3);
    CHECK(kiln_mul_mat_id_back(ctx, as, g, ids) != NULL && kiln_out_prod_id(ctx, a, g, ids, 4) != NULL, "valid: %s", kiln_last_error());
    CHECK(kiln_mul_mat_id_back(ctx, as, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 4, 2, 3), ids) == NULL && strstr(kiln_last_error(), "does not fit"),
          "g rows != N: %s", kiln_last_error());
    CHECK(kiln_out_prod_id(ctx, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 1, 2), g, ids, 4) == NULL && strstr(kiln_last_error(), "does not fit"),
          "a tokens != ids tokens: %s", kiln_last_error());
    CHECK(kiln_out_prod_id(ctx, a, g, ids, 0) == NULL && strstr(kiln_last_error(), "experts"), "n_as 0: %s", kiln_last_error());
    CHECK(kiln_mul_mat_id_back(ctx, as, kiln_new_tensor_3d(ctx, KILN_TYPE_F16, 5, 2, 3), ids) == NULL && strstr(kiln_last_error(), "f32"),
          "f16 g: %s", kiln_last_error());
    tu_fill_uniform(as, -1, 1);
    tu_fill_uniform(g, -1, 1);
    tu_fill_uniform(a, -1, 1);
    for (int i = 0; i < 6; i++) ((int32_t *) ids->data)[i] = i == 4 ? 7 : i % 4;
    T * r1 = kiln_mul_mat_id_back(ctx, as, g, ids);
    T * r2 = kiln_out_prod_id(ctx, a, g, ids, 4);
    for (int k = 0; k < 2; k++) {
        struct kiln_cgraph * gr = kiln_new_graph(ctx);
        kiln_build_forward_expand(gr, k ? r2 : r1);
        CHECK(compute(gr, 2) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "= 7 is not an expert"), "bad id: %s", kiln_last_error());
    }
    kiln_free(ctx);
}

static void test_errors(void) {
    tu_case = "errors";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    T * x = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    kiln_set_param(ctx, x);
    T * y = kiln_sum(ctx, kiln_hardswish(ctx, x));
    kiln_set_loss(y);
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    kiln_build_forward_expand(g, y);
    CHECK(kiln_build_backward_expand(ctx, g, NULL) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "gradient storage"),
          "graph without grads: %s", kiln_last_error());
    struct kiln_cgraph * gg = kiln_new_graph_custom(ctx, 64, true);
    kiln_build_forward_expand(gg, y);
    CHECK(kiln_build_backward_expand(ctx, gg, NULL) == KILN_STATUS_FAILED && strstr(kiln_last_error(), "HARDSWISH"),
          "op without rule named: %s", kiln_last_error());
    kiln_free(ctx);
}

int main(void) {
    tu_seed(42);
    const int n = (int)(sizeof(cases) / sizeof(cases[0]));
    for (int i = 0; i < n; i++) {
        run_case(&cases[i]);
    }
    test_mul_mat_frozen_quant(KILN_TYPE_Q4_0);
    test_mul_mat_frozen_quant(KILN_TYPE_Q8_0);
    test_mul_mat_frozen_quant(KILN_TYPE_Q4_K);
    test_mul_mat_frozen_quant(KILN_TYPE_F16);
    test_mul_mat_id_frozen_quant(KILN_TYPE_Q8_0);
    test_mul_mat_id_frozen_quant(KILN_TYPE_Q4_K);
    test_mul_mat_id_frozen_quant(KILN_TYPE_F16);
    test_id_errors();
    test_errors();
    return tu_finish();
}
