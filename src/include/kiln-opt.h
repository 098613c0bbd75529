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

#ifdef __cplusplus
}
#endif

#endif /* KILN_OPT_H */
