/*
 * test_arch.c — what the decoder loader refuses, with messages naming the
 * problem: an architecture Kiln does not implement (phi3 is named, the list
 * of supported ones given), a byte-level BPE pre-tokenizer it does not
 * implement, a file whose keys are not under its architecture's name.
 * Agreement with llama.cpp of every supported architecture is
 * tests/oracle/arch.mjs.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"
#include "util/test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VOCAB_BPE "tests/data/vocab/ggml-vocab-gpt-2.gguf"

/* the file at path with one string key set (or removed when val is NULL), in memory */
static void * edited(const char * path, const char * key, const char * val, size_t * size) {
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = NULL };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, gp);
    if (!g) return NULL;
    struct kiln_gguf_context * g2 = kiln_gguf_init_empty();
    kiln_gguf_set_kv(g2, g);
    if (val) kiln_gguf_set_val_str(g2, key, val);
    else kiln_gguf_remove_key(g2, key);
    *size = kiln_gguf_get_write_size(g2, false);
    void * buf = malloc(*size);
    if (buf) kiln_gguf_write_to_buffer(g2, buf, *size, false);
    kiln_gguf_free(g2);
    kiln_gguf_free(g);
    return buf;
}

int main(void) {
    struct kiln_model_params mp = kiln_model_params_default();
    size_t sz = 0;

    /* pre-tokenizers: a known one loads, an unknown one is refused by name, none means llama.cpp's default */
    void * buf = edited(VOCAB_BPE, "tokenizer.ggml.pre", "qwen2", &sz);
    struct kiln_vocab * v = buf ? kiln_vocab_load_from_buffer(buf, sz) : NULL;
    CHECK(v != NULL, "qwen2 pre-tokenizer loads: %s", v ? "" : kiln_last_error());
    kiln_vocab_free(v);
    free(buf);
    buf = edited(VOCAB_BPE, "tokenizer.ggml.pre", "no-such-pretok", &sz);
    v = buf ? kiln_vocab_load_from_buffer(buf, sz) : NULL;
    CHECK(v == NULL && strstr(kiln_last_error(), "'no-such-pretok'"), "unknown pre-tokenizer refused by name: %s", kiln_last_error());
    kiln_vocab_free(v);
    free(buf);
    buf = edited(VOCAB_BPE, "tokenizer.ggml.pre", NULL, &sz);
    v = buf ? kiln_vocab_load_from_buffer(buf, sz) : NULL;
    CHECK(v != NULL, "no pre-tokenizer key: the default");
    kiln_vocab_free(v);
    free(buf);


    /* an architecture the decoder does not implement is refused, named, with the supported list */
    buf = edited("models/stories260K.gguf", "general.architecture", "mamba", &sz);
    struct kiln_model * m = buf ? kiln_model_load_from_buffer(buf, sz, mp) : NULL;
    CHECK(m == NULL && strstr(kiln_last_error(), "'mamba'") && strstr(kiln_last_error(), "qwen3moe"),
          "mamba refused by name with the supported list: %s", kiln_last_error());
    kiln_model_free(m);
    free(buf);

    /* a mixture-of-experts architecture without its expert counts is refused, the key named */
    buf = edited("models/stories260K.gguf", "general.architecture", "qwen3moe", &sz);
    m = buf ? kiln_model_load_from_buffer(buf, sz, mp) : NULL;
    CHECK(m == NULL && strstr(kiln_last_error(), "qwen3moe."), "qwen3moe without its keys refused: %s", kiln_last_error());
    kiln_model_free(m);
    free(buf);

    /* keys are read under the file's architecture: a llama file relabelled gemma2 lacks gemma2.* */
    buf = edited("models/stories260K.gguf", "general.architecture", "gemma2", &sz);
    m = buf ? kiln_model_load_from_buffer(buf, sz, mp) : NULL;
    CHECK(m == NULL && strstr(kiln_last_error(), "gemma2.embedding_length"), "missing gemma2 key named: %s", kiln_last_error());
    kiln_model_free(m);
    free(buf);
    return tu_finish();
}
