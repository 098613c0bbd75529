/*
 * galloc.c — the graph allocator: gives every tensor of a graph that has no
 * data an offset in one buffer, reusing memory once a tensor's last consumer
 * has run, so a whole forward pass fits in a bounded buffer.
 *
 * Plan (per graph): walk nodes in execution order; allocate each node when it
 * is produced; after it, release every source whose consumers are all done.
 * Views take their storage's address and keep the storage alive until the
 * views' own consumers are done. Leafs without data (inputs), tensors flagged
 * INPUT/OUTPUT/PARAM and the graph's last node are never released, so the
 * caller can fill inputs before compute and read outputs after.
 */
#include "graph_internal.h"

#include <stdlib.h>

#define GALLOC_ALIGN 64
#define MAX_FREE_BLOCKS 1024

struct free_block { size_t offset, size; };

/* first-fit-by-best-size free list over a virtual address range */
struct vallocator {
    struct free_block blocks[MAX_FREE_BLOCKS];
    int n;
    size_t end;      /* high-water mark of the range handed out at the end */
};

static size_t va_alloc(struct vallocator * a, size_t size) {
    size = KILN_PAD(size, GALLOC_ALIGN);
    int best = -1;
    for (int i = 0; i < a->n; i++) {
        if (a->blocks[i].size >= size && (best < 0 || a->blocks[i].size < a->blocks[best].size)) best = i;
    }
    if (best >= 0) {
        const size_t off = a->blocks[best].offset;
        a->blocks[best].offset += size;
        a->blocks[best].size -= size;
        if (a->blocks[best].size == 0) {
            memmove(&a->blocks[best], &a->blocks[best + 1], sizeof(struct free_block) * (size_t)(a->n - best - 1));
            a->n--;
        }
        return off;
    }
    /* grow at the end; if the last free block touches the end, extend it */
    if (a->n > 0 && a->blocks[a->n - 1].offset + a->blocks[a->n - 1].size == a->end) {
        const size_t off = a->blocks[a->n - 1].offset;
        a->end = off + size;
        a->n--;
        return off;
    }
    const size_t off = a->end;
    a->end += size;
    return off;
}

static void va_free(struct vallocator * a, size_t offset, size_t size) {
    size = KILN_PAD(size, GALLOC_ALIGN);
    /* insert sorted by offset, merging with neighbours */
    int i = 0;
    while (i < a->n && a->blocks[i].offset < offset) i++;
    const bool merge_prev = i > 0 && a->blocks[i - 1].offset + a->blocks[i - 1].size == offset;
    const bool merge_next = i < a->n && offset + size == a->blocks[i].offset;
    if (merge_prev && merge_next) {
        a->blocks[i - 1].size += size + a->blocks[i].size;
        memmove(&a->blocks[i], &a->blocks[i + 1], sizeof(struct free_block) * (size_t)(a->n - i - 1));
        a->n--;
    } else if (merge_prev) {
        a->blocks[i - 1].size += size;
    } else if (merge_next) {
        a->blocks[i].offset = offset;
        a->blocks[i].size += size;
    } else if (a->n < MAX_FREE_BLOCKS) {
        memmove(&a->blocks[i + 1], &a->blocks[i], sizeof(struct free_block) * (size_t)(a->n - i));
        a->blocks[i].offset = offset;
        a->blocks[i].size = size;
        a->n++;
    }
    /* (a full free list only wastes memory; it is never wrong) */
}

struct kiln_gallocr {
    uint8_t * buffer;
    size_t    size;
};

struct kiln_gallocr * kiln_gallocr_new(void) {
    struct kiln_gallocr * g = (struct kiln_gallocr *) calloc(1, sizeof(*g));
    if (!g) kiln_set_error("gallocr_new: out of memory");
    return g;
}

void kiln_gallocr_free(struct kiln_gallocr * g) {
    if (!g) return;
    free(g->buffer);
    free(g);
}

size_t kiln_gallocr_get_buffer_size(struct kiln_gallocr * g) { return g ? g->size : 0; }

/* per-tensor bookkeeping during planning, keyed by the graph's hash slots */
struct tinfo {
    int    n_children; /* consumers not yet run */
    int    n_views;    /* live views on this storage */
    bool   allocated;  /* holds memory right now */
    bool   planned;    /* got an offset in this plan */
    bool   keep;       /* never released (inputs, outputs) */
    size_t offset;
};

static bool in_buffer(const struct kiln_gallocr * g, const void * p) {
    return g->buffer && p && (const uint8_t *) p >= g->buffer && (const uint8_t *) p < g->buffer + g->size;
}

static bool needs_alloc(const struct kiln_gallocr * g, const struct kiln_tensor * t) {
    return t->view_src == NULL && (t->data == NULL || in_buffer(g, t->data));
}

/* Plans offsets; returns the buffer size needed, or SIZE_MAX on error. */
static size_t plan(struct kiln_gallocr * g, struct kiln_cgraph * graph, struct tinfo * info) {
    struct kiln_hash_set * hs = &graph->visited_hash_set;
    struct vallocator * va = (struct vallocator *) calloc(1, sizeof(*va));
    if (!va) { kiln_set_error("gallocr: out of memory"); return SIZE_MAX; }
#define INFO(t) (&info[kiln_hash_find(hs, (t))])

    /* count consumers and views */
    for (int i = 0; i < graph->n_nodes; i++) {
        struct kiln_tensor * node = graph->nodes[i];
        for (int s = 0; s < KILN_MAX_SRC; s++) {
            struct kiln_tensor * src = node->src[s];
            if (!src) continue;
            if (!kiln_hash_contains(hs, src)) {
                kiln_set_error("gallocr: source '%s' of node '%s' is not in the graph", src->name, node->name);
                free(va);
                return SIZE_MAX;
            }
            INFO(src)->n_children++;
        }
        if (node->view_src && kiln_hash_contains(hs, node->view_src)) INFO(node->view_src)->n_views++;
    }

    /* leafs: inputs get memory for the whole graph */
    for (int i = 0; i < graph->n_leafs; i++) {
        struct kiln_tensor * leaf = graph->leafs[i];
        struct tinfo * ti = INFO(leaf);
        ti->keep = true;
        if (needs_alloc(g, leaf) && !ti->allocated) {
            ti->offset = va_alloc(va, kiln_nbytes(leaf));
            ti->allocated = ti->planned = true;
        }
    }

    for (int i = 0; i < graph->n_nodes; i++) {
        struct kiln_tensor * node = graph->nodes[i];
        struct tinfo * ti = INFO(node);
        if (node->flags & (KILN_TENSOR_FLAG_INPUT | KILN_TENSOR_FLAG_OUTPUT | KILN_TENSOR_FLAG_PARAM) || i == graph->n_nodes - 1) {
            ti->keep = true;
        }
        if (needs_alloc(g, node) && !ti->allocated) {
            ti->offset = va_alloc(va, kiln_nbytes(node));
            ti->allocated = ti->planned = true;
        }
        /* release sources whose consumers are all done */
        for (int s = 0; s < KILN_MAX_SRC; s++) {
            struct kiln_tensor * src = node->src[s];
            if (!src) continue;
            struct tinfo * si = INFO(src);
            si->n_children--;
            if (si->n_children > 0 || si->n_views > 0) continue;
            if (src->view_src) {
                /* a finished view lets go of its storage */
                if (!kiln_hash_contains(hs, src->view_src)) continue;
                struct tinfo * vi = INFO(src->view_src);
                vi->n_views--;
                if (vi->n_views == 0 && vi->n_children == 0 && vi->allocated && !vi->keep) {
                    va_free(va, vi->offset, kiln_nbytes(src->view_src));
                    vi->allocated = false;
                }
            } else if (si->allocated && !si->keep) {
                va_free(va, si->offset, kiln_nbytes(src));
                si->allocated = false;
            }
        }
    }
#undef INFO
    const size_t end = va->end;
    free(va);
    return end;
}

static bool run(struct kiln_gallocr * g, struct kiln_cgraph * graph, bool assign) {
    if (!g || !graph) { kiln_set_error("gallocr: allocator or graph is NULL"); return false; }
    const size_t hs = graph->visited_hash_set.size;
    struct tinfo * info = (struct tinfo *) calloc(hs, sizeof(struct tinfo));
    if (!info) { kiln_set_error("gallocr: out of memory"); return false; }
    const size_t need = plan(g, graph, info);
    if (need == SIZE_MAX) { free(info); return false; }
    if (need > g->size) {
        void * p = NULL;
        if (posix_memalign(&p, GALLOC_ALIGN, need) != 0 || !p) {
            kiln_set_error("gallocr: cannot allocate a compute buffer of %zu bytes", need);
            free(info);
            return false;
        }
        /* every tensor that pointed into the old buffer is re-planned below */
        free(g->buffer);
        g->buffer = (uint8_t *) p;
        g->size = need;
    }
    if (assign) {
        struct kiln_hash_set * set = &graph->visited_hash_set;
        /* storage first (a released tensor keeps its address: its memory is
         * only reused after its last consumer ran), then views on top */
        for (int k = 0; k < graph->n_leafs + graph->n_nodes; k++) {
            struct kiln_tensor * t = k < graph->n_leafs ? graph->leafs[k] : graph->nodes[k - graph->n_leafs];
            const struct tinfo * ti = &info[kiln_hash_find(set, t)];
            if (ti->planned) t->data = g->buffer + ti->offset;
        }
        for (int k = 0; k < graph->n_leafs + graph->n_nodes; k++) {
            struct kiln_tensor * t = k < graph->n_leafs ? graph->leafs[k] : graph->nodes[k - graph->n_leafs];
            if (t->view_src) {
                if (!t->view_src->data) {
                    kiln_set_error("gallocr: view '%s' has a source '%s' without data that is not in the graph", t->name, t->view_src->name);
                    free(info);
                    return false;
                }
                t->data = (char *) t->view_src->data + t->view_offs;
            }
        }
    }
    free(info);
    return true;
}

bool kiln_gallocr_reserve(struct kiln_gallocr * g, struct kiln_cgraph * graph) {
    return run(g, graph, false);
}

bool kiln_gallocr_alloc_graph(struct kiln_gallocr * g, struct kiln_cgraph * graph) {
    return run(g, graph, true);
}
