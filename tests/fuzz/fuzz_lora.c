/*
 * fuzz_lora.c — libFuzzer target for the LoRA adapter loader
 * (kiln_adapter_lora_init_from_buffer, src/models/lora.c) against
 * stories260K (models/, loaded once; run from the repository root).
 *
 * Each input is an adapter file. Beyond "no crash, no leak, no UB": an
 * adapter the loader accepts is applied and one token evaluated, and the
 * target traps when that evaluation fails or when a refusal leaves no
 * message.
 *
 * Run: scripts/fuzz.sh (seeds: test_lora --write-seeds DIR)
 */
#include "kiln.h"
#include "kiln-llama.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_ASSERT(x) do { if (!(x)) __builtin_trap(); } while (0)

static struct kiln_model * model;

int LLVMFuzzerInitialize(int * argc, char *** argv) {
    (void) argc;
    (void) argv;
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_ctx = 8;
    model = kiln_model_load("models/stories260K.gguf", mp);
    if (!model) {
        fprintf(stderr, "fuzz_lora: models/stories260K.gguf: %s (run from the repository root)\n", kiln_last_error());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    kiln_clear_error();
    struct kiln_adapter_lora * ad = kiln_adapter_lora_init_from_buffer(model, data, size);
    if (!ad) {
        FUZZ_ASSERT(kiln_last_error()[0] != 0);
        return 0;
    }
    FUZZ_ASSERT(kiln_model_set_adapter_lora(model, ad, 0.5f) == KILN_STATUS_SUCCESS);
    const kiln_token t = 1;
    FUZZ_ASSERT(kiln_model_eval(model, &t, 1) == KILN_STATUS_SUCCESS);
    kiln_adapter_lora_free(ad);
    return 0;
}
