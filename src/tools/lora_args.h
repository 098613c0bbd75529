/* lora_args.h — the LoRA flags of kiln-generate, kiln-logits and
 * kiln-export-lora, as llama.cpp spells them:
 *   --lora FILE                adapter at scale 1
 *   --lora-scaled FILE S       adapter at scale S (llama.cpp's older form)
 *   --lora-scaled FILE:S[,FILE:S...]   (its newer form)
 * several allowed, applied in the order given. */
#ifndef KILN_TOOLS_LORA_ARGS_H
#define KILN_TOOLS_LORA_ARGS_H

#include "kiln-llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LORA_ARGS_MAX 16

struct lora_args {
    char  path[LORA_ARGS_MAX][1024];
    float scale[LORA_ARGS_MAX];
    int   n;
};

static inline bool lora_args_number(const char * s, float * out) {
    char * end;
    const float v = strtof(s, &end);
    if (end == s || *end != 0) return false;
    *out = v;
    return true;
}

static inline bool lora_args_add(struct lora_args * la, const char * path, size_t len, float scale) {
    if (la->n >= LORA_ARGS_MAX || len == 0 || len >= sizeof la->path[0]) return false;
    memcpy(la->path[la->n], path, len);
    la->path[la->n][len] = 0;
    la->scale[la->n++] = scale;
    return true;
}

/* argv entries used at i (1 + operands): 0 when argv[i] is no LoRA flag,
 * -1 (message on stderr) when its operands are missing or malformed */
static inline int lora_args_parse(struct lora_args * la, int argc, char ** argv, int i, const char * who) {
    const char * a = argv[i];
    float s;
    if (!strcmp(a, "--lora")) {
        if (i + 1 >= argc || !lora_args_add(la, argv[i + 1], strlen(argv[i + 1]), 1.0f)) goto bad;
        return 2;
    }
    if (strcmp(a, "--lora-scaled") != 0) return 0;
    if (i + 1 >= argc) goto bad;
    if (i + 2 < argc && lora_args_number(argv[i + 2], &s)) {
        if (!lora_args_add(la, argv[i + 1], strlen(argv[i + 1]), s)) goto bad;
        return 3;
    }
    for (const char * p = argv[i + 1]; *p;) {
        const char * comma = strchr(p, ',');
        const size_t n = comma ? (size_t) (comma - p) : strlen(p);
        char item[1100];
        if (n >= sizeof item) goto bad;
        memcpy(item, p, n);
        item[n] = 0;
        char * colon = strrchr(item, ':');
        if (!colon || !lora_args_number(colon + 1, &s) || !lora_args_add(la, item, (size_t) (colon - item), s)) goto bad;
        p += n + (comma ? 1 : 0);
    }
    return 2;
bad:
    fprintf(stderr, "%s: %s needs FILE%s (at most %d adapters)\n", who, a, strcmp(a, "--lora") ? " S or FILE:S[,FILE:S...]" : "",
            LORA_ARGS_MAX);
    return -1;
}

/* loads every adapter for the model and applies it at its scale */
static inline bool lora_args_apply(const struct lora_args * la, struct kiln_model * model, const char * who) {
    for (int i = 0; i < la->n; i++) {
        struct kiln_adapter_lora * ad = kiln_adapter_lora_init(model, la->path[i]);
        if (!ad || kiln_model_set_adapter_lora(model, ad, la->scale[i]) != KILN_STATUS_SUCCESS) {
            fprintf(stderr, "%s: %s: %s\n", who, la->path[i], kiln_last_error());
            return false;
        }
        fprintf(stderr, "%s: LoRA %s: %d weights, alpha %g, scale %g\n", who, la->path[i], kiln_adapter_lora_n_weights(ad),
                (double) kiln_adapter_lora_alpha(ad), (double) la->scale[i]);
    }
    return true;
}

#endif
