/*
 * test_tokenizer.c — tokenizers against llama.cpp: every line of every
 * .inp/.out pair in tests/data/vocab (ids without BOS, special text not
 * parsed), stories260K with BOS, round trips through detokenize, and bad
 * input.
 */
#include "kiln-llama.h"
#include "util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char * read_all(const char * path, size_t * n) {
    FILE * f = fopen(path, "rb");
    if (!f) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char * buf = malloc((size_t) sz + 1);
    if (fread(buf, 1, (size_t) sz, f) != (size_t) sz) {
        sz = 0;
    }
    buf[sz] = 0;
    fclose(f);
    *n = (size_t) sz;
    return buf;
}

static void vocab_file(const char * name) {
    char path[512], inp_path[600], out_path[600];
    snprintf(path, sizeof path, "tests/data/vocab/%s", name);
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    tu_case = name;

    struct kiln_vocab * v = kiln_vocab_load(path);
    if (!CHECK(v != NULL, "load %s: %s", name, kiln_last_error())) {
        return;
    }
    size_t ni = 0, no = 0;
    char * inp = read_all(inp_path, &ni);
    char * out = read_all(out_path, &no);
    if (!CHECK(inp && out, "read %s test files", name)) {
        kiln_vocab_free(v);
        free(inp);
        free(out);
        return;
    }
    const char * sep = "\n__ggml_vocab_test__\n";
    char * p = inp;
    char * line = out;
    int n_cases = 0, n_ok = 0;
    kiln_token * toks = malloc(sizeof(kiln_token) * 65536);
    char * detok = malloc(1 << 20);
    for (;;) {
        char * e = strstr(p, sep);
        if (!e) {
            break;
        }
        char * eol = strchr(line, '\n');
        if (!eol) {
            break;
        }
        *eol = 0;
        int32_t n = kiln_tokenize(v, p, (int32_t) (e - p), toks, 65536, false, false);
        /* expected ids */
        int32_t exp[65536];
        int32_t ne = 0;
        for (char * q = line; *q;) {
            char * end;
            long x = strtol(q, &end, 10);
            if (end == q) {
                break;
            }
            exp[ne++] = (int32_t) x;
            q = end;
        }
        bool same = n == ne && memcmp(toks, exp, sizeof(int32_t) * (size_t) (n > 0 ? n : 0)) == 0;
        n_cases++;
        n_ok += same;
        if (!same) {
            fprintf(stderr, "  %s case %d: text '%.*s'\n    expected:%s\n    got:     ", name, n_cases, (int) (e - p), p, line);
            for (int32_t i = 0; i < n; i++) {
                fprintf(stderr, " %d", toks[i]);
            }
            fprintf(stderr, "\n");
        }
        CHECK(same, "%s case %d matches llama.cpp", name, n_cases);
        /* detokenizing never crashes and returns the needed size consistently */
        int32_t m = kiln_detokenize(v, toks, n, detok, 1 << 20, false, false);
        CHECK(m >= 0, "%s case %d detokenize", name, n_cases);
        p = e + strlen(sep);
        line = eol + 1;
    }
    CHECK(n_cases == 46, "%s: 46 cases read (got %d)", name, n_cases);
    fprintf(stderr, "%s: %d/%d cases match\n", name, n_ok, n_cases);
    free(detok);
    free(toks);
    free(inp);
    free(out);
    kiln_vocab_free(v);
}

static void stories(void) {
    tu_case = "stories260K";
    struct kiln_vocab * v = kiln_vocab_load("models/stories260K.gguf");
    if (!CHECK(v != NULL, "load stories260K: %s", kiln_last_error())) {
        return;
    }
    const char * text = "Once upon a time, there was a little girl named Lily.";
    const kiln_token exp[] = { 1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426 };
    kiln_token toks[64];
    int32_t n = kiln_tokenize(v, text, (int32_t) strlen(text), toks, 64, true, false);
    CHECK(n == 16 && memcmp(toks, exp, sizeof exp) == 0, "stories260K ids with BOS (n=%d)", n);
    CHECK(kiln_vocab_bos(v) == 1 && kiln_vocab_eos(v) == 2, "BOS 1, EOS 2");
    CHECK(kiln_vocab_is_eog(v, 2) && !kiln_vocab_is_eog(v, 403), "EOS is end of generation");

    /* too small a buffer: -(needed), nothing written past the limit */
    kiln_token small[4] = { -7, -7, -7, -7 };
    int32_t r = kiln_tokenize(v, text, (int32_t) strlen(text), small, 3, true, false);
    CHECK(r == -16 && small[3] == -7, "short buffer gives -needed (%d)", r);

    /* detokenize as llama.cpp: without BOS the prefix space goes; after a
     * removed BOS it stays; with special the BOS piece shows */
    char buf[256];
    int32_t m = kiln_detokenize(v, toks + 1, n - 1, buf, sizeof buf, false, false);
    CHECK(m == (int32_t) strlen(text) && memcmp(buf, text, (size_t) m) == 0, "round trip '%.*s'", m > 0 ? m : 0, buf);
    m = kiln_detokenize(v, toks, n, buf, sizeof buf, true, false);
    CHECK(m == (int32_t) strlen(text) + 1 && buf[0] == ' ' && memcmp(buf + 1, text, strlen(text)) == 0, "after BOS the space stays");
    m = kiln_detokenize(v, toks, n, buf, sizeof buf, false, true);
    CHECK(m == (int32_t) strlen(text) + 4 && memcmp(buf, "<s> Once", 8) == 0, "with special: '<s> Once...'");
    m = kiln_detokenize(v, toks, n, buf, 5, true, false);
    CHECK(m == -(int32_t) strlen(text) - 1, "detokenize short buffer gives -needed");

    /* pieces: BOS renders only with special */
    CHECK(kiln_token_to_piece(v, 1, buf, sizeof buf, 0, false) == 0, "control piece hidden");
    m = kiln_token_to_piece(v, 1, buf, sizeof buf, 0, true);
    CHECK(m == 3 && memcmp(buf, "<s>", 3) == 0, "BOS piece <s>");
    m = kiln_token_to_piece(v, 403, buf, sizeof buf, 0, false);
    CHECK(m == 5 && memcmp(buf, " Once", 5) == 0, "piece ' Once'");

    /* byte fallback: a character outside the 512-token vocabulary */
    const char * odd = "\xf0\x9f\x98\x80"; /* U+1F600 */
    n = kiln_tokenize(v, odd, 4, toks, 64, false, false);
    CHECK(n == 5 && toks[1] == 3 + 0xF0 && toks[4] == 3 + 0x80, "byte fallback gives <0xXX> tokens (n=%d)", n);
    m = kiln_detokenize(v, toks, n, buf, sizeof buf, false, false);
    CHECK(m == 4 && memcmp(buf, odd, 4) == 0, "byte fallback round trip");

    /* parse_special: "<s>" in the text is the BOS token only when asked */
    n = kiln_tokenize(v, "<s>", 3, toks, 64, false, true);
    CHECK(n == 1 && toks[0] == 1, "parse_special finds <s> (n=%d)", n);
    n = kiln_tokenize(v, "<s>", 3, toks, 64, false, false);
    CHECK(n > 1, "without parse_special <s> is text");

    /* bad input */
    CHECK(kiln_tokenize(NULL, "a", 1, toks, 64, false, false) == INT32_MIN, "NULL vocab");
    CHECK(kiln_tokenize(v, NULL, 5, toks, 64, false, false) == INT32_MIN, "NULL text");
    CHECK(kiln_token_to_piece(v, 99999, buf, sizeof buf, 0, true) == INT32_MIN, "token out of range");
    kiln_token bad = 512;
    CHECK(kiln_detokenize(v, &bad, 1, buf, sizeof buf, false, false) == INT32_MIN, "detokenize out of range");
    CHECK(kiln_tokenize(v, "", 0, toks, 64, false, false) == 0, "empty text, no tokens");
    n = kiln_tokenize(v, "", 0, toks, 64, true, false);
    CHECK(n == 1 && toks[0] == 1, "empty text with BOS");
    kiln_vocab_free(v);

    CHECK(kiln_vocab_load("tests/data/vocab/missing.gguf") == NULL && strstr(kiln_last_error(), "missing.gguf"),
          "missing file: %s", kiln_last_error());
    static const unsigned char junk[64] = "GGUF\x03";
    CHECK(kiln_vocab_load_from_buffer(junk, 20) == NULL, "truncated GGUF: %s", kiln_last_error());
    CHECK(kiln_vocab_load_from_buffer(junk, sizeof junk) == NULL, "GGUF without tokenizer: %s", kiln_last_error());
}

/* random byte strings (ASCII, spaces, newlines, multi-byte and broken
 * UTF-8): never a crash; SentencePiece round-trips them exactly */
static void random_strings(const char * name, bool spm_roundtrip) {
    char path[512];
    snprintf(path, sizeof path, "tests/data/vocab/%s", name);
    tu_case = name;
    struct kiln_vocab * v = kiln_vocab_load(path);
    if (!CHECK(v != NULL, "load %s", name)) return;
    static const char * const atoms[] = { "a", "Z", " ", "  ", "\n", "\t", "7", "'s", ".", "\xc3\xa9", "\xe4\xb8\xad",
                                          "\xf0\x9f\x98\x80", "\xe2\x96\x81", "\x80", "\xc3", "\xff", "<s>", "<|endoftext|>" };
    const int n_atoms = spm_roundtrip ? 16 : 18; /* U+2581 and special text do not round-trip */
    kiln_token toks[512];
    char text[512], back[2048];
    int bad = 0;
    tu_seed(11);
    for (int it = 0; it < 300; it++) {
        size_t n = 0;
        int k = (int) (tu_rand_u64() % 24);
        for (int j = 0; j < k; j++) {
            int a = (int) (tu_rand_u64() % (uint64_t) (spm_roundtrip ? 12 : n_atoms));
            if (spm_roundtrip && a >= 12) a = 0;
            size_t l = strlen(atoms[a]);
            memcpy(text + n, atoms[a], l);
            n += l;
        }
        if (spm_roundtrip && tu_rand_u64() % 4 == 0) { /* broken UTF-8 too */
            text[n++] = (char) (0x80 + tu_rand_u64() % 128);
        }
        int32_t nt = kiln_tokenize(v, text, (int32_t) n, toks, 512, false, false);
        if (nt < 0) { bad++; continue; }
        int32_t m = kiln_detokenize(v, toks, nt, back, sizeof back, false, false);
        if (m < 0) { bad++; continue; }
        if (spm_roundtrip && (m != (int32_t) n || memcmp(back, text, n) != 0)) bad++;
    }
    CHECK(bad == 0, "%s: 300 random strings tokenize%s (%d bad)", name, spm_roundtrip ? " and round-trip" : "", bad);
    kiln_vocab_free(v);
}

int main(void) {
    random_strings("ggml-vocab-llama-spm.gguf", true);
    random_strings("ggml-vocab-gpt-2.gguf", false);
    random_strings("ggml-vocab-falcon.gguf", false);
    random_strings("ggml-vocab-bert-bge.gguf", false);
    vocab_file("ggml-vocab-llama-spm.gguf");
    vocab_file("ggml-vocab-phi-3.gguf");
    vocab_file("ggml-vocab-gpt-2.gguf");
    vocab_file("ggml-vocab-falcon.gguf");
    vocab_file("ggml-vocab-starcoder.gguf");
    vocab_file("ggml-vocab-bert-bge.gguf");
    stories();
    return tu_finish();
}
