/*
 * lora_write.c — a LoRA adapter as a GGUF file in llama.cpp's layout
 * (what its llama-adapter.cpp loads and convert_lora_to_gguf.py writes):
 *
 *   general.architecture   the base model's (llama.cpp refuses a mismatch)
 *   general.type           "adapter"
 *   adapter.type           "lora"
 *   adapter.lora.alpha     f32; the applied scale is alpha / rank, the rank
 *                          being lora_b's ne[0]
 *   <base name>.lora_a     [n_in, rank]   (ne[0] = the base weight's ne[0])
 *   <base name>.lora_b     [rank, n_out]  (ne[1] = the base weight's ne[1])
 *   experts' weights [n_in, n_out, n_expert] (ffn_{gate,up,down}_exps):
 *   lora_a [n_in, rank, n_expert], lora_b [rank, n_out, n_expert], one pair
 *   per expert, as llama.cpp's build_lora_mm_id multiplies them
 *
 * Tensors are F32, in the adapter's order (layer by layer, then q k v o gate
 * up down, then the shared expert's gate up down).
 */
#include "finetune_internal.h"

#include "kiln-gguf.h"

#include <stdlib.h>

static struct kiln_gguf_context * adapter_gguf(const struct kiln_lora * l) {
    if (!l) {
        kiln_set_last_error("lora_save: NULL adapter");
        return NULL;
    }
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    if (!g) {
        kiln_set_last_error("lora_save: out of memory");
        return NULL;
    }
    bool ok = kiln_gguf_set_val_str(g, "general.architecture", l->model->arch) &&
              kiln_gguf_set_val_str(g, "general.type", "adapter") &&
              kiln_gguf_set_val_str(g, "adapter.type", "lora") &&
              kiln_gguf_set_val_f32(g, "adapter.lora.alpha", l->p.alpha);
    for (int i = 0; ok && i < l->n_pairs; i++) {
        ok = kiln_gguf_add_tensor(g, l->pairs[i].a) && kiln_gguf_add_tensor(g, l->pairs[i].b);
    }
    if (!ok) {
        kiln_gguf_free(g);
        return NULL;
    }
    return g;
}

enum kiln_status kiln_lora_save(const struct kiln_lora * l, const char * path) {
    if (!path) {
        kiln_set_last_error("lora_save: NULL path");
        return KILN_STATUS_INVALID_ARG;
    }
    struct kiln_gguf_context * g = adapter_gguf(l);
    if (!g) return KILN_STATUS_FAILED;
    const bool ok = kiln_gguf_write_to_file(g, path, false);
    kiln_gguf_free(g);
    return ok ? KILN_STATUS_SUCCESS : KILN_STATUS_FAILED;
}

void * kiln_lora_save_to_buffer(const struct kiln_lora * l, size_t * size) {
    if (size) *size = 0;
    struct kiln_gguf_context * g = adapter_gguf(l);
    if (!g) return NULL;
    const size_t n = kiln_gguf_get_write_size(g, false);
    void * buf = n ? malloc(n) : NULL;
    if (!buf || kiln_gguf_write_to_buffer(g, buf, n, false) != n) {
        if (!buf) kiln_set_last_error("lora_save: cannot allocate %zu bytes", n);
        free(buf);
        kiln_gguf_free(g);
        return NULL;
    }
    kiln_gguf_free(g);
    if (size) *size = n;
    return buf;
}
