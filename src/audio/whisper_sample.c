/*
 * whisper_sample.c — the pieces of whisper.cpp's decoding that come from the
 * C++ standard library, reproduced so that Kiln draws the same samples:
 *
 *  - std::mt19937 (the decoders' generators: decoder j is seeded with j);
 *  - std::discrete_distribution<int> as libstdc++ implements it: the float
 *    probabilities widened to double, divided by their double sum, a running
 *    (partial) sum whose last entry is set to 1, a uniform double from
 *    std::generate_canonical<double, 53> (two 32-bit draws: (a + b 2^32) / 2^64)
 *    and the first cumulative entry >= that number;
 *  - whisper.cpp's tokenizer for the initial prompt: the GPT-2 word pattern
 *    as std::regex (ECMAScript, "C" locale: only ASCII letters and digits are
 *    classified) matches it, then the longest vocabulary entry that is a
 *    prefix of the rest of the word, repeatedly (an unknown byte is skipped).
 */
#include "whisper_internal.h"

#include <stdlib.h>
#include <string.h>

void whisper_mt_seed(struct whisper_mt19937 * r, uint32_t seed) {
    r->mt[0] = seed;
    for (int i = 1; i < 624; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t) i;
    r->idx = 624;
}

uint32_t whisper_mt_next(struct whisper_mt19937 * r) {
    if (r->idx >= 624) {
        for (int i = 0; i < 624; i++) {
            const uint32_t y = (r->mt[i] & 0x80000000u) | (r->mt[(i + 1) % 624] & 0x7fffffffu);
            r->mt[i] = r->mt[(i + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        r->idx = 0;
    }
    uint32_t y = r->mt[r->idx++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

int whisper_discrete_setup(const float * probs, int n, double * cp) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double) probs[i];
    if (!(sum > 0.0)) return -1;
    double run = 0.0;
    for (int i = 0; i < n; i++) { run += (double) probs[i] / sum; cp[i] = run; }
    cp[n - 1] = 1.0;
    return 0;
}

int whisper_discrete_draw(struct whisper_mt19937 * r, const double * cp, int n, double * margin) {
    const double a = (double) whisper_mt_next(r);
    const double b = (double) whisper_mt_next(r);
    double u = (a + b * 4294967296.0) / 18446744073709551616.0;
    if (u >= 1.0) u = 0x1.fffffffffffffp-1;
    int lo = 0, hi = n;   /* first index with cp[i] >= u */
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        if (cp[mid] < u) lo = mid + 1; else hi = mid;
    }
    if (lo >= n) lo = n - 1;
    if (margin) {
        const double below = lo > 0 ? u - cp[lo - 1] : u;
        const double above = cp[lo] - u;
        *margin = below < above ? below : above;
    }
    return lo;
}

/* ------------------------------------------------------------ tokenizer */

static uint32_t hash_bytes(const char * s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char) s[i]; h *= 16777619u; }
    return h;
}

/* the id of the vocabulary entry equal to s[0..n) (the last such id, as whisper.cpp's map keeps), or -1 */
static int32_t vocab_find(struct kiln_whisper * w, const char * s, size_t n) {
    if (!w->tok_hash) {
        int cap = 1;
        while (cap < 2 * w->n_vocab) cap <<= 1;
        w->tok_hash = (int32_t *) malloc((size_t) cap * sizeof(int32_t));
        if (!w->tok_hash) return -1;
        for (int i = 0; i < cap; i++) w->tok_hash[i] = -1;
        w->tok_hash_cap = cap;
        for (int32_t id = 0; id < w->n_vocab; id++) {
            const char * t = w->vocab_blob + w->vocab_off[id];
            const size_t tl = w->vocab_len[id];
            uint32_t h = hash_bytes(t, tl) & (uint32_t) (cap - 1);
            for (;;) {
                const int32_t o = w->tok_hash[h];
                if (o < 0) { w->tok_hash[h] = id; break; }
                if (w->vocab_len[o] == tl && memcmp(w->vocab_blob + w->vocab_off[o], t, tl) == 0) { w->tok_hash[h] = id; break; }
                h = (h + 1) & (uint32_t) (cap - 1);
            }
        }
    }
    uint32_t h = hash_bytes(s, n) & (uint32_t) (w->tok_hash_cap - 1);
    for (;;) {
        const int32_t o = w->tok_hash[h];
        if (o < 0) return -1;
        if (w->vocab_len[o] == n && memcmp(w->vocab_blob + w->vocab_off[o], s, n) == 0) return o;
        h = (h + 1) & (uint32_t) (w->tok_hash_cap - 1);
    }
}

static bool is_alpha(unsigned char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* length of the word pattern's match at s[i..n) (always >= 1 for i < n) */
static size_t word_len(const unsigned char * s, size_t i, size_t n) {
    static const char * const contractions[] = { "'s", "'t", "'re", "'ve", "'m", "'ll", "'d" };
    for (int k = 0; k < 7; k++) {
        const size_t l = strlen(contractions[k]);
        if (i + l <= n && memcmp(s + i, contractions[k], l) == 0) return l;
    }
    /* " ?[[:alpha:]]+", " ?[[:digit:]]+", " ?[^\s[:alpha:][:digit:]]+" */
    for (int cls = 0; cls < 3; cls++) {
        size_t j = i;
        if (s[j] == ' ' && j + 1 < n) j++;
        size_t k = j;
        for (; k < n; k++) {
            const unsigned char c = s[k];
            const bool in = cls == 0 ? is_alpha(c) : cls == 1 ? is_digit(c) : !(is_space(c) || is_alpha(c) || is_digit(c));
            if (!in) break;
        }
        if (k > j) return k - i;
        /* the optional space may also be left out: then the class must start at i itself (it cannot: s[i] is a space) */
    }
    /* "\s+(?!\S)" then "\s+" */
    size_t k = i;
    while (k < n && is_space(s[k])) k++;
    const size_t run = k - i;
    if (run == 0) return 1;    /* not reached: every byte is in one of the classes above */
    if (k == n) return run;
    if (run > 1) return run - 1;
    return run;
}

int whisper_tokenize_prompt(struct kiln_whisper * w, const char * text, int32_t * out, int max_out) {
    const unsigned char * s = (const unsigned char *) text;
    const size_t n = strlen(text);
    int n_out = 0;
    for (size_t i = 0; i < n;) {
        const size_t wl = word_len(s, i, n);
        size_t a = i;
        const size_t end = i + wl;
        while (a < end) {
            size_t b = end;
            int32_t id = -1;
            for (; b > a; b--) if ((id = vocab_find(w, text + a, b - a)) >= 0) break;
            if (id >= 0) {
                if (n_out < max_out) out[n_out] = id;
                n_out++;
                a = b;
            } else {
                a++;
            }
        }
        i = end;
    }
    return n_out;
}
