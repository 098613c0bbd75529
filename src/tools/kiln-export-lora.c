/*
 * kiln-export-lora — merges LoRA adapters (llama.cpp's GGUF format) into a
 * base model and writes a new GGUF, as llama.cpp's llama-export-lora does:
 *
 *   kiln-export-lora -m BASE.gguf --lora F [--lora-scaled F S]... [-o OUT.gguf] [-t N]
 *
 * Per adapted weight W (each expert's matrix of a 3-D expert weight with
 * its own pair): W' = W + sum over adapters, in the order given, of
 * s * (B A), s = scale * alpha / r (scale when alpha is 0), computed as
 * llama.cpp computes it (W dequantized to F32; per adapter
 * delta = mul_mat(cont(transpose(A)), B), scaled, added: cur = delta + cur)
 * and stored as F32 when W is F32, else as F16 — a quantized W comes out F16
 * (dequantized, merged, not requantized; kiln-quantize can requantize).
 * Other tensors and the metadata are copied; general.file_type becomes 1
 * (F16) as llama.cpp's tool sets it. Quantized adapters are refused (as
 * llama.cpp's tool refuses them). Deviations: adapters may adapt different
 * sets of weights (llama.cpp asks for the same set), and adapter tensors
 * without a base weight, or with shapes that do not fit it, are errors.
 * Default output: ggml-lora-merged-f16.gguf (llama.cpp's).
 */
#include "kiln-gguf.h"
#include "tools/lora_args.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct adapter {
    struct kiln_gguf_context * g;
    struct kiln_context      * ctx;
    float alpha, scale;
    const char * path;
};

static const char * str_key(const struct kiln_gguf_context * g, const char * key) {
    const int64_t id = kiln_gguf_find_key(g, key);
    return id >= 0 && kiln_gguf_get_kv_type(g, id) == KILN_GGUF_TYPE_STRING ? kiln_gguf_get_val_str(g, id) : "";
}

static bool ends_with(const char * s, const char * suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* metadata and tensor names/shapes of one adapter against the base */
static bool check_adapter(const struct adapter * ad, const struct kiln_gguf_context * bg, struct kiln_context * bctx) {
    const char * gt = str_key(ad->g, "general.type"), * at = str_key(ad->g, "adapter.type");
    if (strcmp(gt, "adapter") != 0) return fprintf(stderr, "kiln-export-lora: %s: general.type is '%s', expected 'adapter'\n", ad->path, gt), false;
    if (strcmp(at, "lora") != 0) return fprintf(stderr, "kiln-export-lora: %s: adapter.type is '%s', expected 'lora'\n", ad->path, at), false;
    if (strcmp(str_key(ad->g, "general.architecture"), str_key(bg, "general.architecture")) != 0) {
        fprintf(stderr, "kiln-export-lora: %s: architecture '%s' differs from the base model's '%s'\n", ad->path,
                str_key(ad->g, "general.architecture"), str_key(bg, "general.architecture"));
        return false;
    }
    char base[160];
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(ad->g); i++) {
        const char * name = kiln_gguf_get_tensor_name(ad->g, i);
        const bool is_a = ends_with(name, ".lora_a");
        if (!is_a && !ends_with(name, ".lora_b")) {
            if (ends_with(name, "_norm.weight")) continue;
            fprintf(stderr, "kiln-export-lora: %s: tensor '%s' is neither '<weight>.lora_a' nor '<weight>.lora_b'\n", ad->path, name);
            return false;
        }
        const size_t n = strlen(name) - 7;
        if (n == 0 || n >= sizeof base) return fprintf(stderr, "kiln-export-lora: %s: bad tensor name '%s'\n", ad->path, name), false;
        memcpy(base, name, n);
        base[n] = 0;
        const struct kiln_tensor * w = kiln_get_tensor(bctx, base);
        char other[176];
        snprintf(other, sizeof other, "%s.lora_%c", base, is_a ? 'b' : 'a');
        const struct kiln_tensor * a = kiln_get_tensor(ad->ctx, is_a ? name : other), * b = kiln_get_tensor(ad->ctx, is_a ? other : name);
        if (!w) return fprintf(stderr, "kiln-export-lora: %s: '%s' adapts '%s', which the base model does not have\n", ad->path, name, base), false;
        if (!a || !b) return fprintf(stderr, "kiln-export-lora: %s: '%s' has no '%s'\n", ad->path, name, other), false;
        if (kiln_is_quantized(a->type) || kiln_is_quantized(b->type)) {
            fprintf(stderr, "kiln-export-lora: %s: quantized LoRA adapters are not supported (%s), use F16 or F32\n", ad->path, kiln_type_name(a->type));
            return false;
        }
        const bool embd = !strncmp(base, "token_embd", 10);
        /* a 3-D weight holds one matrix per expert, and so do its pairs */
        const bool fits = w->ne[3] == 1 && a->ne[3] == 1 && b->ne[3] == 1 && a->ne[2] == w->ne[2] && b->ne[2] == w->ne[2] &&
                          (embd ? w->ne[2] == 1 && a->ne[0] == b->ne[0] && a->ne[1] == w->ne[1] && b->ne[1] == w->ne[0]
                                : a->ne[0] == w->ne[0] && b->ne[1] == w->ne[1] && a->ne[1] == b->ne[0]);
        if (!fits) {
            fprintf(stderr, "kiln-export-lora: %s: '%s': lora_a [%lld, %lld, %lld] and lora_b [%lld, %lld, %lld] do not fit [%lld, %lld, %lld]\n",
                    ad->path, base, (long long) a->ne[0], (long long) a->ne[1], (long long) a->ne[2], (long long) b->ne[0],
                    (long long) b->ne[1], (long long) b->ne[2], (long long) w->ne[0], (long long) w->ne[1], (long long) w->ne[2]);
            return false;
        }
    }
    return true;
}

/* W' of one weight into a new tensor of ctx_out; false + message */
static bool merge(struct kiln_context * ctx_out, const struct kiln_tensor * w, struct adapter * ads, int n_ads, int n_threads,
                  struct kiln_tensor ** out) {
    /* ne2 > 1: experts, each merged with its own pair (the products below
     * run over dimension 2) */
    const int64_t ne0 = w->ne[0], ne1 = w->ne[1], ne2 = w->ne[2];
    const size_t nw = (size_t) ne0 * (size_t) ne1 * (size_t) ne2;
    size_t need = 4 * nw * sizeof(float) + 64 * kiln_tensor_overhead() + kiln_graph_overhead() + (1u << 20);
    for (int i = 0; i < n_ads; i++) {
        char nm[176];
        snprintf(nm, sizeof nm, "%s.lora_a", w->name);
        const struct kiln_tensor * a = kiln_get_tensor(ads[i].ctx, nm);
        if (a) need += 4 * ((size_t) kiln_nelements(a) * 2 + nw) * sizeof(float) + 2 * nw * sizeof(float);
    }
    struct kiln_init_params ip = { need, NULL, false };
    struct kiln_context * ctx = kiln_init(ip);
    if (!ctx) return fprintf(stderr, "kiln-export-lora: cannot allocate %zu bytes for %s\n", need, w->name), false;
    struct kiln_tensor * cur = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, ne0, ne1, ne2);
    if (!cur) goto fail;
    if (w->type == KILN_TYPE_F32) memcpy(cur->data, w->data, kiln_nbytes(cur));
    else kiln_get_type_traits(w->type)->to_float(w->data, cur->data, (int64_t) nw);
    const bool embd = !strncmp(w->name, "token_embd", 10);
    for (int i = 0; i < n_ads; i++) {
        char na[176], nb[176];
        snprintf(na, sizeof na, "%s.lora_a", w->name);
        snprintf(nb, sizeof nb, "%s.lora_b", w->name);
        struct kiln_tensor * a = kiln_get_tensor(ads[i].ctx, na), * b = kiln_get_tensor(ads[i].ctx, nb);
        if (!a || !b) continue;
        struct kiln_tensor * a32 = kiln_cast(ctx, a, KILN_TYPE_F32), * b32 = kiln_cast(ctx, b, KILN_TYPE_F32);
        struct kiln_tensor * delta = embd ? kiln_mul_mat(ctx, b32, a32) : kiln_mul_mat(ctx, kiln_cont(ctx, kiln_transpose(ctx, a32)), b32);
        const float rank = (float) b->ne[0];
        const float s = ads[i].alpha != 0.0f ? ads[i].scale * ads[i].alpha / rank : ads[i].scale;
        cur = kiln_add(ctx, kiln_scale(ctx, delta, s), cur);
        if (!cur) goto fail;
    }
    struct kiln_tensor * res = kiln_cast(ctx, cur, w->type == KILN_TYPE_F32 ? KILN_TYPE_F32 : KILN_TYPE_F16);
    struct kiln_cgraph * gf = res ? kiln_new_graph(ctx) : NULL;
    if (!gf || kiln_build_forward_expand(gf, res) != KILN_STATUS_SUCCESS || kiln_graph_compute_with_ctx(ctx, gf, n_threads) != KILN_STATUS_SUCCESS) goto fail;
    *out = kiln_new_tensor_3d(ctx_out, res->type, ne0, ne1, ne2);
    if (!*out) goto fail;
    memcpy((*out)->data, res->data, kiln_nbytes(res));
    kiln_set_name(*out, w->name);
    kiln_free(ctx);
    return true;
fail:
    fprintf(stderr, "kiln-export-lora: merging %s failed: %s\n", w->name, kiln_last_error());
    kiln_free(ctx);
    return false;
}

int main(int argc, char ** argv) {
    const char * base = NULL, * out = "ggml-lora-merged-f16.gguf";
    int n_threads = 4;
    static struct lora_args la;
    for (int i = 1; i < argc; i++) {
        const int used = lora_args_parse(&la, argc, argv, i, "kiln-export-lora");
        if (used < 0) return 2;
        if (used > 0) { i += used - 1; continue; }
        const bool has = i + 1 < argc;
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && has) base = argv[++i];
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output") || !strcmp(argv[i], "--output-file")) && has) out = argv[++i];
        else if ((!strcmp(argv[i], "-t") || !strcmp(argv[i], "--threads")) && has) n_threads = atoi(argv[++i]);
        else { base = NULL; break; }
    }
    if (!base || la.n == 0 || n_threads <= 0) {
        fprintf(stderr, "usage: kiln-export-lora -m BASE.gguf --lora F [--lora-scaled F S]... [-o OUT.gguf] [-t N]\n");
        return 2;
    }
    struct kiln_context * bctx = NULL;
    struct kiln_gguf_init_params bp = { .no_alloc = false, .ctx = &bctx, .no_copy = true };
    struct kiln_gguf_context * bg = kiln_gguf_init_from_file(base, bp);
    if (!bg) { fprintf(stderr, "kiln-export-lora: %s: %s\n", base, kiln_last_error()); return 1; }
    if (kiln_gguf_find_key(bg, "split.count") >= 0) { fprintf(stderr, "kiln-export-lora: split models are not supported\n"); return 1; }
    struct adapter ads[LORA_ARGS_MAX] = { 0 };
    for (int i = 0; i < la.n; i++) {
        struct kiln_gguf_init_params ap = { .no_alloc = false, .ctx = &ads[i].ctx, .no_copy = false };
        ads[i].path = la.path[i];
        ads[i].scale = la.scale[i];
        ads[i].g = kiln_gguf_init_from_file(la.path[i], ap);
        if (!ads[i].g) { fprintf(stderr, "kiln-export-lora: %s: %s\n", la.path[i], kiln_last_error()); return 1; }
        const int64_t ka = kiln_gguf_find_key(ads[i].g, "adapter.lora.alpha");
        if (ka >= 0 && kiln_gguf_get_kv_type(ads[i].g, ka) == KILN_GGUF_TYPE_FLOAT32) ads[i].alpha = kiln_gguf_get_val_f32(ads[i].g, ka);
        else if (ka >= 0) { fprintf(stderr, "kiln-export-lora: %s: adapter.lora.alpha is not an F32\n", la.path[i]); return 1; }
        if (!check_adapter(&ads[i], bg, bctx)) return 1;
    }

    struct kiln_gguf_context * og = kiln_gguf_init_empty();
    if (!og) { fprintf(stderr, "kiln-export-lora: out of memory\n"); return 1; }
    kiln_gguf_set_kv(og, bg);
    kiln_gguf_set_val_u32(og, "general.file_type", 1);
    /* one context per merged tensor, freed after the write */
    struct kiln_context ** keep = calloc((size_t) kiln_gguf_get_n_tensors(bg) + 1, sizeof *keep);
    int n_keep = 0, n_merged = 0;
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(bg); i++) {
        const char * name = kiln_gguf_get_tensor_name(bg, i);
        const struct kiln_tensor * w = kiln_get_tensor(bctx, name);
        char na[176];
        snprintf(na, sizeof na, "%s.lora_a", name);
        bool adapted = false;
        for (int k = 0; k < la.n; k++) adapted |= kiln_get_tensor(ads[k].ctx, na) != NULL;
        if (!adapted) { kiln_gguf_add_tensor(og, w); continue; }
        const size_t sz = kiln_nbytes(w) / kiln_type_size(w->type) * kiln_blck_size(w->type) * sizeof(float) + kiln_tensor_overhead() + 256;
        struct kiln_init_params tp = { sz, NULL, false };
        struct kiln_context * tctx = keep[n_keep++] = kiln_init(tp);
        struct kiln_tensor * mt = NULL;
        if (!tctx || !merge(tctx, w, ads, la.n, n_threads, &mt)) return 1;
        kiln_gguf_add_tensor(og, mt);
        fprintf(stderr, "kiln-export-lora: merged %s (%s -> %s)\n", name, kiln_type_name(w->type), kiln_type_name(mt->type));
        n_merged++;
    }
    if (!kiln_gguf_write_to_file(og, out, false)) { fprintf(stderr, "kiln-export-lora: %s: %s\n", out, kiln_last_error()); return 1; }
    printf("{\"what\":\"export_lora\",\"file\":\"%s\",\"merged\":%d,\"tensors\":%lld,\"adapters\":%d}\n", out, n_merged,
           (long long) kiln_gguf_get_n_tensors(og), la.n);
    for (int i = 0; i < n_keep; i++) kiln_free(keep[i]);
    free(keep);
    for (int i = 0; i < la.n; i++) { kiln_gguf_free(ads[i].g); kiln_free(ads[i].ctx); }
    kiln_gguf_free(og);
    kiln_gguf_free(bg);
    kiln_free(bctx);
    return 0;
}
