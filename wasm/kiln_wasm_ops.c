/*
 * kiln_wasm_ops.c — op builders over handles. Each records one op (the
 * kiln_* constructor validates and names bad shapes) into a new handle
 * whose result memory is allocated now; nothing is computed until
 * kw_compute().
 *
 * KW_OPS below is the one list of the ops the JS package can build: each
 * row gives the op's JS name, its inputs (t: a tensor, o: an optional
 * tensor, 0 when absent) and its parameters in call order (i: a 32-bit
 * integer, f: a float, d: a double, for extents and byte counts). The
 * worker reads the table at init (kw_op_count, kw_op_name, kw_op_inputs,
 * kw_op_params) and builds every op through kw_op(); the Tensor methods of
 * js/src/kiln.ts pass their arguments in this order.
 */
#include "kiln_wasm_internal.h"

#include <math.h>
#include <string.h>

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

/* ------------------------------------------------------------ ops */

typedef int (*op_fn)(struct call * c, const double * p);

#define UNARY(NAME, FN) static int op_##NAME(struct call * c, const double * p) { (void) p; return call_end(c, FN(c->ctx, c->t[0])); }
#define BINARY(NAME, FN) static int op_##NAME(struct call * c, const double * p) { (void) p; return call_end(c, FN(c->ctx, c->t[0], c->t[1])); }

UNARY(sqr, kiln_sqr) UNARY(sqrt, kiln_sqrt) UNARY(log, kiln_log) UNARY(sin, kiln_sin) UNARY(cos, kiln_cos)
UNARY(sum, kiln_sum) UNARY(sumRows, kiln_sum_rows) UNARY(mean, kiln_mean) UNARY(argmax, kiln_argmax)
UNARY(abs, kiln_abs) UNARY(sgn, kiln_sgn) UNARY(neg, kiln_neg) UNARY(step, kiln_step) UNARY(tanh, kiln_tanh)
UNARY(elu, kiln_elu) UNARY(relu, kiln_relu) UNARY(sigmoid, kiln_sigmoid) UNARY(gelu, kiln_gelu)
UNARY(geluQuick, kiln_gelu_quick) UNARY(silu, kiln_silu) UNARY(hardswish, kiln_hardswish)
UNARY(hardsigmoid, kiln_hardsigmoid) UNARY(exp, kiln_exp) UNARY(softmax, kiln_soft_max) UNARY(cont, kiln_cont)
UNARY(transpose, kiln_transpose) UNARY(diag, kiln_diag) UNARY(dup, kiln_dup)
BINARY(add, kiln_add) BINARY(sub, kiln_sub) BINARY(mul, kiln_mul) BINARY(div, kiln_div)
/* a tensor program's matmul takes Kiln's packed GEMM (kiln.h: kiln_mm_order);
 * the model graphs keep llama.cpp's order */
static struct kiln_tensor * matmul_fast(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    struct kiln_tensor * r = kiln_mul_mat(ctx, a, b);
    if (r) kiln_mul_mat_set_order(r, KILN_MM_ORDER_FAST);
    return r;
}
BINARY(matmul, matmul_fast)
BINARY(outProd, kiln_out_prod) BINARY(getRows, kiln_get_rows) BINARY(repeat, kiln_repeat)
BINARY(repeatBack, kiln_repeat_back) BINARY(countEqual, kiln_count_equal) BINARY(siluBack, kiln_silu_back)
BINARY(cpy, kiln_cpy) BINARY(add1, kiln_add1) BINARY(crossEntropyLoss, kiln_cross_entropy_loss)

static int fail_free(struct call * c, int code, const char * fmt, double a, double b, double d, double e) {
    kiln_free(c->ctx);
    return kw_fail(code, fmt, c->fn, a, b, d, e);
}

static int op_scale(struct call * c, const double * p) { return call_end(c, kiln_scale(c->ctx, c->t[0], (float) p[0])); }
static int op_norm(struct call * c, const double * p) { return call_end(c, kiln_norm(c->ctx, c->t[0], (float) p[0])); }
static int op_rmsNorm(struct call * c, const double * p) { return call_end(c, kiln_rms_norm(c->ctx, c->t[0], (float) p[0])); }
static int op_groupNorm(struct call * c, const double * p) { return call_end(c, kiln_group_norm(c->ctx, c->t[0], (int) p[0], (float) p[1])); }
static int op_leakyRelu(struct call * c, const double * p) { return call_end(c, kiln_leaky_relu(c->ctx, c->t[0], (float) p[0], false)); }
static int op_clamp(struct call * c, const double * p) { return call_end(c, kiln_clamp(c->ctx, c->t[0], (float) p[0], (float) p[1])); }
static int op_softmaxExt(struct call * c, const double * p) {
    return call_end(c, kiln_soft_max_ext(c->ctx, c->t[0], c->t[1], (float) p[0], (float) p[1]));
}
static int op_rope(struct call * c, const double * p) {
    return call_end(c, kiln_rope_ext(c->ctx, c->t[0], c->t[1], c->t[2], (int) p[0], (int) p[1], (int) p[2], (float) p[3],
                                     (float) p[4], (float) p[5], (float) p[6], (float) p[7], (float) p[8]));
}
static int64_t ne_arg(double v) { return (v >= 1 && v <= 9007199254740991.0 && v == (double) (int64_t) v) ? (int64_t) v : -1; }
static int op_reshape(struct call * c, const double * p) {
    const int64_t n[4] = { ne_arg(p[0]), ne_arg(p[1]), ne_arg(p[2]), ne_arg(p[3]) };
    if (n[0] < 0 || n[1] < 0 || n[2] < 0 || n[3] < 0) return fail_free(c, KW_E_INVALID, "%s: [%g, %g, %g, %g] is not a shape", p[0], p[1], p[2], p[3]);
    return call_end(c, kiln_reshape_4d(c->ctx, c->t[0], n[0], n[1], n[2], n[3]));
}
static int op_permute(struct call * c, const double * p) {
    return call_end(c, kiln_permute(c->ctx, c->t[0], (int) p[0], (int) p[1], (int) p[2], (int) p[3]));
}
static int op_view(struct call * c, const double * p) {
    const int64_t n[4] = { ne_arg(p[0]), ne_arg(p[1]), ne_arg(p[2]), ne_arg(p[3]) };
    bool ok = n[0] >= 0 && n[1] >= 0 && n[2] >= 0 && n[3] >= 0;
    for (int i = 4; i < 8; i++) ok = ok && p[i] >= 0 && p[i] <= 4294967295.0 && p[i] == floor(p[i]);
    if (!ok) {
        kiln_free(c->ctx);
        return kw_fail(KW_E_INVALID, "view: [%g, %g, %g, %g] strides [%g, %g, %g] offset %g is not a view",
                       p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
    }
    return call_end(c, kiln_view_4d(c->ctx, c->t[0], n[0], n[1], n[2], n[3], (size_t) p[4], (size_t) p[5], (size_t) p[6], (size_t) p[7]));
}
static int op_cast(struct call * c, const double * p) {
    if (!kiln_type_is_valid((int) p[0])) return fail_free(c, KW_E_INVALID, "%s: %g is not a tensor type", p[0], 0, 0, 0);
    return call_end(c, kiln_cast(c->ctx, c->t[0], (enum kiln_type) (int) p[0]));
}
static int op_concat(struct call * c, const double * p) { return call_end(c, kiln_concat(c->ctx, c->t[0], c->t[1], (int) p[0])); }
static int op_diagMaskInf(struct call * c, const double * p) { return call_end(c, kiln_diag_mask_inf(c->ctx, c->t[0], (int) p[0])); }
static int op_diagMaskZero(struct call * c, const double * p) { return call_end(c, kiln_diag_mask_zero(c->ctx, c->t[0], (int) p[0])); }
static int op_argsort(struct call * c, const double * p) {
    return call_end(c, kiln_argsort(c->ctx, c->t[0], p[0] != 0 ? KILN_SORT_ORDER_DESC : KILN_SORT_ORDER_ASC));
}
static int op_topK(struct call * c, const double * p) { return call_end(c, kiln_top_k(c->ctx, c->t[0], (int) p[0])); }
static int op_pad(struct call * c, const double * p) {
    return call_end(c, kiln_pad(c->ctx, c->t[0], (int) p[0], (int) p[1], (int) p[2], (int) p[3]));
}
static int op_flashAttnExt(struct call * c, const double * p) {
    return call_end(c, kiln_flash_attn_ext(c->ctx, c->t[0], c->t[1], c->t[2], c->t[3], (float) p[0], (float) p[1], (float) p[2]));
}
static int op_conv2d(struct call * c, const double * p) {
    return call_end(c, kiln_conv_2d(c->ctx, c->t[0], c->t[1], (int) p[0], (int) p[1], (int) p[2], (int) p[3], (int) p[4], (int) p[5]));
}
static int op_pool2d(struct call * c, const double * p) {
    const int op = (int) p[0];
    if (op != KILN_OP_POOL_MAX && op != KILN_OP_POOL_AVG) return fail_free(c, KW_E_INVALID, "%s: op %g is not max (0) or avg (1)", p[0], 0, 0, 0);
    return call_end(c, kiln_pool_2d(c->ctx, c->t[0], (enum kiln_op_pool) op, (int) p[1], (int) p[2], (int) p[3], (int) p[4],
                                    (float) p[5], (float) p[6]));
}
static int op_arange(struct call * c, const double * p) { return call_end(c, kiln_arange(c->ctx, (float) p[0], (float) p[1], (float) p[2])); }

/* name, inputs, params (see the top of the file) */
#define KW_OPS(X) \
    X(sqr, "t", "") X(sqrt, "t", "") X(log, "t", "") X(sin, "t", "") X(cos, "t", "") X(sum, "t", "") \
    X(sumRows, "t", "") X(mean, "t", "") X(argmax, "t", "") X(abs, "t", "") X(sgn, "t", "") X(neg, "t", "") \
    X(step, "t", "") X(tanh, "t", "") X(elu, "t", "") X(relu, "t", "") X(sigmoid, "t", "") X(gelu, "t", "") \
    X(geluQuick, "t", "") X(silu, "t", "") X(hardswish, "t", "") X(hardsigmoid, "t", "") X(exp, "t", "") \
    X(softmax, "t", "") X(cont, "t", "") X(transpose, "t", "") X(diag, "t", "") X(dup, "t", "") \
    X(add, "tt", "") X(sub, "tt", "") X(mul, "tt", "") X(div, "tt", "") X(matmul, "tt", "") X(outProd, "tt", "") \
    X(getRows, "tt", "") X(repeat, "tt", "") X(repeatBack, "tt", "") X(countEqual, "tt", "") X(siluBack, "tt", "") \
    X(cpy, "tt", "") X(add1, "tt", "") X(crossEntropyLoss, "tt", "") \
    X(scale, "t", "f") X(norm, "t", "f") X(rmsNorm, "t", "f") X(groupNorm, "t", "if") X(leakyRelu, "t", "f") \
    X(clamp, "t", "ff") X(softmaxExt, "to", "ff") X(rope, "tto", "iiiffffff") X(reshape, "t", "dddd") \
    X(permute, "t", "iiii") X(view, "t", "dddddddd") X(cast, "t", "i") X(concat, "tt", "i") \
    X(diagMaskInf, "t", "i") X(diagMaskZero, "t", "i") X(argsort, "t", "i") X(topK, "t", "i") X(pad, "t", "iiii") \
    X(flashAttnExt, "ttto", "fff") X(conv2d, "tt", "iiiiii") X(pool2d, "t", "iiiiiff") X(arange, "", "fff")

static const struct op_desc { const char * name, * inputs, * params; op_fn build; } OPS[] = {
#define ROW(NAME, IN, PAR) { #NAME, IN, PAR, op_##NAME },
    KW_OPS(ROW)
#undef ROW
};
#define N_OPS ((int) (sizeof OPS / sizeof OPS[0]))

KW_EXPORT int kw_op_count(void) { return N_OPS; }
KW_EXPORT const char * kw_op_name(int i) { return i >= 0 && i < N_OPS ? OPS[i].name : ""; }
KW_EXPORT const char * kw_op_inputs(int i) { return i >= 0 && i < N_OPS ? OPS[i].inputs : ""; }
KW_EXPORT const char * kw_op_params(int i) { return i >= 0 && i < N_OPS ? OPS[i].params : ""; }

/* Build op `which` from its input handles (as many as its inputs, 0 for an
 * absent optional one) and its parameters (as many as it has, as doubles):
 * integer parameters must be whole and fit in 32 bits. */
KW_EXPORT int kw_op(int which, const int * handles, const double * params) {
    if (which < 0 || which >= N_OPS) return kw_fail(KW_E_INVALID, "op %d does not exist", which);
    const struct op_desc * d = &OPS[which];
    const int n_in = (int) strlen(d->inputs), n_par = (int) strlen(d->params);
    if ((n_in > 0 && !handles) || (n_par > 0 && !params)) return kw_fail(KW_E_INVALID, "%s: inputs or parameters missing", d->name);
    for (int i = 0; i < n_par; i++) {
        const double v = params[i];
        if (isnan(v)) return kw_fail(KW_E_INVALID, "%s: parameter %d is not a number", d->name, i);
        if (d->params[i] == 'i' && !(v == floor(v) && v >= -2147483648.0 && v <= 2147483647.0)) {
            return kw_fail(KW_E_INVALID, "%s: parameter %d = %g is not a 32-bit integer", d->name, i, v);
        }
    }
    unsigned optional = 0;
    for (int i = 0; i < n_in; i++) optional |= (d->inputs[i] == 'o') << i;
    struct call c;
    const int rc = call_begin(&c, d->name, n_in, handles, optional);
    if (rc < 0) {
        if (c.ctx) kiln_free(c.ctx);
        return rc;
    }
    return d->build(&c, params);
}
