/*
 * sampler.c — token sampling from logits, in llama.cpp's default chain
 * order: penalties (repeat / frequency / presence over the last n accepted
 * tokens), top-k, top-p, min-p, temperature, then a draw from the softmax
 * with a seeded RNG. Temperature <= 0 is greedy (argmax, lowest id on ties).
 *
 * Optional stages, each skipped entirely when unset so that plain sampling
 * stays as it was: a logit bias per token (first), a GBNF grammar that bans
 * the tokens which cannot continue it (grammar.c), and the log-softmax
 * top-N of what the filters start from (logprobs).
 */
#include "kiln-llama.h"
#include "grammar.h"
#include "cand_sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kiln_sampler {
    struct kiln_sampler_params p;
    uint64_t rng;
    kiln_token * hist; /* accepted tokens */
    size_t n_hist, cap_hist;
    struct kiln_cand * cand;
    int32_t cap_cand;
    int32_t * count; /* scratch: occurrences per id */
    int32_t cap_count;
    /* optional stages */
    struct kiln_logit_bias * bias;
    int32_t n_bias;
    struct kiln_grammar * grammar;
    struct kg_vocab_cache vc;
    kiln_token pending;          /* the last sampled token, until accepted */
    float * work;                /* scratch: logits by id for the grammar */
    int32_t * chunk;             /* scratch: ids filtered together (top_k_allowed) */
    int32_t chunk_cap;
    int32_t cap_work;
    int32_t n_logprobs;
    bool has_logprobs;           /* the last sample filled the fields below */
    struct kiln_token_logprob lp_chosen;
    struct kiln_token_logprob lp_top[64];
    int32_t n_lp_top;
};

struct kiln_sampler_params kiln_sampler_params_default(void) {
    struct kiln_sampler_params p = {
        .seed = 0,
        .temperature = 0.0f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .penalty_last_n = 64,
    };
    return p;
}

static uint64_t splitmix64(uint64_t * s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t * s) {
    return (double) (splitmix64(s) >> 11) * (1.0 / 9007199254740992.0);
}

enum kiln_status kiln_sampler_params_check(const struct kiln_sampler_params * p) {
    if (!p) {
        kiln_set_last_error("sampler: NULL parameters");
        return KILN_STATUS_INVALID_ARG;
    }
#define BAD(cond, ...) do { if (cond) { kiln_set_last_error(__VA_ARGS__); return KILN_STATUS_INVALID_ARG; } } while (0)
    BAD(!(p->temperature >= 0) || isinf(p->temperature), "sampler: temperature must be a number >= 0 (0: greedy), not %g", (double) p->temperature);
    BAD(p->top_k < 0, "sampler: top_k must be >= 0 (0: off), not %d", p->top_k);
    BAD(!(p->top_p >= 0 && p->top_p <= 1), "sampler: top_p must be in [0, 1] (1: off), not %g", (double) p->top_p);
    BAD(!(p->min_p >= 0 && p->min_p <= 1), "sampler: min_p must be in [0, 1] (0: off), not %g", (double) p->min_p);
    BAD(!(p->repeat_penalty > 0) || isinf(p->repeat_penalty), "sampler: repeat_penalty must be a number > 0 (1: off), not %g", (double) p->repeat_penalty);
    BAD(!isfinite(p->frequency_penalty), "sampler: frequency_penalty must be a finite number, not %g", (double) p->frequency_penalty);
    BAD(!isfinite(p->presence_penalty), "sampler: presence_penalty must be a finite number, not %g", (double) p->presence_penalty);
    BAD(p->penalty_last_n < -1, "sampler: penalty_last_n must be >= -1 (-1: all, 0: off), not %d", p->penalty_last_n);
#undef BAD
    return KILN_STATUS_SUCCESS;
}

struct kiln_sampler * kiln_sampler_new(struct kiln_sampler_params params) {
    if (kiln_sampler_params_check(&params) != KILN_STATUS_SUCCESS) {
        return NULL;
    }
    struct kiln_sampler * s = calloc(1, sizeof(*s));
    if (!s) {
        kiln_set_last_error("sampler: out of memory");
        return NULL;
    }
    s->p = params;
    s->rng = params.seed;
    s->pending = KILN_TOKEN_NULL;
    return s;
}

void kiln_sampler_free(struct kiln_sampler * s) {
    if (!s) {
        return;
    }
    free(s->hist);
    free(s->cand);
    free(s->count);
    free(s->bias);
    free(s->work);
    free(s->chunk);
    kiln_grammar_free(s->grammar);
    kg_vocab_cache_free(&s->vc);
    free(s);
}

void kiln_sampler_reset(struct kiln_sampler * s) {
    if (!s) {
        return;
    }
    s->n_hist = 0;
    s->rng = s->p.seed;
    s->pending = KILN_TOKEN_NULL;
    s->has_logprobs = false;
    if (s->grammar) {
        kiln_grammar_reset(s->grammar);
    }
}

enum kiln_status kiln_sampler_set_grammar(struct kiln_sampler * s, const struct kiln_vocab * vocab, const char * gbnf,
                                          const char * root) {
    if (!s || (gbnf && !vocab)) {
        kiln_set_last_error("sampler: a grammar needs a sampler and a vocabulary");
        return KILN_STATUS_INVALID_ARG;
    }
    if (!gbnf) {
        kiln_grammar_free(s->grammar);
        s->grammar = NULL;
        kg_vocab_cache_free(&s->vc);
        return KILN_STATUS_SUCCESS;
    }
    struct kiln_grammar * g = kiln_grammar_init(gbnf, root, vocab);
    if (!g) {
        return KILN_STATUS_INVALID_ARG;
    }
    if (s->vc.vocab != vocab) {
        struct kg_vocab_cache vc;
        enum kiln_status st = kg_vocab_cache_init(&vc, vocab);
        if (st != KILN_STATUS_SUCCESS) {
            kiln_grammar_free(g);
            return st;
        }
        kg_vocab_cache_free(&s->vc);
        s->vc = vc;
    }
    kiln_grammar_free(s->grammar);
    s->grammar = g;
    s->pending = KILN_TOKEN_NULL;
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_sampler_set_logit_bias(struct kiln_sampler * s, const struct kiln_logit_bias * bias, int32_t n) {
    if (!s || n < 0 || (n > 0 && !bias)) {
        kiln_set_last_error("sampler: invalid logit bias arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    for (int32_t i = 0; i < n; i++) {
        if (bias[i].token < 0 || isnan(bias[i].bias)) {
            kiln_set_last_error("sampler: logit bias %d: token %d / bias not valid", (int) i, (int) bias[i].token);
            return KILN_STATUS_INVALID_ARG;
        }
    }
    struct kiln_logit_bias * b = NULL;
    if (n > 0) {
        b = malloc(sizeof(*b) * (size_t) n);
        if (!b) {
            kiln_set_last_error("sampler: out of memory");
            return KILN_STATUS_ALLOC_FAILED;
        }
        memcpy(b, bias, sizeof(*b) * (size_t) n);
    }
    free(s->bias);
    s->bias = b;
    s->n_bias = n;
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_sampler_set_logprobs(struct kiln_sampler * s, int32_t n_top) {
    if (!s || n_top < 0 || n_top > 64) {
        kiln_set_last_error("sampler: logprobs: n_top must be 0..64");
        return KILN_STATUS_INVALID_ARG;
    }
    s->n_logprobs = n_top;
    s->has_logprobs = false;
    return KILN_STATUS_SUCCESS;
}

int32_t kiln_sampler_get_logprobs(const struct kiln_sampler * s, struct kiln_token_logprob * chosen,
                                  struct kiln_token_logprob * top, int32_t n_max) {
    if (!s || !s->has_logprobs) {
        return -1;
    }
    if (chosen) {
        *chosen = s->lp_chosen;
    }
    int32_t n = s->n_lp_top < n_max ? s->n_lp_top : n_max;
    if (top && n > 0) {
        memcpy(top, s->lp_top, sizeof(*top) * (size_t) n);
    }
    return n < 0 ? 0 : n;
}

/* log-softmax of the candidates (id order): the top n and the normalizer */
static void fill_logprobs(struct kiln_sampler * s, const struct kiln_cand * c, int32_t n) {
    double max = -INFINITY;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].logit > max) max = c[i].logit;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        sum += exp((double) c[i].logit - max);
    }
    double lse = max + log(sum);
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        float lp = (float) ((double) c[i].logit - lse);
        if (c[i].logit == -INFINITY) {
            continue;
        }
        if (k < s->n_logprobs || lp > s->lp_top[k - 1].logprob) {
            int32_t j = k < s->n_logprobs ? k++ : k - 1;
            while (j > 0 && s->lp_top[j - 1].logprob < lp) {
                s->lp_top[j] = s->lp_top[j - 1];
                j--;
            }
            s->lp_top[j] = (struct kiln_token_logprob) { c[i].id, lp };
        }
    }
    s->n_lp_top = k;
    s->lp_chosen.logprob = (float) lse; /* the normalizer until the token is known */
    s->has_logprobs = true;
}

/* the candidates' logits (id order) copied into the scratch by id */
static bool logits_to_work(struct kiln_sampler * s, const struct kiln_cand * c, int32_t n) {
    if (s->cap_work < n) {
        float * w = realloc(s->work, sizeof(float) * (size_t) n);
        if (!w) {
            kiln_set_last_error("sampler: out of memory");
            return false;
        }
        s->work = w;
        s->cap_work = n;
    }
    for (int32_t i = 0; c && i < n; i++) {
        s->work[i] = c[i].logit;
    }
    return true;
}

/* ban the tokens the grammar rejects; greedy without logprobs first tries
 * the argmax alone (most steps need nothing more) */
static enum kiln_status grammar_mask(struct kiln_sampler * s, struct kiln_cand * c, int32_t n, bool argmax_first) {
    if (!logits_to_work(s, c, n)) {
        return KILN_STATUS_ALLOC_FAILED;
    }
    int32_t nv = n < s->vc.n_vocab ? n : s->vc.n_vocab;
    if (argmax_first) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++) {
            if (c[i].logit > c[best].logit) best = i;
        }
        if (best < nv) {
            enum kiln_status st = kg_apply(s->grammar, &s->vc, s->work, &best, 1);
            if (st != KILN_STATUS_SUCCESS) return st;
            if (s->work[best] != -INFINITY) {
                return KILN_STATUS_SUCCESS; /* the argmax continues the grammar */
            }
        }
    }
    enum kiln_status st = kg_apply(s->grammar, &s->vc, s->work, NULL, nv);
    if (st != KILN_STATUS_SUCCESS) return st;
    bool any = false;
    for (int32_t i = 0; i < n; i++) {
        /* ids past the vocabulary (padded logits) have no text: banned */
        c[i].logit = i < nv ? s->work[i] : -INFINITY;
        any = any || c[i].logit != -INFINITY;
    }
    if (!any) {
        kiln_set_last_error("sampler: no token can continue the grammar");
        return KILN_STATUS_FAILED;
    }
    return KILN_STATUS_SUCCESS;
}

void kiln_sampler_accept(struct kiln_sampler * s, kiln_token t) {
    if (!s) {
        return;
    }
    if (s->grammar && s->pending != KILN_TOKEN_NULL && t == s->pending) {
        /* a token this sampler chose: the grammar moves on (a failure
         * here means the caller accepted what the grammar had banned) */
        (void) kg_accept_token(s->grammar, &s->vc, t);
    }
    s->pending = KILN_TOKEN_NULL;
    if (s->n_hist == s->cap_hist) {
        size_t cap = s->cap_hist ? s->cap_hist * 2 : 256;
        kiln_token * h = realloc(s->hist, cap * sizeof(kiln_token));
        if (!h) {
            return;
        }
        s->hist = h;
        s->cap_hist = cap;
    }
    s->hist[s->n_hist++] = t;
}

/* heap of the m best candidates seen so far, worst at h[0] (kiln_cand_cmp order) */
static void sift_down(struct kiln_cand * h, int32_t m, int32_t i) {
    for (;;) {
        int32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < m && kiln_cand_cmp(&h[l], &h[w]) > 0) w = l;
        if (r < m && kiln_cand_cmp(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        struct kiln_cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* c[0..m) := the m first candidates of c[0..n) in kiln_cand_cmp order, sorted;
 * O(n log m) instead of a full sort (262,144-token vocabularies) */
static void select_top(struct kiln_cand * c, int32_t n, int32_t m) {
    if (m >= n / 4 || m > 2048) {
        kiln_cand_sort(c, n);
        return;
    }
    for (int32_t i = m / 2 - 1; i >= 0; i--) sift_down(c, m, i);
    for (int32_t i = m; i < n; i++) {
        if (kiln_cand_cmp(&c[i], &c[0]) < 0) {
            struct kiln_cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            sift_down(c, m, 0);
        }
    }
    kiln_cand_sort(c, m);
}

/* top-p over c[0..n) sorted: the smallest prefix whose mass (normalized by
 * sum, the mass of the candidates still in play) reaches top_p, or 0 */
static int32_t top_p_cut(const struct kiln_cand * c, int32_t n, double max, double sum, float top_p) {
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += exp((double) c[i].logit - max) / sum;
        if (cum >= top_p) return i + 1;
    }
    return 0;
}

/* top-k and top-p: how many leading candidates stay, c sorted (kiln_cand_cmp)
 * at least that far and far enough for min-p. The kept prefix and its order
 * are those of a full sort, so the draw is the same as with one, but only
 * the head of a 262,144-token vocabulary gets sorted. */
static int32_t truncate_sorted(struct kiln_cand * c, int32_t n, const struct kiln_sampler_params * p) {
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
    } else if ((p->top_p < 1.0f || p->min_p > 0.0f) && n > 1) {
        /* how far the kept prefix reaches, without sorting: min-p keeps the
         * logits >= thr; top-p a head whose mass reaches top_p (binned
         * below); a margin covers the rounding of sums taken in another
         * order */
        float mx = c[0].logit, mn = c[0].logit;
        for (int32_t i = 1; i < n; i++) {
            mx = c[i].logit > mx ? c[i].logit : mx;
            mn = c[i].logit < mn ? c[i].logit : mn;
        }
        double sum = 0.0;
        double * e = malloc(sizeof(double) * (size_t) n); /* exp(logit - max), NULL: sum them each pass */
        for (int32_t i = 0; i < n; i++) {
            const double x = exp((double) c[i].logit - mx);
            if (e) e[i] = x;
            sum += x;
        }
        int32_t m = n;
        const double thr = p->min_p > 0.0f ? (double) mx + log((double) p->min_p) : -INFINITY;
        if (p->min_p > 0.0f) {
            int32_t cnt = 0;
            for (int32_t i = 0; i < n; i++) cnt += (double) c[i].logit >= thr;
            m = cnt + 1;
        }
        if (p->top_p < 1.0f && mx > mn) {
            /* logits binned by value (the bin index never decreases as the
             * logit grows, so every tail of bins is a head of the sorted
             * list): the highest bin whose tail holds the mass bounds the
             * head; one pass instead of a bisection's forty */
            enum { NB = 4096 };
            double * mass = calloc(NB, sizeof(double));
            int32_t * cnt = calloc(NB, sizeof(int32_t));
            if (mass && cnt) {
                const double scale = (NB - 1) / ((double) mx - (double) mn);
                for (int32_t i = 0; i < n; i++) {
                    const int b = (int) (((double) c[i].logit - mn) * scale);
                    mass[b] += e ? e[i] : exp((double) c[i].logit - mx);
                    cnt[b]++;
                }
                const double target = (double) p->top_p * sum * (1.0 + 1e-9);
                double tail = 0.0;
                int32_t head = 0;
                for (int b = NB - 1; b >= 0; b--) {
                    tail += mass[b];
                    head += cnt[b];
                    if (tail >= target) break;
                }
                m = head + 1 < m ? head + 1 : m;
            }
            free(mass);
            free(cnt);
        }
        free(e);
        if (m < n / 4) {
            select_top(c, n, m);
            const int32_t keep = p->top_p < 1.0f ? top_p_cut(c, m, mx, sum, p->top_p) : 0;
            if (keep > 0) return keep;
            if ((double) c[m - 1].logit < thr) return m; /* min-p ends inside the head */
        }
        kiln_cand_sort(c, n);
        if (p->top_p < 1.0f) {
            int32_t keep = top_p_cut(c, n, mx, sum, p->top_p);
            return keep > 0 ? keep : n;
        }
        return n;
    } else {
        kiln_cand_sort(c, n);
        return n;
    }
    if (p->top_p < 1.0f && n > 1) {
        double mx = c[0].logit, sum = 0.0;
        for (int32_t i = 0; i < n; i++) sum += exp((double) c[i].logit - mx);
        int32_t keep = top_p_cut(c, n, mx, sum, p->top_p);
        if (keep > 0) n = keep;
    }
    return n;
}

static kiln_token sample_impl(struct kiln_sampler * s, const float * logits, int32_t n_vocab);

/* Keep, in order, the first k candidates (kiln_cand_cmp order) that the grammar
 * allows: the same k tokens a full mask followed by top-k keeps. Chunks of
 * 64, 256 and 1024 are selected from the top (select_top) and filtered (in
 * a JSON string nearly every token is allowed, so the first one is usually
 * enough); where fewer than k pass (a structural position: a few tokens
 * fit), the grammar filters all the rest at once, each candidate rejected
 * on its first character, and the best of the few that pass are selected.
 * No step sorts the whole vocabulary: at 151,936 tokens that sort was most
 * of the sampling time (perf: qsort + cmp_cand 38 % of kiln-generate's CPU,
 * json.gbnf, top-k 40, 512-wide model). */
static enum kiln_status top_k_allowed(struct kiln_sampler * s, struct kiln_cand * c, int32_t * n_io, int32_t k) {
    const int32_t n = *n_io;
    if (s->chunk_cap < n) {
        int32_t * ch = realloc(s->chunk, sizeof(int32_t) * (size_t) n);
        if (!ch) {
            kiln_set_last_error("sampler: out of memory");
            return KILN_STATUS_ALLOC_FAILED;
        }
        s->chunk = ch;
        s->chunk_cap = n;
    }
    if (!logits_to_work(s, NULL, n)) {
        return KILN_STATUS_ALLOC_FAILED;
    }
    const int32_t nv = s->vc.n_vocab;
    int32_t kept = 0, i = 0, size = 64;
    while (i < n && kept < k) {
        const int32_t start = i;
        const bool rest = size > 1024; /* the last pass: everything left, unsorted */
        const int32_t take = rest || n - i < size ? n - i : size;
        if (!rest) select_top(c + i, n - i, take);
        int32_t m = 0;
        for (; i < start + take; i++) {
            if (c[i].id < nv && c[i].logit != -INFINITY) {
                s->chunk[m++] = c[i].id;
                s->work[c[i].id] = c[i].logit;
            }
        }
        enum kiln_status st = kg_apply(s->grammar, &s->vc, s->work, s->chunk, m);
        if (st != KILN_STATUS_SUCCESS) return st;
        if (!rest) {
            for (int32_t j = start; j < i && kept < k; j++) {
                if (c[j].id < nv && c[j].logit != -INFINITY && s->work[c[j].id] != -INFINITY) c[kept++] = c[j];
            }
        } else {
            int32_t a = kept; /* the allowed ones of the rest, then the best of them in order */
            for (int32_t j = start; j < i; j++) {
                if (c[j].id < nv && c[j].logit != -INFINITY && s->work[c[j].id] != -INFINITY) c[a++] = c[j];
            }
            const int32_t want = a - kept < k - kept ? a - kept : k - kept;
            if (want > 0) select_top(c + kept, a - kept, want);
            kept += want;
        }
        size *= 4;
    }
    if (kept == 0) {
        kiln_set_last_error("sampler: no token can continue the grammar");
        return KILN_STATUS_FAILED;
    }
    *n_io = kept;
    return KILN_STATUS_SUCCESS;
}

kiln_token kiln_sampler_sample(struct kiln_sampler * s, const float * logits, int32_t n_vocab) {
    kiln_token t = sample_impl(s, logits, n_vocab);
    if (s) {
        s->pending = t;
        if (s->has_logprobs && t >= 0) {
            float lse = s->lp_chosen.logprob;
            s->lp_chosen = (struct kiln_token_logprob) { t, (float) ((double) s->work[t] - lse) };
        } else {
            s->has_logprobs = false;
        }
    }
    return t;
}

static kiln_token sample_impl(struct kiln_sampler * s, const float * logits, int32_t n_vocab) {
    if (!s || !logits || n_vocab <= 0) {
        kiln_set_last_error("sampler: invalid arguments");
        return KILN_TOKEN_NULL;
    }
    if (s->cap_cand < n_vocab) {
        struct kiln_cand * c = realloc(s->cand, sizeof(struct kiln_cand) * (size_t) n_vocab);
        int32_t * cnt = realloc(s->count, sizeof(int32_t) * (size_t) n_vocab);
        if (c) s->cand = c;
        if (cnt) s->count = cnt;
        if (!c || !cnt) {
            kiln_set_last_error("sampler: out of memory");
            return KILN_TOKEN_NULL;
        }
        s->cap_cand = s->cap_count = n_vocab;
    }
    struct kiln_cand * c = s->cand;
    int32_t n = n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = logits[i];
    }
    const struct kiln_sampler_params * p = &s->p;
    s->has_logprobs = false;

    for (int32_t i = 0; i < s->n_bias; i++) {
        if (s->bias[i].token < n) {
            c[s->bias[i].token].logit += s->bias[i].bias;
        }
    }

    /* penalties over the last n accepted tokens */
    bool pen = p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f;
    if (pen && p->penalty_last_n != 0 && s->n_hist > 0) {
        size_t last = p->penalty_last_n < 0 ? s->n_hist : (size_t) p->penalty_last_n;
        if (last > s->n_hist) last = s->n_hist;
        memset(s->count, 0, sizeof(int32_t) * (size_t) n_vocab);
        for (size_t i = s->n_hist - last; i < s->n_hist; i++) {
            if (s->hist[i] >= 0 && s->hist[i] < n_vocab) {
                s->count[s->hist[i]]++;
            }
        }
        for (int32_t i = 0; i < n; i++) {
            int32_t k = s->count[c[i].id];
            if (k == 0) {
                continue;
            }
            if (c[i].logit <= 0) {
                c[i].logit *= p->repeat_penalty;
            } else {
                c[i].logit /= p->repeat_penalty;
            }
            c[i].logit -= (float) k * p->frequency_penalty + p->presence_penalty;
        }
    }

    /* with top-k on (and no logprobs), the grammar only needs to find the
     * k best allowed tokens: that happens after sorting (top_k_allowed) */
    const bool grammar_after_sort = s->grammar && p->temperature > 0.0f && p->top_k > 0 && s->n_logprobs == 0;
    if (s->grammar && !grammar_after_sort) {
        enum kiln_status st = grammar_mask(s, c, n, p->temperature <= 0.0f && s->n_logprobs == 0);
        if (st != KILN_STATUS_SUCCESS) {
            return KILN_TOKEN_NULL;
        }
    }
    if (s->n_logprobs > 0) {
        if (!logits_to_work(s, c, n)) {
            return KILN_TOKEN_NULL;
        }
        fill_logprobs(s, c, n);
    }

    if (p->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++) {
            if (c[i].logit > c[best].logit) {
                best = i;
            }
        }
        return c[best].id;
    }

    if (grammar_after_sort) {
        /* the grammar walks the list in kiln_cand_cmp order from the top until top_k tokens are allowed */
        if (top_k_allowed(s, c, &n, p->top_k) != KILN_STATUS_SUCCESS) {
            return KILN_TOKEN_NULL;
        }
        if (p->top_p < 1.0f && n > 1) {
            double mx = c[0].logit, sum = 0.0;
            for (int32_t i = 0; i < n; i++) sum += exp((double) c[i].logit - mx);
            const int32_t keep = top_p_cut(c, n, mx, sum, p->top_p);
            if (keep > 0) n = keep;
        }
    } else {
        n = truncate_sorted(c, n, p);
    }
    /* min-p: drop tokens less likely than min_p times the most likely */
    if (p->min_p > 0.0f && n > 1) {
        double thr = (double) c[0].logit + log((double) p->min_p);
        int32_t keep = 1;
        while (keep < n && (double) c[keep].logit >= thr) keep++;
        n = keep;
    }
    /* temperature, softmax, draw */
    double max = (double) c[0].logit / p->temperature, sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double) c[i].logit / p->temperature - max);
    double r = rng_uniform(&s->rng) * sum, acc = 0.0;
    for (int32_t i = 0; i < n; i++) {
        acc += exp((double) c[i].logit / p->temperature - max);
        if (r < acc) {
            return c[i].id;
        }
    }
    return c[n - 1].id;
}
