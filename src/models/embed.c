/*
 * embed.c — embeddings as llama.cpp computes them with embeddings on: the
 * per-position hidden states of one sequence (an encoder's last layer, or a
 * decoder's state after its final norm), pooled as llama.cpp's pooling
 * types (mean, first token, last token, or none), then, when asked,
 * divided by their Euclidean norm (llama.cpp's common_embd_normalize with
 * embd_norm = 2).
 */
#include "model.h"
#include "vocab.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_embed_params kiln_embed_params_default(void) {
    struct kiln_embed_params p = { .pooling = KILN_POOLING_UNSPECIFIED, .normalize = true };
    return p;
}

bool kiln_model_is_encoder(const struct kiln_model * m) { return m && m->enc; }

enum kiln_pooling_type kiln_model_pooling_type(const struct kiln_model * m) {
    if (!m) return KILN_POOLING_NONE;
    if (m->enc) {
        const int32_t p = encoder_pooling(m);
        return p < 0 ? KILN_POOLING_NONE : (enum kiln_pooling_type) p;
    }
    char k[96];
    snprintf(k, sizeof k, "%s.pooling_type", m->arch);
    uint32_t u;
    return meta_u32(m->gguf, k, &u) && u <= 3 ? (enum kiln_pooling_type) u : KILN_POOLING_NONE;
}

/* a decoder's hidden states, batch by batch from position 0; the cache is
 * emptied before and after (what it held is no longer valid) */
static enum kiln_status decoder_states(struct kiln_model * m, const kiln_token * tokens, int32_t n, float * out) {
    m->n_past = 0;
    enum kiln_status st = KILN_STATUS_SUCCESS;
    for (int32_t i = 0; i < n && st == KILN_STATUS_SUCCESS; i += m->n_batch) {
        const int32_t nb = n - i < m->n_batch ? n - i : m->n_batch;
        m->embd_out = out + (size_t) i * m->n_embd;
        st = decoder_eval_batch(m, tokens + i, nb);
    }
    m->embd_out = NULL;
    m->n_past = 0;
    return st;
}

static void l2_normalize(float * v, int64_t n) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double) v[i] * v[i];
    const float s = sum > 0.0 ? (float) (1.0 / sqrt(sum)) : 0.0f;
    for (int64_t i = 0; i < n; i++) v[i] *= s;
}

int32_t kiln_model_embed_tokens(struct kiln_model * m, const kiln_token * tokens, int32_t n, struct kiln_embed_params params,
                                float * out, int32_t n_out) {
    if (!m || !tokens || n <= 0 || n_out < 0 || (!out && n_out > 0)) {
        kiln_set_last_error("kiln_model_embed_tokens: invalid arguments (model %p, %d tokens, out %p of %d)", (void *) m, n,
                            (void *) out, n_out);
        return INT32_MIN;
    }
    if (!m->enc && !m->layers) {
        kiln_set_last_error("kiln_model_embed_tokens: the model was loaded vocab-only");
        return INT32_MIN;
    }
    enum kiln_pooling_type pool = params.pooling == KILN_POOLING_UNSPECIFIED ? kiln_model_pooling_type(m) : params.pooling;
    if (pool < KILN_POOLING_NONE || pool > KILN_POOLING_LAST) {
        kiln_set_last_error("kiln_model_embed_tokens: pooling %d (none 0, mean 1, cls 2, last 3)", (int) params.pooling);
        return INT32_MIN;
    }
    if (n > m->n_ctx) {
        kiln_set_last_error("kiln_model_embed_tokens: %d tokens exceed the context length %d", n, m->n_ctx);
        return INT32_MIN;
    }
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= m->n_vocab) {
            kiln_set_last_error("kiln_model_embed_tokens: token %d at index %d out of range (vocab %d)", tokens[i], i, m->n_vocab);
            return INT32_MIN;
        }
    }
    const int64_t E = m->n_embd;
    const int64_t need = pool == KILN_POOLING_NONE ? (int64_t) n * E : E;
    if (need > INT32_MAX) {
        kiln_set_last_error("kiln_model_embed_tokens: %lld floats of output are too many", (long long) need);
        return INT32_MIN;
    }
    if (need > n_out) return -(int32_t) need;
    float * h = malloc(sizeof(float) * (size_t) n * (size_t) E);
    if (!h) {
        kiln_set_last_error("kiln_model_embed_tokens: out of memory for %d x %lld hidden states", n, (long long) E);
        return INT32_MIN;
    }
    const enum kiln_status st = m->enc ? encoder_eval(m, tokens, n, h) : decoder_states(m, tokens, n, h);
    if (st != KILN_STATUS_SUCCESS) {
        free(h);
        return INT32_MIN;
    }
    switch (pool) {
        case KILN_POOLING_NONE:
            memcpy(out, h, sizeof(float) * (size_t) need);
            break;
        case KILN_POOLING_MEAN: {
            /* llama.cpp: a mat-mul of the states with a column of 1/n */
            const float w = 1.0f / (float) n;
            for (int64_t j = 0; j < E; j++) {
                float s = 0.0f;
                for (int32_t i = 0; i < n; i++) s += h[(size_t) i * E + j] * w;
                out[j] = s;
            }
            break;
        }
        case KILN_POOLING_CLS:
            memcpy(out, h, sizeof(float) * (size_t) E);
            break;
        default:
            memcpy(out, h + (size_t) (n - 1) * E, sizeof(float) * (size_t) E);
            break;
    }
    free(h);
    if (params.normalize) {
        for (int64_t r = 0; r < need / E; r++) l2_normalize(out + r * E, E);
    }
    return (int32_t) need;
}

int32_t kiln_model_embed(struct kiln_model * m, const char * text, int32_t len, struct kiln_embed_params params, float * out,
                         int32_t n_out) {
    if (!m || (!text && len > 0) || len < 0) {
        kiln_set_last_error("kiln_model_embed: invalid arguments");
        return INT32_MIN;
    }
    int32_t cap = len + 8;
    kiln_token * ids = malloc(sizeof(kiln_token) * (size_t) cap);
    if (!ids) {
        kiln_set_last_error("kiln_model_embed: out of memory");
        return INT32_MIN;
    }
    int32_t n = kiln_tokenize(m->vocab, text ? text : "", len, ids, cap, true, false);
    if (n < 0 && n != INT32_MIN) { /* more ids than bytes (should not happen): retry at the size asked */
        cap = -n;
        kiln_token * ids2 = realloc(ids, sizeof(kiln_token) * (size_t) cap);
        if (!ids2) {
            free(ids);
            kiln_set_last_error("kiln_model_embed: out of memory");
            return INT32_MIN;
        }
        ids = ids2;
        n = kiln_tokenize(m->vocab, text, len, ids, cap, true, false);
    }
    if (n == 0) {
        free(ids);
        kiln_set_last_error("kiln_model_embed: the text gives no tokens");
        return INT32_MIN;
    }
    const int32_t r = n < 0 ? INT32_MIN : kiln_model_embed_tokens(m, ids, n, params, out, n_out);
    free(ids);
    return r;
}
