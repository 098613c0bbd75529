/*
 * build_reduce.c — constructors of the reduction, indexing and
 * shape-changing ops: sum, sum_rows, mean, argmax, count_equal, repeat,
 * repeat_back, concat, get_rows, get_rows_back, diag, diag_mask_*, arange,
 * argsort, top_k, pad, pad_reflect_1d, upscale. ggml's shapes and op_params.
 */
#include "internal.h"

#include <math.h>

static bool is_float_t(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}
static bool is_elem_t(enum kiln_type t) {
    return is_float_t(t) || t == KILN_TYPE_I8 || t == KILN_TYPE_I16 || t == KILN_TYPE_I32 ||
           t == KILN_TYPE_I64 || t == KILN_TYPE_F64;
}
static bool check_float(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!kiln_check_tensor(t, op, arg)) return false;
    if (!is_float_t(t->type)) {
        kiln_set_error("%s: argument %s must be f32, f16 or bf16, got %s", op, arg, kiln_type_name(t->type));
        return false;
    }
    return true;
}
static bool check_elem(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!kiln_check_tensor(t, op, arg)) return false;
    if (!is_elem_t(t->type)) {
        kiln_set_error("%s: argument %s has type %s; only float and integer types are supported", op, arg, kiln_type_name(t->type));
        return false;
    }
    return true;
}

static struct kiln_tensor * new4(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    return kiln_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
}

/* --------------------------------------------------------- reductions */

struct kiln_tensor * kiln_sum(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!check_float(a, "sum", "a")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor_1d(ctx, a->type, 1);
    if (!r) return NULL;
    r->op = KILN_OP_SUM;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_sum_rows(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!check_float(a, "sum_rows", "a")) return NULL;
    struct kiln_tensor * r = new4(ctx, a->type, 1, a->ne[1], a->ne[2], a->ne[3]);
    if (!r) return NULL;
    r->op = KILN_OP_SUM_ROWS;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_mean(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!check_float(a, "mean", "a")) return NULL;
    struct kiln_tensor * r = new4(ctx, KILN_TYPE_F32, 1, a->ne[1], a->ne[2], a->ne[3]);
    if (!r) return NULL;
    r->op = KILN_OP_MEAN;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_argmax(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!check_float(a, "argmax", "a")) return NULL;
    if (!kiln_is_matrix(a)) {
        char sa[96];
        return KILN_FAIL("argmax: a must be a matrix, got %s", kiln_shape_str(a, sa, sizeof sa));
    }
    if (a->ne[0] > INT32_MAX) return KILN_FAIL("argmax: rows of %lld elements do not fit int32 indices", (long long) a->ne[0]);
    struct kiln_tensor * r = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, a->ne[1]);
    if (!r) return NULL;
    r->op = KILN_OP_ARGMAX;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_count_equal(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!check_elem(a, "count_equal", "a") || !kiln_check_type(b, a->type, "count_equal", "b")) return NULL;
    if (!kiln_check_same_shape(a, b, "count_equal")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor_1d(ctx, KILN_TYPE_I64, 1);
    if (!r) return NULL;
    r->op = KILN_OP_COUNT_EQUAL;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* ------------------------------------------------------ repeat/concat */

struct kiln_tensor * kiln_repeat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!check_elem(a, "repeat", "a") || !kiln_check_tensor(b, "repeat", "b")) return NULL;
    if (!kiln_check_can_repeat(a, b, "repeat")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor(ctx, a->type, KILN_MAX_DIMS, b->ne);
    if (!r) return NULL;
    r->op = KILN_OP_REPEAT;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_repeat_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!check_float(a, "repeat_back", "a") || !kiln_check_tensor(b, "repeat_back", "b")) return NULL;
    if (!kiln_check_can_repeat(b, a, "repeat_back")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor(ctx, a->type, KILN_MAX_DIMS, b->ne);
    if (!r) return NULL;
    r->op = KILN_OP_REPEAT_BACK;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_concat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int dim) {
    if (!check_elem(a, "concat", "a") || !kiln_check_type(b, a->type, "concat", "b")) return NULL;
    if (dim < 0 || dim >= KILN_MAX_DIMS) return KILN_FAIL("concat: dim %d outside 0..3", dim);
    int64_t ne[KILN_MAX_DIMS];
    for (int d = 0; d < KILN_MAX_DIMS; d++) {
        if (d == dim) { ne[d] = a->ne[d] + b->ne[d]; continue; }
        if (a->ne[d] != b->ne[d]) {
            char sa[96], sb[96];
            return KILN_FAIL("concat: dim %d differs (concatenating along %d): %s vs %s", d, dim,
                             kiln_shape_str(a, sa, sizeof sa), kiln_shape_str(b, sb, sizeof sb));
        }
        ne[d] = a->ne[d];
    }
    struct kiln_tensor * r = kiln_new_tensor(ctx, a->type, KILN_MAX_DIMS, ne);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, dim);
    r->op = KILN_OP_CONCAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* ----------------------------------------------------------- indexing */

/* a: [n_embd, n_rows, ne2, ne3], b: I32 [n_idx, ne2, ne3'] with ne3' <= ne3
 * -> [n_embd, n_idx, ne2, ne3'] (F32, or I32 when a is I32) */
struct kiln_tensor * kiln_get_rows(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "get_rows", "a") || !kiln_check_type(b, KILN_TYPE_I32, "get_rows", "b")) return NULL;
    if (!is_elem_t(a->type) && !kiln_is_quantized(a->type)) return KILN_FAIL("get_rows: unsupported type %s", kiln_type_name(a->type));
    char sa[96], sb[96];
    if (a->ne[2] != b->ne[1] || b->ne[3] != 1 || b->ne[2] > a->ne[3]) {
        return KILN_FAIL("get_rows: indices %s do not match data %s (need b.ne1 == a.ne2, b.ne2 <= a.ne3, b.ne3 == 1)",
                         kiln_shape_str(b, sb, sizeof sb), kiln_shape_str(a, sa, sizeof sa));
    }
    enum kiln_type type = KILN_TYPE_F32;
    if (a->type == KILN_TYPE_I32) type = KILN_TYPE_I32;
    else if (!is_float_t(a->type) && !kiln_is_quantized(a->type)) type = a->type; /* other ints, f64: copied as is */
    struct kiln_tensor * r = new4(ctx, type, a->ne[0], b->ne[0], b->ne[1], b->ne[2]);
    if (!r) return NULL;
    r->op = KILN_OP_GET_ROWS;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_get_rows_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c) {
    if (!check_float(a, "get_rows_back", "a") || !kiln_check_type(b, KILN_TYPE_I32, "get_rows_back", "b") ||
        !kiln_check_tensor(c, "get_rows_back", "c")) return NULL;
    char sa[96], sb[96], sc[96];
    /* plain: a [nc, n], b [n], c [nc, rows]; batched (get_rows of a 3-D
     * tensor with 2-D indices): a [nc, n, B], b [n, B], c [nc, rows, B] */
    if (a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1 || c->ne[3] != 1 || a->ne[0] != c->ne[0] || a->ne[1] != b->ne[0] ||
        a->ne[2] != b->ne[1] || c->ne[2] != a->ne[2]) {
        return KILN_FAIL("get_rows_back: shapes do not fit: a %s, b %s, c %s (need a [nc, n, B], b [n, B] indices, c [nc, rows, B])",
                         kiln_shape_str(a, sa, sizeof sa), kiln_shape_str(b, sb, sizeof sb), kiln_shape_str(c, sc, sizeof sc));
    }
    struct kiln_tensor * r = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, c->ne[0], c->ne[1], c->ne[2]);
    if (!r) return NULL;
    r->op = KILN_OP_GET_ROWS_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_diag(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!check_elem(a, "diag", "a")) return NULL;
    if (a->ne[1] != 1) {
        char sa[96];
        return KILN_FAIL("diag: a must have ne1 == 1, got %s", kiln_shape_str(a, sa, sizeof sa));
    }
    struct kiln_tensor * r = new4(ctx, a->type, a->ne[0], a->ne[0], a->ne[2], a->ne[3]);
    if (!r) return NULL;
    r->op = KILN_OP_DIAG;
    r->src[0] = a;
    return r;
}

static struct kiln_tensor * diag_mask_impl(struct kiln_context * ctx, struct kiln_tensor * a, int n_past, enum kiln_op op, bool inplace, const char * name) {
    if (!check_float(a, name, "a")) return NULL;
    struct kiln_tensor * r = inplace ? kiln_view_tensor(ctx, a) : kiln_dup_tensor(ctx, a);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, n_past);
    r->op = op;
    r->src[0] = a;
    return r;
}
struct kiln_tensor * kiln_diag_mask_inf(struct kiln_context * ctx, struct kiln_tensor * a, int n_past) { return diag_mask_impl(ctx, a, n_past, KILN_OP_DIAG_MASK_INF, false, "diag_mask_inf"); }
struct kiln_tensor * kiln_diag_mask_inf_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_past) { return diag_mask_impl(ctx, a, n_past, KILN_OP_DIAG_MASK_INF, true, "diag_mask_inf_inplace"); }
struct kiln_tensor * kiln_diag_mask_zero(struct kiln_context * ctx, struct kiln_tensor * a, int n_past) { return diag_mask_impl(ctx, a, n_past, KILN_OP_DIAG_MASK_ZERO, false, "diag_mask_zero"); }
struct kiln_tensor * kiln_diag_mask_zero_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_past) { return diag_mask_impl(ctx, a, n_past, KILN_OP_DIAG_MASK_ZERO, true, "diag_mask_zero_inplace"); }

/* ---------------------------------------------------- arange, argsort */

struct kiln_tensor * kiln_arange(struct kiln_context * ctx, float start, float stop, float step) {
    if (!isfinite(start) || !isfinite(stop) || !isfinite(step)) return KILN_FAIL("arange: start, stop and step must be finite");
    if (!(stop > start)) return KILN_FAIL("arange: stop (%g) must be greater than start (%g)", (double) stop, (double) start);
    if (!(step > 0)) return KILN_FAIL("arange: step (%g) must be positive", (double) step);
    const double steps = ceil((double)((stop - start) / step));
    if (steps > (double) INT32_MAX) return KILN_FAIL("arange: %g steps are too many", steps);
    struct kiln_tensor * r = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, (int64_t) ceilf((stop - start) / step));
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, start);
    kiln_set_op_params_f32(r, 1, stop);
    kiln_set_op_params_f32(r, 2, step);
    r->op = KILN_OP_ARANGE;
    return r;
}

struct kiln_tensor * kiln_argsort(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_sort_order order) {
    if (!check_elem(a, "argsort", "a")) return NULL;
    if (order != KILN_SORT_ORDER_ASC && order != KILN_SORT_ORDER_DESC) return KILN_FAIL("argsort: invalid order %d", (int) order);
    if (a->ne[0] > INT32_MAX) return KILN_FAIL("argsort: rows of %lld elements do not fit int32 indices", (long long) a->ne[0]);
    struct kiln_tensor * r = kiln_new_tensor(ctx, KILN_TYPE_I32, KILN_MAX_DIMS, a->ne);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, (int32_t) order);
    r->op = KILN_OP_ARGSORT;
    r->src[0] = a;
    return r;
}

/* as ggml: the first k columns of a descending argsort (a view) */
struct kiln_tensor * kiln_top_k(struct kiln_context * ctx, struct kiln_tensor * a, int k) {
    if (!kiln_check_tensor(a, "top_k", "a")) return NULL;
    if (k < 0 || a->ne[0] < k) return KILN_FAIL("top_k: k = %d outside 0..%lld", k, (long long) a->ne[0]);
    struct kiln_tensor * s = kiln_argsort(ctx, a, KILN_SORT_ORDER_DESC);
    if (!s) return NULL;
    return kiln_view_4d(ctx, s, k, s->ne[1], s->ne[2], s->ne[3], s->nb[1], s->nb[2], s->nb[3], 0);
}

/* ------------------------------------------------------ pad / upscale */

struct kiln_tensor * kiln_pad(struct kiln_context * ctx, struct kiln_tensor * a, int p0, int p1, int p2, int p3) {
    if (!check_elem(a, "pad", "a")) return NULL;
    if (p0 < 0 || p1 < 0 || p2 < 0 || p3 < 0) return KILN_FAIL("pad: negative padding (%d, %d, %d, %d)", p0, p1, p2, p3);
    struct kiln_tensor * r = new4(ctx, a->type, a->ne[0] + p0, a->ne[1] + p1, a->ne[2] + p2, a->ne[3] + p3);
    if (!r) return NULL;
    r->op = KILN_OP_PAD;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_pad_reflect_1d(struct kiln_context * ctx, struct kiln_tensor * a, int p0, int p1) {
    if (!check_float(a, "pad_reflect_1d", "a")) return NULL;
    if (p0 < 0 || p1 < 0 || p0 >= a->ne[0] || p1 >= a->ne[0]) {
        return KILN_FAIL("pad_reflect_1d: padding (%d, %d) must be in 0..%lld (less than ne0)", p0, p1, (long long) a->ne[0] - 1);
    }
    struct kiln_tensor * r = new4(ctx, a->type, a->ne[0] + p0 + p1, a->ne[1], a->ne[2], a->ne[3]);
    if (!r) return NULL;
    const int32_t params[2] = { p0, p1 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_PAD_REFLECT_1D;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_upscale_ext(struct kiln_context * ctx, struct kiln_tensor * a, int ne0, int ne1, int ne2, int ne3) {
    if (!check_elem(a, "upscale", "a")) return NULL;
    if (a->ne[0] > ne0 || a->ne[1] > ne1 || a->ne[2] > ne2 || a->ne[3] > ne3) {
        char sa[96];
        return KILN_FAIL("upscale: target [%d, %d, %d, %d] is smaller than a %s", ne0, ne1, ne2, ne3, kiln_shape_str(a, sa, sizeof sa));
    }
    if (kiln_is_empty(a)) return KILN_FAIL("upscale: a is empty");
    struct kiln_tensor * r = new4(ctx, a->type, ne0, ne1, ne2, ne3);
    if (!r) return NULL;
    r->op = KILN_OP_UPSCALE;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_upscale(struct kiln_context * ctx, struct kiln_tensor * a, int scale_factor) {
    if (!kiln_check_tensor(a, "upscale", "a")) return NULL;
    if (scale_factor < 1) return KILN_FAIL("upscale: scale_factor %d must be >= 1", scale_factor);
    if (a->ne[0] * scale_factor > INT32_MAX || a->ne[1] * scale_factor > INT32_MAX) return KILN_FAIL("upscale: result too large");
    return kiln_upscale_ext(ctx, a, (int)(a->ne[0] * scale_factor), (int)(a->ne[1] * scale_factor), (int) a->ne[2], (int) a->ne[3]);
}
