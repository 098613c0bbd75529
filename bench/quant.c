/*
 * bench/quant.c — quantized dot-product benchmarks, one JSON object per line:
 *   {"bench":"vec_dot", "isa", "type", "ns_per_block"}  for every type and
 *       every ISA table this build/CPU has (data in cache: kernel speed);
 *   {"bench":"matvec_q", "isa", "type", "threads", "ms", "gbps"}  for a
 *       4096x4096 weight matrix of Q8_0/Q4_0/Q4_K/Q6_K times one activation
 *       row (already quantized), over a rotating set of matrices several
 *       times the 32 MB last-level cache, 1 and 2 threads: gbps is weight
 *       bytes streamed per second (compare with bench-kernels' read bandwidth).
 * Run by hand; never a timed test. KILN_BENCH_QUICK=1: fewer repetitions.
 */
#include "kiln.h"
#include "cpu/kernels.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (float) ((rng >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

static const enum kiln_type all_types[] = {
    KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1, KILN_TYPE_Q8_0,
    KILN_TYPE_Q2_K, KILN_TYPE_Q3_K, KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K,
    KILN_TYPE_IQ4_NL, KILN_TYPE_IQ4_XS, KILN_TYPE_TQ1_0, KILN_TYPE_TQ2_0,
};

/* weights for types without a quantizer are irrelevant here: all listed have one */
static void * quantize_new(enum kiln_type t, int64_t n) {
    float * x = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) x[i] = frand();
    void * q = malloc(kiln_row_size(t, n));
    kiln_get_type_traits(t)->from_float_ref(x, q, n);
    free(x);
    return q;
}

static void bench_vec_dot(const struct kiln_kernels * k, int quick) {
    const int64_t n = 4096;
    for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++) {
        const enum kiln_type t = all_types[ti];
        const enum kiln_type vt = k->vec_dot_type[t];
        void * x = quantize_new(t, n);
        void * y = quantize_new(vt, n);
        float s = 0, sink = 0;
        const int reps = quick ? 2000 : 20000;
        for (int r = 0; r < reps / 10; r++) { k->vec_dot[t](n, &s, x, y); sink += s; }
        const double t0 = now_s();
        for (int r = 0; r < reps; r++) { k->vec_dot[t](n, &s, x, y); sink += s; }
        const double dt = now_s() - t0;
        const double blocks = (double) n / kiln_blck_size(t) * reps;
        printf("{\"bench\":\"vec_dot\",\"isa\":\"%s\",\"type\":\"%s\",\"ns_per_block\":%.2f,\"ns_per_value\":%.4f,\"sink\":%g}\n",
               k->isa, kiln_type_name(t), dt * 1e9 / blocks, dt * 1e9 / ((double) n * reps), (double) (sink != sink));
        free(x); free(y);
    }
}

struct mv_job {
    const struct kiln_kernels * k;
    enum kiln_type t;
    void ** mats; int nmats; int64_t K, M;
    const void * y;
    float * out;
    int nth, reps;
    pthread_barrier_t * bar;
    double * times;
};
struct mv_arg { struct mv_job * j; int ith; };

static void * mv_worker(void * p) {
    struct mv_arg * a = p;
    struct mv_job * j = a->j;
    const size_t rs = kiln_row_size(j->t, j->K);
    const int64_t per = (j->M + j->nth - 1) / j->nth;
    const int64_t r0 = per * a->ith, r1 = r0 + per < j->M ? r0 + per : j->M;
    for (int r = -1; r < j->reps; r++) {
        const char * w = j->mats[(r + 1) % j->nmats];
        pthread_barrier_wait(j->bar);
        const double t0 = now_s();
        for (int64_t row = r0; row < r1; row++) j->k->vec_dot[j->t](j->K, &j->out[row], w + row * rs, j->y);
        pthread_barrier_wait(j->bar);
        if (a->ith == 0 && r >= 0) j->times[r] = now_s() - t0;
    }
    return NULL;
}

static int cmpd(const void * a, const void * b) { const double x = *(const double *) a, y = *(const double *) b; return x < y ? -1 : x > y; }

static void bench_matvec(const struct kiln_kernels * k, enum kiln_type t, int quick) {
    const int64_t K = 4096, M = 4096;
    const size_t bytes = kiln_row_size(t, K) * M;
    int nmats = (int) ((128.0 * 1024 * 1024) / bytes) + 1; /* ~128 MB: 4x the LLC */
    void ** mats = malloc(sizeof(void *) * nmats);
    void * proto = quantize_new(t, K * M);
    for (int i = 0; i < nmats; i++) { mats[i] = malloc(bytes); memcpy(mats[i], proto, bytes); }
    free(proto);
    void * y = quantize_new(k->vec_dot_type[t], K);
    float * out = malloc(sizeof(float) * M);
    const int reps = quick ? 8 : 40;
    double * times = malloc(sizeof(double) * reps);
    for (int nth = 1; nth <= 2; nth++) {
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned) nth);
        struct mv_job j = { k, t, mats, nmats, K, M, y, out, nth, reps, &bar, times };
        pthread_t th[2];
        struct mv_arg args[2];
        for (int i = 0; i < nth; i++) { args[i].j = &j; args[i].ith = i; pthread_create(&th[i], NULL, mv_worker, &args[i]); }
        for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
        pthread_barrier_destroy(&bar);
        qsort(times, (size_t) reps, sizeof(double), cmpd);
        const double med = times[reps / 2];
        printf("{\"bench\":\"matvec_q\",\"isa\":\"%s\",\"type\":\"%s\",\"K\":%lld,\"M\":%lld,\"threads\":%d,\"ms\":%.3f,\"gbps\":%.2f}\n",
               k->isa, kiln_type_name(t), (long long) K, (long long) M, nth, med * 1e3, bytes / med / 1e9);
    }
    for (int i = 0; i < nmats; i++) free(mats[i]);
    free(mats); free(y); free(out); free(times);
}

int main(void) {
    const int quick = getenv("KILN_BENCH_QUICK") != NULL;
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (k) bench_vec_dot(k, quick);
    }
    const struct kiln_kernels * best = kiln_kernels();
    const enum kiln_type mv[] = { KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q4_K, KILN_TYPE_Q6_K };
    for (int i = 0; i < 4; i++) bench_matvec(best, mv[i], quick);
    return 0;
}
