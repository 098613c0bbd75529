/*
 * whisper_full.c — whisper.cpp's whisper_full:
 *
 *  - the log-mel of the whole input; windows of 30 s starting at `seek`
 *    (centiseconds of mel frames), until fewer than 10 frames are left;
 *  - per window: encode; then for each temperature of the fallback ladder
 *    (temperature, + temperature_inc, ... up to 1.0; one step when the
 *    increment is 0): decoders = beam_size (beam search at t = 0) or best_of
 *    (at t > 0: samples, or beams of the beam search strategy) or 1 (greedy
 *    at t = 0); the prompt is [<|prev|> +
 *    the carried initial prompt + the last tokens of the previous windows,
 *    only below t = 0.5] + <|sot|> [+ language + task] [+ <|notimestamps|>];
 *    the no-speech probability is the softmax of the prompt's last logits
 *    at <|nosp|>;
 *  - per step and decoder, whisper_process_logits' rules on the logits
 *    divided by the temperature: blank and EOT suppressed at the start,
 *    <|notimestamps|>, SOT, NOSP, SOLM, task, language and PREV tokens never,
 *    non-speech symbols when asked, timestamps in pairs, timestamps never
 *    decreasing, the first one at most max_initial_ts, and a timestamp
 *    forced whenever the timestamps' total probability beats the best text
 *    token's;
 *  - the choice: the argmax (greedy, t = 0); one draw of libstdc++'s
 *    std::discrete_distribution with the decoder's std::mt19937 (sampling);
 *    beam search as whisper.cpp does it: beam_size draws per live decoder
 *    (with replacement), all candidates sorted by their summed log-prob
 *    (ties: lower decoder first), each live decoder takes the next candidate,
 *    skipping ones equal to the one just taken, and that candidate's
 *    self-attention cache;
 *  - the next step's logits of all live decoders (beams, or best-of
 *    samples) from one decoder batch, one token per decoder, as whisper.cpp
 *    evaluates them: the weights are read once per step, not once per
 *    decoder; each decoder keeps its own cache slot (whisper_graph.c);
 *  - the stop rules (EOT, end of audio reached by a timestamp, a decreasing
 *    timestamp -> failed, n_text_ctx / 2 - 4 steps), then the ranking:
 *    sum of log-probs / length (or whisper.cpp's length penalty), a decoder
 *    with more than 32 tokens whose last 32 tokens have an entropy below
 *    entropy_thold fails; the next temperature is tried when the best
 *    decoder failed or its average log-prob is below logprob_thold while
 *    the no-speech probability is below no_speech_thold;
 *  - segments cut at timestamp tokens, the window advanced by the last
 *    timestamp (or the whole window after a single trailing timestamp).
 */
#include "whisper_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kiln_whisper_params kiln_whisper_default_params(void) {
    struct kiln_whisper_params p;
    memset(&p, 0, sizeof p);
    p.strategy = KILN_WHISPER_GREEDY;
    p.n_threads = 4;
    p.n_max_text_ctx = 16384;
    p.suppress_blank = true;
    p.temperature = 0.0f;
    p.max_initial_ts = 1.0f;
    p.length_penalty = -1.0f;
    p.temperature_inc = 0.2f;
    p.entropy_thold = 2.4f;
    p.logprob_thold = -1.0f;
    p.no_speech_thold = 0.6f;
    p.best_of = 5;
    p.beam_size = 5;
    p.language = "en";
    p.vad_params = kiln_vad_default_params();
    return p;
}

int kiln_whisper_n_segments(const struct kiln_whisper * w) { return w ? w->n_segs : 0; }
const struct kiln_whisper_segment * kiln_whisper_get_segment(const struct kiln_whisper * w, int i) {
    return w && i >= 0 && i < w->n_segs ? &w->segs[i] : NULL;
}
void kiln_whisper_full_margins(const struct kiln_whisper * w, float * min_gap, float * min_draw) {
    if (min_gap) *min_gap = w ? w->min_gap : INFINITY;
    if (min_draw) *min_draw = w ? w->min_draw : INFINITY;
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

#define HISTORY_TEMP_CUTOFF 0.5f   /* whisper.cpp's WHISPER_HISTORY_CONDITIONING_TEMP_CUTOFF */

struct seq {
    struct kiln_whisper_token_data * toks;   /* capacity n_text_ctx */
    int    n_toks, result_len;
    double sum_logprobs_all, sum_logprobs, avg_logprobs, entropy, score;
};

struct decoder {
    struct seq s;
    int    seek_delta;
    bool   has_ts, failed, completed;
    float * logits, * logprobs, * probs;
    float  ts_margin;                         /* of the last process_logits */
    int    slot;                              /* its self-attention cache */
};

struct cand {
    int  dec, seek_delta;
    bool has_ts;
    struct seq s;
};

static void seq_copy(struct seq * d, const struct seq * s) {
    struct kiln_whisper_token_data * t = d->toks;
    *d = *s;
    d->toks = t;
    memcpy(d->toks, s->toks, (size_t) s->n_toks * sizeof(*t));
}

/* whisper_process_logits: filters dec->logits (the raw logits, divided here by the temperature), fills logprobs/probs */
static void process_logits(const struct kiln_whisper * w, const struct kiln_whisper_params * p, struct decoder * dec, float temperature) {
    const struct kiln_whisper_tokens * t = &w->tok;
    const int nv = w->n_vocab;
    float * logits = dec->logits, * logprobs = dec->logprobs, * probs = dec->probs;
    const struct kiln_whisper_token_data * toks = dec->s.toks;
    const int n_toks = dec->s.n_toks;
    const bool initial = n_toks == 0;
    if (temperature > 0.0f) for (int i = 0; i < nv; i++) logits[i] /= temperature;
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
    if (p->logits_filter) p->logits_filter(w, toks, n_toks, logits, p->logits_filter_user);
    if (p->suppress_nst) for (int i = 0; i < w->n_nst; i++) logits[w->nst_ids[i]] = -INFINITY;
    {
        const bool last_ts = n_toks > 0 && toks[n_toks - 1].id >= t->beg;
        const bool penult_ts = n_toks < 2 || toks[n_toks - 2].id >= t->beg;
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
    if (dec->has_ts) {
        const int tid0 = dec->seek_delta / 2;
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
        dec->ts_margin = ts_lp > -INFINITY && text_max > -INFINITY ? ts_lp - text_max : NAN;
        if (ts_lp > text_max) for (int i = 0; i < t->beg; i++) { logits[i] = -INFINITY; logprobs[i] = -INFINITY; }
    }
    for (int i = 0; i < nv; i++) probs[i] = logits[i] == -INFINITY ? 0.0f : expf(logprobs[i]);
}

/* the timestamp part of a token's data: the most probable timestamp and its share */
static void ts_info(const struct kiln_whisper * w, const float * probs, int32_t tid_init, struct kiln_whisper_token_data * r) {
    double sum_ts = 0.0, max_ts = 0.0;
    r->tid = tid_init;
    for (int i = w->tok.beg; i < w->n_vocab; i++) {
        sum_ts += probs[i];
        if (max_ts < probs[i]) { max_ts = probs[i]; r->tid = i; }
    }
    r->pt = (float) (max_ts / (sum_ts + 1e-10));
    r->ptsum = (float) sum_ts;
}

/* whisper_sample_token(best = true), plus the margin to the runner-up */
static struct kiln_whisper_token_data sample_best(const struct kiln_whisper * w, const struct decoder * dec) {
    struct kiln_whisper_token_data r = { 0 };
    const float * probs = dec->probs, * logprobs = dec->logprobs;
    const int nv = w->n_vocab;
    ts_info(w, probs, 0, &r);
    int second = -1;
    for (int i = 0; i < nv; i++) {
        if (r.p < probs[i]) { r.id = i; r.p = probs[i]; r.plog = logprobs[i]; }
    }
    for (int i = 0; i < nv; i++) if (i != r.id && (second < 0 || logprobs[i] > logprobs[second])) second = i;
    r.gap = second >= 0 ? r.plog - logprobs[second] : INFINITY;
    r.ts_margin = dec->ts_margin;
    if (r.id >= w->tok.beg) { r.tid = r.id; r.pt = r.p; }
    return r;
}

/* k draws from the decoder's distribution (whisper_sample_token(best = false) for k = 1 with tid_init 0,
 * whisper_sample_token_topk with tid_init = the first timestamp token) */
static void sample_draws(const struct kiln_whisper * w, const struct decoder * dec, struct whisper_mt19937 * rng, double * cp,
                         int k, int32_t tid_init, struct kiln_whisper_token_data * out) {
    struct kiln_whisper_token_data base = { 0 };
    ts_info(w, dec->probs, tid_init, &base);
    const int nv = w->n_vocab;
    const bool ok = whisper_discrete_setup(dec->probs, nv, cp) == 0;
    for (int i = 0; i < k; i++) {
        struct kiln_whisper_token_data r = base;
        double margin = 0.0;
        r.id = ok ? whisper_discrete_draw(rng, cp, nv, &margin) : 0;
        r.p = dec->probs[r.id];
        r.plog = dec->logprobs[r.id];
        r.gap = (float) margin;
        r.ts_margin = dec->ts_margin;
        if (r.id >= w->tok.beg) { r.tid = r.id; r.pt = r.p; }
        out[i] = r;
    }
}

/* whisper_sequence_score */
static void seq_score(const struct kiln_whisper_params * p, struct seq * s) {
    if (s->result_len == 0) return;
    double r = 0.0;
    for (int i = 0; i < s->result_len; i++) r += s->toks[i].plog;
    s->sum_logprobs = r;
    s->avg_logprobs = r / s->result_len;
    double penalty = s->result_len;
    if (p->length_penalty > 0.0f) penalty = pow((5.0 + penalty) / 6.0, p->length_penalty);
    s->score = r / penalty;
    /* entropy of the last 32 tokens' ids, summed in increasing id order */
    int32_t ids[32];
    int cnt = 0;
    for (int i = s->result_len - 32 > 0 ? s->result_len - 32 : 0; i < s->result_len; i++) ids[cnt++] = s->toks[i].id;
    for (int i = 1; i < cnt; i++) for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) { const int32_t x = ids[j]; ids[j] = ids[j - 1]; ids[j - 1] = x; }
    double e = 0.0;
    for (int i = 0; i < cnt;) {
        int j = i;
        while (j < cnt && ids[j] == ids[i]) j++;
        const double q = (j - i) / (double) cnt;
        e -= q * log(q);
        i = j;
    }
    s->entropy = e;
}

static bool seq_equal(const struct seq * a, const struct seq * b) {
    if (a->n_toks != b->n_toks) return false;
    for (int i = a->n_toks - 1; i >= 0; i--) if (a->toks[i].id != b->toks[i].id) return false;
    return true;
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

/* the decoding state of one whisper_full call (buffers sized once) */
struct full_state {
    struct decoder dec[WHISPER_MAX_DECODERS];
    struct cand  * cands; int n_cands, cap_cands;
    struct kiln_whisper_token_data draws[WHISPER_MAX_DECODERS];
    double * cp;
    float  * raw;               /* the last decode's logits */
    int32_t * prompt, * past0, * past1;
    int n_prompt, n_past0, n_past1;
    struct kiln_whisper_token_data * tok_pool;
    char * text;
    float min_gap, min_draw;    /* the closest decisions of the call (see kiln_whisper_full_margins) */
};

static void note_margins(struct full_state * st, const struct kiln_whisper_token_data * tok, bool drawn) {
    if (drawn) { if (tok->gap < st->min_draw) st->min_draw = tok->gap; }
    else if (tok->gap < st->min_gap) st->min_gap = tok->gap;
    if (isfinite(tok->ts_margin) && fabsf(tok->ts_margin) < st->min_gap) st->min_gap = fabsf(tok->ts_margin);
}

static void full_state_free(struct full_state * st) {
    free(st->cands); free(st->cp); free(st->raw); free(st->prompt); free(st->past0); free(st->past1);
    free(st->tok_pool); free(st->text);
    for (int j = 0; j < WHISPER_MAX_DECODERS; j++) free(st->dec[j].logits);
}

static bool full_state_init(struct full_state * st, const struct kiln_whisper * w, int n_dec, int n_cands) {
    memset(st, 0, sizeof *st);
    const size_t nv = (size_t) w->n_vocab, tc = (size_t) w->hp.n_text_ctx;
    st->cap_cands = n_cands;
    st->cands = (struct cand *) calloc((size_t) n_cands, sizeof(struct cand));
    st->cp = (double *) malloc(nv * sizeof(double));
    st->raw = (float *) malloc(nv * sizeof(float));
    st->prompt = (int32_t *) malloc(tc * sizeof(int32_t) + 64);
    st->past0 = (int32_t *) malloc(tc * sizeof(int32_t) + 64);
    st->past1 = (int32_t *) malloc((4 * tc + 1024) * sizeof(int32_t));
    st->tok_pool = (struct kiln_whisper_token_data *) malloc((size_t) (n_dec + n_cands) * tc * sizeof(struct kiln_whisper_token_data));
    st->text = (char *) malloc(tc * 256 + 1);
    if (!st->cands || !st->cp || !st->raw || !st->prompt || !st->past0 || !st->past1 || !st->tok_pool || !st->text) return false;
    for (int j = 0; j < n_dec; j++) {
        st->dec[j].logits = (float *) malloc(3 * nv * sizeof(float));
        if (!st->dec[j].logits) return false;
        st->dec[j].logprobs = st->dec[j].logits + nv;
        st->dec[j].probs = st->dec[j].logits + 2 * nv;
        st->dec[j].s.toks = st->tok_pool + (size_t) j * tc;
    }
    for (int c = 0; c < n_cands; c++) st->cands[c].s.toks = st->tok_pool + (size_t) (n_dec + c) * tc;
    return true;
}

/* one decoding pass of a window at temperature t_cur with n decoders; the best decoder's index in *best
 * (unchanged when all fail, as in whisper.cpp). Returns false on an engine error. */
static bool decode_window(struct kiln_whisper * w, const struct kiln_whisper_params * p, struct full_state * st, int n,
                          float t_cur, int seek, int seek_end, float * no_speech_prob, int * best) {
    const struct kiln_whisper_tokens * t = &w->tok;
    const int nv = w->n_vocab, np = st->n_prompt, delta_min = 10, window = 100 * KILN_WHISPER_CHUNK_S;
    const bool beam = p->strategy == KILN_WHISPER_BEAM_SEARCH;   /* at every temperature, as whisper.cpp (best_of beams above 0) */
    const int n_max = w->hp.n_text_ctx / 2 - 4;
    for (int j = 0; j < n; j++) {
        struct decoder * d = &st->dec[j];
        d->s.n_toks = 0; d->s.result_len = 0;
        d->s.sum_logprobs_all = 0.0; d->s.sum_logprobs = d->s.avg_logprobs = -INFINITY; d->s.entropy = 0.0; d->s.score = -INFINITY;
        d->seek_delta = window;
        d->failed = d->completed = d->has_ts = false;
        d->slot = j;
    }
    if (!whisper_kv_slots(w, n)) return false;
    whisper_kv_use(w, 0);
    if (!kiln_whisper_decode(w, st->prompt, np, 0, st->raw)) return false;
    {
        float * lp = st->dec[0].logprobs;
        log_softmax(st->raw, nv, lp);
        *no_speech_prob = expf(lp[t->nosp]);
    }
    memcpy(st->dec[0].logits, st->raw, (size_t) nv * sizeof(float));
    process_logits(w, p, &st->dec[0], t_cur);
    for (int j = 1; j < n; j++) {
        whisper_kv_copy(w, j, 0, np);
        memcpy(st->dec[j].logits, st->dec[0].logits, 3 * (size_t) nv * sizeof(float));
        st->dec[j].ts_margin = st->dec[0].ts_margin;
    }
    int phys_new[WHISPER_MAX_DECODERS];
    for (int i = 0; i < n_max; i++) {
        st->n_cands = 0;
        for (int j = 0; j < n; j++) {
            struct decoder * d = &st->dec[j];
            if (d->completed || d->failed) continue;
            if (!beam) {
                struct kiln_whisper_token_data tok;
                if (t_cur < 1e-6f) tok = sample_best(w, d);
                else sample_draws(w, d, &w->rng[j], st->cp, 1, 0, &tok);
                note_margins(st, &tok, t_cur >= 1e-6f);
                d->s.toks[d->s.n_toks++] = tok;
                d->s.sum_logprobs_all += tok.plog;
            } else {
                sample_draws(w, d, &w->rng[j], st->cp, p->beam_size, t->beg, st->draws);
                for (int k = 0; k < p->beam_size; k++) {
                    note_margins(st, &st->draws[k], true);
                    struct cand * c = &st->cands[st->n_cands++];
                    c->dec = j; c->seek_delta = d->seek_delta; c->has_ts = d->has_ts;
                    seq_copy(&c->s, &d->s);
                    c->s.toks[c->s.n_toks++] = st->draws[k];
                    c->s.sum_logprobs_all += st->draws[k].plog;
                }
            }
        }
        if (beam) {
            /* stable insertion sort: summed log-prob descending, then decoder ascending */
            for (int a = 1; a < st->n_cands; a++) {
                for (int b = a; b > 0; b--) {
                    struct cand * x = &st->cands[b - 1], * y = &st->cands[b];
                    const bool swap = y->s.sum_logprobs_all > x->s.sum_logprobs_all ||
                                      (y->s.sum_logprobs_all == x->s.sum_logprobs_all && y->dec < x->dec);
                    if (!swap) break;
                    struct cand tmp = *x; *x = *y; *y = tmp;
                }
            }
            /* each live decoder takes the next candidate; its cache comes from the candidate's decoder */
            int src[WHISPER_MAX_DECODERS];
            int cur_c = 0;
            for (int j = 0; j < n; j++) {
                struct decoder * d = &st->dec[j];
                src[j] = -1;
                if (d->completed || d->failed) continue;
                if (cur_c >= st->n_cands) cur_c = 0;
                const struct cand * c = &st->cands[cur_c++];
                while (st->n_cands > cur_c && seq_equal(&st->cands[cur_c].s, &c->s) && i > 0) cur_c++;
                d->seek_delta = c->seek_delta;
                d->has_ts = c->has_ts;
                seq_copy(&d->s, &c->s);
                src[j] = c->dec;
            }
            /* caches: a source's slot goes to the first decoder that takes it; others get a copy in a free slot */
            bool claimed[WHISPER_MAX_DECODERS] = { false }, used[WHISPER_MAX_DECODERS] = { false };
            int phys_old[WHISPER_MAX_DECODERS];
            for (int j = 0; j < n; j++) phys_old[j] = st->dec[j].slot;
            for (int j = 0; j < n; j++) if (src[j] >= 0) used[phys_old[src[j]]] = true;
            for (int j = 0; j < n; j++) {
                phys_new[j] = phys_old[j];
                if (src[j] < 0) continue;
                const int ps = phys_old[src[j]];
                if (!claimed[ps]) { claimed[ps] = true; phys_new[j] = ps; continue; }
                int f = 0;
                while (f < n && (used[f] || claimed[f])) f++;
                if (f >= n) { kiln_set_last_error("whisper: beam search ran out of cache slots"); return false; }
                claimed[f] = true;
                whisper_kv_copy(w, f, ps, np + i);
                phys_new[j] = f;
            }
            for (int j = 0; j < n; j++) st->dec[j].slot = phys_new[j];
        }
        /* completion / failure */
        for (int j = 0; j < n; j++) {
            struct decoder * d = &st->dec[j];
            if (d->completed || d->failed) continue;
            const struct kiln_whisper_token_data * tok = &d->s.toks[d->s.n_toks - 1];
            if (tok->id > t->beg) {
                const int sd_new = 2 * (tok->id - t->beg);
                if (d->has_ts && d->seek_delta > sd_new && d->s.result_len < i) { d->failed = true; continue; }
                d->seek_delta = sd_new;
                d->s.result_len = i + 1;
                d->has_ts = true;
            }
            if (tok->id == t->eot || (d->has_ts && seek + d->seek_delta + delta_min >= seek_end)) {
                if (d->s.result_len == 0 && !p->no_timestamps) {
                    if (seek + d->seek_delta + delta_min >= seek_end) d->s.result_len = i + 1;
                    else { d->failed = true; continue; }
                }
                if (p->single_segment || p->no_timestamps) { d->s.result_len = i + 1; d->seek_delta = window; }
                d->completed = true;
                continue;
            }
            if (i == n_max - 1 && (d->s.result_len == 0 || d->seek_delta < window / 2)) { d->failed = true; continue; }
        }
        bool all_done = true;
        for (int j = 0; j < n; j++) if (!st->dec[j].completed && !st->dec[j].failed) all_done = false;
        if (all_done) break;
        /* the next logits: one decoder batch of every live decoder's last token (whisper.cpp's) */
        int32_t btok[WHISPER_MAX_DECODERS];
        int bslot[WHISPER_MAX_DECODERS], nb = 0;
        float * blog[WHISPER_MAX_DECODERS];
        for (int j = 0; j < n; j++) {
            struct decoder * d = &st->dec[j];
            if (d->completed || d->failed) continue;
            btok[nb] = d->s.toks[d->s.n_toks - 1].id;
            bslot[nb] = d->slot;
            blog[nb++] = d->logits;
        }
        bool ok;
        if (nb == 1) {
            whisper_kv_use(w, bslot[0]);
            ok = kiln_whisper_decode(w, btok, 1, np + i, blog[0]);
            whisper_kv_use(w, 0);
        } else ok = whisper_decode_slots(w, btok, bslot, nb, np + i, blog);
        if (!ok) return false;
        for (int j = 0; j < n; j++) {
            struct decoder * d = &st->dec[j];
            if (!d->completed && !d->failed) process_logits(w, p, d, t_cur);
        }
    }
    /* ranking */
    double best_score = -INFINITY;
    for (int j = 0; j < n; j++) {
        struct decoder * d = &st->dec[j];
        if (d->failed) continue;
        d->s.n_toks = d->s.result_len;
        seq_score(p, &d->s);
        if (d->s.result_len > 32 && d->s.entropy < p->entropy_thold) { d->failed = true; continue; }
        if (best_score < d->s.score) { best_score = d->s.score; *best = j; }
    }
    return true;
}

int kiln_whisper_full(struct kiln_whisper * w, const struct kiln_whisper_params * p, const float * samples, int64_t n) {
    if (!w || !p || (n > 0 && !samples) || n < 0) { kiln_set_last_error("whisper: bad arguments to kiln_whisper_full"); return -1; }
    clear_segments(w);
    w->vad_n_map = 0;
    if (p->strategy != KILN_WHISPER_GREEDY && p->strategy != KILN_WHISPER_BEAM_SEARCH) {
        kiln_set_last_error("whisper: unknown decoding strategy %d", (int) p->strategy);
        return -1;
    }
    w->tp = p->threadpool;
    w->abort_cb = p->abort_callback;
    w->abort_data = p->abort_callback_data;
    const int rc = p->vad ? whisper_full_vad(w, p, samples, n) : whisper_full_samples(w, p, samples, n);
    if (rc != 0 && w->abort_cb && w->abort_cb(w->abort_data)) kiln_set_last_error("whisper: aborted");
    else if (rc == 0 && p->on_progress) p->on_progress(w, 100, p->user);
    w->tp = NULL;
    w->abort_cb = NULL;
    w->abort_data = NULL;
    return rc;
}

int whisper_full_samples(struct kiln_whisper * w, const struct kiln_whisper_params * p0, const float * samples, int64_t n) {
    clear_segments(w);
    memset(w->lang_probs, 0, sizeof w->lang_probs);
    struct kiln_whisper_params pp = *p0;
    const struct kiln_whisper_params * p = &pp;
    kiln_whisper_set_n_threads(w, p->n_threads);
    const struct kiln_whisper_tokens * t = &w->tok;
    const int n_text_ctx = w->hp.n_text_ctx;

    /* the temperatures and the decoder count */
    float temps[64];
    int n_temps = 0;
    if (p->temperature_inc > 0.0f) {
        for (float tt = p->temperature; tt < 1.0f + 1e-6f && n_temps < 64; tt += p->temperature_inc) temps[n_temps++] = tt;
    } else temps[n_temps++] = p->temperature;
    int n_dec = p->strategy == KILN_WHISPER_GREEDY ? p->best_of : (p->best_of > p->beam_size ? p->best_of : p->beam_size);
    if (n_dec < 1) n_dec = 1;
    if (n_dec > WHISPER_MAX_DECODERS) {
        kiln_set_last_error("whisper: too many decoders requested (%d), at most %d", n_dec, WHISPER_MAX_DECODERS);
        return -1;
    }
    for (int j = 1; j < n_dec; j++) whisper_mt_seed(&w->rng[j], (uint32_t) j);

    float * mel = NULL;
    int n_len = 0, n_len_org = 0;
    if (!kiln_whisper_log_mel(samples, n, w->filters, w->n_mel_f, w->n_fft_f, &mel, &n_len, &n_len_org)) return -1;

    int rc = -1;
    struct full_state st;
    const int beam_k = p->strategy == KILN_WHISPER_BEAM_SEARCH ? (p->beam_size > 0 ? p->beam_size : 1) : 1;
    if (!full_state_init(&st, w, n_dec, n_dec * beam_k)) { kiln_set_last_error("whisper: out of memory"); goto done; }
    st.min_gap = st.min_draw = INFINITY;

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
    const int max_prompt_ctx = p->n_max_text_ctx < n_text_ctx / 2 ? p->n_max_text_ctx : n_text_ctx / 2;

    /* the initial prompt: kept in front of every window (carry_initial_prompt) or the first window's history */
    if (p->initial_prompt && p->initial_prompt[0]) {
        const int cap = 4 * n_text_ctx + 1024;
        int32_t * pt = (int32_t *) malloc((size_t) cap * sizeof(int32_t));
        if (!pt) { kiln_set_last_error("whisper: out of memory"); goto done; }
        int np_tok = whisper_tokenize_prompt(w, p->initial_prompt, pt, cap);
        if (np_tok > cap) np_tok = cap;
        if (p->carry_initial_prompt) {
            const int max_tokens = max_prompt_ctx - 1 > 1 ? max_prompt_ctx - 1 : 1;
            const int take = np_tok < max_tokens ? np_tok : max_tokens;
            if (take > n_text_ctx) { free(pt); kiln_set_last_error("whisper: initial prompt too long"); goto done; }
            memcpy(st.past0, pt + np_tok - take, (size_t) take * sizeof(int32_t));
            st.n_past0 = take;
        } else {
            memcpy(st.past1, pt, (size_t) np_tok * sizeof(int32_t));
            st.n_past1 = np_tok;
        }
        free(pt);
    }

    int32_t prompt_init[4];
    int n_init = 0;
    prompt_init[n_init++] = t->sot;
    if (w->multilingual) {
        prompt_init[n_init++] = t->sot + 1 + lang_id;
        prompt_init[n_init++] = p->translate ? t->translate : t->transcribe;
    }
    /* whisper.cpp takes a 2-layer decoder (not large-v3's vocabulary) for a first-release
     * distilled model and decodes it without timestamps */
    if (w->hp.n_text_layer == 2 && w->hp.n_vocab != 51866) pp.no_timestamps = true;
    if (p->no_timestamps) prompt_init[n_init++] = t->not_ts;
    const int window = 100 * KILN_WHISPER_CHUNK_S;

    for (int seek = 0; seek + delta_min < seek_end;) {
        if (p->on_progress) p->on_progress(w, (int) (100LL * seek / seek_end), p->user);
        if (!kiln_whisper_encode(w, mel, n_len, seek)) goto done;
        if (seek > 0 && seek + 500 >= seek_end) { st.n_past0 = 0; st.n_past1 = 0; }
        int best = 0;
        float no_speech_prob = 0.0f;
        for (int it = 0; it < n_temps; it++) {
            const float t_cur = temps[it];
            int n_cur = 1;
            if (t_cur > 0.0f) n_cur = p->best_of;
            else if (p->strategy == KILN_WHISPER_BEAM_SEARCH) n_cur = p->beam_size;
            if (n_cur < 1) n_cur = 1;
            /* the prompt */
            int np = 0;
            if (p->n_max_text_ctx > 0 && t_cur < HISTORY_TEMP_CUTOFF) {
                const bool take0 = p->carry_initial_prompt && st.n_past0 > 0, take1 = st.n_past1 > 0;
                if (max_prompt_ctx > 0 && (take0 || take1)) {
                    st.prompt[np++] = t->prev;
                    int n0 = 0;
                    if (take0) { n0 = st.n_past0; memcpy(st.prompt + np, st.past0, (size_t) n0 * sizeof(int32_t)); np += n0; }
                    int n1 = max_prompt_ctx - n0 - 1;
                    if (n1 > st.n_past1) n1 = st.n_past1;
                    if (n1 > 0) { memcpy(st.prompt + np, st.past1 + st.n_past1 - n1, (size_t) n1 * sizeof(int32_t)); np += n1; }
                }
            }
            memcpy(st.prompt + np, prompt_init, (size_t) n_init * sizeof(int32_t));
            np += n_init;
            st.n_prompt = np;
            if (!decode_window(w, p, &st, n_cur, t_cur, seek, seek_end, &no_speech_prob, &best)) goto done;
            if (it != n_temps - 1) {
                const struct decoder * d = &st.dec[best];
                if (d->failed || (d->s.avg_logprobs < p->logprob_thold && no_speech_prob < p->no_speech_thold)) continue;
            }
            break;
        }
        const struct decoder * bd = &st.dec[best];
        const struct kiln_whisper_token_data * toks = bd->s.toks;
        const int n_toks = bd->s.n_toks, result_len = bd->s.result_len;
        const bool is_no_speech = no_speech_prob > p->no_speech_thold && bd->s.avg_logprobs < p->logprob_thold;
        /* the context for the next window: the last prompt's history, then this window's tokens */
        {
            int n_hist = 0;
            if (!p->carry_initial_prompt && st.n_prompt > 0 && st.prompt[0] == t->prev) {
                n_hist = st.n_prompt - 1 - n_init;
                memmove(st.past1, st.prompt + 1, (size_t) n_hist * sizeof(int32_t));
            }
            st.n_past1 = n_hist;
            if (!is_no_speech) for (int i = 0; i < result_len && st.n_past1 < 4 * n_text_ctx + 1024; i++) st.past1[st.n_past1++] = toks[i].id;
        }
        int seek_delta = bd->seek_delta;
        if (n_toks > 0 && !is_no_speech) {
            int i0 = 0;
            int64_t t0 = seek + 2 * (toks[0].tid - t->beg);
            size_t tl = 0;
            char * text = st.text;
            for (int i = 0; i < n_toks; i++) {
                if (toks[i].id < t->eot) {
                    size_t len;
                    const char * s = kiln_whisper_token_text(w, toks[i].id, &len);
                    if (tl + len < (size_t) n_text_ctx * 256) { memcpy(text + tl, s, len); tl += len; }
                }
                if (toks[i].id > t->beg && !p->single_segment) {
                    const int64_t t1 = seek + 2 * (toks[i].tid - t->beg);
                    if (tl > 0) {
                        if (!push_segment(w, t0, t1, text, tl, no_speech_prob, toks + i0, i - i0 + 1)) { kiln_set_last_error("whisper: out of memory"); goto done; }
                        if (p->on_segment) p->on_segment(w, w->n_segs - 1, p->user);
                    }
                    tl = 0;
                    t0 = t1;
                    while (i + 1 < n_toks && toks[i + 1].id > t->beg) { i++; t0 = seek + 2 * (toks[i].tid - t->beg); }
                    i0 = i + 1;
                }
            }
            if (tl > 0) {
                if (!push_segment(w, t0, seek + seek_delta, text, tl, no_speech_prob, toks + i0, n_toks - i0)) { kiln_set_last_error("whisper: out of memory"); goto done; }
                if (p->on_segment) p->on_segment(w, w->n_segs - 1, p->user);
            }
        }
        const bool single_ts_ending = n_toks > 1 && toks[n_toks - 2].id < t->beg && toks[n_toks - 1].id > t->beg;
        if (single_ts_ending) seek_delta = seek_end - seek < window ? seek_end - seek : window;
        seek += seek_delta;
    }
    rc = 0;
done:
    w->min_gap = st.min_gap;
    w->min_draw = st.min_draw;
    whisper_kv_use(w, 0);
    free(mel);
    full_state_free(&st);
    return rc;
}
