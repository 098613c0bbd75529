/*
 * bench-finetune — LoRA training speed, native: tokens per second of
 * optimizer steps (forward + backward + AdamW) on random token sequences,
 * and the process's peak resident memory. One JSON line per model and
 * thread count:
 *
 *   {"what":"finetune","model":…,"isa":…,"threads":…,"rank":…,"targets":…,"ctx":…,"batch":…,
 *    "lora_params":…,"steps":…,"tokens_per_s":…,"p25":…,"p75":…,"tokens_per_cpu_s":…,"peak_rss_MB":…}
 *
 * tokens_per_cpu_s divides by the process's CPU time (all threads): on a
 * shared machine it shows the cost of the work apart from waiting for a core.
 *
 *   bench-finetune [-m FILE]... [--threads N]... [--ctx N] [--batch N] [--rank R]
 *                  [--targets q,v] [--steps N]
 *
 * Default model: models/stories260K.gguf. For the 2048-wide Q4_0 model:
 * build/bin/bench-make_synthetic /tmp/synth-q4_0.gguf, then -m it.
 */
#include "kiln-llama.h"
#include "kiln-opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static double peak_rss_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

int main(int argc, char ** argv) {
    const char * models[16];
    int n_models = 0, threads[8], n_threads = 0, ctx = 64, batch = 4, rank = 8, steps = 5;
    const char * targets = "q,v";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc && n_models < 16) models[n_models++] = argv[++i];
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc && n_threads < 8) threads[n_threads++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx") && i + 1 < argc) ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rank") && i + 1 < argc) rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--targets") && i + 1 < argc) targets = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench-finetune [-m FILE]... [--threads N]... [--ctx N] [--batch N] [--rank R] [--targets q,v] [--steps N]\n");
            return 1;
        }
    }
    if (!n_models) models[n_models++] = "models/stories260K.gguf";
    if (!n_threads) { threads[0] = 1; threads[1] = 2; n_threads = 2; }
    if (steps < 1 || steps > 1000) steps = 5;
    for (int mi = 0; mi < n_models; mi++) {
        for (int ti = 0; ti < n_threads; ti++) {
            struct kiln_model * m = kiln_model_load_for_training(models[mi], threads[ti]);
            if (!m) { printf("{\"what\":\"finetune\",\"model\":\"%s\",\"error\":\"%s\"}\n", models[mi], kiln_last_error()); continue; }
            const int32_t nv = kiln_model_n_vocab(m);
            struct kiln_finetune_data d = { (steps + 1) * batch, ctx, NULL, NULL };
            const size_t n = (size_t) d.n_seq * (size_t) ctx;
            d.tokens = malloc(sizeof(int32_t) * n);
            d.targets = malloc(sizeof(int32_t) * n);
            for (size_t i = 0; i < n; i++) {
                d.tokens[i] = (int32_t) (3 + (i * 37) % (size_t) (nv - 3));
                d.targets[i] = (int32_t) (3 + (i * 53 + 1) % (size_t) (nv - 3));
            }
            struct kiln_finetune_params p = kiln_finetune_default_params();
            p.lora.rank = rank;
            p.lora.targets = kiln_lora_parse_targets(targets);
            p.n_ctx = ctx;
            p.n_batch = batch;
            p.val_fraction = 0.0f;
            p.n_threads = threads[ti];
            struct kiln_finetune * ft = kiln_finetune_new(m, &d, p);
            if (!ft) {
                printf("{\"what\":\"finetune\",\"model\":\"%s\",\"error\":\"%s\"}\n", models[mi], kiln_last_error());
            } else {
                double t[1000], cpu = 0.0;
                int64_t toks = 0;
                int k = 0;
                struct kiln_finetune_progress pr;
                kiln_finetune_step(ft, &pr); /* warm-up */
                for (; k < steps && kiln_finetune_step_index(ft) < kiln_finetune_n_steps(ft); k++) {
                    const double t0 = now_s(), c0 = cpu_s();
                    if (kiln_finetune_step(ft, &pr) != KILN_STATUS_SUCCESS) break;
                    t[k] = (double) pr.tokens / (now_s() - t0);
                    cpu += cpu_s() - c0;
                    toks += pr.tokens;
                }
                qsort(t, (size_t) k, sizeof(double), cmp);
                const char * name = strrchr(models[mi], '/') ? strrchr(models[mi], '/') + 1 : models[mi];
                if (k > 0) {
                    printf("{\"what\":\"finetune\",\"model\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"rank\":%d,\"targets\":\"%s\",\"ctx\":%d,"
                           "\"batch\":%d,\"lora_params\":%lld,\"steps\":%d,\"tokens_per_s\":%.1f,\"p25\":%.1f,\"p75\":%.1f,\"tokens_per_cpu_s\":%.1f,\"peak_rss_MB\":%.1f}\n",
                           name, kiln_cpu_isa(), threads[ti], rank, targets, ctx, batch, (long long) kiln_lora_n_params(kiln_finetune_lora(ft)),
                           k, t[k / 2], t[k / 4], t[(3 * k) / 4], toks / (cpu > 0 ? cpu : 1e-9), peak_rss_mb());
                } else {
                    printf("{\"what\":\"finetune\",\"model\":\"%s\",\"error\":\"%s\"}\n", name, kiln_last_error());
                }
                fflush(stdout);
            }
            kiln_finetune_free(ft);
            free(d.tokens);
            free(d.targets);
            kiln_model_free(m);
        }
    }
    return 0;
}
