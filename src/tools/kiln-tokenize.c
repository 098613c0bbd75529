/*
 * kiln-tokenize — print the token ids of UTF-8 text read from stdin.
 *
 *   kiln-tokenize -m FILE [--no-bos] [--parse-special] [--each SEP] < text
 *
 * Prints the ids space-separated on one line. BOS is added when the
 * vocabulary asks for it, unless --no-bos. With --each SEP, the text is
 * split at every SEP and each piece is tokenized on its own, one line per
 * piece (many strings in one run: tests/oracle/pretok.mjs). Works on
 * vocabulary-only GGUFs.
 */
#include "kiln-llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr, "usage: kiln-tokenize -m FILE [--no-bos] [--parse-special] [--each SEP] < text\n");
}

/* the first occurrence of sep in s[0..n), or NULL */
static const char * find(const char * s, size_t n, const char * sep) {
    const size_t m = strlen(sep);
    for (size_t i = 0; i + m <= n; i++) {
        if (memcmp(s + i, sep, m) == 0) {
            return s + i;
        }
    }
    return NULL;
}

/* one line of ids; 1 (message on stderr) when the text cannot be tokenized */
static int print_ids(const struct kiln_vocab * v, const char * text, int32_t n, bool add_bos, bool parse_special) {
    int32_t need = kiln_tokenize(v, text, n, NULL, 0, add_bos, parse_special);
    if (need == INT32_MIN) {
        fprintf(stderr, "kiln-tokenize: %s\n", kiln_last_error());
        return 1;
    }
    int32_t cnt = need < 0 ? -need : need;
    kiln_token * toks = malloc(sizeof(kiln_token) * (size_t) (cnt + 1));
    if (!toks) {
        fprintf(stderr, "kiln-tokenize: out of memory\n");
        return 1;
    }
    cnt = kiln_tokenize(v, text, n, toks, cnt, add_bos, parse_special);
    for (int32_t i = 0; i < cnt; i++) {
        printf(i ? " %d" : "%d", toks[i]);
    }
    printf("\n");
    free(toks);
    return 0;
}

int main(int argc, char ** argv) {
    const char * path = NULL, * each = NULL;
    bool add_bos = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "-m") || !strcmp(argv[i], "--model")) && i + 1 < argc) {
            path = argv[++i];
        } else if (!strcmp(argv[i], "--no-bos")) {
            add_bos = false;
        } else if (!strcmp(argv[i], "--parse-special")) {
            parse_special = true;
        } else if (!strcmp(argv[i], "--each") && i + 1 < argc && argv[i + 1][0]) {
            each = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else {
            fprintf(stderr, "kiln-tokenize: unknown argument '%s'\n", argv[i]);
            usage();
            return 2;
        }
    }
    if (!path) {
        usage();
        return 2;
    }
    struct kiln_vocab * v = kiln_vocab_load(path);
    if (!v) {
        fprintf(stderr, "kiln-tokenize: %s\n", kiln_last_error());
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char * text = malloc(cap);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            text = realloc(text, cap);
        }
        size_t r = fread(text + n, 1, cap - n, stdin);
        if (r == 0) {
            break;
        }
        n += r;
    }
    if (n > (size_t) INT32_MAX / 2) {
        fprintf(stderr, "kiln-tokenize: input too large\n");
        return 1;
    }
    int rc = 0;
    for (size_t at = 0; at <= n && rc == 0;) {
        size_t len = n - at;
        const char * sep = each ? find(text + at, n - at, each) : NULL;
        if (sep) {
            len = (size_t) (sep - (text + at));
        }
        rc = print_ids(v, text + at, (int32_t) len, add_bos, parse_special);
        if (!sep) {
            break;
        }
        at += len + strlen(each);
    }
    free(text);
    kiln_vocab_free(v);
    return rc;
}
