/*
 * bench/kernels.c — kernel benchmarks, one JSON object per line:
 *   f32 GEMM 1024^3 (mul_mat, batch 1024),
 *   f32 mat-vec 4096x4096 (the LLM token case: row-major weights x vector),
 *   the same mat-vec for f16/bf16 and (once registered) q8_0/q4_0/q4_K/q6_K,
 *   vec_dot ns per block for every weight type of every ISA table,
 *   the machine's read bandwidth, 1 and 2 threads,
 * and each mat-vec's fraction of that bandwidth.
 *
 * Mat-vec weights and the bandwidth buffers rotate over a set several times
 * larger than the last-level cache (32 MB here), so every run streams from
 * memory, as token generation does. Run by hand; never a timed test. Times
 * are noisy on a shared machine: compare ratios from the same run.
 *
 * Usage: bench-kernels [reps [matvec|gemm]]   (KILN_BENCH_QUICK=1: fewer reps;
 *        KILN_BENCH_ONLY=matvec|gemm: the same as the second argument)
 */
#include "kiln.h"
#include "cpu/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MB (1024.0 * 1024.0)

#if defined(__EMSCRIPTEN__)
#include <emscripten.h>
EM_JS(double, node_cpu_us, (void), {
    if (typeof process === 'object' && process.cpuUsage) { const u = process.cpuUsage(); return u.user + u.system; }
    return performance.now() * 1000;
});
#endif

/* process CPU time in us: with 1 thread, the time the work really took on
 * a shared, oversubscribed machine (the wall clock adds the neighbours) */
static double cpu_us(void) {
#if defined(__EMSCRIPTEN__)
    return node_cpu_us(); /* Node's process clock (the wall clock elsewhere) */
#else
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec * 1e-3;
#endif
}
static double g_cpu_median_us; /* of the last 1-thread bandwidth / mm_run */

/* a wasm build without pthreads runs everything on one thread */
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
#define MAX_THREADS 1
#else
#define MAX_THREADS 2
#endif

static int cmp_double(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

struct stats { double median, p25, p75; };
static struct stats summarize(double * t, int n) {
    qsort(t, (size_t) n, sizeof(double), cmp_double);
    struct stats s = { t[n / 2], t[n / 4], t[(3 * n) / 4] };
    return s;
}

/* ---- read bandwidth: threads read disjoint slices of a rotating buffer set
 * with the kernel table's f32_dot of a slice with itself (one stream, one
 * FMA per 8 floats: memory bound) */

struct bw_shared {
    float ** bufs;
    int      nbufs;
    int64_t  n;        /* floats per buffer */
    int      nth;
    int      reps;
    pthread_barrier_t bar;
    double * times;
    double * ctimes;
    volatile float sink[64];
};
struct bw_arg { struct bw_shared * s; int ith; };

static void * bw_worker(void * p) {
    struct bw_arg * a = (struct bw_arg *) p;
    struct bw_shared * s = a->s;
    const struct kiln_kernels * k = kiln_kernels();
    const int64_t per = (s->n + s->nth - 1) / s->nth;
    const int64_t i0 = per * a->ith, i1 = i0 + per < s->n ? i0 + per : s->n;
    for (int r = -2; r < s->reps; r++) {
        const float * buf = s->bufs[(r + 2) % s->nbufs];
        pthread_barrier_wait(&s->bar);
        const int64_t t0 = kiln_time_us();
        const double c0 = cpu_us();
        s->sink[a->ith] += k->f32_dot(i1 - i0, buf + i0, buf + i0);
        pthread_barrier_wait(&s->bar);
        if (a->ith == 0 && r >= 0) { s->times[r] = (double) (kiln_time_us() - t0); s->ctimes[r] = cpu_us() - c0; }
    }
    return NULL;
}

static double bench_bandwidth(float ** bufs, int nbufs, int64_t n, int nth, int reps) {
    struct bw_shared s;
    memset(&s, 0, sizeof(s));
    s.bufs = bufs; s.nbufs = nbufs; s.n = n; s.nth = nth; s.reps = reps;
    s.times = calloc((size_t) reps, sizeof(double));
    s.ctimes = calloc((size_t) reps, sizeof(double));
    pthread_barrier_init(&s.bar, NULL, (unsigned) nth);
    pthread_t th[16];
    struct bw_arg args[16];
    for (int i = 0; i < nth; i++) {
        args[i].s = &s; args[i].ith = i;
        if (i > 0) pthread_create(&th[i], NULL, bw_worker, &args[i]);
    }
    bw_worker(&args[0]);
    for (int i = 1; i < nth; i++) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&s.bar);
    const struct stats st = summarize(s.times, reps);
    g_cpu_median_us = summarize(s.ctimes, reps).median;
    const double bytes = (double) n * sizeof(float);
    const double gbps = bytes / (st.median * 1e-6) / 1e9;
    printf("{\"what\":\"read_bandwidth\",\"shape\":\"%.0f MB x %d buffers\",\"type\":\"f32\",\"isa\":\"%s\",\"threads\":%d,"
           "\"median_ms\":%.3f,\"p25_ms\":%.3f,\"p75_ms\":%.3f,\"GBps\":%.2f,\"GBps_cpu\":%.2f}\n",
           bytes / MB, nbufs, kiln_cpu_isa(), nth, st.median / 1e3, st.p25 / 1e3, st.p75 / 1e3, gbps, bytes / (g_cpu_median_us / nth * 1e-6) / 1e9);
    fflush(stdout);
    free(s.times);
    free(s.ctimes);
    return gbps;
}

/* ---- mul_mat through the public API: graphs over a rotating weight set */

struct mm_bench {
    struct kiln_context * ctx;
    struct kiln_cgraph ** graphs;
    int ngraphs;
};

/* weights of `type`: floats converted, quantized types through their
 * reference quantizer (one matrix, copied to the others of the set: the
 * bytes still stream from memory, the setup stays quick) */
static struct mm_bench mm_setup_type(enum kiln_type type, int64_t K, int64_t N, int64_t M, int nset, bool repack) {
    struct mm_bench b;
    const size_t wbytes = kiln_row_size(type, K) * (size_t) N;
    const size_t bytes = (size_t) nset * (wbytes + (size_t) (K * M + N * M) * sizeof(float) + 2 * 1024 * 1024) + (64u << 20);
    struct kiln_init_params p = { bytes, NULL, false };
    b.ctx = kiln_init(p);
    if (!b.ctx) { fprintf(stderr, "bench: cannot allocate %.0f MB\n", bytes / MB); exit(1); }
    b.ngraphs = nset;
    b.graphs = calloc((size_t) nset, sizeof(*b.graphs));
    struct kiln_tensor * x = kiln_new_tensor_2d(b.ctx, KILN_TYPE_F32, K, M);
    float * xd = kiln_get_data_f32(x);
    for (int64_t i = 0; i < K * M; i++) xd[i] = (float) ((i * 7919) % 1000) * 1e-3f - 0.5f;
    float * row = malloc(sizeof(float) * (size_t) K);
    const struct kiln_type_traits * tt = kiln_get_type_traits(type);
    void * first = NULL;
    for (int s = 0; s < nset; s++) {
        struct kiln_tensor * w = kiln_new_tensor_2d(b.ctx, type, K, N);
        if (s == 0) {
            for (int64_t r = 0; r < N; r++) {
                for (int64_t i = 0; i < K; i++) row[i] = (float) (((r * K + i) * 104729) % 2000) * 1e-3f - 1.0f;
                tt->from_float_ref(row, (char *) w->data + r * w->nb[1], K);
            }
            first = malloc(wbytes);
            memcpy(first, w->data, wbytes);
        } else {
            memcpy(w->data, first, wbytes);
        }
        if (repack && !kiln_repack_tensor(w)) { fprintf(stderr, "bench: %s\n", kiln_last_error()); exit(1); }
        struct kiln_tensor * y = kiln_mul_mat(b.ctx, w, x);
        b.graphs[s] = kiln_new_graph(b.ctx);
        kiln_build_forward_expand(b.graphs[s], y);
    }
    free(row);
    free(first);
    return b;
}

static struct mm_bench mm_setup(int64_t K, int64_t N, int64_t M, int nset) {
    return mm_setup_type(KILN_TYPE_F32, K, N, M, nset, false);
}

static struct stats mm_run(struct mm_bench * b, int nth, int reps) {
    struct kiln_cplan plan = kiln_graph_plan(b->graphs[0], nth, NULL);
    plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
    double * t = calloc((size_t) reps, sizeof(double));
    double * ct = calloc((size_t) reps, sizeof(double));
    for (int r = -2; r < reps; r++) {
        struct kiln_cgraph * g = b->graphs[(r + 2) % b->ngraphs];
        const int64_t t0 = kiln_time_us();
        const double c0 = cpu_us();
        if (kiln_graph_compute(g, &plan) != KILN_STATUS_SUCCESS) { fprintf(stderr, "bench: %s\n", kiln_last_error()); exit(1); }
        if (r >= 0) { t[r] = (double) (kiln_time_us() - t0); ct[r] = cpu_us() - c0; }
    }
    const struct stats st = summarize(t, reps);
    g_cpu_median_us = summarize(ct, reps).median;
    free(ct);
    free(t);
    free(plan.work_data);
    return st;
}

int main(int argc, char ** argv) {
    const bool quick = getenv("KILN_BENCH_QUICK") != NULL;
    const int reps = argc > 1 ? atoi(argv[1]) : (quick ? 5 : 15);
    const char * best = kiln_cpu_isa();
    /* KILN_BENCH_ONLY=matvec: bandwidth + f32/q8_0/q4_0 mat-vec only (quick A/B) */
    /* (or a second argument: wasm under Node does not see the environment) */
    const char * only = argc > 2 ? argv[2] : getenv("KILN_BENCH_ONLY");
    const bool only_matvec = only && strcmp(only, "matvec") == 0;
    /* KILN_BENCH_ONLY=gemm: the f32 GEMM 1024^3 alone, best ISA, 1 thread (quick A/B) */
    const bool only_gemm = only && strcmp(only, "gemm") == 0;
    if (only_gemm) {
        struct mm_bench b = mm_setup(1024, 1024, 1024, 1);
        const struct stats st = mm_run(&b, 1, reps);
        printf("{\"what\":\"mul_mat\",\"shape\":\"1024x1024x1024\",\"type\":\"f32\",\"isa\":\"%s\",\"threads\":1,"
               "\"median_ms\":%.3f,\"p25_ms\":%.3f,\"p75_ms\":%.3f,\"GFLOPS\":%.2f,\"GFLOPS_cpu\":%.2f}\n",
               kiln_cpu_isa(), st.median / 1e3, st.p25 / 1e3, st.p75 / 1e3, 2.0 * 1024 * 1024 * 1024 / (st.median * 1e-6) / 1e9,
               2.0 * 1024 * 1024 * 1024 / (g_cpu_median_us * 1e-6) / 1e9);
        kiln_free(b.ctx);
        return 0;
    }

    /* read bandwidth: 3 x 64 MB (6x the L3) */
    const int nbufs = 3;
    const int64_t nbw = 4096 * 4096;
    float * bufs[3];
    for (int i = 0; i < nbufs; i++) {
        bufs[i] = malloc((size_t) nbw * sizeof(float));
        for (int64_t j = 0; j < nbw; j++) bufs[i][j] = (float) (j & 1023);
    }
    double bw[3] = { 0, 0, 0 }, bw_cpu1 = 0;
    for (int nth = 1; nth <= MAX_THREADS; nth++) {
        bw[nth] = bench_bandwidth(bufs, nbufs, nbw, nth, reps * 2);
        if (nth == 1) bw_cpu1 = (double) nbw * sizeof(float) / (g_cpu_median_us * 1e-6) / 1e9;
    }
    for (int i = 0; i < nbufs; i++) free(bufs[i]);

    /* f32 mat-vec 4096x4096, 3 weight matrices of 64 MB in rotation */
    {
        struct mm_bench b = mm_setup(4096, 4096, 1, 3);
        const char * isas[2] = { best, "scalar" };
        for (int ii = 0; ii < 2; ii++) {
            if (ii == 1 && (strcmp(best, "scalar") == 0 || only_matvec)) break;
            kiln_cpu_force_isa(isas[ii]);
            for (int nth = 1; nth <= MAX_THREADS; nth++) {
                if (ii == 1 && nth == 2) break;
                const struct stats st = mm_run(&b, nth, reps * 2);
                const double bytes = 4096.0 * 4096.0 * sizeof(float);
                const double gbps = bytes / (st.median * 1e-6) / 1e9;
                const double gcpu = nth == 1 ? bytes / (g_cpu_median_us * 1e-6) / 1e9 : 0;
                printf("{\"what\":\"mul_mat_vec\",\"shape\":\"4096x4096 . 4096x1\",\"type\":\"f32\",\"isa\":\"%s\",\"threads\":%d,"
                       "\"median_ms\":%.3f,\"p25_ms\":%.3f,\"p75_ms\":%.3f,\"GFLOPS\":%.2f,\"GBps\":%.2f,\"bw_fraction\":%.3f,"
                       "\"GBps_cpu\":%.2f,\"bw_fraction_cpu\":%.3f}\n",
                       kiln_cpu_isa(), nth, st.median / 1e3, st.p25 / 1e3, st.p75 / 1e3,
                       2.0 * 4096 * 4096 / (st.median * 1e-6) / 1e9, gbps, gbps / bw[nth], gcpu, bw_cpu1 > 0 ? gcpu / bw_cpu1 : 0.0);
                fflush(stdout);
            }
        }
        kiln_cpu_force_isa(NULL);
        kiln_free(b.ctx);
    }

    /* mat-vec 4096x4096 for the other weight types the table supports
     * (quantized ones once src/quant registers their dot products), with
     * enough matrices in rotation to make >= 4x the 32 MB L3 */
    {
        /* q8_0 / q4_0 twice: plain rows, then repacked (kiln_repack_tensor) */
        const enum kiln_type types[] = { KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q4_K, KILN_TYPE_Q6_K };
        const bool repacked[] = { false, false, false, false, true, true, false, false };
        for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
            const enum kiln_type t = types[ti];
            if (only_matvec && t != KILN_TYPE_Q8_0 && t != KILN_TYPE_Q4_0) continue;
            const struct kiln_type_traits * tt = kiln_get_type_traits(t);
            if (!kiln_kernels()->vec_dot[t] || !tt->from_float_ref) {
                printf("{\"what\":\"mul_mat_vec\",\"type\":\"%s\",\"isa\":\"%s\",\"skipped\":\"no dot product kernel registered\"}\n", tt->type_name, best);
                continue;
            }
            const double wbytes = (double) kiln_row_size(t, 4096) * 4096;
            const int nset = (int) (128.0 * MB / wbytes) + 1;
            struct mm_bench b = mm_setup_type(t, 4096, 4096, 1, nset, repacked[ti]);
            for (int nth = 1; nth <= MAX_THREADS; nth++) {
                const struct stats st = mm_run(&b, nth, reps * 2);
                const double gbps = wbytes / (st.median * 1e-6) / 1e9;
                /* 1 thread: the same from CPU time, against the CPU-time bandwidth */
                const double gcpu = nth == 1 ? wbytes / (g_cpu_median_us * 1e-6) / 1e9 : 0;
                printf("{\"what\":\"mul_mat_vec\",\"shape\":\"4096x4096 . 4096x1\",\"type\":\"%s%s\",\"isa\":\"%s\",\"threads\":%d,"
                       "\"median_ms\":%.3f,\"p25_ms\":%.3f,\"p75_ms\":%.3f,\"GFLOPS\":%.2f,\"GBps\":%.2f,\"bw_fraction\":%.3f,\"matrices\":%d,"
                       "\"GBps_cpu\":%.2f,\"bw_fraction_cpu\":%.3f}\n",
                       tt->type_name, repacked[ti] ? "_repacked" : "", kiln_cpu_isa(), nth, st.median / 1e3, st.p25 / 1e3, st.p75 / 1e3,
                       2.0 * 4096 * 4096 / (st.median * 1e-6) / 1e9, gbps, gbps / bw[nth], nset, gcpu, bw_cpu1 > 0 ? gcpu / bw_cpu1 : 0.0);
                fflush(stdout);
            }
            kiln_free(b.ctx);
        }
    }

    if (only_matvec) return 0;
    /* vec_dot per weight type and ISA, in cache: ns per block of the type */
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        for (int t = 0; t < KILN_TYPE_COUNT; t++) {
            if (!k->vec_dot[t] || k->vec_dot_type[t] >= KILN_TYPE_COUNT) continue;
            const struct kiln_type_traits * tt = kiln_get_type_traits((enum kiln_type) t);
            const enum kiln_type vt = k->vec_dot_type[t];
            if (!tt->from_float_ref || !k->from_float[vt]) continue;
            const int64_t n = 4096;
            float * xf = malloc(sizeof(float) * n);
            for (int64_t i = 0; i < n; i++) xf[i] = (float) ((i * 31) % 200) * 0.01f - 1.0f;
            void * xw = malloc(kiln_row_size((enum kiln_type) t, n));
            void * yw = malloc(kiln_row_size(vt, n));
            tt->from_float_ref(xf, xw, n);
            k->from_float[vt](xf, yw, n);
            const int inner = 2000;
            double * tm = calloc((size_t) reps, sizeof(double));
            float acc = 0;
            for (int r = 0; r < reps; r++) {
                const int64_t t0 = kiln_time_us();
                for (int q = 0; q < inner; q++) { float sdot; k->vec_dot[t](n, &sdot, xw, yw); acc += sdot; }
                tm[r] = (double) (kiln_time_us() - t0);
            }
            const struct stats st = summarize(tm, reps);
            const double nblocks = (double) n / (double) tt->blck_size;
            const double per_block_ns = st.median * 1e3 / inner / nblocks;
            printf("{\"what\":\"vec_dot\",\"shape\":\"%lld\",\"type\":\"%s\",\"vec_dot_type\":\"%s\",\"isa\":\"%s\",\"threads\":1,"
                   "\"median_ns_per_block\":%.3f,\"p25_ns_per_block\":%.3f,\"p75_ns_per_block\":%.3f,\"GFLOPS\":%.2f,\"check\":%g}\n",
                   (long long) n, tt->type_name, kiln_type_name(vt), k->isa, per_block_ns,
                   st.p25 * 1e3 / inner / nblocks, st.p75 * 1e3 / inner / nblocks,
                   2.0 * n * inner / (st.median * 1e-6) / 1e9, (double) acc);
            fflush(stdout);
            if (k->vec_dot_x4[t]) {
                /* the repacked 4-row kernel, per block of one row (same units) */
                struct kiln_init_params cp = { 4 * kiln_row_size((enum kiln_type) t, n) + 4096, NULL, false };
                struct kiln_context * c4 = kiln_init(cp);
                struct kiln_tensor * w4 = kiln_new_tensor_2d(c4, (enum kiln_type) t, n, 4);
                for (int r = 0; r < 4; r++) memcpy((char *) w4->data + r * w4->nb[1], xw, w4->nb[1]);
                if (kiln_repack_tensor(w4)) {
                    for (int r = 0; r < reps; r++) {
                        const int64_t t0 = kiln_time_us();
                        for (int q = 0; q < inner / 4; q++) { float s4[4]; k->vec_dot_x4[t](n, s4, w4->data, yw); acc += s4[0] + s4[3]; }
                        tm[r] = (double) (kiln_time_us() - t0);
                    }
                    const struct stats s4 = summarize(tm, reps);
                    printf("{\"what\":\"vec_dot\",\"shape\":\"%lld\",\"type\":\"%s_x4_repacked\",\"vec_dot_type\":\"%s\",\"isa\":\"%s\",\"threads\":1,"
                           "\"median_ns_per_block\":%.3f,\"p25_ns_per_block\":%.3f,\"p75_ns_per_block\":%.3f,\"speedup_vs_plain\":%.2f}\n",
                           (long long) n, tt->type_name, kiln_type_name(vt), k->isa, s4.median * 1e3 / inner / nblocks,
                           s4.p25 * 1e3 / inner / nblocks, s4.p75 * 1e3 / inner / nblocks, st.median / s4.median);
                    fflush(stdout);
                }
                kiln_free(c4);
            }
            free(tm); free(xf); free(xw); free(yw);
        }
    }

    /* f32 GEMM 1024^3 */
    {
        struct mm_bench b = mm_setup(1024, 1024, 1024, 1);
        const char * isas[2] = { best, "scalar" };
        for (int ii = 0; ii < 2; ii++) {
            if (ii == 1 && strcmp(best, "scalar") == 0) break;
            kiln_cpu_force_isa(isas[ii]);
            for (int nth = 1; nth <= MAX_THREADS; nth++) {
                if (ii == 1 && nth == 2) break;
                const struct stats st = mm_run(&b, nth, ii == 1 ? 3 : reps);
                printf("{\"what\":\"mul_mat\",\"shape\":\"1024x1024x1024\",\"type\":\"f32\",\"isa\":\"%s\",\"threads\":%d,"
                       "\"median_ms\":%.3f,\"p25_ms\":%.3f,\"p75_ms\":%.3f,\"GFLOPS\":%.2f}\n",
                       kiln_cpu_isa(), nth, st.median / 1e3, st.p25 / 1e3, st.p75 / 1e3,
                       2.0 * 1024 * 1024 * 1024 / (st.median * 1e-6) / 1e9);
                fflush(stdout);
            }
        }
        kiln_cpu_force_isa(NULL);
        kiln_free(b.ctx);
    }
    return 0;
}
