/* test_sampler.c — each filter of the sampler on hand-made logits, the
 * penalties, and determinism per seed. */
#include "kiln-llama.h"
#include "util/test_util.h"

#include <math.h>
#include <string.h>

static struct kiln_sampler_params plain(float temp) {
    struct kiln_sampler_params p = kiln_sampler_params_default();
    p.temperature = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    return p;
}

/* how often each id comes out in n draws */
static void histogram(struct kiln_sampler_params p, const float * logits, int nv, int n, int * hist) {
    struct kiln_sampler * s = kiln_sampler_new(p);
    memset(hist, 0, sizeof(int) * nv);
    for (int i = 0; i < n; i++) {
        kiln_token t = kiln_sampler_sample(s, logits, nv);
        if (t >= 0 && t < nv) hist[t]++;
    }
    kiln_sampler_free(s);
}

int main(void) {
    /* probabilities 0.5, 0.3, 0.15, 0.05 (logits = log p), in shuffled order */
    const float probs[4] = { 0.15f, 0.5f, 0.05f, 0.3f };
    float logits[4];
    for (int i = 0; i < 4; i++) logits[i] = logf(probs[i]) + 3.0f;
    int hist[4];

    tu_case = "greedy";
    struct kiln_sampler * s = kiln_sampler_new(plain(0.0f));
    CHECK(kiln_sampler_sample(s, logits, 4) == 1, "greedy takes the argmax");
    const float tie[3] = { 1.0f, 2.0f, 2.0f };
    CHECK(kiln_sampler_sample(s, tie, 3) == 1, "greedy tie: lowest id");
    CHECK(kiln_sampler_sample(s, NULL, 3) == KILN_TOKEN_NULL, "NULL logits rejected");
    CHECK(kiln_sampler_sample(s, tie, 0) == KILN_TOKEN_NULL, "empty vocab rejected");
    kiln_sampler_free(s);

    tu_case = "distribution";
    histogram(plain(1.0f), logits, 4, 4000, hist);
    for (int i = 0; i < 4; i++) {
        CHECK(fabs(hist[i] / 4000.0 - probs[i]) < 0.03, "temp 1 frequency of %d: %.3f vs %.3f", i, hist[i] / 4000.0, probs[i]);
    }
    /* low temperature sharpens toward the argmax */
    histogram(plain(0.2f), logits, 4, 2000, hist);
    CHECK(hist[1] > 1800, "temp 0.2 mostly argmax (%d/2000)", hist[1]);

    tu_case = "top_k";
    struct kiln_sampler_params p = plain(1.0f);
    p.top_k = 2;
    histogram(p, logits, 4, 2000, hist);
    CHECK(hist[0] == 0 && hist[2] == 0 && hist[1] > 0 && hist[3] > 0, "top-k 2 keeps ids 1 and 3");
    CHECK(fabs(hist[1] / 2000.0 - 0.5 / 0.8) < 0.04, "top-k renormalizes (%.3f)", hist[1] / 2000.0);
    p.top_k = 1;
    histogram(p, logits, 4, 200, hist);
    CHECK(hist[1] == 200, "top-k 1 is greedy");

    tu_case = "top_p";
    p = plain(1.0f);
    p.top_p = 0.75f; /* 0.5 + 0.3 reaches it */
    histogram(p, logits, 4, 2000, hist);
    CHECK(hist[0] == 0 && hist[2] == 0 && hist[1] > 0 && hist[3] > 0, "top-p 0.75 keeps ids 1 and 3");
    p.top_p = 0.4f;
    histogram(p, logits, 4, 200, hist);
    CHECK(hist[1] == 200, "top-p 0.4 keeps only the top token");

    tu_case = "min_p";
    p = plain(1.0f);
    p.min_p = 0.25f; /* keeps p >= 0.125: ids 1, 3, 0 */
    histogram(p, logits, 4, 3000, hist);
    CHECK(hist[2] == 0 && hist[0] > 0 && hist[1] > 0 && hist[3] > 0, "min-p 0.25 drops only id 2");
    p.min_p = 0.7f;
    histogram(p, logits, 4, 200, hist);
    CHECK(hist[1] == 200, "min-p 0.7 keeps only the top token");

    tu_case = "penalties";
    const float pl[3] = { 2.0f, 1.5f, -1.0f };
    p = plain(0.0f);
    p.repeat_penalty = 2.0f;
    s = kiln_sampler_new(p);
    CHECK(kiln_sampler_sample(s, pl, 3) == 0, "no history: argmax");
    kiln_sampler_accept(s, 0);
    CHECK(kiln_sampler_sample(s, pl, 3) == 1, "repeat penalty 2 halves a positive logit (2 -> 1 < 1.5)");
    kiln_sampler_free(s);
    const float pn[2] = { -1.0f, -1.5f };
    s = kiln_sampler_new(p);
    kiln_sampler_accept(s, 0);
    CHECK(kiln_sampler_sample(s, pn, 2) == 1, "repeat penalty doubles a negative logit (-1 -> -2)");
    kiln_sampler_free(s);
    p = plain(0.0f);
    p.frequency_penalty = 0.2f;
    s = kiln_sampler_new(p);
    kiln_sampler_accept(s, 0);
    kiln_sampler_accept(s, 0);
    CHECK(kiln_sampler_sample(s, pl, 3) == 0, "frequency 0.2 x2: 2 - 0.4 still wins");
    kiln_sampler_accept(s, 0);
    CHECK(kiln_sampler_sample(s, pl, 3) == 1, "frequency 0.2 x3: 2 - 0.6 < 1.5");
    kiln_sampler_reset(s);
    CHECK(kiln_sampler_sample(s, pl, 3) == 0, "reset forgets the history");
    kiln_sampler_free(s);
    p = plain(0.0f);
    p.presence_penalty = 0.6f;
    p.penalty_last_n = 1;
    s = kiln_sampler_new(p);
    kiln_sampler_accept(s, 0);
    CHECK(kiln_sampler_sample(s, pl, 3) == 1, "presence 0.6 once: 1.4 < 1.5");
    kiln_sampler_accept(s, 2);
    CHECK(kiln_sampler_sample(s, pl, 3) == 0, "last_n 1: token 0 no longer penalized");
    kiln_sampler_free(s);

    tu_case = "determinism";
    float many[64];
    for (int i = 0; i < 64; i++) many[i] = sinf((float) i * 1.7f);
    p = kiln_sampler_params_default();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    kiln_token a[100], b[100], c[100];
    for (int run = 0; run < 3; run++) {
        p.seed = run == 2 ? 1234 : 42;
        s = kiln_sampler_new(p);
        kiln_token * out = run == 0 ? a : run == 1 ? b : c;
        for (int i = 0; i < 100; i++) out[i] = kiln_sampler_sample(s, many, 64);
        if (run == 1) { /* reset replays the same sequence */
            kiln_sampler_reset(s);
            bool same = true;
            for (int i = 0; i < 100; i++) same &= kiln_sampler_sample(s, many, 64) == b[i];
            CHECK(same, "reset restarts the RNG");
        }
        kiln_sampler_free(s);
    }
    CHECK(memcmp(a, b, sizeof a) == 0, "same seed, same tokens");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed, other tokens");

    tu_case = "logit bias";
    s = kiln_sampler_new(plain(0.0f));
    struct kiln_logit_bias ban[2] = { { 1, -INFINITY }, { 99, 5.0f } }; /* id 99 is past the vocabulary: ignored */
    CHECK(kiln_sampler_set_logit_bias(s, ban, 2) == KILN_STATUS_SUCCESS, "bias set");
    CHECK(kiln_sampler_sample(s, logits, 4) == 3, "-inf bans the argmax (1); next best is 3");
    struct kiln_logit_bias up = { 2, 3.0f }; /* log 0.05 + 3 + 3 > log 0.5 + 3 */
    kiln_sampler_set_logit_bias(s, &up, 1);
    CHECK(kiln_sampler_sample(s, logits, 4) == 2, "a positive bias makes id 2 the argmax");
    kiln_sampler_set_logit_bias(s, NULL, 0);
    CHECK(kiln_sampler_sample(s, logits, 4) == 1, "clearing the bias restores the argmax");
    struct kiln_logit_bias neg = { -1, 1.0f };
    CHECK(kiln_sampler_set_logit_bias(s, &neg, 1) == KILN_STATUS_INVALID_ARG, "negative id rejected");
    kiln_sampler_free(s);
    p = plain(1.0f);
    p.seed = 5;
    s = kiln_sampler_new(p);
    kiln_sampler_set_logit_bias(s, ban, 1);
    int banned = 0;
    for (int i = 0; i < 2000; i++) banned += kiln_sampler_sample(s, logits, 4) == 1;
    CHECK(banned == 0, "a banned token is never drawn at temperature 1 (%d/2000)", banned);
    kiln_sampler_free(s);

    tu_case = "logprobs";
    s = kiln_sampler_new(plain(0.0f));
    CHECK(kiln_sampler_get_logprobs(s, NULL, NULL, 0) == -1, "nothing before the first sample");
    CHECK(kiln_sampler_set_logprobs(s, 65) == KILN_STATUS_INVALID_ARG, "n_top above 64 rejected");
    kiln_sampler_set_logprobs(s, 3);
    kiln_token t = kiln_sampler_sample(s, many, 64);
    struct kiln_token_logprob chosen, top[3];
    int32_t nt = kiln_sampler_get_logprobs(s, &chosen, top, 3);
    /* reference: log-softmax in double */
    double mx = -1e300, sum = 0.0;
    for (int i = 0; i < 64; i++) mx = fmax(mx, (double) many[i]);
    for (int i = 0; i < 64; i++) sum += exp((double) many[i] - mx);
    double lse = mx + log(sum);
    CHECK(nt == 3, "3 alternatives (%d)", nt);
    CHECK(chosen.token == t && fabs(chosen.logprob - ((double) many[t] - lse)) < 1e-6, "chosen %d logprob %g vs %g", chosen.token, chosen.logprob, (double) many[t] - lse);
    bool desc = true, exact = true;
    for (int k = 0; k < 3; k++) {
        if (k && top[k].logprob > top[k - 1].logprob) desc = false;
        if (fabs(top[k].logprob - ((double) many[top[k].token] - lse)) > 1e-6) exact = false;
        int above = 0;
        for (int i = 0; i < 64; i++) above += many[i] > many[top[k].token];
        if (above != k) exact = false;
    }
    CHECK(desc && exact, "top 3 are the 3 most likely, most likely first, with log-softmax values");
    CHECK(top[0].token == t, "greedy picks the top alternative");
    kiln_sampler_free(s);

    tu_case = "options off: sampling unchanged";
    p = kiln_sampler_params_default();
    p.temperature = 0.9f;
    p.seed = 77;
    struct kiln_sampler * s1 = kiln_sampler_new(p), * s2 = kiln_sampler_new(p);
    kiln_sampler_set_logprobs(s2, 5);
    kiln_sampler_set_logit_bias(s2, NULL, 0);
    bool same = true;
    for (int i = 0; i < 300; i++) {
        kiln_token x = kiln_sampler_sample(s1, many, 64), y = kiln_sampler_sample(s2, many, 64);
        same &= x == y;
        kiln_sampler_accept(s1, x);
        kiln_sampler_accept(s2, y);
    }
    CHECK(same, "logprobs on and an empty bias list draw the same 300 tokens");
    kiln_sampler_free(s1);
    kiln_sampler_free(s2);

    return tu_finish();
}
