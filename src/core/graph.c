/*
 * graph.c — compute graphs: built from result tensors in topological order
 * (sources before consumers), stored in a context like any other object.
 */
#include "graph_internal.h"

#include <stdlib.h>

/* ------------------------------------------------------------- hash set */

size_t kiln_hash_size(size_t min_sz) {
    /* a prime above 2*min_sz keeps probe sequences short */
    size_t n = min_sz * 2 + 1;
    if (n < 7) n = 7;
    for (;; n += 2) {
        bool prime = true;
        for (size_t d = 3; d * d <= n; d += 2) if (n % d == 0) { prime = false; break; }
        if (prime) return n;
    }
}

static inline size_t hash_ptr(const void * p) { return (size_t)(uintptr_t) p >> 4; }
static inline bool bit_get(const uint32_t * b, size_t i) { return (b[i >> 5] >> (i & 31)) & 1; }
static inline void bit_set(uint32_t * b, size_t i) { b[i >> 5] |= 1u << (i & 31); }

size_t kiln_hash_find(const struct kiln_hash_set * hs, const struct kiln_tensor * key) {
    size_t h = hash_ptr(key) % hs->size;
    size_t i = h;
    while (bit_get(hs->used, i) && hs->keys[i] != key) {
        i = (i + 1) % hs->size;
        if (i == h) return KILN_HASHSET_FULL;
    }
    return i;
}
bool kiln_hash_contains(const struct kiln_hash_set * hs, const struct kiln_tensor * key) {
    size_t i = kiln_hash_find(hs, key);
    return i != KILN_HASHSET_FULL && bit_get(hs->used, i);
}
size_t kiln_hash_insert(struct kiln_hash_set * hs, struct kiln_tensor * key) {
    size_t i = kiln_hash_find(hs, key);
    if (i == KILN_HASHSET_FULL) return KILN_HASHSET_FULL;
    if (bit_get(hs->used, i)) return KILN_HASHSET_ALREADY_EXISTS;
    bit_set(hs->used, i);
    hs->keys[i] = key;
    return i;
}

/* ---------------------------------------------------------------- graph */

static size_t graph_nbytes(size_t size, bool grads) {
    const size_t hs = kiln_hash_size(size * 2);
    size_t n = sizeof(struct kiln_cgraph);
    n += size * sizeof(struct kiln_tensor *) * 2;           /* nodes, leafs */
    n += hs * sizeof(struct kiln_tensor *);                 /* hash keys */
    if (grads) n += hs * sizeof(struct kiln_tensor *) * 2;  /* grads, grad_accs */
    n += ((hs + 31) / 32) * sizeof(uint32_t);               /* used bits */
    return n;
}

size_t kiln_graph_overhead_custom(size_t size, bool grads) {
    return sizeof(struct kiln_object) + KILN_PAD(graph_nbytes(size, grads), KILN_MEM_ALIGN);
}
size_t kiln_graph_overhead(void) { return kiln_graph_overhead_custom(KILN_DEFAULT_GRAPH_SIZE, false); }

struct kiln_cgraph * kiln_new_graph_custom(struct kiln_context * ctx, size_t size, bool grads) {
    if (!ctx) { kiln_set_error("new_graph: context is NULL"); return NULL; }
    if (size == 0 || size > (1u << 26)) { kiln_set_error("new_graph: size %zu out of range", size); return NULL; }
    const size_t nbytes = graph_nbytes(size, grads);
    struct kiln_object * obj = kiln_new_object(ctx, KILN_OBJECT_GRAPH, nbytes);
    if (!obj) return NULL;
    struct kiln_cgraph * g = (struct kiln_cgraph *)((char *) ctx->mem_buffer + obj->offs);
    const size_t hs = kiln_hash_size(size * 2);
    struct kiln_tensor ** p = (struct kiln_tensor **)(g + 1);
    memset(g, 0, sizeof(*g));
    g->size = (int) size;
    g->nodes = p; p += size;
    g->leafs = p; p += size;
    g->visited_hash_set.keys = p; p += hs;
    if (grads) {
        g->grads = p; p += hs;
        g->grad_accs = p; p += hs;
        memset(g->grads, 0, hs * sizeof(*p));
        memset(g->grad_accs, 0, hs * sizeof(*p));
    }
    g->visited_hash_set.size = hs;
    g->visited_hash_set.used = (uint32_t *) p;
    memset(g->visited_hash_set.used, 0, ((hs + 31) / 32) * sizeof(uint32_t));
    return g;
}

struct kiln_cgraph * kiln_new_graph(struct kiln_context * ctx) {
    return kiln_new_graph_custom(ctx, KILN_DEFAULT_GRAPH_SIZE, false);
}

void kiln_graph_clear(struct kiln_cgraph * g) {
    if (!g) return;
    g->n_nodes = 0;
    g->n_leafs = 0;
    memset(g->visited_hash_set.used, 0, ((g->visited_hash_set.size + 31) / 32) * sizeof(uint32_t));
}

void kiln_graph_cpy(struct kiln_cgraph * src, struct kiln_cgraph * dst) {
    if (!src || !dst || dst->size < src->n_nodes || dst->size < src->n_leafs) {
        kiln_set_error("graph_cpy: destination graph is too small");
        return;
    }
    kiln_graph_clear(dst);
    for (int i = 0; i < src->n_leafs; i++) { dst->leafs[i] = src->leafs[i]; kiln_hash_insert(&dst->visited_hash_set, src->leafs[i]); }
    for (int i = 0; i < src->n_nodes; i++) { dst->nodes[i] = src->nodes[i]; kiln_hash_insert(&dst->visited_hash_set, src->nodes[i]); }
    dst->n_leafs = src->n_leafs;
    dst->n_nodes = src->n_nodes;
    if (src->grads && dst->grads) {
        for (size_t i = 0; i < src->visited_hash_set.size; i++) {
            if (!bit_get(src->visited_hash_set.used, i)) continue;
            struct kiln_tensor * t = src->visited_hash_set.keys[i];
            size_t j = kiln_hash_find(&dst->visited_hash_set, t);
            if (j == KILN_HASHSET_FULL) continue;
            dst->grads[j] = src->grads[i];
            dst->grad_accs[j] = src->grad_accs[i];
        }
    }
}

struct kiln_cgraph * kiln_graph_dup(struct kiln_context * ctx, struct kiln_cgraph * g) {
    if (!g) { kiln_set_error("graph_dup: graph is NULL"); return NULL; }
    struct kiln_cgraph * r = kiln_new_graph_custom(ctx, (size_t) g->size, g->grads != NULL);
    if (r) kiln_graph_cpy(g, r);
    return r;
}

/* Depth-first visit: sources first. Iterative, so that very deep graphs
 * (long chains of ops) cannot overflow a small wasm stack. */
static enum kiln_status visit(struct kiln_cgraph * g, struct kiln_tensor * root) {
    enum { STACK_MAX = 1 << 16 };
    struct frame { struct kiln_tensor * t; int next_src; };
    struct frame * stack = (struct frame *) malloc(sizeof(struct frame) * 64);
    int cap = 64, sp = 0;
    if (!stack) { kiln_set_error("build_forward_expand: out of memory"); return KILN_STATUS_ALLOC_FAILED; }
    if (kiln_hash_contains(&g->visited_hash_set, root)) { free(stack); return KILN_STATUS_SUCCESS; }
    if (kiln_hash_insert(&g->visited_hash_set, root) == KILN_HASHSET_FULL) goto full;
    stack[sp++] = (struct frame) { root, 0 };
    while (sp > 0) {
        struct frame * f = &stack[sp - 1];
        struct kiln_tensor * t = f->t;
        if (f->next_src < KILN_MAX_SRC) {
            struct kiln_tensor * s = t->src[f->next_src++];
            if (!s || kiln_hash_contains(&g->visited_hash_set, s)) continue;
            if (kiln_hash_insert(&g->visited_hash_set, s) == KILN_HASHSET_FULL) goto full;
            if (sp == cap) {
                if (cap >= STACK_MAX * 16) { kiln_set_error("build_forward_expand: graph too deep"); free(stack); return KILN_STATUS_FAILED; }
                struct frame * ns = (struct frame *) realloc(stack, sizeof(struct frame) * (size_t) cap * 2);
                if (!ns) { free(stack); kiln_set_error("build_forward_expand: out of memory"); return KILN_STATUS_ALLOC_FAILED; }
                stack = ns; cap *= 2;
            }
            stack[sp++] = (struct frame) { s, 0 };
            continue;
        }
        /* all sources done: emit */
        sp--;
        const bool is_leaf = t->op == KILN_OP_NONE && !(t->flags & KILN_TENSOR_FLAG_PARAM);
        if (is_leaf) {
            if (g->n_leafs >= g->size) goto full;
            g->leafs[g->n_leafs++] = t;
            if (t->name[0] == 0) kiln_format_name(t, "leaf_%d", g->n_leafs - 1);
        } else {
            if (g->n_nodes >= g->size) goto full;
            g->nodes[g->n_nodes++] = t;
            if (t->name[0] == 0) kiln_format_name(t, "node_%d", g->n_nodes - 1);
        }
    }
    free(stack);
    return KILN_STATUS_SUCCESS;
full:
    free(stack);
    kiln_set_error("build_forward_expand: graph is full (size %d); use kiln_new_graph_custom with a larger size", g->size);
    return KILN_STATUS_FAILED;
}

enum kiln_status kiln_build_forward_expand(struct kiln_cgraph * g, struct kiln_tensor * tensor) {
    if (!g) { kiln_set_error("build_forward_expand: graph is NULL"); return KILN_STATUS_INVALID_ARG; }
    if (!tensor) {
        kiln_set_error("build_forward_expand: tensor is NULL (did a constructor fail? last error: see earlier message)");
        return KILN_STATUS_INVALID_ARG;
    }
    return visit(g, tensor);
}

int kiln_graph_size(struct kiln_cgraph * g) { return g->size; }
int kiln_graph_n_nodes(struct kiln_cgraph * g) { return g->n_nodes; }
int kiln_graph_n_leafs(struct kiln_cgraph * g) { return g->n_leafs; }
struct kiln_tensor ** kiln_graph_nodes(struct kiln_cgraph * g) { return g->nodes; }

struct kiln_tensor * kiln_graph_node(struct kiln_cgraph * g, int i) {
    if (i < 0) i += g->n_nodes;
    if (i < 0 || i >= g->n_nodes) { kiln_set_error("graph_node: index out of range"); return NULL; }
    return g->nodes[i];
}
struct kiln_tensor * kiln_graph_leaf(struct kiln_cgraph * g, int i) {
    if (i < 0) i += g->n_leafs;
    if (i < 0 || i >= g->n_leafs) { kiln_set_error("graph_leaf: index out of range"); return NULL; }
    return g->leafs[i];
}

struct kiln_tensor * kiln_graph_get_tensor(struct kiln_cgraph * g, const char * name) {
    for (int i = 0; i < g->n_leafs; i++) if (strcmp(g->leafs[i]->name, name) == 0) return g->leafs[i];
    for (int i = 0; i < g->n_nodes; i++) if (strcmp(g->nodes[i]->name, name) == 0) return g->nodes[i];
    return NULL;
}

void kiln_graph_print(const struct kiln_cgraph * g) {
    KILN_LOG_INFO("=== GRAPH ===\n");
    KILN_LOG_INFO("n_nodes = %d\n", g->n_nodes);
    for (int i = 0; i < g->n_nodes; i++) {
        const struct kiln_tensor * t = g->nodes[i];
        KILN_LOG_INFO(" - %3d: [ %5lld, %5lld, %5lld, %5lld] %16s %s %s\n", i,
                      (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3],
                      kiln_op_name(t->op), kiln_type_name(t->type), t->name);
    }
    KILN_LOG_INFO("n_leafs = %d\n", g->n_leafs);
    for (int i = 0; i < g->n_leafs; i++) {
        const struct kiln_tensor * t = g->leafs[i];
        KILN_LOG_INFO(" - %3d: [ %5lld, %5lld] %8s %16s\n", i, (long long) t->ne[0], (long long) t->ne[1],
                      kiln_op_name(t->op), t->name);
    }
    KILN_LOG_INFO("========================================\n");
}
