/* test_grammar.c — the GBNF parser (accepted grammars, errors with line and
 * column, left recursion), matching text against grammars (regular ones
 * checked against POSIX extended regular expressions on random strings,
 * llama.cpp's example grammars on hand-written sentences), the token filter
 * over the stories260K vocabulary (whole vocabulary and one token at a time)
 * checked token by token against matching each token's text, and the
 * sampler's top-k filter against its full mask. */
#include "kiln-llama.h"
#include "models/grammar.h"
#include "util/test_util.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* whole-string match: every byte accepted and the grammar complete */
static int matches(const char * gbnf, const char * text) {
    struct kiln_grammar * g = kiln_grammar_init(gbnf, NULL, NULL);
    if (!g) return -1;
    int ok = kiln_grammar_accept_text(g, text, (int32_t) strlen(text)) == KILN_STATUS_SUCCESS && kiln_grammar_is_complete(g);
    kiln_grammar_free(g);
    return ok;
}

static void expect_error(const char * gbnf, const char * needle) {
    struct kiln_grammar * g = kiln_grammar_init(gbnf, NULL, NULL);
    CHECK(g == NULL, "grammar should be rejected: %s", gbnf);
    if (g) {
        kiln_grammar_free(g);
        return;
    }
    CHECK(strstr(kiln_last_error(), needle) != NULL, "error '%s' should contain '%s'", kiln_last_error(), needle);
}

struct regular_case {
    const char * gbnf;
    const char * regex;
    const char * alphabet;
};

static const struct regular_case REGULAR[] = {
    { "root ::= [a-c]{2,4} (\"x\" | \"yz\")*", "^[a-c]{2,4}(x|yz)*$", "abcxyz" },
    { "root ::= \"a\"+ \"b\"? [^ab]", "^a+b?[^ab]$", "abcd" },
    { "root ::= (\"ab\" | \"a\") (\"c\" | \"bc\")", "^(ab|a)(c|bc)$", "abc" },
    { "root ::= x{3}\nx ::= [0-9] | \"-\"", "^([0-9]|-){3}$", "01-9a" },
    { "root ::= (a b)* a\na ::= \"a\"\nb ::= \"b\" | \"\"", "^(ab?)*a$", "ab" },
    { "root ::= . . [x-z]?", "^..[x-z]?$", "awxyz" },
    { "root ::= [a-b]{0,2} [c] [a]{1,}", "^[ab]{0,2}ca+$", "abc" },
    { "# comment\nroot ::= (\"q\"|  # inline comment\n  \"r\")*\n", "^(q|r)*$", "qrs" },
};

static void random_string(char * out, int len, const char * alphabet) {
    int na = (int) strlen(alphabet);
    for (int i = 0; i < len; i++) out[i] = alphabet[tu_rand_u64() % (uint64_t) na];
    out[len] = 0;
}

int main(void) {
    tu_seed(7);

    tu_case = "parse errors";
    expect_error("root := \"a\"", "line 1, column 6: expecting ::=");
    expect_error("root ::= \"a\"\nfoo ::= [a-", "line 2, column 12: unexpected end of input");
    expect_error("root ::= ( \"a\"", "line 1, column 15: expecting ')'");
    expect_error("root ::= \"a\" \"\\q\"", "line 1, column 15: unknown escape");
    expect_error("root ::= \"\\x4\"", "line 1, column 13: expecting 2 hex chars");
    expect_error("root ::= *", "line 1, column 10: expecting preceding item");
    expect_error("root ::= \"a\"{2", "line 1, column 15: expecting ','");
    expect_error("root ::= \"a\"{2,3", "line 1, column 17: expecting '}'");
    expect_error("root ::= \"a\"{3000}", "exceeds");
    expect_error("root ::= x\n  \nfoo ::= \"b\"\n", "line 1, column 10: undefined rule identifier 'x'");
    expect_error("foo ::= \"a\"", "no 'root' rule");
    expect_error("", "no rules");
    expect_error("root ::= \"a\" ] \"b\"", "line 1, column 14: expecting newline or end");
    expect_error("root ::= \"abc", "unexpected end of input");
    expect_error("root ::= <[12]>x", "line 1, column 16: undefined rule identifier 'x'"); /* token refs parse without a vocab, then x is undefined */
    expect_error("root ::= <think>", "needs a vocabulary");

    tu_case = "left recursion";
    expect_error("root ::= root \"a\" | \"b\"", "left recursion");
    expect_error("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"", "left recursion");
    expect_error("root ::= e root \"x\" | \"y\"\ne ::= | \"z\"", "left recursion");
    expect_error("root ::= (\"\")* \"a\"", "left recursion"); /* an empty item repeated */
    /* through a rule that is empty only via an optional reference (llama.cpp's
     * grammars/japanese.gbnf with katakana made optional) */
    expect_error("root ::= c+\nc ::= \"a\" | k?\nk ::= \"b\"", "left recursion");
    CHECK(matches("root ::= \"a\" root | \"b\"", "aaab") == 1, "right recursion is fine");
    expect_error("root ::= e{0,40} \"a\"\ne ::= \"\" | \"\"", "too ambiguous"); /* 2^40 ways to match nothing */
    {
        char deep[1200];
        int k = 0;
        k += snprintf(deep, sizeof(deep), "root ::= ");
        for (int i = 0; i < 300; i++) deep[k++] = '(';
        deep[k] = 0;
        expect_error(deep, "line 1, column 266: groups nested deeper than 256");
    }
    CHECK(matches("root ::= e \"x\" root | \"y\"\ne ::= | \"z\"", "zxxy") == 1, "an empty prefix before a terminal is fine");

    tu_case = "literals and escapes";
    CHECK(matches("root ::= \"h\\u00e9\\x21\\t\\\"\\\\\"", "h\xc3\xa9!\t\"\\") == 1, "escapes decode to code points");
    CHECK(matches("root ::= \"\\U0001F600\"", "\xf0\x9f\x98\x80") == 1, "\\U escape (4-byte UTF-8)");
    CHECK(matches("root ::= [\\u00e0-\\u00ff]+", "\xc3\xa9\xc3\xa0") == 1, "range of multi-byte code points");
    CHECK(matches("root ::= [\\u00e0-\\u00ff]+", "\xc3\x9f") == 0, "U+00DF is below the range");
    CHECK(matches("root ::= [^\\]\\[]*", "ab(c)") == 1, "escaped brackets in a negated class");
    CHECK(matches("root ::= [^\\]\\[]*", "a]") == 0, "negated class rejects ]");
    CHECK(matches("root ::= \"\xc3\xa9t\xc3\xa9\"", "\xc3\xa9t\xc3\xa9") == 1, "raw UTF-8 in a literal");
    CHECK(matches("root ::= [a-z-]+", "a-b") == 1, "a trailing '-' in a class is a character");

    tu_case = "regular grammars vs POSIX regex";
    for (size_t k = 0; k < sizeof(REGULAR) / sizeof(REGULAR[0]); k++) {
        regex_t re;
        if (regcomp(&re, REGULAR[k].regex, REG_EXTENDED | REG_NOSUB) != 0) {
            CHECK(0, "regcomp %s", REGULAR[k].regex);
            continue;
        }
        int agree = 0, total = 0, n_match = 0;
        char s[16];
        for (int it = 0; it < 600; it++) {
            random_string(s, (int) (tu_rand_u64() % 9), REGULAR[k].alphabet);
            int want = regexec(&re, s, 0, NULL, 0) == 0;
            int got = matches(REGULAR[k].gbnf, s);
            total++;
            n_match += want;
            if (got == want) agree++;
            else if (total - agree < 4) CHECK(0, "grammar %zu on '%s': %d, regex %d", k, s, got, want);
        }
        CHECK(agree == total, "grammar %zu agrees with %s on %d/%d strings (%d matches)", k, REGULAR[k].regex, agree, total, n_match);
        regfree(&re);
    }

    tu_case = "llama.cpp example grammars";
    char * json = tu_read_file("tests/data/grammars/json.gbnf", NULL);
    char * arith = tu_read_file("tests/data/grammars/arithmetic.gbnf", NULL);
    char * list = tu_read_file("tests/data/grammars/list.gbnf", NULL);
    char * cgr = tu_read_file("tests/data/grammars/c.gbnf", NULL);
    CHECK(json && arith && list && cgr, "grammar files present");
    if (json && arith && list && cgr) {
        const char * json_ok[] = { "{}", "{\"a\": [1, 2.5, -3e7, true, null]}", "{\"k\":\"v\\n\\u00e9\"}",
                                   "{\n  \"x\": {\"y\": []}\n}" };
        const char * json_bad[] = { "[1]", "{\"a\":}", "{\"a\": 01}", "{'a': 1}", "{\"a\": tru}", "{\"a\": \"\x01\"}" };
        for (size_t i = 0; i < sizeof(json_ok) / sizeof(*json_ok); i++) CHECK(matches(json, json_ok[i]) == 1, "json accepts %s", json_ok[i]);
        for (size_t i = 0; i < sizeof(json_bad) / sizeof(*json_bad); i++) CHECK(matches(json, json_bad[i]) == 0, "json rejects %s", json_bad[i]);
        CHECK(matches(arith, "(1+2)*3-4/5= x1\n") == 1, "arithmetic accepts an expression");
        CHECK(matches(arith, "1+*2=3\n") == 0, "arithmetic rejects 1+*2");
        CHECK(matches(list, "- milk\n- eggs\n") == 1, "list accepts two items");
        CHECK(matches(list, "milk\n") == 0, "list rejects an item without '- '");
        CHECK(matches(cgr, "int main(int x){return x+1;}") == 1, "c accepts a function");
        CHECK(matches(cgr, "int main( { }") == 0, "c rejects a broken declaration");
    }

    tu_case = "partial UTF-8 across calls";
    struct kiln_grammar * g = kiln_grammar_init("root ::= \"\xc3\xa9\" [\\u4e00-\\u9fff]", NULL, NULL);
    CHECK(g != NULL, "grammar parses");
    if (g) {
        CHECK(kiln_grammar_accept_text(g, "\xc3", 1) == KILN_STATUS_SUCCESS, "first byte of e-acute");
        CHECK(!kiln_grammar_is_complete(g), "incomplete after one byte");
        CHECK(kiln_grammar_accept_text(g, "\xa9\xe4", 2) == KILN_STATUS_SUCCESS, "rest + first byte of a CJK char");
        CHECK(kiln_grammar_accept_text(g, "\xb8", 1) == KILN_STATUS_SUCCESS, "second byte");
        CHECK(kiln_grammar_accept_text(g, "\x80", 1) == KILN_STATUS_SUCCESS, "third byte");
        CHECK(kiln_grammar_is_complete(g), "complete after U+4E00");
        kiln_grammar_reset(g);
        CHECK(kiln_grammar_accept_text(g, "e", 1) != KILN_STATUS_SUCCESS, "plain e rejected");
        CHECK(kiln_grammar_accept_text(g, "\xc3\xa9", 2) == KILN_STATUS_SUCCESS, "state unchanged after a rejection");
        CHECK(kiln_grammar_accept_text(g, "\xc3", 1) != KILN_STATUS_SUCCESS, "U+00C0.. is not CJK");
        kiln_grammar_free(g);
    }

    tu_case = "repetition of a repetition";
    expect_error("root ::= \"a\"++", "repetition of a repetition");
    expect_error("root ::= [0-9]* {2}", "repetition of a repetition");
    CHECK(matches("root ::= (\"a\"+)+ \"b\"", "aab") == 1, "a group around a repetition still repeats");

    tu_case = "text after the grammar is complete";
    g = kiln_grammar_init("#s\nroot ::= [2} \"-\" [A-Z]", NULL, NULL);
    CHECK(g != NULL, "grammar parses");
    if (g) {
        /* one character completes the grammar: the next text meets only the empty stack */
        CHECK(kiln_grammar_accept_text(g, "2", 1) == KILN_STATUS_SUCCESS, "the one character");
        CHECK(kiln_grammar_is_complete(g), "complete");
        CHECK(kiln_grammar_accept_text(g, "}\n", 2) != KILN_STATUS_SUCCESS, "nothing may follow");
        CHECK(kiln_grammar_is_complete(g), "state unchanged after the rejection");
        kiln_grammar_reset(g);
        CHECK(kiln_grammar_accept_text(g, "2}\n", 3) != KILN_STATUS_SUCCESS, "nothing may follow, in one call");
        kiln_grammar_free(g);
    }

    tu_case = "token filter vs text matching";
    struct kiln_vocab * v = kiln_vocab_load("models/stories260K.gguf");
    CHECK(v != NULL, "stories260K vocab: %s", v ? "" : kiln_last_error());
    if (v && json) {
        const int32_t nv = kiln_vocab_n_tokens(v);
        float * logits = malloc(sizeof(float) * (size_t) nv);
        const char * prefixes[] = { "", "{\"a", "{\"a\": 12.", "{\"a\": \"\xc3", "{\"a\": [1, 2]}" };
        struct kg_vocab_cache vc;
        CHECK(kg_vocab_cache_init(&vc, v) == KILN_STATUS_SUCCESS, "token texts decoded");
        float * single = malloc(sizeof(float) * (size_t) nv);
        struct kiln_grammar * ref = kiln_grammar_init(json, NULL, NULL);
        for (size_t pi = 0; pi < sizeof(prefixes) / sizeof(*prefixes); pi++) {
            const char * pre = prefixes[pi];
            const int32_t plen = (int32_t) strlen(pre);
            /* the filter at the prefix, both ways: the whole vocabulary at
             * once, and each token by itself */
            struct kiln_grammar * g = kiln_grammar_init(json, NULL, NULL);
            CHECK(g && kiln_grammar_accept_text(g, pre, plen) == KILN_STATUS_SUCCESS, "prefix '%s' accepted", pre);
            for (int32_t k = 0; k < nv; k++) logits[k] = single[k] = 0.0f;
            CHECK(kg_apply(g, &vc, logits, NULL, nv) == KILN_STATUS_SUCCESS, "filter runs");
            int agree = 0, allowed = 0, shown = 0;
            for (int32_t t = 0; t < nv; t++) {
                kg_apply(g, &vc, single, &t, 1);
                /* reference: the prefix text and then the token's text */
                char piece[256];
                int32_t pl = kiln_token_to_piece(v, t, piece, sizeof(piece), 0, true);
                kiln_grammar_reset(ref);
                bool ok = kiln_grammar_accept_text(ref, pre, plen) == KILN_STATUS_SUCCESS;
                if (kiln_vocab_is_eog(v, t)) ok = ok && kiln_grammar_is_complete(ref);
                else ok = ok && pl > 0 && piece[0] != 0 && kiln_grammar_accept_text(ref, piece, pl) == KILN_STATUS_SUCCESS;
                allowed += ok;
                bool full_ok = logits[t] == 0.0f, single_ok = single[t] == 0.0f;
                agree += full_ok == ok && single_ok == ok;
                if ((full_ok != ok || single_ok != ok) && shown++ < 3) {
                    CHECK(0, "prefix '%s' token %d '%.*s': full %d single %d text %d", pre, t, pl > 0 ? pl : 0, piece, full_ok, single_ok, ok);
                }
            }
            CHECK(agree == nv, "prefix '%s': the filter agrees with text matching on %d/%d tokens (%d allowed)", pre, agree, nv, allowed);
            CHECK(allowed > 0 && allowed < nv, "prefix '%s': a real restriction (%d of %d allowed)", pre, allowed, nv);
            kiln_grammar_free(g);
        }
        kiln_grammar_free(ref);
        kg_vocab_cache_free(&vc);
        free(single);

        /* top-k after the grammar, two ways: with logprobs on the whole
         * vocabulary is masked first; without, the k best allowed tokens are
         * found in sorted chunks. Same seed, same logits: same tokens. */
        tu_case = "top-k: chunked filter vs full mask";
        struct kiln_sampler_params sp = kiln_sampler_params_default();
        sp.temperature = 0.9f;
        sp.top_k = 40;
        sp.seed = 3;
        struct kiln_sampler * a = kiln_sampler_new(sp), * b = kiln_sampler_new(sp);
        kiln_sampler_set_grammar(a, v, json, NULL);
        kiln_sampler_set_grammar(b, v, json, NULL);
        kiln_sampler_set_logprobs(b, 1);
        int same = 0, steps = 150, ends = 0;
        tu_seed(11);
        for (int i = 0; i < steps; i++) {
            for (int32_t k = 0; k < nv; k++) logits[k] = tu_rand_uniform(0.0f, 6.0f);
            kiln_token x = kiln_sampler_sample(a, logits, nv), y = kiln_sampler_sample(b, logits, nv);
            same += x == y && x >= 0;
            if (x != y || x < 0) break;
            kiln_sampler_accept(a, x);
            kiln_sampler_accept(b, y);
            if (kiln_vocab_is_eog(v, x)) {
                ends++;
                kiln_sampler_reset(a);
                kiln_sampler_reset(b);
            }
        }
        CHECK(same == steps, "%d/%d tokens equal (%d complete JSON texts)", same, steps, ends);
        kiln_sampler_free(a);
        kiln_sampler_free(b);
        free(logits);
    }
    kiln_vocab_free(v);
    free(json);
    free(arith);
    free(list);
    free(cgr);
    return tu_finish();
}
