/*
 * test_core.c — contexts, tensors, views, graphs and error reporting.
 */
#include "util/test_util.h"

static void test_context_and_tensors(void) {
    tu_case = "context";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    CHECK(ctx != NULL, "kiln_init");
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 5, 3, 2);
    CHECK(a && a->ne[0] == 5 && a->ne[1] == 3 && a->ne[2] == 2 && a->ne[3] == 1, "3d shape");
    CHECK(a->nb[0] == 4 && a->nb[1] == 20 && a->nb[2] == 60 && a->nb[3] == 120, "strides");
    CHECK(kiln_nbytes(a) == 120, "nbytes %zu", kiln_nbytes(a));
    CHECK(kiln_nelements(a) == 30 && kiln_nrows(a) == 6, "counts");
    CHECK(((uintptr_t) a->data % KILN_MEM_ALIGN) == 0, "data alignment");
    CHECK(kiln_n_dims(a) == 3, "n_dims");
    CHECK(kiln_is_contiguous(a), "contiguous");
    for (int i = 0; i < 30; i++) kiln_set_f32_1d(a, i, (float) i * 0.5f);
    CHECK(kiln_get_f32_1d(a, 7) == 3.5f, "get_f32_1d");
    CHECK(kiln_get_f32_nd(a, 2, 1, 1, 0) == (float)(2 + 5 + 15) * 0.5f, "get_f32_nd");
    kiln_set_name(a, "a");
    CHECK(kiln_get_tensor(ctx, "a") == a, "get_tensor by name");

    /* f16, bf16, int types */
    struct kiln_tensor * h = kiln_new_tensor_1d(ctx, KILN_TYPE_F16, 4);
    kiln_set_f32(h, 1.5f);
    CHECK(kiln_get_f32_1d(h, 3) == 1.5f, "f16 fill");
    struct kiln_tensor * i8 = kiln_new_tensor_1d(ctx, KILN_TYPE_I8, 3);
    kiln_set_i32_1d(i8, 0, 1000);
    CHECK(kiln_get_i32_1d(i8, 0) == 127, "i8 saturates, got %d", kiln_get_i32_1d(i8, 0));
    struct kiln_tensor * q = kiln_new_tensor_1d(ctx, KILN_TYPE_Q4_0, 64);
    CHECK(q && kiln_nbytes(q) == 36, "q4_0 row bytes");
    CHECK(kiln_new_tensor_1d(ctx, KILN_TYPE_Q4_0, 33) == NULL, "q4_0 needs a multiple of 32");
    CHECK(strstr(kiln_last_error(), "block size") != NULL, "message: %s", kiln_last_error());
    CHECK(kiln_new_tensor_1d(ctx, (enum kiln_type) 4, 8) == NULL, "removed type id rejected");
    CHECK(kiln_new_tensor_1d(ctx, KILN_TYPE_F32, -1) == NULL, "negative ne rejected");

    /* out of range index: error, no crash */
    kiln_clear_error();
    CHECK(kiln_get_f32_1d(a, 30) == 0.0f && strstr(kiln_last_error(), "out of range"), "index check");

    /* context exhaustion returns NULL with a message */
    CHECK(kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1 << 20) == NULL, "out of context memory");
    CHECK(strstr(kiln_last_error(), "out of memory") != NULL, "oom message: %s", kiln_last_error());
    /* and the context still works */
    CHECK(kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 16) != NULL, "context usable after oom");
    kiln_free(ctx);

    /* no_alloc */
    struct kiln_init_params p = { 1 << 16, NULL, true };
    ctx = kiln_init(p);
    struct kiln_tensor * big = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 1 << 14, 1 << 14);
    CHECK(big && big->data == NULL, "no_alloc tensor has no data");
    kiln_free(ctx);
}

static void test_views(void) {
    tu_case = "views";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3);
    for (int i = 0; i < 12; i++) kiln_set_f32_1d(a, i, (float) i);

    struct kiln_tensor * r = kiln_reshape_2d(ctx, a, 6, 2);
    CHECK(r && r->data == a->data && r->ne[0] == 6 && r->op == KILN_OP_RESHAPE, "reshape");
    CHECK(kiln_reshape_2d(ctx, a, 5, 2) == NULL, "reshape with wrong count fails");
    CHECK(strstr(kiln_last_error(), "12 elements") != NULL, "reshape message: %s", kiln_last_error());

    struct kiln_tensor * t = kiln_transpose(ctx, a);
    CHECK(t && t->ne[0] == 3 && t->ne[1] == 4 && !kiln_is_contiguous(t) && kiln_is_transposed(t), "transpose");
    CHECK(kiln_get_f32_nd(t, 2, 1, 0, 0) == kiln_get_f32_nd(a, 1, 2, 0, 0), "transpose element");
    CHECK(kiln_reshape_1d(ctx, t, 12) == NULL, "reshape of non-contiguous fails");

    struct kiln_tensor * v = kiln_view_2d(ctx, a, 2, 3, a->nb[1], 2 * sizeof(float));
    CHECK(v && kiln_get_f32_nd(v, 1, 2, 0, 0) == 11.0f, "view_2d element");
    CHECK(kiln_view_1d(ctx, a, 13, 0) == NULL, "view past the end fails");
    CHECK(kiln_view_2d(ctx, a, 4, 3, a->nb[1], 4) == NULL, "offset view past the end fails");
    struct kiln_tensor * vv = kiln_view_1d(ctx, v, 2, a->nb[1]);
    CHECK(vv && vv->view_src == a && kiln_get_f32_1d(vv, 0) == 6.0f, "view of a view points at the storage");

    struct kiln_tensor * b = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 2, 3, 4, 5);
    struct kiln_tensor * pb = kiln_permute(ctx, b, 2, 0, 1, 3);
    CHECK(pb && pb->ne[0] == 3 && pb->ne[1] == 4 && pb->ne[2] == 2 && pb->ne[3] == 5, "permute shape");
    CHECK(kiln_permute(ctx, b, 0, 0, 1, 2) == NULL, "bad permutation rejected");
    CHECK(kiln_permute(ctx, NULL, 0, 1, 2, 3) == NULL && strstr(kiln_last_error(), "NULL"), "NULL rejected");
    kiln_free(ctx);
}

static void test_graph(void) {
    tu_case = "graph";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3);
    struct kiln_tensor * r = kiln_reshape_1d(ctx, a, 12);
    struct kiln_tensor * t = kiln_transpose(ctx, kiln_reshape_2d(ctx, r, 3, 4));
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    CHECK(kiln_build_forward_expand(g, t) == KILN_STATUS_SUCCESS, "build");
    CHECK(kiln_graph_n_leafs(g) == 1 && kiln_graph_n_nodes(g) == 3, "leafs %d nodes %d", kiln_graph_n_leafs(g), kiln_graph_n_nodes(g));
    CHECK(kiln_graph_node(g, -1) == t && kiln_graph_node(g, 0) == r, "topological order");
    /* adding again is a no-op */
    CHECK(kiln_build_forward_expand(g, t) == KILN_STATUS_SUCCESS && kiln_graph_n_nodes(g) == 3, "idempotent");
    CHECK(kiln_build_forward_expand(g, NULL) == KILN_STATUS_INVALID_ARG, "NULL tensor is an error");
    CHECK(kiln_graph_compute_with_ctx(ctx, g, 2) == KILN_STATUS_SUCCESS, "compute of views");

    /* a small graph overflows cleanly */
    struct kiln_cgraph * small = kiln_new_graph_custom(ctx, 2, false);
    CHECK(kiln_build_forward_expand(small, t) == KILN_STATUS_FAILED && strstr(kiln_last_error(), "full"), "graph full");

    struct kiln_cgraph * d = kiln_graph_dup(ctx, g);
    CHECK(d && kiln_graph_n_nodes(d) == 3 && kiln_graph_node(d, 2) == t, "graph_dup");
    kiln_free(ctx);
}

static void test_types(void) {
    tu_case = "types";
    CHECK(kiln_type_size(KILN_TYPE_Q8_0) == 34 && kiln_blck_size(KILN_TYPE_Q8_0) == 32, "q8_0 traits");
    CHECK(kiln_type_size(KILN_TYPE_Q6_K) == 210 && kiln_blck_size(KILN_TYPE_Q6_K) == 256, "q6_K traits");
    CHECK(kiln_type_size(KILN_TYPE_BF16) == 2 && !kiln_is_quantized(KILN_TYPE_BF16), "bf16 traits");
    CHECK(strcmp(kiln_type_name(KILN_TYPE_IQ4_XS), "iq4_xs") == 0, "names");
    CHECK(!kiln_type_is_valid(31) && !kiln_type_is_valid(39) && !kiln_type_is_valid(-1), "invalid ids");
    CHECK(kiln_row_size(KILN_TYPE_Q4_K, 512) == 288, "row size");
    /* fp16 round trips and rounding */
    CHECK(kiln_fp16_to_fp32(kiln_fp32_to_fp16(1.0f)) == 1.0f, "fp16 1.0");
    CHECK(kiln_fp32_to_fp16(65504.0f) == 0x7bff && kiln_fp32_to_fp16(65520.0f) == 0x7c00, "fp16 max/overflow");
    CHECK(kiln_fp32_to_fp16(5.9604645e-8f) == 0x0001, "fp16 smallest subnormal");
    CHECK(kiln_fp32_to_fp16(1.0f + 1.0f / 2048) == 0x3c00, "fp16 ties to even (down)");
    CHECK(kiln_fp32_to_fp16(1.0f + 3.0f / 2048) == 0x3c02, "fp16 ties to even (up)");
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        if (((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff)) continue; /* nan payloads */
        if (kiln_fp32_to_fp16(kiln_fp16_to_fp32((kiln_fp16_t) h)) != h) bad++;
    }
    CHECK(bad == 0, "every half round-trips (%d bad)", bad);
    kiln_bf16_t b = kiln_fp32_to_bf16(1.00390625f); /* exactly halfway: ties to even */
    CHECK(b.bits == 0x3f80, "bf16 ties to even: %04x", b.bits);
    CHECK(strcmp(kiln_op_name(KILN_OP_MUL_MAT), "MUL_MAT") == 0 && strcmp(kiln_op_symbol(KILN_OP_ADD), "x+y") == 0, "op names");
    CHECK(strcmp(kiln_unary_op_name(KILN_UNARY_OP_GELU_QUICK), "GELU_QUICK") == 0, "unary names");
}

int main(void) {
    test_context_and_tensors();
    test_views();
    test_graph();
    test_types();
    return tu_finish();
}
