/* vocab.h — the vocabulary behind struct kiln_vocab (private to src/models). */
#ifndef KILN_MODELS_VOCAB_H
#define KILN_MODELS_VOCAB_H

#include "kiln-llama.h"
#include "meta.h"
#include "pretok.h"
#include "strmap.h"

struct kiln_vocab {
    enum kiln_vocab_type type;
    enum pretok_type     pre;

    int32_t    n_tokens;
    char    ** text;      /* NUL-terminated token texts */
    uint32_t * text_len;
    float    * score;
    uint32_t * attr;      /* enum kiln_token_attr bits */
    char    ** piece;     /* token_to_piece(special = true), cached */
    uint32_t * piece_len;
    bool     * eog;

    struct strmap token_to_id;
    struct strmap bpe_ranks;  /* "left right" -> merge rank */

    kiln_token bos, eos, eot, eom, unk, pad, linefeed;
    bool add_bos, add_eos, add_space_prefix, clean_spaces, ignore_merges;
    /* WordPiece: the separator added after the text, BERT's normalizer
     * options, and the longest token text in bytes */
    kiln_token sep;
    bool lowercase, strip_accents;
    int32_t max_token_len;

    kiln_token * special;     /* control / user-defined / unknown ids, longest text first */
    int32_t      n_special;
};

/* build from a parsed GGUF file; NULL + kiln_last_error() on failure */
struct kiln_vocab * vocab_from_gguf(const struct kiln_gguf_context * g);

#endif
