/*
 * build_elementwise.c — constructors of the elementwise, unary and copy ops.
 * They validate, record op / src / op_params and the result shape, as ggml
 * does; in-place variants return a view of a (kiln_view_tensor).
 */
#include "internal.h"
#include "op_params_elem.h"

static bool is_float_t(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

static bool check_float(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!kiln_check_tensor(t, op, arg)) return false;
    if (!is_float_t(t->type)) {
        kiln_set_error("%s: argument %s must be f32, f16 or bf16, got %s", op, arg, kiln_type_name(t->type));
        return false;
    }
    return true;
}

/* the result every shape-preserving op starts from */
static struct kiln_tensor * same_as(struct kiln_context * ctx, struct kiln_tensor * a, bool inplace) {
    return inplace ? kiln_view_tensor(ctx, a) : kiln_dup_tensor(ctx, a);
}

/* ---------------------------------------------------------------- dup */

static struct kiln_tensor * dup_impl(struct kiln_context * ctx, struct kiln_tensor * a, bool inplace) {
    if (!kiln_check_tensor(a, inplace ? "dup_inplace" : "dup", "a")) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    r->op = KILN_OP_DUP;
    r->src[0] = a;
    return r;
}
struct kiln_tensor * kiln_dup(struct kiln_context * ctx, struct kiln_tensor * a) { return dup_impl(ctx, a, false); }
struct kiln_tensor * kiln_dup_inplace(struct kiln_context * ctx, struct kiln_tensor * a) { return dup_impl(ctx, a, true); }

/* ------------------------------------------------------------- binary */

static struct kiln_tensor * binary_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
                                        enum kiln_op op, bool inplace, const char * name) {
    if (!kiln_check_tensor(a, name, "a") || !kiln_check_tensor(b, name, "b")) return NULL;
    const bool quant_ok = op == KILN_OP_ADD && kiln_is_quantized(a->type);
    if (!is_float_t(a->type) && !quant_ok) {
        return KILN_FAIL("%s: argument a must be f32, f16 or bf16, got %s", name, kiln_type_name(a->type));
    }
    if (!check_float(b, name, "b")) return NULL;
    if (!kiln_check_can_repeat(b, a, name)) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_add(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_ADD, false, "add"); }
struct kiln_tensor * kiln_add_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_ADD, true, "add_inplace"); }
struct kiln_tensor * kiln_sub(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_SUB, false, "sub"); }
struct kiln_tensor * kiln_sub_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_SUB, true, "sub_inplace"); }
struct kiln_tensor * kiln_mul(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_MUL, false, "mul"); }
struct kiln_tensor * kiln_mul_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_MUL, true, "mul_inplace"); }
struct kiln_tensor * kiln_div(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_DIV, false, "div"); }
struct kiln_tensor * kiln_div_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return binary_impl(ctx, a, b, KILN_OP_DIV, true, "div_inplace"); }

/* a + b with the result in `type`; b's rows must match a's (ggml: can_repeat_rows) */
struct kiln_tensor * kiln_add_cast(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, enum kiln_type type) {
    if (!kiln_check_tensor(a, "add_cast", "a") || !check_float(b, "add_cast", "b")) return NULL;
    if (!is_float_t(a->type) && !kiln_is_quantized(a->type)) {
        return KILN_FAIL("add_cast: argument a must be a float or quantized type, got %s", kiln_type_name(a->type));
    }
    if (!kiln_type_is_valid((int) type) || !(is_float_t(type) || kiln_is_quantized(type))) {
        return KILN_FAIL("add_cast: result type %d must be f32, f16, bf16 or quantized", (int) type);
    }
    if (b->ne[0] != a->ne[0]) {
        char sa[96], sb[96];
        return KILN_FAIL("add_cast: rows differ: %s vs %s", kiln_shape_str(a, sa, sizeof sa), kiln_shape_str(b, sb, sizeof sb));
    }
    if (!kiln_check_can_repeat(b, a, "add_cast")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor(ctx, type, KILN_MAX_DIMS, a->ne);
    if (!r) return NULL;
    r->op = KILN_OP_ADD;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

static struct kiln_tensor * add1_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, bool inplace) {
    const char * name = inplace ? "add1_inplace" : "add1";
    if (!kiln_check_tensor(a, name, "a") || !check_float(b, name, "b")) return NULL;
    if (!is_float_t(a->type) && !kiln_is_quantized(a->type)) {
        return KILN_FAIL("%s: argument a must be a float or quantized type, got %s", name, kiln_type_name(a->type));
    }
    if (!kiln_is_scalar(b)) {
        char sb[96];
        return KILN_FAIL("%s: b must be a scalar, got %s", name, kiln_shape_str(b, sb, sizeof sb));
    }
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    r->op = KILN_OP_ADD1;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
struct kiln_tensor * kiln_add1(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return add1_impl(ctx, a, b, false); }
struct kiln_tensor * kiln_add1_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) { return add1_impl(ctx, a, b, true); }

/* --------------------------------------------------------- acc / set
 * op_params (int32): nb1, nb2, nb3, offset, inplace — ggml's layout. The
 * strided view of a that b lands in must lie inside a. */

static struct kiln_tensor * view_write_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
                                            size_t nb1, size_t nb2, size_t nb3, size_t offset, bool inplace,
                                            enum kiln_op op, const char * name) {
    if (!kiln_check_tensor(a, name, "a") || !kiln_check_tensor(b, name, "b")) return NULL;
    if (op == KILN_OP_ACC) {
        if (!kiln_check_type(a, KILN_TYPE_F32, name, "a") || !kiln_check_type(b, KILN_TYPE_F32, name, "b")) return NULL;
    } else {
        if (kiln_is_quantized(a->type)) return KILN_FAIL("%s: quantized type %s is not supported", name, kiln_type_name(a->type));
        if (!kiln_check_type(b, a->type, name, "b")) return NULL;
    }
    if (!kiln_is_contiguous(a)) return KILN_FAIL("%s: a must be contiguous", name);
    if (kiln_nelements(b) > kiln_nelements(a)) {
        char sa[96], sb[96];
        return KILN_FAIL("%s: b %s has more elements than a %s", name, kiln_shape_str(b, sb, sizeof sb), kiln_shape_str(a, sa, sizeof sa));
    }
    if (nb1 > INT32_MAX || nb2 > INT32_MAX || nb3 > INT32_MAX || offset > INT32_MAX) {
        return KILN_FAIL("%s: strides/offset (%zu, %zu, %zu, %zu) do not fit in int32 op params", name, nb1, nb2, nb3, offset);
    }
    if (!kiln_is_empty(b)) {
        const size_t esz = kiln_type_size(a->type);
        const size_t last = offset + (size_t)(b->ne[0] - 1) * esz + (size_t)(b->ne[1] - 1) * nb1 +
                            (size_t)(b->ne[2] - 1) * nb2 + (size_t)(b->ne[3] - 1) * nb3 + esz;
        if (last > kiln_nbytes(a)) {
            char sb[96];
            return KILN_FAIL("%s: view of %s with strides (%zu, %zu, %zu) at offset %zu ends at byte %zu, past a's %zu bytes",
                             name, kiln_shape_str(b, sb, sizeof sb), nb1, nb2, nb3, offset, last, kiln_nbytes(a));
        }
    }
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    const int32_t params[5] = { (int32_t) nb1, (int32_t) nb2, (int32_t) nb3, (int32_t) offset, inplace ? 1 : 0 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_acc(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, false, KILN_OP_ACC, "acc");
}
struct kiln_tensor * kiln_acc_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, true, KILN_OP_ACC, "acc_inplace");
}
struct kiln_tensor * kiln_set(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, false, KILN_OP_SET, "set");
}
struct kiln_tensor * kiln_set_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    return view_write_impl(ctx, a, b, nb1, nb2, nb3, offset, true, KILN_OP_SET, "set_inplace");
}
struct kiln_tensor * kiln_set_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t offset) {
    if (!kiln_check_tensor(a, "set_1d", "a")) return NULL;
    return view_write_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, false, KILN_OP_SET, "set_1d");
}
struct kiln_tensor * kiln_set_1d_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t offset) {
    if (!kiln_check_tensor(a, "set_1d_inplace", "a")) return NULL;
    return view_write_impl(ctx, a, b, a->nb[1], a->nb[2], a->nb[3], offset, true, KILN_OP_SET, "set_1d_inplace");
}
struct kiln_tensor * kiln_set_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t offset) {
    if (!kiln_check_tensor(a, "set_2d", "a")) return NULL;
    return view_write_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, false, KILN_OP_SET, "set_2d");
}
struct kiln_tensor * kiln_set_2d_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t offset) {
    if (!kiln_check_tensor(a, "set_2d_inplace", "a")) return NULL;
    return view_write_impl(ctx, a, b, nb1, a->nb[2], a->nb[3], offset, true, KILN_OP_SET, "set_2d_inplace");
}

/* ----------------------------------------------------- one-input math */

static struct kiln_tensor * map_impl(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_op op, bool inplace, const char * name) {
    if (!check_float(a, name, "a")) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    r->op = op;
    r->src[0] = a;
    return r;
}

#define KILN_MAP_CTOR(lower, UPPER) \
    struct kiln_tensor * kiln_##lower(struct kiln_context * ctx, struct kiln_tensor * a) { return map_impl(ctx, a, KILN_OP_##UPPER, false, #lower); } \
    struct kiln_tensor * kiln_##lower##_inplace(struct kiln_context * ctx, struct kiln_tensor * a) { return map_impl(ctx, a, KILN_OP_##UPPER, true, #lower "_inplace"); }
KILN_MAP_CTOR(sqr, SQR)
KILN_MAP_CTOR(sqrt, SQRT)
KILN_MAP_CTOR(log, LOG)
KILN_MAP_CTOR(sin, SIN)
KILN_MAP_CTOR(cos, COS)
#undef KILN_MAP_CTOR

static struct kiln_tensor * scale_impl(struct kiln_context * ctx, struct kiln_tensor * a, float s, bool inplace) {
    struct kiln_tensor * r = map_impl(ctx, a, KILN_OP_SCALE, inplace, inplace ? "scale_inplace" : "scale");
    if (r) kiln_set_op_params_f32(r, 0, s);
    return r;
}
struct kiln_tensor * kiln_scale(struct kiln_context * ctx, struct kiln_tensor * a, float s) { return scale_impl(ctx, a, s, false); }
struct kiln_tensor * kiln_scale_inplace(struct kiln_context * ctx, struct kiln_tensor * a, float s) { return scale_impl(ctx, a, s, true); }

/* ggml's clamp works in place: the result is a view of a */
struct kiln_tensor * kiln_clamp(struct kiln_context * ctx, struct kiln_tensor * a, float min, float max) {
    struct kiln_tensor * r = map_impl(ctx, a, KILN_OP_CLAMP, true, "clamp");
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, min);
    kiln_set_op_params_f32(r, 1, max);
    return r;
}

struct kiln_tensor * kiln_leaky_relu(struct kiln_context * ctx, struct kiln_tensor * a, float negative_slope, bool inplace) {
    struct kiln_tensor * r = map_impl(ctx, a, KILN_OP_LEAKY_RELU, inplace, "leaky_relu");
    if (r) kiln_set_op_params_f32(r, 0, negative_slope);
    return r;
}

struct kiln_tensor * kiln_silu_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!check_float(a, "silu_back", "a") || !check_float(b, "silu_back", "b")) return NULL;
    if (!kiln_check_same_shape(a, b, "silu_back")) return NULL;
    struct kiln_tensor * r = kiln_dup_tensor(ctx, a);
    if (!r) return NULL;
    r->op = KILN_OP_SILU_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* -------------------------------------------------------------- unary */

static struct kiln_tensor * unary_impl(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_unary_op op, bool inplace) {
    const char * name = inplace ? "unary_inplace" : "unary";
    if ((unsigned) op >= KILN_UNARY_OP_COUNT) return KILN_FAIL("%s: invalid unary op id %d", name, (int) op);
    if (!check_float(a, kiln_unary_op_name(op), "a")) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, (int32_t) op);
    r->op = KILN_OP_UNARY;
    r->src[0] = a;
    return r;
}
struct kiln_tensor * kiln_unary(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_unary_op op) { return unary_impl(ctx, a, op, false); }
struct kiln_tensor * kiln_unary_inplace(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_unary_op op) { return unary_impl(ctx, a, op, true); }

#define KILN_UNARY_CTOR(lower, UPPER) \
    struct kiln_tensor * kiln_##lower(struct kiln_context * ctx, struct kiln_tensor * a) { return unary_impl(ctx, a, KILN_UNARY_OP_##UPPER, false); } \
    struct kiln_tensor * kiln_##lower##_inplace(struct kiln_context * ctx, struct kiln_tensor * a) { return unary_impl(ctx, a, KILN_UNARY_OP_##UPPER, true); }
KILN_UNARY_CTOR(abs, ABS)
KILN_UNARY_CTOR(sgn, SGN)
KILN_UNARY_CTOR(neg, NEG)
KILN_UNARY_CTOR(step, STEP)
KILN_UNARY_CTOR(tanh, TANH)
KILN_UNARY_CTOR(elu, ELU)
KILN_UNARY_CTOR(relu, RELU)
KILN_UNARY_CTOR(sigmoid, SIGMOID)
KILN_UNARY_CTOR(gelu, GELU)
KILN_UNARY_CTOR(gelu_quick, GELU_QUICK)
KILN_UNARY_CTOR(silu, SILU)
KILN_UNARY_CTOR(exp, EXP)
#undef KILN_UNARY_CTOR
/* ggml has no in-place twins for these two */
struct kiln_tensor * kiln_hardswish(struct kiln_context * ctx, struct kiln_tensor * a) { return unary_impl(ctx, a, KILN_UNARY_OP_HARDSWISH, false); }
struct kiln_tensor * kiln_hardsigmoid(struct kiln_context * ctx, struct kiln_tensor * a) { return unary_impl(ctx, a, KILN_UNARY_OP_HARDSIGMOID, false); }

/* ---------------------------------------------------- cpy, cast, cont */

/* a -> b; the result is a view of b */
struct kiln_tensor * kiln_cpy(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "cpy", "a") || !kiln_check_tensor(b, "cpy", "b")) return NULL;
    if (kiln_nelements(a) != kiln_nelements(b)) {
        char sa[96], sb[96];
        return KILN_FAIL("cpy: element counts differ: %s vs %s", kiln_shape_str(a, sa, sizeof sa), kiln_shape_str(b, sb, sizeof sb));
    }
    struct kiln_tensor * r = kiln_view_tensor(ctx, b);
    if (!r) return NULL;
    if (b->name[0]) kiln_format_name(r, "%s (copy of %s)", b->name, a->name);
    else kiln_format_name(r, "%s (copy)", a->name);
    r->op = KILN_OP_CPY;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_cast(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_type type) {
    if (!kiln_check_tensor(a, "cast", "a")) return NULL;
    if (!kiln_type_is_valid((int) type)) return KILN_FAIL("cast: invalid type id %d", (int) type);
    struct kiln_tensor * r = kiln_new_tensor(ctx, type, KILN_MAX_DIMS, a->ne);
    if (!r) return NULL;
    kiln_format_name(r, "%s (copy)", a->name);
    r->op = KILN_OP_CPY;
    r->src[0] = a;
    r->src[1] = r; /* as ggml: the destination is the result itself */
    return r;
}

struct kiln_tensor * kiln_cont_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    if (!kiln_check_tensor(a, "cont", "a")) return NULL;
    if (ne0 < 0 || ne1 < 0 || ne2 < 0 || ne3 < 0) return KILN_FAIL("cont: negative dimension");
    if (ne0 * ne1 * ne2 * ne3 != kiln_nelements(a)) {
        char sa[96];
        return KILN_FAIL("cont: %s has %lld elements, the shape [%lld, %lld, %lld, %lld] has %lld", kiln_shape_str(a, sa, sizeof sa),
                         (long long) kiln_nelements(a), (long long) ne0, (long long) ne1, (long long) ne2, (long long) ne3,
                         (long long)(ne0 * ne1 * ne2 * ne3));
    }
    struct kiln_tensor * r = kiln_new_tensor_4d(ctx, a->type, ne0, ne1, ne2, ne3);
    if (!r) return NULL;
    kiln_format_name(r, "%s (cont)", a->name);
    r->op = KILN_OP_CONT;
    r->src[0] = a;
    return r;
}
struct kiln_tensor * kiln_cont(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!kiln_check_tensor(a, "cont", "a")) return NULL;
    return kiln_cont_4d(ctx, a, a->ne[0], a->ne[1], a->ne[2], a->ne[3]);
}
struct kiln_tensor * kiln_cont_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0) { return kiln_cont_4d(ctx, a, ne0, 1, 1, 1); }
struct kiln_tensor * kiln_cont_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1) { return kiln_cont_4d(ctx, a, ne0, ne1, 1, 1); }
struct kiln_tensor * kiln_cont_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) { return kiln_cont_4d(ctx, a, ne0, ne1, ne2, 1); }

/* -------------------------------------------------------- custom maps */

static bool check_n_tasks(int n_tasks, const char * name) {
    if (n_tasks == KILN_N_TASKS_MAX || n_tasks > 0) return true;
    kiln_set_error("%s: n_tasks %d must be > 0 or KILN_N_TASKS_MAX", name, n_tasks);
    return false;
}

static struct kiln_tensor * custom1_impl(struct kiln_context * ctx, struct kiln_tensor * a, kiln_custom1_op_t fun, int n_tasks, void * ud, bool inplace) {
    const char * name = inplace ? "map_custom1_inplace" : "map_custom1";
    if (!kiln_check_tensor(a, name, "a")) return NULL;
    if (!fun) return KILN_FAIL("%s: function is NULL", name);
    if (!check_n_tasks(n_tasks, name)) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    struct kiln_map_custom1_op_params p = { fun, n_tasks, ud };
    kiln_set_op_params(r, &p, sizeof(p));
    r->op = KILN_OP_MAP_CUSTOM1;
    r->src[0] = a;
    return r;
}
struct kiln_tensor * kiln_map_custom1(struct kiln_context * ctx, struct kiln_tensor * a, kiln_custom1_op_t fun, int n_tasks, void * ud) { return custom1_impl(ctx, a, fun, n_tasks, ud, false); }
struct kiln_tensor * kiln_map_custom1_inplace(struct kiln_context * ctx, struct kiln_tensor * a, kiln_custom1_op_t fun, int n_tasks, void * ud) { return custom1_impl(ctx, a, fun, n_tasks, ud, true); }

static struct kiln_tensor * custom2_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, kiln_custom2_op_t fun, int n_tasks, void * ud, bool inplace) {
    const char * name = inplace ? "map_custom2_inplace" : "map_custom2";
    if (!kiln_check_tensor(a, name, "a") || !kiln_check_tensor(b, name, "b")) return NULL;
    if (!fun) return KILN_FAIL("%s: function is NULL", name);
    if (!check_n_tasks(n_tasks, name)) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    struct kiln_map_custom2_op_params p = { fun, n_tasks, ud };
    kiln_set_op_params(r, &p, sizeof(p));
    r->op = KILN_OP_MAP_CUSTOM2;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
struct kiln_tensor * kiln_map_custom2(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, kiln_custom2_op_t fun, int n_tasks, void * ud) { return custom2_impl(ctx, a, b, fun, n_tasks, ud, false); }
struct kiln_tensor * kiln_map_custom2_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, kiln_custom2_op_t fun, int n_tasks, void * ud) { return custom2_impl(ctx, a, b, fun, n_tasks, ud, true); }

static struct kiln_tensor * custom3_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c, kiln_custom3_op_t fun, int n_tasks, void * ud, bool inplace) {
    const char * name = inplace ? "map_custom3_inplace" : "map_custom3";
    if (!kiln_check_tensor(a, name, "a") || !kiln_check_tensor(b, name, "b") || !kiln_check_tensor(c, name, "c")) return NULL;
    if (!fun) return KILN_FAIL("%s: function is NULL", name);
    if (!check_n_tasks(n_tasks, name)) return NULL;
    struct kiln_tensor * r = same_as(ctx, a, inplace);
    if (!r) return NULL;
    struct kiln_map_custom3_op_params p = { fun, n_tasks, ud };
    kiln_set_op_params(r, &p, sizeof(p));
    r->op = KILN_OP_MAP_CUSTOM3;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}
struct kiln_tensor * kiln_map_custom3(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c, kiln_custom3_op_t fun, int n_tasks, void * ud) { return custom3_impl(ctx, a, b, c, fun, n_tasks, ud, false); }
struct kiln_tensor * kiln_map_custom3_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c, kiln_custom3_op_t fun, int n_tasks, void * ud) { return custom3_impl(ctx, a, b, c, fun, n_tasks, ud, true); }
