/*
 * test_threads.c — a graph of a few hundred elementwise ops gives
 * bit-identical results with 1, 2, 4 and 8 threads; and 8 threads finish
 * (no livelock) with the same numbers while another process keeps a CPU
 * busy. No timing assertions: the machine is shared.
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
    test_busy_machine();
    return tu_finish();
}
