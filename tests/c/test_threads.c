/*
 * test_threads.c — a graph of a few hundred elementwise ops gives
 * bit-identical results with 1, 2, 4 and 8 threads; so does a chain of
 * one-row products, which also match a double reference; 8 threads finish
 * (no livelock) with the same numbers while another process keeps a CPU
 * busy; an abort at any node of a multi-threaded graph, with more threads
 * than cores, always returns ABORTED (never hangs a thread at a barrier) and
 * the pool runs the next graph to the same numbers. No timing assertions:
 * the machine is shared.
 */
#include "util/test_util.h"

#if !defined(__EMSCRIPTEN__)
#define HAVE_FORK 1
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#endif

enum { N_LAYERS = 24, NE0 = 129, NE1 = 17 };

/* 5 ops per layer, each layer mixing broadcasting binaries and unaries */
static struct kiln_tensor * build(struct kiln_context * ctx, struct kiln_tensor ** outs, int * n_outs) {
    tu_seed(2024);
    struct kiln_tensor * x = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, NE0, NE1);
    tu_fill_uniform(x, -1, 1);
    *n_outs = 0;
    for (int l = 0; l < N_LAYERS; l++) {
        struct kiln_tensor * row = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, NE0, 1);
        struct kiln_tensor * col = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, 1, NE1);
        tu_fill_uniform(row, 0.5f, 1.5f);
        tu_fill_uniform(col, -0.5f, 0.5f);
        struct kiln_tensor * y = kiln_mul(ctx, x, row);
        y = kiln_add(ctx, y, col);
        switch (l % 4) {
            case 0: y = kiln_silu(ctx, y); break;
            case 1: y = kiln_gelu(ctx, y); break;
            case 2: y = kiln_sin(ctx, kiln_scale(ctx, y, 1.7f)); break;
            case 3: y = kiln_cont(ctx, kiln_transpose(ctx, kiln_cont(ctx, kiln_transpose(ctx, y)))); break;
        }
        y = kiln_tanh(ctx, kiln_sub(ctx, y, kiln_sqr(ctx, x)));
        x = kiln_div(ctx, y, kiln_add1(ctx, kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1), kiln_sum(ctx, kiln_sqr(ctx, col))));
        kiln_set_f32(x->src[1]->src[0], 1.0f);
        if (l % 6 == 5) outs[(*n_outs)++] = x;
    }
    return x;
}

static float * run(int n_threads, int * n_nodes, int * ok) {
    struct kiln_context * ctx = tu_ctx(64 << 20);
    struct kiln_tensor * outs[16];
    int n_outs = 0;
    struct kiln_tensor * r = build(ctx, outs, &n_outs);
    struct kiln_cgraph * g = kiln_new_graph_custom(ctx, 4096, false);
    *ok = r != NULL && kiln_build_forward_expand(g, r) == KILN_STATUS_SUCCESS;
    *n_nodes = kiln_graph_n_nodes(g);
    const int64_t t0 = kiln_time_ms();
    *ok = *ok && kiln_graph_compute_with_ctx(ctx, g, n_threads) == KILN_STATUS_SUCCESS;
    if (getenv("KILN_TEST_VERBOSE")) printf("%d threads, %d nodes: %lld ms\n", n_threads, *n_nodes, (long long)(kiln_time_ms() - t0));
    float * res = (float *) malloc(sizeof(float) * NE0 * NE1 * (size_t)(n_outs + 1));
    for (int i = 0; i < n_outs; i++) memcpy(res + (size_t) i * NE0 * NE1, outs[i]->data, sizeof(float) * NE0 * NE1);
    memcpy(res + (size_t) n_outs * NE0 * NE1, r->data, sizeof(float) * NE0 * NE1);
    kiln_free(ctx);
    return res;
}

static const size_t N_RES = (size_t) NE0 * NE1 * (N_LAYERS / 6 + 1);

static void test_bit_identical(void) {
    tu_case = "1/2/4/8 threads";
    int n_nodes = 0, ok = 0;
    float * ref = run(1, &n_nodes, &ok);
    CHECK(ok, "compute with 1 thread: %s", kiln_last_error());
    CHECK(n_nodes >= 250, "graph has %d nodes", n_nodes);
    int finite = 1;
    for (size_t i = 0; i < N_RES; i++) finite &= isfinite(ref[i]) && fabsf(ref[i]) <= 1.0f;
    CHECK(finite, "values stay finite and bounded");
    static const int nts[] = { 2, 4, 8 };
    for (int t = 0; t < 3; t++) {
        float * res = run(nts[t], &n_nodes, &ok);
        CHECK(ok, "compute with %d threads: %s", nts[t], kiln_last_error());
        CHECK(memcmp(res, ref, sizeof(float) * N_RES) == 0, "%d threads bit-identical to 1 thread", nts[t]);
        free(res);
    }
    free(ref);
}

/* A chain of one-row products with Q8_0, Q4_0, F16 and F32 weights, each
 * followed by elementwise nodes small enough to run on one thread, every
 * third layer also a 3-row product. A one-row product on several threads
 * takes its chunks without a barrier of its own (each thread converts the
 * row; the executor zeroes the alternating chunk counters), so a counter
 * not back at 0 would leave blocks of the output uncomputed. Every layer
 * is checked against a double product of the dequantized weights with that
 * layer's f32 input (to 2e-2 of the layer's largest value: the q8
 * activations' rounding), and every thread count gives 1 thread's bits. */
enum { MV_N = 384, MV_LAYERS = 12 };

struct mv_chain {
    struct kiln_context * ctx;
    struct kiln_tensor * w[MV_LAYERS], * in[MV_LAYERS], * out[MV_LAYERS], * last;
    struct kiln_tensor * batch[MV_LAYERS]; /* the 3-row products' outputs, or NULL */
};

static bool mv_build(struct mv_chain * c) {
    static const enum kiln_type types[] = { KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_F16, KILN_TYPE_F32 };
    tu_seed(77);
    c->ctx = tu_ctx(64 << 20);
    float * tmp = (float *) malloc(sizeof(float) * MV_N * MV_N);
    struct kiln_tensor * x = kiln_new_tensor_2d(c->ctx, KILN_TYPE_F32, MV_N, 1);
    struct kiln_tensor * b = kiln_new_tensor_2d(c->ctx, KILN_TYPE_F32, MV_N, 3);
    tu_fill_uniform(x, -1, 1);
    tu_fill_uniform(b, -1, 1);
    bool ok = tmp != NULL;
    for (int l = 0; l < MV_LAYERS && ok; l++) {
        const enum kiln_type t = types[l % 4];
        struct kiln_tensor * w = kiln_new_tensor_2d(c->ctx, t, MV_N, MV_N);
        for (int i = 0; i < MV_N * MV_N; i++) tmp[i] = tu_rand_uniform(-1, 1);
        if (t == KILN_TYPE_F32 || t == KILN_TYPE_F16) {
            for (int i = 0; i < MV_N * MV_N; i++) {
                if (t == KILN_TYPE_F32) ((float *) w->data)[i] = tmp[i];
                else ((kiln_fp16_t *) w->data)[i] = kiln_fp32_to_fp16(tmp[i]);
            }
        } else {
            kiln_quantize_chunk(t, tmp, w->data, 0, MV_N, MV_N, NULL);
        }
        c->w[l] = w;
        c->in[l] = x;
        struct kiln_tensor * y = kiln_mul_mat(c->ctx, w, x);
        c->out[l] = y;
        c->batch[l] = NULL;
        if (l % 3 == 2) {
            struct kiln_tensor * yb = kiln_mul_mat(c->ctx, w, b);
            c->batch[l] = yb;
            y = kiln_add(c->ctx, y, kiln_scale(c->ctx, kiln_view_2d(c->ctx, yb, MV_N, 1, yb->nb[1], 0), 0.01f));
        }
        x = kiln_tanh(c->ctx, kiln_scale(c->ctx, y, 1.0f / 16));
        ok = x != NULL;
    }
    free(tmp);
    c->last = x;
    return ok;
}

static float * mv_run(int n_threads, bool check_ref) {
    struct mv_chain c;
    bool ok = mv_build(&c);
    struct kiln_cgraph * g = kiln_new_graph_custom(c.ctx, 1024, false);
    ok = ok && kiln_build_forward_expand(g, c.last) == KILN_STATUS_SUCCESS;
    ok = ok && kiln_graph_compute_with_ctx(c.ctx, g, n_threads) == KILN_STATUS_SUCCESS;
    CHECK(ok, "mat-vec chain with %d threads: %s", n_threads, kiln_last_error());
    if (!ok) { kiln_free(c.ctx); return NULL; }
    if (check_ref) {
        for (int l = 0; l < MV_LAYERS; l++) {
            double * w = tu_weights_f64(c.w[l]), * x = tu_to_f64(c.in[l]), * y = tu_to_f64(c.out[l]);
            double ref[MV_N], amax = 0, dmax = 0;
            for (int i = 0; i < MV_N; i++) {
                double s = 0;
                for (int j = 0; j < MV_N; j++) s += w[i * MV_N + j] * x[j];
                ref[i] = s;
                if (fabs(s) > amax) amax = s < 0 ? -s : s;
            }
            for (int i = 0; i < MV_N; i++) dmax = fmax(dmax, fabs(y[i] - ref[i]));
            CHECK(dmax <= 2e-2 * amax, "layer %d (%s weights), %d threads: max |diff| %.3g vs the double product (largest %.3g)",
                  l, kiln_type_name(c.w[l]->type), n_threads, dmax, amax);
            free(w); free(x); free(y);
        }
    }
    float * res = (float *) malloc(sizeof(float) * MV_N * (MV_LAYERS + 1));
    for (int l = 0; l < MV_LAYERS; l++) memcpy(res + (size_t) l * MV_N, c.out[l]->data, sizeof(float) * MV_N);
    memcpy(res + (size_t) MV_LAYERS * MV_N, c.last->data, sizeof(float) * MV_N);
    kiln_free(c.ctx);
    return res;
}

static void test_matvec_chain(void) {
    tu_case = "one-row products, 1/2/3/4/8 threads";
    float * ref = mv_run(1, true);
    if (!ref) return;
    static const int nts[] = { 2, 3, 4, 8 };
    for (int t = 0; t < 4; t++) {
        for (int rep = 0; rep < 3; rep++) {
            float * res = mv_run(nts[t], rep == 0);
            if (!res) continue;
            CHECK(memcmp(res, ref, sizeof(float) * MV_N * (MV_LAYERS + 1)) == 0, "%d threads (run %d) bit-identical to 1 thread", nts[t], rep);
            free(res);
        }
    }
    free(ref);
}


/* Aborts at every node position of a graph whose nodes are each split over
 * all threads (one barrier per node), on a private pool with more threads
 * than cores so that threads are preempted between a barrier and the next
 * node. A thread that left a barrier late used to read the stop decision
 * a faster thread had made for the following node, leave the walk one
 * barrier early, and leave the others waiting there forever. */
struct abort_at { int calls, at; };
static bool abort_after_calls(void * data) {
    struct abort_at * a = (struct abort_at *) data;
    return ++a->calls >= a->at;
}

static void test_abort_every_node(void) {
    tu_case = "abort at every node, threads > cores";
    enum { N = 256 * 256, DEPTH = 48 };
    struct kiln_context * ctx = tu_ctx(64 << 20);
    tu_seed(7);
    struct kiln_tensor * x0 = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, N);
    struct kiln_tensor * w = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, N);
    tu_fill_uniform(x0, -1, 1);
    tu_fill_uniform(w, 0.9f, 1.1f);
    struct kiln_tensor * x = x0;
    for (int d = 0; d < DEPTH; d++) x = (d & 1) ? kiln_tanh(ctx, kiln_mul(ctx, x, w)) : kiln_add(ctx, x, w);
    struct kiln_cgraph * g = kiln_new_graph_custom(ctx, 256, false);
    CHECK(kiln_build_forward_expand(g, x) == KILN_STATUS_SUCCESS, "build");
    const int n_nodes = kiln_graph_n_nodes(g);
    float * ref = (float *) malloc(sizeof(float) * N);
    CHECK(kiln_graph_compute_with_ctx(ctx, g, 1) == KILN_STATUS_SUCCESS, "reference");
    memcpy(ref, x->data, sizeof(float) * N);
    static const int nts[] = { 3, 6 };
    for (size_t t = 0; t < sizeof(nts) / sizeof(nts[0]); t++) {
        struct kiln_threadpool * tp = kiln_threadpool_new(kiln_threadpool_params_default(nts[t]));
        CHECK(tp != NULL, "pool of %d", nts[t]);
        if (!tp) continue;
        int n_aborted = 0;
        for (int rep = 0; rep < 2; rep++) {
            for (int at = 1; at <= n_nodes; at++) {
                struct kiln_cplan plan = kiln_graph_plan(g, nts[t], tp);
                struct abort_at a = { 0, at };
                plan.abort_callback = abort_after_calls;
                plan.abort_callback_data = &a;
                uint8_t * work = plan.work_size ? (uint8_t *) malloc(plan.work_size) : NULL;
                plan.work_data = work;
                /* a hang here is the failure: the ctest timeout reports it */
                const enum kiln_status st = kiln_graph_compute(g, &plan);
                free(work);
                n_aborted += st == KILN_STATUS_ABORTED;
                if (st != KILN_STATUS_ABORTED) CHECK(false, "%d threads, abort at node %d: status %d", nts[t], at, (int) st);
            }
        }
        CHECK(n_aborted == 2 * n_nodes, "%d threads: %d of %d computes aborted", nts[t], n_aborted, 2 * n_nodes);
        /* the pool still runs whole graphs, to the same numbers */
        struct kiln_cplan plan = kiln_graph_plan(g, nts[t], tp);
        uint8_t * work = plan.work_size ? (uint8_t *) malloc(plan.work_size) : NULL;
        plan.work_data = work;
        CHECK(kiln_graph_compute(g, &plan) == KILN_STATUS_SUCCESS, "%d threads after the aborts: %s", nts[t], kiln_last_error());
        CHECK(memcmp(x->data, ref, sizeof(float) * N) == 0, "%d threads after the aborts: same numbers", nts[t]);
        free(work);
        kiln_threadpool_free(tp);
    }
    free(ref);
    kiln_free(ctx);
}

#ifdef HAVE_FORK
static void test_busy_machine(void) {
    tu_case = "8 threads on a busy machine";
    int n_nodes = 0, ok = 0;
    float * ref = run(1, &n_nodes, &ok);
    pid_t child = fork();
    if (child == 0) {
#if defined(__linux__)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
        alarm(300); /* never outlive a stuck parent for long */
        volatile unsigned long spin = 0;
        for (;;) spin++;
    }
    CHECK(child > 0, "fork");
    /* a hang here is the failure mode: the ctest timeout reports it */
    for (int rep = 0; rep < 1; rep++) {
        float * res = run(8, &n_nodes, &ok);
        CHECK(ok, "compute with 8 threads while busy: %s", kiln_last_error());
        CHECK(memcmp(res, ref, sizeof(float) * N_RES) == 0, "same numbers while busy (rep %d)", rep);
        free(res);
    }
    if (child > 0) {
        kill(child, SIGKILL);
        int status = 0;
        CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status), "busy child stopped");
    }
    free(ref);
}
#else
/* no processes in wasm: the busy-machine case runs natively only */
static void test_busy_machine(void) {}
#endif

int main(void) {
    test_bit_identical();
    test_matvec_chain();
    test_busy_machine();
    test_abort_every_node();
    return tu_finish();
}
