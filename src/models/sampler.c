/*
 * sampler.c — token sampling from logits, in llama.cpp's default chain
 * order: penalties (repeat / frequency / presence over the last n accepted
 * tokens), top-k, top-p, min-p, temperature, then a draw from the softmax
 * with a seeded RNG. Temperature <= 0 is greedy (argmax, lowest id on ties).
 */
#include "kiln-llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kiln_sampler {
    struct kiln_sampler_params p;
    uint64_t rng;
    kiln_token * hist; /* accepted tokens */
    size_t n_hist, cap_hist;
    struct cand { kiln_token id; float logit; } * cand;
    int32_t cap_cand;
    int32_t * count; /* scratch: occurrences per id */
    int32_t cap_count;
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
    return s;
}

void kiln_sampler_free(struct kiln_sampler * s) {
    if (!s) {
        return;
    }
    free(s->hist);
    free(s->cand);
    free(s->count);
    free(s);
}

void kiln_sampler_reset(struct kiln_sampler * s) {
    if (!s) {
        return;
    }
    s->n_hist = 0;
    s->rng = s->p.seed;
}

void kiln_sampler_accept(struct kiln_sampler * s, kiln_token t) {
    if (!s) {
        return;
    }
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

static int cmp_cand(const void * a, const void * b) {
    const struct cand * x = a, * y = b;
    if (x->logit != y->logit) {
        return x->logit > y->logit ? -1 : 1;
    }
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* heap of the m best candidates seen so far, worst at h[0] (cmp_cand order) */
static void sift_down(struct cand * h, int32_t m, int32_t i) {
    for (;;) {
        int32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < m && cmp_cand(&h[l], &h[w]) > 0) w = l;
        if (r < m && cmp_cand(&h[r], &h[w]) > 0) w = r;
        if (w == i) return;
        struct cand t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* c[0..m) := the m first candidates of c[0..n) in cmp_cand order, sorted;
 * O(n log m) instead of a full sort (262,144-token vocabularies) */
static void select_top(struct cand * c, int32_t n, int32_t m) {
    if (m >= n / 4) {
        qsort(c, (size_t) n, sizeof(struct cand), cmp_cand);
        return;
    }
    for (int32_t i = m / 2 - 1; i >= 0; i--) sift_down(c, m, i);
    for (int32_t i = m; i < n; i++) {
        if (cmp_cand(&c[i], &c[0]) < 0) {
            struct cand t = c[0];
            c[0] = c[i];
            c[i] = t;
            sift_down(c, m, 0);
        }
    }
    qsort(c, (size_t) m, sizeof(struct cand), cmp_cand);
}

/* top-p over c[0..n) sorted: the smallest prefix whose mass (normalized by
 * sum, the mass of the candidates still in play) reaches top_p, or 0 */
static int32_t top_p_cut(const struct cand * c, int32_t n, double max, double sum, float top_p) {
    double cum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        cum += exp((double) c[i].logit - max) / sum;
        if (cum >= top_p) return i + 1;
    }
    return 0;
}

/* top-k and top-p: how many leading candidates stay, c sorted (cmp_cand)
 * at least that far and far enough for min-p. The kept prefix and its order
 * are those of a full sort, so the draw is the same as with one, but only
 * the head of a 262,144-token vocabulary gets sorted. */
static int32_t truncate_sorted(struct cand * c, int32_t n, const struct kiln_sampler_params * p) {
    if (p->top_k > 0 && p->top_k < n) {
        select_top(c, n, p->top_k);
        n = p->top_k;
    } else if ((p->top_p < 1.0f || p->min_p > 0.0f) && n > 1) {
        /* how far the kept prefix reaches, without sorting: min-p keeps the
         * logits >= thr; top-p the head above the highest logit t whose
         * tail {logit >= t} holds the mass (bisection on t); a margin
         * covers the rounding of sums taken in another order */
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
        if (p->top_p < 1.0f) {
            double lo = mn, hi = mx;
            const double target = (double) p->top_p * sum * (1.0 + 1e-9);
            for (int it = 0; it < 40; it++) {
                const double mid = 0.5 * (lo + hi);
                double mass = 0.0;
                for (int32_t i = 0; i < n; i++) {
                    if ((double) c[i].logit >= mid) mass += e ? e[i] : exp((double) c[i].logit - mx);
                }
                if (mass >= target) lo = mid;
                else hi = mid;
            }
            int32_t cnt = 0;
            for (int32_t i = 0; i < n; i++) cnt += (double) c[i].logit >= lo;
            m = cnt + 1 < m ? cnt + 1 : m;
        }
        free(e);
        if (m < n / 4) {
            select_top(c, n, m);
            const int32_t keep = p->top_p < 1.0f ? top_p_cut(c, m, mx, sum, p->top_p) : 0;
            if (keep > 0) return keep;
            if ((double) c[m - 1].logit < thr) return m; /* min-p ends inside the head */
        }
        qsort(c, (size_t) n, sizeof(struct cand), cmp_cand);
        if (p->top_p < 1.0f) {
            int32_t keep = top_p_cut(c, n, mx, sum, p->top_p);
            return keep > 0 ? keep : n;
        }
        return n;
    } else {
        qsort(c, (size_t) n, sizeof(struct cand), cmp_cand);
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

kiln_token kiln_sampler_sample(struct kiln_sampler * s, const float * logits, int32_t n_vocab) {
    if (!s || !logits || n_vocab <= 0) {
        kiln_set_last_error("sampler: invalid arguments");
        return KILN_TOKEN_NULL;
    }
    if (s->cap_cand < n_vocab) {
        struct cand * c = realloc(s->cand, sizeof(struct cand) * (size_t) n_vocab);
        int32_t * cnt = realloc(s->count, sizeof(int32_t) * (size_t) n_vocab);
        if (c) s->cand = c;
        if (cnt) s->count = cnt;
        if (!c || !cnt) {
            kiln_set_last_error("sampler: out of memory");
            return KILN_TOKEN_NULL;
        }
        s->cap_cand = s->cap_count = n_vocab;
    }
    struct cand * c = s->cand;
    int32_t n = n_vocab;
    for (int32_t i = 0; i < n; i++) {
        c[i].id = i;
        c[i].logit = logits[i];
    }
    const struct kiln_sampler_params * p = &s->p;

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

    if (p->temperature <= 0.0f) {
        int32_t best = 0;
        for (int32_t i = 1; i < n; i++) {
            if (c[i].logit > c[best].logit) {
                best = i;
            }
        }
        return c[best].id;
    }

    n = truncate_sorted(c, n, p);
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
