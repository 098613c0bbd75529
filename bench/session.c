/*
 * bench-session — what KV-cache reuse saves a chat's second turn, native:
 * one JSON object per model and thread count.
 *
 *   bench-session [-m FILE]... [--threads N] [--turn1 N] [--reply N] [--turn2 N] [--reps N] [--isa NAME]
 *
 * A conversation as token ids: turn 1's prompt (--turn1 ids: BOS, then
 * 300 + (i*37) % 200), a greedy reply of --reply tokens, then turn 2's
 * prompt = turn 1's prompt + the reply + --turn2 new ids. Turn 2 runs twice
 * on the same conversation: "cached", on the generation object that ran
 * turn 1 (kiln_gen_params.cache_prompt: only the ids after the longest
 * common prefix are evaluated), and "cold", after emptying the cache (the
 * whole prompt evaluated, as before sessions). Each turn 2 generates
 * --reply tokens; the time to its first token (prompt evaluation + one
 * sample) and the whole turn are reported, median of --reps (default 3).
 * Defaults: models/stories260K.gguf, 1 thread, 200 + 32 + 24 ids, reply 32.
 */
#include "kiln-llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
}

static int cmp_d(const void * a, const void * b) {
    const double x = *(const double *) a, y = *(const double *) b;
    return (x > y) - (x < y);
}
static double median(double * v, int n) {
    qsort(v, (size_t) n, sizeof *v, cmp_d);
    return v[n / 2];
}

struct turn { double first_s, total_s; int32_t cached, evaluated; };

/* one turn: start (prompt), then steps until n_gen tokens; ids appended to out when non-NULL */
static int run_turn(struct kiln_gen * gen, struct kiln_sampler * smpl, const kiln_token * prompt, int32_t n,
                    int32_t n_gen, bool cache, kiln_token * out, struct turn * t) {
    struct kiln_gen_params gp = kiln_gen_params_default();
    gp.max_tokens = n_gen;
    gp.cache_prompt = cache;
    const double t0 = now_s();
    if (kiln_gen_start(gen, smpl, prompt, n, gp) != KILN_STATUS_SUCCESS) return 1;
    int32_t k = 0;
    for (;;) {
        struct kiln_gen_token tok;
        if (kiln_gen_step(gen, &tok) != KILN_STATUS_SUCCESS) return 1;
        if (k == 0) t->first_s = now_s() - t0;
        if (out && k < n_gen) out[k] = tok.token;
        k++;
        if (tok.stop != KILN_GEN_RUNNING) break;
    }
    t->total_s = now_s() - t0;
    struct kiln_generate_stats st;
    kiln_gen_stats(gen, &st);
    t->cached = st.cached_tokens;
    t->evaluated = st.prompt_tokens - st.cached_tokens;
    return 0;
}

int main(int argc, char ** argv) {
    const char * files[16];
    int nf = 0, threads = 1, reps = 3, n1 = 200, nr = 32, n2 = 24;
    const char * isa = NULL;
    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "-m") && has && nf < 16) files[nf++] = argv[++i];
        else if (!strcmp(argv[i], "--threads") && has) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--turn1") && has) n1 = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reply") && has) nr = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--turn2") && has) n2 = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && has) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && has) isa = argv[++i];
        else {
            fprintf(stderr, "usage: bench-session [-m FILE]... [--threads N] [--turn1 N] [--reply N] [--turn2 N] [--reps N] [--isa NAME]\n");
            return 2;
        }
    }
    if (isa) {
        kiln_cpu_force_isa(isa);
        if (strcmp(kiln_cpu_isa(), isa) != 0) { fprintf(stderr, "bench-session: --isa %s: %s\n", isa, kiln_last_error()); return 2; }
    }
    if (nf == 0) files[nf++] = "models/stories260K.gguf";
    if (reps < 1 || reps > 50 || n1 < 2 || nr < 1 || n2 < 1 || threads < 1) { fprintf(stderr, "bench-session: bad sizes\n"); return 2; }
    for (int f = 0; f < nf; f++) {
        struct kiln_model_params mp = kiln_model_params_default();
        mp.n_threads = threads;
        mp.n_ctx = n1 + 2 * nr + n2; /* the conversation and turn 2's reply */
        struct kiln_model * m = kiln_model_load(files[f], mp);
        if (!m) { fprintf(stderr, "bench-session: %s: %s\n", files[f], kiln_last_error()); return 1; }
        const int32_t total = n1 + nr + n2;
        if (total + nr > kiln_model_n_ctx(m)) { fprintf(stderr, "bench-session: %d ids do not fit the context %d\n", total + nr, kiln_model_n_ctx(m)); return 1; }
        kiln_token * conv = malloc(sizeof(kiln_token) * (size_t) total);
        conv[0] = kiln_vocab_bos(kiln_model_vocab(m));
        for (int32_t i = 1; i < n1; i++) conv[i] = 300 + (i * 37) % 200;
        /* the reply's ids come from turn 1 (these stand in if it ends early) */
        for (int32_t i = n1; i < total; i++) conv[i] = 300 + ((i + 7) * 53) % 200;
        struct kiln_sampler * smpl = kiln_sampler_new(kiln_sampler_params_default()); /* greedy */
        double cf[50], ct[50], wf[50], wt[50];
        struct turn t1, cached = { 0 }, cold = { 0 };
        for (int r = 0; r < reps; r++) {
            struct kiln_gen * gen = kiln_gen_new(m);
            /* turn 1, from an empty cache: its reply completes turn 2's prompt */
            if (run_turn(gen, smpl, conv, n1, nr, false, conv + n1, &t1) ||
                run_turn(gen, smpl, conv, total, nr, true, NULL, &cached) ||
                run_turn(gen, smpl, conv, total, nr, false, NULL, &cold)) {
                fprintf(stderr, "bench-session: %s\n", kiln_last_error());
                return 1;
            }
            cf[r] = cached.first_s; ct[r] = cached.total_s; wf[r] = cold.first_s; wt[r] = cold.total_s;
            kiln_gen_free(gen);
        }
        const double a = median(cf, reps), b = median(ct, reps), c = median(wf, reps), d = median(wt, reps);
        printf("{\"what\":\"chat_turn2\",\"engine\":\"native\",\"model\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"turn2_prompt_tokens\":%d,"
               "\"cached_tokens\":%d,\"evaluated_cached\":%d,\"evaluated_cold\":%d,\"reply_tokens\":%d,"
               "\"first_token_ms_cached\":%.2f,\"first_token_ms_cold\":%.2f,\"turn_ms_cached\":%.2f,\"turn_ms_cold\":%.2f,"
               "\"first_token_speedup\":%.2f,\"turn_speedup\":%.2f,\"reps\":%d}\n",
               files[f], kiln_cpu_isa(), threads, total, cached.cached, cached.evaluated, cold.evaluated, nr,
               a * 1e3, c * 1e3, b * 1e3, d * 1e3, c / a, d / b, reps);
        fflush(stdout);
        kiln_sampler_free(smpl);
        free(conv);
        kiln_model_free(m);
    }
    return 0;
}
