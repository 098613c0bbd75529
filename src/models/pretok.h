/*
 * pretok.h — byte-level BPE pre-tokenization: split text (as code points)
 * into words with the regular expressions llama.cpp uses for each
 * tokenizer.ggml.pre, reproducing its matching exactly (its hand-written
 * splitters for the GPT-2 / llama3 / qwen2 expressions, and std::regex
 * semantics on category-collapsed text for the others, gpt-4o's included).
 * Private.
 */
#ifndef KILN_MODELS_PRETOK_H
#define KILN_MODELS_PRETOK_H

#include <stddef.h>
#include <stdint.h>

enum pretok_type {
    PRETOK_DEFAULT = 0,
    PRETOK_LLAMA3,
    PRETOK_DEEPSEEK_LLM,
    PRETOK_DEEPSEEK_CODER,
    PRETOK_FALCON,
    PRETOK_MPT,
    PRETOK_STARCODER,
    PRETOK_GPT2,
    PRETOK_REFACT,
    PRETOK_QWEN2,
    PRETOK_GPT4O,
};

/* set up the expressions of a type once, before any concurrent use */
void pretok_prepare(enum pretok_type type);

/* Word lengths (in code points) covering cpts[0..n); malloc'd, *n_words set.
 * NULL only when out of memory. */
size_t * pretok_split(enum pretok_type type, const uint32_t * cpts, size_t n, size_t * n_words);

#endif
