/*
 * arch.c — the per-architecture traits table and the hyperparameters every
 * decoder reads from its GGUF file. Keys and defaults follow llama.cpp's
 * loader: "<arch>.<key>", optional keys fall back to its defaults.
 */
#include "model.h"
#include "meta.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/*                 name        rope                 norm           qk norm        ffn             sqrtE  qpre  swa  swa_def rope_swa  attn cap final cap granite no_rope moe */
static const struct arch_traits k_traits[] = {
    { "llama",   0,                   NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "mistral", 0,                   NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "qwen2",   KILN_ROPE_TYPE_NEOX, NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "qwen3",   KILN_ROPE_TYPE_NEOX, NORM_PRE,      QK_NORM_HEAD, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "gemma",   KILN_ROPE_TYPE_NEOX, NORM_PRE,      QK_NORM_NONE, FFN_GELU_GATED, true,  true,  0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "gemma2",  KILN_ROPE_TYPE_NEOX, NORM_SANDWICH, QK_NORM_NONE, FFN_GELU_GATED, true,  true,  2, 4096, 0.0f,     50.0f, 30.0f, false, 0, MOE_NONE },
    { "gemma3",  KILN_ROPE_TYPE_NEOX, NORM_SANDWICH, QK_NORM_HEAD, FFN_GELU_GATED, true,  true,  6, 0,    10000.0f, 0.0f,  0.0f,  false, 0, MOE_NONE },
    { "granite", 0,                   NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  true,  0, MOE_NONE },
    { "smollm3", 0,                   NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 4, MOE_NONE },
    { "phi3",    KILN_ROPE_TYPE_NEOX, NORM_PRE,      QK_NORM_NONE, FFN_SILU_GATED, false, true,  0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "qwen2moe", KILN_ROPE_TYPE_NEOX, NORM_PRE,     QK_NORM_NONE, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_SHARED },
    { "qwen3moe", KILN_ROPE_TYPE_NEOX, NORM_PRE,     QK_NORM_HEAD, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NORM_TOPK },
    { "phi2",    KILN_ROPE_TYPE_NEOX, NORM_PARALLEL, QK_NORM_NONE, FFN_GELU,       false, true,  0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
    { "olmo2",   KILN_ROPE_TYPE_NEOX, NORM_POST,     QK_NORM_FULL, FFN_SILU_GATED, false, false, 0, 0,    0.0f,     0.0f,  0.0f,  false, 0, MOE_NONE },
};

const struct arch_traits * arch_find(const char * name) {
    for (size_t i = 0; i < sizeof k_traits / sizeof k_traits[0]; i++) {
        if (strcmp(name, k_traits[i].name) == 0) return &k_traits[i];
    }
    return NULL;
}

const char * arch_supported_list(void) {
    static char list[256];
    if (!list[0]) {
        for (size_t i = 0; i < sizeof k_traits / sizeof k_traits[0]; i++) {
            if (i) strncat(list, ", ", sizeof list - strlen(list) - 1);
            strncat(list, k_traits[i].name, sizeof list - strlen(list) - 1);
        }
    }
    return list;
}

/* "<arch>.<suffix>" */
static const char * akey(const struct kiln_model * m, const char * suffix, char * buf, size_t n) {
    snprintf(buf, n, "%s.%s", m->arch, suffix);
    return buf;
}

static bool load_rope_scaling(struct kiln_model * m) {
    const struct kiln_gguf_context * g = m->gguf;
    char k[128];
    uint32_t u;
    /* linear or YaRN; Llama 3's frequency factors come as the rope_freqs tensor */
    char scaling[32] = "none";
    meta_str(g, akey(m, "rope.scaling.type", k, sizeof k), scaling, sizeof scaling);
    float factor = 0.0f;
    if (!meta_f32(g, akey(m, "rope.scaling.factor", k, sizeof k), &factor)) {
        meta_f32(g, akey(m, "rope.scale_linear", k, sizeof k), &factor);
        if (factor > 0.0f && strcmp(scaling, "none") == 0) strcpy(scaling, "linear");
    }
    m->freq_scale = (factor > 0.0f && strcmp(scaling, "none") != 0) ? 1.0f / factor : 1.0f;
    m->n_ctx_orig = m->n_ctx_train;
    if (meta_u32(g, akey(m, "rope.scaling.original_context_length", k, sizeof k), &u) && u > 0) m->n_ctx_orig = (int32_t) u;
    m->ext_factor = strcmp(scaling, "yarn") == 0 ? 1.0f : 0.0f;
    m->attn_factor = 1.0f;
    meta_f32(g, akey(m, "rope.scaling.attn_factor", k, sizeof k), &m->attn_factor);
    m->beta_fast = 32.0f;
    m->beta_slow = 1.0f;
    if (strcmp(scaling, "none") != 0 && strcmp(scaling, "linear") != 0 && strcmp(scaling, "yarn") != 0) {
        kiln_set_last_error("model: unsupported rope.scaling.type '%s'", scaling);
        return false;
    }
    return true;
}

bool arch_load_hparams(struct kiln_model * m) {
    const struct kiln_gguf_context * g = m->gguf;
    const struct arch_traits * tr = m->tr;
    char k[128];
    uint32_t u;
#define REQ_U32(field, suffix) \
    do { if (!meta_u32(g, akey(m, suffix, k, sizeof k), &u) || u == 0 || u > (1u << 24)) { \
        kiln_set_last_error("model: metadata %s missing or invalid", k); return false; } m->field = (int32_t) u; } while (0)
    REQ_U32(n_embd, "embedding_length");
    REQ_U32(n_layer, "block_count");
    REQ_U32(n_head, "attention.head_count");
    REQ_U32(n_ff, "feed_forward_length");
#undef REQ_U32
    if (m->n_layer > MODEL_MAX_LAYERS) {
        kiln_set_last_error("model: %d layers (at most %d)", m->n_layer, MODEL_MAX_LAYERS);
        return false;
    }
    m->n_ctx_train = 2048;
    if (meta_u32(g, akey(m, "context_length", k, sizeof k), &u) && u > 0) m->n_ctx_train = (int32_t) u;
    m->n_head_kv = m->n_head;
    if (meta_u32(g, akey(m, "attention.head_count_kv", k, sizeof k), &u) && u > 0) m->n_head_kv = (int32_t) u;
    if (m->n_head % m->n_head_kv != 0) {
        kiln_set_last_error("model: %d heads are not a multiple of %d kv heads", m->n_head, m->n_head_kv);
        return false;
    }
    m->head_dim = m->n_embd / m->n_head;
    const bool has_klen = meta_u32(g, akey(m, "attention.key_length", k, sizeof k), &u) && u > 0;
    if (has_klen) m->head_dim = (int32_t) u;
    if ((!has_klen && m->n_embd % m->n_head != 0) || m->head_dim > 1024) {
        kiln_set_last_error("model: %d heads do not divide embedding %d", m->n_head, m->n_embd);
        return false;
    }
    uint32_t vlen = 0;
    if (meta_u32(g, akey(m, "attention.value_length", k, sizeof k), &vlen) && vlen > 0 && (int32_t) vlen != m->head_dim) {
        kiln_set_last_error("model: value length %u differs from key length %d (not supported)", vlen, m->head_dim);
        return false;
    }
    m->n_rot = m->head_dim;
    if (meta_u32(g, akey(m, "rope.dimension_count", k, sizeof k), &u) && u > 0) m->n_rot = (int32_t) u;
    if (m->n_rot > m->head_dim || m->n_rot % 2) {
        kiln_set_last_error("model: rope dimension %d does not fit head size %d", m->n_rot, m->head_dim);
        return false;
    }
    m->norm_eps = 1e-5f;
    if (tr->norm == NORM_PARALLEL) {
        /* LayerNorm: llama.cpp requires its epsilon */
        if (!meta_f32(g, akey(m, "attention.layer_norm_epsilon", k, sizeof k), &m->norm_eps)) {
            kiln_set_last_error("model: metadata %s missing", k);
            return false;
        }
    } else {
        meta_f32(g, akey(m, "attention.layer_norm_rms_epsilon", k, sizeof k), &m->norm_eps);
    }
    m->freq_base = 10000.0f;
    meta_f32(g, akey(m, "rope.freq_base", k, sizeof k), &m->freq_base);
    if (!load_rope_scaling(m)) return false;
    m->rope_type = tr->rope_type;

    /* attention scale: 1/sqrt(head size); Gemma 2/3 27B (46 / 62 layers) use n_embd / n_head */
    const bool gemma27 = (strcmp(tr->name, "gemma2") == 0 && m->n_layer == 46) || (strcmp(tr->name, "gemma3") == 0 && m->n_layer == 62);
    m->attn_scale = 1.0f / sqrtf((float) (gemma27 ? m->n_embd / m->n_head : m->head_dim));

    /* sliding window: the file's, else the architecture's default; gemma3 has one only when the file says */
    m->n_swa = (int32_t) tr->swa_default;
    if (tr->swa_pattern > 0 && meta_u32(g, akey(m, "attention.sliding_window", k, sizeof k), &u)) m->n_swa = (int32_t) u;

    m->attn_softcap = tr->attn_softcap;
    m->final_softcap = tr->final_softcap;
    if (tr->attn_softcap > 0.0f) meta_f32(g, akey(m, "attn_logit_softcapping", k, sizeof k), &m->attn_softcap);
    if (tr->swa_pattern > 0) meta_f32(g, akey(m, "final_logit_softcapping", k, sizeof k), &m->final_softcap);

    m->embd_scale = m->residual_scale = m->logit_scale = 1.0f;
    if (tr->granite_scales) {
        const char * req[] = { "embedding_scale", "residual_scale", "attention.scale", "logit_scale" };
        float * dst[] = { &m->embd_scale, &m->residual_scale, &m->attn_scale, &m->logit_scale };
        for (int i = 0; i < 4; i++) {
            if (!meta_f32(g, akey(m, req[i], k, sizeof k), dst[i])) {
                kiln_set_last_error("model: metadata %s missing", k);
                return false;
            }
        }
        if (m->attn_scale == 0.0f) m->attn_scale = 1.0f / sqrtf((float) m->head_dim);
        if (m->logit_scale == 0.0f) {
            kiln_set_last_error("model: %s.logit_scale is 0", m->arch);
            return false;
        }
    } else if (tr->embd_scale_sqrt) {
        m->embd_scale = sqrtf((float) m->n_embd);
    }

    m->freq_base_swa = tr->rope_base_swa > 0.0f ? tr->rope_base_swa : m->freq_base;
    meta_f32(g, akey(m, "rope.freq_base_swa", k, sizeof k), &m->freq_base_swa);

    if (tr->moe != MOE_NONE) {
        uint32_t ne = 0, nu = 0;
        meta_u32(g, akey(m, "expert_count", k, sizeof k), &ne);
        meta_u32(g, akey(m, "expert_used_count", k, sizeof k), &nu);
        if (ne == 0 || ne > 1024 || nu == 0 || nu > ne) {
            kiln_set_last_error("model: %s.expert_count %u / expert_used_count %u invalid (need 0 < used <= count <= 1024)", m->arch, ne, nu);
            return false;
        }
        m->n_expert = (int32_t) ne;
        m->n_expert_used = (int32_t) nu;
        m->n_ff_exp = m->n_ff / m->n_expert_used;
        if (meta_u32(g, akey(m, "expert_feed_forward_length", k, sizeof k), &u) && u > 0 && u <= (1u << 24)) m->n_ff_exp = (int32_t) u;
        m->n_ff_shexp = m->n_ff;
        if (meta_u32(g, akey(m, "expert_shared_feed_forward_length", k, sizeof k), &u) && u > 0 && u <= (1u << 24)) m->n_ff_shexp = (int32_t) u;
    }
    return true;
}

void arch_pick_rope_factors(struct kiln_model * m) {
    if (m->rope_long || m->rope_short) m->rope_freqs = m->n_ctx > m->n_ctx_orig ? m->rope_long : m->rope_short;
}
