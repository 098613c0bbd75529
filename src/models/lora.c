/*
 * lora.c — LoRA adapters in llama.cpp's GGUF format, loaded against a model
 * and applied inside the decoder graph.
 *
 * File: general.type = "adapter", adapter.type = "lora", general.architecture
 * = the model's, adapter.lora.alpha (F32, optional: 0 means "scale as given");
 * per adapted weight W of shape [n_in, n_out] (ggml order: ne0 first) the
 * tensors "<name>.lora_a" [n_in, r] and "<name>.lora_b" [r, n_out]; the token
 * embedding [n_embd, n_vocab] takes lora_a [r, n_vocab] and lora_b
 * [r, n_embd] (rows of A are gathered per token, then multiplied by B).
 *
 * Experts' weights [n_in, n_out, n_expert] take lora_a [n_in, r, n_expert]
 * and lora_b [r, n_out, n_expert], one pair per expert.
 *
 * Graph, as llama.cpp's build_lora_mm / build_lora_mm_id / build_inp_embd:
 *   y = W x;  per adapter in order: y = y + scale(B (A x), s)
 *   experts: y = mul_mat_id(W, x, ids) + scale(mul_mat_id(B, mul_mat_id(A, x, ids), ids), s)
 *   s = user_scale * alpha / r   (user_scale when alpha is 0), r = lora_b's ne0
 */
#include "model.h"
#include "meta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lora_pair {
    const struct kiln_tensor * base; /* the model's weight */
    struct kiln_tensor * a, * b;
};

struct kiln_adapter_lora {
    struct kiln_model        * model;
    struct kiln_gguf_context * gguf;
    struct kiln_context      * ctx;   /* the adapter's tensors and their data */
    float                      alpha;
    struct lora_pair         * pairs;
    int32_t                    n_pairs;
};

static bool lora_type_ok(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16 || t == KILN_TYPE_Q8_0;
}

static bool ends_with(const char * s, const char * suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* the weights the decoder multiplies through lora_mul_mat / lora_embed */
static bool adaptable(const struct kiln_model * m, const struct kiln_tensor * w) {
    if (w == m->tok_embd || w == m->output) return true;
    for (int il = 0; il < m->n_layer; il++) {
        const struct layer * L = &m->layers[il];
        if (w == L->wq || w == L->wk || w == L->wv || w == L->wqkv || w == L->wo || w == L->ffn_gate || w == L->ffn_up ||
            w == L->ffn_down) return true;
        /* mixture of experts: the routed experts (one A/B pair per expert),
         * the shared expert, and the routers, which llama.cpp adapts too */
        if (w == L->gate_exps || w == L->up_exps || w == L->down_exps || w == L->gate_shexp || w == L->up_shexp ||
            w == L->down_shexp || w == L->gate_inp || w == L->gate_inp_shexp) return true;
    }
    return false;
}

static bool flat2d(const struct kiln_tensor * t) { return t->ne[2] == 1 && t->ne[3] == 1; }

static bool is_experts(const struct kiln_model * m, const struct kiln_tensor * w) {
    for (int il = 0; il < m->n_layer; il++) {
        const struct layer * L = &m->layers[il];
        if (w == L->gate_exps || w == L->up_exps || w == L->down_exps) return true;
    }
    return false;
}

/* every value of a 2-D adapter tensor is finite (an inf or NaN would turn
 * every output of the adapted weight into NaN); false when not or when a
 * row buffer cannot be had */
static bool all_finite(const struct kiln_tensor * t) {
    const struct kiln_type_traits * tr = kiln_get_type_traits(t->type);
    float * row = malloc(sizeof(float) * (size_t) t->ne[0]);
    bool ok = row && tr && tr->to_float;
    for (int64_t r = 0; ok && r < kiln_nrows(t); r++) { /* contiguous: row r of every matrix at r * nb[1] */
        tr->to_float((const char *) t->data + r * t->nb[1], row, t->ne[0]);
        for (int64_t i = 0; ok && i < t->ne[0]; i++) ok = isfinite(row[i]);
    }
    free(row);
    return ok;
}

/* one pair's types and shapes against its base weight; false + error naming
 * the tensor. Experts' weights [n_in, n_out, n_expert] take one pair per
 * expert: lora_a [n_in, r, n_expert], lora_b [r, n_out, n_expert] (what
 * llama.cpp's build_lora_mm_id multiplies through mul_mat_id) */
static bool check_pair_shapes(const struct kiln_model * m, const char * name, const struct lora_pair * p) {
    const struct kiln_tensor * w = p->base, * a = p->a, * b = p->b;
    const bool experts = is_experts(m, w);
    for (int i = 0; i < 2; i++) {
        const struct kiln_tensor * t = i ? b : a;
        if (!lora_type_ok(t->type)) {
            kiln_set_last_error("lora: tensor '%s.lora_%c' has type %s (F32, F16, BF16 or Q8_0 expected)", name, i ? 'b' : 'a',
                                kiln_type_name(t->type));
            return false;
        }
        if (experts && (t->ne[2] != w->ne[2] || t->ne[3] != 1)) {
            kiln_set_last_error("lora: tensor '%s.lora_%c' [%lld, %lld, %lld, %lld] does not hold one matrix per expert of '%s' "
                                "(%lld experts: expected lora_a [%lld, r, %lld], lora_b [r, %lld, %lld])", name, i ? 'b' : 'a',
                                (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], name,
                                (long long) w->ne[2], (long long) w->ne[0], (long long) w->ne[2], (long long) w->ne[1],
                                (long long) w->ne[2]);
            return false;
        }
        if (!experts && !flat2d(t)) {
            kiln_set_last_error("lora: tensor '%s.lora_%c' is not 2-dimensional", name, i ? 'b' : 'a');
            return false;
        }
    }
    if (w == m->tok_embd) {
        if (m->output == m->tok_embd) {
            kiln_set_last_error("lora: '%s' adapts the token embedding, which this model also uses as its output "
                                "(tied); llama.cpp cannot apply that either", name);
            return false;
        }
        if (a->ne[1] != w->ne[1] || b->ne[1] != w->ne[0] || a->ne[0] != b->ne[0]) {
            kiln_set_last_error("lora: '%s': lora_a [%lld, %lld] and lora_b [%lld, %lld] do not fit the embedding [%lld, %lld] "
                                "(expected [r, %lld] and [r, %lld])", name, (long long) a->ne[0], (long long) a->ne[1],
                                (long long) b->ne[0], (long long) b->ne[1], (long long) w->ne[0], (long long) w->ne[1],
                                (long long) w->ne[1], (long long) w->ne[0]);
            return false;
        }
        return true;
    }
    if (a->ne[0] != w->ne[0] || b->ne[1] != w->ne[1]) {
        kiln_set_last_error("lora: '%s': lora_a [%lld, %lld] and lora_b [%lld, %lld] do not fit the weight [%lld, %lld] "
                            "(expected [%lld, r] and [r, %lld]; a different base model?)", name, (long long) a->ne[0],
                            (long long) a->ne[1], (long long) b->ne[0], (long long) b->ne[1], (long long) w->ne[0],
                            (long long) w->ne[1], (long long) w->ne[0], (long long) w->ne[1]);
        return false;
    }
    if (a->ne[1] != b->ne[0]) {
        kiln_set_last_error("lora: '%s': lora_a has rank %lld but lora_b %lld (lora_a must be stored [n_in, r], "
                            "lora_b [r, n_out])", name, (long long) a->ne[1], (long long) b->ne[0]);
        return false;
    }
    return true;
}

/* one pair against its base weight: types, shapes, finite values; false +
 * error naming the tensor */
static bool check_pair(const struct kiln_model * m, const char * name, const struct lora_pair * p) {
    if (!check_pair_shapes(m, name, p)) return false;
    for (int i = 0; i < 2; i++) {
        if (!all_finite(i ? p->b : p->a)) {
            kiln_set_last_error("lora: tensor '%s.lora_%c' holds an infinite or NaN value (or out of memory reading it)",
                                name, i ? 'b' : 'a');
            return false;
        }
    }
    return true;
}

static struct lora_pair * pair_of(struct kiln_adapter_lora * ad, const struct kiln_tensor * base) {
    for (int32_t i = 0; i < ad->n_pairs; i++) if (ad->pairs[i].base == base) return &ad->pairs[i];
    return NULL;
}

/* the metadata and tensors of a parsed adapter, against its model */
static bool check_adapter(struct kiln_model * m, struct kiln_adapter_lora * ad) {
    const struct kiln_gguf_context * g = ad->gguf;
    char s[128];
    if (!meta_str(g, "general.type", s, sizeof s)) strcpy(s, "(missing)");
    if (strcmp(s, "adapter") != 0) {
        kiln_set_last_error("lora: general.type is '%s', expected 'adapter' (not a LoRA adapter file)", s);
        return false;
    }
    if (!meta_str(g, "adapter.type", s, sizeof s) || strcmp(s, "lora") != 0) {
        kiln_set_last_error("lora: adapter.type is not 'lora' (only LoRA adapters are supported)");
        return false;
    }
    if (!meta_str(g, "general.architecture", s, sizeof s) || strcmp(s, m->arch) != 0) {
        kiln_set_last_error("lora: the adapter's general.architecture '%s' differs from the model's '%s'",
                            kiln_gguf_find_key(g, "general.architecture") < 0 ? "(missing)" : s, m->arch);
        return false;
    }
    ad->alpha = 0.0f;
    const int64_t ka = kiln_gguf_find_key(g, "adapter.lora.alpha");
    if (ka >= 0 && (!meta_f32(g, "adapter.lora.alpha", &ad->alpha) || !isfinite(ad->alpha))) {
        kiln_set_last_error("lora: adapter.lora.alpha is not a finite number");
        return false;
    }
    if (kiln_gguf_find_key(g, "adapter.alora.invocation_tokens") >= 0) {
        kiln_set_last_error("lora: activated LoRA (adapter.alora.invocation_tokens) is not supported");
        return false;
    }
    const int64_t nt = kiln_gguf_get_n_tensors(g);
    ad->pairs = calloc(nt > 0 ? (size_t) nt : 1, sizeof(struct lora_pair));
    if (!ad->pairs) {
        kiln_set_last_error("lora: out of memory");
        return false;
    }
    char base[160];
    for (int64_t i = 0; i < nt; i++) {
        const char * name = kiln_gguf_get_tensor_name(g, i);
        const bool is_a = ends_with(name, ".lora_a"), is_b = ends_with(name, ".lora_b");
        if (!is_a && !is_b) {
            if (ends_with(name, "_norm.weight")) continue; /* llama.cpp skips norm vectors too */
            kiln_set_last_error("lora: tensor '%s' is neither '<weight>.lora_a' nor '<weight>.lora_b'", name);
            return false;
        }
        const size_t n = strlen(name) - 7;
        if (n == 0 || n >= sizeof base) {
            kiln_set_last_error("lora: tensor name '%s' is too %s", name, n == 0 ? "short" : "long");
            return false;
        }
        memcpy(base, name, n);
        base[n] = 0;
        const struct kiln_tensor * w = kiln_model_get_tensor(m, base);
        if (!w) {
            kiln_set_last_error("lora: tensor '%s' adapts '%s', which the model does not have (a different base model?)", name, base);
            return false;
        }
        if (!adaptable(m, w)) {
            kiln_set_last_error("lora: tensor '%s' adapts '%s'; LoRA applies to the attention q/k/v (or fused qkv)/output, FFN gate/up/down "
                                "(experts, shared expert and routers included), output and token embedding weights only", name, base);
            return false;
        }
        struct lora_pair * p = pair_of(ad, w);
        if (!p) {
            p = &ad->pairs[ad->n_pairs++];
            p->base = w;
        }
        struct kiln_tensor * t = kiln_get_tensor(ad->ctx, name);
        if (!t || (is_a ? p->a : p->b)) {
            kiln_set_last_error("lora: tensor '%s' appears twice", name);
            return false;
        }
        if (is_a) p->a = t; else p->b = t;
    }
    for (int32_t i = 0; i < ad->n_pairs; i++) {
        struct lora_pair * p = &ad->pairs[i];
        if (!p->a || !p->b) {
            kiln_set_last_error("lora: '%s' has %s but no %s", p->base->name, p->a ? "lora_a" : "lora_b", p->a ? "lora_b" : "lora_a");
            return false;
        }
        if (!check_pair(m, p->base->name, p)) return false;
    }
    if (ad->n_pairs == 0) {
        kiln_set_last_error("lora: the adapter has no lora_a / lora_b tensors");
        return false;
    }
    return true;
}

static void adapter_destroy(struct kiln_adapter_lora * ad) {
    if (!ad) return;
    kiln_free(ad->ctx);
    kiln_gguf_free(ad->gguf);
    free(ad->pairs);
    free(ad);
}

static struct kiln_adapter_lora * adopt(struct kiln_model * m, struct kiln_gguf_context * g, struct kiln_context * ctx) {
    if (!g) {
        char msg[512];
        snprintf(msg, sizeof msg, "lora: %s", kiln_last_error());
        kiln_set_last_error("%s", msg);
        return NULL;
    }
    struct kiln_adapter_lora * ad = calloc(1, sizeof *ad);
    struct kiln_adapter_lora ** list = ad ? realloc(m->adapters, sizeof(*list) * (size_t) (m->n_adapters + 1)) : NULL;
    if (!ad || !list) {
        free(ad);
        kiln_free(ctx);
        kiln_gguf_free(g);
        kiln_set_last_error("lora: out of memory");
        return NULL;
    }
    m->adapters = list;
    ad->model = m;
    ad->gguf = g;
    ad->ctx = ctx;
    if (!check_adapter(m, ad)) {
        adapter_destroy(ad);
        return NULL;
    }
    m->adapters[m->n_adapters++] = ad;
    return ad;
}

static bool model_ok(const struct kiln_model * m, const void * src) {
    if (!m || !m->layers || !src) {
        kiln_set_last_error("lora: %s", !m ? "NULL model" : !src ? "NULL source" : "the model was loaded vocab-only");
        return false;
    }
    return true;
}

struct kiln_adapter_lora * kiln_adapter_lora_init(struct kiln_model * m, const char * path) {
    if (!model_ok(m, path)) return NULL;
    struct kiln_context * ctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = &ctx, .no_copy = false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, gp);
    return adopt(m, g, ctx);
}

struct kiln_adapter_lora * kiln_adapter_lora_init_from_buffer(struct kiln_model * m, const void * data, size_t size) {
    if (!model_ok(m, data)) return NULL;
    struct kiln_context * ctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = &ctx, .no_copy = false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(data, size, gp);
    return adopt(m, g, ctx);
}

float kiln_adapter_lora_alpha(const struct kiln_adapter_lora * ad) { return ad ? ad->alpha : 0.0f; }
int32_t kiln_adapter_lora_n_weights(const struct kiln_adapter_lora * ad) { return ad ? ad->n_pairs : 0; }

static int32_t use_index(const struct kiln_model * m, const struct kiln_adapter_lora * ad) {
    for (int32_t i = 0; i < m->n_loras; i++) if (m->loras[i].lora == ad) return i;
    return -1;
}

enum kiln_status kiln_model_set_adapter_lora(struct kiln_model * m, struct kiln_adapter_lora * ad, float scale) {
    if (!m || !ad || ad->model != m || !isfinite(scale)) {
        kiln_set_last_error("kiln_model_set_adapter_lora: %s", !m || !ad ? "NULL argument" : ad->model != m ?
                            "the adapter was loaded for another model" : "the scale is not finite");
        return KILN_STATUS_INVALID_ARG;
    }
    const int32_t i = use_index(m, ad);
    if (i >= 0) {
        if (m->loras[i].scale != scale) m->n_past = 0;
        m->loras[i].scale = scale;
        return KILN_STATUS_SUCCESS;
    }
    struct lora_use * u = realloc(m->loras, sizeof(*u) * (size_t) (m->n_loras + 1));
    if (!u) {
        kiln_set_last_error("kiln_model_set_adapter_lora: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    m->loras = u;
    m->loras[m->n_loras].lora = ad;
    m->loras[m->n_loras].scale = scale;
    m->n_loras++;
    m->n_past = 0;
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_model_rm_adapter_lora(struct kiln_model * m, struct kiln_adapter_lora * ad) {
    const int32_t i = m && ad ? use_index(m, ad) : -1;
    if (i < 0) {
        kiln_set_last_error("kiln_model_rm_adapter_lora: the adapter is not set on this model");
        return KILN_STATUS_INVALID_ARG;
    }
    memmove(&m->loras[i], &m->loras[i + 1], sizeof(*m->loras) * (size_t) (m->n_loras - i - 1));
    m->n_loras--;
    m->n_past = 0;
    return KILN_STATUS_SUCCESS;
}

void kiln_model_clear_adapter_lora(struct kiln_model * m) {
    if (!m || m->n_loras == 0) return;
    m->n_loras = 0;
    m->n_past = 0;
}

void kiln_adapter_lora_free(struct kiln_adapter_lora * ad) {
    if (!ad) return;
    struct kiln_model * m = ad->model;
    if (use_index(m, ad) >= 0) kiln_model_rm_adapter_lora(m, ad);
    for (int32_t i = 0; i < m->n_adapters; i++) {
        if (m->adapters[i] == ad) {
            m->adapters[i] = m->adapters[--m->n_adapters];
            break;
        }
    }
    adapter_destroy(ad);
}

void lora_model_free(struct kiln_model * m) {
    for (int32_t i = 0; i < m->n_adapters; i++) adapter_destroy(m->adapters[i]);
    free(m->adapters);
    free(m->loras);
    m->adapters = NULL;
    m->loras = NULL;
    m->n_adapters = m->n_loras = 0;
}

uint64_t lora_fingerprint(const struct kiln_model * m, uint64_t h) {
    for (int32_t i = 0; i < m->n_loras; i++) {
        const struct kiln_adapter_lora * ad = m->loras[i].lora;
        h = model_fnv(h, &m->loras[i].scale, sizeof(float));
        h = model_fnv(h, &ad->alpha, sizeof(float));
        for (int32_t k = 0; k < ad->n_pairs; k++) {
            h = model_fnv(h, ad->pairs[k].base->name, strlen(ad->pairs[k].base->name));
            h = model_fnv(h, ad->pairs[k].a->data, kiln_nbytes(ad->pairs[k].a));
            h = model_fnv(h, ad->pairs[k].b->data, kiln_nbytes(ad->pairs[k].b));
        }
    }
    return h;
}

/* ------------------------------------------------------------------ graph */

static float pair_scale(const struct kiln_adapter_lora * ad, const struct lora_pair * p, float user_scale) {
    const float rank = (float) p->b->ne[0];
    return ad->alpha != 0.0f ? user_scale * ad->alpha / rank : user_scale;
}

int32_t lora_graph_nodes(const struct kiln_model * m) {
    int32_t n = 0;
    for (int32_t i = 0; i < m->n_loras; i++) n += 4 * m->loras[i].lora->n_pairs;
    return n;
}

/* y plus every applied adapter's scaled B (A x) for weight w; embedding:
 * A's rows of the tokens x instead of A x (llama.cpp's build_inp_embd) */
static struct kiln_tensor * add_deltas(const struct kiln_model * m, struct kiln_context * ctx, const struct kiln_tensor * w,
                                       struct kiln_tensor * y, struct kiln_tensor * x, bool embd) {
    for (int32_t i = 0; y && i < m->n_loras; i++) {
        struct kiln_adapter_lora * ad = m->loras[i].lora;
        const struct lora_pair * p = pair_of(ad, w);
        if (!p) continue;
        struct kiln_tensor * ax = embd ? kiln_get_rows(ctx, p->a, x) : kiln_mul_mat(ctx, p->a, x);
        struct kiln_tensor * bax = ax ? kiln_mul_mat(ctx, p->b, ax) : NULL;
        struct kiln_tensor * d = bax ? kiln_scale(ctx, bax, pair_scale(ad, p, m->loras[i].scale)) : NULL;
        y = d ? kiln_add(ctx, y, d) : NULL;
    }
    return y;
}

struct kiln_tensor * lora_mul_mat(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * w,
                                  struct kiln_tensor * cur) {
    return add_deltas(m, ctx, w, kiln_mul_mat(ctx, w, cur), cur, false);
}

struct kiln_tensor * lora_add(const struct kiln_model * m, struct kiln_context * ctx, const struct kiln_tensor * w,
                              struct kiln_tensor * y, struct kiln_tensor * x) {
    return add_deltas(m, ctx, w, y, x, false);
}

struct kiln_tensor * lora_mul_mat_id(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * w,
                                     struct kiln_tensor * x, struct kiln_tensor * ids) {
    struct kiln_tensor * y = kiln_mul_mat_id(ctx, w, x, ids);
    for (int32_t i = 0; y && i < m->n_loras; i++) {
        struct kiln_adapter_lora * ad = m->loras[i].lora;
        const struct lora_pair * p = pair_of(ad, w);
        if (!p) continue;
        struct kiln_tensor * ax = kiln_mul_mat_id(ctx, p->a, x, ids);
        struct kiln_tensor * bax = ax ? kiln_mul_mat_id(ctx, p->b, ax, ids) : NULL;
        struct kiln_tensor * d = bax ? kiln_scale(ctx, bax, pair_scale(ad, p, m->loras[i].scale)) : NULL;
        y = d ? kiln_add(ctx, y, d) : NULL;
    }
    return y;
}

struct kiln_tensor * lora_embed(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * x,
                                struct kiln_tensor * tokens) {
    return add_deltas(m, ctx, m->tok_embd, x, tokens, true);
}
