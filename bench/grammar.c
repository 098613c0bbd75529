/*
 * bench-grammar — what grammar-constrained sampling adds to a token, one
 * JSON object per line.
 *
 *   bench-grammar [--grammar FILE] [--tokens N] [--reps N] [--vocab FILE]...
 *
 * Per vocabulary (default: llama's SPM vocabulary, 32000 tokens, and a
 * 151936-token vocabulary built in memory from GPT-2's 50257 tokens plus
 * concatenations of two of them, Qwen2's size), the sampler draws --tokens
 * tokens from random logits (regenerated each step, not timed) with and
 * without the grammar (default tests/data/grammars/json.gbnf, so most steps
 * are inside JSON strings where most tokens are allowed: the filter's worst
 * case), greedy, at temperature 0.8 / top-k 40 (the sampler then filters
 * only until 40 allowed tokens are found) and at temperature 0.8 with every
 * truncation off (the whole vocabulary is filtered). Each line gives the CPU
 * milliseconds per token of both and the difference; compare the difference
 * with the model's own time per token (bench-generate on the synthetic
 * 2048-wide model) for the relative cost.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* process CPU time: the machines these run on are shared */
static double cpu_s(void) {
#if defined(CLOCK_PROCESS_CPUTIME_ID)
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double) t.tv_sec + (double) t.tv_nsec * 1e-9;
#else
    return (double) clock() / CLOCKS_PER_SEC;
#endif
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((rng >> 11) * (1.0 / 9007199254740992.0));
}

static char * slurp(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char * b = malloc((size_t) n + 1);
    if (b && fread(b, 1, (size_t) n, f) != (size_t) n) {
        free(b);
        b = NULL;
    }
    if (b) b[n] = 0;
    fclose(f);
    return b;
}

/* GPT-2's vocabulary grown to n tokens with pairs of its tokens */
static struct kiln_vocab * big_vocab(const char * gpt2, int64_t n) {
    struct kiln_gguf_init_params ip = { .no_alloc = true, .ctx = NULL };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file(gpt2, ip);
    if (!src) return NULL;
    int64_t k = kiln_gguf_find_key(src, "tokenizer.ggml.tokens");
    size_t n0 = k >= 0 ? kiln_gguf_get_arr_n(src, k) : 0;
    struct kiln_gguf_context * dst = kiln_gguf_init_empty();
    kiln_gguf_set_kv(dst, src);
    const char ** toks = malloc(sizeof(char *) * (size_t) n);
    char ** owned = malloc(sizeof(char *) * (size_t) n);
    int32_t * types = malloc(sizeof(int32_t) * (size_t) n);
    for (int64_t i = 0; i < n; i++) {
        owned[i] = NULL;
        types[i] = 1;
        if ((size_t) i < n0) {
            toks[i] = kiln_gguf_get_arr_str(src, k, (size_t) i);
        } else {
            /* two pseudo-random printable tokens joined (ids past 256 are multi-byte merges) */
            const char * a = kiln_gguf_get_arr_str(src, k, 256 + (size_t) (i * 7919) % (n0 - 512));
            const char * b = kiln_gguf_get_arr_str(src, k, 256 + (size_t) (i * 104729) % (n0 - 512));
            size_t la = strlen(a), lb = strlen(b);
            owned[i] = malloc(la + lb + 16);
            snprintf(owned[i], la + lb + 16, "%s%s", a, b);
            toks[i] = owned[i];
        }
    }
    kiln_gguf_set_arr_str(dst, "tokenizer.ggml.tokens", toks, (size_t) n);
    kiln_gguf_set_arr_data(dst, "tokenizer.ggml.token_type", KILN_GGUF_TYPE_INT32, types, (size_t) n);
    size_t sz = kiln_gguf_get_write_size(dst, true);
    void * buf = malloc(sz);
    kiln_gguf_write_to_buffer(dst, buf, sz, true);
    struct kiln_vocab * v = kiln_vocab_load_from_buffer(buf, sz);
    for (int64_t i = 0; i < n; i++) free(owned[i]);
    free(owned);
    free(toks);
    free(types);
    free(buf);
    kiln_gguf_free(dst);
    kiln_gguf_free(src);
    return v;
}

static int cmp_d(const void * a, const void * b) {
    double x = *(const double *) a, y = *(const double *) b;
    return x < y ? -1 : x > y;
}

/* CPU ms per token over n tokens; the grammar restarts when it completes */
static double run(const struct kiln_vocab * v, const char * gbnf, struct kiln_sampler_params sp, int n, float * logits,
                  int * n_done) {
    const int32_t nv = kiln_vocab_n_tokens(v);
    struct kiln_sampler * s = kiln_sampler_new(sp);
    if (gbnf && kiln_sampler_set_grammar(s, v, gbnf, NULL) != KILN_STATUS_SUCCESS) {
        fprintf(stderr, "bench-grammar: %s\n", kiln_last_error());
        exit(1);
    }
    double t = 0.0;
    int done = 0;
    rng = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < n; i++) {
        for (int32_t k = 0; k < nv; k++) logits[k] = 8.0f * frand();
        double t0 = cpu_s();
        kiln_token tok = kiln_sampler_sample(s, logits, nv);
        kiln_sampler_accept(s, tok);
        t += cpu_s() - t0;
        if (tok < 0 || kiln_vocab_is_eog(v, tok)) {
            kiln_sampler_reset(s);
            done++;
        }
    }
    kiln_sampler_free(s);
    if (n_done) *n_done = done;
    return t * 1e3 / n;
}

int main(int argc, char ** argv) {
    const char * gpath = "tests/data/grammars/json.gbnf";
    const char * vocabs[8];
    int n_vocabs = 0, n_tok = 300, reps = 3;
    for (int i = 1; i < argc; i++) {
        bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--grammar") && has) gpath = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && has) n_tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && has) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vocab") && has && n_vocabs < 8) vocabs[n_vocabs++] = argv[++i];
        else {
            fprintf(stderr, "usage: bench-grammar [--grammar FILE] [--tokens N] [--reps N] [--vocab FILE]...\n");
            return 2;
        }
    }
    char * gbnf = slurp(gpath);
    if (!gbnf) {
        fprintf(stderr, "bench-grammar: cannot read %s\n", gpath);
        return 1;
    }
    const char * spm = "/work/shared/vocab/ggml-vocab-llama-spm.gguf";
    const char * gpt2 = "/work/shared/vocab/ggml-vocab-gpt-2.gguf";
    int n_sets = n_vocabs ? n_vocabs : 2;
    for (int vi = 0; vi < n_sets; vi++) {
        struct kiln_vocab * v;
        const char * vname;
        if (n_vocabs) {
            v = kiln_vocab_load(vocabs[vi]);
            vname = vocabs[vi];
        } else if (vi == 0) {
            v = kiln_vocab_load(spm);
            vname = "llama-spm";
        } else {
            v = big_vocab(gpt2, 151936);
            vname = "gpt-2+pairs";
        }
        if (!v) {
            fprintf(stderr, "bench-grammar: vocabulary %d: %s\n", vi, kiln_last_error());
            continue;
        }
        const int32_t nv = kiln_vocab_n_tokens(v);
        float * logits = malloc(sizeof(float) * (size_t) nv);
        static const char * MODES[3] = { "greedy", "temp0.8-topk40", "temp0.8-full" };
        for (int mode = 0; mode < 3; mode++) {
            struct kiln_sampler_params sp = kiln_sampler_params_default();
            sp.seed = 11;
            if (mode >= 1) {
                sp.temperature = 0.8f;
                sp.top_k = 40;
            }
            if (mode == 2) {
                sp.top_k = 0;
                sp.top_p = 1.0f;
                sp.min_p = 0.0f;
            }
            double base[16], gram[16];
            int done = 0;
            if (reps > 16) reps = 16;
            for (int r = 0; r < reps; r++) {
                base[r] = run(v, NULL, sp, n_tok, logits, NULL);
                gram[r] = run(v, gbnf, sp, n_tok, logits, &done);
            }
            qsort(base, (size_t) reps, sizeof(double), cmp_d);
            qsort(gram, (size_t) reps, sizeof(double), cmp_d);
            double b = base[reps / 2], g = gram[reps / 2];
            printf("{\"what\":\"grammar-sample\",\"vocab\":\"%s\",\"n_vocab\":%d,\"grammar\":\"%s\",\"mode\":\"%s\","
                   "\"tokens\":%d,\"sentences\":%d,\"base_ms_per_token\":%.4f,\"grammar_ms_per_token\":%.4f,"
                   "\"added_ms_per_token\":%.4f}\n",
                   vname, nv, gpath, MODES[mode], n_tok, done, b, g, g - b);
            fflush(stdout);
        }
        free(logits);
        kiln_vocab_free(v);
    }
    free(gbnf);
    return 0;
}
