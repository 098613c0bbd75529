/*
 * simple-mlp.c — a C program written against kiln.h with ggml-style calls
 * only: a context, tensors, ops, a graph, compute on 2 threads. It runs a
 * small two-layer network on fixed inputs and prints the result, which
 * tests/numpy/check_simple_mlp.py compares with numpy.
 *
 *   y = softmax(W2 · gelu(W1 · x + b1) + b2),  x: 8 inputs × 5 samples
 */
#include "kiln.h"

#include <math.h>
#include <stdio.h>

/* the same deterministic values the numpy script builds */
static void fill(struct kiln_tensor * t, float a, float b) {
    for (int i = 0; i < kiln_nelements(t); i++) kiln_set_f32_1d(t, i, a * sinf(b * (float) i + 0.5f));
}

int main(void) {
    struct kiln_init_params params = { 16 * 1024 * 1024, NULL, false };
    struct kiln_context * ctx = kiln_init(params);
    if (!ctx) { fprintf(stderr, "init: %s\n", kiln_last_error()); return 1; }

    struct kiln_tensor * x  = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 5);   /* 5 samples of 8 */
    struct kiln_tensor * w1 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 16);  /* 8 -> 16 */
    struct kiln_tensor * b1 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 16);
    struct kiln_tensor * w2 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 16, 4);  /* 16 -> 4 */
    struct kiln_tensor * b2 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    fill(x, 1.0f, 0.37f);
    fill(w1, 0.5f, 0.11f);
    fill(b1, 0.1f, 0.7f);
    fill(w2, 0.8f, 0.23f);
    fill(b2, 0.2f, 1.3f);

    struct kiln_tensor * h = kiln_gelu(ctx, kiln_add(ctx, kiln_mul_mat(ctx, w1, x), b1));
    struct kiln_tensor * y = kiln_soft_max(ctx, kiln_add(ctx, kiln_mul_mat(ctx, w2, h), b2));
    if (!y) { fprintf(stderr, "graph: %s\n", kiln_last_error()); return 1; }

    struct kiln_cgraph * gf = kiln_new_graph(ctx);
    kiln_build_forward_expand(gf, y);
    const enum kiln_status st = kiln_graph_compute_with_ctx(ctx, gf, 2);
    if (st != KILN_STATUS_SUCCESS) { fprintf(stderr, "compute: %s\n", kiln_last_error()); return 1; }

    /* y is [4, 5]: one line per sample */
    for (int j = 0; j < 5; j++) {
        for (int i = 0; i < 4; i++) printf("%s%.9g", i ? " " : "", kiln_get_f32_nd(y, i, j, 0, 0));
        printf("\n");
    }
    kiln_free(ctx);
    return 0;
}
