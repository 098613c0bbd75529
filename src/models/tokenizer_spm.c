/*
 * tokenizer_spm.c — SentencePiece-style BPE (tokenizer.ggml.model "llama"):
 * spaces become U+2581, the text splits into UTF-8 characters, and the
 * neighbouring pair whose concatenation is the best-scoring token merges
 * first (ties: leftmost); characters no token covers fall back to <0xXX>
 * byte tokens. Also the merge heap both tokenizers share.
 */
#include "tokenizer_impl.h"
#include "unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool tok_out_push(struct tok_out * o, kiln_token t) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        kiln_token * v = realloc(o->v, cap * sizeof(kiln_token));
        if (!v) {
            return false;
        }
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = t;
    return true;
}

static bool better(const struct tok_bigram * a, const struct tok_bigram * b) {
    return a->prio > b->prio || (a->prio == b->prio && a->left < b->left);
}

bool tok_heap_push(struct tok_heap * h, struct tok_bigram b) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        struct tok_bigram * v = realloc(h->v, cap * sizeof(*v));
        if (!v) {
            return false;
        }
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    h->v[i] = b;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!better(&h->v[i], &h->v[p])) {
            break;
        }
        struct tok_bigram t = h->v[i];
        h->v[i] = h->v[p];
        h->v[p] = t;
        i = p;
    }
    return true;
}

int32_t tok_split_utf8(const char * s, size_t n, struct tok_sym * syms) {
    int32_t n_syms = 0;
    for (size_t offs = 0; offs < n;) {
        size_t len = utf8_len((uint8_t) s[offs]);
        if (len > n - offs) len = n - offs; /* a cut-off character: its bytes as one symbol */
        syms[n_syms] = (struct tok_sym) { n_syms - 1, offs + len == n ? -1 : n_syms + 1, offs, len };
        offs += len;
        n_syms++;
    }
    return n_syms;
}

bool tok_heap_pop(struct tok_heap * h, struct tok_bigram * out) {
    if (h->n == 0) {
        return false;
    }
    *out = h->v[0];
    h->v[0] = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, best = i;
        if (l < h->n && better(&h->v[l], &h->v[best])) best = l;
        if (r < h->n && better(&h->v[r], &h->v[best])) best = r;
        if (best == i) {
            break;
        }
        struct tok_bigram t = h->v[i];
        h->v[i] = h->v[best];
        h->v[best] = t;
        i = best;
    }
    return true;
}

static bool spm_try_bigram(const struct kiln_vocab * v, const char * text, const struct tok_sym * syms,
                           int32_t left, int32_t right, struct tok_heap * heap) {
    if (left < 0 || right < 0) {
        return true;
    }
    size_t n = syms[left].n + syms[right].n;
    int32_t id = strmap_get(&v->token_to_id, text + syms[left].off, n);
    if (id < 0) {
        return true;
    }
    return tok_heap_push(heap, (struct tok_bigram) { left, right, (double) v->score[id], n });
}

static bool spm_byte(const struct kiln_vocab * v, uint8_t b, struct tok_out * out) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    int32_t id = strmap_get(&v->token_to_id, buf, 6);
    if (id < 0) {
        char c = (char) b;
        id = strmap_get(&v->token_to_id, &c, 1);
    }
    return tok_out_push(out, id >= 0 ? id : v->unk);
}

bool spm_tokenize(const struct kiln_vocab * v, const char * raw, size_t raw_len, bool space_prefix, struct tok_out * out) {
    /* escape: ' ' -> U+2581 (3 bytes) */
    size_t cap = (raw_len + 1) * 3 + 1;
    char * text = malloc(cap);
    struct tok_sym * syms = NULL;
    struct tok_heap heap = { 0 };
    bool ok = text != NULL;
    size_t n = 0;
    if (ok && space_prefix) {
        memcpy(text, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; ok && i < raw_len; i++) {
        if (raw[i] == ' ') {
            memcpy(text + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            text[n++] = raw[i];
        }
    }
    if (ok && n > 0) {
        syms = malloc(n * sizeof(*syms));
        ok = syms != NULL;
    }
    int32_t n_syms = 0;
    if (ok) n_syms = tok_split_utf8(text, n, syms);
    for (int32_t i = 1; ok && i < n_syms; i++) {
        ok = spm_try_bigram(v, text, syms, i - 1, i, &heap);
    }
    struct tok_bigram b;
    while (ok && tok_heap_pop(&heap, &b)) {
        struct tok_sym * l = &syms[b.left];
        struct tok_sym * r = &syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue; /* stale: one side already merged elsewhere */
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            syms[r->next].prev = b.left;
        }
        ok = spm_try_bigram(v, text, syms, l->prev, b.left, &heap) &&
             spm_try_bigram(v, text, syms, b.left, l->next, &heap);
    }
    for (int32_t i = 0; ok && n_syms > 0 && i != -1; i = syms[i].next) {
        int32_t id = strmap_get(&v->token_to_id, text + syms[i].off, syms[i].n);
        if (id >= 0) {
            ok = tok_out_push(out, id);
        } else {
            for (size_t k = 0; ok && k < syms[i].n; k++) {
                ok = spm_byte(v, (uint8_t) text[syms[i].off + k], out);
            }
        }
    }
    free(heap.v);
    free(syms);
    free(text);
    return ok;
}
