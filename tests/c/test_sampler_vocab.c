/*
 * test_sampler_vocab.c — top-k / top-p / min-p sampling over a 262,144-token
 * vocabulary (Gemma 3's), where the sampler sorts only the head of the
 * candidates: every drawn token lies in the set a full sort keeps (computed
 * here independently: qsort, then the three cuts), and the most likely
 * token is drawn as often as its renormalized probability says (5 sigma).
 */
#include "kiln-llama.h"
#include "util/test_util.h"
#include "models/cand_sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NV 262144

static const float * g_logits;
static int by_logit(const void * a, const void * b) {
    const int32_t x = *(const int32_t *) a, y = *(const int32_t *) b;
    if (g_logits[x] != g_logits[y]) return g_logits[x] > g_logits[y] ? -1 : 1;
    return x < y ? -1 : (x > y);
}

/* the kept candidates of a full sort: their ids in order, the count returned */
static int32_t reference_keep(const float * lg, int32_t * ids, int top_k, float top_p, float min_p) {
    for (int32_t i = 0; i < NV; i++) ids[i] = i;
    g_logits = lg;
    qsort(ids, NV, sizeof(int32_t), by_logit);
    int32_t n = top_k > 0 && top_k < NV ? top_k : NV;
    if (top_p < 1.0f) {
        double mx = lg[ids[0]], sum = 0.0, cum = 0.0;
        for (int32_t i = 0; i < n; i++) sum += exp((double) lg[ids[i]] - mx);
        for (int32_t i = 0; i < n; i++) {
            cum += exp((double) lg[ids[i]] - mx) / sum;
            if (cum >= top_p) { n = i + 1; break; }
        }
    }
    if (min_p > 0.0f) {
        const double thr = (double) lg[ids[0]] + log((double) min_p);
        int32_t keep = 1;
        while (keep < n && (double) lg[ids[keep]] >= thr) keep++;
        n = keep;
    }
    return n;
}

/* kiln_cand_sort (radix for long lists) against qsort with the same
 * comparison: the same list, entry for entry, on logits with many exact
 * ties, -0.0 beside +0.0, infinities, and ids in shuffled order */
static void test_cand_sort(void) {
    static const int32_t sizes[] = { 0, 1, 2, 100, 2047, 2048, 5000, NV };
    struct kiln_cand * a = malloc(sizeof(*a) * NV), * b = malloc(sizeof(*b) * NV);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int32_t n = sizes[si];
        for (int32_t i = 0; i < n; i++) {
            a[i].id = i;
            const int r = rand() % 16;
            a[i].logit = r == 0 ? -0.0f : r == 1 ? 0.0f : r == 2 ? -INFINITY : r == 3 ? INFINITY
                       : r < 8 ? (float) (rand() % 64 - 32) * 0.125f : tu_rand_uniform(-30.0f, 30.0f);
        }
        for (int32_t i = n - 1; i > 0; i--) {
            const int32_t j = rand() % (i + 1);
            const struct kiln_cand t = a[i]; a[i] = a[j]; a[j] = t;
        }
        memcpy(b, a, sizeof(*a) * (size_t) n);
        kiln_cand_sort(a, n);
        qsort(b, (size_t) n, sizeof(*b), kiln_cand_cmp);
        int32_t bad = -1;
        for (int32_t i = 0; i < n && bad < 0; i++) {
            if (a[i].id != b[i].id || !(a[i].logit == b[i].logit)) bad = i;
        }
        CHECK(bad < 0, "kiln_cand_sort n=%d equals qsort's order (first difference at %d)", n, bad);
    }
    free(a);
    free(b);
}

int main(void) {
    test_cand_sort();
    float * lg = malloc(sizeof(float) * NV);
    int32_t * ids = malloc(sizeof(int32_t) * NV);
    char * in = malloc(NV);
    tu_seed(7);
    /* a long-tailed distribution like a language model's: most mass in a few hundred tokens */
    for (int32_t i = 0; i < NV; i++) {
        const double u = (double) (rand() % 1000003) / 1000003.0;
        lg[i] = (float) (3.0 * log(u + 1e-9) / 4.0);
    }
    lg[12345] = 8.0f;
    lg[200001] = 7.5f;
    const struct { int k; float p, minp, temp; } cfg[] = {
        { 40, 0.95f, 0.05f, 0.8f }, { 40, 1.0f, 0.0f, 1.0f }, { 0, 0.9f, 0.0f, 1.0f },
        { 0, 1.0f, 0.02f, 1.0f }, { 1000, 0.5f, 0.0f, 1.0f },
    };
    for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
        const int32_t n = reference_keep(lg, ids, cfg[c].k, cfg[c].p, cfg[c].minp);
        memset(in, 0, NV);
        for (int32_t i = 0; i < n; i++) in[ids[i]] = 1;
        double z = 0.0;
        for (int32_t i = 0; i < n; i++) z += exp(((double) lg[ids[i]] - lg[ids[0]]) / cfg[c].temp);
        const double p_top = 1.0 / z;
        struct kiln_sampler_params sp = kiln_sampler_params_default();
        sp.top_k = cfg[c].k;
        sp.top_p = cfg[c].p;
        sp.min_p = cfg[c].minp;
        sp.temperature = cfg[c].temp;
        sp.repeat_penalty = 1.0f;
        sp.seed = 1234 + c;
        struct kiln_sampler * s = kiln_sampler_new(sp);
        int outside = 0, top = 0;
        const int draws = 100;
        for (int d = 0; d < draws; d++) {
            kiln_token t = kiln_sampler_sample(s, lg, NV);
            if (t < 0 || t >= NV || !in[t]) outside++;
            top += t == ids[0];
        }
        kiln_sampler_free(s);
        const double sd = sqrt(draws * p_top * (1 - p_top)) + 1.0;
        CHECK(outside == 0, "config %zu: %d of %d draws outside the %d kept by a full sort", c, outside, draws, n);
        CHECK(fabs(top - draws * p_top) <= 5 * sd, "config %zu: top token drawn %d times, expected %.1f", c, top, draws * p_top);
    }
    free(lg);
    free(ids);
    free(in);
    return tu_finish();
}
