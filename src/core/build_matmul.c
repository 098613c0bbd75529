/*
 * build_matmul.c — constructors of the matrix products: mul_mat,
 * mul_mat_id (mixture of experts) and out_prod. Shape rules are ggml's.
 */
#include "internal.h"

static bool float_act_type(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

/* a: [K, N, A2, A3] (weights, any type), b: [K, M, B2, B3] with B2 % A2 ==
 * 0 and B3 % A3 == 0 (a is broadcast over dims 2 and 3) -> F32 [N, M, B2, B3] */
struct kiln_tensor * kiln_mul_mat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "mul_mat", "a") || !kiln_check_tensor(b, "mul_mat", "b")) return NULL;
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (a->ne[0] != b->ne[0]) {
        return KILN_FAIL("mul_mat: a and b need the same ne[0] (rows of the same length): %s vs %s", sa, sb);
    }
    if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        return KILN_FAIL("mul_mat: a cannot be broadcast over b's dims 2 and 3 (b->ne[2..3] must be multiples of a's): %s vs %s", sa, sb);
    }
    if (!kiln_is_empty(a) && kiln_is_transposed(a)) {
        return KILN_FAIL("mul_mat: a %s is transposed (use kiln_cont on it first)", sa);
    }
    if (!float_act_type(b->type)) {
        return KILN_FAIL("mul_mat: b must be f32, f16 or bf16, got %s", sb);
    }
    const int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_MUL_MAT;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* ggml keeps the precision request in op_params[0]; the CPU always
 * accumulates in f32, so it is only recorded. */
void kiln_mul_mat_set_prec(struct kiln_tensor * a, enum kiln_prec prec) {
    if (!a) { kiln_set_error("mul_mat_set_prec: tensor is NULL"); return; }
    if (a->op != KILN_OP_MUL_MAT) { kiln_set_error("mul_mat_set_prec: tensor is not a mul_mat result"); return; }
    kiln_set_op_params_i32(a, 0, (int32_t) prec);
}

/* kept in op_params[1] (op_params[0] is ggml's precision slot) */
void kiln_mul_mat_set_order(struct kiln_tensor * a, enum kiln_mm_order order) {
    if (!a) { kiln_set_error("mul_mat_set_order: tensor is NULL"); return; }
    if (a->op != KILN_OP_MUL_MAT) { kiln_set_error("mul_mat_set_order: tensor is not a mul_mat result"); return; }
    if (order != KILN_MM_ORDER_GGML && order != KILN_MM_ORDER_FAST) {
        kiln_set_error("mul_mat_set_order: unknown order %d", (int) order);
        return;
    }
    kiln_set_op_params_i32(a, 1, (int32_t) order);
}

/* as: [K, N, n_as] one matrix per expert; b: [K, n_b, n_tokens] with
 * n_used % n_b == 0; ids: I32 [n_used, n_tokens] expert per slot ->
 * F32 [N, n_used, n_tokens]: dst[:, e, t] = as[:, :, ids[e, t]] * b[:, e % n_b, t] */
struct kiln_tensor * kiln_mul_mat_id(struct kiln_context * ctx, struct kiln_tensor * as, struct kiln_tensor * b, struct kiln_tensor * ids) {
    if (!kiln_check_tensor(as, "mul_mat_id", "as") || !kiln_check_tensor(b, "mul_mat_id", "b") ||
        !kiln_check_type(ids, KILN_TYPE_I32, "mul_mat_id", "ids")) return NULL;
    char sa[96], sb[96], si[96];
    kiln_shape_str(as, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    kiln_shape_str(ids, si, sizeof si);
    if (!kiln_is_empty(as) && kiln_is_transposed(as)) return KILN_FAIL("mul_mat_id: as %s is transposed (use kiln_cont first)", sa);
    if (as->ne[3] != 1) return KILN_FAIL("mul_mat_id: as must be 3d (one matrix per expert), got %s", sa);
    if (b->ne[3] != 1) return KILN_FAIL("mul_mat_id: b must be 3d, got %s", sb);
    if (ids->ne[2] != 1 || ids->ne[3] != 1) return KILN_FAIL("mul_mat_id: ids must be 2d, got %s", si);
    if (ids->ne[1] != b->ne[2]) {
        return KILN_FAIL("mul_mat_id: ids and b need the same number of tokens (ids->ne[1] == b->ne[2]): %s vs %s", si, sb);
    }
    if (as->ne[0] != b->ne[0]) return KILN_FAIL("mul_mat_id: as and b need the same ne[0]: %s vs %s", sa, sb);
    if (b->ne[1] == 0 || ids->ne[0] % b->ne[1] != 0) {
        return KILN_FAIL("mul_mat_id: b->ne[1] must divide ids->ne[0] (experts used): %s vs %s", sb, si);
    }
    if (!float_act_type(b->type)) return KILN_FAIL("mul_mat_id: b must be f32, f16 or bf16, got %s", sb);
    const int64_t ne[4] = { as->ne[1], ids->ne[0], b->ne[2], 1 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_MUL_MAT_ID;
    r->src[0] = as;
    r->src[1] = b;
    r->src[2] = ids;
    return r;
}

/* ids: I32 [n_used, n_tok] checked against the 3-D g [n, n_used, n_tok] (f32) */
static bool id_grad_shapes(const char * op, const struct kiln_tensor * g, const struct kiln_tensor * ids, int64_t n) {
    char sg[96], si[96];
    kiln_shape_str(g, sg, sizeof sg);
    kiln_shape_str(ids, si, sizeof si);
    if (g->type != KILN_TYPE_F32) { kiln_set_error("%s: g must be f32, got %s", op, kiln_type_name(g->type)); return false; }
    if (ids->ne[2] != 1 || ids->ne[3] != 1 || g->ne[3] != 1 || g->ne[0] != n || g->ne[1] != ids->ne[0] || g->ne[2] != ids->ne[1]) {
        kiln_set_error("%s: g %s does not fit ids %s (need g [%lld, n_used, n_tok], ids [n_used, n_tok])", op, sg, si, (long long) n);
        return false;
    }
    return true;
}

struct kiln_tensor * kiln_mul_mat_id_back(struct kiln_context * ctx, struct kiln_tensor * as, struct kiln_tensor * g, struct kiln_tensor * ids) {
    if (!kiln_check_tensor(as, "mul_mat_id_back", "as") || !kiln_check_tensor(g, "mul_mat_id_back", "g") ||
        !kiln_check_type(ids, KILN_TYPE_I32, "mul_mat_id_back", "ids")) return NULL;
    char sa[96];
    kiln_shape_str(as, sa, sizeof sa);
    if (as->ne[3] != 1) return KILN_FAIL("mul_mat_id_back: as must be 3d (one matrix per expert), got %s", sa);
    if (as->nb[0] != kiln_type_size(as->type)) return KILN_FAIL("mul_mat_id_back: the rows of as %s are not contiguous", sa);
    if (!id_grad_shapes("mul_mat_id_back", g, ids, as->ne[1])) return NULL;
    const int64_t ne[4] = { as->ne[0], ids->ne[0], ids->ne[1], 1 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_MUL_MAT_ID_BACK;
    r->src[0] = as;
    r->src[1] = g;
    r->src[2] = ids;
    return r;
}

struct kiln_tensor * kiln_out_prod_id(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * g, struct kiln_tensor * ids, int64_t n_as) {
    if (!kiln_check_type(a, KILN_TYPE_F32, "out_prod_id", "a") || !kiln_check_tensor(g, "out_prod_id", "g") ||
        !kiln_check_type(ids, KILN_TYPE_I32, "out_prod_id", "ids")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (n_as < 1) return KILN_FAIL("out_prod_id: n_as = %lld experts", (long long) n_as);
    if (a->nb[0] != sizeof(float)) return KILN_FAIL("out_prod_id: the rows of a %s are not contiguous", sa);
    if (!id_grad_shapes("out_prod_id", g, ids, g->ne[0])) return NULL;
    if (a->ne[3] != 1 || a->ne[2] != ids->ne[1] || a->ne[1] == 0 || ids->ne[0] % a->ne[1] != 0) {
        return KILN_FAIL("out_prod_id: a %s does not fit ids (need a [K, n_b, n_tok], n_b dividing n_used)", sa);
    }
    const int64_t ne[4] = { a->ne[0], g->ne[0], n_as, 1 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_OUT_PROD_ID;
    r->src[0] = a;
    r->src[1] = g;
    r->src[2] = ids;
    return r;
}

/* a: [M, K, A2, A3], b: [P, K, B2, B3] (a broadcast over dims 2, 3) ->
 * F32 [M, P, B2, B3]: dst[i, j] = sum_k a[i, k] * b[j, k] */
struct kiln_tensor * kiln_out_prod(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "out_prod", "a") || !kiln_check_tensor(b, "out_prod", "b")) return NULL;
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (a->ne[1] != b->ne[1]) return KILN_FAIL("out_prod: a and b need the same ne[1]: %s vs %s", sa, sb);
    if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
        return KILN_FAIL("out_prod: a cannot be broadcast over b's dims 2 and 3: %s vs %s", sa, sb);
    }
    if (!kiln_is_empty(a) && kiln_is_transposed(a)) return KILN_FAIL("out_prod: a %s is transposed (use kiln_cont first)", sa);
    if (!float_act_type(b->type)) return KILN_FAIL("out_prod: b must be f32, f16 or bf16, got %s", sb);
    const int64_t ne[4] = { a->ne[0], b->ne[0], b->ne[2], b->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_OUT_PROD;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}
