/*
 * llama.c — loading a decoder model (every architecture in arch.c's table:
 * llama, mistral, qwen2/3, gemma 1/2/3, granite, smollm3, olmo2, phi2/3, qwen2/3 MoE), built on
 * the public kiln.h API like any user program: weights come from the GGUF
 * reader into a context, the KV cache (F16 by default) is allocated here, and
 * decoder.c builds and runs the graph of each batch.
 */
#include "model.h"
#include "meta.h"
#include "vocab.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_model_params kiln_model_params_default(void) {
    struct kiln_model_params p = {
        .n_ctx = 0,
        .kv_type = KILN_TYPE_F16,
        .n_batch = KILN_DEFAULT_N_BATCH,
        .n_threads = 0,
        .vocab_only = false,
        .no_copy = false,
        .repack_in_place = false,
        .threadpool = NULL,
    };
    return p;
}

static bool fail_model(struct kiln_model * m, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail_model(struct kiln_model * m, const char * fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_model_free(m);
    kiln_set_last_error("%s", msg);
    return false;
}

struct kiln_tensor * model_weight(struct kiln_model * m, const char * name, int64_t ne0, int64_t ne1, bool required, bool * ok) {
    struct kiln_tensor * t = kiln_get_tensor(m->wctx, name);
    if (!t) {
        if (required) {
            kiln_set_last_error("model: tensor '%s' missing", name);
            *ok = false;
        }
        return NULL;
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
        kiln_set_last_error("model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]", name,
                            (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3],
                            (long long) ne0, (long long) ne1);
        *ok = false;
        return NULL;
    }
    return t;
}
#define weight model_weight

/* m->n_vocab from the rows of token_embd.weight, which must equal the
 * vocabulary's size; false + error otherwise */
bool model_vocab_rows(struct kiln_model * m) {
    struct kiln_tensor * te = kiln_get_tensor(m->wctx, "token_embd.weight");
    if (!te) {
        kiln_set_last_error("model: tensor 'token_embd.weight' missing");
        return false;
    }
    m->n_vocab = (int32_t) te->ne[1];
    if (m->n_vocab != m->vocab->n_tokens) {
        kiln_set_last_error("model: token_embd has %d rows but the vocabulary has %d tokens", m->n_vocab, m->vocab->n_tokens);
        return false;
    }
    return true;
}

/* an expert tensor [ne0, ne1, n_expert] */
static struct kiln_tensor * weight3(struct kiln_model * m, const char * name, int64_t ne0, int64_t ne1, int64_t ne2, bool * ok) {
    struct kiln_tensor * t = kiln_get_tensor(m->wctx, name);
    if (!t || t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != ne2 || t->ne[3] != 1) {
        if (t) kiln_set_last_error("model: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld]", name,
                                   (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3],
                                   (long long) ne0, (long long) ne1, (long long) ne2);
        else kiln_set_last_error("model: tensor '%s' missing", name);
        *ok = false;
        return NULL;
    }
    return t;
}

static bool load_weights(struct kiln_model * m) {
    bool ok = true;
    const int64_t E = m->n_embd, Hd = m->head_dim;
    const int64_t q_dim = Hd * m->n_head, kv_dim = Hd * m->n_head_kv;
    if (!model_vocab_rows(m)) return false;
    m->tok_embd = weight(m, "token_embd.weight", E, m->n_vocab, true, &ok);
    m->output_norm = weight(m, "output_norm.weight", E, 1, true, &ok);
    /* phi2: LayerNorm bias, and an untied output with a bias (llama.cpp requires all three) */
    const bool ln = m->tr->norm == NORM_PARALLEL;
    if (ln) m->output_norm_b = weight(m, "output_norm.bias", E, 1, true, &ok);
    m->output = weight(m, "output.weight", E, m->n_vocab, ln, &ok);
    if (ln) m->output_b = weight(m, "output.bias", m->n_vocab, 1, true, &ok);
    if (!m->output) {
        m->output = m->tok_embd; /* tied */
    }
    m->rope_freqs = weight(m, "rope_freqs.weight", m->n_rot / 2, 1, false, &ok);
    if (!m->rope_freqs) {
        m->rope_long = weight(m, "rope_factors_long.weight", m->n_rot / 2, 1, false, &ok);
        m->rope_short = weight(m, "rope_factors_short.weight", m->n_rot / 2, 1, false, &ok);
    }
    m->layers = calloc((size_t) m->n_layer, sizeof(struct layer));
    if (!m->layers) {
        kiln_set_last_error("model: out of memory");
        return false;
    }
    char name[96];
    for (int il = 0; il < m->n_layer && ok; il++) {
        struct layer * L = &m->layers[il];
#define W(field, suffix, a, b, req) do { snprintf(name, sizeof name, "blk.%d." suffix, il); L->field = weight(m, name, a, b, req, &ok); } while (0)
        const struct arch_traits * tr = m->tr;
        const bool pre = tr->norm != NORM_POST, post = tr->norm == NORM_SANDWICH || tr->norm == NORM_POST;
        W(attn_norm, "attn_norm.weight", E, 1, pre);
        W(wqkv, "attn_qkv.weight", E, q_dim + 2 * kv_dim, false);
        if (ln) {
            W(attn_norm_b, "attn_norm.bias", E, 1, true);
            W(bqkv, "attn_qkv.bias", q_dim + 2 * kv_dim, 1, false);
            W(ffn_up_b, "ffn_up.bias", m->n_ff, 1, false);
            W(ffn_down_b, "ffn_down.bias", E, 1, false);
        }
        W(wq, "attn_q.weight", E, q_dim, !L->wqkv);
        W(wk, "attn_k.weight", E, kv_dim, !L->wqkv);
        W(wv, "attn_v.weight", E, kv_dim, !L->wqkv);
        W(wo, "attn_output.weight", q_dim, E, true);
        W(bq, "attn_q.bias", q_dim, 1, false);
        W(bk, "attn_k.bias", kv_dim, 1, false);
        W(bv, "attn_v.bias", kv_dim, 1, false);
        W(bo, "attn_output.bias", E, 1, false);
        if (tr->qk_norm != QK_NORM_NONE) {
            const bool head = tr->qk_norm == QK_NORM_HEAD;
            W(q_norm, "attn_q_norm.weight", head ? Hd : q_dim, 1, true);
            W(k_norm, "attn_k_norm.weight", head ? Hd : kv_dim, 1, true);
        }
        if (post) {
            W(attn_post_norm, "post_attention_norm.weight", E, 1, true);
            W(ffn_post_norm, "post_ffw_norm.weight", E, 1, true);
        }
        W(ffn_norm, "ffn_norm.weight", E, 1, pre && !ln); /* phi2: the attention's norm feeds the FFN too */
        if (tr->moe != MOE_NONE) {
            const int64_t F = m->n_ff_exp, X = m->n_expert;
            W(gate_inp, "ffn_gate_inp.weight", E, X, true);
#define W3(field, suffix, a, b) do { snprintf(name, sizeof name, "blk.%d." suffix, il); L->field = weight3(m, name, a, b, X, &ok); } while (0)
            W3(gate_exps, "ffn_gate_exps.weight", E, F);
            W3(up_exps, "ffn_up_exps.weight", E, F);
            W3(down_exps, "ffn_down_exps.weight", F, E);
#undef W3
            if (tr->moe == MOE_SHARED) {
                W(gate_inp_shexp, "ffn_gate_inp_shexp.weight", E, 1, true);
                W(gate_shexp, "ffn_gate_shexp.weight", E, m->n_ff_shexp, true);
                W(up_shexp, "ffn_up_shexp.weight", E, m->n_ff_shexp, true);
                W(down_shexp, "ffn_down_shexp.weight", m->n_ff_shexp, E, true);
            }
        } else {
            /* separate gate and up, or one fused [gate; up] (phi3), or up only (phi2) */
            const bool gated = tr->ffn != FFN_GELU;
            if (gated) W(ffn_gate, "ffn_gate.weight", E, m->n_ff, false);
            W(ffn_up, "ffn_up.weight", E, L->ffn_gate || !gated ? m->n_ff : 2 * m->n_ff, true);
            W(ffn_down, "ffn_down.weight", m->n_ff, E, true);
        }
#undef W
        L->swa = tr->swa_pattern > 0 && m->n_swa > 0 && il % tr->swa_pattern < tr->swa_pattern - 1;
        L->rope = tr->no_rope_step <= 0 || (il + 1) % tr->no_rope_step != 0;
        L->freq_base = L->swa ? m->freq_base_swa : m->freq_base;
        L->freq_scale = L->swa && tr->rope_base_swa > 0.0f ? 1.0f : m->freq_scale; /* gemma3: local layers unscaled */
    }
    return ok;
}

static bool alloc_cache(struct kiln_model * m) {
    const int64_t kv_dim = (int64_t) m->head_dim * m->n_head_kv;
    kiln_free(m->kv_ctx);
    free(m->k_cache);
    free(m->v_cache);
    m->kv_ctx = NULL;
    m->k_cache = m->v_cache = NULL;
    m->n_past = 0;
    const int64_t cells = kiln_kv_cells(m->n_ctx);
    size_t bytes = 2 * (size_t) m->n_layer * kiln_row_size(m->kv_type, kv_dim) * (size_t) cells;
    struct kiln_init_params ip = { bytes + 2 * (size_t) m->n_layer * kiln_tensor_overhead() + 1024, NULL, false };
    m->kv_ctx = kiln_init(ip);
    m->k_cache = calloc((size_t) m->n_layer, sizeof(struct kiln_tensor *));
    m->v_cache = calloc((size_t) m->n_layer, sizeof(struct kiln_tensor *));
    if (!m->logits) m->logits = calloc((size_t) m->n_vocab, sizeof(float));
    if (!m->galloc) m->galloc = kiln_gallocr_new();
    if (!m->kv_ctx || !m->k_cache || !m->v_cache || !m->logits || !m->galloc) {
        kiln_set_last_error("model: cannot allocate a KV cache of %zu bytes for %d positions", bytes, m->n_ctx);
        return false;
    }
    for (int il = 0; il < m->n_layer; il++) {
        m->k_cache[il] = kiln_new_tensor_2d(m->kv_ctx, m->kv_type, kv_dim, cells);
        m->v_cache[il] = kiln_new_tensor_2d(m->kv_ctx, m->kv_type, kv_dim, cells);
        if (!m->k_cache[il] || !m->v_cache[il]) {
            return false;
        }
        /* unused cells are attended to (masked) and enter flash attention's
         * prompt tiles as weight 0: zero, never NaN */
        memset(m->k_cache[il]->data, 0, kiln_nbytes(m->k_cache[il]));
        memset(m->v_cache[il]->data, 0, kiln_nbytes(m->v_cache[il]));
        kiln_format_name(m->k_cache[il], "cache_k_l%d", il);
        kiln_format_name(m->v_cache[il], "cache_v_l%d", il);
    }
    return true;
}

/* matmul weights to the interleaved mat-vec layout (faster generation;
 * kiln_repack_tensor, src/cpu/repack.h) where llama.cpp's CPU build on this
 * CPU repacks them too (kiln_repack_wanted: by type and row count), whose
 * repacked kernels sum in another order than its plain ones; that keeps
 * greedy output equal to its. Q4_K's 3-D expert tensors likewise. Never the
 * token embedding (get_rows reads it, also when the output is tied to it).
 * KILN_NO_REPACK=1 keeps the file layout (for A/B benchmarks). */
static void repack_one(struct kiln_tensor * w) {
    if (kiln_repack_wanted(w)) kiln_repack_tensor(w);
}

static void repack_weights(struct kiln_model * m) {
    const char * off = getenv("KILN_NO_REPACK");
    if (off && off[0] && strcmp(off, "0") != 0) return;
    for (int il = 0; il < m->n_layer; il++) {
        struct layer * L = &m->layers[il];
        struct kiln_tensor * ws[] = { L->wq, L->wk, L->wv, L->wo, L->ffn_gate, L->ffn_up, L->ffn_down, L->wqkv,
                                      L->gate_shexp, L->up_shexp, L->down_shexp };
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) repack_one(ws[i]);
        /* experts: Q4_K only (mul_mat_id reads the x8 layout and sums it as
         * llama.cpp's repacked mul_mat_id does; other types stay plain) */
        struct kiln_tensor * exps[] = { L->gate_exps, L->up_exps, L->down_exps };
        for (size_t i = 0; i < sizeof exps / sizeof exps[0]; i++) {
            if (exps[i] && exps[i]->type == KILN_TYPE_Q4_K) repack_one(exps[i]);
        }
    }
    if (m->output != m->tok_embd) repack_one(m->output);
}

static struct kiln_model * load(struct kiln_gguf_context * g, struct kiln_context * wctx, struct kiln_model_params params,
                                bool may_repack, bool borrowed) {
    if (!g) {
        return NULL; /* the reader set the error */
    }
    struct kiln_model * m = calloc(1, sizeof(*m));
    if (!m) {
        if (!borrowed) {
            kiln_gguf_free(g);
            kiln_free(wctx);
        }
        kiln_set_last_error("model: out of memory");
        return NULL;
    }
    m->gguf = g;
    m->wctx = wctx;
    m->borrowed = borrowed;
    if (!meta_str(g, "general.architecture", m->arch, sizeof m->arch)) {
        fail_model(m, "model: general.architecture missing");
        return NULL;
    }
    m->vocab = vocab_from_gguf(g);
    if (!m->vocab) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kiln_last_error());
        fail_model(m, "%s", msg);
        return NULL;
    }
    if (params.vocab_only) {
        return m;
    }
    if (encoder_is_arch(m->arch)) { /* bert, nomic-bert: embeddings only (bert.c) */
        if (!encoder_load(m, params)) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", kiln_last_error());
            fail_model(m, "%s", msg);
            return NULL;
        }
        return m;
    }
    m->tr = arch_find(m->arch);
    if (!m->tr) {
        fail_model(m, "model: unsupported general.architecture '%s' (supported: %s, bert, nomic-bert)", m->arch, arch_supported_list());
        return NULL;
    }
    if (!arch_load_hparams(m) || !load_weights(m)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kiln_last_error());
        fail_model(m, "%s", msg);
        return NULL;
    }
    if (m->tr->ffn == FFN_GELU_GATED || m->tr->ffn == FFN_GELU) decoder_init_gelu_table();
    if (may_repack) repack_weights(m);
    m->n_ctx = params.n_ctx > 0 ? params.n_ctx : m->n_ctx_train;
    m->n_batch = params.n_batch > 0 ? params.n_batch : KILN_DEFAULT_N_BATCH;
    m->n_threads = params.n_threads > 0 ? params.n_threads : KILN_DEFAULT_N_THREADS;
    m->threadpool = params.threadpool;
    arch_pick_rope_factors(m);
    m->kv_type = params.kv_type == KILN_TYPE_F32 ? KILN_TYPE_F32 : KILN_TYPE_F16;
    if (params.kv_type != KILN_TYPE_F32 && params.kv_type != KILN_TYPE_F16) {
        fail_model(m, "model: KV cache type must be f16 or f32, got %s", kiln_type_name(params.kv_type));
        return NULL;
    }
    if (!alloc_cache(m)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kiln_last_error());
        fail_model(m, "%s", msg);
        return NULL;
    }
    return m;
}

struct kiln_model * kiln_model_load(const char * path, struct kiln_model_params params) {
    if (!path) {
        kiln_set_last_error("model: NULL path");
        return NULL;
    }
    struct kiln_context * wctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = params.vocab_only ? NULL : &wctx, .no_copy = true };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, gp);
    return load(g, wctx, params, true, false);
}

struct kiln_model * kiln_model_load_from_buffer(const void * data, size_t size, struct kiln_model_params params) {
    if (!data) {
        kiln_set_last_error("model: NULL buffer");
        return NULL;
    }
    struct kiln_context * wctx = NULL;
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = params.vocab_only ? NULL : &wctx, .no_copy = params.no_copy };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(data, size, gp);
    /* no_copy: the weights are the caller's bytes, rewritten only when allowed */
    return load(g, wctx, params, !params.no_copy || params.repack_in_place, false);
}

struct kiln_model * kiln_model_load_from_gguf(struct kiln_gguf_context * gguf, struct kiln_context * weights,
                                              struct kiln_model_params params) {
    if (!gguf || (!weights && !params.vocab_only)) {
        kiln_set_last_error("model: %s", gguf ? "no weights context (parse with no_alloc = false)" : "NULL GGUF context");
        return NULL;
    }
    return load(gguf, params.vocab_only ? NULL : weights, params, params.repack_in_place, true);
}

void kiln_model_free(struct kiln_model * m) {
    if (!m) {
        return;
    }
    lora_model_free(m);
    kiln_vocab_free(m->vocab);
    encoder_free(m->enc);
    kiln_free(m->kv_ctx);
    if (!m->borrowed) {
        kiln_free(m->wctx);
        kiln_gguf_free(m->gguf);
    }
    kiln_gallocr_free(m->galloc);
    free(m->k_cache);
    free(m->v_cache);
    free(m->layers);
    free(m->logits);
    free(m->work);
    free(m);
}

const struct kiln_vocab * kiln_model_vocab(const struct kiln_model * m) { return m ? m->vocab : NULL; }
const struct kiln_gguf_context * kiln_model_gguf(const struct kiln_model * m) { return m ? m->gguf : NULL; }
struct kiln_tensor * kiln_model_get_tensor(const struct kiln_model * m, const char * name) {
    return m && m->wctx && name ? kiln_get_tensor(m->wctx, name) : NULL;
}
int32_t kiln_model_n_ctx(const struct kiln_model * m) { return m ? m->n_ctx : 0; }
int32_t kiln_model_n_vocab(const struct kiln_model * m) { return m ? m->vocab->n_tokens : 0; }
int32_t kiln_model_n_past(const struct kiln_model * m) { return m ? m->n_past : 0; }
const float * kiln_model_logits(const struct kiln_model * m) { return m ? m->logits : NULL; }
void kiln_model_reset(struct kiln_model * m) { if (m) m->n_past = 0; }
void kiln_model_set_abort_flag(struct kiln_model * m, volatile int * flag) { if (m) m->abort_flag = flag; }

enum kiln_status kiln_model_set_n_ctx(struct kiln_model * m, int32_t n_ctx) {
    if (!m || !m->layers || n_ctx <= 0) {
        kiln_set_last_error("kiln_model_set_n_ctx: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    int32_t old = m->n_ctx;
    m->n_ctx = n_ctx;
    if (!alloc_cache(m)) {
        m->n_ctx = old;
        return alloc_cache(m) ? KILN_STATUS_ALLOC_FAILED : KILN_STATUS_FAILED;
    }
    arch_pick_rope_factors(m);
    return KILN_STATUS_SUCCESS;
}

int32_t kiln_model_n_embd(const struct kiln_model * m) { return m ? m->n_embd : 0; }
int32_t kiln_model_n_ctx_train(const struct kiln_model * m) { return m ? m->n_ctx_train : 0; }

void kiln_model_truncate(struct kiln_model * m, int32_t n_past) {
    if (m && n_past >= 0 && n_past < m->n_past) {
        m->n_past = n_past;
    }
}

int32_t kiln_model_meta_val_str(const struct kiln_model * m, const char * key, char * buf, size_t buf_size) {
    if (!m || !key) {
        return -1;
    }
    const struct kiln_gguf_context * g = m->gguf;
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0) {
        return -1;
    }
    char tmp[64];
    const char * s = tmp;
    switch (kiln_gguf_get_kv_type(g, id)) {
        case KILN_GGUF_TYPE_STRING: s = kiln_gguf_get_val_str(g, id); break;
        case KILN_GGUF_TYPE_FLOAT32: case KILN_GGUF_TYPE_FLOAT64: {
            float f = 0;
            meta_f32(g, key, &f);
            snprintf(tmp, sizeof tmp, "%g", (double) f);
            break;
        }
        case KILN_GGUF_TYPE_BOOL: snprintf(tmp, sizeof tmp, "%s", kiln_gguf_get_val_bool(g, id) ? "true" : "false"); break;
        case KILN_GGUF_TYPE_ARRAY:
            snprintf(tmp, sizeof tmp, "[%s; %zu]", kiln_gguf_type_name(kiln_gguf_get_arr_type(g, id)), kiln_gguf_get_arr_n(g, id));
            break;
        case KILN_GGUF_TYPE_INT8: case KILN_GGUF_TYPE_INT16: case KILN_GGUF_TYPE_INT32: case KILN_GGUF_TYPE_INT64: {
            uint32_t u = 0;
            meta_u32(g, key, &u);
            snprintf(tmp, sizeof tmp, "%d", (int32_t) u);
            break;
        }
        default: {
            if (kiln_gguf_get_kv_type(g, id) == KILN_GGUF_TYPE_UINT64) {
                snprintf(tmp, sizeof tmp, "%llu", (unsigned long long) kiln_gguf_get_val_u64(g, id));
            } else {
                uint32_t u = 0;
                meta_u32(g, key, &u);
                snprintf(tmp, sizeof tmp, "%u", u);
            }
            break;
        }
    }
    if (!s) {
        return -1;
    }
    size_t n = strlen(s);
    if (buf && buf_size > 0) {
        size_t c = n < buf_size - 1 ? n : buf_size - 1;
        memcpy(buf, s, c);
        buf[c] = 0;
    }
    return (int32_t) n;
}

/* Context shift: the cache positions [n_keep + n_discard, n_past) move down
 * by n_discard and their keys turn by -n_discard positions of RoPE (a
 * rotation by a and then by b is the rotation by a + b, the angles being
 * linear in the position), so they read as if evaluated where they now are;
 * values carry no position. The rotation runs on an F32 copy of the keys,
 * written back in the cache's type. */
enum kiln_status kiln_model_shift(struct kiln_model * m, int32_t n_keep, int32_t n_discard) {
    if (!m || !m->layers || n_keep < 0 || n_discard <= 0 || (int64_t) n_keep + n_discard > m->n_past) {
        kiln_set_last_error("kiln_model_shift: keep %d and discard %d of %d cached positions", n_keep, n_discard, m ? m->n_past : 0);
        return KILN_STATUS_INVALID_ARG;
    }
    const int64_t Hd = m->head_dim, nkv = m->n_head_kv, kv_dim = Hd * nkv;
    const int32_t n_move = m->n_past - n_keep - n_discard;
    const size_t row = kiln_row_size(m->kv_type, kv_dim);
    for (int il = 0; il < m->n_layer; il++) {
        char * k = m->k_cache[il]->data, * v = m->v_cache[il]->data;
        memmove(k + (size_t) n_keep * row, k + (size_t) (n_keep + n_discard) * row, (size_t) n_move * row);
        memmove(v + (size_t) n_keep * row, v + (size_t) (n_keep + n_discard) * row, (size_t) n_move * row);
    }
    m->n_past = n_keep + n_move;
    if (n_move == 0) return KILN_STATUS_SUCCESS;
    const size_t n_tensors = (size_t) m->n_layer * 8 + 16;
    struct kiln_init_params ip = { n_tensors * kiln_tensor_overhead() + kiln_graph_overhead_custom(n_tensors, false), NULL, true };
    struct kiln_context * ctx = kiln_init(ip);
    struct kiln_cgraph * gf = ctx ? kiln_new_graph_custom(ctx, n_tensors, false) : NULL;
    struct kiln_tensor * pos = gf ? kiln_new_tensor_1d(ctx, KILN_TYPE_I32, n_move) : NULL;
    bool ok = pos != NULL;
    if (ok) kiln_set_input(pos);
    for (int il = 0; ok && il < m->n_layer; il++) {
        const struct layer * L = &m->layers[il];
        if (!L->rope) continue; /* a layer without RoPE keeps its keys as they are */
        struct kiln_tensor * kc = kiln_view_3d(ctx, m->k_cache[il], Hd, nkv, n_move, kiln_row_size(m->kv_type, Hd), row, (size_t) n_keep * row);
        struct kiln_tensor * kf = kc ? kiln_cpy(ctx, kc, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, Hd, nkv, n_move)) : NULL;
        /* the layer's own base and scale (sliding-window layers may have their own) */
        struct kiln_tensor * kr = kf ? kiln_rope_ext(ctx, kf, pos, m->rope_freqs, m->n_rot, m->rope_type, m->n_ctx_orig, L->freq_base,
                                                     L->freq_scale, m->ext_factor, 1.0f, m->beta_fast, m->beta_slow) : NULL;
        struct kiln_tensor * back = kr ? kiln_cpy(ctx, kr, kc) : NULL;
        ok = back && kiln_build_forward_expand(gf, back) == KILN_STATUS_SUCCESS;
    }
    enum kiln_status st = KILN_STATUS_ALLOC_FAILED;
    if (ok && kiln_gallocr_alloc_graph(m->galloc, gf)) {
        for (int32_t i = 0; i < n_move; i++) ((int32_t *) pos->data)[i] = -n_discard;
        struct kiln_cplan plan = kiln_graph_plan(gf, m->n_threads, m->threadpool);
        if (plan.work_size > m->work_size) {
            uint8_t * w = realloc(m->work, plan.work_size);
            if (w) { m->work = w; m->work_size = plan.work_size; }
        }
        if (plan.work_size <= m->work_size) {
            plan.work_data = m->work;
            st = kiln_graph_compute(gf, &plan);
        }
    }
    kiln_free(ctx);
    if (st != KILN_STATUS_SUCCESS) {
        /* the keys are half turned: nothing cached can be trusted */
        m->n_past = 0;
        kiln_set_last_error("kiln_model_shift: the key rotation failed (status %d); the cache is emptied", (int) st);
    }
    return st;
}

enum kiln_status kiln_model_eval(struct kiln_model * m, const kiln_token * tokens, int32_t n_tokens) {
    if (!m || !tokens || n_tokens <= 0) {
        kiln_set_last_error("kiln_model_eval: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    if (!m->layers) {
        kiln_set_last_error(m->enc ? "kiln_model_eval: %s is an encoder (embeddings only: kiln_model_embed)"
                                   : "kiln_model_eval: model was loaded vocab-only", m->arch);
        return KILN_STATUS_INVALID_ARG;
    }
    if ((int64_t) m->n_past + n_tokens > m->n_ctx) {
        kiln_set_last_error("kiln_model_eval: %d tokens after %d in the cache exceed the context length %d",
                            n_tokens, m->n_past, m->n_ctx);
        return KILN_STATUS_INVALID_ARG;
    }
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab) {
            kiln_set_last_error("kiln_model_eval: token %d at index %d out of range (vocab %d)", tokens[i], i, m->n_vocab);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    for (int32_t i = 0; i < n_tokens; i += m->n_batch) {
        int32_t nb = n_tokens - i < m->n_batch ? n_tokens - i : m->n_batch;
        enum kiln_status st = decoder_eval_batch(m, tokens + i, nb);
        if (st != KILN_STATUS_SUCCESS) {
            return st;
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ KV cache state */

uint64_t model_fnv(uint64_t h, const void * p, size_t n) {
    const uint8_t * b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* the architecture, the shapes and the bytes of the norm weights (F32 and
 * never repacked, so one file loaded either way gives one fingerprint), and
 * the LoRA adapters applied (their scales and bytes) */
uint64_t kiln_model_fingerprint(const struct kiln_model * m) {
    if (!m || !m->layers) return 0;
    uint64_t h = model_fnv(14695981039346656037ull, m->arch, strlen(m->arch));
    const int32_t dims[] = { m->n_vocab, m->n_embd, m->n_layer, m->n_head, m->n_head_kv, m->n_ff, m->head_dim, m->n_rot };
    h = model_fnv(h, dims, sizeof dims);
    if (m->output_norm) h = model_fnv(h, m->output_norm->data, kiln_nbytes(m->output_norm));
    for (int il = 0; il < m->n_layer; il++) {
        if (m->layers[il].attn_norm) h = model_fnv(h, m->layers[il].attn_norm->data, kiln_nbytes(m->layers[il].attn_norm));
        if (m->layers[il].ffn_norm) h = model_fnv(h, m->layers[il].ffn_norm->data, kiln_nbytes(m->layers[il].ffn_norm));
    }
    return lora_fingerprint(m, h);
}

enum kiln_type kiln_model_kv_type(const struct kiln_model * m) { return m ? m->kv_type : KILN_TYPE_F16; }

size_t kiln_model_kv_bytes(const struct kiln_model * m, int32_t n_pos) {
    if (!m || !m->layers || n_pos < 0) return 0;
    return 2 * (size_t) m->n_layer * kiln_row_size(m->kv_type, (int64_t) m->head_dim * m->n_head_kv) * (size_t) n_pos;
}

/* the first n_past positions of every layer's K, then its V */
void kiln_model_kv_read(const struct kiln_model * m, void * dst) {
    const size_t n = kiln_model_kv_bytes(m, m ? m->n_past : 0) / (2 * (size_t) (m && m->n_layer ? m->n_layer : 1));
    uint8_t * o = dst;
    for (int il = 0; m && m->layers && il < m->n_layer; il++) {
        memcpy(o, m->k_cache[il]->data, n); o += n;
        memcpy(o, m->v_cache[il]->data, n); o += n;
    }
}

enum kiln_status kiln_model_kv_write(struct kiln_model * m, const void * src, int32_t n_past) {
    if (!m || !m->layers || n_past < 0 || n_past > m->n_ctx) {
        kiln_set_last_error("state: %d positions do not fit the context of %d", n_past, m ? m->n_ctx : 0);
        return KILN_STATUS_INVALID_ARG;
    }
    const size_t n = kiln_model_kv_bytes(m, n_past) / (2 * (size_t) m->n_layer);
    const uint8_t * s = src;
    for (int il = 0; il < m->n_layer; il++) {
        memcpy(m->k_cache[il]->data, s, n); s += n;
        memcpy(m->v_cache[il]->data, s, n); s += n;
    }
    m->n_past = n_past;
    return KILN_STATUS_SUCCESS;
}
