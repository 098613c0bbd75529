/*
 * backward.c — reverse-mode automatic differentiation over a compute graph.
 *
 * kiln_build_backward_expand walks the forward nodes from last to first and,
 * for every node that has a gradient, asks the op's backward rule for the
 * contribution to each source that needs one. Contributions are summed
 * (or added in place into an accumulator) and the new nodes are appended to
 * the same graph. Rules are dispatched from the op table's `grad` column.
 *
 * Rules build graph nodes with the ordinary constructors, so a gradient is
 * an ordinary tensor: it can be inspected, allocated by gallocr, computed on
 * any number of threads.
 */
#include "graph_internal.h"

#include <math.h>
#include <stdlib.h>

struct bwd {
    struct kiln_context * ctx;
    struct kiln_cgraph *  g;
    bool *                needs; /* per hash slot: the tensor needs a gradient */
    bool                  ok;
};

typedef struct kiln_tensor T;

static size_t slot_of(const struct kiln_cgraph * g, const T * t) {
    return kiln_hash_find(&g->visited_hash_set, t);
}

static bool needs_grad(const struct bwd * b, const T * t) {
    if (!t || !kiln_hash_contains(&b->g->visited_hash_set, t)) return false;
    return b->needs[slot_of(b->g, t)];
}

/* Adds a contribution to src's gradient. A NULL contribution means a
 * constructor failed: the message is already in kiln_last_error. */
static void add_grad(struct bwd * b, T * src, T * c) {
    if (!b->ok) return;
    if (!c) { b->ok = false; return; }
    struct kiln_cgraph * g = b->g;
    const size_t s = slot_of(g, src);
    if (!kiln_are_same_shape(c, src)) {
        /* contributions computed on a view or a reshaped tensor */
        if (kiln_nelements(c) != kiln_nelements(src)) {
            char a[96], d[96];
            kiln_set_error("backward: gradient %s does not match tensor '%s' %s",
                           kiln_shape_str(c, a, sizeof a), src->name, kiln_shape_str(src, d, sizeof d));
            b->ok = false;
            return;
        }
        c = kiln_reshape(b->ctx, kiln_is_contiguous(c) ? c : kiln_cont(b->ctx, c), src);
        if (!c) { b->ok = false; return; }
    }
    if (g->grads[s]) {
        /* accumulators are updated in place; other sums are new nodes */
        c = g->grad_accs[s] ? kiln_add_inplace(b->ctx, g->grads[s], c) : kiln_add(b->ctx, g->grads[s], c);
        if (!c) { b->ok = false; return; }
    }
    g->grads[s] = c;
}

/* reduce a broadcast contribution back to the shape of `like` */
static T * reduce_to(struct bwd * b, T * c, T * like) {
    if (!c) return NULL;
    if (kiln_are_same_shape(c, like)) return c;
    return kiln_repeat_back(b->ctx, c, like);
}

static T * neg(struct bwd * b, T * c) { return c ? kiln_neg(b->ctx, c) : NULL; }

#define CTX (b->ctx)
#define SRC0 (node->src[0])
#define SRC1 (node->src[1])
#define NEED0 needs_grad(b, node->src[0])
#define NEED1 needs_grad(b, node->src[1])

static void bwd_dup(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, grad);
}
static void bwd_cont(struct bwd * b, T * node, T * grad) { bwd_dup(b, node, grad); }
static void bwd_cpy(struct bwd * b, T * node, T * grad) { bwd_dup(b, node, grad); } /* src1 is only a destination */

static void bwd_add(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, grad);
    if (NEED1) add_grad(b, SRC1, reduce_to(b, grad, SRC1));
}
static void bwd_sub(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, grad);
    if (NEED1) add_grad(b, SRC1, neg(b, reduce_to(b, grad, SRC1)));
}
static void bwd_add1(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, grad);
    if (NEED1) add_grad(b, SRC1, kiln_sum(CTX, grad));
}
static void bwd_mul(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_mul(CTX, grad, SRC1));
    if (NEED1) add_grad(b, SRC1, reduce_to(b, kiln_mul(CTX, grad, SRC0), SRC1));
}
static void bwd_div(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_div(CTX, grad, SRC1));
    if (NEED1) {
        /* d(x/y)/dy = -(x/y)/y */
        T * t = kiln_div(CTX, kiln_mul(CTX, grad, node), SRC1);
        add_grad(b, SRC1, neg(b, reduce_to(b, t, SRC1)));
    }
}
static void bwd_acc(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, grad);
    if (NEED1) {
        const size_t nb1 = (size_t) node->op_params[0], nb2 = (size_t) node->op_params[1];
        const size_t nb3 = (size_t) node->op_params[2], off = (size_t) node->op_params[3];
        T * v = kiln_view_4d(CTX, grad, SRC1->ne[0], SRC1->ne[1], SRC1->ne[2], SRC1->ne[3], nb1, nb2, nb3, off);
        add_grad(b, SRC1, v ? kiln_cont(CTX, v) : NULL);
    }
}
static void bwd_sqr(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_scale(CTX, kiln_mul(CTX, SRC0, grad), 2.0f));
}
static void bwd_sqrt(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_scale(CTX, kiln_div(CTX, grad, node), 0.5f));
}
static void bwd_log(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_div(CTX, grad, SRC0));
}
static void bwd_sin(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_mul(CTX, grad, kiln_cos(CTX, SRC0)));
}
static void bwd_cos(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, neg(b, kiln_mul(CTX, grad, kiln_sin(CTX, SRC0))));
}
static void bwd_sum(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_repeat(CTX, grad, SRC0));
}
static void bwd_sum_rows(struct bwd * b, T * node, T * grad) { bwd_sum(b, node, grad); }
static void bwd_mean(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_scale(CTX, kiln_repeat(CTX, grad, SRC0), 1.0f / (float) SRC0->ne[0]));
}
static void bwd_repeat(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_repeat_back(CTX, grad, SRC0));
}
static void bwd_repeat_back(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_repeat(CTX, grad, SRC0));
}
/* the part of grad that lies over a source placed at `offset` bytes */
static T * sub_view(struct bwd * b, T * grad, const T * like, size_t offset) {
    T * v = kiln_view_4d(CTX, grad, like->ne[0], like->ne[1], like->ne[2], like->ne[3], grad->nb[1], grad->nb[2], grad->nb[3], offset);
    return v ? kiln_cont(CTX, v) : NULL;
}
static void bwd_concat(struct bwd * b, T * node, T * grad) {
    const int dim = node->op_params[0];
    if (dim < 0 || dim > 3) { kiln_set_error("backward: concat dim %d", dim); b->ok = false; return; }
    if (NEED0) add_grad(b, SRC0, sub_view(b, grad, SRC0, 0));
    if (NEED1) add_grad(b, SRC1, sub_view(b, grad, SRC1, (size_t) SRC0->ne[dim] * grad->nb[dim]));
}
static void bwd_pad(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, sub_view(b, grad, SRC0, 0));
}
static void bwd_rms_norm(struct bwd * b, T * node, T * grad) {
    const float eps = kiln_get_op_params_f32(node, 0);
    if (NEED0) add_grad(b, SRC0, kiln_rms_norm_back(CTX, SRC0, grad, eps));
}
static void bwd_norm(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    /* y = (x - mean) / s with s = sqrt(var + eps):
     * dx = (dy - mean(dy) - y * mean(dy * y)) / s */
    const float eps = kiln_get_op_params_f32(node, 0);
    const float inv_n = 1.0f / (float) SRC0->ne[0];
    T * xm = kiln_sub(CTX, SRC0, kiln_scale(CTX, kiln_sum_rows(CTX, SRC0), inv_n));
    T * var = kiln_scale(CTX, kiln_sum_rows(CTX, kiln_sqr(CTX, xm)), inv_n);
    T * s = kiln_sqrt(CTX, kiln_add1(CTX, var, kiln_new_f32(CTX, eps)));
    T * t = kiln_sub(CTX, kiln_sub(CTX, grad, kiln_scale(CTX, kiln_sum_rows(CTX, grad), inv_n)),
                     kiln_mul(CTX, node, kiln_scale(CTX, kiln_sum_rows(CTX, kiln_mul(CTX, grad, node)), inv_n)));
    add_grad(b, SRC0, kiln_div(CTX, t, s));
}
static void bwd_out_prod(struct bwd * b, T * node, T * grad) {
    /* a [m, n], b [p, n], node [m, p]: node[i, j] = sum_k a[i, k] b[j, k] */
    if (NEED0) add_grad(b, SRC0, kiln_mul_mat(CTX, kiln_cont(CTX, kiln_transpose(CTX, grad)), SRC1));
    if (NEED1) add_grad(b, SRC1, kiln_mul_mat(CTX, grad, SRC0));
}
static void bwd_set(struct bwd * b, T * node, T * grad) {
    const size_t nb1 = (size_t) node->op_params[0], nb2 = (size_t) node->op_params[1];
    const size_t nb3 = (size_t) node->op_params[2], off = (size_t) node->op_params[3];
    /* src0 sees the gradient everywhere but the overwritten region */
    if (NEED0) add_grad(b, SRC0, kiln_set(CTX, grad, kiln_scale(CTX, SRC1, 0.0f), nb1, nb2, nb3, off));
    if (NEED1) {
        T * v = kiln_view_4d(CTX, grad, SRC1->ne[0], SRC1->ne[1], SRC1->ne[2], SRC1->ne[3], nb1, nb2, nb3, off);
        add_grad(b, SRC1, v ? kiln_cont(CTX, v) : NULL);
    }
}
static void bwd_mul_mat(struct bwd * b, T * node, T * grad) {
    /* src0 [K, N], src1 [K, M], node [N, M] */
    if (NEED0) add_grad(b, SRC0, reduce_to(b, kiln_out_prod(CTX, SRC1, grad), SRC0));
    if (!NEED1) return;
    if (SRC0->type == KILN_TYPE_F32) {
        add_grad(b, SRC1, kiln_mul_mat(CTX, kiln_cont(CTX, kiln_transpose(CTX, SRC0)), grad));
    } else {
        /* a frozen F16 or quantized weight: out_prod converts its rows to f32
         * one at a time, so no f32 copy of the weight is ever kept */
        add_grad(b, SRC1, kiln_out_prod(CTX, SRC0, kiln_transpose(CTX, grad)));
    }
}
static void bwd_mul_mat_id(struct bwd * b, T * node, T * grad) {
    /* as [K, N, n_as], b [K, n_b, n_tok], ids [n_used, n_tok] (integers: no
     * gradient), node [N, n_used, n_tok]; slot e reads row e % n_b of b */
    T * ids = node->src[2];
    T * g = kiln_is_contiguous(grad) ? grad : kiln_cont(CTX, grad);
    if (NEED0) {
        T * a = SRC1->type == KILN_TYPE_F32 && SRC1->nb[0] == sizeof(float) ? SRC1 : kiln_cont(CTX, kiln_cast(CTX, SRC1, KILN_TYPE_F32));
        add_grad(b, SRC0, kiln_out_prod_id(CTX, a, g, ids, SRC0->ne[2]));
    }
    /* as may be a frozen quantized base: converted row by row, no f32 copy */
    if (NEED1) add_grad(b, SRC1, reduce_to(b, kiln_mul_mat_id_back(CTX, SRC0, g, ids), SRC1));
}
static void bwd_scale(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_scale(CTX, grad, kiln_get_op_params_f32(node, 0)));
}
static void bwd_reshape(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_reshape(CTX, kiln_is_contiguous(grad) ? grad : kiln_cont(CTX, grad), SRC0));
}
static void bwd_view(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    size_t offset;
    memcpy(&offset, node->op_params, sizeof(offset));
    /* scatter the view's gradient into a zero tensor shaped like the source */
    T * base = b->g->grads[slot_of(b->g, SRC0)];
    if (!base) base = kiln_scale(CTX, SRC0, 0.0f);
    if (!base) { b->ok = false; return; }
    T * r = kiln_acc(CTX, base, grad, node->nb[1], node->nb[2], node->nb[3], offset);
    if (!r) { b->ok = false; return; }
    b->g->grads[slot_of(b->g, SRC0)] = NULL; /* replaced, not summed */
    add_grad(b, SRC0, r);
}
static void bwd_permute(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    int q[4];
    for (int i = 0; i < 4; i++) q[node->op_params[i]] = i;
    add_grad(b, SRC0, kiln_permute(CTX, grad, q[0], q[1], q[2], q[3]));
}
static void bwd_transpose(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_transpose(CTX, grad));
}
static void bwd_get_rows(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_get_rows_back(CTX, grad, SRC1, SRC0));
}
static void bwd_diag_mask_inf(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_diag_mask_zero(CTX, grad, node->op_params[0]));
}
static void bwd_diag_mask_zero(struct bwd * b, T * node, T * grad) { bwd_diag_mask_inf(b, node, grad); }
static void bwd_soft_max(struct bwd * b, T * node, T * grad) {
    const float scale = kiln_get_op_params_f32(node, 0);
    const float max_bias = kiln_get_op_params_f32(node, 1);
    if (NEED0) add_grad(b, SRC0, kiln_soft_max_ext_back(CTX, grad, node, scale, max_bias));
}
static void bwd_rope(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    const int n_dims = node->op_params[1], mode = node->op_params[2], n_ctx_orig = node->op_params[4];
    float f[6];
    for (int i = 0; i < 6; i++) f[i] = kiln_get_op_params_f32(node, 5 + i);
    add_grad(b, SRC0, kiln_rope_back(CTX, grad, SRC1, node->src[2], n_dims, mode, n_ctx_orig, f[0], f[1], f[2], f[3], f[4], f[5]));
}
static void bwd_im2col(struct bwd * b, T * node, T * grad) {
    if (!NEED1) return;
    const int32_t * p = node->op_params;
    int64_t ne[4] = { SRC1->ne[0], SRC1->ne[1], SRC1->ne[2], SRC1->ne[3] };
    add_grad(b, SRC1, kiln_im2col_back(CTX, grad, SRC0, ne, p[0], p[1], p[2], p[3], p[4], p[5], p[6] != 0));
}
static void bwd_pool_2d(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    const int32_t * p = node->op_params;
    /* paddings are stored as int32, as ggml does, though the API takes floats */
    add_grad(b, SRC0, kiln_pool_2d_back(CTX, grad, SRC0, (enum kiln_op_pool) p[0], p[1], p[2], p[3], p[4],
                                        (float) p[5], (float) p[6]));
}
static void bwd_cross_entropy_loss(struct bwd * b, T * node, T * grad) {
    if (NEED0) add_grad(b, SRC0, kiln_cross_entropy_loss_back(CTX, grad, SRC0, SRC1));
}
/* GELU, tanh form (the forward's): y = x (1 + tanh u) / 2, u = c (x + a x^3);
 * dy/dx = (1 + t)/2 + x (1 - t^2) c (1 + 3 a x^2) / 2 with t = tanh u, built
 * without constant tensors: g/2 + g t/2 + (c/2) (w + 3a w x^2), w = g x (1 - t^2) */
static T * gelu_grad(struct bwd * b, T * x, T * g) {
    const float a = 0.044715f, c = 0.79788456080286535587989211986876f;
    T * x2 = kiln_sqr(CTX, x);
    T * t = kiln_tanh(CTX, kiln_scale(CTX, kiln_add(CTX, x, kiln_scale(CTX, kiln_mul(CTX, x2, x), a)), c));
    T * gx = kiln_mul(CTX, g, x);
    T * w = kiln_sub(CTX, gx, kiln_mul(CTX, gx, kiln_sqr(CTX, t)));
    T * w2 = kiln_add(CTX, w, kiln_scale(CTX, kiln_mul(CTX, w, x2), 3.0f * a));
    return kiln_add(CTX, kiln_add(CTX, kiln_scale(CTX, g, 0.5f), kiln_scale(CTX, kiln_mul(CTX, g, t), 0.5f)),
                    kiln_scale(CTX, w2, 0.5f * c));
}
static void bwd_leaky_relu(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    /* 1 where x > 0, else the slope */
    const float slope = kiln_get_op_params_f32(node, 0);
    T * gm = kiln_mul(CTX, grad, kiln_step(CTX, SRC0));
    add_grad(b, SRC0, kiln_add(CTX, gm, kiln_scale(CTX, kiln_sub(CTX, grad, gm), slope)));
}
static void bwd_unary(struct bwd * b, T * node, T * grad) {
    if (!NEED0) return;
    switch (kiln_get_unary_op(node)) {
        case KILN_UNARY_OP_ABS:     add_grad(b, SRC0, kiln_mul(CTX, grad, kiln_sgn(CTX, SRC0))); break;
        case KILN_UNARY_OP_NEG:     add_grad(b, SRC0, neg(b, grad)); break;
        case KILN_UNARY_OP_SGN:
        case KILN_UNARY_OP_STEP:    break; /* piecewise constant: zero gradient */
        case KILN_UNARY_OP_RELU:    add_grad(b, SRC0, kiln_mul(CTX, grad, kiln_step(CTX, SRC0))); break;
        case KILN_UNARY_OP_SILU:    add_grad(b, SRC0, kiln_silu_back(CTX, SRC0, grad)); break;
        case KILN_UNARY_OP_EXP:     add_grad(b, SRC0, kiln_mul(CTX, grad, node)); break;
        case KILN_UNARY_OP_TANH:    /* 1 - tanh^2 */
            add_grad(b, SRC0, kiln_sub(CTX, grad, kiln_mul(CTX, grad, kiln_sqr(CTX, node)))); break;
        case KILN_UNARY_OP_SIGMOID: /* s (1 - s) */
            add_grad(b, SRC0, kiln_mul(CTX, grad, kiln_sub(CTX, node, kiln_sqr(CTX, node)))); break;
        case KILN_UNARY_OP_GELU:    add_grad(b, SRC0, gelu_grad(b, SRC0, grad)); break;
        case KILN_UNARY_OP_GELU_QUICK: { /* y = x s(kx): s + k x s (1 - s) */
            const float k = 1.702f;
            T * sg = kiln_sigmoid(CTX, kiln_scale(CTX, SRC0, k));
            T * gx = kiln_mul(CTX, grad, SRC0);
            add_grad(b, SRC0, kiln_add(CTX, kiln_mul(CTX, grad, sg),
                                       kiln_scale(CTX, kiln_mul(CTX, gx, kiln_sub(CTX, sg, kiln_sqr(CTX, sg))), k)));
            break;
        }
        case KILN_UNARY_OP_ELU: { /* 1 where x > 0, else e^x = y + 1 */
            T * m = kiln_step(CTX, SRC0);
            T * r = kiln_add(CTX, kiln_mul(CTX, grad, node), grad);
            add_grad(b, SRC0, kiln_add(CTX, kiln_mul(CTX, grad, m), kiln_sub(CTX, r, kiln_mul(CTX, r, m))));
            break;
        }
        default:
            kiln_set_error("backward: unary op %s has no backward rule (needed for '%s')",
                           kiln_unary_op_name(kiln_get_unary_op(node)), node->name);
            b->ok = false;
    }
}

/* dispatch from the op table's grad column */
static bool dispatch(struct bwd * b, T * node, T * grad) {
#define GRAD_0(lower) (kiln_set_error("backward: op %s has no backward rule (needed for the gradient of '%s')", \
                                      kiln_op_name(node->op), node->name), false)
#define GRAD_1(lower) (bwd_##lower(b, node, grad), b->ok)
#define GRAD_CASE_(UPPER, lower, sym, n_src, tasks, work, grad_) case KILN_OP_##UPPER: return GRAD_##grad_(lower);
    switch (node->op) {
        KILN_OP_LIST(GRAD_CASE_)
        default: return false;
    }
#undef GRAD_CASE_
#undef GRAD_1
#undef GRAD_0
}

enum kiln_status kiln_build_backward_expand(struct kiln_context * ctx, struct kiln_cgraph * g, struct kiln_tensor ** grad_accs) {
    if (!ctx || !g) { kiln_set_error("build_backward_expand: context or graph is NULL"); return KILN_STATUS_INVALID_ARG; }
    if (!g->grads) {
        kiln_set_error("build_backward_expand: the graph has no gradient storage (create it with kiln_new_graph_custom(ctx, size, true))");
        return KILN_STATUS_INVALID_ARG;
    }
    const int n_fwd = g->n_nodes;
    struct bwd b = { ctx, g, (bool *) calloc(g->visited_hash_set.size, sizeof(bool)), true };
    if (!b.needs) { kiln_set_error("build_backward_expand: out of memory"); return KILN_STATUS_ALLOC_FAILED; }

    /* which tensors need a gradient: params and everything computed from them */
    bool any_loss = false;
    for (int i = 0; i < g->n_leafs; i++) {
        T * t = g->leafs[i];
        if (t->flags & KILN_TENSOR_FLAG_PARAM) b.needs[slot_of(g, t)] = true;
    }
    for (int i = 0; i < n_fwd; i++) {
        T * node = g->nodes[i];
        bool need = (node->flags & KILN_TENSOR_FLAG_PARAM) != 0;
        for (int s = 0; s < KILN_MAX_SRC && !need; s++) need = needs_grad(&b, node->src[s]);
        b.needs[slot_of(g, node)] = need;
        if (node->flags & KILN_TENSOR_FLAG_LOSS) any_loss = true;
    }
    if (!any_loss) {
        free(b.needs);
        kiln_set_error("build_backward_expand: no tensor in the graph is marked as loss (kiln_set_loss)");
        return KILN_STATUS_INVALID_ARG;
    }

    /* seed: loss gradients (set to 1 by kiln_graph_reset), accumulators */
    for (int i = 0; i < n_fwd; i++) {
        T * node = g->nodes[i];
        const size_t s = slot_of(g, node);
        if (node->flags & KILN_TENSOR_FLAG_LOSS) {
            if (node->type != KILN_TYPE_F32) {
                free(b.needs);
                kiln_set_error("build_backward_expand: loss '%s' must be F32", node->name);
                return KILN_STATUS_INVALID_ARG;
            }
            T * lg = kiln_new_tensor(ctx, KILN_TYPE_F32, KILN_MAX_DIMS, node->ne);
            if (!lg) { free(b.needs); return KILN_STATUS_ALLOC_FAILED; }
            kiln_format_name(lg, "%s (grad)", node->name);
            kiln_set_input(lg);
            g->grads[s] = lg;
        }
        if (grad_accs && grad_accs[i]) {
            if (!(node->flags & KILN_TENSOR_FLAG_PARAM) || !kiln_are_same_shape(grad_accs[i], node)) {
                free(b.needs);
                kiln_set_error("build_backward_expand: grad_accs[%d] must belong to a PARAM node of the same shape", i);
                return KILN_STATUS_INVALID_ARG;
            }
            g->grad_accs[s] = grad_accs[i];
            g->grads[s] = grad_accs[i];
        }
    }
    for (int i = n_fwd - 1; i >= 0 && b.ok; i--) {
        T * node = g->nodes[i];
        T * grad = g->grads[slot_of(g, node)];
        if (!grad || !b.needs[slot_of(g, node)]) continue;
        bool any_src = false;
        for (int s = 0; s < KILN_MAX_SRC; s++) any_src |= needs_grad(&b, node->src[s]);
        if (!any_src) continue;
        if (!dispatch(&b, node, grad)) b.ok = false;
    }

    /* append the gradients of the params to the graph */
    for (int i = 0; b.ok && i < g->n_leafs + n_fwd; i++) {
        T * t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
        if (!(t->flags & KILN_TENSOR_FLAG_PARAM)) continue;
        T * gr = g->grads[slot_of(g, t)];
        if (!gr) continue;
        if (kiln_build_forward_expand(g, gr) != KILN_STATUS_SUCCESS) b.ok = false;
    }
    free(b.needs);
    return b.ok ? KILN_STATUS_SUCCESS : KILN_STATUS_FAILED;
}

struct kiln_tensor * kiln_graph_get_grad(const struct kiln_cgraph * g, const struct kiln_tensor * node) {
    if (!g || !node || !g->grads || !kiln_hash_contains(&g->visited_hash_set, node)) return NULL;
    return g->grads[slot_of(g, node)];
}

struct kiln_tensor * kiln_graph_get_grad_acc(const struct kiln_cgraph * g, const struct kiln_tensor * node) {
    if (!g || !node || !g->grad_accs || !kiln_hash_contains(&g->visited_hash_set, node)) return NULL;
    return g->grad_accs[slot_of(g, node)];
}

void kiln_graph_reset(struct kiln_cgraph * g) {
    if (!g) return;
    for (int i = 0; i < g->n_nodes; i++) {
        T * node = g->nodes[i];
        if (node->op == KILN_OP_OPT_STEP_ADAMW) {
            /* moments restart from zero */
            if (node->src[2] && node->src[2]->data) kiln_set_zero(node->src[2]);
            if (node->src[3] && node->src[3]->data) kiln_set_zero(node->src[3]);
        }
    }
    if (!g->grads) return;
    for (int i = 0; i < g->n_leafs + g->n_nodes; i++) {
        T * t = i < g->n_leafs ? g->leafs[i] : g->nodes[i - g->n_leafs];
        const size_t s = slot_of(g, t);
        T * gr = g->grads[s];
        T * acc = g->grad_accs[s];
        if (t->flags & KILN_TENSOR_FLAG_LOSS) {
            if (gr && gr->data) kiln_set_f32(gr, 1.0f);
        } else if (acc && acc->data) {
            kiln_set_zero(acc);
        } else if (gr && gr->data && !gr->view_src) {
            kiln_set_zero(gr);
        }
    }
}
