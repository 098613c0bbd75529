/*
 * generate.c — the generation loop: prompt, sample, emit text that is safe
 * to show (whole characters, nothing that may still turn into a stop
 * string), stop on EOS / stop strings / max tokens / a full context.
 */
#include "kiln-llama.h"

#include <stdlib.h>
#include <string.h>

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

struct pending {
    char * buf;
    size_t n, cap;
};

static bool pending_add(struct pending * p, const char * s, size_t n) {
    if (p->n + n > p->cap) {
        size_t cap = (p->n + n) * 2 + 64;
        char * b = realloc(p->buf, cap);
        if (!b) {
            return false;
        }
        p->buf = b;
        p->cap = cap;
    }
    memcpy(p->buf + p->n, s, n);
    p->n += n;
    return true;
}

/* bytes at the end that start a UTF-8 character not yet complete */
static size_t incomplete_tail(const char * s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) {
            continue; /* continuation: look further back */
        }
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

/* emit what is safe; returns true when a stop string was found (text up to
 * it emitted) */
static bool flush(struct pending * p, const struct kiln_generate_params * gp, bool final, kiln_token tok,
                  kiln_piece_callback cb, void * ud) {
    size_t stop_at = p->n;
    bool hit = false;
    for (int32_t i = 0; i < gp->n_stop; i++) {
        const char * s = gp->stop[i];
        size_t sl = s ? strlen(s) : 0;
        if (sl == 0 || sl > p->n) {
            continue;
        }
        for (size_t k = 0; k + sl <= p->n; k++) {
            if (memcmp(p->buf + k, s, sl) == 0) {
                if (k < stop_at) {
                    stop_at = k;
                }
                hit = true;
                break;
            }
        }
    }
    size_t emit = stop_at;
    if (!hit && !final) {
        /* hold back the longest suffix that is a prefix of a stop string */
        size_t hold = 0;
        for (int32_t i = 0; i < gp->n_stop; i++) {
            const char * s = gp->stop[i];
            size_t sl = s ? strlen(s) : 0;
            for (size_t l = sl > 0 ? sl - 1 : 0; l > hold; l--) {
                if (l <= p->n && memcmp(p->buf + p->n - l, s, l) == 0) {
                    hold = l;
                    break;
                }
            }
        }
        emit = p->n - hold;
        emit -= incomplete_tail(p->buf, emit);
    }
    if (cb && (emit > 0 || tok >= 0)) {
        cb(p->buf, (int32_t) emit, tok, ud);
    }
    memmove(p->buf, p->buf + emit, p->n - emit);
    p->n -= emit;
    if (hit) {
        p->n = 0;
    }
    return hit;
}

enum kiln_status kiln_generate(struct kiln_model * model, struct kiln_sampler * smpl, const char * prompt,
                               struct kiln_generate_params gp, kiln_piece_callback cb, void * ud,
                               struct kiln_generate_stats * stats) {
    struct kiln_generate_stats st = { 0 };
    if (stats) {
        *stats = st;
    }
    if (!model || !smpl || !prompt) {
        kiln_set_last_error("kiln_generate: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    const struct kiln_vocab * vocab = kiln_model_vocab(model);
    const int32_t n_ctx = kiln_model_n_ctx(model);
    const int32_t n_vocab = kiln_model_n_vocab(model);
    int32_t len = (int32_t) strlen(prompt);
    int32_t n_prompt = kiln_tokenize(vocab, prompt, len, NULL, 0, gp.add_special, gp.parse_special);
    if (n_prompt == INT32_MIN) {
        return KILN_STATUS_INVALID_ARG;
    }
    n_prompt = n_prompt < 0 ? -n_prompt : n_prompt;
    if (n_prompt == 0) {
        kiln_set_last_error("kiln_generate: the prompt gives no tokens (empty prompt and no BOS)");
        return KILN_STATUS_INVALID_ARG;
    }
    if (n_prompt > n_ctx) {
        kiln_set_last_error("kiln_generate: the prompt is %d tokens, longer than the context of %d tokens", n_prompt, n_ctx);
        return KILN_STATUS_INVALID_ARG;
    }
    kiln_token * toks = malloc(sizeof(kiln_token) * (size_t) n_prompt);
    if (!toks) {
        kiln_set_last_error("kiln_generate: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    kiln_tokenize(vocab, prompt, len, toks, n_prompt, gp.add_special, gp.parse_special);

    kiln_model_reset(model);
    kiln_sampler_reset(smpl);
    int64_t t0 = kiln_time_us();
    enum kiln_status s = kiln_model_eval(model, toks, n_prompt);
    int64_t t1 = kiln_time_us();
    st.prompt_tokens = n_prompt;
    st.prompt_tokens_per_second = n_prompt / ((t1 - t0) / 1e6 + 1e-9);
    for (int32_t i = 0; i < n_prompt; i++) {
        kiln_sampler_accept(smpl, toks[i]);
    }
    free(toks);

    struct pending pend = { 0 };
    char piece[256];
    int32_t n_evals = 0;
    int64_t tg0 = kiln_time_us();
    while (s == KILN_STATUS_SUCCESS) {
        if (gp.max_tokens > 0 && st.generated_tokens >= gp.max_tokens) {
            break;
        }
        kiln_token tok = kiln_sampler_sample(smpl, kiln_model_logits(model), n_vocab);
        if (tok < 0) {
            s = KILN_STATUS_FAILED;
            break;
        }
        kiln_sampler_accept(smpl, tok);
        if (kiln_vocab_is_eog(vocab, tok)) {
            st.stopped_by_eog = true;
            break;
        }
        st.generated_tokens++;
        int32_t n = kiln_token_to_piece(vocab, tok, piece, sizeof piece, 0, false);
        if (n > 0 && !pending_add(&pend, piece, (size_t) n)) {
            kiln_set_last_error("kiln_generate: out of memory");
            s = KILN_STATUS_ALLOC_FAILED;
            break;
        }
        if (flush(&pend, &gp, false, tok, cb, ud)) {
            st.stopped_by_string = true;
            break;
        }
        if ((gp.max_tokens > 0 && st.generated_tokens >= gp.max_tokens) || kiln_model_n_past(model) >= n_ctx) {
            break;
        }
        s = kiln_model_eval(model, &tok, 1);
        n_evals++;
    }
    if (!st.stopped_by_string) {
        flush(&pend, &gp, true, KILN_TOKEN_NULL, cb, ud);
    }
    free(pend.buf);
    int64_t tg1 = kiln_time_us();
    st.tokens_per_second = n_evals > 0 ? n_evals / ((tg1 - tg0) / 1e6 + 1e-9) : 0.0;
    if (stats) {
        *stats = st;
    }
    return s;
}
