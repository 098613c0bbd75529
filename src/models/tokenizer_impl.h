/* tokenizer_impl.h — shared pieces of the SPM and BPE tokenizers (private). */
#ifndef KILN_MODELS_TOKENIZER_IMPL_H
#define KILN_MODELS_TOKENIZER_IMPL_H

#include "vocab.h"

struct tok_out {
    kiln_token * v;
    size_t n, cap;
};

bool tok_out_push(struct tok_out * o, kiln_token t);

/* the symbols being merged: byte slices of one text, in a linked chain */
struct tok_sym {
    int32_t prev, next;
    size_t  off, n;
};

/* a candidate merge of two neighbours; larger prio first, then smaller left */
struct tok_bigram {
    int32_t left, right;
    double  prio;
    size_t  size;
};

struct tok_heap {
    struct tok_bigram * v;
    size_t n, cap;
};

bool tok_heap_push(struct tok_heap * h, struct tok_bigram b);
bool tok_heap_pop(struct tok_heap * h, struct tok_bigram * out);

bool spm_tokenize(const struct kiln_vocab * v, const char * text, size_t len, bool space_prefix, struct tok_out * out);
bool wpm_tokenize(const struct kiln_vocab * v, const char * text, size_t len, struct tok_out * out);
bool bpe_tokenize(const struct kiln_vocab * v, const char * text, size_t len, struct tok_out * out);

#endif
