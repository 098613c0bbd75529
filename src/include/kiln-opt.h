/*
 * kiln-opt.h — training: datasets, optimizer steps, epochs (shaped like
 * ggml-opt.h with the kiln_ prefix).
 *
 * Usage: put the model's parameters in a context with data (kiln_set_param
 * each), build the forward graph from an input tensor to an output tensor in
 * a compute context created with no_alloc = true, then kiln_opt_init() with
 * those two tensors. The optimizer context adds labels, the loss, accuracy
 * counters, the backward graph with gradient accumulators and the optimizer
 * step, and allocates everything it computes with the graph allocator.
 *
 * Deviations from ggml-opt: no backend scheduler (the CPU executor runs the
 * graphs, n_threads in the params); errors are returned, not asserted.
 */
#ifndef KILN_OPT_H
#define KILN_OPT_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- datasets: ndata datapoints in shards of ndata_shard, shuffled by shard */
struct kiln_opt_dataset;

struct kiln_opt_dataset * kiln_opt_dataset_init(enum kiln_type type_data, enum kiln_type type_label,
        int64_t ne_datapoint, int64_t ne_label, int64_t ndata, int64_t ndata_shard);
void                 kiln_opt_dataset_free(struct kiln_opt_dataset * dataset);
int64_t              kiln_opt_dataset_ndata(const struct kiln_opt_dataset * dataset);
struct kiln_tensor * kiln_opt_dataset_data  (struct kiln_opt_dataset * dataset); /* [ne_datapoint, ndata] */
struct kiln_tensor * kiln_opt_dataset_labels(struct kiln_opt_dataset * dataset); /* [ne_label,     ndata] */
/* shuffle the first idata datapoints (idata < 0: all), deterministically for a seed */
void kiln_opt_dataset_shuffle(struct kiln_opt_dataset * dataset, uint64_t seed, int64_t idata);
/* copy batch ibatch (in shuffled order) into data_batch [ne_datapoint, nbatch] and labels_batch */
bool kiln_opt_dataset_get_batch(struct kiln_opt_dataset * dataset, struct kiln_tensor * data_batch,
        struct kiln_tensor * labels_batch, int64_t ibatch);

/* ---- optimizer */
enum kiln_opt_loss_type {
    KILN_OPT_LOSS_TYPE_MEAN,
    KILN_OPT_LOSS_TYPE_SUM,
    KILN_OPT_LOSS_TYPE_CROSS_ENTROPY,
    KILN_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR,
};

enum kiln_opt_optimizer_type {
    KILN_OPT_OPTIMIZER_ADAMW,
    KILN_OPT_OPTIMIZER_SGD,
};

struct kiln_opt_optimizer_params {
    struct { float alpha, beta1, beta2, eps, wd; } adamw;
    struct { float alpha, wd; } sgd;
};
typedef struct kiln_opt_optimizer_params (*kiln_opt_get_optimizer_params)(void * userdata);
/* lr 1e-3, betas 0.9/0.999, eps 1e-8, no weight decay */
struct kiln_opt_optimizer_params kiln_opt_get_default_optimizer_params(void * userdata);

struct kiln_opt_params {
    struct kiln_context * ctx_compute; /* holds inputs/outputs and the forward graph's tensors (no_alloc) */
    struct kiln_tensor *  inputs;
    struct kiln_tensor *  outputs;
    enum kiln_opt_loss_type      loss_type;
    enum kiln_opt_optimizer_type optimizer;
    int opt_period;                    /* micro-batches per optimizer step (gradient accumulation) */
    int n_threads;
    kiln_opt_get_optimizer_params get_opt_pars;
    void *                        get_opt_pars_ud;
    struct kiln_threadpool *      threadpool; /* NULL: the executor's shared pool; set to reuse the caller's (wasm: no new threads) */
};
struct kiln_opt_params kiln_opt_default_params(struct kiln_context * ctx_compute, struct kiln_tensor * inputs,
        struct kiln_tensor * outputs, enum kiln_opt_loss_type loss_type);

struct kiln_opt_context;
struct kiln_opt_context * kiln_opt_init(struct kiln_opt_params params);
void kiln_opt_free(struct kiln_opt_context * opt);
/* zero gradients; with optimizer = true also the moments and the step count */
void kiln_opt_reset(struct kiln_opt_context * opt, bool optimizer);

struct kiln_tensor * kiln_opt_inputs  (struct kiln_opt_context * opt);
struct kiln_tensor * kiln_opt_outputs (struct kiln_opt_context * opt);
struct kiln_tensor * kiln_opt_labels  (struct kiln_opt_context * opt);
struct kiln_tensor * kiln_opt_loss    (struct kiln_opt_context * opt);
struct kiln_tensor * kiln_opt_pred    (struct kiln_opt_context * opt);
struct kiln_tensor * kiln_opt_ncorrect(struct kiln_opt_context * opt);

/* ---- results accumulated over batches */
struct kiln_opt_result;
struct kiln_opt_result * kiln_opt_result_init(void);
void    kiln_opt_result_free (struct kiln_opt_result * result);
void    kiln_opt_result_reset(struct kiln_opt_result * result);
int64_t kiln_opt_result_ndata(const struct kiln_opt_result * result);
void    kiln_opt_result_loss    (const struct kiln_opt_result * result, double * loss, double * unc);
void    kiln_opt_result_accuracy(const struct kiln_opt_result * result, double * accuracy, double * unc);

/* One batch: forward only (backward = false), or forward + backward and, every
 * opt_period calls, an optimizer step. The inputs and labels must have been
 * filled (kiln_opt_dataset_get_batch on kiln_opt_inputs/labels) after
 * kiln_opt_prepare(opt, backward), which allocates the graph. */
enum kiln_status kiln_opt_prepare(struct kiln_opt_context * opt, bool backward);
enum kiln_status kiln_opt_eval(struct kiln_opt_context * opt, struct kiln_opt_result * result);

typedef void (*kiln_opt_epoch_callback)(bool train, struct kiln_opt_context * opt, struct kiln_opt_dataset * dataset,
        struct kiln_opt_result * result, int64_t ibatch, int64_t ibatch_max, int64_t t_start_us, void * userdata);
/* train on datapoints [0, idata_split), evaluate on [idata_split, ndata) */
enum kiln_status kiln_opt_epoch(struct kiln_opt_context * opt, struct kiln_opt_dataset * dataset,
        struct kiln_opt_result * result_train, struct kiln_opt_result * result_eval, int64_t idata_split,
        kiln_opt_epoch_callback callback_train, kiln_opt_epoch_callback callback_eval, void * userdata);
/* prints progress to stderr */
void kiln_opt_epoch_callback_progress_bar(bool train, struct kiln_opt_context * opt, struct kiln_opt_dataset * dataset,
        struct kiln_opt_result * result, int64_t ibatch, int64_t ibatch_max, int64_t t_start_us, void * userdata);

/* ---- LoRA fine-tuning of a decoder (src/models/finetune*.c)
 *
 * A LoRA adapter adds to a projection y = W x the low-rank term
 * (alpha / rank) * B (A x), A [n_in, rank] and B [rank, n_out] in ggml's ne
 * order (llama.cpp's GGUF LoRA layout). The base weights stay as loaded, in
 * their file type, and are never converted to an f32 copy: gradients reach
 * A and B through mul_mat's backward (out_prod for quantized weights).
 * Supported: the decoder architectures with a dense gated FFN (llama,
 * mistral, qwen2/3, gemma 1/2/3, granite, olmo2, phi3 ...): pre-, sandwich-
 * and post-norm layers, SiLU / GELU, biases, QK-norm, GQA, logit softcaps,
 * RoPE frequency factors (Llama 3's, Phi-3's LongRoPE); sliding-window
 * layers when the training ctx fits in the window. A fused q/k/v weight
 * (attn_qkv) takes one A/B pair when any of q, k, v is a target, and a fused
 * [gate; up] weight (phi3's ffn_up) one pair when gate or up is, as
 * llama.cpp applies adapters to those weights. Mixture-of-experts layers
 * (qwen2moe, qwen3moe): gate, up, down adapt every routed expert — one A/B
 * pair per expert, A [n_in, rank, n_expert] and B [rank, n_out, n_expert],
 * applied to the chosen experts through mul_mat_id as llama.cpp's
 * build_lora_mm_id does — and the shared expert's gate, up, down (qwen2moe).
 * The routers (ffn_gate_inp, ffn_gate_inp_shexp) are not targets: the choice
 * of experts is not differentiable, so their adapters would learn only through
 * the chosen experts' weights, while any change moves which experts run
 * (Kiln's and llama.cpp's adapter loaders accept and apply router adapters
 * made elsewhere). Not: parallel attention + FFN layers (phi2). The
 * model must have been loaded with kiln_model_load_for_training (file
 * layout, no repacking). */
struct kiln_model;
struct kiln_model_params;

enum kiln_lora_target {
    KILN_LORA_Q    = 1u << 0,
    KILN_LORA_K    = 1u << 1,
    KILN_LORA_V    = 1u << 2,
    KILN_LORA_O    = 1u << 3,
    KILN_LORA_GATE = 1u << 4,
    KILN_LORA_UP   = 1u << 5,
    KILN_LORA_DOWN = 1u << 6,
};
/* "q,v" or "q,k,v,o,gate,up,down" (also "all") -> a mask of kiln_lora_target; 0 on a bad name */
KILN_API uint32_t kiln_lora_parse_targets(const char * list);

struct kiln_lora_params {
    int32_t  rank;    /* r */
    float    alpha;   /* scale = alpha / r */
    uint32_t targets; /* kiln_lora_target mask */
    uint64_t seed;    /* A: Kaiming-uniform as PEFT (U(-1/sqrt(n_in), 1/sqrt(n_in))); B: zero */
    float    dropout; /* PEFT's lora_dropout, in [0, 1): on the adapter's input only, W x is untouched:
                       * y = W x + (alpha / r) B (A (m * x)), m = 0 with probability dropout, else
                       * 1 / (1 - dropout); applied only in training (see kiln_lora_set_dropout_key) */
};
KILN_API struct kiln_lora_params kiln_lora_default_params(void); /* r 8, alpha 16, q,v, seed 42, dropout 0 */

/* a decoder loaded for training: weights in the file's layout (never repacked) */
KILN_API struct kiln_model * kiln_model_load_for_training(const char * path, int32_t n_threads);
KILN_API struct kiln_model * kiln_model_load_for_training_from_buffer(const void * data, size_t size, int32_t n_threads);

struct kiln_lora;
/* NULL + kiln_last_error() on an unsupported model or bad parameters */
KILN_API struct kiln_lora * kiln_lora_new(struct kiln_model * model, struct kiln_lora_params params);
KILN_API void kiln_lora_free(struct kiln_lora * lora);
/* the trainable tensors, in the order a0, b0, a1, b1, ... (layer-major, then q k v o gate up down,
 * then the shared expert's gate up down);
 * named "<base tensor name>.lora_a" / ".lora_b" */
KILN_API int32_t             kiln_lora_n_tensors(const struct kiln_lora * lora);
KILN_API struct kiln_tensor * kiln_lora_tensor(struct kiln_lora * lora, int32_t i);
/* the gradient sums of tensor i (see kiln_lora_eval), same element count */
KILN_API float *             kiln_lora_grad(struct kiln_lora * lora, int32_t i);
KILN_API int64_t             kiln_lora_n_params(const struct kiln_lora * lora);
KILN_API void                kiln_lora_zero_grad(struct kiln_lora * lora);

/* Next-token cross-entropy over n_seq sequences of n_ctx tokens: position j of
 * sequence s reads tokens[s * n_ctx + j] (and the positions before it) and is
 * scored against targets[s * n_ctx + j]; a negative target is not scored (the
 * loss mask). *loss: the mean over scored positions, *n_scored their count.
 * With backward, n_scored times the gradient of that mean (the gradient of the
 * sum) is added to the gradient sums. */
KILN_API enum kiln_status kiln_lora_eval(struct kiln_lora * lora, const int32_t * tokens, const int32_t * targets,
        int32_t n_seq, int32_t n_ctx, bool backward, double * loss, int64_t * n_scored);

/* Dropout (params.dropout > 0) is applied by kiln_lora_eval while the key is
 * >= 0, with masks that are a function of (seed, key, projection, element)
 * only: the training loop sets key = step * grad_accum + micro-batch, and -1
 * (no dropout: evaluation) for validation. A new adapter starts at -1. */
KILN_API void  kiln_lora_set_dropout_key(struct kiln_lora * lora, int64_t key);
/* the factor (0 or 1 / (1 - dropout)) by which element i of the input of
 * adapted projection `pair` (the order of kiln_lora_tensor / 2) is multiplied
 * under `key`; the input is [n_rows][n_in] row-major, row = sequence * n_ctx
 * + position, so i = row * n_in + column. 1 when dropout is 0. */
KILN_API float kiln_lora_dropout_factor(const struct kiln_lora * lora, int32_t pair, int64_t key, int64_t i);

/* the adapter as llama.cpp reads it: general.type = "adapter", adapter.type =
 * "lora", adapter.lora.alpha, F32 tensors <base>.lora_a [n_in, r] and
 * <base>.lora_b [r, n_out] (src/models/lora_write.c) */
KILN_API enum kiln_status kiln_lora_save(const struct kiln_lora * lora, const char * path);
/* the same bytes in a malloc'ed buffer (free with free()), NULL on error */
KILN_API void * kiln_lora_save_to_buffer(const struct kiln_lora * lora, size_t * size);

/* ---- the training loop (src/models/finetune_loop.c) */
enum kiln_lr_schedule { KILN_LR_COSINE, KILN_LR_LINEAR, KILN_LR_CONSTANT };

struct kiln_finetune_params {
    struct kiln_lora_params lora;
    int32_t n_ctx;        /* tokens per sequence */
    int32_t n_batch;      /* sequences per micro-batch */
    int32_t grad_accum;   /* micro-batches per optimizer step */
    int32_t n_epochs;
    float   lr;           /* peak learning rate */
    float   lr_min;       /* the schedule's floor, as a fraction of lr */
    int32_t warmup_steps; /* linear warmup from 0 */
    enum kiln_lr_schedule schedule;
    float   weight_decay; /* AdamW, decoupled */
    float   beta1, beta2, eps;
    float   grad_clip;    /* max global L2 norm of the gradient; 0: none */
    float   val_fraction; /* share of the sequences held out for validation */
    int32_t n_threads;
};
KILN_API struct kiln_finetune_params kiln_finetune_default_params(void);

/* training data: n sequences of n_ctx tokens with their targets (negative = not scored) */
struct kiln_finetune_data {
    int32_t   n_seq, n_ctx;
    int32_t * tokens;  /* [n_seq * n_ctx] */
    int32_t * targets; /* [n_seq * n_ctx] */
};
/* plain text: every non-empty line is a document <bos> text <eos>; the documents
 * are concatenated and cut into windows of n_ctx + 1 tokens (stride n_ctx) */
KILN_API struct kiln_finetune_data * kiln_finetune_data_from_text(const struct kiln_model * model, const char * text,
        size_t len, int32_t n_ctx);
/* chat JSONL: one {"messages": [{"role": ..., "content": ...}, ...]} per line,
 * rendered with the template documented in finetune_data.c; only the
 * assistant turns are scored; one conversation per sequence (padded, or cut
 * at n_ctx) */
KILN_API struct kiln_finetune_data * kiln_finetune_data_from_chat(const struct kiln_model * model, const char * jsonl,
        size_t len, int32_t n_ctx);
KILN_API void kiln_finetune_data_free(struct kiln_finetune_data * data);

struct kiln_finetune_progress {
    int64_t step, n_steps;  /* steps done (after this one), total */
    int32_t epoch;
    double  loss;           /* training loss of this step (mean over its scored tokens) */
    double  lr;
    double  grad_norm;      /* before clipping */
    int64_t tokens;         /* tokens processed in this step */
};

struct kiln_finetune;
/* data is copied; the model must outlive the trainer */
KILN_API struct kiln_finetune * kiln_finetune_new(struct kiln_model * model, const struct kiln_finetune_data * data,
        struct kiln_finetune_params params);
KILN_API void    kiln_finetune_free(struct kiln_finetune * ft);
KILN_API int64_t kiln_finetune_n_steps(const struct kiln_finetune * ft);
KILN_API int64_t kiln_finetune_step_index(const struct kiln_finetune * ft);
KILN_API int32_t kiln_finetune_n_val(const struct kiln_finetune * ft);
/* one optimizer step (grad_accum micro-batches); KILN_STATUS_INVALID_ARG when all steps are done */
KILN_API enum kiln_status kiln_finetune_step(struct kiln_finetune * ft, struct kiln_finetune_progress * progress);
/* mean loss over the validation sequences (the training ones when there are none) */
KILN_API enum kiln_status kiln_finetune_validate(struct kiln_finetune * ft, double * loss);
KILN_API struct kiln_lora * kiln_finetune_lora(struct kiln_finetune * ft);
/* adapter + AdamW moments + step; resuming continues exactly (the same
 * adapter bytes as a run without the interruption, same thread count) */
KILN_API enum kiln_status kiln_finetune_save_checkpoint(const struct kiln_finetune * ft, const char * path);
KILN_API enum kiln_status kiln_finetune_load_checkpoint(struct kiln_finetune * ft, const char * path);

#ifdef __cplusplus
}
#endif

#endif /* KILN_OPT_H */
