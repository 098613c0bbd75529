/*
 * threadpool.c — persistent workers, a generation barrier and the graph
 * executor loop.
 *
 * Thread 0 is the caller; workers 1..n-1 wait for a new job generation.
 * Waiting spins briefly, then yields, then sleeps on a condition variable:
 * with more threads than free cores (a busy machine, or a browser that
 * reports hardwareConcurrency loosely) a pure spin-wait can livelock, so
 * every wait here ends up sleeping and is woken explicitly.
 *
 * Every thread walks every node; a node is followed by a barrier. Anything
 * that makes the threads stop early (an abort, a kernel error) is decided
 * before that barrier and read after it, so all threads agree on where the
 * walk ends. The decision names the barrier step it belongs to (halt_step):
 * a thread that leaves barrier s late, after a faster thread has already
 * decided to stop at step s + 1, must still walk on to barrier s + 1, or the
 * others wait there for it forever.
 */
#include "../core/graph_internal.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>

#ifndef KILN_NO_THREADS
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#endif
#if defined(__EMSCRIPTEN__) && !defined(KILN_NO_THREADS)
#include <emscripten/emscripten.h>
#endif

#define KILN_DEFAULT_POLL 20000 /* spin iterations before yielding */
#define KILN_YIELDS 64          /* sched_yield()s before sleeping */
#define KILN_FA_MASKS 4         /* distinct flash attention masks a job's estimates keep (full and sliding window) */

struct kiln_threadpool {
    /* each hot atomic on its own cache line: workers hammer them */
    _Alignas(KILN_CACHE_LINE) atomic_int n_barrier;
    _Alignas(KILN_CACHE_LINE) atomic_int n_barrier_passed;
    _Alignas(KILN_CACHE_LINE) atomic_int current_chunk[2]; /* kiln_compute_params.chunk_slot */
    _Alignas(KILN_CACHE_LINE) atomic_int gen;         /* job generation */
    _Alignas(KILN_CACHE_LINE) atomic_int n_sleepers;  /* threads blocked on cond */
    _Alignas(KILN_CACHE_LINE) atomic_int halt_step;   /* first barrier step the walk ends at (INT_MAX: none) */
    atomic_int stop;                             /* pool shutting down */
    atomic_int n_done;                           /* workers finished this job */

    int n_threads; /* pool size, including the caller */
    int n_active;  /* threads taking part in the current job */
    int poll;

    /* current job */
    struct kiln_cgraph * graph;
    /* flash attention masks of the current job and the positions their last
     * query row reads (fa_masks_scan), read by node_solo */
    struct fa_mask_positions { const void * data; int64_t row, positions; } fa_masks[KILN_FA_MASKS];
    int n_fa_masks;
    struct kiln_cplan *  cplan;
    enum kiln_status     status;
    char                 error[512];

#ifndef KILN_NO_THREADS
    pthread_mutex_t mu;
    pthread_cond_t  cv;
    pthread_t *     workers;
    struct worker_arg { struct kiln_threadpool * tp; int ith; } * args;
#endif
};

/* ------------------------------------------------------------ waiting */

#ifndef KILN_NO_THREADS
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Wait until *v != old: spin, yield, then sleep until woken. */
static void wait_change(struct kiln_threadpool * tp, atomic_int * v, int old) {
    for (int i = 0; i < tp->poll; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old) return;
        cpu_relax();
    }
    for (int i = 0; i < KILN_YIELDS; i++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old) return;
        sched_yield();
    }
    pthread_mutex_lock(&tp->mu);
    atomic_fetch_add(&tp->n_sleepers, 1);
    while (atomic_load(v) == old) pthread_cond_wait(&tp->cv, &tp->mu);
    atomic_fetch_sub(&tp->n_sleepers, 1);
    pthread_mutex_unlock(&tp->mu);
}

#if defined(__EMSCRIPTEN__)
/* A barrier wait in wasm. wasm has no pause instruction, so the count
 * spin above lasts only microseconds, and a thread that then sleeps in
 * Atomics.wait takes tens of microseconds to wake (more in a VM, where an
 * idle vCPU is woken through the hypervisor). A decode step of a 2048-wide
 * 8-layer model crosses 122 barriers, so at 2 threads those wake-ups ate
 * the second thread's gain.
 * Here each thread spins up to a time budget of its own, checked against
 * the clock: a wait that ends within it grows the budget (to
 * BARRIER_SPIN_MAX_US), one that runs out halves it (to
 * BARRIER_SPIN_MIN_US). On an idle machine the threads stop sleeping
 * between nodes; on a loaded one (the other thread preempted, so waits
 * run long) the budget falls and the waiter sleeps and frees its core.
 * The ceiling covers the tail of a mat-vec split into a few long chunks
 * per thread (ops_matmul.c): a chunk of a 32000-row output matrix takes
 * ~0.5 ms in wasm. Chromium A/B, 2 threads: 400 -> 2000 us gave Q4_K_M
 * 42.6 -> 61.4 and 58.0 -> 67.5 tok/s, Q8_0 50.7 -> 53.8, Q4_0 equal;
 * with a busy process on the other core, equal (Q4_0 36.3 / 34.5,
 * Q4_K_M 31.9 / 33.2), where a 100 us floor fell from 34.9 to 24.3. */
#define BARRIER_SPIN_MIN_US 8.0
#define BARRIER_SPIN_MAX_US 2000.0
static _Thread_local double tl_spin_us = 50.0;

static void wait_change_barrier(struct kiln_threadpool * tp, atomic_int * v, int old) {
    if (tp->poll > 1) {
        const double t0 = emscripten_get_now() * 1e3, budget = tl_spin_us;
        for (;;) {
            for (int i = 0; i < 64; i++) {
                if (atomic_load_explicit(v, memory_order_acquire) != old) {
                    tl_spin_us = KILN_MIN(BARRIER_SPIN_MAX_US, budget * 1.25 + 4.0);
                    return;
                }
            }
            if (emscripten_get_now() * 1e3 - t0 > budget) break;
        }
        tl_spin_us = KILN_MAX(BARRIER_SPIN_MIN_US, budget * 0.5);
    }
    wait_change(tp, v, old);
}
#else
#define wait_change_barrier wait_change
#endif

/* Called after changing a value others may wait on (seq_cst store first). */
static void wake_all(struct kiln_threadpool * tp) {
    if (atomic_load(&tp->n_sleepers) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
}
#endif

void kiln_barrier(const struct kiln_compute_params * params) {
    struct kiln_threadpool * tp = params->tp;
    if (!tp || params->nth <= 1) return;
#ifndef KILN_NO_THREADS
    const int n = params->nth;
    const int passed = atomic_load(&tp->n_barrier_passed);
    if (atomic_fetch_add(&tp->n_barrier, 1) == n - 1) {
        atomic_store(&tp->n_barrier, 0);
        atomic_fetch_add(&tp->n_barrier_passed, 1);
        wake_all(tp);
        return;
    }
    wait_change_barrier(tp, &tp->n_barrier_passed, passed);
#endif
}


/* Kernels called without a pool (tests calling a kernel directly) count on
 * a per-thread counter instead. */
static _Thread_local int tl_chunk;

int kiln_chunk_next(const struct kiln_compute_params * params) {
    if (!params->tp) return tl_chunk++;
    return atomic_fetch_add(&params->tp->current_chunk[params->chunk_slot & 1], 1);
}

void kiln_chunk_reset(const struct kiln_compute_params * params, int value) {
    if (params->tp) atomic_store(&params->tp->current_chunk[params->chunk_slot & 1], value);
    else tl_chunk = value;
}

/* ------------------------------------------------------------ executor */

typedef enum kiln_status (*fwd_fn)(const struct kiln_compute_params *, struct kiln_tensor *);

#define FWD_ENTRY_(UPPER, lower, sym, n_src, tasks, work, grad) [KILN_OP_##UPPER] = kiln_cpu_fwd_##lower,
static const fwd_fn fwd_table[KILN_OP_COUNT] = { KILN_OP_LIST(FWD_ENTRY_) };
#undef FWD_ENTRY_

static bool job_should_abort(struct kiln_cplan * cplan) {
    if (cplan->abort_flag && *cplan->abort_flag) return true;
    if (cplan->abort_callback && cplan->abort_callback(cplan->abort_callback_data)) return true;
    return false;
}

/* The walk ends at barrier step `step` (or earlier, if already decided). */
static void halt_at(struct kiln_threadpool * tp, int step) {
    int cur = atomic_load(&tp->halt_step);
    while (step < cur && !atomic_compare_exchange_weak(&tp->halt_step, &cur, step)) {}
}

static bool halted(struct kiln_threadpool * tp, int step) { return atomic_load(&tp->halt_step) <= step; }

/* The job's first failure (status and message) wins; the walk ends at
 * barrier step `step`. */
static void stop_at(struct kiln_threadpool * tp, int step, enum kiln_status st, const char * fmt, ...) {
#ifndef KILN_NO_THREADS
    pthread_mutex_lock(&tp->mu);
#endif
    if (tp->status == KILN_STATUS_SUCCESS) {
        tp->status = st;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tp->error, sizeof(tp->error), fmt, ap);
        va_end(ap);
    }
#ifndef KILN_NO_THREADS
    pthread_mutex_unlock(&tp->mu);
#endif
    halt_at(tp, step);
}

static void record_failure(struct kiln_threadpool * tp, enum kiln_status st, const struct kiln_tensor * node, int step) {
    stop_at(tp, step, st, "node '%s' (%s): %s", node->name, kiln_op_name(node->op), kiln_last_error());
}

/* Nodes this small run on thread 0 alone (nth = 1, which every kernel
 * supports with the same results, except flash attention's split decode,
 * which is never solo: node_solo), and a run of consecutive solo nodes
 * needs no barrier between its nodes: on small models (and on the
 * element-wise nodes of any model at batch 1) a barrier round costs more
 * than the work it would split, the more so on a loaded machine. The
 * measure is elements of dst, multiply-adds for mul_mat, an estimate for
 * flash attention (node_solo). */
#if defined(__EMSCRIPTEN__)
/* In a browser a worker that waits soon sleeps in Atomics.wait, and waking
 * it costs tens of microseconds, so splitting pays later than natively.
 * With this bound every node of a stories260K token is solo, the graph
 * runs on the caller alone (kiln_threadpool_run), and kiln-mt at 2 threads
 * went from 704 to 1533 tok/s in Chromium (1 thread: 1400-1800); a model
 * of 29M multiply-adds a token (512 wide) and bench/peers' 2048-wide one
 * kept their 2-thread speed (A/B, 3 rounds each). A spin 10x longer
 * before sleeping measured no better. */
#define SOLO_MAX_WORK 65536
#else
#define SOLO_MAX_WORK 16384
#endif

/* KILN_SOLO_MAX_WORK overrides the threshold (0: every node on all
 * threads, as before), for A/B benchmarks */
static int64_t solo_max_work(void) {
    static _Atomic int64_t v = -1;
    int64_t x = atomic_load(&v);
    if (x < 0) {
        const char * e = getenv("KILN_SOLO_MAX_WORK");
        x = e && e[0] ? (int64_t) atoll(e) : SOLO_MAX_WORK;
        if (x < 0) x = 0;
        atomic_store(&v, x);
    }
    return x;
}

static bool node_skipped(const struct kiln_tensor * node) {
    return kiln_op_tasks(node->op) == KILN_TASKS_NONE || kiln_is_empty(node);
}

/* The positions a flash attention query row reads: those its mask does not
 * set to -inf. A decode step's K/V view is padded (to 256 cells, as
 * llama.cpp pads it) and the masked cells cost a comparison each, so
 * counting them all as work made every decode step of a small model
 * (stories260K: 8 heads of 8) wake the workers for its attention.
 * Masks are read once per job, before the workers start, so every thread
 * takes the same solo decisions even if a node of the graph were to write
 * a mask (its values would then only make the estimate stale). */
static void fa_masks_scan(struct kiln_threadpool * tp, const struct kiln_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const struct kiln_tensor * node = g->nodes[i];
        if (node->op != KILN_OP_FLASH_ATTN_EXT) continue;
        const struct kiln_tensor * q = node->src[0], * k = node->src[1], * mask = node->src[3];
        if (!q || !k || !mask || !mask->data || mask->ne[2] != 1 || mask->ne[3] != 1 || mask->ne[1] < q->ne[1] ||
            (mask->type != KILN_TYPE_F16 && mask->type != KILN_TYPE_F32)) continue;
        const int64_t row = q->ne[1] - 1;
        bool seen = false;
        for (int j = 0; j < tp->n_fa_masks; j++) seen |= tp->fa_masks[j].data == mask->data && tp->fa_masks[j].row == row;
        if (seen || tp->n_fa_masks == KILN_FA_MASKS) continue;
        const char * r = (const char *) mask->data + row * mask->nb[1];
        const int64_t n = KILN_MIN(k->ne[1], mask->ne[0]);
        int64_t used = 0;
        for (int64_t c = 0; c < n; c++) {
            if (mask->type == KILN_TYPE_F16) used += ((const uint16_t *) r)[c] != 0xfc00; /* fp16 -inf */
            else used += ((const float *) r)[c] != -INFINITY;
        }
        tp->fa_masks[tp->n_fa_masks++] = (struct fa_mask_positions) { mask->data, row, used };
    }
}

static int64_t fa_positions(const struct kiln_threadpool * tp, const struct kiln_tensor * node) {
    const struct kiln_tensor * q = node->src[0], * k = node->src[1], * mask = node->src[3];
    for (int j = 0; tp && mask && j < tp->n_fa_masks; j++) {
        if (tp->fa_masks[j].data == mask->data && tp->fa_masks[j].row == q->ne[1] - 1) return tp->fa_masks[j].positions;
    }
    return k->ne[1];
}

static bool node_solo(const struct kiln_threadpool * tp, const struct kiln_tensor * node) {
    if (kiln_op_tasks(node->op) == KILN_TASKS_ONE) return true;
    const int64_t limit = solo_max_work();
    if (limit == 0) return false;
    int64_t work = kiln_nelements(node);
    if (node->op == KILN_OP_MUL_MAT && node->src[0] && node->src[1]) {
        work = node->src[0]->ne[0] * node->src[0]->ne[1] * kiln_nrows(node->src[1]);
    } else if (node->op == KILN_OP_FLASH_ATTN_EXT && node->src[0] && node->src[1] && node->src[2]) {
        /* its result depends on nth, which must be llama.cpp's thread count */
        if (kiln_flash_attn_split_kv(node)) return false;
        /* q rows x positions read x (K and V widths); x8 for the fp16
         * conversions and the online softmax around each multiply-add; one
         * per masked position */
        const struct kiln_tensor * q = node->src[0], * k = node->src[1], * v = node->src[2];
        const int64_t rows = q->ne[1] * q->ne[2] * q->ne[3];
        work = 8 * rows * fa_positions(tp, node) * (k->ne[0] + v->ne[0]) + rows * k->ne[1];
    } else if (node->op == KILN_OP_MUL_MAT_ID || node->op == KILN_OP_OUT_PROD || node->op == KILN_OP_MUL_MAT_ID_BACK ||
               node->op == KILN_OP_OUT_PROD_ID ||
               /* user callbacks are promised their n_tasks */
               node->op == KILN_OP_MAP_CUSTOM1 || node->op == KILN_OP_MAP_CUSTOM2 || node->op == KILN_OP_MAP_CUSTOM3) {
        return false;
    }
    return work <= limit;
}

static bool graph_all_solo(const struct kiln_threadpool * tp, const struct kiln_cgraph * g) {
    for (int i = 0; i < g->n_nodes; i++) {
        if (!node_skipped(g->nodes[i]) && !node_solo(tp, g->nodes[i])) return false;
    }
    return true;
}

/* The walk every thread of a job does. */
static void graph_compute_thread(struct kiln_threadpool * tp, int ith) {
    struct kiln_cgraph * g = tp->graph;
    struct kiln_cplan * cplan = tp->cplan;
    const struct kiln_compute_params params = {
        .ith = ith, .nth = tp->n_active,
        .wsize = cplan->work_size, .wdata = cplan->work_data, .tp = tp,
    };
    const bool multi = params.nth > 1;
    /* every thread takes the same barrier decisions (they depend on the
     * graph only), so the barrier counts match */
    bool solo = false;
    int step = 0; /* barrier-separated steps walked: picks chunk_slot */
    int i = 0;
    while (i < g->n_nodes && node_skipped(g->nodes[i])) i++;
    if (i < g->n_nodes) solo = node_solo(tp, g->nodes[i]);
    for (; i < g->n_nodes;) {
        struct kiln_tensor * node = g->nodes[i];
        int next = i + 1;
        while (next < g->n_nodes && node_skipped(g->nodes[next])) next++;
        const bool next_solo = next < g->n_nodes && node_solo(tp, g->nodes[next]);
        /* after a failure inside a barrier-free run, thread 0 only walks on
         * to the run's closing barrier, where every thread stops */
        if ((!solo || ith == 0) && !(solo && halted(tp, step))) {
            if (!node->data) {
                if (ith == 0) {
                    kiln_set_error("tensor has no data (allocate the graph with kiln_gallocr_alloc_graph or use a context with no_alloc = false)");
                    record_failure(tp, KILN_STATUS_FAILED, node, step);
                }
            } else {
                struct kiln_compute_params p = params;
                if (solo) p.ith = 0, p.nth = 1;
                p.chunk_slot = step & 1;
                const enum kiln_status st = fwd_table[node->op](&p, node);
                if (st != KILN_STATUS_SUCCESS) record_failure(tp, st, node, step);
            }
        }
        if (ith == 0 && job_should_abort(cplan)) {
            stop_at(tp, step, KILN_STATUS_ABORTED, "compute aborted after node %d of %d", i + 1, g->n_nodes);
        }
        const bool barrier = !multi || !(solo && next_solo) || next >= g->n_nodes;
        if (barrier) {
            kiln_barrier(&params);
            if (halted(tp, step)) break;
            step++;
            /* every thread has passed this barrier, so none still takes
             * chunks from the previous step's counter: zero it for the next
             * step (this thread reaches that step's barrier after). Step
             * 1's counter starts at 0 (kiln_threadpool_run). */
            if (ith == 0) atomic_store(&tp->current_chunk[(step + 1) & 1], 0);
        }
        i = next;
        solo = next_solo;
    }
}

#ifndef KILN_NO_THREADS
static void * worker_main(void * arg) {
    struct worker_arg * wa = (struct worker_arg *) arg;
    struct kiln_threadpool * tp = wa->tp;
    int last_gen = 0;
    for (;;) {
        wait_change(tp, &tp->gen, last_gen);
        last_gen = atomic_load(&tp->gen);
        if (atomic_load(&tp->stop)) break;
        if (wa->ith < tp->n_active) graph_compute_thread(tp, wa->ith);
        atomic_fetch_add(&tp->n_done, 1);
        wake_all(tp);
    }
    return NULL;
}
#endif

struct kiln_threadpool_params kiln_threadpool_params_default(int n_threads) {
    struct kiln_threadpool_params p = { .n_threads = n_threads, .poll = 0 };
    return p;
}

struct kiln_threadpool * kiln_threadpool_new(struct kiln_threadpool_params params) {
    int n = params.n_threads;
    if (n < 1 || n > KILN_MAX_N_THREADS) {
        kiln_set_error("threadpool_new: n_threads %d outside 1..%d", n, KILN_MAX_N_THREADS);
        return NULL;
    }
#ifdef KILN_NO_THREADS
    if (n > 1) {
        KILN_LOG_WARN("kiln: this build has no threads; using 1 thread instead of %d\n", n);
        n = 1;
    }
#endif
    void * mem = NULL;
    if (posix_memalign(&mem, KILN_CACHE_LINE, sizeof(struct kiln_threadpool)) != 0 || !mem) {
        kiln_set_error("threadpool_new: out of memory");
        return NULL;
    }
    struct kiln_threadpool * tp = (struct kiln_threadpool *) mem;
    memset(tp, 0, sizeof(*tp));
    tp->n_threads = n;
    tp->n_active = n;
    tp->poll = params.poll > 0 ? params.poll : KILN_DEFAULT_POLL;
#ifndef KILN_NO_THREADS
    /* More threads than cores: a spinning waiter only steals the core a
     * worker with real work needs, so go straight to yielding. */
    {
        const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        if (params.poll <= 0 && ncpu > 0 && n > ncpu) tp->poll = 1;
    }
#endif
#ifndef KILN_NO_THREADS
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    if (n > 1) {
        tp->workers = (pthread_t *) calloc((size_t) n, sizeof(pthread_t));
        tp->args = (struct worker_arg *) calloc((size_t) n, sizeof(struct worker_arg));
        if (!tp->workers || !tp->args) {
            free(tp->workers); free(tp->args); free(tp);
            kiln_set_error("threadpool_new: out of memory");
            return NULL;
        }
        for (int i = 1; i < n; i++) {
            tp->args[i].tp = tp;
            tp->args[i].ith = i;
            if (pthread_create(&tp->workers[i], NULL, worker_main, &tp->args[i]) != 0) {
                /* run with the threads we got */
                KILN_LOG_WARN("kiln: could only start %d of %d threads\n", i, n);
                tp->n_threads = i;
                tp->n_active = i;
                break;
            }
        }
    }
#endif
    return tp;
}

void kiln_threadpool_free(struct kiln_threadpool * tp) {
    if (!tp) return;
#ifndef KILN_NO_THREADS
    if (tp->n_threads > 1) {
        atomic_store(&tp->stop, 1);
        atomic_fetch_add(&tp->gen, 1);
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
        for (int i = 1; i < tp->n_threads; i++) pthread_join(tp->workers[i], NULL);
    }
    free(tp->workers);
    free(tp->args);
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
#endif
    free(tp);
}

int kiln_threadpool_get_n_threads(struct kiln_threadpool * tp) { return tp ? tp->n_threads : 0; }

/* Runs one job on the pool with n_active threads; the caller is thread 0. */
enum kiln_status kiln_threadpool_run(struct kiln_threadpool * tp, struct kiln_cgraph * g, struct kiln_cplan * cplan, int n_active) {
    tp->graph = g;
    tp->cplan = cplan;
    tp->status = KILN_STATUS_SUCCESS;
    tp->error[0] = 0;
    tp->n_active = KILN_MAX(1, KILN_MIN(n_active, tp->n_threads));
    /* solo decisions matter only with more than one thread */
    tp->n_fa_masks = 0;
    if (tp->n_active > 1) fa_masks_scan(tp, g);
    /* a graph of solo nodes only (a small model's token) runs on the
     * caller: waking the workers would cost more than the whole job */
    if (tp->n_active > 1 && graph_all_solo(tp, g)) tp->n_active = 1;
    atomic_store(&tp->halt_step, INT_MAX);
    atomic_store(&tp->n_barrier, 0);
    atomic_store(&tp->current_chunk[0], 0);
    atomic_store(&tp->current_chunk[1], 0);
#ifndef KILN_NO_THREADS
    if (tp->n_active > 1) {
        atomic_store(&tp->n_done, 0);
        atomic_fetch_add(&tp->gen, 1);
        wake_all(tp);
        graph_compute_thread(tp, 0);
        /* wait for every worker (including inactive ones) to acknowledge the
         * generation, so the next job cannot overtake a slow starter */
        const int expected = tp->n_threads - 1;
        for (;;) {
            const int done = atomic_load(&tp->n_done);
            if (done >= expected) break;
            wait_change(tp, &tp->n_done, done);
        }
    } else
#endif
    {
        graph_compute_thread(tp, 0);
    }
    if (tp->status != KILN_STATUS_SUCCESS) kiln_set_error("%s", tp->error);
    return tp->status;
}
