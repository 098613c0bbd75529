/*
 * bench-generate — prompt-processing and generation tokens/s of the llama
 * runner, one JSON object per line.
 *
 *   bench-generate [-m FILE]... [--threads N]... [--synthetic WIDTH:LAYERS:TYPE]...
 *                  [--prompt N] [--gen N] [--reps N] [--isa NAME]
 *
 * Defaults (no -m, no --synthetic): models/stories260K.gguf, and synthetic llama models built in
 * memory (random weights, the stories260K tokenizer) 1024 wide with 4 layers
 * in f32 and f16, so that memory bandwidth matters; threads 1 and 2.
 * A type the engine cannot multiply is reported with "error". Median of --reps runs (default 3).
 * Each line gives the weight bytes a generated token reads and the GB/s
 * that makes (compare with bench-kernels' read_bandwidth). KILN_NO_REPACK=1
 * loads q4_0/q8_0 weights without the interleaved repacking (A/B runs).
 * Last, "sample" lines: CPU microseconds per sampled token at Gemma 3's
 * 262,144-token vocabulary (top-k/top-p/min-p settings as named), and a
 * full qsort of the candidates for comparison.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* process CPU time: on a shared, oversubscribed machine the wall clock
 * mostly measures the neighbours; CPU seconds per token do not (all threads
 * summed, so with N threads it measures work, not speed) */
static double cpu_s(void) {
#if defined(CLOCK_PROCESS_CPUTIME_ID)
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
#else
    return (double) clock() / CLOCKS_PER_SEC;
#endif
}

#define KILN_MAX_D(a, b) ((a) > (b) ? (a) : (b))

static uint64_t rng = 0x12345678;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void add(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name, enum kiln_type type,
                int64_t ne0, int64_t ne1, float scale) {
    struct kiln_tensor * t = ne1 == 1 ? kiln_new_tensor_1d(ctx, type, ne0) : kiln_new_tensor_2d(ctx, type, ne0, ne1);
    float * row = malloc(sizeof(float) * (size_t) ne0);
    const struct kiln_type_traits * tr = kiln_get_type_traits(type);
    for (int64_t i = 0; i < ne1; i++) {
        for (int64_t j = 0; j < ne0; j++) row[j] = scale * frand();
        char * dst = (char *) t->data + i * kiln_row_size(type, ne0);
        if (type == KILN_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) ne0);
        else tr->from_float_ref(row, dst, ne0);
    }
    free(row);
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(g, t);
}

/* a random llama GGUF in memory; returns the buffer (size in *size) */
static void * synthetic(int width, int layers, enum kiln_type type, size_t * size, struct kiln_context ** ctx_out) {
    struct kiln_gguf_init_params ip = { .no_alloc = true, .ctx = NULL };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file("models/stories260K.gguf", ip);
    if (!src) return NULL;
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_kv(g, src);
    kiln_gguf_free(src);
    const int n_ff = width * 11 / 4 / 32 * 32, n_head = width / 64, nv = 512;
    kiln_gguf_set_val_str(g, "general.architecture", "llama");
    kiln_gguf_set_val_u32(g, "llama.embedding_length", (uint32_t) width);
    kiln_gguf_set_val_u32(g, "llama.block_count", (uint32_t) layers);
    kiln_gguf_set_val_u32(g, "llama.attention.head_count", (uint32_t) n_head);
    kiln_gguf_set_val_u32(g, "llama.attention.head_count_kv", (uint32_t) n_head);
    kiln_gguf_set_val_u32(g, "llama.feed_forward_length", (uint32_t) n_ff);
    kiln_gguf_set_val_u32(g, "llama.context_length", 1024);
    kiln_gguf_set_val_u32(g, "llama.rope.dimension_count", 64);
    size_t params = (size_t) layers * ((size_t) 4 * width * width + (size_t) 3 * width * n_ff) + (size_t) 2 * width * nv;
    struct kiln_init_params cp = { params * 4 + (size_t) 64 * layers * kiln_tensor_overhead() + (64u << 20), NULL, false };
    struct kiln_context * ctx = kiln_init(cp);
    if (!ctx) return NULL;
    char nm[64];
    add(ctx, g, "token_embd.weight", KILN_TYPE_F32, width, nv, 1.0f);
    add(ctx, g, "output_norm.weight", KILN_TYPE_F32, width, 1, 1.0f);
    add(ctx, g, "output.weight", type, width, nv, 0.05f);
    for (int l = 0; l < layers; l++) {
#define A(s, t, a, b, sc) do { snprintf(nm, sizeof nm, "blk.%d." s, l); add(ctx, g, nm, t, a, b, sc); } while (0)
        A("attn_norm.weight", KILN_TYPE_F32, width, 1, 1.0f);
        A("attn_q.weight", type, width, width, 0.05f);
        A("attn_k.weight", type, width, width, 0.05f);
        A("attn_v.weight", type, width, width, 0.05f);
        A("attn_output.weight", type, width, width, 0.05f);
        A("ffn_norm.weight", KILN_TYPE_F32, width, 1, 1.0f);
        A("ffn_gate.weight", type, width, n_ff, 0.05f);
        A("ffn_up.weight", type, width, n_ff, 0.05f);
        A("ffn_down.weight", type, n_ff, width, 0.05f);
#undef A
    }
    *size = kiln_gguf_get_write_size(g, false);
    void * buf = malloc(*size);
    if (buf) kiln_gguf_write_to_buffer(g, buf, *size, false);
    kiln_gguf_free(g);
    *ctx_out = ctx;
    return buf;
}

static int cmp_d(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

static void bench(const char * name, const char * path, const void * buf, size_t size, int threads,
                  int n_prompt, int n_gen, int reps) {
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = threads;
    mp.n_ctx = n_prompt + n_gen + 1;
    struct kiln_model * m = path ? kiln_model_load(path, mp) : kiln_model_load_from_buffer(buf, size, mp);
    if (!m) {
        printf("{\"what\":\"generate\",\"model\":\"%s\",\"threads\":%d,\"error\":\"%s\"}\n", name, threads, kiln_last_error());
        return;
    }
    /* bytes a generated token streams: every tensor but the embedding table
     * (get_rows reads one row of it) */
    double wbytes = 0;
    const struct kiln_gguf_context * gg = kiln_model_gguf(m);
    for (int64_t i = 0; gg && i < kiln_gguf_get_n_tensors(gg); i++) {
        if (strcmp(kiln_gguf_get_tensor_name(gg, i), "token_embd.weight") != 0) wbytes += (double) kiln_gguf_get_tensor_size(gg, i);
    }
    const char * norep = getenv("KILN_NO_REPACK");
    const bool repack = !(norep && norep[0] && strcmp(norep, "0") != 0);
    kiln_token * toks = malloc(sizeof(kiln_token) * (size_t) n_prompt);
    for (int i = 0; i < n_prompt; i++) toks[i] = i == 0 ? 1 : 300 + (i * 37) % 200;
    double pp[16], tg[16], tgc[16], ppc[16];
    const char * err = NULL;
    for (int r = 0; r < reps && !err; r++) {
        kiln_model_reset(m);
        const double c0 = cpu_s();
        int64_t t0 = kiln_time_us();
        if (kiln_model_eval(m, toks, n_prompt) != KILN_STATUS_SUCCESS) { err = kiln_last_error(); break; }
        int64_t t1 = kiln_time_us();
        const double c1 = cpu_s();
        ppc[r] = n_prompt / KILN_MAX_D(c1 - c0, 1e-9);
        kiln_token t = 400;
        for (int i = 0; i < n_gen; i++) {
            if (kiln_model_eval(m, &t, 1) != KILN_STATUS_SUCCESS) { err = kiln_last_error(); break; }
        }
        int64_t t2 = kiln_time_us();
        tgc[r] = n_gen / KILN_MAX_D(cpu_s() - c1, 1e-9);
        pp[r] = n_prompt / ((t1 - t0) / 1e6);
        tg[r] = n_gen / ((t2 - t1) / 1e6);
    }
    if (err) {
        printf("{\"what\":\"generate\",\"model\":\"%s\",\"threads\":%d,\"error\":\"%s\"}\n", name, threads, err);
    } else {
        qsort(pp, (size_t) reps, sizeof(double), cmp_d);
        qsort(tg, (size_t) reps, sizeof(double), cmp_d);
        qsort(tgc, (size_t) reps, sizeof(double), cmp_d);
        qsort(ppc, (size_t) reps, sizeof(double), cmp_d);
        printf("{\"what\":\"generate\",\"model\":\"%s\",\"isa\":\"%s\",\"threads\":%d,\"repack\":%s,\"prompt_tokens\":%d,\"gen_tokens\":%d,"
               "\"pp_tokens_per_s\":%.1f,\"tg_tokens_per_s\":%.1f,\"pp_p25\":%.1f,\"pp_p75\":%.1f,\"tg_p25\":%.1f,\"tg_p75\":%.1f,"
               "\"weight_MB_per_token\":%.1f,\"tg_GBps\":%.2f,\"tg_tokens_per_cpu_s\":%.1f,\"tg_GBps_cpu\":%.2f,\"pp_tokens_per_cpu_s\":%.1f}\n",
               name, kiln_cpu_isa(), threads, repack ? "true" : "false", n_prompt, n_gen, pp[reps / 2], tg[reps / 2], pp[reps / 4], pp[reps * 3 / 4],
               tg[reps / 4], tg[reps * 3 / 4], wbytes / 1e6, wbytes * tg[reps / 2] / 1e9,
               tgc[reps / 2], wbytes * tgc[reps / 2] / 1e9, ppc[reps / 2]);
    }
    fflush(stdout);
    free(toks);
    kiln_model_free(m);
}

static int cmp_desc(const void * a, const void * b) {
    const float x = *(const float *) a, y = *(const float *) b;
    return x > y ? -1 : x < y;
}

/* sampling cost per token over n_vocab logits: a language-model-like
 * vector (normal, sd 3: most mass in a few hundred tokens) and a flat one
 * (log-uniform probabilities: top-p needs most of the vocabulary, the
 * sampler's worst case) */
static void bench_sampling(int32_t n_vocab) {
    float * lg = malloc(sizeof(float) * (size_t) n_vocab);
    float * tmp = malloc(sizeof(float) * (size_t) n_vocab);
    if (!lg || !tmp) { free(lg); free(tmp); return; }
    static const char * const dists[] = { "normal sd 3", "flat" };
    const struct { const char * name; int k; float p, minp; } cfg[] = {
        { "top_k=40,top_p=0.95,min_p=0.05", 40, 0.95f, 0.05f },
        { "top_k=0,top_p=0.95", 0, 0.95f, 0.0f },
        { "top_k=0,min_p=0.05", 0, 1.0f, 0.05f },
    };
    for (int d = 0; d < 2; d++) {
        uint64_t r = 88172645463325252ULL;
        for (int32_t i = 0; i < n_vocab; i++) {
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            const double u1 = (double) (r >> 11) / 9007199254740992.0 + 1e-12;
            r ^= r << 13; r ^= r >> 7; r ^= r << 17;
            const double u2 = (double) (r >> 11) / 9007199254740992.0;
            lg[i] = d == 0 ? (float) (3.0 * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)) : (float) (0.75 * log(u1));
        }
        const int n = d == 0 ? 200 : 20;
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            struct kiln_sampler_params sp = kiln_sampler_params_default();
            sp.top_k = cfg[c].k;
            sp.top_p = cfg[c].p;
            sp.min_p = cfg[c].minp;
            sp.temperature = 0.8f;
            sp.repeat_penalty = 1.0f;
            struct kiln_sampler * s = kiln_sampler_new(sp);
            if (!s) continue;
            double t0 = cpu_s();
            for (int i = 0; i < n; i++) kiln_sampler_sample(s, lg, n_vocab);
            double us = (cpu_s() - t0) / n * 1e6;
            kiln_sampler_free(s);
            printf("{\"what\":\"sample\",\"vocab\":%d,\"logits\":\"%s\",\"params\":\"%s\",\"us_per_token\":%.1f}\n",
                   n_vocab, dists[d], cfg[c].name, us);
        }
    }
    double t0 = cpu_s();
    for (int i = 0; i < 5; i++) {
        memcpy(tmp, lg, sizeof(float) * (size_t) n_vocab);
        qsort(tmp, (size_t) n_vocab, sizeof(float), cmp_desc);
    }
    printf("{\"what\":\"sample\",\"vocab\":%d,\"params\":\"full qsort of the logits (reference)\",\"us_per_token\":%.1f}\n",
           n_vocab, (cpu_s() - t0) / 5 * 1e6);
    fflush(stdout);
    free(lg);
    free(tmp);
}

int main(int argc, char ** argv) {
    const char * files[8];
    int n_files = 0, threads[8], n_threads = 0, n_prompt = 64, n_gen = 32, reps = 3;
    struct { int width, layers; enum kiln_type type; } syn[8];
    int n_syn = 0;
    bool syn_given = false;
    for (int i = 1; i < argc; i++) {
        bool has = i + 1 < argc;
        if (!strcmp(argv[i], "-m") && has && n_files < 8) files[n_files++] = argv[++i];
        else if (!strcmp(argv[i], "--threads") && has && n_threads < 8) threads[n_threads++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--prompt") && has) n_prompt = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--gen") && has) n_gen = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && has) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--isa") && has) {
            /* a kernel-table row (scalar, avx2, avx512...), to compare rows */
            kiln_cpu_force_isa(argv[++i]);
            if (strcmp(kiln_cpu_isa(), argv[i]) != 0) { fprintf(stderr, "bench-generate: --isa %s: %s\n", argv[i], kiln_last_error()); return 1; }
        }
        else if (!strcmp(argv[i], "--synthetic") && has && n_syn < 8) {
            char tname[16] = "f16";
            syn_given = true;
            if (sscanf(argv[++i], "%d:%d:%15s", &syn[n_syn].width, &syn[n_syn].layers, tname) < 2) {
                fprintf(stderr, "bench-generate: --synthetic WIDTH:LAYERS[:TYPE]\n");
                return 2;
            }
            syn[n_syn].type = KILN_TYPE_COUNT;
            for (int t = 0; t < KILN_TYPE_COUNT; t++) {
                if (kiln_type_is_valid(t) && !strcmp(kiln_type_name((enum kiln_type) t), tname)) syn[n_syn].type = (enum kiln_type) t;
            }
            if (syn[n_syn].type == KILN_TYPE_COUNT || syn[n_syn].width % 64 || syn[n_syn].width <= 0 || syn[n_syn].layers <= 0) {
                fprintf(stderr, "bench-generate: bad --synthetic '%s'\n", argv[i]);
                return 2;
            }
            n_syn++;
        } else {
            fprintf(stderr, "usage: bench-generate [-m FILE]... [--threads N]... [--synthetic WIDTH:LAYERS:TYPE]... "
                            "[--prompt N] [--gen N] [--reps N]\n");
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    if (reps > 16) reps = 16;
    if (n_threads == 0) { threads[0] = 1; threads[1] = 2; n_threads = 2; }
    const bool files_given = n_files > 0;
    if (n_files == 0 && !syn_given) files[n_files++] = "models/stories260K.gguf";
    if (!syn_given && !files_given) {
        syn[0].width = 1024; syn[0].layers = 4; syn[0].type = KILN_TYPE_F32;
        syn[1].width = 1024; syn[1].layers = 4; syn[1].type = KILN_TYPE_F16;
        syn[2].width = 1024; syn[2].layers = 4; syn[2].type = KILN_TYPE_Q8_0;
        syn[3].width = 1024; syn[3].layers = 4; syn[3].type = KILN_TYPE_Q4_0;
        n_syn = 4;
    }
    for (int f = 0; f < n_files; f++) {
        for (int t = 0; t < n_threads; t++) bench(files[f], files[f], NULL, 0, threads[t], n_prompt, n_gen, reps);
    }
    for (int s = 0; s < n_syn; s++) {
        size_t size = 0;
        struct kiln_context * ctx = NULL;
        void * buf = synthetic(syn[s].width, syn[s].layers, syn[s].type, &size, &ctx);
        char name[96];
        snprintf(name, sizeof name, "synthetic-llama-%dx%d-%s", syn[s].width, syn[s].layers, kiln_type_name(syn[s].type));
        if (!buf) {
            printf("{\"what\":\"generate\",\"model\":\"%s\",\"error\":\"cannot build the model\"}\n", name);
            continue;
        }
        for (int t = 0; t < n_threads; t++) bench(name, NULL, buf, size, threads[t], n_prompt, n_gen, reps);
        free(buf);
        kiln_free(ctx);
    }
    bench_sampling(262144);
    return 0;
}
