/*
 * grammar.c — GBNF grammars as llama.cpp defines them (grammars/README.md):
 * the parser, the pushdown matcher over Unicode code points, and the token
 * filter the sampler applies.
 *
 * Syntax: `name ::= alternatives` rules (names of [a-zA-Z0-9-]), `|`
 * alternatives, sequences, `( ... )` groups, "literals", [classes] with
 * ranges and ^ negation, `.` (any character), escapes \x.. \u.... \U........
 * \t \r \n \\ \" \[ \], repetition * + ? {m} {m,} {m,n} (written out into
 * helper rules, as llama.cpp does), # comments, and token references <[id]>,
 * <text> (a single token of the vocabulary) and their negations !<...>.
 *
 * Matching keeps every possible parse as a stack of element positions; a
 * code point advances each stack whose top terminal matches it, and the
 * rule references then on top are expanded to terminals again. A token is
 * allowed when some stack can consume all of its code points (its last bytes
 * may be an unfinished UTF-8 character that the next token completes).
 * Candidate tokens are filtered together, one code point depth at a time,
 * so stacks are advanced once per (stack, prefix) rather than per token.
 */
#include "grammar.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KG_MAX_REPETITION 2000
#define KG_MAX_NESTING 256          /* ( ... ) groups inside one another */
#define KG_MAX_EXPANSIONS 4000000   /* rule expansions per operation (see kg_advance) */
#define KG_MAX_DEPTH 8192           /* nested leftmost expansions (each a stack frame) */

struct kg_rule {
    struct kg_elem * e;
    uint32_t n, cap;
};

/* a set of stacks: stack i is pool[off[i] .. off[i] + len[i]) */
struct kg_stacks {
    const struct kg_elem ** pool;
    size_t   n_pool, cap_pool;
    size_t * off;
    uint32_t * len;
    size_t   n, cap;
};

/* stack i of s (NULL while every stack is empty and nothing is pooled) */
static inline const struct kg_elem * const * kg_stack_at(const struct kg_stacks * s, size_t i) {
    return s->pool ? s->pool + s->off[i] : NULL;
}

struct kiln_grammar {
    struct kg_rule * rules;
    uint32_t n_rules;
    uint32_t root;
    struct kg_stacks stacks;
    struct kg_partial partial;
    bool oom;
    bool too_complex;   /* an operation ran past KG_MAX_EXPANSIONS */
    uint64_t expansions;
    /* scratch for building stacks during expansion (indices, since it grows) */
    const struct kg_elem ** scratch;
    size_t n_scratch, cap_scratch;
    /* the text-matching decode buffer */
    uint32_t * cpbuf;
    size_t cap_cpbuf;
};

/* ------------------------------------------------------------ UTF-8 */

/* Decode bytes (up to len or a NUL) continuing a partial sequence. Writes
 * the complete code points and a terminating 0 to out (room for len + 1);
 * returns the count. Invalid bytes give no code points and n_remain -1. */
static size_t kg_decode(const char * s, size_t len, struct kg_partial start, uint32_t * out, struct kg_partial * end) {
    static const int8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 2, 2, 3, 4 };
    size_t pos = 0, n = 0;
    uint32_t value = start.value;
    int32_t n_remain = start.n_remain;
    while (pos < len && s[pos] && n_remain > 0) {
        uint8_t b = (uint8_t) s[pos];
        if ((b >> 6) != 2) {
            out[0] = 0;
            *end = (struct kg_partial) { 0, -1 };
            return 0;
        }
        value = (value << 6) + (b & 0x3F);
        pos++;
        n_remain--;
    }
    if (start.n_remain > 0 && n_remain == 0) {
        out[n++] = value;
    }
    while (pos < len && s[pos]) {
        uint8_t first = (uint8_t) s[pos];
        n_remain = lookup[first >> 4] - 1;
        if (n_remain < 0) {
            out[0] = 0;
            *end = (struct kg_partial) { 0, -1 };
            return 0;
        }
        value = first & ((1u << (7 - n_remain)) - 1);
        pos++;
        while (pos < len && s[pos] && n_remain > 0) {
            value = (value << 6) + ((uint8_t) s[pos] & 0x3F);
            pos++;
            n_remain--;
        }
        if (n_remain == 0) {
            out[n++] = value;
        }
    }
    out[n] = 0;
    *end = (struct kg_partial) { value, n_remain };
    return n;
}

/* ------------------------------------------------------------ matching */

static bool kg_is_eos(const struct kg_elem * p) {
    return p->type == KG_END || p->type == KG_ALT;
}

/* does the class (or char) at pos admit chr; *after: the element past it */
static bool kg_match_char(const struct kg_elem * pos, uint32_t chr, const struct kg_elem ** after) {
    bool found = false;
    bool positive = pos->type == KG_CHAR || pos->type == KG_CHAR_ANY;
    do {
        if (pos[1].type == KG_CHAR_RNG_UPPER) {
            found = found || (pos->value <= chr && chr <= pos[1].value);
            pos += 2;
        } else if (pos->type == KG_CHAR_ANY) {
            found = true;
            pos += 1;
        } else {
            found = found || pos->value == chr;
            pos += 1;
        }
    } while (pos->type == KG_CHAR_ALT);
    if (after) *after = pos;
    return found == positive;
}

/* could some completion of the partial sequence match the class at pos */
static bool kg_match_partial(const struct kg_elem * pos, struct kg_partial pt) {
    bool positive = pos->type == KG_CHAR || pos->type == KG_CHAR_ANY;
    if (pt.n_remain < 0 || (pt.n_remain == 1 && pt.value < 2)) {
        return false; /* invalid, or an overlong 2-byte form */
    }
    uint32_t low = pt.value << (pt.n_remain * 6);
    uint32_t high = low | ((1u << (pt.n_remain * 6)) - 1);
    if (low == 0) {
        if (pt.n_remain == 2) low = 1u << 11;
        else if (pt.n_remain == 3) low = 1u << 16;
    }
    do {
        if (pos[1].type == KG_CHAR_RNG_UPPER) {
            if (pos->value <= high && low <= pos[1].value) return positive;
            pos += 2;
        } else if (pos->type == KG_CHAR_ANY) {
            return true;
        } else {
            if (low <= pos->value && pos->value <= high) return positive;
            pos += 1;
        }
    } while (pos->type == KG_CHAR_ALT);
    return !positive;
}

static void kg_stacks_clear(struct kg_stacks * s) {
    s->n = 0;
    s->n_pool = 0;
}

static void kg_stacks_free(struct kg_stacks * s) {
    free(s->pool);
    free(s->off);
    free(s->len);
    memset(s, 0, sizeof(*s));
}

/* add a stack unless an equal one is there; false on OOM */
static bool kg_stacks_add(struct kg_stacks * s, const struct kg_elem * const * st, uint32_t len) {
    for (size_t i = 0; i < s->n; i++) {
        if (s->len[i] == len && (len == 0 || memcmp(kg_stack_at(s, i), st, len * sizeof(*st)) == 0)) {
            return true;
        }
    }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        size_t * off = realloc(s->off, cap * sizeof(size_t));
        if (!off) return false;
        s->off = off;
        uint32_t * l = realloc(s->len, cap * sizeof(uint32_t));
        if (!l) return false;
        s->len = l;
        s->cap = cap;
    }
    if (s->n_pool + len > s->cap_pool) {
        size_t cap = s->cap_pool ? s->cap_pool * 2 : 64;
        while (cap < s->n_pool + len) cap *= 2;
        const struct kg_elem ** p = realloc(s->pool, cap * sizeof(*p));
        if (!p) return false;
        s->pool = p;
        s->cap_pool = cap;
    }
    if (len) memcpy(s->pool + s->n_pool, st, len * sizeof(*st));
    s->off[s->n] = s->n_pool;
    s->len[s->n] = len;
    s->n_pool += len;
    s->n++;
    return true;
}

static bool kg_scratch_reserve(struct kiln_grammar * g, size_t need) {
    if (need <= g->cap_scratch) return true;
    size_t cap = g->cap_scratch ? g->cap_scratch * 2 : 256;
    while (cap < need) cap *= 2;
    const struct kg_elem ** p = realloc(g->scratch, cap * sizeof(*p));
    if (!p) {
        g->oom = true;
        return false;
    }
    g->scratch = p;
    g->cap_scratch = cap;
    return true;
}

/* Expand the stack scratch[base .. base+len) until its top is a terminal
 * (or it is empty), adding each result to out. Left recursion is rejected
 * at parse time, so this terminates. */
static void kg_advance(struct kiln_grammar * g, size_t base, uint32_t len, struct kg_stacks * out, int depth) {
    if (g->oom) return;
    if (depth > KG_MAX_DEPTH) {
        g->too_complex = g->oom = true;
        return;
    }
    /* grammars with nested repetitions of possibly empty items expand into
     * exponentially many paths; stop instead of running for ever */
    if (++g->expansions > KG_MAX_EXPANSIONS) {
        g->too_complex = g->oom = true;
        return;
    }
    if (len == 0) {
        if (!kg_stacks_add(out, NULL, 0)) g->oom = true;
        return;
    }
    const struct kg_elem * pos = g->scratch[base + len - 1];
    if (pos->type != KG_RULE_REF) {
        if (!kg_stacks_add(out, g->scratch + base, len)) g->oom = true;
        return;
    }
    const struct kg_elem * sub = g->rules[pos->value].e;
    for (;;) {
        size_t nb = base + len;
        if (!kg_scratch_reserve(g, nb + len + 1)) return;
        memcpy(g->scratch + nb, g->scratch + base, (len - 1) * sizeof(*g->scratch));
        uint32_t nl = len - 1;
        if (!kg_is_eos(pos + 1)) g->scratch[nb + nl++] = pos + 1;
        if (!kg_is_eos(sub)) g->scratch[nb + nl++] = sub;
        kg_advance(g, nb, nl, out, depth + 1);
        if (g->oom) return;
        while (!kg_is_eos(sub)) sub++;
        if (sub->type != KG_ALT) break;
        sub++;
    }
}

/* advance a stack given as an array (copied into the scratch first) */
static void kg_advance_copy(struct kiln_grammar * g, const struct kg_elem * const * st, uint32_t len,
                            const struct kg_elem * top, struct kg_stacks * out) {
    size_t base = g->n_scratch;
    if (!kg_scratch_reserve(g, base + len + 1)) return;
    if (len) memcpy(g->scratch + base, st, len * sizeof(*st));
    uint32_t n = len;
    if (top) g->scratch[base + n++] = top;
    g->n_scratch = base + n;
    kg_advance(g, base, n, out, 0);
    g->n_scratch = base;
}

static void kg_init_stacks(struct kiln_grammar * g) {
    g->expansions = 0;
    kg_stacks_clear(&g->stacks);
    g->partial = (struct kg_partial) { 0, 0 };
    const struct kg_elem * pos = g->rules[g->root].e;
    for (;;) {
        kg_advance_copy(g, NULL, 0, kg_is_eos(pos) ? NULL : pos, &g->stacks);
        while (!kg_is_eos(pos)) pos++;
        if (pos->type != KG_ALT) break;
        pos++;
    }
}

/* one code point through every stack: next = advanced survivors */
static void kg_accept_cp(struct kiln_grammar * g, const struct kg_stacks * cur, uint32_t chr, struct kg_stacks * next) {
    kg_stacks_clear(next);
    for (size_t i = 0; i < cur->n && !g->oom; i++) {
        uint32_t len = cur->len[i];
        if (len == 0) continue;
        const struct kg_elem * const * st = kg_stack_at(cur, i);
        const struct kg_elem * pos = st[len - 1];
        if (pos->type == KG_TOKEN || pos->type == KG_TOKEN_NOT) continue;
        const struct kg_elem * after;
        if (kg_match_char(pos, chr, &after)) {
            kg_advance_copy(g, st, len - 1, kg_is_eos(after) ? NULL : after, next);
        }
    }
}

static void kg_stacks_swap(struct kg_stacks * a, struct kg_stacks * b) {
    struct kg_stacks t = *a;
    *a = *b;
    *b = t;
}

/* ------------------------------------------------------------ candidates */

struct kg_cand {
    int32_t index;          /* into the caller's list */
    kiln_token id;
    const uint32_t * cp;    /* the code points still to match */
    struct kg_partial partial;
};

struct kg_cands {
    struct kg_cand * c;
    size_t n, cap;
};

static bool kg_cands_push(struct kg_cands * v, struct kg_cand c) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        struct kg_cand * p = realloc(v->c, cap * sizeof(*p));
        if (!p) return false;
        v->c = p;
        v->cap = cap;
    }
    v->c[v->n++] = c;
    return true;
}

static void kg_reject(struct kiln_grammar * g, const struct kg_stacks * stacks, const struct kg_cand * c, size_t n,
                      struct kg_cands * rejects);

/* The candidates that this one stack cannot take, appended to rejects. */
static void kg_reject_for_stack(struct kiln_grammar * g, const struct kg_elem * const * st, uint32_t len,
                                const struct kg_cand * c, size_t n, struct kg_cands * rejects) {
    if (len == 0) {
        for (size_t i = 0; i < n; i++) {
            if ((c[i].cp[0] != 0 || c[i].partial.n_remain != 0) && !kg_cands_push(rejects, c[i])) g->oom = true;
        }
        return;
    }
    const struct kg_elem * pos = st[len - 1];
    if (pos->type == KG_TOKEN || pos->type == KG_TOKEN_NOT) {
        for (size_t i = 0; i < n; i++) {
            bool rej;
            if (c[i].cp[0] == 0) {
                rej = c[i].partial.n_remain != 0;
            } else {
                rej = pos->type == KG_TOKEN ? (uint32_t) c[i].id != pos->value : (uint32_t) c[i].id == pos->value;
            }
            if (rej && !kg_cands_push(rejects, c[i])) g->oom = true;
        }
        return;
    }
    struct kg_cands next = { 0 };
    for (size_t i = 0; i < n && !g->oom; i++) {
        bool ok;
        if (c[i].cp[0] == 0) {
            ok = c[i].partial.n_remain == 0 || kg_match_partial(pos, c[i].partial);
            if (!ok && !kg_cands_push(rejects, c[i])) g->oom = true;
        } else if (kg_match_char(pos, c[i].cp[0], NULL)) {
            struct kg_cand nc = c[i];
            nc.cp++;
            if (!kg_cands_push(&next, nc)) g->oom = true;
        } else if (!kg_cands_push(rejects, c[i])) {
            g->oom = true;
        }
    }
    if (next.n > 0 && !g->oom) {
        const struct kg_elem * after;
        kg_match_char(pos, 0, &after);
        struct kg_stacks ns = { 0 };
        kg_advance_copy(g, st, len - 1, kg_is_eos(after) ? NULL : after, &ns);
        struct kg_cands nr = { 0 };
        kg_reject(g, &ns, next.c, next.n, &nr);
        for (size_t i = 0; i < nr.n && !g->oom; i++) {
            nr.c[i].cp--;
            if (!kg_cands_push(rejects, nr.c[i])) g->oom = true;
        }
        free(nr.c);
        kg_stacks_free(&ns);
    }
    free(next.c);
}

/* The candidates no stack can take: each stack filters what the previous
 * ones rejected. */
static void kg_reject(struct kiln_grammar * g, const struct kg_stacks * stacks, const struct kg_cand * c, size_t n,
                      struct kg_cands * rejects) {
    if (n == 0) return;
    if (stacks->n == 0) {
        for (size_t i = 0; i < n; i++) {
            if (!kg_cands_push(rejects, c[i])) g->oom = true;
        }
        return;
    }
    struct kg_cands cur = { 0 };
    kg_reject_for_stack(g, kg_stack_at(stacks, 0), stacks->len[0], c, n, &cur);
    for (size_t s = 1; s < stacks->n && cur.n > 0 && !g->oom; s++) {
        struct kg_cands nx = { 0 };
        kg_reject_for_stack(g, kg_stack_at(stacks, s), stacks->len[s], cur.c, cur.n, &nx);
        free(cur.c);
        cur = nx;
    }
    for (size_t i = 0; i < cur.n && !g->oom; i++) {
        if (!kg_cands_push(rejects, cur.c[i])) g->oom = true;
    }
    free(cur.c);
}

static bool kg_complete_stack(const struct kiln_grammar * g) {
    for (size_t i = 0; i < g->stacks.n; i++) {
        if (g->stacks.len[i] == 0) return true;
    }
    return false;
}

/* ------------------------------------------------------------ vocab cache */

enum kiln_status kg_vocab_cache_init(struct kg_vocab_cache * c, const struct kiln_vocab * vocab) {
    memset(c, 0, sizeof(*c));
    c->vocab = vocab;
    int32_t nv = kiln_vocab_n_tokens(vocab);
    c->n_vocab = nv;
    c->byte_off = malloc(sizeof(size_t) * ((size_t) nv + 1));
    c->cp_off = malloc(sizeof(size_t) * ((size_t) nv + 1));
    c->partial = malloc(sizeof(struct kg_partial) * (size_t) nv);
    c->kind = malloc((size_t) nv);
    size_t cap = (size_t) nv * 8 + 64, used = 0;
    c->bytes = malloc(cap);
    if (!c->byte_off || !c->cp_off || !c->partial || !c->kind || !c->bytes) goto oom;
    for (int32_t t = 0; t < nv; t++) {
        char buf[256];
        int32_t k = kiln_token_to_piece(vocab, t, buf, sizeof(buf), 0, true);
        char * src = buf;
        char * heap = NULL;
        if (k < 0) {
            heap = malloc((size_t) -k);
            if (!heap) goto oom;
            k = kiln_token_to_piece(vocab, t, heap, -k, 0, true);
            src = heap;
            if (k < 0) k = 0;
        }
        if (used + (size_t) k + 1 > cap) {
            while (used + (size_t) k + 1 > cap) cap *= 2;
            char * nb = realloc(c->bytes, cap);
            if (!nb) {
                free(heap);
                goto oom;
            }
            c->bytes = nb;
        }
        memcpy(c->bytes + used, src, (size_t) k);
        c->bytes[used + (size_t) k] = 0;
        c->byte_off[t] = used;
        c->kind[t] = kiln_vocab_is_eog(vocab, t) ? 1 : (k == 0 || src[0] == 0) ? 2 : 0;
        used += (size_t) k + 1;
        free(heap);
    }
    c->byte_off[nv] = used;
    /* each piece decodes to at most as many code points as bytes */
    c->cps = malloc(sizeof(uint32_t) * (used + 1));
    if (!c->cps) goto oom;
    size_t cu = 0;
    for (int32_t t = 0; t < nv; t++) {
        const char * p = c->bytes + c->byte_off[t];
        size_t blen = c->byte_off[t + 1] - c->byte_off[t] - 1;
        c->cp_off[t] = cu;
        size_t n = kg_decode(p, blen, (struct kg_partial) { 0, 0 }, c->cps + cu, &c->partial[t]);
        cu += n + 1;
    }
    c->cp_off[nv] = cu;
    return KILN_STATUS_SUCCESS;
oom:
    kg_vocab_cache_free(c);
    kiln_set_last_error("grammar: out of memory for the token texts");
    return KILN_STATUS_ALLOC_FAILED;
}

void kg_vocab_cache_free(struct kg_vocab_cache * c) {
    free(c->bytes);
    free(c->byte_off);
    free(c->cps);
    free(c->cp_off);
    free(c->partial);
    free(c->kind);
    memset(c, 0, sizeof(*c));
}

static enum kiln_status kg_oom_status(struct kiln_grammar * g) {
    if (g->too_complex) {
        kiln_set_last_error("grammar: too ambiguous or too deep (over %d rule expansions, or %d nested, for one step)",
                            KG_MAX_EXPANSIONS, KG_MAX_DEPTH);
    } else {
        kiln_set_last_error("grammar: out of memory");
    }
    g->oom = g->too_complex = false;
    return KILN_STATUS_ALLOC_FAILED;
}

enum kiln_status kg_apply(struct kiln_grammar * g, const struct kg_vocab_cache * vc, float * logits,
                          const int32_t * ids, int32_t n) {
    g->expansions = 0;
    bool allow_eog = kg_complete_stack(g);
    bool pending = g->partial.n_remain != 0;
    struct kg_cands cands = { 0 };
    uint32_t * extra = NULL; /* decoded pieces when a partial character is pending */
    size_t n_extra = 0;
    if (pending) {
        size_t total = 0;
        for (int32_t i = 0; i < n; i++) {
            int32_t t = ids ? ids[i] : i;
            if (t >= 0 && t < vc->n_vocab) total += vc->byte_off[t + 1] - vc->byte_off[t];
        }
        extra = malloc(sizeof(uint32_t) * (total + 1));
        if (!extra) goto oom;
    }
    for (int32_t i = 0; i < n; i++) {
        int32_t t = ids ? ids[i] : i;
        if (t < 0 || t >= vc->n_vocab) continue;
        if (vc->kind[t] == 1) {
            if (!allow_eog) logits[t] = -INFINITY;
            continue;
        }
        if (vc->kind[t] == 2) {
            logits[t] = -INFINITY;
            continue;
        }
        if (logits[t] == -INFINITY) continue; /* already banned: skip the work */
        struct kg_cand c = { .index = t, .id = t };
        if (pending) {
            const char * p = vc->bytes + vc->byte_off[t];
            size_t blen = vc->byte_off[t + 1] - vc->byte_off[t] - 1;
            c.cp = extra + n_extra;
            n_extra += kg_decode(p, blen, g->partial, extra + n_extra, &c.partial) + 1;
        } else {
            c.cp = vc->cps + vc->cp_off[t];
            c.partial = vc->partial[t];
        }
        if (!kg_cands_push(&cands, c)) goto oom;
    }
    struct kg_cands rejects = { 0 };
    kg_reject(g, &g->stacks, cands.c, cands.n, &rejects);
    for (size_t i = 0; i < rejects.n; i++) {
        logits[rejects.c[i].index] = -INFINITY;
    }
    free(rejects.c);
    free(cands.c);
    free(extra);
    if (g->oom) {
        return kg_oom_status(g);
    }
    return KILN_STATUS_SUCCESS;
oom:
    free(cands.c);
    free(extra);
    kiln_set_last_error("grammar: out of memory");
    return KILN_STATUS_ALLOC_FAILED;
}

/* Advance over decoded code points; when from_token, stacks whose top is a
 * token element take the token id instead. */
static enum kiln_status kg_advance_text(struct kiln_grammar * g, const uint32_t * cps, struct kg_partial end,
                                        kiln_token token, bool from_token) {
    struct kg_stacks out = { 0 }, cur = { 0 }, nx = { 0 };
    g->expansions = 0;
    for (size_t i = 0; i < g->stacks.n && !g->oom; i++) {
        uint32_t len = g->stacks.len[i];
        if (len == 0) continue;
        const struct kg_elem * const * st = kg_stack_at(&g->stacks, i);
        const struct kg_elem * pos = st[len - 1];
        if (pos->type == KG_TOKEN || pos->type == KG_TOKEN_NOT) {
            bool m = from_token && (pos->type == KG_TOKEN ? (uint32_t) token == pos->value : (uint32_t) token != pos->value);
            if (m) kg_advance_copy(g, st, len - 1, kg_is_eos(pos + 1) ? NULL : pos + 1, &out);
            continue;
        }
        kg_stacks_clear(&cur);
        if (!kg_stacks_add(&cur, st, len)) {
            g->oom = true;
            break;
        }
        for (const uint32_t * c = cps; *c && cur.n > 0 && !g->oom; c++) {
            kg_accept_cp(g, &cur, *c, &nx);
            kg_stacks_swap(&cur, &nx);
        }
        for (size_t k = 0; k < cur.n && !g->oom; k++) {
            if (!kg_stacks_add(&out, kg_stack_at(&cur, k), cur.len[k])) g->oom = true;
        }
    }
    kg_stacks_free(&cur);
    kg_stacks_free(&nx);
    if (g->oom) {
        kg_stacks_free(&out);
        return kg_oom_status(g);
    }
    if (end.n_remain > 0) {
        /* an unfinished character: keep the stacks it can complete on */
        size_t k = 0;
        for (size_t i = 0; i < out.n; i++) {
            uint32_t len = out.len[i];
            const struct kg_elem * top = len ? out.pool[out.off[i] + len - 1] : NULL;
            if (top && top->type != KG_TOKEN && top->type != KG_TOKEN_NOT && kg_match_partial(top, end)) {
                out.off[k] = out.off[i];
                out.len[k++] = len;
            }
        }
        out.n = k;
    }
    if (out.n == 0 || end.n_remain < 0) {
        kg_stacks_free(&out);
        kiln_set_last_error("grammar: the text does not continue the grammar");
        return KILN_STATUS_INVALID_ARG;
    }
    kg_stacks_swap(&g->stacks, &out);
    kg_stacks_free(&out);
    g->partial = end;
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kg_accept_token(struct kiln_grammar * g, const struct kg_vocab_cache * vc, kiln_token t) {
    if (t < 0 || t >= vc->n_vocab) {
        kiln_set_last_error("grammar: token %d out of range", (int) t);
        return KILN_STATUS_INVALID_ARG;
    }
    if (vc->kind[t] == 1) {
        if (kg_complete_stack(g)) return KILN_STATUS_SUCCESS;
        kiln_set_last_error("grammar: end of generation before the grammar is complete");
        return KILN_STATUS_INVALID_ARG;
    }
    const char * p = vc->bytes + vc->byte_off[t];
    size_t blen = vc->byte_off[t + 1] - vc->byte_off[t] - 1;
    uint32_t * cps = malloc(sizeof(uint32_t) * (blen + 1));
    if (!cps) {
        kiln_set_last_error("grammar: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    struct kg_partial end;
    kg_decode(p, blen, g->partial, cps, &end);
    enum kiln_status st = kg_advance_text(g, cps, end, t, true);
    free(cps);
    return st;
}

/* ------------------------------------------------------------ parser */

struct kg_name {
    char * s;
    uint32_t id;
    const char * first_ref; /* where a sequence first referred to it */
};

struct kg_parser {
    const char * src;
    const struct kiln_vocab * vocab;
    struct kiln_grammar * g;
    struct kg_name * names;
    uint32_t n_names, cap_names;
    const char * err_at;
    char err[160];
    bool failed;
    int depth; /* of ( ... ) groups */
};

struct kg_vec {
    struct kg_elem * e;
    uint32_t n, cap;
};

static bool kg_vec_push(struct kg_parser * p, struct kg_vec * v, uint32_t type, uint32_t value) {
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 16;
        struct kg_elem * e = realloc(v->e, cap * sizeof(*e));
        if (!e) {
            p->failed = true;
            snprintf(p->err, sizeof(p->err), "out of memory");
            p->err_at = NULL;
            return false;
        }
        v->e = e;
        v->cap = cap;
    }
    v->e[v->n++] = (struct kg_elem) { type, value };
    return true;
}

static const char * kg_fail(struct kg_parser * p, const char * at, const char * fmt, ...) {
    if (!p->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, sizeof(p->err), fmt, ap);
        va_end(ap);
        p->err_at = at;
        p->failed = true;
    }
    return NULL;
}

static bool kg_is_word(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' || (c >= '0' && c <= '9');
}

static const char * kg_space(const char * s, bool newline_ok) {
    while (*s == ' ' || *s == '\t' || *s == '#' || (newline_ok && (*s == '\r' || *s == '\n'))) {
        if (*s == '#') {
            while (*s && *s != '\r' && *s != '\n') s++;
        } else {
            s++;
        }
    }
    return s;
}

/* a new rule slot; id = index */
static bool kg_new_rule(struct kg_parser * p, uint32_t * id) {
    struct kiln_grammar * g = p->g;
    struct kg_rule * r = realloc(g->rules, (g->n_rules + 1) * sizeof(*r));
    if (!r) {
        kg_fail(p, NULL, "out of memory");
        return false;
    }
    g->rules = r;
    memset(&g->rules[g->n_rules], 0, sizeof(struct kg_rule));
    *id = g->n_rules++;
    return true;
}

static bool kg_add_name(struct kg_parser * p, const char * s, size_t len, uint32_t id) {
    if (p->n_names == p->cap_names) {
        uint32_t cap = p->cap_names ? p->cap_names * 2 : 32;
        struct kg_name * n = realloc(p->names, cap * sizeof(*n));
        if (!n) return false;
        p->names = n;
        p->cap_names = cap;
    }
    char * c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, s, len);
    c[len] = 0;
    p->names[p->n_names++] = (struct kg_name) { c, id, NULL };
    return true;
}

static bool kg_symbol(struct kg_parser * p, const char * s, size_t len, uint32_t * id) {
    for (uint32_t i = 0; i < p->n_names; i++) {
        if (strlen(p->names[i].s) == len && memcmp(p->names[i].s, s, len) == 0) {
            *id = p->names[i].id;
            return true;
        }
    }
    if (!kg_new_rule(p, id)) return false;
    if (!kg_add_name(p, s, len, *id)) {
        kg_fail(p, NULL, "out of memory");
        return false;
    }
    return true;
}

static bool kg_gen_symbol(struct kg_parser * p, const char * base, uint32_t * id) {
    if (!kg_new_rule(p, id)) return false;
    char name[128];
    snprintf(name, sizeof(name), "%.100s_%u", base, (unsigned) *id);
    if (!kg_add_name(p, name, strlen(name), *id)) {
        kg_fail(p, NULL, "out of memory");
        return false;
    }
    return true;
}

static void kg_set_rule(struct kg_parser * p, uint32_t id, struct kg_vec * v) {
    struct kg_rule * r = &p->g->rules[id];
    free(r->e);
    r->e = v->e;
    r->n = v->n;
    r->cap = v->cap;
    v->e = NULL;
    v->n = v->cap = 0;
}

static const char * kg_hex(struct kg_parser * p, const char * s, int size, uint32_t * out) {
    const char * pos = s;
    uint32_t v = 0;
    int k = 0;
    for (; k < size && *pos; k++, pos++) {
        char c = *pos;
        if (c >= '0' && c <= '9') v = v * 16 + (uint32_t) (c - '0');
        else if (c >= 'a' && c <= 'f') v = v * 16 + (uint32_t) (c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v = v * 16 + (uint32_t) (c - 'A' + 10);
        else break;
    }
    if (k != size) return kg_fail(p, s, "expecting %d hex chars", size);
    *out = v;
    return pos;
}

static const char * kg_char(struct kg_parser * p, const char * s, uint32_t * out) {
    if (*s == '\\') {
        switch (s[1]) {
            case 'x': return kg_hex(p, s + 2, 2, out);
            case 'u': return kg_hex(p, s + 2, 4, out);
            case 'U': return kg_hex(p, s + 2, 8, out);
            case 't': *out = '\t'; return s + 2;
            case 'r': *out = '\r'; return s + 2;
            case 'n': *out = '\n'; return s + 2;
            case '\\': case '"': case '[': case ']': *out = (uint8_t) s[1]; return s + 2;
            default: return kg_fail(p, s, "unknown escape");
        }
    }
    if (!*s) return kg_fail(p, s, "unexpected end of input");
    /* one UTF-8 character (lenient about continuation bytes, as llama.cpp) */
    static const int8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    uint8_t first = (uint8_t) *s;
    int len = lookup[first >> 4];
    uint32_t v = first & ((1u << (8 - len)) - 1);
    const char * pos = s + 1;
    for (; pos < s + len && *pos; pos++) v = (v << 6) + ((uint8_t) *pos & 0x3F);
    *out = v;
    return pos;
}

static const char * kg_alternates(struct kg_parser * p, const char * s, const char * rule_name, uint32_t rule_id, bool nested);

/* S{m,n} written out: S m times, then n-m nested optional helper rules
 * (S' ::= S S'' | ... ; S{m,} ends in S' ::= S S' |). */
static bool kg_repeat(struct kg_parser * p, struct kg_vec * out, uint32_t last_start, const char * rule_name,
                      int min_times, int max_times) {
    uint32_t plen = out->n - last_start;
    struct kg_elem * prev = malloc((plen ? plen : 1) * sizeof(*prev));
    if (!prev) {
        kg_fail(p, NULL, "out of memory");
        return false;
    }
    memcpy(prev, out->e + last_start, plen * sizeof(*prev));
    if (min_times == 0) {
        out->n = last_start;
    } else {
        for (int i = 1; i < min_times; i++) {
            for (uint32_t k = 0; k < plen; k++) {
                if (!kg_vec_push(p, out, prev[k].type, prev[k].value)) goto fail;
            }
        }
    }
    uint32_t last_rec = 0;
    int n_opt = max_times < 0 ? 1 : max_times - min_times;
    for (int i = 0; i < n_opt; i++) {
        uint32_t rec_id;
        if (!kg_gen_symbol(p, rule_name, &rec_id)) goto fail;
        struct kg_vec rec = { 0 };
        for (uint32_t k = 0; k < plen; k++) {
            if (!kg_vec_push(p, &rec, prev[k].type, prev[k].value)) {
                free(rec.e);
                goto fail;
            }
        }
        bool ok = true;
        if (i > 0 || max_times < 0) ok = kg_vec_push(p, &rec, KG_RULE_REF, max_times < 0 ? rec_id : last_rec);
        ok = ok && kg_vec_push(p, &rec, KG_ALT, 0) && kg_vec_push(p, &rec, KG_END, 0);
        if (!ok) {
            free(rec.e);
            goto fail;
        }
        kg_set_rule(p, rec_id, &rec);
        last_rec = rec_id;
    }
    if (n_opt > 0 && !kg_vec_push(p, out, KG_RULE_REF, last_rec)) goto fail;
    free(prev);
    return true;
fail:
    free(prev);
    return false;
}

static const char * kg_int(struct kg_parser * p, const char * s, int * out) {
    const char * pos = s;
    long v = 0;
    while (*pos >= '0' && *pos <= '9') {
        if (v < 100000000) v = v * 10 + (*pos - '0');
        pos++;
    }
    if (pos == s) return kg_fail(p, s, "expecting integer");
    *out = (int) v;
    return pos;
}

/* <[id]> or <text>; the text must be exactly one token of the vocabulary */
static const char * kg_token(struct kg_parser * p, const char * s, uint32_t * id) {
    const char * at = s;
    s++; /* '<' */
    if (*s == '[') {
        int v = 0;
        s = kg_int(p, s + 1, &v);
        if (!s) return NULL;
        if (s[0] != ']' || s[1] != '>') return kg_fail(p, s, "expecting ']>' after the token id");
        if (p->vocab && v >= kiln_vocab_n_tokens(p->vocab)) return kg_fail(p, at, "token id %d is not in the vocabulary", v);
        *id = (uint32_t) v;
        return s + 2;
    }
    const char * end = s;
    while (*end && *end != '>') end++;
    if (!*end) return kg_fail(p, at, "unexpected end of input");
    if (!p->vocab) return kg_fail(p, at, "a token reference needs a vocabulary");
    kiln_token toks[2];
    int32_t n = kiln_tokenize(p->vocab, s, (int32_t) (end - s), toks, 2, false, true);
    if (n != 1) return kg_fail(p, at, "'%.*s' is not a single token", (int) (end - s > 60 ? 60 : end - s), s);
    *id = (uint32_t) toks[0];
    return end + 1;
}

static const char * kg_sequence(struct kg_parser * p, const char * pos, const char * rule_name, struct kg_vec * out,
                                bool nested) {
    uint32_t last_start = out->n;
    const char * after_rep = NULL; /* where the text after the last repetition operator starts */
    while (*pos) {
        if (*pos == '"') {
            pos++;
            last_start = out->n;
            while (*pos != '"') {
                if (!*pos) return kg_fail(p, pos, "unexpected end of input");
                uint32_t c = 0;
                pos = kg_char(p, pos, &c);
                if (!pos || !kg_vec_push(p, out, KG_CHAR, c)) return NULL;
            }
            pos = kg_space(pos + 1, nested);
        } else if (*pos == '[') {
            pos++;
            uint32_t start_type = KG_CHAR;
            if (*pos == '^') {
                pos++;
                start_type = KG_CHAR_NOT;
            }
            last_start = out->n;
            while (*pos != ']') {
                if (!*pos) return kg_fail(p, pos, "unexpected end of input");
                uint32_t c = 0;
                pos = kg_char(p, pos, &c);
                if (!pos) return NULL;
                uint32_t type = last_start < out->n ? KG_CHAR_ALT : start_type;
                if (!kg_vec_push(p, out, type, c)) return NULL;
                if (pos[0] == '-' && pos[1] != ']') {
                    if (!pos[1]) return kg_fail(p, pos + 1, "unexpected end of input");
                    pos = kg_char(p, pos + 1, &c);
                    if (!pos || !kg_vec_push(p, out, KG_CHAR_RNG_UPPER, c)) return NULL;
                }
            }
            pos = kg_space(pos + 1, nested);
        } else if (kg_is_word(*pos)) {
            const char * end = pos;
            while (kg_is_word(*end)) end++;
            uint32_t id = 0;
            if (!kg_symbol(p, pos, (size_t) (end - pos), &id)) return NULL;
            for (uint32_t i = 0; i < p->n_names; i++) {
                if (p->names[i].id == id && !p->names[i].first_ref) p->names[i].first_ref = pos;
            }
            pos = kg_space(end, nested);
            last_start = out->n;
            if (!kg_vec_push(p, out, KG_RULE_REF, id)) return NULL;
        } else if (*pos == '<' || *pos == '!') {
            uint32_t type = KG_TOKEN;
            if (*pos == '!') {
                type = KG_TOKEN_NOT;
                pos++;
                if (*pos != '<') return kg_fail(p, pos, "expecting '<' after '!'");
            }
            uint32_t id = 0;
            pos = kg_token(p, pos, &id);
            if (!pos) return NULL;
            last_start = out->n;
            if (!kg_vec_push(p, out, type, id)) return NULL;
            pos = kg_space(pos, nested);
        } else if (*pos == '(') {
            if (p->depth >= KG_MAX_NESTING) return kg_fail(p, pos, "groups nested deeper than %d", KG_MAX_NESTING);
            p->depth++;
            pos = kg_space(pos + 1, true);
            uint32_t sub;
            if (!kg_gen_symbol(p, rule_name, &sub)) return NULL;
            pos = kg_alternates(p, pos, rule_name, sub, true);
            p->depth--;
            if (!pos) return NULL;
            last_start = out->n;
            if (!kg_vec_push(p, out, KG_RULE_REF, sub)) return NULL;
            if (*pos != ')') return kg_fail(p, pos, "expecting ')'");
            pos = kg_space(pos + 1, nested);
        } else if (*pos == '.') {
            last_start = out->n;
            if (!kg_vec_push(p, out, KG_CHAR_ANY, 0)) return NULL;
            pos = kg_space(pos + 1, nested);
        } else if (*pos == '*' || *pos == '+' || *pos == '?') {
            if (last_start == out->n) return kg_fail(p, pos, "expecting preceding item to */+/?/{");
            if (pos == after_rep) {
                /* x++ and the like: the same language as one operator, but exponentially many
                 * ways to match it, which the matcher would explore */
                return kg_fail(p, pos, "a repetition of a repetition (e.g. x++): use one operator");
            }
            int mn = *pos == '+' ? 1 : 0, mx = *pos == '?' ? 1 : -1;
            if (!kg_repeat(p, out, last_start, rule_name, mn, mx)) return NULL;
            pos = after_rep = kg_space(pos + 1, nested);
        } else if (*pos == '{') {
            const char * brace = pos;
            if (last_start == out->n) return kg_fail(p, pos, "expecting preceding item to */+/?/{");
            if (pos == after_rep) {
                return kg_fail(p, pos, "a repetition of a repetition (e.g. x*{2}): use one operator");
            }
            pos = kg_space(pos + 1, nested);
            if (!(*pos >= '0' && *pos <= '9')) return kg_fail(p, pos, "expecting an int");
            int mn = 0, mx = -1;
            pos = kg_int(p, pos, &mn);
            pos = kg_space(pos, nested);
            if (*pos == '}') {
                mx = mn;
                pos = kg_space(pos + 1, nested);
            } else if (*pos == ',') {
                pos = kg_space(pos + 1, nested);
                if (*pos >= '0' && *pos <= '9') {
                    pos = kg_int(p, pos, &mx);
                    pos = kg_space(pos, nested);
                }
                if (*pos != '}') return kg_fail(p, pos, "expecting '}'");
                pos = kg_space(pos + 1, nested);
            } else {
                return kg_fail(p, pos, "expecting ','");
            }
            if (mn > KG_MAX_REPETITION || mx > KG_MAX_REPETITION) {
                return kg_fail(p, brace, "number of repetitions exceeds %d", KG_MAX_REPETITION);
            }
            if (!kg_repeat(p, out, last_start, rule_name, mn, mx)) return NULL;
            after_rep = pos;
        } else {
            break;
        }
    }
    return pos;
}

static const char * kg_alternates(struct kg_parser * p, const char * s, const char * rule_name, uint32_t rule_id,
                                  bool nested) {
    struct kg_vec rule = { 0 };
    const char * pos = kg_sequence(p, s, rule_name, &rule, nested);
    while (pos && *pos == '|') {
        if (!kg_vec_push(p, &rule, KG_ALT, 0)) {
            pos = NULL;
            break;
        }
        pos = kg_space(pos + 1, true);
        pos = kg_sequence(p, pos, rule_name, &rule, nested);
    }
    if (!pos || !kg_vec_push(p, &rule, KG_END, 0)) {
        free(rule.e);
        return NULL;
    }
    kg_set_rule(p, rule_id, &rule);
    return pos;
}

static const char * kg_rule(struct kg_parser * p, const char * s) {
    const char * end = s;
    while (kg_is_word(*end)) end++;
    if (end == s) return kg_fail(p, s, "expecting name");
    const char * pos = kg_space(end, false);
    uint32_t id;
    if (!kg_symbol(p, s, (size_t) (end - s), &id)) return NULL;
    char name[104];
    snprintf(name, sizeof(name), "%.*s", (int) ((end - s) > 100 ? 100 : end - s), s);
    if (!(pos[0] == ':' && pos[1] == ':' && pos[2] == '=')) return kg_fail(p, pos, "expecting ::=");
    pos = kg_space(pos + 3, true);
    pos = kg_alternates(p, pos, name, id, false);
    if (!pos) return NULL;
    if (*pos == '\r') {
        pos += pos[1] == '\n' ? 2 : 1;
    } else if (*pos == '\n') {
        pos++;
    } else if (*pos) {
        return kg_fail(p, pos, "expecting newline or end");
    }
    return kg_space(pos, true);
}

static const char * kg_rule_name(const struct kg_parser * p, uint32_t id) {
    for (uint32_t i = 0; i < p->n_names; i++) {
        if (p->names[i].id == id) return p->names[i].s;
    }
    return "?";
}

/* which rules can match the empty string (an alternative of nothing but
 * such rules), to a fixed point */
static void kg_nullable(const struct kiln_grammar * g, uint8_t * nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            bool alt = true;
            for (uint32_t i = 0; i < g->rules[r].n && !nullable[r]; i++) {
                const struct kg_elem * e = &g->rules[r].e[i];
                if (kg_is_eos(e)) {
                    if (alt) nullable[r] = 1, changed = true;
                    alt = true;
                } else if (e->type == KG_RULE_REF) {
                    alt = alt && nullable[e->value];
                } else if (e->type != KG_CHAR_RNG_UPPER && e->type != KG_CHAR_ALT) {
                    alt = false;
                }
            }
        }
    }
}

/* Left recursion: a rule reachable from itself through leftmost references
 * (past references that can match nothing). llama.cpp looks only at
 * directly empty alternatives; following every nullable rule also rejects
 * grammars such as `x ::= y x | ...` with y ::= z? that would otherwise
 * expand for ever. */
static bool kg_left_rec(const struct kiln_grammar * g, uint32_t r, uint8_t * visited, uint8_t * in_progress,
                        const uint8_t * may_be_empty) {
    if (in_progress[r]) return true;
    in_progress[r] = 1;
    const struct kg_rule * rule = &g->rules[r];
    bool recurse = true;
    for (uint32_t i = 0; i < rule->n; i++) {
        const struct kg_elem * e = &rule->e[i];
        if (e->type == KG_RULE_REF && recurse) {
            if (kg_left_rec(g, e->value, visited, in_progress, may_be_empty)) return true;
            if (!may_be_empty[e->value]) recurse = false;
        } else if (kg_is_eos(e)) {
            recurse = true;
        } else {
            recurse = false;
        }
    }
    in_progress[r] = 0;
    visited[r] = 1;
    return false;
}

static void kg_error_message(const char * src, const char * at, const char * msg) {
    if (!at) {
        kiln_set_last_error("grammar: %s", msg);
        return;
    }
    int line = 1, col = 1;
    for (const char * c = src; c < at; c++) {
        if (*c == '\n') {
            line++;
            col = 1;
        } else if (((uint8_t) *c & 0xC0) != 0x80) {
            col++;
        }
    }
    kiln_set_last_error("grammar: line %d, column %d: %s", line, col, msg);
}

static void kg_free_rules(struct kiln_grammar * g) {
    for (uint32_t i = 0; i < g->n_rules; i++) free(g->rules[i].e);
    free(g->rules);
    g->rules = NULL;
    g->n_rules = 0;
}

struct kiln_grammar * kiln_grammar_init(const char * gbnf, const char * root, const struct kiln_vocab * vocab) {
    if (!gbnf) {
        kiln_set_last_error("grammar: NULL text");
        return NULL;
    }
    if (!root) root = "root";
    struct kiln_grammar * g = calloc(1, sizeof(*g));
    if (!g) {
        kiln_set_last_error("grammar: out of memory");
        return NULL;
    }
    struct kg_parser p = { .src = gbnf, .vocab = vocab, .g = g };
    const char * pos = kg_space(gbnf, true);
    while (pos && *pos) pos = kg_rule(&p, pos);
    bool ok = !p.failed;
    if (ok && g->n_rules == 0) {
        kg_fail(&p, pos, "the grammar has no rules");
        ok = false;
    }
    /* every referenced rule defined */
    for (uint32_t i = 0; ok && i < g->n_rules; i++) {
        if (g->rules[i].n == 0) {
            const char * at = NULL;
            for (uint32_t k = 0; k < p.n_names; k++) {
                if (p.names[k].id == i) at = p.names[k].first_ref;
            }
            char msg[160];
            snprintf(msg, sizeof(msg), "undefined rule identifier '%.100s'", kg_rule_name(&p, i));
            kg_error_message(gbnf, at, msg);
            ok = false;
            goto out;
        }
    }
    if (ok) {
        bool found = false;
        for (uint32_t i = 0; i < p.n_names; i++) {
            if (strcmp(p.names[i].s, root) == 0) {
                g->root = p.names[i].id;
                found = true;
            }
        }
        if (!found) {
            kiln_set_last_error("grammar: no '%s' rule", root);
            ok = false;
            goto out;
        }
        uint8_t * flags = calloc(3, g->n_rules);
        if (flags) kg_nullable(g, flags + 2 * g->n_rules);
        if (!flags) {
            kiln_set_last_error("grammar: out of memory");
            ok = false;
            goto out;
        }
        for (uint32_t i = 0; i < g->n_rules; i++) {
            if (flags[i]) continue;
            if (kg_left_rec(g, i, flags, flags + g->n_rules, flags + 2 * g->n_rules)) {
                kiln_set_last_error("grammar: left recursion in rule '%s' (unsupported)", kg_rule_name(&p, i));
                ok = false;
                break;
            }
        }
        free(flags);
        if (ok) {
            kg_init_stacks(g);
            if (g->oom) {
                kg_oom_status(g);
                ok = false;
            }
        }
    } else {
        kg_error_message(gbnf, p.err_at, p.err);
    }
out:
    for (uint32_t i = 0; i < p.n_names; i++) free(p.names[i].s);
    free(p.names);
    if (!ok) {
        kiln_grammar_free(g);
        return NULL;
    }
    return g;
}

void kiln_grammar_free(struct kiln_grammar * g) {
    if (!g) return;
    kg_free_rules(g);
    kg_stacks_free(&g->stacks);
    free(g->scratch);
    free(g->cpbuf);
    free(g);
}

void kiln_grammar_reset(struct kiln_grammar * g) {
    if (!g) return;
    kg_init_stacks(g);
    g->oom = g->too_complex = false;
}

enum kiln_status kiln_grammar_accept_text(struct kiln_grammar * g, const char * text, int32_t len) {
    if (!g || (!text && len > 0) || len < 0) {
        kiln_set_last_error("grammar: invalid arguments");
        return KILN_STATUS_INVALID_ARG;
    }
    if (len == 0) {
        return KILN_STATUS_SUCCESS;
    }
    if (memchr(text, 0, (size_t) len)) {
        kiln_set_last_error("grammar: the text holds a NUL byte");
        return KILN_STATUS_INVALID_ARG;
    }
    if ((size_t) len + 1 > g->cap_cpbuf) {
        uint32_t * b = realloc(g->cpbuf, sizeof(uint32_t) * ((size_t) len + 1));
        if (!b) {
            kiln_set_last_error("grammar: out of memory");
            return KILN_STATUS_ALLOC_FAILED;
        }
        g->cpbuf = b;
        g->cap_cpbuf = (size_t) len + 1;
    }
    struct kg_partial end;
    kg_decode(len > 0 ? text : "", (size_t) len, g->partial, g->cpbuf, &end);
    return kg_advance_text(g, g->cpbuf, end, KILN_TOKEN_NULL, false);
}

bool kiln_grammar_is_complete(const struct kiln_grammar * g) {
    return g && g->partial.n_remain == 0 && kg_complete_stack(g);
}
