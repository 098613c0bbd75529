/*
 * generate.c — the generation loop: prompt, sample, emit text that is safe
 * to show (whole characters, nothing that may still turn into a stop
 * string), stop on EOS / stop strings / max tokens / a full context.
 */
#include "kiln-llama.h"
#include "textstream.h"

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

/* show what is ready; true when a stop string ended the text */
static bool flush(struct textstream * ts, bool final, kiln_token tok, kiln_piece_callback cb, void * ud) {
    bool hit = false;
    size_t n = textstream_ready(ts, final, &hit);
    if (cb && (n > 0 || tok >= 0)) {
        cb(ts->buf ? ts->buf : "", (int32_t) n, tok, ud);
    }
    textstream_consume(ts, hit ? ts->n : n);
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

    struct textstream ts = { NULL, 0, 0, gp.stop, gp.n_stop };
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
        bool added = true;
        if (n < 0 && n != INT32_MIN) { /* a long piece */
            char * big = malloc((size_t) -n);
            added = big && kiln_token_to_piece(vocab, tok, big, -n, 0, false) == -n && textstream_add(&ts, big, (size_t) -n);
            free(big);
        } else if (n > 0) {
            added = textstream_add(&ts, piece, (size_t) n);
        }
        if (!added) {
            kiln_set_last_error("kiln_generate: out of memory");
            s = KILN_STATUS_ALLOC_FAILED;
            break;
        }
        if (flush(&ts, false, tok, cb, ud)) {
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
        flush(&ts, true, KILN_TOKEN_NULL, cb, ud);
    }
    textstream_free(&ts);
    int64_t tg1 = kiln_time_us();
    st.tokens_per_second = n_evals > 0 ? n_evals / ((tg1 - tg0) / 1e6 + 1e-9) : 0.0;
    if (stats) {
        *stats = st;
    }
    return s;
}
