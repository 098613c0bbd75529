/*
 * test_pretok.c — the pre-tokenizer splits for the tokenizer.ggml.pre types
 * that have no vocabulary file in tests/data (llama3, qwen2, deepseek-llm,
 * deepseek-coder, default, mpt/gpt-2, starcoder/refact, falcon, gpt-4o), on strings
 * whose splits follow directly from llama.cpp's expressions.
 */
#include "models/pretok.h"
#include "models/unicode.h"
#include "util/test_util.h"

#include <stdlib.h>
#include <string.h>

/* split text and join the words with '|' */
static void split_join(enum pretok_type type, const char * text, char * out) {
    size_t n = 0, nw = 0;
    uint32_t * c = utf8_to_cpts(text, strlen(text), &n);
    size_t * w = pretok_split(type, c, n, &nw);
    size_t pos = 0, o = 0;
    for (size_t i = 0; i < nw; i++) {
        if (i) out[o++] = '|';
        for (size_t k = pos; k < pos + w[i]; k++) o += (size_t) utf8_encode(c[k], out + o);
        pos += w[i];
    }
    out[o] = 0;
    free(w);
    free(c);
}

static void expect(enum pretok_type type, const char * name, const char * text, const char * want) {
    char got[1024];
    pretok_prepare(type);
    split_join(type, text, got);
    CHECK(strcmp(got, want) == 0, "%s: '%s' -> '%s' (want '%s')", name, text, got, want);
}

int main(void) {
    tu_case = "llama3";
    expect(PRETOK_LLAMA3, "llama3", "Hello world 12345", "Hello| world| |123|45");
    expect(PRETOK_LLAMA3, "llama3", "I'M here\n\nok", "I|'M| here|\n\n|ok");
    expect(PRETOK_LLAMA3, "llama3", "  x", " | x");
    expect(PRETOK_LLAMA3, "llama3", "$$$\nab", "$$$\n|ab");
    expect(PRETOK_LLAMA3, "llama3", "a  \n b", "a|  \n| b");
    expect(PRETOK_LLAMA3, "llama3", "(x", "(x");

    tu_case = "qwen2";
    expect(PRETOK_QWEN2, "qwen2", "x 12345", "x| |1|2|3|4|5");
    expect(PRETOK_QWEN2, "qwen2", "don't", "don|'t");

    tu_case = "gpt-4o";
    expect(PRETOK_GPT4O, "gpt-4o", "Hello World", "Hello| World");
    expect(PRETOK_GPT4O, "gpt-4o", "HELLOworld HeLLo", "HELLOworld| He|LLo");
    /* a non-ASCII letter is upper and lower case on the collapsed text */
    expect(PRETOK_GPT4O, "gpt-4o", "\xc3\x89" "COLE", "\xc3\x89|COLE");
    expect(PRETOK_GPT4O, "gpt-4o", "\xe4\xb8\xad\xe6\x96\x87" "abc ABC\xe4\xb8\xad" "D",
           "\xe4\xb8\xad\xe6\x96\x87" "abc| ABC\xe4\xb8\xad|D");
    expect(PRETOK_GPT4O, "gpt-4o", "don't I'M 1234567", "don't| I'M| |123|456|7");
    expect(PRETOK_GPT4O, "gpt-4o", "a!!\n/b", "a|!!\n/|b");
    expect(PRETOK_GPT4O, "gpt-4o", "x  \n\n y", "x|  \n\n| y");
    expect(PRETOK_GPT4O, "gpt-4o", "a   b end  ", "a|  | b| end|  ");
    expect(PRETOK_GPT4O, "gpt-4o", "\t!x", "\t|!x");

    tu_case = "gpt2";
    expect(PRETOK_GPT2, "gpt-2", "Hello world 12345", "Hello| world| 12345");
    expect(PRETOK_MPT, "mpt", "a   b", "a|  | b");
    expect(PRETOK_GPT2, "gpt-2", "I'M", "I|'|M");
    expect(PRETOK_GPT2, "gpt-2", "x!? \xc3\xa9t\xc3\xa9", "x|!?| \xc3\xa9t\xc3\xa9");

    tu_case = "starcoder";
    expect(PRETOK_STARCODER, "starcoder", "v 123", "v| |1|2|3");
    expect(PRETOK_REFACT, "refact", "a1", "a|1");

    tu_case = "default";
    expect(PRETOK_DEFAULT, "default", "a+b=c 1234", "a|+|b|=|c| |123|4");

    tu_case = "falcon";
    expect(PRETOK_FALCON, "falcon", "x`y 12345", "x|`|y| |123|45");

    tu_case = "deepseek";
    expect(PRETOK_DEEPSEEK_CODER, "deepseek-coder", "Hello, \xe4\xb8\x96\xe7\x95\x8c 123\n",
           "Hello|,| |\xe4\xb8\x96\xe7\x95\x8c| |1|2|3|\n");
    expect(PRETOK_DEEPSEEK_LLM, "deepseek-llm", "Hi there!! 42  \n",
           "Hi| there|!!| |42|  |\n");
    return tu_finish();
}
