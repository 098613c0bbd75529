/*
 * finetune.c — the training graph of a decoder with LoRA adapters, and the
 * adapter's tensors and gradients.
 *
 * Per micro-batch of n_seq sequences of T tokens (N = n_seq * T):
 *
 *   x = tok_embd[tokens]                                   [E, N]
 *   per layer: q, k, v = proj(norm(x)) (column ranges of one fused
 *              projection's output on phi3), QK-norm when the architecture has
 *              it, RoPE on q and k (positions 0..T-1 in every sequence), K
 *              and V heads repeated for GQA, softmax(softcap(scale * q k^T)
 *              + causal mask) v, h = x + post(proj_o(att)),
 *              x = h + post(proj_down(act(proj_gate(norm h)) * proj_up(norm h)))
 *              (gate and up the two halves of one fused projection on phi3;
 *              on mixture-of-experts layers the routed experts' FFNs through
 *              mul_mat_id, see moe()) with act = silu or gelu (tanh form), post = the RMS norm after
 *              the block of sandwich / post-norm architectures (gemma 2/3,
 *              olmo2; these have no norm before it), softcap(s) =
 *              c tanh(s / c) where the architecture caps logits (gemma 2)
 *   logits = Wout norm(x[scored rows])                     [V, n_scored]
 *   loss = cross-entropy against one-hot targets, mean over scored rows
 *
 * with proj(x) = W x + (alpha / r) B (A x) where the projection is a LoRA
 * target (per chosen expert e: W_e x + (alpha / r) B_e (A_e x)) (B (A (m * x)) in training with dropout: m is an input tensor per
 * adapted projection, filled from (seed, key, projection, element)).
 * Attention is written out (mul_mat, diag_mask_inf, soft_max) since
 * those ops have backward rules; only the scored rows reach the output
 * matrix, so masked positions cost nothing there and contribute no
 * gradient. The graph is rebuilt for every micro-batch (its shape follows
 * n_seq and the number of scored positions); building is cheap next to
 * computing.
 */
#include "finetune_internal.h"

#include "kiln-gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char * const lora_target_names[LORA_N_TARGETS] = { "q", "k", "v", "o", "gate", "up", "down" };

static struct kiln_tensor * layer_slot(const struct layer * L, int t) {
    switch (t) {
        case 0: return L->wq;
        case 1: return L->wk;
        case 2: return L->wv;
        case 3: return L->wo;
        case 4: return L->ffn_gate ? L->ffn_gate : L->gate_exps;
        case 5: return L->ffn_up ? L->ffn_up : L->up_exps;
        case 6: return L->ffn_down ? L->ffn_down : L->down_exps;
        case 7: return L->gate_shexp;
        case 8: return L->up_shexp;
        default: return L->down_shexp;
    }
}

/* the target (kiln_lora_target bit) that selects slot t */
static int slot_target(int t) { return t < LORA_N_TARGETS ? t : t - 3; }

/* a fused [gate; up] matrix in ffn_up, without ffn_gate (phi3) */
static bool fused_ffn(const struct layer * L) { return !L->ffn_gate && L->ffn_up; }

/* the weight adapted for slot t of layer L under the target mask, or
 * NULL: a fused q/k/v weight stands in slot q for any of q, k, v, a fused
 * [gate; up] weight in slot up for either of gate, up (one A/B pair on the
 * fused weight, as llama.cpp adapts it); gate, up, down select the routed
 * experts' weights (one A/B pair per expert, 3-D, as llama.cpp's
 * build_lora_mm_id applies them) and the shared expert's */
static struct kiln_tensor * target_weight(const struct layer * L, int t, uint32_t targets) {
    if (L->wqkv && t <= 2) return t == 0 && (targets & (KILN_LORA_Q | KILN_LORA_K | KILN_LORA_V)) ? L->wqkv : NULL;
    if (fused_ffn(L) && (t == 4 || t == 5)) return t == 5 && (targets & (KILN_LORA_GATE | KILN_LORA_UP)) ? L->ffn_up : NULL;
    return targets & (1u << slot_target(t)) ? layer_slot(L, t) : NULL;
}

uint32_t kiln_lora_parse_targets(const char * list) {
    if (!list) return 0;
    if (strcmp(list, "all") == 0) return (1u << LORA_N_TARGETS) - 1;
    uint32_t mask = 0;
    const char * s = list;
    while (*s) {
        const char * e = strchr(s, ',');
        const size_t n = e ? (size_t) (e - s) : strlen(s);
        int found = -1;
        for (int i = 0; i < LORA_N_TARGETS; i++) {
            if (strlen(lora_target_names[i]) == n && strncmp(s, lora_target_names[i], n) == 0) found = i;
        }
        if (found < 0) {
            kiln_set_last_error("lora: unknown target '%.*s' (known: q, k, v, o, gate, up, down, all)", (int) n, s);
            return 0;
        }
        mask |= 1u << found;
        s += n;
        if (*s == ',') s++;
    }
    if (!mask) kiln_set_last_error("lora: no targets in '%s'", list);
    return mask;
}

struct kiln_lora_params kiln_lora_default_params(void) {
    struct kiln_lora_params p = { 8, 16.0f, KILN_LORA_Q | KILN_LORA_V, 42, 0.0f };
    return p;
}

/* ---- loading for training: the file's layout, the model owning the GGUF */

static struct kiln_model * own(struct kiln_gguf_context * g, struct kiln_context * wctx, int32_t n_threads) {
    if (!g) return NULL;
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_ctx = 8; /* the inference KV cache is not used by training */
    mp.n_threads = n_threads;
    mp.repack_in_place = false;
    struct kiln_model * m = kiln_model_load_from_gguf(g, wctx, mp);
    if (!m) {
        kiln_gguf_free(g);
        kiln_free(wctx);
        return NULL;
    }
    m->borrowed = false; /* kiln_model_free releases the file and the weights */
    return m;
}

struct kiln_model * kiln_model_load_for_training(const char * path, int32_t n_threads) {
    if (!path) {
        kiln_set_last_error("model: NULL path");
        return NULL;
    }
    struct kiln_context * wctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = &wctx, .no_copy = true };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, gp); /* sets wctx */
    return own(g, wctx, n_threads);
}

struct kiln_model * kiln_model_load_for_training_from_buffer(const void * data, size_t size, int32_t n_threads) {
    if (!data) {
        kiln_set_last_error("model: NULL buffer");
        return NULL;
    }
    struct kiln_context * wctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = &wctx, .no_copy = false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(data, size, gp); /* sets wctx */
    return own(g, wctx, n_threads);
}

/* ---- the adapter */

static bool supported(const struct kiln_model * m) {
    const struct arch_traits * tr = m->tr;
    const char * why = NULL;
    if (!tr) why = "the model has no weights (vocab_only)";
    else if (tr->norm == NORM_PARALLEL) why = "parallel attention and FFN with LayerNorm";
    if (why) {
        kiln_set_last_error("finetune: architecture '%s' is not supported for training (%s)", m->arch, why);
        return false;
    }
    for (int il = 0; il < m->n_layer; il++) {
        struct layer * L = &m->layers[il];
        for (int t = 0; t < LORA_N_SLOTS; t++) {
            const struct kiln_tensor * w = target_weight(L, t, ~0u);
            if (w && kiln_tensor_is_repacked(w)) {
                kiln_set_last_error("finetune: '%s' was rearranged for generation (repacked): train a model loaded with "
                                    "kiln_model_load_for_training, or in JS before its first generation", w->name);
                return false;
            }
        }
    }
    return true;
}

struct kiln_lora * kiln_lora_new(struct kiln_model * m, struct kiln_lora_params p) {
    if (!m) { kiln_set_last_error("lora: NULL model"); return NULL; }
    if (p.rank < 1 || p.rank > 4096) { kiln_set_last_error("lora: rank %d out of range (1..4096)", p.rank); return NULL; }
    if (!(p.alpha > 0.0f) || !isfinite(p.alpha)) { kiln_set_last_error("lora: alpha must be positive"); return NULL; }
    if (!p.targets || p.targets >= (1u << LORA_N_TARGETS)) { kiln_set_last_error("lora: bad target mask 0x%x", p.targets); return NULL; }
    if (!(p.dropout >= 0.0f && p.dropout < 1.0f)) { kiln_set_last_error("lora: dropout %g out of range [0, 1)", (double) p.dropout); return NULL; }
    if (!supported(m)) return NULL;
    struct kiln_lora * l = calloc(1, sizeof *l);
    if (!l) { kiln_set_last_error("lora: out of memory"); return NULL; }
    l->model = m;
    l->p = p;
    l->drop_key = -1;
    l->index = malloc(sizeof(int) * (size_t) m->n_layer * LORA_N_SLOTS);
    l->pairs = calloc((size_t) m->n_layer * LORA_N_SLOTS, sizeof *l->pairs);
    if (!l->index || !l->pairs) goto oom;
    size_t bytes = 0;
    for (int il = 0; il < m->n_layer; il++) {
        for (int t = 0; t < LORA_N_SLOTS; t++) {
            struct kiln_tensor * w = target_weight(&m->layers[il], t, p.targets);
            l->index[il * LORA_N_SLOTS + t] = -1;
            if (!w) continue;
            const bool experts = w == m->layers[il].gate_exps || w == m->layers[il].up_exps || w == m->layers[il].down_exps;
            if (w->ne[3] != 1 || (w->ne[2] != 1 && !experts)) {
                kiln_set_last_error("lora: '%s' is not a matrix (or one matrix per expert)", w->name);
                kiln_lora_free(l);
                return NULL;
            }
            struct lora_pair * pr = &l->pairs[l->n_pairs];
            pr->base = w;
            pr->layer = il;
            pr->target = t;
            l->index[il * LORA_N_SLOTS + t] = l->n_pairs++;
            bytes += sizeof(float) * (size_t) p.rank * (size_t) (w->ne[0] + w->ne[1]) * (size_t) w->ne[2] + 2 * kiln_tensor_overhead() + 128;
        }
    }
    if (l->n_pairs == 0) {
        kiln_set_last_error("lora: the model has none of the requested target projections");
        kiln_lora_free(l);
        return NULL;
    }
    struct kiln_init_params ip = { bytes + 1024, NULL, false };
    l->ctx = kiln_init(ip);
    l->grad = calloc((size_t) l->n_pairs * 2, sizeof(float *));
    if (!l->ctx || !l->grad) goto oom;
    uint64_t rs = p.seed;
    for (int i = 0; i < l->n_pairs; i++) {
        struct lora_pair * pr = &l->pairs[i];
        const int64_t n_in = pr->base->ne[0], n_out = pr->base->ne[1], n_x = pr->base->ne[2];
        pr->a = n_x > 1 ? kiln_new_tensor_3d(l->ctx, KILN_TYPE_F32, n_in, p.rank, n_x) : kiln_new_tensor_2d(l->ctx, KILN_TYPE_F32, n_in, p.rank);
        pr->b = n_x > 1 ? kiln_new_tensor_3d(l->ctx, KILN_TYPE_F32, p.rank, n_out, n_x) : kiln_new_tensor_2d(l->ctx, KILN_TYPE_F32, p.rank, n_out);
        if (!pr->a || !pr->b) goto oom;
        kiln_format_name(pr->a, "%s.lora_a", pr->base->name);
        kiln_format_name(pr->b, "%s.lora_b", pr->base->name);
        kiln_set_param(l->ctx, pr->a);
        kiln_set_param(l->ctx, pr->b);
        /* PEFT: kaiming_uniform_(A, a = sqrt(5)) over fan_in = n_in gives U(-1/sqrt(n_in), 1/sqrt(n_in)) (each expert's A alike) */
        const double bound = 1.0 / sqrt((double) n_in);
        float * a = pr->a->data;
        for (int64_t j = 0; j < n_in * p.rank * n_x; j++) a[j] = (float) ((((double) (lora_mix(&rs) >> 11) / 9007199254740992.0) * 2.0 - 1.0) * bound);
        memset(pr->b->data, 0, kiln_nbytes(pr->b));
        for (int k = 0; k < 2; k++) {
            struct kiln_tensor * t = k ? pr->b : pr->a;
            l->grad[2 * i + k] = calloc((size_t) kiln_nelements(t), sizeof(float));
            if (!l->grad[2 * i + k]) goto oom;
            l->n_params += kiln_nelements(t);
        }
    }
    l->galloc = kiln_gallocr_new();
    if (!l->galloc) goto oom;
    return l;
oom:
    kiln_lora_free(l);
    kiln_set_last_error("lora: out of memory");
    return NULL;
}

void kiln_lora_free(struct kiln_lora * l) {
    if (!l) return;
    if (l->grad) for (int i = 0; i < 2 * l->n_pairs; i++) free(l->grad[i]);
    free(l->grad);
    kiln_free(l->ctx);
    kiln_gallocr_free(l->galloc);
    free(l->work);
    free(l->index);
    free(l->pairs);
    free(l);
}

int32_t kiln_lora_n_tensors(const struct kiln_lora * l) { return l ? 2 * l->n_pairs : 0; }
int64_t kiln_lora_n_params(const struct kiln_lora * l) { return l ? l->n_params : 0; }

struct kiln_tensor * kiln_lora_tensor(struct kiln_lora * l, int32_t i) {
    if (!l || i < 0 || i >= 2 * l->n_pairs) return NULL;
    return i % 2 ? l->pairs[i / 2].b : l->pairs[i / 2].a;
}

float * kiln_lora_grad(struct kiln_lora * l, int32_t i) {
    if (!l || i < 0 || i >= 2 * l->n_pairs) return NULL;
    return l->grad[i];
}

void kiln_lora_zero_grad(struct kiln_lora * l) {
    if (!l) return;
    for (int i = 0; i < 2 * l->n_pairs; i++) memset(l->grad[i], 0, sizeof(float) * (size_t) kiln_nelements(kiln_lora_tensor(l, i)));
}

/* ---- dropout masks: element i of pair's input under key keeps with
 * probability 1 - dropout; a counter-based stream (splitmix64 at position
 * i of a stream chosen by seed, key and pair) so that any element can be
 * computed alone, in any order, by any thread count */

void kiln_lora_set_dropout_key(struct kiln_lora * l, int64_t key) {
    if (l) l->drop_key = key < 0 ? -1 : key;
}

static uint64_t drop_stream(uint64_t seed, int64_t key, int32_t pair) {
    uint64_t s = seed ^ 0x64726f706f7574ULL; /* "dropout" */
    s = lora_mix(&s) ^ ((uint64_t) key * 0xd1b54a32d192ed03ULL);
    s = lora_mix(&s) ^ ((uint64_t) pair * 0x8cb92ba72f3d8dd7ULL);
    return lora_mix(&s);
}

static inline float drop_at(uint64_t stream, int64_t i, double p, float keep) {
    uint64_t z = stream + (uint64_t) i * 0x9e3779b97f4a7c15ULL;
    const uint64_t u = lora_mix(&z) >> 11; /* 53 bits */
    return (double) u * (1.0 / 9007199254740992.0) < p ? 0.0f : keep;
}

float kiln_lora_dropout_factor(const struct kiln_lora * l, int32_t pair, int64_t key, int64_t i) {
    if (!l || !(l->p.dropout > 0.0f)) return 1.0f;
    return drop_at(drop_stream(l->p.seed, key, pair), i, l->p.dropout, 1.0f / (1.0f - l->p.dropout));
}

/* ---- the graph */

struct tgraph {
    struct kiln_context * ctx;
    struct kiln_cgraph * g;
    struct kiln_tensor * tokens, * pos, * rows, * labels, * loss;
    struct kiln_tensor ** drop; /* [n_pairs] dropout masks of the adapters' inputs; NULL without dropout */
};

#define CHK(x) do { if (!(x)) return false; } while (0)

/* the adapter's input: x, or x times pair ip's dropout mask (an input
 * tensor of x's shape) in training with dropout */
static struct kiln_tensor * adapter_input(struct tgraph * tg, int ip, struct kiln_tensor * x) {
    if (!tg->drop) return x;
    struct kiln_tensor * mk = kiln_new_tensor(tg->ctx, KILN_TYPE_F32, 4, x->ne);
    if (!mk) return NULL;
    kiln_set_input(mk);
    tg->drop[ip] = mk;
    return kiln_mul(tg->ctx, x, mk);
}

static struct kiln_tensor * proj(struct kiln_lora * l, struct tgraph * tg, int il, int t,
                                 struct kiln_tensor * w, struct kiln_tensor * bias, struct kiln_tensor * x) {
    struct kiln_context * ctx = tg->ctx;
    struct kiln_tensor * y = kiln_mul_mat(ctx, w, x);
    const int ip = l->index[il * LORA_N_SLOTS + t];
    if (y && ip >= 0) {
        const struct lora_pair * pr = &l->pairs[ip];
        struct kiln_tensor * ab = kiln_mul_mat(ctx, pr->b, kiln_mul_mat(ctx, pr->a, adapter_input(tg, ip, x)));
        y = kiln_add(ctx, y, kiln_scale(ctx, ab, l->p.alpha / (float) l->p.rank));
    }
    if (y && bias) y = kiln_add(ctx, y, bias);
    return y;
}

/* the experts' weights w times x for the chosen experts ids, plus the
 * adapter's B_e (A_e x) per chosen expert e (llama.cpp's build_lora_mm_id) */
static struct kiln_tensor * proj_id(struct kiln_lora * l, struct tgraph * tg, int il, int t, struct kiln_tensor * w,
                                    struct kiln_tensor * x, struct kiln_tensor * ids) {
    struct kiln_context * ctx = tg->ctx;
    struct kiln_tensor * y = kiln_mul_mat_id(ctx, w, x, ids);
    const int ip = l->index[il * LORA_N_SLOTS + t];
    if (y && ip >= 0) {
        const struct lora_pair * pr = &l->pairs[ip];
        struct kiln_tensor * ax = kiln_mul_mat_id(ctx, pr->a, adapter_input(tg, ip, x), ids);
        struct kiln_tensor * ab = kiln_mul_mat_id(ctx, pr->b, ax, ids);
        y = kiln_add(ctx, y, kiln_scale(ctx, ab, l->p.alpha / (float) l->p.rank));
    }
    return y;
}

/* mixture of experts in decoder.c's (llama.cpp's) order of operations:
 * router softmax, the n_used most probable experts, their probabilities as
 * weights (renormalised for qwen3moe), each expert's gated-SiLU FFN through
 * mul_mat_id, weighted, summed slot by slot; plus qwen2moe's shared expert
 * gated by a sigmoid. The choice of experts is not differentiable: the
 * gradient reaches the router's input through the chosen weights only.
 * Generation clamps qwen3moe's weight sum below at 6.1e-5; the top n_used
 * of n_expert probabilities sum to at least n_used / n_expert, so the clamp
 * never acts and the graph leaves it out. */
static struct kiln_tensor * moe(struct kiln_lora * l, struct tgraph * tg, int il, struct kiln_tensor * x) {
    const struct kiln_model * m = l->model;
    const struct layer * L = &m->layers[il];
    struct kiln_context * ctx = tg->ctx;
    const int64_t E = m->n_embd, X = m->n_expert, U = m->n_expert_used, N = x->ne[1];
    struct kiln_tensor * probs = kiln_soft_max(ctx, kiln_mul_mat(ctx, L->gate_inp, x)); /* [X, N] */
    struct kiln_tensor * sel = probs ? kiln_top_k(ctx, probs, (int) U) : NULL;         /* [U, N] */
    struct kiln_tensor * w = sel ? kiln_get_rows(ctx, kiln_reshape_3d(ctx, probs, 1, X, N), sel) : NULL; /* [1, U, N] */
    if (w && m->tr->moe == MOE_NORM_TOPK) {
        struct kiln_tensor * w2 = kiln_reshape_2d(ctx, w, U, N);
        w = kiln_reshape_3d(ctx, kiln_div(ctx, w2, kiln_sum_rows(ctx, w2)), 1, U, N);
    }
    if (!w) return NULL;
    struct kiln_tensor * x3 = kiln_reshape_3d(ctx, x, E, 1, N);
    struct kiln_tensor * up = proj_id(l, tg, il, 5, L->up_exps, x3, sel); /* [F, U, N] */
    struct kiln_tensor * gate = proj_id(l, tg, il, 4, L->gate_exps, x3, sel);
    if (!up || !gate) return NULL;
    struct kiln_tensor * ex = kiln_mul(ctx, proj_id(l, tg, il, 6, L->down_exps, kiln_mul(ctx, kiln_silu(ctx, gate), up), sel), w);
    if (!ex) return NULL;
    struct kiln_tensor * out = NULL;
    for (int64_t i = 0; i < U; i++) {
        struct kiln_tensor * e = kiln_view_2d(ctx, ex, E, N, ex->nb[2], (size_t) i * ex->nb[1]);
        out = out ? kiln_add(ctx, out, e) : e;
        if (!out) return NULL;
    }
    if (U == 1) out = kiln_cont(ctx, out);
    if (out && m->tr->moe == MOE_SHARED) {
        struct kiln_tensor * g = kiln_mul_mat(ctx, L->gate_inp_shexp, x); /* [1, N] */
        g = kiln_div(ctx, kiln_silu(ctx, g), g);
        struct kiln_tensor * sg = proj(l, tg, il, 7, L->gate_shexp, NULL, x);
        struct kiln_tensor * su = proj(l, tg, il, 8, L->up_shexp, NULL, x);
        struct kiln_tensor * sh = proj(l, tg, il, 9, L->down_shexp, NULL, kiln_mul(ctx, kiln_silu(ctx, sg), su));
        out = kiln_add(ctx, out, kiln_mul(ctx, sh, g));
    }
    return out;
}

static struct kiln_tensor * rms(struct kiln_context * ctx, struct kiln_tensor * x, struct kiln_tensor * w, float eps) {
    return kiln_mul(ctx, kiln_rms_norm(ctx, x, eps), w);
}

/* columns [off, off + n) of every row of a 2-D tensor (a part of a fused projection's output), contiguous */
static struct kiln_tensor * cols(struct kiln_context * ctx, struct kiln_tensor * t, int64_t off, int64_t n) {
    struct kiln_tensor * v = t ? kiln_view_2d(ctx, t, n, t->ne[1], t->nb[1], (size_t) off * t->nb[0]) : NULL;
    return v ? kiln_cont(ctx, v) : NULL;
}

static struct kiln_tensor * add_bias(struct kiln_context * ctx, struct kiln_tensor * y, struct kiln_tensor * b) {
    return y && b ? kiln_add(ctx, y, b) : y;
}

/* [Hd, nkv, N] -> [Hd, nh, N], kv head j serving query heads j*g .. j*g+g-1 (as ggml's broadcast) */
static struct kiln_tensor * expand_heads(struct kiln_context * ctx, struct kiln_tensor * t, int64_t nh) {
    const int64_t Hd = t->ne[0], nkv = t->ne[1], N = t->ne[2];
    if (nkv == nh) return t;
    struct kiln_tensor * r = kiln_reshape_4d(ctx, t, Hd, 1, nkv, N);
    struct kiln_tensor * like = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, Hd, nh / nkv, nkv, N);
    if (!r || !like) return NULL;
    return kiln_reshape_3d(ctx, kiln_repeat(ctx, r, like), Hd, nh, N);
}

/* the dense gated feed-forward: down(act(gate x) * up x), gate and up the
 * two halves of one fused projection on phi3 */
static struct kiln_tensor * ffn(struct kiln_lora * l, struct tgraph * tg, int il, struct kiln_tensor * x) {
    const struct kiln_model * m = l->model;
    const struct layer * L = &m->layers[il];
    struct kiln_context * ctx = tg->ctx;
    struct kiln_tensor * gate, * up;
    if (fused_ffn(L)) {
        struct kiln_tensor * gu = proj(l, tg, il, 5, L->ffn_up, NULL, x);
        if (!gu) return NULL;
        gate = cols(ctx, gu, 0, gu->ne[0] / 2);
        up = cols(ctx, gu, gu->ne[0] / 2, gu->ne[0] / 2);
    } else {
        gate = proj(l, tg, il, 4, L->ffn_gate, NULL, x);
        up = proj(l, tg, il, 5, L->ffn_up, NULL, x);
    }
    if (!gate || !up) return NULL;
    struct kiln_tensor * act = m->tr->ffn == FFN_GELU_GATED ? kiln_gelu(ctx, gate) : kiln_silu(ctx, gate);
    return proj(l, tg, il, 6, L->ffn_down, NULL, kiln_mul(ctx, act, up));
}

static bool build(struct kiln_lora * l, struct tgraph * tg, int32_t n_seq, int32_t T, int64_t n_rows, bool backward) {
    struct kiln_model * m = l->model;
    const int64_t E = m->n_embd, Hd = m->head_dim, nh = m->n_head, nkv = m->n_head_kv, N = (int64_t) n_seq * T;
    const size_t n_tensors = (size_t) m->n_layer * (400 + (m->n_expert ? 200 + 16 * (size_t) m->n_expert_used : 0)) + 256;
    struct kiln_init_params ip = { n_tensors * kiln_tensor_overhead() + kiln_graph_overhead_custom(n_tensors, true), NULL, true };
    struct kiln_context * ctx = kiln_init(ip);
    CHK(ctx);
    tg->ctx = ctx;
    tg->tokens = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, N);
    tg->pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, N);
    tg->rows = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, n_rows);
    tg->labels = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, m->n_vocab, n_rows);
    CHK(tg->tokens && tg->pos && tg->rows && tg->labels);
    kiln_set_input(tg->tokens);
    kiln_set_input(tg->pos);
    kiln_set_input(tg->rows);
    kiln_set_input(tg->labels);
    if (l->p.dropout > 0.0f && l->drop_key >= 0) {
        tg->drop = calloc((size_t) l->n_pairs, sizeof *tg->drop);
        CHK(tg->drop);
    }

    struct kiln_tensor * x = kiln_get_rows(ctx, m->tok_embd, tg->tokens);
    CHK(x);
    if (m->embd_scale != 1.0f) x = kiln_scale(ctx, x, m->embd_scale);
    const float kq_scale = m->tr->q_prescale ? 1.0f : m->attn_scale;
    const enum norm_place np = m->tr->norm;
    /* frequency factors: Llama 3's, or LongRoPE's long or short set chosen
     * by the training context as generation chooses them by its context */
    struct kiln_tensor * freqs = m->rope_long || m->rope_short ? (T > m->n_ctx_orig ? m->rope_long : m->rope_short) : m->rope_freqs;
    for (int il = 0; il < m->n_layer; il++) {
        const struct layer * L = &m->layers[il];
        struct kiln_tensor * cur = np == NORM_POST ? x : rms(ctx, x, L->attn_norm, m->norm_eps);
        CHK(cur);
        struct kiln_tensor * q, * k, * v;
        if (L->wqkv) {
            struct kiln_tensor * qkv = proj(l, tg, il, 0, L->wqkv, NULL, cur);
            q = add_bias(ctx, cols(ctx, qkv, 0, Hd * nh), L->bq);
            k = add_bias(ctx, cols(ctx, qkv, Hd * nh, Hd * nkv), L->bk);
            v = add_bias(ctx, cols(ctx, qkv, Hd * (nh + nkv), Hd * nkv), L->bv);
        } else {
            q = proj(l, tg, il, 0, L->wq, L->bq, cur);
            k = proj(l, tg, il, 1, L->wk, L->bk, cur);
            v = proj(l, tg, il, 2, L->wv, L->bv, cur);
        }
        CHK(q && k && v);
        if (m->tr->qk_norm == QK_NORM_FULL) {
            q = rms(ctx, q, L->q_norm, m->norm_eps);
            k = rms(ctx, k, L->k_norm, m->norm_eps);
        }
        q = kiln_reshape_3d(ctx, q, Hd, nh, N);
        k = kiln_reshape_3d(ctx, k, Hd, nkv, N);
        v = kiln_reshape_3d(ctx, v, Hd, nkv, N);
        CHK(q && k && v);
        if (m->tr->qk_norm == QK_NORM_HEAD) {
            q = rms(ctx, q, L->q_norm, m->norm_eps);
            k = rms(ctx, k, L->k_norm, m->norm_eps);
        }
        if (L->rope) {
            q = kiln_rope_ext(ctx, q, tg->pos, freqs, m->n_rot, m->rope_type, m->n_ctx_orig, L->freq_base, L->freq_scale,
                              m->ext_factor, m->attn_factor, m->beta_fast, m->beta_slow);
            k = kiln_rope_ext(ctx, k, tg->pos, freqs, m->n_rot, m->rope_type, m->n_ctx_orig, L->freq_base, L->freq_scale,
                              m->ext_factor, m->attn_factor, m->beta_fast, m->beta_slow);
        }
        if (m->tr->q_prescale) q = kiln_scale(ctx, q, m->attn_scale);
        CHK(q && k);
        k = expand_heads(ctx, k, nh);
        v = expand_heads(ctx, v, nh);
        CHK(k && v);
        /* [Hd, nh, T, S] -> q, k: [Hd, T, nh, S]; v: [T, Hd, nh, S] */
        struct kiln_tensor * qp = kiln_cont(ctx, kiln_permute(ctx, kiln_reshape_4d(ctx, q, Hd, nh, T, n_seq), 0, 2, 1, 3));
        struct kiln_tensor * kp = kiln_cont(ctx, kiln_permute(ctx, kiln_reshape_4d(ctx, k, Hd, nh, T, n_seq), 0, 2, 1, 3));
        struct kiln_tensor * vp = kiln_cont(ctx, kiln_permute(ctx, kiln_reshape_4d(ctx, v, Hd, nh, T, n_seq), 1, 2, 0, 3));
        CHK(qp && kp && vp);
        struct kiln_tensor * kq = kiln_mul_mat(ctx, kp, qp); /* [T_k, T_q, nh, S] */
        float sm_scale = kq_scale;
        if (m->attn_softcap != 0.0f) { /* c tanh(scale s / c), as flash attention's softcap */
            kq = kiln_scale(ctx, kiln_tanh(ctx, kiln_scale(ctx, kq, kq_scale / m->attn_softcap)), m->attn_softcap);
            sm_scale = 1.0f;
        }
        kq = kiln_diag_mask_inf(ctx, kq, 0);
        kq = kiln_soft_max_ext(ctx, kq, NULL, sm_scale, 0.0f);
        struct kiln_tensor * att = kiln_mul_mat(ctx, vp, kq); /* [Hd, T_q, nh, S] */
        att = kiln_cont(ctx, kiln_permute(ctx, att, 0, 2, 1, 3));
        CHK(att);
        att = kiln_reshape_2d(ctx, att, Hd * nh, N);
        cur = proj(l, tg, il, 3, L->wo, L->bo, att);
        CHK(cur);
        if (np != NORM_PRE) cur = rms(ctx, cur, L->attn_post_norm, m->norm_eps);
        if (m->residual_scale != 1.0f) cur = kiln_scale(ctx, cur, m->residual_scale);
        struct kiln_tensor * h = kiln_add(ctx, cur, x);
        CHK(h);
        cur = np == NORM_POST ? h : rms(ctx, h, L->ffn_norm, m->norm_eps);
        CHK(cur);
        cur = m->tr->moe != MOE_NONE ? moe(l, tg, il, cur) : ffn(l, tg, il, cur);
        CHK(cur);
        if (np != NORM_PRE) cur = rms(ctx, cur, L->ffn_post_norm, m->norm_eps);
        if (m->residual_scale != 1.0f) cur = kiln_scale(ctx, cur, m->residual_scale);
        x = kiln_add(ctx, cur, h);
        CHK(x);
    }
    struct kiln_tensor * xs = kiln_get_rows(ctx, x, tg->rows); /* [E, n_rows] */
    CHK(xs);
    struct kiln_tensor * cur = rms(ctx, xs, m->output_norm, m->norm_eps);
    cur = kiln_mul_mat(ctx, m->output, cur);
    CHK(cur);
    if (m->logit_scale != 1.0f) cur = kiln_scale(ctx, cur, 1.0f / m->logit_scale);
    if (m->final_softcap != 0.0f) {
        cur = kiln_scale(ctx, kiln_tanh(ctx, kiln_scale(ctx, cur, 1.0f / m->final_softcap)), m->final_softcap);
    }
    CHK(cur);
    tg->loss = kiln_cross_entropy_loss(ctx, cur, tg->labels);
    CHK(tg->loss);
    kiln_set_loss(tg->loss);
    kiln_set_output(tg->loss);
    (void) E;
    tg->g = kiln_new_graph_custom(ctx, n_tensors, backward);
    CHK(tg->g);
    CHK(kiln_build_forward_expand(tg->g, tg->loss) == KILN_STATUS_SUCCESS);
    if (backward) {
        CHK(kiln_build_backward_expand(ctx, tg->g, NULL) == KILN_STATUS_SUCCESS);
        for (int i = 0; i < 2 * l->n_pairs; i++) {
            struct kiln_tensor * gr = kiln_graph_get_grad(tg->g, kiln_lora_tensor(l, i));
            if (!gr) {
                kiln_set_last_error("finetune: no gradient reaches '%s'", kiln_lora_tensor(l, i)->name);
                return false;
            }
            kiln_set_output(gr);
        }
    }
    return true;
}

enum kiln_status kiln_lora_eval(struct kiln_lora * l, const int32_t * tokens, const int32_t * targets, int32_t n_seq,
                                int32_t n_ctx, bool backward, double * loss, int64_t * n_scored) {
    if (loss) *loss = 0.0;
    if (n_scored) *n_scored = 0;
    if (!l || !tokens || !targets || n_seq < 1 || n_ctx < 1) {
        kiln_set_last_error("lora_eval: NULL argument or empty batch");
        return KILN_STATUS_INVALID_ARG;
    }
    struct kiln_model * m = l->model;
    for (int il = 0; il < m->n_layer; il++) {
        /* the graph masks causally only: a window at least as long as the sequence changes nothing */
        if (m->layers[il].swa && n_ctx > m->n_swa) {
            kiln_set_last_error("finetune: ctx %d is longer than the model's sliding window (%d): train with ctx <= %d",
                                n_ctx, m->n_swa, m->n_swa);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    const int64_t N = (int64_t) n_seq * n_ctx;
    int64_t n_rows = 0;
    for (int64_t i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab || targets[i] >= m->n_vocab) {
            kiln_set_last_error("lora_eval: token %d at %lld out of range (vocabulary of %d)",
                                tokens[i] < 0 || tokens[i] >= m->n_vocab ? tokens[i] : targets[i], (long long) i, m->n_vocab);
            return KILN_STATUS_INVALID_ARG;
        }
        if (targets[i] >= 0) n_rows++;
    }
    if (n_rows == 0) return KILN_STATUS_SUCCESS; /* nothing scored: no loss, no gradient */
    struct tgraph tg = { 0 };
    enum kiln_status st = KILN_STATUS_FAILED;
    if (!build(l, &tg, n_seq, n_ctx, n_rows, backward)) {
        char msg[512];
        snprintf(msg, sizeof msg, "finetune: building the training graph failed: %s", kiln_last_error());
        kiln_set_last_error("%s", msg);
        goto done;
    }
    if (!kiln_gallocr_alloc_graph(l->galloc, tg.g)) {
        char msg[512];
        snprintf(msg, sizeof msg, "finetune: allocating the training graph failed: %s", kiln_last_error());
        kiln_set_last_error("%s", msg);
        st = KILN_STATUS_ALLOC_FAILED;
        goto done;
    }
    int32_t * tk = tg.tokens->data, * ps = tg.pos->data, * rw = tg.rows->data;
    float * lb = tg.labels->data;
    memset(lb, 0, kiln_nbytes(tg.labels));
    int64_t r = 0;
    for (int64_t i = 0; i < N; i++) {
        tk[i] = tokens[i];
        ps[i] = (int32_t) (i % n_ctx);
        if (targets[i] >= 0) {
            rw[r] = (int32_t) i;
            lb[r * m->n_vocab + targets[i]] = 1.0f;
            r++;
        }
    }
    if (tg.drop) {
        const double p = l->p.dropout;
        const float keep = 1.0f / (1.0f - l->p.dropout);
        for (int i = 0; i < l->n_pairs; i++) {
            if (!tg.drop[i]) continue;
            const uint64_t stream = drop_stream(l->p.seed, l->drop_key, i);
            float * d = tg.drop[i]->data;
            const int64_t n = kiln_nelements(tg.drop[i]);
            for (int64_t j = 0; j < n; j++) d[j] = drop_at(stream, j, p, keep);
        }
    }
    if (backward) kiln_graph_reset(tg.g);
    struct kiln_cplan plan = kiln_graph_plan(tg.g, m->n_threads, m->threadpool);
    if (plan.work_size > l->work_size) {
        uint8_t * w = realloc(l->work, plan.work_size);
        if (!w) {
            kiln_set_last_error("finetune: cannot allocate %zu bytes of work buffer", plan.work_size);
            st = KILN_STATUS_ALLOC_FAILED;
            goto done;
        }
        l->work = w;
        l->work_size = plan.work_size;
    }
    plan.work_data = l->work;
    plan.abort_flag = m->abort_flag;
    st = kiln_graph_compute(tg.g, &plan);
    if (st != KILN_STATUS_SUCCESS) goto done;
    if (loss) *loss = kiln_get_f32_1d(tg.loss, 0);
    if (n_scored) *n_scored = n_rows;
    if (backward) {
        for (int i = 0; i < 2 * l->n_pairs; i++) {
            const struct kiln_tensor * gr = kiln_graph_get_grad(tg.g, kiln_lora_tensor(l, i));
            const float * gd = gr->data;
            float * acc = l->grad[i];
            const int64_t n = kiln_nelements(gr);
            for (int64_t j = 0; j < n; j++) acc[j] += gd[j] * (float) n_rows;
        }
    }
done:
    kiln_free(tg.ctx);
    free(tg.drop);
    return st;
}
