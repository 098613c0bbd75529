/*
 * whisper_full.c — whisper.cpp's whisper_full for one greedy decoder at
 * temperature 0 (no fallback):
 *
 *  - the log-mel of the whole input; windows of 30 s starting at `seek`
 *    (centiseconds of mel frames), until fewer than 10 frames are left;
 *  - per window: encode; the prompt is [<|prev|> + the last tokens of the
 *    previous windows (up to min(n_max_text_ctx, n_text_ctx / 2) - 1)]
 *    + <|sot|> [+ language + task] [+ <|notimestamps|>]; the no-speech
 *    probability is the softmax of the prompt's last logits at <|nosp|>;
 *  - per step, whisper_process_logits' rules: blank and EOT suppressed at
 *    the start, <|notimestamps|>, SOT, NOSP, SOLM, task, language and PREV
 *    tokens never, non-speech symbols when asked, timestamps in pairs (after
 *    a lone timestamp only a timestamp or EOT; after a pair no timestamp),
 *    timestamps never decrease, the first one at most max_initial_ts, and a
 *    timestamp forced whenever the timestamps' total probability beats the
 *    best text token's;
 *  - the argmax (the first of equal maxima), the decoder's stop rules
 *    (EOT, end of audio reached by a timestamp, a decreasing timestamp ->
 *    failed, n_text_ctx / 2 - 4 steps), segments cut at timestamp tokens,
 *    the window advanced by the last timestamp (or the whole window after a
 *    single trailing timestamp).
 */
#include "whisper_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kiln_whisper_params kiln_whisper_default_params(void) {
    struct kiln_whisper_params p;
    memset(&p, 0, sizeof p);
    p.n_threads = 4;
    p.n_max_text_ctx = 16384;
    p.suppress_blank = true;
    p.max_initial_ts = 1.0f;
    p.logprob_thold = -1.0f;
    p.no_speech_thold = 0.6f;
    p.language = "en";
    return p;
}

int kiln_whisper_n_segments(const struct kiln_whisper * w) { return w ? w->n_segs : 0; }
const struct kiln_whisper_segment * kiln_whisper_get_segment(const struct kiln_whisper * w, int i) {
    return w && i >= 0 && i < w->n_segs ? &w->segs[i] : NULL;
}
int kiln_whisper_full_lang_id(const struct kiln_whisper * w) { return w ? w->lang_id : -1; }
const float * kiln_whisper_full_lang_probs(const struct kiln_whisper * w) { return w ? w->lang_probs : NULL; }

static void log_softmax(const float * logits, int n, float * logprobs) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++) if (logits[i] > mx) mx = logits[i];
    float s = 0.0f;
    for (int i = 0; i < n; i++) if (logits[i] > -INFINITY) s += expf(logits[i] - mx);
    s = logf(s) + mx;
    for (int i = 0; i < n; i++) logprobs[i] = logits[i] > -INFINITY ? logits[i] - s : -INFINITY;
}

struct dec_state {
    struct kiln_whisper_token_data * toks;
    int  n_toks;
    int  result_len, seek_delta;
    bool has_ts, failed, completed;
    double sum_logprobs;
};

/* whisper_process_logits for temperature 0: filters logits, fills logprobs/probs */
static void process_logits(const struct kiln_whisper * w, const struct kiln_whisper_params * p, const struct dec_state * d,
                           float * logits, float * logprobs, float * probs) {
    const struct kiln_whisper_tokens * t = &w->tok;
    const int nv = w->n_vocab;
    const bool initial = d->n_toks == 0;
    if (p->suppress_blank && initial) {
        logits[t->eot] = -INFINITY;
        if (w->space_id >= 0) logits[w->space_id] = -INFINITY;
    }
    logits[t->not_ts] = -INFINITY;
    if (p->no_timestamps) for (int i = t->beg; i < nv; i++) logits[i] = -INFINITY;
    logits[t->sot] = -INFINITY;
    logits[t->nosp] = -INFINITY;
    logits[t->solm] = -INFINITY;
    logits[t->translate] = -INFINITY;
    logits[t->transcribe] = -INFINITY;
    logits[t->prev] = -INFINITY;
    for (int i = 0; i < WHISPER_N_LANGS; i++) if (t->sot + 1 + i < nv) logits[t->sot + 1 + i] = -INFINITY;
    if (p->suppress_nst) for (int i = 0; i < w->n_nst; i++) logits[w->nst_ids[i]] = -INFINITY;
    {
        const bool last_ts = d->n_toks > 0 && d->toks[d->n_toks - 1].id >= t->beg;
        const bool penult_ts = d->n_toks < 2 || d->toks[d->n_toks - 2].id >= t->beg;
        if (last_ts) {
            if (penult_ts) for (int i = t->beg; i < nv; i++) logits[i] = -INFINITY;
            else for (int i = 0; i < t->eot; i++) logits[i] = -INFINITY;
        }
    }
    if (initial && p->max_initial_ts > 0.0f) {
        const float precision = (float) KILN_WHISPER_CHUNK_S / (float) w->hp.n_audio_ctx;
        const int tid0 = (int) roundf(p->max_initial_ts / precision);
        for (int i = t->beg + tid0 + 1; i < nv; i++) logits[i] = -INFINITY;
    }
    if (d->has_ts) {
        const int tid0 = d->seek_delta / 2;
        for (int i = t->beg; i < t->beg + tid0 && i < nv; i++) logits[i] = -INFINITY;
    }
    log_softmax(logits, nv, logprobs);
    {
        float ts_lp = -INFINITY, lp_max = -INFINITY;
        for (int i = t->beg; i < nv; i++) if (logprobs[i] > lp_max) lp_max = logprobs[i];
        float s = 0.0f;
        for (int i = t->beg; i < nv; i++) if (logprobs[i] > -INFINITY) s += expf(logprobs[i] - lp_max);
        if (s > 0.0f) ts_lp = logf(s) + lp_max;
        float text_max = -INFINITY;
        for (int i = 0; i < t->beg; i++) if (logprobs[i] > text_max) text_max = logprobs[i];
        if (ts_lp > text_max) for (int i = 0; i < t->beg; i++) { logits[i] = -INFINITY; logprobs[i] = -INFINITY; }
    }
    for (int i = 0; i < nv; i++) probs[i] = logits[i] == -INFINITY ? 0.0f : expf(logprobs[i]);
}

/* whisper_sample_token(best = true), plus the margin to the runner-up */
static struct kiln_whisper_token_data sample_best(const struct kiln_whisper * w, const float * probs, const float * logprobs) {
    struct kiln_whisper_token_data r = { 0 };
    const int nv = w->n_vocab, beg = w->tok.beg;
    double sum_ts = 0.0, max_ts = 0.0;
    for (int i = beg; i < nv; i++) {
        sum_ts += probs[i];
        if (max_ts < probs[i]) { max_ts = probs[i]; r.tid = i; }
    }
    r.pt = (float) (max_ts / (sum_ts + 1e-10));
    r.ptsum = (float) sum_ts;
    int second = -1;
    for (int i = 0; i < nv; i++) {
        if (r.p < probs[i]) { r.id = i; r.p = probs[i]; r.plog = logprobs[i]; }
    }
    for (int i = 0; i < nv; i++) if (i != r.id && (second < 0 || logprobs[i] > logprobs[second])) second = i;
    r.gap = second >= 0 ? r.plog - logprobs[second] : INFINITY;
    if (r.id >= beg) { r.tid = r.id; r.pt = r.p; }
    return r;
}

static bool push_segment(struct kiln_whisper * w, int64_t t0, int64_t t1, const char * text, size_t text_len, float nsp,
                         const struct kiln_whisper_token_data * toks, int n) {
    if (w->n_segs == w->cap_segs) {
        const int cap = w->cap_segs ? 2 * w->cap_segs : 16;
        struct kiln_whisper_segment * s = (struct kiln_whisper_segment *) realloc(w->segs, (size_t) cap * sizeof(*s));
        if (!s) return false;
        w->segs = s;
        w->cap_segs = cap;
    }
    struct kiln_whisper_segment * s = &w->segs[w->n_segs];
    s->t0 = t0; s->t1 = t1; s->no_speech_prob = nsp;
    s->text = (char *) malloc(text_len + 1);
    s->tokens = (struct kiln_whisper_token_data *) malloc((size_t) (n > 0 ? n : 1) * sizeof(*toks));
    if (!s->text || !s->tokens) { free(s->text); free(s->tokens); return false; }
    memcpy(s->text, text, text_len);
    s->text[text_len] = 0;
    memcpy(s->tokens, toks, (size_t) n * sizeof(*toks));
    s->n_tokens = n;
    w->n_segs++;
    return true;
}

int kiln_whisper_detect_language(struct kiln_whisper * w, const float * mel, int n_len, int offset, float * probs) {
    if (!w || !mel || !probs) { kiln_set_last_error("whisper: bad arguments to kiln_whisper_detect_language"); return -1; }
    if (!w->multilingual) { kiln_set_last_error("whisper: language detection needs a multilingual model"); return -1; }
    float * logits = (float *) malloc((size_t) w->n_vocab * sizeof(float));
    if (!logits) { kiln_set_last_error("whisper: out of memory"); return -1; }
    const int32_t sot = w->tok.sot;
    if (!kiln_whisper_encode(w, mel, n_len, offset) || !kiln_whisper_decode(w, &sot, 1, 0, logits)) { free(logits); return -1; }
    /* softmax over the language tokens' logits (in double, as whisper.cpp) */
    float mx = -INFINITY;
    int best = 0;
    for (int i = 0; i < WHISPER_N_LANGS; i++) {
        const float v = logits[sot + 1 + i];
        if (v > mx) { mx = v; best = i; }
    }
    double sum = 0.0;
    for (int i = 0; i < WHISPER_N_LANGS; i++) { probs[i] = expf(logits[sot + 1 + i] - mx); sum += probs[i]; }
    for (int i = 0; i < WHISPER_N_LANGS; i++) probs[i] = (float) (probs[i] / sum);
    free(logits);
    return best;
}

static void clear_segments(struct kiln_whisper * w) {
    for (int i = 0; i < w->n_segs; i++) { free(w->segs[i].text); free(w->segs[i].tokens); }
    w->n_segs = 0;
}

int kiln_whisper_full(struct kiln_whisper * w, const struct kiln_whisper_params * p, const float * samples, int64_t n) {
    if (!w || !p || (n > 0 && !samples) || n < 0) { kiln_set_last_error("whisper: bad arguments to kiln_whisper_full"); return -1; }
    clear_segments(w);
    memset(w->lang_probs, 0, sizeof w->lang_probs);
    kiln_whisper_set_n_threads(w, p->n_threads);
    const struct kiln_whisper_tokens * t = &w->tok;
    const int nv = w->n_vocab, n_text_ctx = w->hp.n_text_ctx;
    float * mel = NULL;
    int n_len = 0, n_len_org = 0;
    if (!kiln_whisper_log_mel(samples, n, w->filters, w->n_mel_f, w->n_fft_f, &mel, &n_len, &n_len_org)) return -1;

    int rc = -1;
    float * logits = (float *) malloc((size_t) nv * sizeof(float) * 3);
    int32_t * prompt = (int32_t *) malloc((size_t) n_text_ctx * sizeof(int32_t));
    int32_t * past = (int32_t *) malloc((size_t) 2 * n_text_ctx * sizeof(int32_t) + 16);
    struct dec_state d = { 0 };
    d.toks = (struct kiln_whisper_token_data *) malloc((size_t) n_text_ctx * sizeof(*d.toks));
    char * text = (char *) malloc((size_t) n_text_ctx * 256 + 1);
    if (!logits || !prompt || !past || !d.toks || !text) { kiln_set_last_error("whisper: out of memory"); goto done; }
    float * logprobs = logits + nv, * probs = logits + 2 * (size_t) nv;

    /* language */
    int lang_id = 0;
    if (!p->language || !p->language[0] || strcmp(p->language, "auto") == 0) {
        if (!w->multilingual) lang_id = 0;
        else if ((lang_id = kiln_whisper_detect_language(w, mel, n_len, 0, w->lang_probs)) < 0) goto done;
    } else if ((lang_id = kiln_whisper_lang_id(p->language)) < 0) {
        kiln_set_last_error("whisper: unknown language '%s'", p->language);
        goto done;
    }
    w->lang_id = lang_id;

    const int seek_end = n_len_org, delta_min = 10;
    if (seek_end < delta_min) { rc = 0; goto done; }
    int32_t prompt_init[4];
    int n_init = 0;
    prompt_init[n_init++] = t->sot;
    if (w->multilingual) {
        prompt_init[n_init++] = t->sot + 1 + lang_id;
        prompt_init[n_init++] = p->translate ? t->translate : t->transcribe;
    }
    /* whisper.cpp takes a 2-layer decoder (not large-v3's vocabulary) for a first-release
     * distilled model and decodes it without timestamps */
    struct kiln_whisper_params pp = *p;
    if (w->hp.n_text_layer == 2 && w->hp.n_vocab != 51866) pp.no_timestamps = true;
    p = &pp;
    if (p->no_timestamps) prompt_init[n_init++] = t->not_ts;
    const int max_prompt_ctx = p->n_max_text_ctx < n_text_ctx / 2 ? p->n_max_text_ctx : n_text_ctx / 2;
    int n_past_toks = 0;
    const int n_max = n_text_ctx / 2 - 4;
    const int window = 100 * KILN_WHISPER_CHUNK_S;

    for (int seek = 0; seek + delta_min < seek_end;) {
        if (!kiln_whisper_encode(w, mel, n_len, seek)) goto done;
        if (seek > 0 && seek + 500 >= seek_end) n_past_toks = 0;
        int np = 0;
        if (p->n_max_text_ctx > 0 && max_prompt_ctx > 0 && n_past_toks > 0) {
            prompt[np++] = t->prev;
            int take = max_prompt_ctx - 1 < n_past_toks ? max_prompt_ctx - 1 : n_past_toks;
            memcpy(prompt + np, past + n_past_toks - take, (size_t) take * sizeof(int32_t));
            np += take;
        }
        memcpy(prompt + np, prompt_init, (size_t) n_init * sizeof(int32_t));
        np += n_init;

        d.n_toks = 0; d.result_len = 0; d.seek_delta = window; d.has_ts = d.failed = d.completed = false; d.sum_logprobs = 0;
        if (!kiln_whisper_decode(w, prompt, np, 0, logits)) goto done;
        log_softmax(logits, nv, logprobs);
        const float no_speech_prob = expf(logprobs[t->nosp]);
        process_logits(w, p, &d, logits, logprobs, probs);
        for (int i = 0; i < n_max; i++) {
            struct kiln_whisper_token_data tok = sample_best(w, probs, logprobs);
            d.toks[d.n_toks++] = tok;
            d.sum_logprobs += tok.plog;
            bool stop = false;
            if (tok.id > t->beg) {
                const int sd_new = 2 * (tok.id - t->beg);
                if (d.has_ts && d.seek_delta > sd_new && d.result_len < i) { d.failed = true; break; }
                d.seek_delta = sd_new;
                d.result_len = i + 1;
                d.has_ts = true;
            }
            if (tok.id == t->eot || (d.has_ts && seek + d.seek_delta + delta_min >= seek_end)) {
                if (d.result_len == 0 && !p->no_timestamps) {
                    if (seek + d.seek_delta + delta_min >= seek_end) d.result_len = i + 1;
                    else { d.failed = true; break; }
                }
                if (p->single_segment || p->no_timestamps) { d.result_len = i + 1; d.seek_delta = window; }
                d.completed = true;
                stop = true;
            }
            if (!stop && i == n_max - 1 && (d.result_len == 0 || d.seek_delta < window / 2)) { d.failed = true; break; }
            if (stop) break;
            if (!kiln_whisper_decode(w, &tok.id, 1, np + i, logits)) goto done;
            process_logits(w, p, &d, logits, logprobs, probs);
        }
        /* a failed decoder keeps all its tokens (whisper.cpp truncates only the successful ones) */
        double avg_logprobs = -INFINITY;
        if (!d.failed) {
            d.n_toks = d.result_len;
            if (d.result_len > 0) {
                double s = 0.0;
                for (int i = 0; i < d.result_len; i++) s += d.toks[i].plog;
                avg_logprobs = s / d.result_len;
            }
        }
        const bool is_no_speech = no_speech_prob > p->no_speech_thold && avg_logprobs < p->logprob_thold;
        /* the context for the next window: the previous prompt's history, then this window's tokens */
        {
            int n_hist = 0;
            if (np > n_init && prompt[0] == t->prev) {
                n_hist = np - 1 - n_init;
                memmove(past, prompt + 1, (size_t) n_hist * sizeof(int32_t));
            }
            n_past_toks = n_hist;
            if (!is_no_speech) for (int i = 0; i < d.result_len && n_past_toks < 2 * n_text_ctx; i++) past[n_past_toks++] = d.toks[i].id;
        }
        int seek_delta = d.seek_delta;
        if (d.n_toks > 0 && !is_no_speech) {
            int i0 = 0;
            int64_t t0 = seek + 2 * (d.toks[0].tid - t->beg);
            size_t tl = 0;
            for (int i = 0; i < d.n_toks; i++) {
                if (d.toks[i].id < t->eot) {
                    size_t len;
                    const char * s = kiln_whisper_token_text(w, d.toks[i].id, &len);
                    if (tl + len < (size_t) n_text_ctx * 256) { memcpy(text + tl, s, len); tl += len; }
                }
                if (d.toks[i].id > t->beg && !p->single_segment) {
                    const int64_t t1 = seek + 2 * (d.toks[i].tid - t->beg);
                    if (tl > 0) {
                        if (!push_segment(w, t0, t1, text, tl, no_speech_prob, d.toks + i0, i - i0 + 1)) { kiln_set_last_error("whisper: out of memory"); goto done; }
                        if (p->on_segment) p->on_segment(w, w->n_segs - 1, p->user);
                    }
                    tl = 0;
                    t0 = t1;
                    while (i + 1 < d.n_toks && d.toks[i + 1].id > t->beg) { i++; t0 = seek + 2 * (d.toks[i].tid - t->beg); }
                    i0 = i + 1;
                }
            }
            if (tl > 0) {
                if (!push_segment(w, t0, seek + seek_delta, text, tl, no_speech_prob, d.toks + i0, d.n_toks - i0)) { kiln_set_last_error("whisper: out of memory"); goto done; }
                if (p->on_segment) p->on_segment(w, w->n_segs - 1, p->user);
            }
        }
        const bool single_ts_ending = d.n_toks > 1 && d.toks[d.n_toks - 2].id < t->beg && d.toks[d.n_toks - 1].id > t->beg;
        if (single_ts_ending) seek_delta = seek_end - seek < window ? seek_end - seek : window;
        seek += seek_delta;
    }
    rc = 0;
done:
    free(mel); free(logits); free(prompt); free(past); free(d.toks); free(text);
    return rc;
}
