/*
 * bench/kquant_rows.c — mul_mat of a plain (not repacked) K-quant weight
 * against prompt batches: the table's batched kernel (vec_dot_rows,
 * kernels.h) against the path mul_mat takes without it (vec_dot_y4 where
 * the table has one, else vec_dot per weight row and activation row),
 * alternated A B / B A in one process, 1 thread, the calling thread's CPU
 * time. One JSON object per (type, table, activation rows): medians of both,
 * the median / min / max of the per-round ratios old / new (above 1: the
 * batched kernel is faster), and whether both outputs are bit-identical.
 *
 * The weight is 2048 x 5632 (a 2048-wide model's ffn_up / ffn_gate),
 * activations 64 / 128 / 256 / 512 rows. The old path is had by clearing
 * the slot in the table in use for the A runs (a benchmark-only switch: the
 * tables are kernels.c's writable array) and restoring it for the B runs.
 * Run by hand; never a timed test.
 *
 * Usage: bench-kquant_rows [rounds [types [tables]]]
 *        e.g. bench-kquant_rows 5 q5_K,q6_K avx2,avx512   (defaults: 5, q5_K, every table with the slot)
 */
#include "kiln.h"
#include "cpu/kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { K = 2048, N = 5632, NM = 4 };
static const int64_t g_rows[NM] = { 64, 128, 256, 512 };

static double thread_cpu_us(void) {
#if defined(__EMSCRIPTEN__)
    return (double) kiln_time_us(); /* one thread: the wall clock */
#else
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double) t.tv_sec * 1e6 + (double) t.tv_nsec * 1e-3;
#endif
}

static int cmp_double(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}
static double median(double * v, int n) {
    qsort(v, (size_t) n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* the slot of the table in use, switched for the old path */
static void set_rows(enum kiln_type t, kiln_vec_dot_rows_t fn) {
    ((struct kiln_kernels *) kiln_kernels())->vec_dot_rows[t] = fn;
}

/* one timed compute: thread CPU us (wall us in *wall) */
static double run_once(struct kiln_cgraph * g, struct kiln_cplan * plan, double * wall) {
    const int64_t w0 = kiln_time_us();
    const double c0 = thread_cpu_us();
    if (kiln_graph_compute(g, plan) != KILN_STATUS_SUCCESS) { fprintf(stderr, "bench: %s\n", kiln_last_error()); exit(1); }
    const double c = thread_cpu_us() - c0;
    *wall = (double) (kiln_time_us() - w0);
    return c;
}

static bool listed(const char * list, const char * name) {
    if (!list) return true;
    const size_t n = strlen(name);
    for (const char * p = list; (p = strstr(p, name)) != NULL; p += n) {
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return true;
    }
    return false;
}

static void bench_type(enum kiln_type type, int rounds, const char * tables) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(type);
    const size_t wbytes = kiln_row_size(type, K) * (size_t) N;
    size_t bytes = wbytes + (64u << 20);
    for (int m = 0; m < NM; m++) bytes += (size_t) (K + N) * (size_t) g_rows[m] * sizeof(float) + 4096;
    struct kiln_init_params p = { bytes, NULL, false };
    struct kiln_context * ctx = kiln_init(p);
    if (!ctx) { fprintf(stderr, "bench: cannot allocate %zu bytes\n", bytes); exit(1); }
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, type, K, N);
    float * row = malloc(sizeof(float) * K);
    for (int64_t r = 0; r < N; r++) {
        for (int64_t i = 0; i < K; i++) row[i] = (float) (((r * K + i) * 104729) % 2000) * 1e-3f - 1.0f;
        tt->from_float_ref(row, (char *) w->data + r * w->nb[1], K);
    }
    free(row);
    struct kiln_tensor * out[NM];
    struct kiln_cgraph * g[NM];
    for (int m = 0; m < NM; m++) {
        struct kiln_tensor * x = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, g_rows[m]);
        float * xd = kiln_get_data_f32(x);
        for (int64_t i = 0; i < K * g_rows[m]; i++) xd[i] = (float) ((i * 7919) % 1000) * 1e-3f - 0.5f;
        out[m] = kiln_mul_mat(ctx, w, x);
        g[m] = kiln_new_graph(ctx);
        kiln_build_forward_expand(g[m], out[m]);
    }
    float * ref = malloc(sizeof(float) * (size_t) N * 512);
    double * t_old = malloc(sizeof(double) * (size_t) rounds * 4);
    double * t_new = t_old + rounds, * ratio = t_new + rounds, * wall_cpu = ratio + rounds;

    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt || !kt->vec_dot_rows[type] || !listed(tables, kt->isa)) continue;
        kiln_cpu_force_isa(kt->isa);
        const kiln_vec_dot_rows_t fn = kt->vec_dot_rows[type];
        const char * old_path = kt->vec_dot_y4[type] ? "vec_dot_y4" : "vec_dot";
        for (int m = 0; m < NM; m++) {
            struct kiln_cplan plan = kiln_graph_plan(g[m], 1, NULL);
            plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
            double wall;
            bool identical = true;
            const size_t ob = sizeof(float) * (size_t) N * (size_t) g_rows[m];
            /* warm-up: one of each; every later output must equal the old path's */
            set_rows(type, NULL);
            run_once(g[m], &plan, &wall);
            memcpy(ref, out[m]->data, ob);
            set_rows(type, fn);
            run_once(g[m], &plan, &wall);
            identical = memcmp(ref, out[m]->data, ob) == 0;
            for (int r = 0; r < rounds; r++) {
                for (int k = 0; k < 2; k++) {
                    const bool old = (k == 0) == (r % 2 == 0); /* A B, then B A */
                    set_rows(type, old ? NULL : fn);
                    const double c = run_once(g[m], &plan, &wall);
                    if (old) t_old[r] = c;
                    else { t_new[r] = c; wall_cpu[r] = wall / c; }
                    identical = identical && memcmp(ref, out[m]->data, ob) == 0;
                }
                ratio[r] = t_old[r] / t_new[r];
            }
            set_rows(type, fn);
            free(plan.work_data);
            double rmin = ratio[0], rmax = ratio[0];
            for (int r = 1; r < rounds; r++) { rmin = ratio[r] < rmin ? ratio[r] : rmin; rmax = ratio[r] > rmax ? ratio[r] : rmax; }
            const double ops = 2.0 * K * N * (double) g_rows[m];
            const double mo = median(t_old, rounds), mn = median(t_new, rounds);
            printf("{\"what\":\"mul_mat_kquant_rows\",\"type\":\"%s\",\"shape\":\"%dx%d . %dx%lld\",\"rows\":%lld,\"isa\":\"%s\",\"threads\":1,"
                   "\"old_path\":\"%s\",\"old_ms\":%.2f,\"new_ms\":%.2f,\"ratio\":%.3f,\"ratio_min\":%.3f,\"ratio_max\":%.3f,"
                   "\"old_GOPS\":%.1f,\"new_GOPS\":%.1f,\"new_wall_over_cpu\":%.2f,\"identical\":%s,\"rounds\":%d}\n",
                   tt->type_name, K, N, K, (long long) g_rows[m], (long long) g_rows[m], kt->isa, old_path, mo / 1e3, mn / 1e3,
                   median(ratio, rounds), rmin, rmax, ops / (mo * 1e-6) / 1e9, ops / (mn * 1e-6) / 1e9, median(wall_cpu, rounds),
                   identical ? "true" : "false", rounds);
            fflush(stdout);
        }
    }
    kiln_cpu_force_isa(NULL);
    free(ref);
    free(t_old);
    kiln_free(ctx);
}

int main(int argc, char ** argv) {
    const int rounds = argc > 1 && atoi(argv[1]) > 1 ? atoi(argv[1]) : 5;
    const char * types = argc > 2 ? argv[2] : "q5_K";
    const char * tables = argc > 3 ? argv[3] : NULL;
    const enum kiln_type all[] = { KILN_TYPE_Q5_K, KILN_TYPE_Q6_K };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (listed(types, kiln_get_type_traits(all[i])->type_name)) bench_type(all[i], rounds, tables);
    }
    return 0;
}
