/*
 * kiln_wasm_generate.c — text generation over a loaded model (kw_llm_*), a
 * thin layer over the generation core of kiln-llama.h (kiln_gen).
 *
 * A generator is a KW_KIND_LLM handle: a kiln_model built over the model
 * handle's already parsed GGUF context and weights (no second parse, no
 * copy), which it keeps alive. A generation is
 *   kw_llm_start(g, text or ids, options)  -> tokenizes (text stays in wasm),
 *                                             checks the options, evaluates the prompt
 *   kw_llm_step(g)                         -> one token: kw_llm_step_info(g) holds
 *                                             {token, stop, text pointer, text length}
 * so the worker makes one call per generated token.
 */
#include "kiln_wasm_internal.h"
#include "kiln-llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int kw_n_threads(void);
struct kiln_threadpool * kw_threadpool(void);
volatile int * kw_abort_flag(void);

/* what JS reads after each step (4 int32 at kw_llm_step_info) */
struct kw_step {
    int32_t token;
    int32_t stop;  /* enum kiln_gen_stop */
    int32_t text;  /* wasm address of the released text */
    int32_t len;
};

/* what JS reads after each step with logprobs on (kw_llm_logprobs): n, the
 * sampled token and its log-probability, then n (token, log-probability)
 * pairs of the most likely tokens, most likely first */
#define KW_MAX_LOGPROBS 64
struct kw_logprobs {
    int32_t n;
    struct kiln_token_logprob chosen;
    struct kiln_token_logprob top[KW_MAX_LOGPROBS];
};

/* what JS reads after a generation (6 doubles at kw_llm_stats) */
struct kw_stats {
    double prompt_tokens, generated_tokens, prompt_seconds, gen_seconds, stop, cached_tokens;
};

struct kw_llm {
    struct kiln_model   * model;
    struct kiln_sampler * smpl;
    struct kiln_gen     * gen;
    char * text; int n_text, cap_text; /* detokenize / piece / meta results */
    const kiln_token * ids;            /* kw_llm_tokenize's result (kept by gen) */
    struct kw_step step;
    struct kw_stats stats;
    /* what kw_llm_constrain set for the next kw_llm_start */
    char * gbnf;                       /* NULL: no grammar */
    struct kiln_logit_bias * bias; int n_bias;
    int n_logprobs;
    struct kw_logprobs lp;
};

static struct kw_llm * get(int g, const char * fn) { return (struct kw_llm *) kw_object(g, KW_KIND_LLM, fn); }

static bool reserve_text(struct kw_llm * l, int need) {
    if (need <= l->cap_text) return true;
    int c = l->cap_text ? l->cap_text : 256;
    while (c < need) c *= 2;
    char * q = realloc(l->text, (size_t) c);
    if (!q) { kw_fail(KW_E_NOMEM, "generate: out of memory"); return false; }
    l->text = q;
    l->cap_text = c;
    return true;
}

static void llm_release(void * p) {
    struct kw_llm * l = p;
    if (!l) return;
    kiln_gen_free(l->gen);
    kiln_sampler_free(l->smpl);
    kiln_model_free(l->model);
    free(l->text);
    free(l->gbnf);
    free(l->bias);
    free(l);
}

/* model_handle: a parsed model (kw_model_*); n_ctx 0: the metadata's, within 512..4096 */
KW_EXPORT int kw_llm_new(int model_handle, int vocab_only, int n_ctx) {
    const int ms = kw_slot(model_handle, KW_KIND_MODEL, "llm_new");
    if (ms < 0) return ms;
    struct kw_entry * me = kw_entry_slot(ms);
    if (!me->gguf) return kw_fail(KW_E_INVALID, "llm_new: the model is not parsed");
    if (n_ctx < 0) return kw_fail(KW_E_INVALID, "llm_new: context length %d", n_ctx);
    struct kiln_model_params p = kiln_model_params_default();
    p.vocab_only = vocab_only != 0;
    p.n_ctx = n_ctx;
    p.n_threads = kw_n_threads() > 0 ? kw_n_threads() : 1;
    /* the engine's pool: kiln-mt's pthread pool holds threads - 1 workers,
     * all of them in this pool, so the executor's shared pool could start none */
    p.threadpool = kw_threadpool();
    /* the engine owns the bytes: mat-vec weights may be interleaved in place
     * (src/cpu/repack.h), unless model tensor handles already view them */
    p.repack_in_place = !p.vocab_only && me->views == 0;
    kiln_clear_error();
    struct kiln_model * m = kiln_model_load_from_gguf(me->gguf, me->mctx, p);
    if (!m) return kw_fail_kiln(KW_E_FORMAT, "model");
    if (n_ctx == 0 && !vocab_only && !kiln_model_is_encoder(m)) {
        /* like llama.cpp's 4096 default, but room for short-context toys
         * (stories260K says 128) and no 32k cache in a 4 GB wasm heap */
        int32_t want = kiln_model_n_ctx_train(m);
        want = want < 512 ? 512 : want > 4096 ? 4096 : want;
        if (want != kiln_model_n_ctx(m) && kiln_model_set_n_ctx(m, want) != KILN_STATUS_SUCCESS) {
            kiln_model_free(m);
            return kw_fail_kiln(KW_E_NOMEM, "model: context");
        }
    }
    struct kw_llm * l = calloc(1, sizeof *l);
    struct kiln_gen * gen = l ? kiln_gen_new(m) : NULL;
    if (!gen) { free(l); kiln_model_free(m); return kw_fail(KW_E_NOMEM, "llm_new: out of memory"); }
    l->model = m;
    l->gen = gen;
#if KW_THREADS
    /* mt: JS stores the running job's id in this word to cancel it (it is
     * zero otherwise), so a long prompt stops between graph nodes; st
     * cannot see JS's word from C and stops between tokens only */
    kiln_model_set_abort_flag(m, kw_abort_flag());
#endif
    const int h = kw_object_new(KW_KIND_LLM, l, llm_release);
    if (h < 0) return h;
    kw_entry_add_dep(kw_slot(h, KW_KIND_LLM, "llm_new"), ms); /* the model's bytes and tensors live while the generator does */
    return h;
}

/* a LoRA adapter (llama.cpp's GGUF format, size bytes at data, read during
 * the call) applied to this generator's model at scale; the cache empties */
KW_EXPORT int kw_llm_lora_add(int g, const void * data, double size, float scale) {
    struct kw_llm * l = get(g, "llm_lora_add");
    if (!l) return KW_E_HANDLE;
    if (!data || !(size > 0) || size > 4294967295.0) return kw_fail(KW_E_INVALID, "lora: %.0f bytes", size);
    kiln_clear_error();
    struct kiln_adapter_lora * ad = kiln_adapter_lora_init_from_buffer(l->model, data, (size_t) size);
    if (!ad) return kw_fail_kiln(KW_E_FORMAT, NULL);
    if (kiln_model_set_adapter_lora(l->model, ad, scale) != KILN_STATUS_SUCCESS) return kw_fail_kiln(KW_E_INVALID, NULL);
    return KW_OK;
}
/* the generator's model (kiln_wasm_embed.c), or NULL and a handle failure */
struct kiln_model * kw_llm_model(int g, const char * fn) { struct kw_llm * l = get(g, fn); return l ? l->model : NULL; }

KW_EXPORT int kw_llm_n_ctx(int g) { struct kw_llm * l = get(g, "llm_n_ctx"); return l ? kiln_model_n_ctx(l->model) : KW_E_HANDLE; }
KW_EXPORT int kw_llm_n_vocab(int g) { struct kw_llm * l = get(g, "llm_n_vocab"); return l ? kiln_vocab_n_tokens(kiln_model_vocab(l->model)) : KW_E_HANDLE; }
KW_EXPORT int kw_llm_bos(int g) { struct kw_llm * l = get(g, "llm_bos"); return l ? kiln_vocab_bos(kiln_model_vocab(l->model)) : KW_E_HANDLE; }
KW_EXPORT int kw_llm_eos(int g) { struct kw_llm * l = get(g, "llm_eos"); return l ? kiln_vocab_eos(kiln_model_vocab(l->model)) : KW_E_HANDLE; }
KW_EXPORT char * kw_llm_text(int g) { struct kw_llm * l = get(g, "llm_text"); return l ? l->text : NULL; }

/* a metadata value as text (kw_llm_text()); -1 if absent */
KW_EXPORT int kw_llm_meta(int g, const char * key) {
    struct kw_llm * l = get(g, "llm_meta");
    if (!l) return KW_E_HANDLE;
    const int32_t n = kiln_model_meta_val_str(l->model, key, NULL, 0);
    if (n < 0) { l->n_text = 0; return -1; }
    if (!reserve_text(l, n + 1)) return KW_E_NOMEM;
    kiln_model_meta_val_str(l->model, key, l->text, (size_t) n + 1);
    l->n_text = n;
    return n;
}

/* chat messages rendered by a built-in chat template (kiln_chat_apply_template):
 * buf holds n_msg pairs of NUL-terminated role and content one after another;
 * tmpl is a template name or text, or NULL for the model's
 * tokenizer.chat_template (ChatML when it has none); the assistant's turn is
 * opened. The text at kw_llm_text(); returns its length */
KW_EXPORT int kw_llm_chat_builtin(int g, const char * tmpl, const char * buf, int n_msg) {
    struct kw_llm * l = get(g, "llm_chat_builtin");
    if (!l) return KW_E_HANDLE;
    if (n_msg < 0 || n_msg > (1 << 20) || (n_msg > 0 && !buf)) return kw_fail(KW_E_INVALID, "chat: bad message list");
    struct kiln_chat_message * msgs = malloc(sizeof(*msgs) * (size_t) (n_msg ? n_msg : 1));
    char * own = NULL;
    if (!msgs) return KW_E_NOMEM;
    for (int i = 0; i < n_msg; i++) {
        msgs[i].role = buf;
        buf += strlen(buf) + 1;
        msgs[i].content = buf;
        buf += strlen(buf) + 1;
    }
    if (!tmpl) {
        const int32_t n = kiln_model_meta_val_str(l->model, "tokenizer.chat_template", NULL, 0);
        if (n >= 0 && (own = malloc((size_t) n + 1)) != NULL) kiln_model_meta_val_str(l->model, "tokenizer.chat_template", own, (size_t) n + 1);
        tmpl = own;
    }
    kiln_clear_error();
    int rc;
    const int32_t n = kiln_chat_apply_template(tmpl, msgs, (size_t) n_msg, true, NULL, 0);
    if (n < 0) rc = kw_fail_kiln(KW_E_INVALID, "chat");
    else if (!reserve_text(l, n + 1)) rc = KW_E_NOMEM;
    else {
        kiln_chat_apply_template(tmpl, msgs, (size_t) n_msg, true, l->text, n + 1);
        l->n_text = n;
        rc = n;
    }
    free(own);
    free(msgs);
    return rc;
}

/* text (len bytes) -> token ids at kw_llm_ids(); returns the count */
KW_EXPORT int kw_llm_tokenize(int g, const char * text, int len, int add_bos, int parse_special) {
    struct kw_llm * l = get(g, "llm_tokenize");
    if (!l) return KW_E_HANDLE;
    int32_t n = 0;
    kiln_clear_error();
    l->ids = kiln_gen_tokenize(l->gen, text, len, add_bos != 0, parse_special != 0, &n);
    if (!l->ids) return kw_fail_kiln(KW_E_INVALID, "tokenize");
    return n;
}
KW_EXPORT const kiln_token * kw_llm_ids(int g) { struct kw_llm * l = get(g, "llm_ids"); return l ? l->ids : NULL; }

static int check_ids(struct kw_llm * l, const kiln_token * ids, int n, const char * fn) {
    if (n < 0 || (n > 0 && !ids)) return kw_fail(KW_E_INVALID, "%s: bad token array", fn);
    const int nv = kiln_vocab_n_tokens(kiln_model_vocab(l->model));
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= nv) return kw_fail(KW_E_INVALID, "%s: token %d at %d is outside the vocabulary (0..%d)", fn, ids[i], i, nv - 1);
    }
    return KW_OK;
}

/* ids -> text at kw_llm_text(); returns the byte count */
KW_EXPORT int kw_llm_detokenize(int g, const kiln_token * ids, int n, int remove_special, int unparse_special) {
    struct kw_llm * l = get(g, "llm_detokenize");
    if (!l) return KW_E_HANDLE;
    int rc = check_ids(l, ids, n, "detokenize");
    if (rc < 0) return rc;
    const struct kiln_vocab * v = kiln_model_vocab(l->model);
    int32_t k = kiln_detokenize(v, ids, n, l->text, l->cap_text, remove_special != 0, unparse_special != 0);
    if (k < 0) {
        if (!reserve_text(l, -k + 1)) return KW_E_NOMEM;
        k = kiln_detokenize(v, ids, n, l->text, l->cap_text, remove_special != 0, unparse_special != 0);
        if (k < 0) return kw_fail_kiln(KW_E_INVALID, "detokenize");
    }
    l->n_text = k;
    return k;
}

/* one token's text at kw_llm_text() */
KW_EXPORT int kw_llm_token_to_piece(int g, int token, int special) {
    struct kw_llm * l = get(g, "llm_token_to_piece");
    if (!l) return KW_E_HANDLE;
    int rc = check_ids(l, &token, 1, "token_to_piece");
    if (rc < 0) return rc;
    const struct kiln_vocab * v = kiln_model_vocab(l->model);
    if (!reserve_text(l, 64)) return KW_E_NOMEM;
    int32_t k = kiln_token_to_piece(v, token, l->text, l->cap_text, 0, special != 0);
    if (k < 0) {
        if (!reserve_text(l, -k + 1)) return KW_E_NOMEM;
        k = kiln_token_to_piece(v, token, l->text, l->cap_text, 0, special != 0);
        if (k < 0) return kw_fail_kiln(KW_E_INVALID, "token_to_piece");
    }
    l->n_text = k;
    return k;
}

/* a number JS passed for a C integer option: whole and within [lo, hi] */
static bool int_opt(double v, double lo, double hi, const char * name, const char * what, int64_t * out) {
    if (!(v >= lo && v <= hi) || v != floor(v)) { kw_fail(KW_E_INVALID, "generate: %s must be %s, not %g", name, what, v); return false; }
    *out = (int64_t) v;
    return true;
}

/* The constraints of the next kw_llm_start (each start uses the last call's):
 * grammar: GBNF text (llama.cpp's syntax) or, with is_schema, a JSON Schema
 * converted to GBNF here (kiln_json_schema_to_grammar), NULL for none; the
 * grammar is parsed now so that a bad one fails here, naming line and column.
 * bias: n_bias (token id, bias) pairs, -Infinity bans a token. n_logprobs:
 * how many of the most likely tokens kw_llm_logprobs reports per step
 * (0: off, at most 64). A failure leaves the previous constraints. */
KW_EXPORT int kw_llm_constrain(int g, const char * grammar, int is_schema, const int32_t * bias_ids, const float * bias_vals,
                               int n_bias, int n_logprobs) {
    struct kw_llm * l = get(g, "llm_constrain");
    if (!l) return KW_E_HANDLE;
    if (n_logprobs < 0 || n_logprobs > KW_MAX_LOGPROBS) return kw_fail(KW_E_INVALID, "generate: logprobs must be an integer in 0..%d, not %d", KW_MAX_LOGPROBS, n_logprobs);
    if (n_bias < 0 || (n_bias > 0 && (!bias_ids || !bias_vals))) return kw_fail(KW_E_INVALID, "generate: logit_bias: bad list");
    const int nv = kiln_vocab_n_tokens(kiln_model_vocab(l->model));
    for (int i = 0; i < n_bias; i++) {
        if (bias_ids[i] < 0 || bias_ids[i] >= nv) return kw_fail(KW_E_INVALID, "generate: logit_bias: token %d is outside the vocabulary (0..%d)", bias_ids[i], nv - 1);
        if (isnan(bias_vals[i]) || bias_vals[i] == INFINITY) return kw_fail(KW_E_INVALID, "generate: logit_bias: the bias of token %d must be a number or -Infinity, not %g", bias_ids[i], bias_vals[i]);
    }
    char * gbnf = NULL;
    kiln_clear_error();
    if (grammar) {
        if (is_schema) {
            gbnf = kiln_json_schema_to_grammar(grammar, -1);
            if (!gbnf) return kw_fail_kiln(KW_E_INVALID, "jsonSchema");
        } else {
            const size_t n = strlen(grammar);
            gbnf = malloc(n + 1);
            if (!gbnf) return kw_fail(KW_E_NOMEM, "generate: out of memory");
            memcpy(gbnf, grammar, n + 1);
        }
        struct kiln_grammar * check = kiln_grammar_init(gbnf, NULL, kiln_model_vocab(l->model));
        if (!check) { free(gbnf); return kw_fail_kiln(KW_E_INVALID, is_schema ? "jsonSchema" : "grammar"); }
        kiln_grammar_free(check);
    }
    struct kiln_logit_bias * bias = NULL;
    if (n_bias > 0) {
        bias = malloc(sizeof *bias * (size_t) n_bias);
        if (!bias) { free(gbnf); return kw_fail(KW_E_NOMEM, "generate: out of memory"); }
        for (int i = 0; i < n_bias; i++) bias[i] = (struct kiln_logit_bias) { bias_ids[i], bias_vals[i] };
    }
    free(l->gbnf);
    free(l->bias);
    l->gbnf = gbnf;
    l->bias = bias;
    l->n_bias = n_bias;
    l->n_logprobs = n_logprobs;
    return KW_OK;
}

/* the GBNF text the last kw_llm_constrain set (a JSON Schema's conversion), "" for none */
KW_EXPORT const char * kw_llm_grammar(int g) { struct kw_llm * l = get(g, "llm_grammar"); return l && l->gbnf ? l->gbnf : ""; }

#define KW_MAX_STOP 64

/* Start a generation: the prompt is text (tokenized here; ids == NULL) or
 * token ids; stops: n_stop NUL-terminated strings one after another.
 * Integer options arrive as doubles so that out-of-range values are named
 * instead of wrapped. max_tokens 0: until end of generation or a full context
 * (with context_shift: until end of generation; a full context drops the older
 * half after the first n_keep ids). cache_prompt: keep the cached ids the
 * prompt starts with (kiln_gen_params.cache_prompt). */
KW_EXPORT int kw_llm_start(int g, const char * text, int text_len, const kiln_token * ids, int n_ids,
                           int add_bos, int parse_special, const char * stops, int n_stop,
                           double max_tokens, double seed, double temperature, double top_k, double top_p,
                           double min_p, double repeat_penalty, double frequency_penalty, double presence_penalty,
                           double penalty_last_n, int context_shift, double n_keep, int cache_prompt) {
    struct kw_llm * l = get(g, "llm_start");
    if (!l) return KW_E_HANDLE;
    int64_t mt, sd, tk, pl, nk;
    if (!int_opt(max_tokens, 0, 2147483647.0, "max_tokens", "an integer >= 0", &mt) ||
        !int_opt(seed, 0, 18446744073709551615.0, "seed", "an integer >= 0", &sd) ||
        !int_opt(top_k, 0, 2147483647.0, "top_k", "an integer >= 0", &tk) ||
        !int_opt(penalty_last_n, -1, 2147483647.0, "penalty_last_n", "an integer >= -1", &pl) ||
        !int_opt(n_keep, 0, 2147483647.0, "n_keep", "an integer >= 0", &nk)) {
        return KW_E_INVALID;
    }
    if (n_stop < 0 || n_stop > KW_MAX_STOP || (n_stop > 0 && !stops)) return kw_fail(KW_E_INVALID, "generate: %d stop strings (at most %d)", n_stop, KW_MAX_STOP);
    struct kiln_sampler_params sp = kiln_sampler_params_default();
    sp.seed = seed >= 18446744073709549568.0 ? UINT64_MAX : (uint64_t) seed;
    sp.temperature = (float) temperature;
    sp.top_k = (int32_t) tk;
    sp.top_p = (float) top_p;
    sp.min_p = (float) min_p;
    sp.repeat_penalty = (float) repeat_penalty;
    sp.frequency_penalty = (float) frequency_penalty;
    sp.presence_penalty = (float) presence_penalty;
    sp.penalty_last_n = (int32_t) pl;
    kiln_clear_error();
    struct kiln_sampler * smpl = kiln_sampler_new(sp);
    if (!smpl) return kw_fail_kiln(KW_E_INVALID, "generate");
    enum kiln_status cs = l->gbnf ? kiln_sampler_set_grammar(smpl, kiln_model_vocab(l->model), l->gbnf, NULL) : KILN_STATUS_SUCCESS;
    if (cs == KILN_STATUS_SUCCESS && l->n_bias > 0) cs = kiln_sampler_set_logit_bias(smpl, l->bias, l->n_bias);
    if (cs == KILN_STATUS_SUCCESS && l->n_logprobs > 0) cs = kiln_sampler_set_logprobs(smpl, l->n_logprobs);
    if (cs != KILN_STATUS_SUCCESS) { kiln_sampler_free(smpl); return kw_fail_status(cs, "generate"); }
    kiln_sampler_free(l->smpl);
    l->smpl = smpl;
    if (!ids) {
        int32_t n = 0;
        ids = kiln_gen_tokenize(l->gen, text, text_len, add_bos != 0, parse_special != 0, &n);
        if (!ids) return kw_fail_kiln(KW_E_INVALID, "tokenize");
        n_ids = n;
    }
    const char * stop[KW_MAX_STOP];
    for (int i = 0; i < n_stop; i++) {
        stop[i] = stops;
        stops += strlen(stops) + 1;
    }
    struct kiln_gen_params gp = kiln_gen_params_default();
    gp.max_tokens = (int32_t) mt;
    gp.stop = stop;
    gp.n_stop = n_stop;
    gp.context_shift = context_shift != 0;
    gp.cache_prompt = cache_prompt != 0;
    gp.n_keep = (int32_t) nk;
    memset(&l->step, 0, sizeof l->step);
    enum kiln_status st = kiln_gen_start(l->gen, l->smpl, ids, n_ids, gp);
    return kw_fail_status(st, "generate");
}

/* One token (kiln_gen_step); its result at kw_llm_step_info(g). */
KW_EXPORT int kw_llm_step(int g) {
    struct kw_llm * l = get(g, "llm_step");
    if (!l) return KW_E_HANDLE;
    struct kiln_gen_token t;
    const enum kiln_status st = kiln_gen_step(l->gen, &t);
    l->step.token = t.token;
    l->step.stop = (int32_t) t.stop;
    l->step.text = (int32_t) (intptr_t) t.text;
    l->step.len = t.len;
    l->lp.n = -1;
    if (st == KILN_STATUS_SUCCESS && t.token >= 0 && l->n_logprobs > 0) {
        l->lp.n = kiln_sampler_get_logprobs(l->smpl, &l->lp.chosen, l->lp.top, KW_MAX_LOGPROBS);
    }
    return kw_fail_status(st, "generate");
}
/* the logits of the last evaluated position (n_vocab floats; the ones the
 * last sample was drawn from when that sample ended the generation), for
 * checking logprobs against them */
KW_EXPORT const float * kw_llm_logits(int g) { struct kw_llm * l = get(g, "llm_logits"); return l ? kiln_model_logits(l->model) : NULL; }
/* the last step's log-probabilities (struct kw_logprobs; n -1: none) */
KW_EXPORT const struct kw_logprobs * kw_llm_logprobs(int g) { struct kw_llm * l = get(g, "llm_logprobs"); return l ? &l->lp : NULL; }
KW_EXPORT const struct kw_step * kw_llm_step_info(int g) { struct kw_llm * l = get(g, "llm_step_info"); return l ? &l->step : NULL; }

/* the last generation's numbers (6 doubles: prompt tokens, generated tokens,
 * prompt seconds, generation seconds, enum kiln_gen_stop, prompt tokens taken
 * from the KV cache) */
KW_EXPORT const struct kw_stats * kw_llm_stats(int g) {
    struct kw_llm * l = get(g, "llm_stats");
    if (!l) return NULL;
    struct kiln_generate_stats s;
    kiln_gen_stats(l->gen, &s);
    l->stats = (struct kw_stats) { s.prompt_tokens, s.generated_tokens, s.prompt_seconds, s.gen_seconds, (double) s.stop,
                                 s.cached_tokens };
    return &l->stats;
}

/* The session's state (kiln_gen_state_save's format, kiln-llama.h): its
 * size, then the bytes written to dst; load checks it all first and changes
 * nothing on a bad, truncated or foreign state. */
KW_EXPORT double kw_llm_state_size(int g) {
    struct kw_llm * l = get(g, "llm_state_size");
    return l ? (double) kiln_gen_state_size(l->gen) : KW_E_HANDLE;
}
KW_EXPORT int kw_llm_state_save(int g, void * dst, double size) {
    struct kw_llm * l = get(g, "llm_state_save");
    if (!l) return KW_E_HANDLE;
    kiln_clear_error();
    return kw_fail_status(kiln_gen_state_save(l->gen, dst, (size_t) size), "state");
}
KW_EXPORT int kw_llm_state_load(int g, const void * src, double size) {
    struct kw_llm * l = get(g, "llm_state_load");
    if (!l) return KW_E_HANDLE;
    kiln_clear_error();
    return kw_fail_status(kiln_gen_state_load(l->gen, src, (size_t) size), "state");
}
