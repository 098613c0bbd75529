/*
 * gemm_vs_ggml.c — Kiln's batched (prompt-processing) Q4_0 / Q8_0 kernels
 * against llama.cpp's own, in one process, back to back: loads one of
 * node-llama-cpp's libggml-cpu-<variant>.so and times
 *   Q4_0: ggml_gemm_q4_0_8x8_q8_0 (what ggml's x86 build runs for Q4_0
 *         weights with a batch: repack.cpp picks the 8x8 repack on AVX2 and
 *         on AVX-512) against Kiln's gemm_x16 / gemm_x4 per ISA row;
 *   Q8_0: llamafile_sgemm (tinyBLAS; ggml does not repack Q8_0 on x86) and
 *         ggml_vec_dot_q8_0_q8_0 against Kiln's q8_0 gemm_x4.
 * The shape is one work block of Kiln's mul_mat (48 weight rows x 24
 * activation rows, K = 2048) for Kiln, the same 48 x 24 for ggml. Data are
 * random bytes with finite scales (timing only; the exactness checks are
 * tests/c/test_repack and tests/oracle/ggml_repack_check.c). Reports ns
 * per (weight row x activation row x 32-value block) and Kiln / ggml
 * speed ratios from the median and from the fastest of alternating rounds
 * (on a loaded machine the fastest round is the one least interrupted).
 *
 *   cc -O2 -Isrc/include -Isrc -Isrc/core -Isrc/quant bench/peers/gemm_vs_ggml.c build/libkiln.a -ldl -lm -lpthread -o build/gemm-vs-ggml
 *   build/gemm-vs-ggml <libggml-cpu-VARIANT.so> [rounds]
 * (-DKILN_NO_GEMM_X16: for a Kiln tree without the gemm_x16 table slot,
 * to time an older build's kernels)
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>

#include "kiln.h"
#include "blocks.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"

#define K 2048
#define NB (K / 32)
#define M 48   /* weight rows */
#define NA 24  /* activation rows */

typedef void (*ggml_gemm_t)(int n, float * s, size_t bs, const void * vx, const void * vy, int nr, int nc);
typedef void (*ggml_vdot_t)(int n, float * s, size_t bs, const void * vx, size_t bx, const void * vy, size_t by, int nrc);
struct ggml_compute_params_guess { int ith, nth; size_t wsize; void * wdata; void * threadpool; int use_ref; };
typedef int (*ggml_sgemm_t)(const void * params, int64_t m, int64_t n, int64_t k, const void * A, int64_t lda, const void * B,
                            int64_t ldb, void * C, int64_t ldc, int Atype, int Btype, int Ctype);

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t) (rng >> 16); }
static void fill(void * p, size_t n) { for (size_t i = 0; i < n; i++) ((uint8_t *) p)[i] = (uint8_t) next_u32(); }
/* q8_0-like bytes: values in -127..127 (what the quantizers write) */
static void fill_q8(int8_t * p, size_t n) { for (size_t i = 0; i < n; i++) p[i] = (int8_t) ((int) (next_u32() % 255) - 127); }
static kiln_fp16_t scale(void) { return kiln_fp32_to_fp16(0.001f + (float) (next_u32() % 1000) / 1e5f); }

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmpd(const void * a, const void * b) { double x = *(const double *) a, y = *(const double *) b; return (x > y) - (x < y); }

#define MAXF 16
#define ROUNDS_MAX 64
static int nf;
static const char * fname[MAXF];
static double ftimes[MAXF][ROUNDS_MAX];

/* the fixtures, shared by the closures below */
static block_q4_0x4 * w40;        /* M / 4 groups x NB */
static block_q8_0x4 * w80;
static block_q8_0 * act;          /* NA rows x NB */
static uint8_t * g_w40;           /* ggml block_q4_0x8: M / 8 x NB x 144 bytes */
static uint8_t * g_act4;          /* ggml block_q8_0x4: NA / 4 x NB x 136 bytes */
static block_q8_0 * g_w8;         /* plain q8_0 weights, M x NB */
static float out[M * NA];

static void run_kiln(const struct kiln_kernels * k, enum kiln_type t, int wide) {
    const void * w = t == KILN_TYPE_Q4_0 ? (const void *) w40 : (const void *) w80;
    const size_t gs = t == KILN_TYPE_Q4_0 ? sizeof(block_q4_0x4) * NB : sizeof(block_q8_0x4) * NB;
    (void) wide;
    for (int g = 0; g < M / 4;) {
#ifndef KILN_NO_GEMM_X16
        if (wide && k->gemm_x16[t] && g + 4 <= M / 4) {
            k->gemm_x16[t](K, NA, out + 4 * g, M, (const char *) w + g * gs, gs, act, sizeof(block_q8_0) * NB);
            g += 4;
            continue;
        }
#endif
        {
            k->gemm_x4[t](K, NA, out + 4 * g, M, (const char *) w + g * gs, act, sizeof(block_q8_0) * NB);
            g += 1;
        }
    }
}

int main(int argc, char ** argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s <libggml-cpu-VARIANT.so> [rounds]\n", argv[0]); return 2; }
    const int rounds = argc > 2 ? atoi(argv[2]) : 15;
    if (rounds < 1 || rounds > ROUNDS_MAX) { fprintf(stderr, "rounds: 1..%d\n", ROUNDS_MAX); return 2; }
    void * cpu = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!cpu) { fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror()); return 1; }
    ggml_gemm_t g_gemm40 = (ggml_gemm_t) dlsym(cpu, "ggml_gemm_q4_0_8x8_q8_0");
    ggml_vdot_t g_dot8 = (ggml_vdot_t) dlsym(cpu, "ggml_vec_dot_q8_0_q8_0");
    ggml_sgemm_t g_sgemm = (ggml_sgemm_t) dlsym(cpu, "llamafile_sgemm");
    void (*g_init)(void) = (void (*)(void)) dlsym(cpu, "ggml_cpu_init");
    if (g_init) g_init();

    w40 = aligned_alloc(64, sizeof(block_q4_0x4) * NB * M / 4 + 64);
    w80 = aligned_alloc(64, sizeof(block_q8_0x4) * NB * M / 4 + 64);
    act = aligned_alloc(64, sizeof(block_q8_0) * NB * NA + 64);
    g_w40 = aligned_alloc(64, (size_t) 144 * NB * M / 8 + 64);
    g_act4 = aligned_alloc(64, (size_t) 136 * NB * NA / 4 + 64);
    g_w8 = aligned_alloc(64, sizeof(block_q8_0) * NB * M + 64);
    for (int i = 0; i < NB * M / 4; i++) {
        for (int r = 0; r < 4; r++) { w40[i].d[r] = scale(); w80[i].d[r] = scale(); }
        fill(w40[i].qs, sizeof w40[i].qs);
        fill_q8(w80[i].qs, sizeof w80[i].qs);
    }
    for (int i = 0; i < NB * NA; i++) { act[i].d = scale(); fill_q8(act[i].qs, 32); }
    for (int i = 0; i < NB * M / 8; i++) {
        for (int r = 0; r < 8; r++) ((kiln_fp16_t *) (g_w40 + 144 * i))[r] = scale();
        fill(g_w40 + 144 * i + 16, 128);
    }
    for (int i = 0; i < NB * NA / 4; i++) {
        for (int r = 0; r < 4; r++) ((kiln_fp16_t *) (g_act4 + 136 * i))[r] = scale();
        fill_q8((int8_t *) g_act4 + 136 * i + 8, 128);
    }
    for (int i = 0; i < NB * M; i++) { g_w8[i].d = scale(); fill_q8(g_w8[i].qs, 32); }

    /* the functions timed, in the order of each round */
    static const enum kiln_isa isas[2] = { KILN_ISA_AVX2, KILN_ISA_AVX512 };
    const int reps = 150;
    const double units = (double) M * NA * NB * reps;
    for (int round = 0; round < rounds; round++) {
        nf = 0;
        double t0;
#define TIME(name, body) do { \
            fname[nf] = name; t0 = now(); \
            for (int rep = 0; rep < reps; rep++) { body; } \
            ftimes[nf++][round] = (now() - t0) * 1e9 / units; \
        } while (0)
        if (g_gemm40) TIME("q4_0 ggml_gemm_q4_0_8x8_q8_0", g_gemm40(K, out, M, g_w40, g_act4, NA, M));
        for (int a = 0; a < 2; a++) {
            const struct kiln_kernels * k = kiln_kernels_for_isa(isas[a]);
            if (!k || !k->gemm_x4[KILN_TYPE_Q4_0]) continue;
            TIME(a ? "q4_0 kiln avx512 gemm_x4" : "q4_0 kiln avx2 gemm_x4", run_kiln(k, KILN_TYPE_Q4_0, 0));
#ifndef KILN_NO_GEMM_X16
            if (k->gemm_x16[KILN_TYPE_Q4_0]) TIME("q4_0 kiln avx512 gemm_x16", run_kiln(k, KILN_TYPE_Q4_0, 1));
#endif
        }
        if (g_sgemm) {
            struct ggml_compute_params_guess p = { 0, 1, 0, NULL, NULL, 0 };
            int ok = 1;
            TIME("q8_0 ggml llamafile_sgemm", ok &= g_sgemm(&p, M, NA, NB, g_w8, NB, act, NB, out, M, 8, 8, 0));
            if (!ok) nf--; /* declined the product: not timed */
        }
        if (g_dot8) {
            TIME("q8_0 ggml_vec_dot_q8_0_q8_0", for (int j = 0; j < NA; j++) for (int i = 0; i < M; i++)
                 g_dot8(K, out + j * M + i, 0, g_w8 + (size_t) i * NB, 0, act + (size_t) j * NB, 0, 1));
        }
        for (int a = 0; a < 2; a++) {
            const struct kiln_kernels * k = kiln_kernels_for_isa(isas[a]);
            if (!k || !k->gemm_x4[KILN_TYPE_Q8_0]) continue;
            TIME(a ? "q8_0 kiln avx512 gemm_x4" : "q8_0 kiln avx2 gemm_x4", run_kiln(k, KILN_TYPE_Q8_0, 0));
        }
#undef TIME
    }
    printf("# %s, K=%d, %d weight rows x %d activation rows, %d rounds; ns per (weight row x activation row x block), median [min]\n",
           argv[1], K, M, NA, rounds);
    double med[MAXF];
    for (int f = 0; f < nf; f++) {
        qsort(ftimes[f], (size_t) rounds, sizeof(double), cmpd);
        med[f] = ftimes[f][rounds / 2];
        printf("%-34s %7.3f ns  [%7.3f]\n", fname[f], med[f], ftimes[f][0]);
    }
    /* each Kiln row against the first ggml kernel of its type */
    for (int f = 0; f < nf; f++) {
        if (!strstr(fname[f], "kiln")) continue;
        for (int g = 0; g < nf; g++) {
            if (strstr(fname[g], "kiln") || strncmp(fname[g], fname[f], 4) != 0) continue;
            printf("ratio %s vs %s: %.2fx median, %.2fx fastest (speed, Kiln / ggml)\n", fname[f], fname[g], med[g] / med[f],
                   ftimes[g][0] / ftimes[f][0]);
        }
    }
    return 0;
}
