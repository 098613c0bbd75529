/*
 * llama_quantize_ref — runs llama.cpp's own llama_model_quantize (from the
 * libllama that node-llama-cpp 3.21.1 ships) on a GGUF file, as the
 * reference for kiln-quantize's mixes (tests/oracle/quant-mix.mjs).
 *
 *   llama_quantize_ref LIBLLAMA.so IN.gguf OUT.gguf FTYPE
 *
 * FTYPE: llama.cpp's llama_ftype number (15 Q4_K_M, 17 Q5_K_M). The
 * parameter block below is llama.h's llama_model_quantize_params of that
 * release, field for field (the library is loaded at run time, so no header
 * is needed); its defaults come from llama_model_quantize_default_params.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct quantize_params {
    int32_t nthread;
    int32_t ftype;
    int32_t output_tensor_type;
    int32_t token_embedding_type;
    bool allow_requantize, quantize_output_tensor, only_copy, pure, keep_split, dry_run;
    const void * imatrix, * kv_overrides, * tt_overrides;
    const int32_t * prune_layers;
    size_t max_buf_size;
};

int main(int argc, char ** argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: llama_quantize_ref LIBLLAMA.so IN.gguf OUT.gguf FTYPE\n");
        return 2;
    }
    void * lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "llama_quantize_ref: %s\n", dlerror()); return 1; }
    void (*backend_init)(void) = (void (*)(void)) dlsym(lib, "llama_backend_init");
    struct quantize_params (*defaults)(void) = (struct quantize_params (*)(void)) dlsym(lib, "llama_model_quantize_default_params");
    uint32_t (*quantize)(const char *, const char *, const struct quantize_params *) =
        (uint32_t (*)(const char *, const char *, const struct quantize_params *)) dlsym(lib, "llama_model_quantize");
    if (!backend_init || !defaults || !quantize) { fprintf(stderr, "llama_quantize_ref: symbols missing\n"); return 1; }
    backend_init();
    struct quantize_params p = defaults();
    p.nthread = 1;
    p.ftype = atoi(argv[4]);
    const uint32_t rc = quantize(argv[2], argv[3], &p);
    if (rc != 0) fprintf(stderr, "llama_quantize_ref: llama_model_quantize returned %u\n", rc);
    return rc == 0 ? 0 : 1;
}
