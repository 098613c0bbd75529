/* finetune_internal.h — the LoRA adapter being trained, shared by the
 * training graph (finetune.c), the loop (finetune_loop.c) and the GGUF
 * adapter writer (lora_write.c). Private to src/models. */
#ifndef KILN_MODELS_FINETUNE_INTERNAL_H
#define KILN_MODELS_FINETUNE_INTERNAL_H

#include "kiln-opt.h"
#include "model.h"

#define LORA_N_TARGETS 7
/* the adaptable weights of a layer: q k v o gate up down (on a mixture-of-
 * experts layer gate, up, down are the experts' 3-D tensors), then the
 * shared expert's gate up down, which the gate, up, down targets select too */
#define LORA_N_SLOTS 10

/* one adapted projection: base W [n_in, n_out], A [n_in, r], B [r, n_out];
 * for experts W [n_in, n_out, n_expert], A [n_in, r, n_expert], B [r, n_out, n_expert] */
struct lora_pair {
    struct kiln_tensor * base;
    struct kiln_tensor * a, * b;
    int layer, target;           /* target: the slot (0 .. LORA_N_SLOTS - 1) */
};

struct kiln_lora {
    struct kiln_model * model;
    struct kiln_lora_params p;
    int n_pairs;
    struct lora_pair * pairs;
    int * index;                 /* [n_layer * LORA_N_SLOTS]: pair of (layer, slot), or -1 */
    struct kiln_context * ctx;   /* A and B, with data */
    float ** grad;               /* per tensor (a0, b0, a1, ...), gradient sums */
    int64_t n_params;
    struct kiln_gallocr * galloc;
    uint8_t * work;
    size_t work_size;
    int64_t drop_key;            /* dropout masks' key (kiln_lora_set_dropout_key); < 0: no dropout */
};

/* splitmix64: every random choice of training (A's initial values, the
 * split, the order of an epoch) is a function of the seed only */
static inline uint64_t lora_mix(uint64_t * s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* "q", "k", ... for target bit i */
extern const char * const lora_target_names[LORA_N_TARGETS];

#endif
