/*
 * graph_internal.h — the compute graph's layout, shared by the graph
 * builder, the executor, the allocator and (later) autodiff.
 */
#ifndef KILN_GRAPH_INTERNAL_H
#define KILN_GRAPH_INTERNAL_H

#include "internal.h"

/* open-addressing set of tensor pointers */
struct kiln_hash_set {
    size_t size;
    uint32_t * used; /* bitset */
    struct kiln_tensor ** keys;
};
#define KILN_HASHSET_FULL ((size_t) -1)
#define KILN_HASHSET_ALREADY_EXISTS ((size_t) -2)

size_t kiln_hash_size(size_t min_sz);
size_t kiln_hash_find(const struct kiln_hash_set * hs, const struct kiln_tensor * key);
size_t kiln_hash_insert(struct kiln_hash_set * hs, struct kiln_tensor * key);
bool   kiln_hash_contains(const struct kiln_hash_set * hs, const struct kiln_tensor * key);

struct kiln_cgraph {
    int size;    /* max nodes/leafs */
    int n_nodes;
    int n_leafs;
    struct kiln_tensor ** nodes;
    struct kiln_tensor ** grads;     /* per hash slot: gradient of the tensor (NULL unless grads) */
    struct kiln_tensor ** grad_accs; /* per hash slot: gradient accumulator */
    struct kiln_tensor ** leafs;
    struct kiln_hash_set visited_hash_set;
};

#endif
