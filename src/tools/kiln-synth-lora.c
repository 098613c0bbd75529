/*
 * kiln-synth-lora — writes a random LoRA adapter in llama.cpp's GGUF format
 * for a base model file, for cross-checks against llama.cpp
 * (tests/oracle/lora.mjs) and for the loader's tests: general.type =
 * "adapter", adapter.type = "lora", adapter.lora.alpha, general.architecture
 * copied from the base, and per adapted weight W [n_in, n_out] the tensors
 * "<W>.lora_a" [n_in, r] and "<W>.lora_b" [r, n_out] (token_embd.weight:
 * lora_a [r, n_vocab], lora_b [r, n_embd]). Both are uniform random from the
 * seed (B is not zero, unlike a fresh PEFT adapter, so that the adapter
 * changes the output), scaled so that the delta is of the order of W x.
 *
 *   kiln-synth-lora OUT.gguf -m BASE.gguf [--rank R] [--alpha A] [--seed S]
 *                   [--type f32|f16|bf16|q8_0] [--gain G]
 *                   [--targets q,k,v,o,gate,up,down,output,embd]
 *
 * Defaults: rank 8, alpha 16, seed 1, f32, gain 0.25, targets q,v.
 */
#include "kiln-gguf.h"
#include "tools/synth_fill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng;
static float frand(void) { return synth_rand(&rng); } /* uniform in [-1, 1) */

static const char * const k_targets[][2] = {
    { "q", "attn_q" }, { "k", "attn_k" }, { "v", "attn_v" }, { "o", "attn_output" },
    { "gate", "ffn_gate" }, { "up", "ffn_up" }, { "down", "ffn_down" },
};

static bool has_target(const char * list, const char * t) {
    const size_t n = strlen(t);
    for (const char * p = list; p && *p;) {
        const char * c = strchr(p, ',');
        const size_t k = c ? (size_t) (c - p) : strlen(p);
        if (k == n && !strncmp(p, t, n)) return true;
        p = c ? c + 1 : NULL;
    }
    return false;
}

static bool add_pair(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name, enum kiln_type type,
                     int64_t a0, int64_t a1, int64_t b0, int64_t b1, float sa, float sb) {
    char nm[160];
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, type, a0, a1);
    struct kiln_tensor * b = kiln_new_tensor_2d(ctx, type, b0, b1);
    if (!a || !b || !synth_fill(a, sa, 0.0f, frand) || !synth_fill(b, sb, 0.0f, frand)) return false;
    snprintf(nm, sizeof nm, "%s.lora_a", name);
    kiln_set_name(a, nm);
    snprintf(nm, sizeof nm, "%s.lora_b", name);
    kiln_set_name(b, nm);
    return kiln_gguf_add_tensor(g, a) && kiln_gguf_add_tensor(g, b);
}

int main(int argc, char ** argv) {
    const char * out = NULL, * base = NULL, * targets = "q,v";
    int rank = 8;
    float alpha = 16.0f, gain = 0.25f;
    unsigned long long seed = 1;
    enum kiln_type type = KILN_TYPE_F32;
    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "-m") && has) base = argv[++i];
        else if (!strcmp(argv[i], "--rank") && has) rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--alpha") && has) alpha = strtof(argv[++i], NULL);
        else if (!strcmp(argv[i], "--gain") && has) gain = strtof(argv[++i], NULL);
        else if (!strcmp(argv[i], "--seed") && has) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--targets") && has) targets = argv[++i];
        else if (!strcmp(argv[i], "--type") && has) type = synth_type_by_name(argv[++i]);
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else { out = NULL; break; }
    }
    if (!out || !base || rank <= 0 || rank > 4096 || type == KILN_TYPE_COUNT) {
        fprintf(stderr, "usage: kiln-synth-lora OUT.gguf -m BASE.gguf [--rank R] [--alpha A] [--seed S] [--gain G]\n"
                        "                       [--type f32|f16|bf16|q8_0] [--targets q,k,v,o,gate,up,down,output,embd]\n");
        return 2;
    }
    rng = 0x9e3779b97f4a7c15ULL ^ (seed * 0x2545F4914F6CDD1DULL);
    if (!rng) rng = 1;

    struct kiln_context * meta = NULL;
    struct kiln_gguf_init_params ip = { .no_alloc = true, .ctx = &meta };
    struct kiln_gguf_context * bg = kiln_gguf_init_from_file(base, ip);
    if (!bg) { fprintf(stderr, "kiln-synth-lora: %s: %s\n", base, kiln_last_error()); return 1; }
    const int64_t ka = kiln_gguf_find_key(bg, "general.architecture");
    if (ka < 0 || kiln_gguf_get_kv_type(bg, ka) != KILN_GGUF_TYPE_STRING) {
        fprintf(stderr, "kiln-synth-lora: %s has no general.architecture\n", base);
        return 1;
    }
    const char * arch = kiln_gguf_get_val_str(bg, ka);

    /* room for every adapted weight's pair at F32 */
    size_t bytes = 1u << 20;
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(bg); i++) {
        const int64_t * ne = kiln_gguf_get_tensor_ne(bg, i);
        bytes += 2 * (size_t) rank * (size_t) (ne[0] + ne[1]) * sizeof(float) + 4 * kiln_tensor_overhead();
    }
    struct kiln_init_params cp = { bytes, NULL, false };
    struct kiln_context * ctx = kiln_init(cp);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    if (!ctx || !g) { fprintf(stderr, "kiln-synth-lora: out of memory\n"); return 1; }
    kiln_gguf_set_val_str(g, "general.architecture", arch);
    kiln_gguf_set_val_str(g, "general.type", "adapter");
    kiln_gguf_set_val_str(g, "general.name", "kiln-synthetic-lora");
    kiln_gguf_set_val_str(g, "adapter.type", "lora");
    kiln_gguf_set_val_f32(g, "adapter.lora.alpha", alpha);

    int n = 0;
    char name[128];
    const float sb = gain * sqrtf(3.0f / (float) rank);
    for (int il = 0;; il++) {
        bool any = false;
        for (size_t t = 0; t < sizeof k_targets / sizeof k_targets[0]; t++) {
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, k_targets[t][1]);
            const struct kiln_tensor * w = kiln_get_tensor(meta, name);
            if (!w) continue;
            any = true;
            if (!has_target(targets, k_targets[t][0])) continue;
            if (!add_pair(ctx, g, name, type, w->ne[0], rank, rank, w->ne[1], sqrtf(3.0f / (float) w->ne[0]), sb)) goto oom;
            n++;
        }
        if (!any) break;
    }
    const struct kiln_tensor * w = kiln_get_tensor(meta, "output.weight");
    if (has_target(targets, "output") && w) {
        if (!add_pair(ctx, g, "output.weight", type, w->ne[0], rank, rank, w->ne[1], sqrtf(3.0f / (float) w->ne[0]), sb)) goto oom;
        n++;
    }
    w = kiln_get_tensor(meta, "token_embd.weight");
    if (has_target(targets, "embd") && w) {
        /* the embedding rows are small (0.05..1); the delta stays below them */
        if (!add_pair(ctx, g, "token_embd.weight", type, rank, w->ne[1], rank, w->ne[0], 1.0f, 0.1f * sb)) goto oom;
        n++;
    }
    if (n == 0) {
        fprintf(stderr, "kiln-synth-lora: no weight of %s matches targets '%s'\n", base, targets);
        return 1;
    }
    if (!kiln_gguf_write_to_file(g, out, false)) { fprintf(stderr, "kiln-synth-lora: %s\n", kiln_last_error()); return 1; }
    printf("{\"what\":\"synthetic_lora\",\"file\":\"%s\",\"arch\":\"%s\",\"type\":\"%s\",\"rank\":%d,\"alpha\":%g,\"weights\":%d}\n",
           out, arch, kiln_type_name(type), rank, (double) alpha, n);
    kiln_gguf_free(g);
    kiln_gguf_free(bg);
    kiln_free(ctx);
    kiln_free(meta);
    return 0;
oom:
    fprintf(stderr, "kiln-synth-lora: out of memory at %s\n", name);
    return 1;
}
