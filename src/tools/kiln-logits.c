/*
 * kiln-logits — the logits after a sequence of token ids, each evaluated on
 * its own (as generation does after the prompt), or the first N as one batch
 * (--batch N, as a prompt is evaluated) and the rest one by one, for
 * cross-checks against llama.cpp at a given generation step
 * (tests/oracle/arch.mjs).
 *
 *   kiln-logits -m FILE --ids 1,2,3 [--isa NAME] [--ctx N] [--batch N] [--ubatch N] [--threads N]
 *
 * --ubatch N: the model's batch size (kiln_model_params.n_batch; 0: the
 * library's default), by default the --batch count; a first batch longer
 * than it is evaluated in pieces of N, as kiln_model_eval splits any
 * longer call.
 *
 * stdout: one JSON line {"n":N,"logits":[...]} (%.9g, so floats round-trip).
 */
#include "kiln-llama.h"

#include "tools/lora_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    const char * path = NULL, * ids = NULL;
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    static struct lora_args loras;
    int32_t first = 1; /* ids in the first batch */
    int32_t ubatch = -1; /* the model's n_batch (-1: first, 0: the default) */
    for (int i = 1; i + 1 < argc; i += 2) {
        const int used = lora_args_parse(&loras, argc, argv, i, "kiln-logits");
        if (used < 0) return 2;
        if (used > 0) {
            i += used - 2;
            continue;
        }
        if (!strcmp(argv[i], "-m")) path = argv[i + 1];
        else if (!strcmp(argv[i], "--ids")) ids = argv[i + 1];
        else if (!strcmp(argv[i], "--ctx")) mp.n_ctx = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--threads")) mp.n_threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--batch")) first = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--ubatch")) ubatch = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--isa")) {
            kiln_cpu_force_isa(argv[i + 1]);
            if (strcmp(kiln_cpu_isa(), argv[i + 1]) != 0) {
                fprintf(stderr, "kiln-logits: --isa %s: %s\n", argv[i + 1], kiln_last_error());
                return 2;
            }
        } else path = NULL, i = argc;
    }
    if (!path || !ids) {
        fprintf(stderr, "usage: kiln-logits -m FILE --ids 1,2,3 [--isa NAME] [--ctx N] [--batch N] [--ubatch N] [--threads N] [--lora F]... [--lora-scaled F S]...\n");
        return 2;
    }
    if (ubatch > 0) mp.n_batch = ubatch;
    else if (ubatch < 0 && first > 1) mp.n_batch = first;
    struct kiln_model * model = kiln_model_load(path, mp);
    if (!model) {
        fprintf(stderr, "kiln-logits: %s\n", kiln_last_error());
        return 1;
    }
    if (!lora_args_apply(&loras, model, "kiln-logits")) {
        kiln_model_free(model);
        return 1;
    }
    int32_t n = 0;
    kiln_token * toks = malloc(sizeof(kiln_token) * (strlen(ids) + 1));
    for (const char * p = ids; toks && p && *p;) {
        char * end;
        long t = strtol(p, &end, 10);
        if (end == p) break;
        toks[n++] = (kiln_token) t;
        p = *end == ',' ? end + 1 : NULL;
    }
    if (n == 0) {
        fprintf(stderr, "kiln-logits: no token ids in '%s'\n", ids);
        free(toks);
        kiln_model_free(model);
        return 2;
    }
    if (first < 1 || first > n) first = first < 1 ? 1 : n;
    for (int32_t i = 0; i < n; i += i == 0 ? first : 1) {
        if (kiln_model_eval(model, toks + i, i == 0 ? first : 1) != KILN_STATUS_SUCCESS) {
            fprintf(stderr, "kiln-logits: token %d: %s\n", i, kiln_last_error());
            free(toks);
            kiln_model_free(model);
            return 1;
        }
    }
    free(toks);
    const float * lg = kiln_model_logits(model);
    printf("{\"n\":%d,\"logits\":[", n);
    for (int32_t j = 0; j < kiln_model_n_vocab(model); j++) printf(j ? ",%.9g" : "%.9g", (double) lg[j]);
    printf("]}\n");
    kiln_model_free(model);
    return 0;
}
