/*
 * bert.c — the encoder architectures that embedding search runs, as
 * llama.cpp names and computes them (its bert graph), over one sequence:
 *
 *   x = LN(tok_embd[t] + token_types[0] (+ position_embd[pos]))    bert: absolute positions
 *   per layer: q, k, v = Wqkv x (fused) or Wq x, Wk x, Wv x (+ biases)
 *              nomic-bert: RoPE (NEOX) on q and k
 *              a = Wo attention(q, k, v) (+ bo)        bidirectional, in F32
 *              h = LN(x + a)                            post-LayerNorm
 *              f = down(gelu(up h + b) + b)             bert (GELU as ggml's f16 table)
 *                  down(silu(gate h) * up h)            nomic-bert (SwiGLU)
 *              x = LN(h + f)
 *
 * The hidden states of every position come out; embed.c pools them. The
 * token types are all type 0, as llama.cpp hard-codes ("sentence A").
 * Weights stay in the model's context; the graph is allocated per call with
 * the model's allocator and thread pool.
 */
#include "model.h"
#include "meta.h"
#include "vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct enc_layer {
    struct kiln_tensor * wqkv, * bqkv, * wq, * wk, * wv, * bq, * bk, * bv, * wo, * bo;
    struct kiln_tensor * attn_out_norm, * attn_out_norm_b;
    struct kiln_tensor * ffn_up, * ffn_up_b, * ffn_gate, * ffn_down, * ffn_down_b;
    struct kiln_tensor * out_norm, * out_norm_b;
};

struct encoder {
    bool nomic;                       /* nomic-bert: RoPE and SwiGLU; bert: positions and GELU */
    int32_t pooling;                  /* {arch}.pooling_type, or -1 when the file has none */
    struct kiln_tensor * tok_embd, * type_embd, * pos_embd, * tok_norm, * tok_norm_b;
    struct enc_layer * layers;
};

/* traits for arch_load_hparams: no decoder trait applies */
static const struct arch_traits k_bert = { .name = "bert", .rope_type = 0 };
static const struct arch_traits k_nomic = { .name = "nomic-bert", .rope_type = KILN_ROPE_TYPE_NEOX };

bool encoder_is_arch(const char * arch) {
    return strcmp(arch, "bert") == 0 || strcmp(arch, "nomic-bert") == 0;
}

void encoder_free(struct encoder * e) {
    if (!e) return;
    free(e->layers);
    free(e);
}

int32_t encoder_pooling(const struct kiln_model * m) { return m->enc ? m->enc->pooling : -1; }

/* model_weight, and vectors (norms, biases) must be F32: they are read
 * element by element */
static struct kiln_tensor * weight(struct kiln_model * m, const char * name, int64_t ne0, int64_t ne1, bool required, bool * ok) {
    struct kiln_tensor * t = model_weight(m, name, ne0, ne1, required, ok);
    if (t && ne1 == 1 && t->type != KILN_TYPE_F32) {
        kiln_set_last_error("model: tensor '%s' is %s (vectors must be f32)", name, kiln_type_name(t->type));
        *ok = false;
        return NULL;
    }
    return t;
}

bool encoder_load(struct kiln_model * m, struct kiln_model_params params) {
    struct encoder * e = calloc(1, sizeof *e);
    if (!e) {
        kiln_set_last_error("model: out of memory");
        return false;
    }
    m->enc = e;
    e->nomic = strcmp(m->arch, "nomic-bert") == 0;
    m->tr = e->nomic ? &k_nomic : &k_bert;
    if (!arch_load_hparams(m)) return false;
    const struct kiln_gguf_context * g = m->gguf;
    char k[128];
    snprintf(k, sizeof k, "%s.attention.layer_norm_epsilon", m->arch);
    if (!meta_f32(g, k, &m->norm_eps)) {
        kiln_set_last_error("model: metadata %s missing", k);
        return false;
    }
    /* {arch}.attention.causal is not read: llama.cpp runs encoder graphs
     * bidirectional whatever it says (llama_context::encode) */
    uint32_t u;
    e->pooling = -1;
    snprintf(k, sizeof k, "%s.pooling_type", m->arch);
    if (meta_u32(g, k, &u)) {
        if (u > 3) {
            kiln_set_last_error("model: %s = %u (supported: 0 none, 1 mean, 2 cls, 3 last)", k, u);
            return false;
        }
        e->pooling = (int32_t) u;
    }
    uint32_t n_types = 0;
    meta_u32(g, "tokenizer.ggml.token_type_count", &n_types);
    if (n_types == 0) {
        kiln_set_last_error("model: %s needs tokenizer.ggml.token_type_count (token types)", m->arch);
        return false;
    }

    bool ok = true;
    const int64_t E = m->n_embd, F = m->n_ff, Hd = m->head_dim;
    const int64_t q_dim = Hd * m->n_head, kv_dim = Hd * m->n_head_kv;
    if (q_dim != E) {
        kiln_set_last_error("model: %d heads of %lld do not make the embedding %lld", m->n_head, (long long) Hd, (long long) E);
        return false;
    }
    if (!model_vocab_rows(m)) return false;
    e->tok_embd = weight(m, "token_embd.weight", E, m->n_vocab, true, &ok);
    e->type_embd = weight(m, "token_types.weight", E, n_types, false, &ok);
    if (e->type_embd && e->type_embd->type != KILN_TYPE_F32) {
        kiln_set_last_error("model: token_types.weight is %s (must be f32)", kiln_type_name(e->type_embd->type));
        return false;
    }
    if (!e->nomic) e->pos_embd = weight(m, "position_embd.weight", E, m->n_ctx_train, true, &ok);
    e->tok_norm = weight(m, "token_embd_norm.weight", E, 1, true, &ok);
    e->tok_norm_b = weight(m, "token_embd_norm.bias", E, 1, true, &ok);
    e->layers = calloc((size_t) m->n_layer, sizeof *e->layers);
    if (!e->layers) {
        kiln_set_last_error("model: out of memory");
        return false;
    }
    char name[96];
    for (int il = 0; il < m->n_layer && ok; il++) {
        struct enc_layer * L = &e->layers[il];
#define W(field, suffix, a, b, req) do { snprintf(name, sizeof name, "blk.%d." suffix, il); L->field = weight(m, name, a, b, req, &ok); } while (0)
        W(wqkv, "attn_qkv.weight", E, q_dim + 2 * kv_dim, false);
        if (L->wqkv) {
            W(bqkv, "attn_qkv.bias", q_dim + 2 * kv_dim, 1, false);
        } else {
            W(wq, "attn_q.weight", E, q_dim, true);
            W(wk, "attn_k.weight", E, kv_dim, true);
            W(wv, "attn_v.weight", E, kv_dim, true);
            W(bq, "attn_q.bias", q_dim, 1, false);
            W(bk, "attn_k.bias", kv_dim, 1, false);
            W(bv, "attn_v.bias", kv_dim, 1, false);
        }
        W(wo, "attn_output.weight", q_dim, E, true);
        W(bo, "attn_output.bias", E, 1, false);
        W(attn_out_norm, "attn_output_norm.weight", E, 1, true);
        W(attn_out_norm_b, "attn_output_norm.bias", E, 1, true);
        W(ffn_up, "ffn_up.weight", E, F, true);
        W(ffn_up_b, "ffn_up.bias", F, 1, false);
        if (e->nomic) W(ffn_gate, "ffn_gate.weight", E, F, true);
        W(ffn_down, "ffn_down.weight", F, E, true);
        W(ffn_down_b, "ffn_down.bias", E, 1, false);
        W(out_norm, "layer_output_norm.weight", E, 1, true);
        W(out_norm_b, "layer_output_norm.bias", E, 1, true);
#undef W
    }
    if (!ok) return false;
    if (!e->nomic) decoder_init_gelu_table();
    m->n_ctx = params.n_ctx > 0 ? params.n_ctx : m->n_ctx_train;
    if (!e->nomic && m->n_ctx > m->n_ctx_train) m->n_ctx = m->n_ctx_train; /* one position embedding per position */
    m->n_batch = m->n_ctx;
    m->n_threads = params.n_threads > 0 ? params.n_threads : KILN_DEFAULT_N_THREADS;
    m->threadpool = params.threadpool;
    m->galloc = kiln_gallocr_new();
    if (!m->galloc) {
        kiln_set_last_error("model: out of memory");
        return false;
    }
    return true;
}

static struct kiln_tensor * layer_norm(struct kiln_context * ctx, struct kiln_tensor * x, struct kiln_tensor * w,
                                       struct kiln_tensor * b, float eps) {
    return kiln_add(ctx, kiln_mul(ctx, kiln_norm(ctx, x, eps), w), b);
}

static struct kiln_tensor * linear(struct kiln_context * ctx, struct kiln_tensor * w, struct kiln_tensor * b, struct kiln_tensor * x) {
    struct kiln_tensor * y = kiln_mul_mat(ctx, w, x);
    return b ? kiln_add(ctx, y, b) : y;
}

struct enc_graph {
    struct kiln_context * ctx;
    struct kiln_cgraph * gf;
    struct kiln_tensor * tokens, * pos, * out;
};

#define CHK(x) do { if (!(x)) return false; } while (0)

static bool build(struct kiln_model * m, struct enc_graph * bg, int32_t n) {
    const struct encoder * e = m->enc;
    const int64_t E = m->n_embd, Hd = m->head_dim, nh = m->n_head, nkv = m->n_head_kv;
    const size_t n_tensors = (size_t) m->n_layer * 64 + 64;
    struct kiln_init_params ip = { n_tensors * kiln_tensor_overhead() + kiln_graph_overhead_custom(n_tensors, false), NULL, true };
    struct kiln_context * ctx = kiln_init(ip);
    CHK(ctx);
    bg->ctx = ctx;
    bg->gf = kiln_new_graph_custom(ctx, n_tensors, false);
    bg->tokens = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, n);
    bg->pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, n);
    CHK(bg->gf && bg->tokens && bg->pos);
    kiln_set_input(bg->tokens);
    kiln_set_input(bg->pos);

    struct kiln_tensor * x = kiln_get_rows(ctx, e->tok_embd, bg->tokens);
    CHK(x);
    if (e->type_embd) x = kiln_add(ctx, x, kiln_view_1d(ctx, e->type_embd, E, 0));
    if (e->pos_embd) x = kiln_add(ctx, kiln_get_rows(ctx, e->pos_embd, bg->pos), x);
    CHK(x);
    x = layer_norm(ctx, x, e->tok_norm, e->tok_norm_b, m->norm_eps);
    CHK(x);
    for (int il = 0; il < m->n_layer; il++) {
        const struct enc_layer * L = &e->layers[il];
        struct kiln_tensor * q, * k, * v;
        if (L->wqkv) {
            struct kiln_tensor * qkv = linear(ctx, L->wqkv, L->bqkv, x);
            CHK(qkv);
            const size_t f = sizeof(float);
            q = kiln_cont(ctx, kiln_view_3d(ctx, qkv, Hd, nh, n, Hd * f, qkv->nb[1], 0));
            k = kiln_cont(ctx, kiln_view_3d(ctx, qkv, Hd, nkv, n, Hd * f, qkv->nb[1], f * (size_t) E));
            v = kiln_cont(ctx, kiln_view_3d(ctx, qkv, Hd, nkv, n, Hd * f, qkv->nb[1], f * (size_t) (E + Hd * nkv)));
        } else {
            q = kiln_reshape_3d(ctx, linear(ctx, L->wq, L->bq, x), Hd, nh, n);
            k = kiln_reshape_3d(ctx, linear(ctx, L->wk, L->bk, x), Hd, nkv, n);
            v = kiln_reshape_3d(ctx, linear(ctx, L->wv, L->bv, x), Hd, nkv, n);
        }
        CHK(q && k && v);
        if (e->nomic) {
            q = kiln_rope_ext(ctx, q, bg->pos, NULL, m->n_rot, m->rope_type, m->n_ctx_orig, m->freq_base, m->freq_scale,
                              m->ext_factor, m->attn_factor, m->beta_fast, m->beta_slow);
            k = kiln_rope_ext(ctx, k, bg->pos, NULL, m->n_rot, m->rope_type, m->n_ctx_orig, m->freq_base, m->freq_scale,
                              m->ext_factor, m->attn_factor, m->beta_fast, m->beta_slow);
            CHK(q && k);
        }
        /* as llama.cpp without flash attention, in F32: kq = K^T Q per head,
         * softmax(kq * scale), then V kq (with flash attention on, llama.cpp
         * would cast K and V to F16 when there is no cache) */
        struct kiln_tensor * kq = kiln_mul_mat(ctx, kiln_permute(ctx, k, 0, 2, 1, 3), kiln_permute(ctx, q, 0, 2, 1, 3));
        CHK(kq);
        kq = kiln_soft_max_ext(ctx, kq, NULL, 1.0f / sqrtf((float) Hd), 0.0f);
        struct kiln_tensor * vt = kiln_cont(ctx, kiln_transpose(ctx, kiln_permute(ctx, v, 0, 2, 1, 3)));
        CHK(kq && vt);
        struct kiln_tensor * kqv = kiln_mul_mat(ctx, vt, kq); /* [Hd, n, nh] */
        CHK(kqv);
        struct kiln_tensor * att = kiln_cont(ctx, kiln_permute(ctx, kqv, 0, 2, 1, 3));
        CHK(att);
        att = kiln_reshape_2d(ctx, att, Hd * nh, n);
        struct kiln_tensor * cur = linear(ctx, L->wo, L->bo, att);
        CHK(cur);
        cur = layer_norm(ctx, kiln_add(ctx, cur, x), L->attn_out_norm, L->attn_out_norm_b, m->norm_eps);
        CHK(cur);
        struct kiln_tensor * ffn_in = cur;
        if (e->nomic) {
            struct kiln_tensor * up = linear(ctx, L->ffn_up, L->ffn_up_b, cur);
            struct kiln_tensor * gate = kiln_mul_mat(ctx, L->ffn_gate, cur);
            CHK(up && gate);
            cur = kiln_mul(ctx, kiln_silu(ctx, gate), up);
        } else {
            cur = linear(ctx, L->ffn_up, L->ffn_up_b, cur);
            CHK(cur);
            cur = kiln_map_custom1(ctx, cur, decoder_gelu_rows, KILN_N_TASKS_MAX, NULL);
        }
        CHK(cur);
        cur = linear(ctx, L->ffn_down, L->ffn_down_b, cur);
        CHK(cur);
        x = layer_norm(ctx, kiln_add(ctx, cur, ffn_in), L->out_norm, L->out_norm_b, m->norm_eps);
        CHK(x);
    }
    bg->out = x;
    kiln_set_output(x);
    return kiln_build_forward_expand(bg->gf, x) == KILN_STATUS_SUCCESS;
}

enum kiln_status encoder_eval(struct kiln_model * m, const kiln_token * tokens, int32_t n, float * out) {
    struct enc_graph bg = { 0 };
    if (!build(m, &bg, n)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model: building the encoder graph failed: %s", kiln_last_error());
        kiln_free(bg.ctx);
        kiln_set_last_error("%s", msg);
        return KILN_STATUS_FAILED;
    }
    if (!kiln_gallocr_alloc_graph(m->galloc, bg.gf)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model: allocating the encoder graph for %d tokens failed: %s", n, kiln_last_error());
        kiln_free(bg.ctx);
        kiln_set_last_error("%s", msg);
        return KILN_STATUS_ALLOC_FAILED;
    }
    for (int32_t i = 0; i < n; i++) {
        ((int32_t *) bg.tokens->data)[i] = tokens[i];
        ((int32_t *) bg.pos->data)[i] = i;
    }
    const enum kiln_status st = model_compute(m, bg.gf);
    if (st == KILN_STATUS_SUCCESS) {
        for (int32_t i = 0; i < n; i++) {
            memcpy(out + (size_t) i * m->n_embd, (const char *) bg.out->data + (size_t) i * bg.out->nb[1], sizeof(float) * (size_t) m->n_embd);
        }
    }
    kiln_free(bg.ctx);
    return st;
}
