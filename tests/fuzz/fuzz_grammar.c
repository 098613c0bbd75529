/*
 * fuzz_grammar.c — libFuzzer target for the GBNF parser and matcher and the
 * JSON Schema converter.
 *
 * The first byte picks the mode; the rest is split at the first NUL into a
 * grammar (or schema) and a text. Mode 0: parse the grammar, then match the
 * text in two pieces (a character may be split) and reset. Mode 1: convert
 * the schema; a grammar the converter produced must parse (trap otherwise),
 * and the text is matched against it. Beyond "no crash, no leak, no UB".
 *
 * Run: scripts/fuzz.sh [SECONDS]
 */
#include "kiln-llama.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(x) do { if (!(x)) __builtin_trap(); } while (0)

static void match(struct kiln_grammar * g, const char * text, size_t n) {
    size_t half = n / 2;
    if (kiln_grammar_accept_text(g, text, (int32_t) half) == KILN_STATUS_SUCCESS) {
        kiln_grammar_accept_text(g, text + half, (int32_t) (n - half));
    }
    (void) kiln_grammar_is_complete(g);
    kiln_grammar_reset(g);
    kiln_grammar_accept_text(g, text, (int32_t) n);
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] & 1;
    const char * body = (const char *) data + 1;
    size_t n = size - 1;
    const char * nul = memchr(body, 0, n);
    size_t glen = nul ? (size_t) (nul - body) : n;
    char * src = malloc(glen + 1);
    if (!src) return 0;
    memcpy(src, body, glen);
    src[glen] = 0;
    const char * text = nul ? nul + 1 : "";
    size_t tlen = nul ? n - glen - 1 : 0;
    if (mode == 0) {
        struct kiln_grammar * g = kiln_grammar_init(src, NULL, NULL);
        if (g) {
            match(g, text, tlen);
            kiln_grammar_free(g);
        }
    } else {
        char * gbnf = kiln_json_schema_to_grammar(src, (int32_t) glen);
        if (gbnf) {
            struct kiln_grammar * g = kiln_grammar_init(gbnf, NULL, NULL);
            FUZZ_ASSERT(g != NULL || strstr(kiln_last_error(), "too ambiguous") != NULL);
            if (g) {
                match(g, text, tlen);
                kiln_grammar_free(g);
            }
            free(gbnf);
        }
    }
    free(src);
    return 0;
}
