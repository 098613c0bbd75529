/*
 * tokenizer_wpm.c — BERT's WordPiece (tokenizer.ggml.model = "bert"), as
 * llama.cpp's WPM tokenizer: the text is normalized and split into words
 * (BERT's basic tokenizer), then each word, with "▁" (U+2581) in front, is
 * cut greedily into the longest vocabulary entries from the left. A word
 * with a piece that matches nothing becomes the unknown token as a whole.
 *
 * Normalization: with strip_accents every code point is replaced by the
 * first code point of its canonical decomposition and combining marks are
 * dropped; with lowercase, simple lowercase. Whitespace ends a word; NUL,
 * U+FFFD and control characters vanish; punctuation, ASCII symbols and CJK
 * ideographs become words of their own.
 */
#include "tokenizer_impl.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

static bool is_cjk(uint32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) ||
           (c >= 0x2B920 && c <= 0x2CEAF) || /* llama.cpp (as Hugging Face's) starts this one at 0x2B920 */
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* one word: "▁" then its bytes, cut into vocabulary entries */
static bool wpm_word(const struct kiln_vocab * v, const char * w, size_t n, struct tok_out * out) {
    const size_t start = out->n;
    for (size_t i = 0; i < n; i++) {
        bool match = false;
        size_t j = i + (size_t) v->max_token_len + 1 < n ? i + (size_t) v->max_token_len + 1 : n;
        for (; j > i; j--) {
            const int32_t id = strmap_get(&v->token_to_id, w + i, j - i);
            if (id >= 0) {
                if (!tok_out_push(out, id)) return false;
                match = true;
                i = j - 1;
                break;
            }
        }
        if (!match) {
            out->n = start; /* the whole word is unknown */
            break;
        }
    }
    if (out->n == start && v->unk >= 0) return tok_out_push(out, v->unk);
    return true;
}

bool wpm_tokenize(const struct kiln_vocab * v, const char * text, size_t len, struct tok_out * out) {
    /* a word is built in buf after the 3 bytes of "▁" */
    size_t cap = len * 4 + 8, wn = 3;
    char * buf = malloc(cap);
    if (!buf) return false;
    memcpy(buf, "\xe2\x96\x81", 3);
    bool ok = true;
    for (size_t off = 0; ok && off < len;) {
        uint32_t c = utf8_decode(text, len, &off);
        if (v->strip_accents) c = ucd_nfd_first(c);
        const uint8_t f = ucd_flags(c);
        if (f & UCD_WHITESPACE) {
            if (wn > 3) ok = wpm_word(v, buf, wn, out);
            wn = 3;
            continue;
        }
        if (c == 0 || c == 0xFFFD || (f & UCD_CONTROL)) continue;
        if (v->strip_accents && (f & UCD_ACCENT)) continue;
        char enc[4];
        const int el = utf8_encode(v->lowercase ? ucd_tolower(c) : c, enc);
        if ((f & UCD_PUNCT) || (c < 0x7F && (f & UCD_SYMBOL)) || is_cjk(c)) {
            if (wn > 3) ok = wpm_word(v, buf, wn, out);
            memcpy(buf + 3, enc, (size_t) el);
            ok = ok && wpm_word(v, buf, 3 + (size_t) el, out);
            wn = 3;
        } else {
            memcpy(buf + wn, enc, (size_t) el);
            wn += (size_t) el;
        }
    }
    if (ok && wn > 3) ok = wpm_word(v, buf, wn, out);
    free(buf);
    return ok;
}
