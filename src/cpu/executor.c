/*
 * executor.c — planning (work buffer size) and running a graph on a pool.
 */
#include "../core/graph_internal.h"

#include <stdlib.h>

#ifndef KILN_NO_THREADS
#include <pthread.h>
#endif

/* work size of one node for n_threads, from the op table's work column */
static size_t node_work_size(const struct kiln_tensor * node, int n_threads) {
#define WORK_0(lower) 0
#define WORK_1(lower) kiln_cpu_work_##lower(node, n_threads)
#define WORK_CASE_(UPPER, lower, sym, n_src, tasks, work, grad) case KILN_OP_##UPPER: return WORK_##work(lower);
    switch (node->op) {
        KILN_OP_LIST(WORK_CASE_)
        default: return 0;
    }
#undef WORK_CASE_
#undef WORK_1
#undef WORK_0
}

struct kiln_cplan kiln_graph_plan(const struct kiln_cgraph * g, int n_threads, struct kiln_threadpool * threadpool) {
    struct kiln_cplan plan;
    memset(&plan, 0, sizeof(plan));
    if (n_threads < 1) n_threads = 1;
    if (n_threads > KILN_MAX_N_THREADS) n_threads = KILN_MAX_N_THREADS;
    if (threadpool) n_threads = KILN_MIN(n_threads, kiln_threadpool_get_n_threads(threadpool));
    size_t work = 0;
    for (int i = 0; g && i < g->n_nodes; i++) {
        const struct kiln_tensor * node = g->nodes[i];
        const int nt = kiln_op_tasks(node->op) == KILN_TASKS_ONE ? 1 : n_threads;
        const size_t w = node_work_size(node, nt);
        if (w > work) work = w;
    }
    /* room for per-thread padding so threads never share a cache line */
    if (work > 0) work += KILN_CACHE_LINE * (size_t) n_threads;
    plan.work_size = work;
    plan.n_threads = n_threads;
    plan.threadpool = threadpool;
    return plan;
}

/* The shared default pool: persistent across computes. A compute that finds
 * it busy (another thread computing) gets a temporary pool instead. */
#ifndef KILN_NO_THREADS
static pthread_mutex_t g_pool_mu = PTHREAD_MUTEX_INITIALIZER;
#endif
static struct kiln_threadpool * g_pool = NULL;
static bool g_pool_busy = false;

static struct kiln_threadpool * acquire_pool(int n_threads, bool * temporary) {
    *temporary = false;
#ifndef KILN_NO_THREADS
    pthread_mutex_lock(&g_pool_mu);
#endif
    struct kiln_threadpool * tp = NULL;
    if (!g_pool_busy) {
        if (g_pool && kiln_threadpool_get_n_threads(g_pool) < n_threads) {
            kiln_threadpool_free(g_pool);
            g_pool = NULL;
        }
        if (!g_pool) g_pool = kiln_threadpool_new(kiln_threadpool_params_default(n_threads));
        if (g_pool) { g_pool_busy = true; tp = g_pool; }
    }
#ifndef KILN_NO_THREADS
    pthread_mutex_unlock(&g_pool_mu);
#endif
    if (!tp) {
        tp = kiln_threadpool_new(kiln_threadpool_params_default(n_threads));
        *temporary = tp != NULL;
    }
    return tp;
}

static void release_pool(struct kiln_threadpool * tp, bool temporary) {
    if (temporary) { kiln_threadpool_free(tp); return; }
#ifndef KILN_NO_THREADS
    pthread_mutex_lock(&g_pool_mu);
#endif
    g_pool_busy = false;
#ifndef KILN_NO_THREADS
    pthread_mutex_unlock(&g_pool_mu);
#endif
}

enum kiln_status kiln_graph_compute(struct kiln_cgraph * g, struct kiln_cplan * cplan) {
    if (!g || !cplan) { kiln_set_error("graph_compute: graph or plan is NULL"); return KILN_STATUS_INVALID_ARG; }
    if (cplan->work_size > 0 && !cplan->work_data) {
        kiln_set_error("graph_compute: the plan needs a work buffer of %zu bytes (cplan.work_data is NULL)", cplan->work_size);
        return KILN_STATUS_INVALID_ARG;
    }
    const int n_threads = KILN_MAX(1, cplan->n_threads);
    bool temporary = false;
    struct kiln_threadpool * tp = cplan->threadpool;
    if (!tp) tp = acquire_pool(n_threads, &temporary);
    if (!tp) return KILN_STATUS_ALLOC_FAILED;
    const enum kiln_status st = kiln_threadpool_run(tp, g, cplan, n_threads);
    if (!cplan->threadpool) release_pool(tp, temporary);
    return st;
}

enum kiln_status kiln_graph_compute_with_ctx(struct kiln_context * ctx, struct kiln_cgraph * g, int n_threads) {
    if (!ctx || !g) { kiln_set_error("graph_compute_with_ctx: context or graph is NULL"); return KILN_STATUS_INVALID_ARG; }
    struct kiln_cplan plan = kiln_graph_plan(g, n_threads, NULL);
    if (plan.work_size > 0) {
        /* the work buffer lives in ctx, like ggml; it must have room */
        const bool na = ctx->no_alloc;
        ctx->no_alloc = false;
        plan.work_data = (uint8_t *) kiln_new_buffer(ctx, plan.work_size);
        ctx->no_alloc = na;
        if (!plan.work_data) return KILN_STATUS_ALLOC_FAILED;
    }
    return kiln_graph_compute(g, &plan);
}
