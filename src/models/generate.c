/*
 * generate.c — the one generation core (kiln_gen): start with prompt ids,
 * step one token at a time, release text that is safe to show (whole UTF-8
 * characters, nothing that may still become a stop string), stop on an
 * end-of-generation token, a stop string, max_tokens or a full context.
 * kiln_generate, kiln-generate and the wasm layer all drive this loop.
 *
 * The object keeps the ids its model's KV cache holds (prompt + evaluated
 * tokens), which is what prefix reuse across generations and context
 * shifting work from; sampling goes through an optional logits hook
 * (grammars, logit bias) on a scratch copy of the logits.
 */
#include "kiln-llama.h"
#include "textstream.h"

#include <stdlib.h>
#include <string.h>

struct kiln_gen {
    struct kiln_model   * model;
    struct kiln_sampler * smpl;
    struct kiln_gen_params params;
    char ** stop;          /* owned copies of the stop strings */
    struct textstream ts;  /* generated text not yet handed out */
    size_t shown;          /* bytes of ts handed out by the last step, dropped by the next */
    kiln_token * cache; int32_t n_cache, cap_cache; /* ids in the KV cache */
    kiln_token * ids; int32_t cap_ids;              /* kiln_gen_tokenize's result */
    char * piece; int32_t cap_piece;                /* one token's text */
    float * logits; int32_t cap_logits;             /* scratch for the logits hook */
    kiln_token pending;    /* sampled and handed out, evaluated at the start of the next step */
    int32_t n_prompt, n_generated;
    int32_t n_reused;      /* prompt ids taken from the cache at the last start */
    int32_t n_shifted;     /* ids dropped by context shifts since the start */
    enum kiln_gen_stop stop_reason;
    bool started;
    double t_prompt, t_gen;
};

struct kiln_gen_params kiln_gen_params_default(void) {
    struct kiln_gen_params p = { .max_tokens = 128, .stop = NULL, .n_stop = 0, .logits_hook = NULL, .accept_hook = NULL, .hook_data = NULL,
                                  .cache_prompt = true, .context_shift = false, .n_keep = 1 };
    return p;
}

static bool grow(void ** p, int32_t * cap, int64_t need, size_t elem) {
    if (need <= *cap) return true;
    int64_t c = *cap > 0 ? *cap : 64;
    while (c < need) c *= 2;
    if (c > INT32_MAX) return false;
    void * q = realloc(*p, (size_t) c * elem);
    if (!q) return false;
    *p = q;
    *cap = (int32_t) c;
    return true;
}

static double now_s(void) { return (double) kiln_time_us() * 1e-6; }

struct kiln_gen * kiln_gen_new(struct kiln_model * model) {
    if (!model) {
        kiln_set_last_error("kiln_gen_new: NULL model");
        return NULL;
    }
    struct kiln_gen * g = calloc(1, sizeof *g);
    if (!g) {
        kiln_set_last_error("kiln_gen_new: out of memory");
        return NULL;
    }
    g->model = model;
    return g;
}

static void clear_stops(struct kiln_gen * g) {
    for (int32_t i = 0; i < g->params.n_stop && g->stop; i++) free(g->stop[i]);
    free(g->stop);
    g->stop = NULL;
    g->params.n_stop = 0;
    g->params.stop = NULL;
}

void kiln_gen_free(struct kiln_gen * g) {
    if (!g) return;
    clear_stops(g);
    textstream_free(&g->ts);
    free(g->cache);
    free(g->ids);
    free(g->piece);
    free(g->logits);
    free(g);
}

const kiln_token * kiln_gen_tokenize(struct kiln_gen * g, const char * text, int32_t len, bool add_special,
                                     bool parse_special, int32_t * n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!g || !n_tokens || len < 0 || (len > 0 && !text)) {
        kiln_set_last_error("tokenize: invalid arguments");
        return NULL;
    }
    const struct kiln_vocab * v = kiln_model_vocab(g->model);
    int32_t n = kiln_tokenize(v, text ? text : "", len, g->ids, g->cap_ids, add_special, parse_special);
    if (n < 0 && n != INT32_MIN) {
        if (!grow((void **) &g->ids, &g->cap_ids, -(int64_t) n, sizeof(kiln_token))) {
            kiln_set_last_error("tokenize: out of memory for %d tokens", -n);
            return NULL;
        }
        n = kiln_tokenize(v, text ? text : "", len, g->ids, g->cap_ids, add_special, parse_special);
    }
    if (n < 0) return NULL; /* the tokenizer set the error */
    if (!g->ids && !grow((void **) &g->ids, &g->cap_ids, 1, sizeof(kiln_token))) {
        kiln_set_last_error("tokenize: out of memory");
        return NULL;
    }
    *n_tokens = n;
    return g->ids;
}

enum kiln_status kiln_gen_start(struct kiln_gen * g, struct kiln_sampler * smpl, const kiln_token * prompt,
                                int32_t n_prompt, struct kiln_gen_params params) {
    if (!g || !smpl) {
        kiln_set_last_error("generate: %s", g ? "no sampler" : "NULL generation");
        return KILN_STATUS_INVALID_ARG;
    }
    g->started = false;
    if (n_prompt <= 0 || !prompt) {
        kiln_set_last_error("generate: the prompt has no tokens");
        return KILN_STATUS_INVALID_ARG;
    }
    const int32_t n_vocab = kiln_model_n_vocab(g->model), n_ctx = kiln_model_n_ctx(g->model);
    for (int32_t i = 0; i < n_prompt; i++) {
        if (prompt[i] < 0 || prompt[i] >= n_vocab) {
            kiln_set_last_error("generate: token %d at %d is outside the vocabulary (0..%d)", prompt[i], i, n_vocab - 1);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    if (n_prompt > n_ctx) {
        kiln_set_last_error("generate: the prompt has %d tokens, longer than the context of %d tokens", n_prompt, n_ctx);
        return KILN_STATUS_INVALID_ARG;
    }
    if (params.n_stop < 0 || (params.n_stop > 0 && !params.stop)) {
        kiln_set_last_error("generate: n_stop is %d with %s stop strings", params.n_stop, params.stop ? "some" : "no");
        return KILN_STATUS_INVALID_ARG;
    }
    for (int32_t i = 0; i < params.n_stop; i++) {
        if (!params.stop[i] || !params.stop[i][0]) {
            kiln_set_last_error("generate: stop string %d is empty", i);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    clear_stops(g);
    if (params.n_stop > 0) {
        g->stop = calloc((size_t) params.n_stop, sizeof(char *));
        for (int32_t i = 0; g->stop && i < params.n_stop; i++) {
            g->stop[i] = strdup(params.stop[i]);
            if (!g->stop[i]) {
                g->params.n_stop = i;
                clear_stops(g);
            }
        }
        if (!g->stop) {
            kiln_set_last_error("generate: out of memory");
            return KILN_STATUS_ALLOC_FAILED;
        }
        g->params.n_stop = params.n_stop; /* the copies clear_stops frees */
    }
    if (!grow((void **) &g->cache, &g->cap_cache, n_ctx, sizeof(kiln_token)) ||
        (params.logits_hook && !grow((void **) &g->logits, &g->cap_logits, n_vocab, sizeof(float)))) {
        clear_stops(g);
        kiln_set_last_error("generate: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    g->params = params;
    g->params.stop = (const char * const *) g->stop;
    g->ts.n = 0;
    g->ts.stop = g->params.stop;
    g->ts.n_stop = g->params.n_stop;
    g->shown = 0;
    g->pending = KILN_TOKEN_NULL;
    g->smpl = smpl;
    g->n_prompt = n_prompt;
    g->n_generated = 0;
    g->stop_reason = KILN_GEN_RUNNING;
    g->t_gen = 0;

    /* prompt caching: the ids the cache already holds at the prompt's start
     * stay; only the suffix after the longest common prefix is evaluated. The
     * last prompt id is always evaluated again, since its logits are where
     * sampling starts. The record counts only if the model's cache is still
     * the one this object filled (nobody else evaluated or reset it). */
    int32_t n_reuse = 0;
    if (params.cache_prompt && g->n_cache == kiln_model_n_past(g->model)) {
        const int32_t lim = g->n_cache < n_prompt - 1 ? g->n_cache : n_prompt - 1;
        while (n_reuse < lim && g->cache[n_reuse] == prompt[n_reuse]) n_reuse++;
    }
    if (n_reuse > 0) kiln_model_truncate(g->model, n_reuse);
    else kiln_model_reset(g->model);
    g->n_cache = n_reuse;
    g->n_reused = n_reuse;
    g->n_shifted = 0;
    kiln_sampler_reset(smpl);
    const double t0 = now_s();
    enum kiln_status s = kiln_model_eval(g->model, prompt + n_reuse, n_prompt - n_reuse);
    g->t_prompt = now_s() - t0;
    if (s != KILN_STATUS_SUCCESS) {
        kiln_model_reset(g->model);
        g->n_cache = 0;
        return s;
    }
    memcpy(g->cache, prompt, sizeof(kiln_token) * (size_t) n_prompt);
    g->n_cache = n_prompt;
    for (int32_t i = 0; i < n_prompt; i++) kiln_sampler_accept(smpl, prompt[i]);
    g->started = true;
    return KILN_STATUS_SUCCESS;
}

/* append one token's text to the stream */
static bool add_piece(struct kiln_gen * g, kiln_token tok) {
    const struct kiln_vocab * v = kiln_model_vocab(g->model);
    if (!g->piece && !grow((void **) &g->piece, &g->cap_piece, 256, 1)) return false;
    int32_t n = kiln_token_to_piece(v, tok, g->piece, g->cap_piece, 0, false);
    if (n < 0 && n != INT32_MIN) {
        if (!grow((void **) &g->piece, &g->cap_piece, -(int64_t) n, 1)) return false;
        n = kiln_token_to_piece(v, tok, g->piece, g->cap_piece, 0, false);
    }
    return n <= 0 || textstream_add(&g->ts, g->piece, (size_t) n);
}

enum kiln_status kiln_gen_step(struct kiln_gen * g, struct kiln_gen_token * out) {
    if (!g || !out) {
        kiln_set_last_error("generate: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    textstream_consume(&g->ts, g->shown);
    g->shown = 0;
    *out = (struct kiln_gen_token) { KILN_TOKEN_NULL, "", 0, g->stop_reason };
    if (!g->started) {
        kiln_set_last_error("generate: not started");
        return KILN_STATUS_INVALID_ARG;
    }
    if (g->stop_reason != KILN_GEN_RUNNING) return KILN_STATUS_SUCCESS;

    const double t0 = now_s();
    struct kiln_model * m = g->model;
    if (g->pending != KILN_TOKEN_NULL && kiln_model_n_past(m) >= kiln_model_n_ctx(m)) {
        /* a full context (only reached with context_shift): drop the older
         * half of what follows the first n_keep ids */
        const int32_t keep = g->params.n_keep < 0 ? 0 : g->params.n_keep > g->n_cache - 2 ? g->n_cache - 2 : g->params.n_keep;
        const int32_t drop = (g->n_cache - keep) / 2;
        const enum kiln_status s = kiln_model_shift(m, keep, drop);
        if (s != KILN_STATUS_SUCCESS) {
            g->n_cache = kiln_model_n_past(m);
            g->t_gen += now_s() - t0;
            g->started = false;
            return s;
        }
        memmove(g->cache + keep, g->cache + keep + drop, sizeof(kiln_token) * (size_t) (g->n_cache - keep - drop));
        g->n_cache -= drop;
        g->n_shifted += drop;
    }
    if (g->pending != KILN_TOKEN_NULL) {
        /* the last token's text went out before its evaluation: the caller
         * sees it one evaluation sooner, and an abort ends between tokens */
        const enum kiln_status s = kiln_model_eval(m, &g->pending, 1);
        if (s != KILN_STATUS_SUCCESS) {
            g->t_gen += now_s() - t0;
            g->started = false;
            return s;
        }
        g->cache[g->n_cache++] = g->pending;
        g->pending = KILN_TOKEN_NULL;
    }
    const int32_t n_vocab = kiln_model_n_vocab(m);
    const float * logits = kiln_model_logits(m);
    if (g->params.logits_hook) {
        memcpy(g->logits, logits, sizeof(float) * (size_t) n_vocab);
        g->params.logits_hook(g->logits, n_vocab, g->params.hook_data);
        logits = g->logits;
    }
    const kiln_token tok = kiln_sampler_sample(g->smpl, logits, n_vocab);
    if (tok < 0) {
        g->started = false;
        return KILN_STATUS_FAILED; /* the sampler set the error */
    }
    kiln_sampler_accept(g->smpl, tok);
    if (g->params.accept_hook) g->params.accept_hook(tok, g->params.hook_data);
    out->token = tok;
    enum kiln_gen_stop stop = KILN_GEN_RUNNING;
    if (kiln_vocab_is_eog(kiln_model_vocab(m), tok)) {
        stop = KILN_GEN_EOG;
    } else {
        g->n_generated++;
        if (!add_piece(g, tok)) {
            g->started = false;
            kiln_set_last_error("generate: out of memory");
            return KILN_STATUS_ALLOC_FAILED;
        }
        if (g->params.max_tokens > 0 && g->n_generated >= g->params.max_tokens) stop = KILN_GEN_MAX_TOKENS;
        else if (!g->params.context_shift && kiln_model_n_past(m) >= kiln_model_n_ctx(m)) stop = KILN_GEN_CONTEXT;
    }
    const bool final = stop != KILN_GEN_RUNNING;
    bool hit = false;
    const size_t n = textstream_ready(&g->ts, final, &hit);
    if (hit) stop = KILN_GEN_STOP_STRING;
    out->text = g->ts.buf ? g->ts.buf : "";
    out->len = (int32_t) n;
    /* at the end, what was not released (a stop string and what follows) goes */
    g->shown = stop != KILN_GEN_RUNNING ? g->ts.n : n;
    g->stop_reason = stop;
    out->stop = stop;
    if (stop == KILN_GEN_RUNNING) g->pending = tok;
    g->t_gen += now_s() - t0;
    return KILN_STATUS_SUCCESS;
}

void kiln_gen_stats(const struct kiln_gen * g, struct kiln_generate_stats * st) {
    if (!st) return;
    memset(st, 0, sizeof *st);
    if (!g) return;
    st->prompt_tokens = g->n_prompt;
    st->cached_tokens = g->n_reused;
    st->shifted_tokens = g->n_shifted;
    st->generated_tokens = g->n_generated;
    st->prompt_seconds = g->t_prompt;
    st->gen_seconds = g->t_gen;
    st->prompt_tokens_per_second = g->t_prompt > 0 ? (g->n_prompt - g->n_reused) / g->t_prompt : 0.0;
    st->tokens_per_second = g->t_gen > 0 ? g->n_generated / g->t_gen : 0.0;
    st->stop = g->stop_reason;
    st->stopped_by_eog = g->stop_reason == KILN_GEN_EOG;
    st->stopped_by_string = g->stop_reason == KILN_GEN_STOP_STRING;
}

const kiln_token * kiln_gen_tokens(const struct kiln_gen * g, int32_t * n_tokens) {
    if (n_tokens) *n_tokens = g ? g->n_cache : 0;
    return g ? g->cache : NULL;
}

/* ------------------------------------------------------------ saved state */

#define STATE_MAGIC "KKVS"
#define STATE_VERSION 1u
#define STATE_HEADER 40

size_t kiln_gen_state_size(const struct kiln_gen * g) {
    if (!g) return 0;
    return STATE_HEADER + sizeof(kiln_token) * (size_t) g->n_cache + kiln_model_kv_bytes(g->model, g->n_cache);
}

static void put32(uint8_t * p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t) (v >> (8 * i)); }
static void put64(uint8_t * p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t) (v >> (8 * i)); }
static uint32_t get32(const uint8_t * p) { uint32_t v = 0; for (int i = 0; i < 4; i++) v |= (uint32_t) p[i] << (8 * i); return v; }
static uint64_t get64(const uint8_t * p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t) p[i] << (8 * i); return v; }

enum kiln_status kiln_gen_state_save(const struct kiln_gen * g, void * buf, size_t size) {
    if (!g || !buf) {
        kiln_set_last_error("state: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    if (g->n_cache != kiln_model_n_past(g->model)) {
        kiln_set_last_error("state: the model's cache is no longer this generation's (%d positions, %d recorded)",
                            kiln_model_n_past(g->model), g->n_cache);
        return KILN_STATUS_INVALID_ARG;
    }
    const size_t need = kiln_gen_state_size(g);
    if (size < need) {
        kiln_set_last_error("state: %zu bytes is too small for %zu", size, need);
        return KILN_STATUS_INVALID_ARG;
    }
    uint8_t * p = buf;
    memcpy(p, STATE_MAGIC, 4);
    put32(p + 4, STATE_VERSION);
    put64(p + 8, kiln_model_fingerprint(g->model));
    put32(p + 16, (uint32_t) kiln_model_n_ctx(g->model));
    put32(p + 20, (uint32_t) kiln_model_kv_type(g->model));
    put32(p + 24, (uint32_t) g->n_cache);
    put32(p + 28, 0);
    put64(p + 32, kiln_model_kv_bytes(g->model, g->n_cache));
    for (int32_t i = 0; i < g->n_cache; i++) put32(p + STATE_HEADER + 4 * (size_t) i, (uint32_t) g->cache[i]);
    kiln_model_kv_read(g->model, p + STATE_HEADER + 4 * (size_t) g->n_cache);
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_gen_state_load(struct kiln_gen * g, const void * buf, size_t size) {
    if (!g || (!buf && size > 0)) {
        kiln_set_last_error("state: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    const uint8_t * p = buf;
    if (size < STATE_HEADER || memcmp(p, STATE_MAGIC, 4) != 0) {
        kiln_set_last_error("state: not a saved state (%zu bytes, no KKVS header)", size);
        return KILN_STATUS_INVALID_ARG;
    }
    if (get32(p + 4) != STATE_VERSION) {
        kiln_set_last_error("state: version %u, this engine reads version %u", get32(p + 4), STATE_VERSION);
        return KILN_STATUS_INVALID_ARG;
    }
    if (get64(p + 8) != kiln_model_fingerprint(g->model)) {
        kiln_set_last_error("state: saved from another model (fingerprint %016llx, this one %016llx)",
                            (unsigned long long) get64(p + 8), (unsigned long long) kiln_model_fingerprint(g->model));
        return KILN_STATUS_INVALID_ARG;
    }
    const uint32_t kv_type = get32(p + 20), n_past = get32(p + 24);
    if (kv_type != (uint32_t) kiln_model_kv_type(g->model)) {
        kiln_set_last_error("state: KV cache of type %u, this model's is %u", kv_type, (unsigned) kiln_model_kv_type(g->model));
        return KILN_STATUS_INVALID_ARG;
    }
    if (n_past > (uint32_t) kiln_model_n_ctx(g->model)) {
        kiln_set_last_error("state: %u positions do not fit the context of %d", n_past, kiln_model_n_ctx(g->model));
        return KILN_STATUS_INVALID_ARG;
    }
    const uint64_t kv = kiln_model_kv_bytes(g->model, (int32_t) n_past);
    if (get64(p + 32) != kv || size != STATE_HEADER + 4 * (uint64_t) n_past + kv) {
        kiln_set_last_error("state: %zu bytes for %u positions, expected %llu (truncated or damaged)", size, n_past,
                            (unsigned long long) (STATE_HEADER + 4 * (uint64_t) n_past + kv));
        return KILN_STATUS_INVALID_ARG;
    }
    const int32_t n_vocab = kiln_model_n_vocab(g->model);
    for (uint32_t i = 0; i < n_past; i++) {
        const int32_t t = (int32_t) get32(p + STATE_HEADER + 4 * (size_t) i);
        if (t < 0 || t >= n_vocab) {
            kiln_set_last_error("state: token %d at %u is outside the vocabulary", t, i);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    if (!grow((void **) &g->cache, &g->cap_cache, kiln_model_n_ctx(g->model), sizeof(kiln_token))) {
        kiln_set_last_error("state: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    const enum kiln_status s = kiln_model_kv_write(g->model, p + STATE_HEADER + 4 * (size_t) n_past, (int32_t) n_past);
    if (s != KILN_STATUS_SUCCESS) return s;
    for (uint32_t i = 0; i < n_past; i++) g->cache[i] = (kiln_token) get32(p + STATE_HEADER + 4 * (size_t) i);
    g->n_cache = (int32_t) n_past;
    g->started = false;
    return KILN_STATUS_SUCCESS;
}

/* ------------------------------------------------------------ kiln_generate */

struct kiln_generate_params kiln_generate_params_default(void) {
    struct kiln_generate_params p = {
        .max_tokens = 128,
        .add_special = true,
        .parse_special = false,
        .stop = NULL,
        .n_stop = 0,
    };
    return p;
}

enum kiln_status kiln_generate(struct kiln_model * model, struct kiln_sampler * smpl, const char * prompt,
                               struct kiln_generate_params gp, kiln_piece_callback cb, void * ud,
                               struct kiln_generate_stats * stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!model || !smpl || !prompt) {
        kiln_set_last_error("kiln_generate: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    struct kiln_gen * g = kiln_gen_new(model);
    if (!g) return KILN_STATUS_ALLOC_FAILED;
    int32_t n_prompt = 0;
    const kiln_token * ids = kiln_gen_tokenize(g, prompt, (int32_t) strlen(prompt), gp.add_special, gp.parse_special, &n_prompt);
    struct kiln_gen_params p = kiln_gen_params_default();
    p.max_tokens = gp.max_tokens;
    p.stop = gp.stop;
    p.n_stop = gp.n_stop;
    enum kiln_status s = ids ? kiln_gen_start(g, smpl, ids, n_prompt, p) : KILN_STATUS_INVALID_ARG;
    struct kiln_gen_token t = { 0 };
    while (s == KILN_STATUS_SUCCESS && t.stop == KILN_GEN_RUNNING) {
        s = kiln_gen_step(g, &t);
        const kiln_token tok = t.stop == KILN_GEN_EOG ? KILN_TOKEN_NULL : t.token;
        if (cb && (t.len > 0 || tok >= 0)) cb(t.text, t.len, tok, ud);
    }
    kiln_gen_stats(g, stats);
    kiln_gen_free(g);
    return s;
}
