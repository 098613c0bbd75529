/*
 * tokenizer_bpe.c — byte-level BPE (tokenizer.ggml.model "gpt2"): the text
 * splits into words with the pre-tokenizer's expressions, each word's bytes
 * map to printable code points (GPT-2's bytes_to_unicode), and neighbouring
 * symbols merge by the rank of their pair in tokenizer.ggml.merges (lowest
 * first, ties leftmost).
 */
#include "tokenizer_impl.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

static bool bpe_try_bigram(const struct kiln_vocab * v, const char * word, const struct tok_sym * syms,
                           int32_t left, int32_t right, char * scratch, struct tok_heap * heap) {
    if (left < 0 || right < 0) {
        return true;
    }
    size_t ln = syms[left].n, rn = syms[right].n;
    memcpy(scratch, word + syms[left].off, ln);
    scratch[ln] = ' ';
    memcpy(scratch + ln + 1, word + syms[right].off, rn);
    int32_t rank = strmap_get(&v->bpe_ranks, scratch, ln + 1 + rn);
    if (rank < 0) {
        return true;
    }
    return tok_heap_push(heap, (struct tok_bigram) { left, right, -(double) rank, ln + rn });
}

static bool bpe_word(const struct kiln_vocab * v, const char * word, size_t n, struct tok_out * out) {
    if (v->ignore_merges) {
        int32_t id = strmap_get(&v->token_to_id, word, n);
        if (id >= 0) {
            return tok_out_push(out, id);
        }
    }
    struct tok_sym * syms = malloc(n * sizeof(*syms));
    char * scratch = malloc(n + 2);
    struct tok_heap heap = { 0 };
    bool ok = syms && scratch;
    int32_t n_syms = 0;
    if (ok) n_syms = tok_split_utf8(word, n, syms);
    for (int32_t i = 1; ok && i < n_syms; i++) {
        ok = bpe_try_bigram(v, word, syms, i - 1, i, scratch, &heap);
    }
    struct tok_bigram b;
    while (ok && tok_heap_pop(&heap, &b)) {
        struct tok_sym * l = &syms[b.left];
        struct tok_sym * r = &syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) {
            continue;
        }
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) {
            syms[r->next].prev = b.left;
        }
        ok = bpe_try_bigram(v, word, syms, l->prev, b.left, scratch, &heap) &&
             bpe_try_bigram(v, word, syms, b.left, l->next, scratch, &heap);
    }
    for (int32_t i = 0; ok && n_syms > 0 && i != -1; i = syms[i].next) {
        int32_t id = strmap_get(&v->token_to_id, word + syms[i].off, syms[i].n);
        if (id >= 0) {
            ok = tok_out_push(out, id);
            continue;
        }
        /* no token: each byte on its own, where the vocabulary has it */
        for (size_t k = 0; ok && k < syms[i].n; k++) {
            int32_t bid = strmap_get(&v->token_to_id, word + syms[i].off + k, 1);
            if (bid >= 0) {
                ok = tok_out_push(out, bid);
            }
        }
    }
    free(heap.v);
    free(scratch);
    free(syms);
    return ok;
}

bool bpe_tokenize(const struct kiln_vocab * v, const char * text, size_t len, struct tok_out * out) {
    size_t n_cpts = 0, n_words = 0;
    uint32_t * cpts = utf8_to_cpts(text, len, &n_cpts);
    if (!cpts) {
        return false;
    }
    size_t * words = pretok_split(v->pre, cpts, n_cpts, &n_words);
    /* a word's bytes, each spelled as its GPT-2 code point (<= 2 UTF-8 bytes) */
    char * enc = malloc(n_cpts * 8 + 1);
    bool ok = words && enc;
    size_t start = 0;
    for (size_t w = 0; ok && w < n_words; w++) {
        size_t m = 0;
        for (size_t i = start; i < start + words[w]; i++) {
            char u[4];
            int ul = utf8_encode(cpts[i], u);
            for (int k = 0; k < ul; k++) {
                m += (size_t) utf8_encode(bytes_to_unicode((uint8_t) u[k]), enc + m);
            }
        }
        start += words[w];
        ok = bpe_word(v, enc, m, out);
    }
    free(enc);
    free(words);
    free(cpts);
    return ok;
}
