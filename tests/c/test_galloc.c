/*
 * test_galloc.c — the graph allocator plans buffers with reuse, never lets a
 * node's output overlap its live sources, and keeps inputs/outputs intact.
 * Graphs here are built by hand (op + src) since only the plan is tested.
 */
#include "util/test_util.h"

static struct kiln_tensor * fake_op(struct kiln_context * ctx, enum kiln_op op, struct kiln_tensor * a, struct kiln_tensor * b, int64_t n) {
    struct kiln_tensor * t = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, n);
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    return t;
}

static bool overlap(const struct kiln_tensor * a, const struct kiln_tensor * b) {
    const char * a0 = (const char *) a->data, * a1 = a0 + kiln_nbytes(a);
    const char * b0 = (const char *) b->data, * b1 = b0 + kiln_nbytes(b);
    return a0 < b1 && b0 < a1;
}

static void test_chain_reuse(void) {
    tu_case = "chain";
    struct kiln_init_params p = { 1 << 20, NULL, true };
    struct kiln_context * ctx = kiln_init(p);
    const int64_t n = 1000; /* 4000 bytes */
    struct kiln_tensor * x = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, n);
    kiln_set_input(x);
    struct kiln_tensor * cur = x;
    const int depth = 50;
    for (int i = 0; i < depth; i++) cur = fake_op(ctx, KILN_OP_ADD, cur, x, n);
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    kiln_build_forward_expand(g, cur);
    struct kiln_gallocr * ga = kiln_gallocr_new();
    CHECK(kiln_gallocr_alloc_graph(ga, g), "alloc: %s", kiln_last_error());
    const size_t sz = kiln_gallocr_get_buffer_size(ga);
    const size_t row = (4000 + 63) / 64 * 64;
    CHECK(sz <= 4 * row, "chain of %d nodes planned in %zu bytes (one tensor = %zu)", depth, sz, row);
    CHECK(sz >= 3 * row, "input + two live nodes need at least 3 tensors, got %zu", sz);
    for (int i = 0; i < kiln_graph_n_nodes(g); i++) {
        struct kiln_tensor * t = kiln_graph_node(g, i);
        CHECK(t->data != NULL, "node %d has data", i);
        for (int s = 0; s < 2; s++) CHECK(!overlap(t, t->src[s]), "node %d overlaps its source %d", i, s);
        CHECK(!overlap(t, x), "node %d overlaps the input", i);
    }
    /* re-planning the same graph is stable */
    void * last = cur->data;
    CHECK(kiln_gallocr_alloc_graph(ga, g) && cur->data == last && kiln_gallocr_get_buffer_size(ga) == sz, "stable re-plan");
    kiln_gallocr_free(ga);
    kiln_free(ctx);
}

static void test_diamond_and_views(void) {
    tu_case = "diamond";
    struct kiln_init_params p = { 1 << 20, NULL, true };
    struct kiln_context * ctx = kiln_init(p);
    const int64_t n = 256;
    struct kiln_tensor * x = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, n);
    struct kiln_tensor * a = fake_op(ctx, KILN_OP_SQR, x, NULL, n);
    struct kiln_tensor * b = fake_op(ctx, KILN_OP_SQRT, a, NULL, n);
    struct kiln_tensor * av = kiln_view_1d(ctx, a, n / 2, 0);         /* a view keeps a alive */
    struct kiln_tensor * c = fake_op(ctx, KILN_OP_LOG, b, NULL, n);
    struct kiln_tensor * d = fake_op(ctx, KILN_OP_MUL, c, NULL, n);
    struct kiln_tensor * e = fake_op(ctx, KILN_OP_ADD, d, NULL, n / 2);
    e->src[1] = av;
    struct kiln_tensor * keep = fake_op(ctx, KILN_OP_SIN, b, NULL, n);
    kiln_set_output(keep);
    struct kiln_tensor * f = fake_op(ctx, KILN_OP_ADD, e, keep, n / 2);
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    kiln_build_forward_expand(g, f);
    struct kiln_gallocr * ga = kiln_gallocr_new();
    CHECK(kiln_gallocr_alloc_graph(ga, g), "alloc: %s", kiln_last_error());
    CHECK(av->data == a->data, "view shares its storage");
    /* a must stay intact until e (the view's consumer) ran: nothing produced
     * between a and e may overlap a */
    struct kiln_tensor * between[] = { b, c, d, keep };
    for (int i = 0; i < 4; i++) {
        if (between[i] == keep) continue;
        CHECK(!overlap(between[i], a), "tensor %d overwrote a while its view was live", i);
    }
    CHECK(!overlap(f, keep) && !overlap(f, e), "output does not overlap its sources");
    /* keep is an output: nothing after it may overlap it */
    CHECK(!overlap(keep, e) && !overlap(keep, f), "output kept");
    kiln_gallocr_free(ga);

    /* a source outside the graph with no data is an error, not a crash */
    struct kiln_tensor * orphan = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 4);
    struct kiln_tensor * vo = kiln_view_1d(ctx, orphan, 2, 0);
    struct kiln_cgraph * g2 = kiln_new_graph(ctx);
    struct kiln_tensor * h = fake_op(ctx, KILN_OP_SQR, vo, NULL, 2);
    h->src[0] = vo; vo->src[0] = NULL; /* hide the storage from the graph */
    kiln_build_forward_expand(g2, h);
    ga = kiln_gallocr_new();
    CHECK(!kiln_gallocr_alloc_graph(ga, g2) && strstr(kiln_last_error(), "without data"), "orphan view: %s", kiln_last_error());
    kiln_gallocr_free(ga);
    kiln_free(ctx);
}

int main(void) {
    test_chain_reuse();
    test_diamond_and_views();
    return tu_finish();
}
