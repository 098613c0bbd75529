/*
 * grammar.h — internals of the GBNF grammar (grammar.c) that the sampler
 * uses: the per-vocabulary token text cache and the candidate filter.
 *
 * A parsed grammar is a list of rules; a rule is a sequence of elements
 * ending in KG_END, its alternatives separated by KG_ALT. The parse state is
 * a set of stacks of element pointers (a pushdown automaton kept in all its
 * possible configurations), each stack's top a terminal element; an empty
 * stack means the text so far is a complete sentence of the grammar.
 */
#ifndef KILN_GRAMMAR_H
#define KILN_GRAMMAR_H

#include "kiln-llama.h"

enum kg_type {
    KG_END = 0,        /* end of a rule */
    KG_ALT,            /* start of another alternative */
    KG_RULE_REF,       /* non-terminal: value = rule id */
    KG_CHAR,           /* code point value */
    KG_CHAR_NOT,       /* first element of a negated class [^...] */
    KG_CHAR_RNG_UPPER, /* upper end of a range whose lower end is the previous element */
    KG_CHAR_ALT,       /* another code point (or range start) of the same class */
    KG_CHAR_ANY,       /* "." */
    KG_TOKEN,          /* <[id]>: exactly this token */
    KG_TOKEN_NOT,      /* !<[id]>: any one token but this */
};

struct kg_elem {
    uint32_t type;
    uint32_t value;
};

/* a UTF-8 sequence cut at a token boundary: the bits so far and the number
 * of continuation bytes still expected (-1: the bytes were invalid) */
struct kg_partial {
    uint32_t value;
    int32_t  n_remain;
};

/* Token texts of a vocabulary decoded once into code points (0-terminated),
 * for a grammar state with no partial UTF-8 sequence pending. */
struct kg_vocab_cache {
    const struct kiln_vocab * vocab;
    int32_t    n_vocab;
    char     * bytes;    /* all pieces, each NUL-terminated */
    size_t   * byte_off; /* per token */
    uint32_t * cps;      /* all decoded pieces, each 0-terminated */
    size_t   * cp_off;
    struct kg_partial * partial; /* the partial sequence each piece ends in */
    uint8_t  * kind;     /* 0: normal, 1: end of generation, 2: never allowed (empty piece) */
};

enum kiln_status kg_vocab_cache_init(struct kg_vocab_cache * c, const struct kiln_vocab * vocab);
void             kg_vocab_cache_free(struct kg_vocab_cache * c);

/* Set logits[i] = -INFINITY for every token i that cannot continue the
 * grammar from its current state (EOG only when the grammar is complete).
 * ids: when non-NULL, only logits[ids[0..n)] are considered (the others are
 * left alone); else all n_vocab tokens. */
enum kiln_status kg_apply(struct kiln_grammar * g, const struct kg_vocab_cache * c,
                          float * logits, const int32_t * ids, int32_t n);
/* advance the grammar over one sampled token */
enum kiln_status kg_accept_token(struct kiln_grammar * g, const struct kg_vocab_cache * c, kiln_token t);

#endif /* KILN_GRAMMAR_H */
