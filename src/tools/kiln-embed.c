/*
 * kiln-embed — embeddings of text with an encoder (bert, nomic-bert) or a
 * decoder GGUF, as llama.cpp computes them (kiln_model_embed).
 *
 *   kiln-embed -m FILE [-p TEXT]... [--pooling none|mean|cls|last] [--normalize 0|1]
 *              [--json] [-t N] [--isa NAME] [--ids] [--timing]
 *
 * Each -p TEXT is one input; without -p, each line of stdin is one. Prints
 * one line per input: a JSON array of floats with --json (one array per
 * token with pooling none: an array of arrays), else the numbers separated
 * by spaces. Floats are printed with 9 significant digits (exact for f32).
 * --pooling: default the file's pooling_type; --normalize: L2 (1, default)
 * or none (0). --ids: print the token ids of each input to stderr.
 * --timing: one JSON line on stderr at the end (inputs, tokens, seconds of
 * embedding, model loading excluded).
 */
#include "kiln-llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr, "usage: kiln-embed -m FILE [-p TEXT]... [--pooling none|mean|cls|last] [--normalize 0|1]\n"
                    "                  [--json] [-t N] [--isa NAME] [--ids] [--timing]   (no -p: one input per stdin line)\n");
}

static int64_t t_us, n_tok, n_in;

static int embed_one(struct kiln_model * m, const char * text, struct kiln_embed_params ep, bool json, bool ids) {
    const int32_t len = (int32_t) strlen(text);
    const int32_t nt = kiln_tokenize(kiln_model_vocab(m), text, len, NULL, 0, true, false);
    if (nt != INT32_MIN) n_tok += nt < 0 ? -(int64_t) nt : nt;
    n_in++;
    if (ids) {
        kiln_token buf[4096];
        const int32_t n = kiln_tokenize(kiln_model_vocab(m), text, len, buf, 4096, true, false);
        for (int32_t i = 0; i < n; i++) fprintf(stderr, "%s%d", i ? " " : "", buf[i]);
        fprintf(stderr, "\n");
    }
    int32_t need = kiln_model_embed(m, text, len, ep, NULL, 0);
    if (need == INT32_MIN) {
        fprintf(stderr, "kiln-embed: %s\n", kiln_last_error());
        return 1;
    }
    need = -need;
    float * v = malloc(sizeof(float) * (size_t) (need > 0 ? need : 1));
    if (!v) {
        fprintf(stderr, "kiln-embed: out of memory\n");
        return 1;
    }
    const int64_t t0 = kiln_time_us();
    const int32_t n = kiln_model_embed(m, text, len, ep, v, need);
    t_us += kiln_time_us() - t0;
    if (n < 0) {
        fprintf(stderr, "kiln-embed: %s\n", kiln_last_error());
        free(v);
        return 1;
    }
    const int32_t E = kiln_model_n_embd(m), rows = n / E;
    const bool nested = json && rows > 1;
    if (nested) fputc('[', stdout);
    for (int32_t r = 0; r < rows; r++) {
        if (json) fputs(r ? ",[" : "[", stdout);
        for (int32_t i = 0; i < E; i++) printf("%s%.9g", i ? (json ? "," : " ") : "", (double) v[(size_t) r * E + i]);
        if (json) fputc(']', stdout);
        else if (r + 1 < rows) fputc(' ', stdout);
    }
    if (nested) fputc(']', stdout);
    fputc('\n', stdout);
    free(v);
    return 0;
}

int main(int argc, char ** argv) {
    const char * path = NULL;
    const char ** texts = calloc((size_t) argc, sizeof(char *));
    int n_texts = 0;
    bool json = false, ids = false, timing = false;
    struct kiln_embed_params ep = kiln_embed_params_default();
    struct kiln_model_params mp = kiln_model_params_default();
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const bool has = i + 1 < argc;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has) path = argv[++i];
        else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt")) && has) texts[n_texts++] = argv[++i];
        else if (!strcmp(a, "--pooling") && has) {
            static const char * const names[] = { "none", "mean", "cls", "last" };
            const char * p = argv[++i];
            ep.pooling = KILN_POOLING_UNSPECIFIED;
            for (int k = 0; k < 4; k++) if (!strcmp(p, names[k])) ep.pooling = (enum kiln_pooling_type) k;
            if (ep.pooling == KILN_POOLING_UNSPECIFIED) {
                fprintf(stderr, "kiln-embed: --pooling %s (none, mean, cls or last)\n", p);
                return 2;
            }
        } else if (!strcmp(a, "--normalize") && has) {
            const char * s = argv[++i];
            if (strcmp(s, "0") != 0 && strcmp(s, "1") != 0) {
                fprintf(stderr, "kiln-embed: --normalize %s (0: none, 1: L2)\n", s);
                return 2;
            }
            ep.normalize = s[0] == '1';
        } else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--ids")) ids = true;
        else if (!strcmp(a, "--timing")) timing = true;
        else if (!strcmp(a, "-t") && has) mp.n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--isa") && has) {
            kiln_cpu_force_isa(argv[++i]);
            if (strcmp(kiln_cpu_isa(), argv[i]) != 0) {
                fprintf(stderr, "kiln-embed: --isa %s: %s\n", argv[i], kiln_last_error());
                return 2;
            }
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "kiln-embed: unknown or incomplete argument '%s'\n", a);
            usage();
            return 2;
        }
    }
    if (!path) {
        usage();
        return 2;
    }
    struct kiln_model * m = kiln_model_load(path, mp);
    if (!m) {
        fprintf(stderr, "kiln-embed: %s\n", kiln_last_error());
        return 1;
    }
    int rc = 0;
    if (n_texts > 0) {
        for (int i = 0; i < n_texts && rc == 0; i++) rc = embed_one(m, texts[i], ep, json, ids);
    } else {
        char * line = NULL;
        size_t cap = 0;
        ssize_t got;
        while (rc == 0 && (got = getline(&line, &cap, stdin)) >= 0) {
            if (got > 0 && line[got - 1] == '\n') line[got - 1] = 0;
            rc = embed_one(m, line, ep, json, ids);
        }
        free(line);
    }
    if (timing && rc == 0) {
        fprintf(stderr, "{\"what\":\"embed\",\"inputs\":%lld,\"tokens\":%lld,\"seconds\":%.6f,\"isa\":\"%s\"}\n",
                (long long) n_in, (long long) n_tok, t_us / 1e6, kiln_cpu_isa());
    }
    kiln_model_free(m);
    free(texts);
    return rc;
}
