/*
 * kiln_wasm_ops.c — op builders over handles. Each records one op (the
 * kiln_* constructor validates and names bad shapes) into a new handle
 * whose result memory is allocated now; nothing is computed until
 * kw_compute().
 *
 * Constructors are referenced weakly: the ABI links whatever subset of
 * ops the library has, and an op that is not built reports so at call time.
 */
#include "kiln_wasm_internal.h"

#include <string.h>

#define WEAK_OPS(X) \
    X(kiln_sqr) X(kiln_sqrt) X(kiln_log) X(kiln_sin) X(kiln_cos) X(kiln_sum) X(kiln_sum_rows) \
    X(kiln_mean) X(kiln_argmax) X(kiln_abs) X(kiln_sgn) X(kiln_neg) X(kiln_step) X(kiln_tanh) \
    X(kiln_elu) X(kiln_relu) X(kiln_sigmoid) X(kiln_gelu) X(kiln_gelu_quick) X(kiln_silu) \
    X(kiln_hardswish) X(kiln_hardsigmoid) X(kiln_exp) X(kiln_soft_max) X(kiln_cont) \
    X(kiln_transpose) X(kiln_diag) X(kiln_dup) \
    X(kiln_add) X(kiln_sub) X(kiln_mul) X(kiln_div) X(kiln_mul_mat) X(kiln_out_prod) \
    X(kiln_get_rows) X(kiln_repeat) X(kiln_repeat_back) X(kiln_count_equal) X(kiln_silu_back) \
    X(kiln_cpy) X(kiln_add1) X(kiln_cross_entropy_loss) \
    X(kiln_scale) X(kiln_norm) X(kiln_rms_norm) X(kiln_leaky_relu) X(kiln_clamp) \
    X(kiln_soft_max_ext) X(kiln_rope_ext) X(kiln_reshape_4d) X(kiln_permute) X(kiln_cast) \
    X(kiln_concat) X(kiln_diag_mask_inf) X(kiln_diag_mask_zero) X(kiln_argsort) X(kiln_top_k) \
    X(kiln_group_norm) X(kiln_pad) X(kiln_flash_attn_ext) X(kiln_arange) X(kiln_conv_2d) \
    X(kiln_pool_2d) X(kiln_view_4d)
#define PRAGMA_WEAK_(f) _Pragma(KW_STR(weak f))
#define KW_STR(x) #x
WEAK_OPS(PRAGMA_WEAK_)

typedef struct kiln_tensor * (*unary_fn)(struct kiln_context *, struct kiln_tensor *);
typedef struct kiln_tensor * (*binary_fn)(struct kiln_context *, struct kiln_tensor *, struct kiln_tensor *);

static const struct { const char * name; unary_fn fn; } UNARY[] = {
    { "sqr", kiln_sqr }, { "sqrt", kiln_sqrt }, { "log", kiln_log }, { "sin", kiln_sin }, { "cos", kiln_cos },
    { "sum", kiln_sum }, { "sumRows", kiln_sum_rows }, { "mean", kiln_mean }, { "argmax", kiln_argmax },
    { "abs", kiln_abs }, { "sgn", kiln_sgn }, { "neg", kiln_neg }, { "step", kiln_step }, { "tanh", kiln_tanh },
    { "elu", kiln_elu }, { "relu", kiln_relu }, { "sigmoid", kiln_sigmoid }, { "gelu", kiln_gelu },
    { "geluQuick", kiln_gelu_quick }, { "silu", kiln_silu }, { "hardswish", kiln_hardswish },
    { "hardsigmoid", kiln_hardsigmoid }, { "exp", kiln_exp }, { "softmax", kiln_soft_max },
    { "cont", kiln_cont }, { "transpose", kiln_transpose }, { "diag", kiln_diag }, { "dup", kiln_dup },
};
static const struct { const char * name; binary_fn fn; } BINARY[] = {
    { "add", kiln_add }, { "sub", kiln_sub }, { "mul", kiln_mul }, { "div", kiln_div },
    { "matmul", kiln_mul_mat }, { "outProd", kiln_out_prod }, { "getRows", kiln_get_rows },
    { "repeat", kiln_repeat }, { "repeatBack", kiln_repeat_back }, { "countEqual", kiln_count_equal },
    { "siluBack", kiln_silu_back }, { "cpy", kiln_cpy }, { "add1", kiln_add1 },
    { "crossEntropyLoss", kiln_cross_entropy_loss },
};
#define N_UNARY  ((int) (sizeof UNARY / sizeof UNARY[0]))
#define N_BINARY ((int) (sizeof BINARY / sizeof BINARY[0]))

KW_EXPORT int kw_unary_count(void) { return N_UNARY; }
KW_EXPORT const char * kw_unary_name(int i) { return i >= 0 && i < N_UNARY ? UNARY[i].name : ""; }
KW_EXPORT int kw_unary_built(int i) { return i >= 0 && i < N_UNARY && UNARY[i].fn != NULL; }
KW_EXPORT int kw_binary_count(void) { return N_BINARY; }
KW_EXPORT const char * kw_binary_name(int i) { return i >= 0 && i < N_BINARY ? BINARY[i].name : ""; }
KW_EXPORT int kw_binary_built(int i) { return i >= 0 && i < N_BINARY && BINARY[i].fn != NULL; }

/* ------------------------------------------------------------ plumbing */

struct call {
    const char * fn;
    struct kiln_context * ctx;
    struct kiln_tensor * t[4];
    int slot[4];
    int n;
};

/* Resolves the input handles (0 allowed where optional bit i is set) and
 * makes the context the result will live in. */
static int call_begin(struct call * c, const char * fn, int n, const int * hs, unsigned optional) {
    memset(c, 0, sizeof *c);
    c->fn = fn;
    c->n = n;
    for (int i = 0; i < n; i++) {
        if (hs[i] == 0 && (optional >> i & 1)) { c->slot[i] = 0; c->t[i] = NULL; continue; }
        const int s = kw_slot(hs[i], KW_KIND_TENSOR, fn);
        if (s < 0) return s;
        c->slot[i] = s;
        c->t[i] = kw_entry_slot(s)->t;
    }
    /* room for the result and the helper tensors some constructors add */
    c->ctx = kw_new_ctx(8, 1024);
    if (!c->ctx) return kw_fail_kiln(KW_E_NOMEM, fn);
    return KW_OK;
}

static int not_built(const char * name) {
    return kw_fail(KW_E_UNSUPPORTED, "%s: this build of kiln has no such op yet", name);
}

static bool in_ctx(struct kiln_context * ctx, const struct kiln_tensor * r) {
    for (struct kiln_tensor * t = kiln_get_first_tensor(ctx); t; t = kiln_get_next_tensor(ctx, t)) if (t == r) return true;
    return false;
}

static int call_end(struct call * c, struct kiln_tensor * r) {
    if (!r) {
        kiln_free(c->ctx);
        return kw_fail_kiln(KW_E_INVALID, c->fn);
    }
    /* a constructor may hand back an input unchanged: wrap it in a view so
     * the handle owns what it points at */
    if (!in_ctx(c->ctx, r)) {
        r = kiln_view_tensor(c->ctx, r);
        if (!r) { kiln_free(c->ctx); return kw_fail_kiln(KW_E_NOMEM, c->fn); }
    }
    const int slot = kw_entry_new(KW_KIND_TENSOR);
    if (slot < 0) { kiln_free(c->ctx); return slot; }
    struct kw_entry * e = kw_entry_slot(slot);
    e->ctx = c->ctx;
    e->t = r;
    for (int i = 0; i < c->n; i++) if (c->slot[i]) kw_entry_add_dep(slot, c->slot[i]);
    const int rc = kw_alloc_ctx(e);
    if (rc < 0) { kw_entry_discard(slot); return rc; }
    return kw_handle_of(slot);
}

#define BEGIN(NAME, FN, OPT, ...) \
    if (!(FN)) return not_built(NAME); \
    struct call c; \
    const int hs_[] = { __VA_ARGS__ }; \
    { const int rc_ = call_begin(&c, NAME, (int) (sizeof hs_ / sizeof hs_[0]), hs_, OPT); \
      if (rc_ < 0) { if (c.ctx) kiln_free(c.ctx); return rc_; } }

/* ------------------------------------------------------------ ops */

KW_EXPORT int kw_op_unary(int which, int a) {
    if (which < 0 || which >= N_UNARY) return kw_fail(KW_E_INVALID, "unary op %d does not exist", which);
    BEGIN(UNARY[which].name, UNARY[which].fn, 0, a);
    return call_end(&c, UNARY[which].fn(c.ctx, c.t[0]));
}

KW_EXPORT int kw_op_binary(int which, int a, int b) {
    if (which < 0 || which >= N_BINARY) return kw_fail(KW_E_INVALID, "binary op %d does not exist", which);
    BEGIN(BINARY[which].name, BINARY[which].fn, 0, a, b);
    return call_end(&c, BINARY[which].fn(c.ctx, c.t[0], c.t[1]));
}

KW_EXPORT int kw_op_scale(int a, float s) {
    BEGIN("scale", kiln_scale, 0, a);
    return call_end(&c, kiln_scale(c.ctx, c.t[0], s));
}
KW_EXPORT int kw_op_norm(int a, float eps) {
    BEGIN("norm", kiln_norm, 0, a);
    return call_end(&c, kiln_norm(c.ctx, c.t[0], eps));
}
KW_EXPORT int kw_op_rms_norm(int a, float eps) {
    BEGIN("rmsNorm", kiln_rms_norm, 0, a);
    return call_end(&c, kiln_rms_norm(c.ctx, c.t[0], eps));
}
KW_EXPORT int kw_op_group_norm(int a, int n_groups, float eps) {
    BEGIN("groupNorm", kiln_group_norm, 0, a);
    return call_end(&c, kiln_group_norm(c.ctx, c.t[0], n_groups, eps));
}
KW_EXPORT int kw_op_leaky_relu(int a, float slope) {
    BEGIN("leakyRelu", kiln_leaky_relu, 0, a);
    return call_end(&c, kiln_leaky_relu(c.ctx, c.t[0], slope, false));
}
KW_EXPORT int kw_op_clamp(int a, float lo, float hi) {
    BEGIN("clamp", kiln_clamp, 0, a);
    return call_end(&c, kiln_clamp(c.ctx, c.t[0], lo, hi));
}
KW_EXPORT int kw_op_soft_max_ext(int a, int mask, float scale, float max_bias) {
    BEGIN("softmaxExt", kiln_soft_max_ext, 2u, a, mask);
    return call_end(&c, kiln_soft_max_ext(c.ctx, c.t[0], c.t[1], scale, max_bias));
}
KW_EXPORT int kw_op_rope_ext(int a, int pos, int freq_factors, int n_dims, int mode, int n_ctx_orig,
                             float freq_base, float freq_scale, float ext_factor, float attn_factor,
                             float beta_fast, float beta_slow) {
    BEGIN("rope", kiln_rope_ext, 4u, a, pos, freq_factors);
    return call_end(&c, kiln_rope_ext(c.ctx, c.t[0], c.t[1], c.t[2], n_dims, mode, n_ctx_orig, freq_base, freq_scale,
                                      ext_factor, attn_factor, beta_fast, beta_slow));
}
static int64_t ne_arg(double v) { return (v >= 1 && v <= 9007199254740991.0 && v == (double) (int64_t) v) ? (int64_t) v : -1; }
KW_EXPORT int kw_op_reshape(int a, double ne0, double ne1, double ne2, double ne3) {
    BEGIN("reshape", kiln_reshape_4d, 0, a);
    const int64_t n[4] = { ne_arg(ne0), ne_arg(ne1), ne_arg(ne2), ne_arg(ne3) };
    if (n[0] < 0 || n[1] < 0 || n[2] < 0 || n[3] < 0) {
        kiln_free(c.ctx);
        return kw_fail(KW_E_INVALID, "reshape: [%g, %g, %g, %g] is not a shape", ne0, ne1, ne2, ne3);
    }
    return call_end(&c, kiln_reshape_4d(c.ctx, c.t[0], n[0], n[1], n[2], n[3]));
}
KW_EXPORT int kw_op_permute(int a, int ax0, int ax1, int ax2, int ax3) {
    BEGIN("permute", kiln_permute, 0, a);
    return call_end(&c, kiln_permute(c.ctx, c.t[0], ax0, ax1, ax2, ax3));
}
KW_EXPORT int kw_op_view(int a, double ne0, double ne1, double ne2, double ne3, double nb1, double nb2, double nb3, double offset) {
    BEGIN("view", kiln_view_4d, 0, a);
    const int64_t n[4] = { ne_arg(ne0), ne_arg(ne1), ne_arg(ne2), ne_arg(ne3) };
    if (n[0] < 0 || n[1] < 0 || n[2] < 0 || n[3] < 0 || !(nb1 >= 0 && nb2 >= 0 && nb3 >= 0 && offset >= 0) ||
        nb1 > 4294967295.0 || nb2 > 4294967295.0 || nb3 > 4294967295.0 || offset > 4294967295.0) {
        kiln_free(c.ctx);
        return kw_fail(KW_E_INVALID, "view: [%g, %g, %g, %g] strides [%g, %g, %g] offset %g is not a view",
                       ne0, ne1, ne2, ne3, nb1, nb2, nb3, offset);
    }
    return call_end(&c, kiln_view_4d(c.ctx, c.t[0], n[0], n[1], n[2], n[3], (size_t) nb1, (size_t) nb2, (size_t) nb3, (size_t) offset));
}
KW_EXPORT int kw_op_cast(int a, int type) {
    BEGIN("cast", kiln_cast, 0, a);
    if (!kiln_type_is_valid(type)) { kiln_free(c.ctx); return kw_fail(KW_E_INVALID, "cast: %d is not a tensor type", type); }
    return call_end(&c, kiln_cast(c.ctx, c.t[0], (enum kiln_type) type));
}
KW_EXPORT int kw_op_concat(int a, int b, int dim) {
    BEGIN("concat", kiln_concat, 0, a, b);
    return call_end(&c, kiln_concat(c.ctx, c.t[0], c.t[1], dim));
}
KW_EXPORT int kw_op_diag_mask_inf(int a, int n_past) {
    BEGIN("diagMaskInf", kiln_diag_mask_inf, 0, a);
    return call_end(&c, kiln_diag_mask_inf(c.ctx, c.t[0], n_past));
}
KW_EXPORT int kw_op_diag_mask_zero(int a, int n_past) {
    BEGIN("diagMaskZero", kiln_diag_mask_zero, 0, a);
    return call_end(&c, kiln_diag_mask_zero(c.ctx, c.t[0], n_past));
}
KW_EXPORT int kw_op_argsort(int a, int descending) {
    BEGIN("argsort", kiln_argsort, 0, a);
    return call_end(&c, kiln_argsort(c.ctx, c.t[0], descending ? KILN_SORT_ORDER_DESC : KILN_SORT_ORDER_ASC));
}
KW_EXPORT int kw_op_top_k(int a, int k) {
    BEGIN("topK", kiln_top_k, 0, a);
    return call_end(&c, kiln_top_k(c.ctx, c.t[0], k));
}
KW_EXPORT int kw_op_pad(int a, int p0, int p1, int p2, int p3) {
    BEGIN("pad", kiln_pad, 0, a);
    return call_end(&c, kiln_pad(c.ctx, c.t[0], p0, p1, p2, p3));
}
KW_EXPORT int kw_op_flash_attn_ext(int q, int k, int v, int mask, float scale, float max_bias, float softcap) {
    BEGIN("flashAttnExt", kiln_flash_attn_ext, 8u, q, k, v, mask);
    return call_end(&c, kiln_flash_attn_ext(c.ctx, c.t[0], c.t[1], c.t[2], c.t[3], scale, max_bias, softcap));
}
KW_EXPORT int kw_op_conv_2d(int a, int b, int s0, int s1, int p0, int p1, int d0, int d1) {
    BEGIN("conv2d", kiln_conv_2d, 0, a, b);
    return call_end(&c, kiln_conv_2d(c.ctx, c.t[0], c.t[1], s0, s1, p0, p1, d0, d1));
}
KW_EXPORT int kw_op_pool_2d(int a, int op, int k0, int k1, int s0, int s1, float p0, float p1) {
    BEGIN("pool2d", kiln_pool_2d, 0, a);
    if (op != KILN_OP_POOL_MAX && op != KILN_OP_POOL_AVG) { kiln_free(c.ctx); return kw_fail(KW_E_INVALID, "pool2d: op %d", op); }
    return call_end(&c, kiln_pool_2d(c.ctx, c.t[0], (enum kiln_op_pool) op, k0, k1, s0, s1, p0, p1));
}
KW_EXPORT int kw_op_arange(float start, float stop, float step) {
    if (!kiln_arange) return not_built("arange");
    struct call c;
    const int rc = call_begin(&c, "arange", 0, NULL, 0);
    if (rc < 0) return rc;
    return call_end(&c, kiln_arange(c.ctx, start, stop, step));
}
