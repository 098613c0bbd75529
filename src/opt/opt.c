/*
 * opt.c — datasets, the optimizer context and epochs (see kiln-opt.h).
 */
#include "kiln-opt.h"
#include "../core/graph_internal.h"

#include <math.h>
#include <stdlib.h>

/* ================================================================ dataset */

struct kiln_opt_dataset {
    struct kiln_context * ctx;
    struct kiln_tensor *  data;
    struct kiln_tensor *  labels;
    int64_t ndata;
    int64_t ndata_shard;
    size_t  nbs_data;   /* bytes per shard */
    size_t  nbs_labels;
    int64_t * permutation; /* shard order */
    int64_t   n_shards;
};

struct kiln_opt_dataset * kiln_opt_dataset_init(enum kiln_type type_data, enum kiln_type type_label,
        int64_t ne_datapoint, int64_t ne_label, int64_t ndata, int64_t ndata_shard) {
    if (ne_datapoint <= 0 || ne_label < 0 || ndata <= 0 || ndata_shard <= 0 || ndata % ndata_shard != 0) {
        kiln_set_error("opt_dataset_init: bad sizes (ne_datapoint %lld, ne_label %lld, ndata %lld, ndata_shard %lld)",
                       (long long) ne_datapoint, (long long) ne_label, (long long) ndata, (long long) ndata_shard);
        return NULL;
    }
    struct kiln_opt_dataset * ds = (struct kiln_opt_dataset *) calloc(1, sizeof(*ds));
    if (!ds) { kiln_set_error("opt_dataset_init: out of memory"); return NULL; }
    const size_t bytes = kiln_row_size(type_data, ne_datapoint) * (size_t) ndata +
                         (ne_label > 0 ? kiln_row_size(type_label, ne_label) * (size_t) ndata : 0) + 4 * kiln_tensor_overhead();
    struct kiln_init_params p = { bytes, NULL, false };
    ds->ctx = kiln_init(p);
    if (!ds->ctx) { free(ds); return NULL; }
    ds->data = kiln_new_tensor_2d(ds->ctx, type_data, ne_datapoint, ndata);
    ds->labels = ne_label > 0 ? kiln_new_tensor_2d(ds->ctx, type_label, ne_label, ndata) : NULL;
    ds->n_shards = ndata / ndata_shard;
    ds->permutation = (int64_t *) malloc(sizeof(int64_t) * (size_t) ds->n_shards);
    if (!ds->data || (ne_label > 0 && !ds->labels) || !ds->permutation) {
        kiln_opt_dataset_free(ds);
        kiln_set_error("opt_dataset_init: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < ds->n_shards; i++) ds->permutation[i] = i;
    ds->ndata = ndata;
    ds->ndata_shard = ndata_shard;
    ds->nbs_data = ds->data->nb[1] * (size_t) ndata_shard;
    ds->nbs_labels = ds->labels ? ds->labels->nb[1] * (size_t) ndata_shard : 0;
    return ds;
}

void kiln_opt_dataset_free(struct kiln_opt_dataset * ds) {
    if (!ds) return;
    kiln_free(ds->ctx);
    free(ds->permutation);
    free(ds);
}

int64_t kiln_opt_dataset_ndata(const struct kiln_opt_dataset * ds) { return ds ? ds->ndata : 0; }
struct kiln_tensor * kiln_opt_dataset_data(struct kiln_opt_dataset * ds) { return ds ? ds->data : NULL; }
struct kiln_tensor * kiln_opt_dataset_labels(struct kiln_opt_dataset * ds) { return ds ? ds->labels : NULL; }

void kiln_opt_dataset_shuffle(struct kiln_opt_dataset * ds, uint64_t seed, int64_t idata) {
    if (!ds) return;
    if (idata < 0 || idata > ds->ndata) idata = ds->ndata;
    const int64_t n = idata / ds->ndata_shard;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    /* Fisher-Yates with splitmix64: the same seed gives the same order everywhere */
    for (int64_t i = n - 1; i > 0; i--) {
        s += 0x9E3779B97F4A7C15ull;
        uint64_t z = s;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const int64_t j = (int64_t)(z % (uint64_t)(i + 1));
        const int64_t t = ds->permutation[i];
        ds->permutation[i] = ds->permutation[j];
        ds->permutation[j] = t;
    }
}

bool kiln_opt_dataset_get_batch(struct kiln_opt_dataset * ds, struct kiln_tensor * data_batch,
        struct kiln_tensor * labels_batch, int64_t ibatch) {
    if (!ds || !data_batch || !data_batch->data) { kiln_set_error("opt_dataset_get_batch: dataset or batch tensor missing"); return false; }
    if (!kiln_is_contiguous(data_batch) || data_batch->type != ds->data->type || kiln_nelements(data_batch) % ds->data->ne[0] != 0) {
        kiln_set_error("opt_dataset_get_batch: batch tensor does not match the dataset's datapoints");
        return false;
    }
    const int64_t nbatch = kiln_nelements(data_batch) / ds->data->ne[0];
    if (nbatch % ds->ndata_shard != 0) {
        kiln_set_error("opt_dataset_get_batch: batch size %lld is not a multiple of the shard size %lld",
                       (long long) nbatch, (long long) ds->ndata_shard);
        return false;
    }
    const int64_t shards = nbatch / ds->ndata_shard;
    if (ibatch < 0 || (ibatch + 1) * shards > ds->n_shards) {
        kiln_set_error("opt_dataset_get_batch: batch %lld out of range", (long long) ibatch);
        return false;
    }
    if (labels_batch && (!ds->labels || !labels_batch->data || labels_batch->type != ds->labels->type ||
                         kiln_nelements(labels_batch) != ds->labels->ne[0] * nbatch)) {
        kiln_set_error("opt_dataset_get_batch: labels batch does not match the dataset's labels");
        return false;
    }
    for (int64_t i = 0; i < shards; i++) {
        const int64_t shard = ds->permutation[ibatch * shards + i];
        memcpy((char *) data_batch->data + i * ds->nbs_data, (const char *) ds->data->data + shard * ds->nbs_data, ds->nbs_data);
        if (labels_batch) {
            memcpy((char *) labels_batch->data + i * ds->nbs_labels,
                   (const char *) ds->labels->data + shard * ds->nbs_labels, ds->nbs_labels);
        }
    }
    return true;
}

/* ================================================================ results */

struct kiln_opt_result {
    int64_t ndata;
    double  loss_sum, loss_sq_sum;
    int64_t n_loss;
    int64_t ncorrect;
    bool    has_correct;
};

struct kiln_opt_result * kiln_opt_result_init(void) {
    struct kiln_opt_result * r = (struct kiln_opt_result *) calloc(1, sizeof(*r));
    if (!r) kiln_set_error("opt_result_init: out of memory");
    return r;
}
void kiln_opt_result_free(struct kiln_opt_result * r) { free(r); }
void kiln_opt_result_reset(struct kiln_opt_result * r) { if (r) memset(r, 0, sizeof(*r)); }
int64_t kiln_opt_result_ndata(const struct kiln_opt_result * r) { return r ? r->ndata : 0; }

void kiln_opt_result_loss(const struct kiln_opt_result * r, double * loss, double * unc) {
    const double n = (double) r->n_loss;
    const double mean = n > 0 ? r->loss_sum / n : NAN;
    if (loss) *loss = mean;
    if (unc) {
        if (n < 2) { *unc = NAN; return; }
        const double var = (r->loss_sq_sum / n - mean * mean) * n / (n - 1);
        *unc = sqrt(var > 0 ? var : 0) / sqrt(n);
    }
}

void kiln_opt_result_accuracy(const struct kiln_opt_result * r, double * accuracy, double * unc) {
    const double acc = r->has_correct && r->ndata > 0 ? (double) r->ncorrect / (double) r->ndata : NAN;
    if (accuracy) *accuracy = acc;
    if (unc) *unc = r->ndata > 1 ? sqrt(acc * (1 - acc) / (double)(r->ndata - 1)) : NAN;
}

/* ================================================================ optimizer */

struct kiln_opt_optimizer_params kiln_opt_get_default_optimizer_params(void * userdata) {
    (void) userdata;
    struct kiln_opt_optimizer_params p;
    p.adamw.alpha = 1e-3f; p.adamw.beta1 = 0.9f; p.adamw.beta2 = 0.999f; p.adamw.eps = 1e-8f; p.adamw.wd = 0.0f;
    p.sgd.alpha = 1e-3f; p.sgd.wd = 0.0f;
    return p;
}

struct kiln_opt_params kiln_opt_default_params(struct kiln_context * ctx_compute, struct kiln_tensor * inputs,
        struct kiln_tensor * outputs, enum kiln_opt_loss_type loss_type) {
    struct kiln_opt_params p;
    memset(&p, 0, sizeof(p));
    p.ctx_compute = ctx_compute;
    p.inputs = inputs;
    p.outputs = outputs;
    p.loss_type = loss_type;
    p.optimizer = KILN_OPT_OPTIMIZER_ADAMW;
    p.opt_period = 1;
    p.n_threads = 1;
    p.get_opt_pars = kiln_opt_get_default_optimizer_params;
    return p;
}

struct kiln_opt_context {
    struct kiln_opt_params params;
    struct kiln_context * ctx_static; /* accumulators, moments, optimizer params: with data */
    struct kiln_context * ctx_build;  /* loss, backward and optimizer nodes: no data */
    struct kiln_cgraph * gf, * gb_grad, * gb_opt;
    struct kiln_gallocr * galloc;
    struct kiln_tensor * labels, * loss, * pred, * ncorrect;
    struct kiln_tensor * adamw_params;
    struct kiln_tensor * loss_grad;
    int  n_params;
    bool allocated_backward;
    bool prepared;
    int64_t iter;       /* optimizer steps done */
    uint8_t * work;     /* executor work buffer, grown on demand */
    size_t    work_size;
    int     micro;      /* micro-batches since the last step */
};

static struct kiln_tensor * build_loss(struct kiln_opt_context * o) {
    struct kiln_context * ctx = o->ctx_build;
    struct kiln_tensor * out = o->params.outputs;
    struct kiln_tensor * loss = NULL;
    switch (o->params.loss_type) {
        case KILN_OPT_LOSS_TYPE_MEAN:
            loss = kiln_scale(ctx, kiln_sum(ctx, out), 1.0f / (float) kiln_nelements(out));
            break;
        case KILN_OPT_LOSS_TYPE_SUM:
            loss = kiln_sum(ctx, out);
            break;
        case KILN_OPT_LOSS_TYPE_CROSS_ENTROPY:
            o->labels = kiln_new_tensor(ctx, KILN_TYPE_F32, KILN_MAX_DIMS, out->ne);
            if (!o->labels) return NULL;
            kiln_set_name(o->labels, "labels");
            kiln_set_input(o->labels);
            loss = kiln_cross_entropy_loss(ctx, out, o->labels);
            o->pred = kiln_argmax(ctx, out);
            if (o->pred) {
                o->ncorrect = kiln_count_equal(ctx, o->pred, kiln_argmax(ctx, o->labels));
                if (o->ncorrect) { kiln_set_name(o->ncorrect, "ncorrect"); kiln_set_output(o->ncorrect); }
                kiln_set_name(o->pred, "pred");
                kiln_set_output(o->pred);
            }
            break;
        case KILN_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR:
            o->labels = kiln_new_tensor(ctx, KILN_TYPE_F32, KILN_MAX_DIMS, out->ne);
            if (!o->labels) return NULL;
            kiln_set_name(o->labels, "labels");
            kiln_set_input(o->labels);
            loss = kiln_scale(ctx, kiln_sum(ctx, kiln_sqr(ctx, kiln_sub(ctx, out, o->labels))), 1.0f / (float) kiln_nelements(out));
            break;
    }
    if (loss && o->params.opt_period > 1) loss = kiln_scale(ctx, loss, 1.0f / (float) o->params.opt_period);
    return loss;
}

struct kiln_opt_context * kiln_opt_init(struct kiln_opt_params params) {
    if (!params.ctx_compute || !params.inputs || !params.outputs) {
        kiln_set_error("opt_init: ctx_compute, inputs and outputs are required");
        return NULL;
    }
    if (params.outputs->type != KILN_TYPE_F32) { kiln_set_error("opt_init: outputs must be F32"); return NULL; }
    if (params.opt_period < 1) params.opt_period = 1;
    if (params.n_threads < 1) params.n_threads = 1;
    if (!params.get_opt_pars) params.get_opt_pars = kiln_opt_get_default_optimizer_params;
    struct kiln_opt_context * o = (struct kiln_opt_context *) calloc(1, sizeof(*o));
    if (!o) { kiln_set_error("opt_init: out of memory"); return NULL; }
    o->params = params;

    /* the forward graph: model output + loss (+ accuracy) */
    struct kiln_cgraph * tmp = NULL;
    {
        struct kiln_init_params p = { 0, NULL, true };
        /* metadata budget: forward nodes are re-counted below; the backward
         * pass adds a few nodes per forward node */
        p.mem_size = kiln_graph_overhead_custom(1 << 16, true) * 3 + kiln_tensor_overhead() * (1 << 16);
        o->ctx_build = kiln_init(p);
        if (!o->ctx_build) goto fail;
        tmp = kiln_new_graph_custom(o->ctx_build, 1 << 16, true);
        if (!tmp) goto fail;
    }
    kiln_set_input(params.inputs);
    kiln_set_output(params.outputs);
    o->loss = build_loss(o);
    if (!o->loss) goto fail;
    kiln_set_name(o->loss, "loss");
    kiln_set_loss(o->loss);
    kiln_set_output(o->loss);
    if (kiln_build_forward_expand(tmp, o->loss) != KILN_STATUS_SUCCESS) goto fail;
    if (o->ncorrect && kiln_build_forward_expand(tmp, o->ncorrect) != KILN_STATUS_SUCCESS) goto fail;
    o->gf = tmp;

    /* params, accumulators and optimizer state */
    for (int i = 0; i < o->gf->n_nodes; i++) if (o->gf->nodes[i]->flags & KILN_TENSOR_FLAG_PARAM) o->n_params++;
    if (o->n_params == 0) {
        /* forward-only use (evaluation) is still possible */
        return o;
    }
    {
        size_t bytes = kiln_tensor_overhead() * (size_t)(4 * o->n_params + 4) + 64;
        for (int i = 0; i < o->gf->n_nodes; i++) {
            const struct kiln_tensor * t = o->gf->nodes[i];
            if (t->flags & KILN_TENSOR_FLAG_PARAM) bytes += 3 * (KILN_PAD(kiln_nelements(t) * sizeof(float), KILN_MEM_ALIGN) + 64);
        }
        struct kiln_init_params p = { bytes, NULL, false };
        o->ctx_static = kiln_init(p);
        if (!o->ctx_static) goto fail;
    }
    struct kiln_tensor ** grad_accs = (struct kiln_tensor **) calloc((size_t) o->gf->n_nodes, sizeof(*grad_accs));
    if (!grad_accs) { kiln_set_error("opt_init: out of memory"); goto fail; }
    for (int i = 0; i < o->gf->n_nodes; i++) {
        struct kiln_tensor * t = o->gf->nodes[i];
        if (!(t->flags & KILN_TENSOR_FLAG_PARAM)) continue;
        if (t->type != KILN_TYPE_F32) {
            free(grad_accs);
            kiln_set_error("opt_init: parameter '%s' is %s; trainable parameters must be F32", t->name, kiln_type_name(t->type));
            goto fail;
        }
        /* accumulate in place so micro-batches add up (and the optimizer reads one tensor) */
        grad_accs[i] = kiln_new_tensor(o->ctx_static, KILN_TYPE_F32, KILN_MAX_DIMS, t->ne);
        if (!grad_accs[i]) { free(grad_accs); goto fail; }
        kiln_format_name(grad_accs[i], "%s (grad acc)", t->name);
        kiln_set_zero(grad_accs[i]);
    }
    o->gb_grad = kiln_graph_dup(o->ctx_build, o->gf);
    if (!o->gb_grad) { free(grad_accs); goto fail; }
    if (kiln_build_backward_expand(o->ctx_build, o->gb_grad, grad_accs) != KILN_STATUS_SUCCESS) { free(grad_accs); goto fail; }
    free(grad_accs);
    o->loss_grad = kiln_graph_get_grad(o->gb_grad, o->loss);

    o->gb_opt = kiln_graph_dup(o->ctx_build, o->gb_grad);
    if (!o->gb_opt) goto fail;
    o->adamw_params = kiln_new_tensor_1d(o->ctx_static, KILN_TYPE_F32, 7);
    if (!o->adamw_params) goto fail;
    kiln_set_name(o->adamw_params, "adamw_params");
    for (int i = 0; i < o->gf->n_nodes; i++) {
        struct kiln_tensor * t = o->gf->nodes[i];
        if (!(t->flags & KILN_TENSOR_FLAG_PARAM)) continue;
        struct kiln_tensor * grad = kiln_graph_get_grad_acc(o->gb_opt, t);
        struct kiln_tensor * step = NULL;
        if (params.optimizer == KILN_OPT_OPTIMIZER_ADAMW) {
            struct kiln_tensor * m = kiln_new_tensor(o->ctx_static, KILN_TYPE_F32, KILN_MAX_DIMS, t->ne);
            struct kiln_tensor * v = kiln_new_tensor(o->ctx_static, KILN_TYPE_F32, KILN_MAX_DIMS, t->ne);
            if (!m || !v) goto fail;
            kiln_set_zero(m);
            kiln_set_zero(v);
            step = kiln_opt_step_adamw(o->ctx_build, t, grad, m, v, o->adamw_params);
        } else {
            /* SGD with decoupled weight decay as plain ops, p = p*(1 - lr*wd) - lr*g;
             * the learning rate is fixed at init (no SGD op in the table yet) */
            const struct kiln_opt_optimizer_params op = params.get_opt_pars(params.get_opt_pars_ud);
            struct kiln_tensor * upd = kiln_sub(o->ctx_build, kiln_scale(o->ctx_build, t, 1.0f - op.sgd.alpha * op.sgd.wd),
                                                kiln_scale(o->ctx_build, grad, op.sgd.alpha));
            step = upd ? kiln_cpy(o->ctx_build, upd, t) : NULL;
        }
        if (!step) goto fail;
        if (kiln_build_forward_expand(o->gb_opt, step) != KILN_STATUS_SUCCESS) goto fail;
    }
    return o;
fail:
    {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kiln_last_error());
        kiln_opt_free(o);
        kiln_set_error("opt_init: %s", msg);
    }
    return NULL;
}

void kiln_opt_free(struct kiln_opt_context * o) {
    if (!o) return;
    kiln_gallocr_free(o->galloc);
    free(o->work);
    kiln_free(o->ctx_static);
    kiln_free(o->ctx_build);
    free(o);
}

void kiln_opt_reset(struct kiln_opt_context * o, bool optimizer) {
    if (!o) return;
    if (o->gb_opt) {
        if (optimizer) {
            kiln_graph_reset(o->gb_opt);
            o->iter = 0;
        } else {
            kiln_graph_reset(o->gb_grad);
        }
    }
    o->micro = 0;
}

struct kiln_tensor * kiln_opt_inputs  (struct kiln_opt_context * o) { return o ? o->params.inputs : NULL; }
struct kiln_tensor * kiln_opt_outputs (struct kiln_opt_context * o) { return o ? o->params.outputs : NULL; }
struct kiln_tensor * kiln_opt_labels  (struct kiln_opt_context * o) { return o ? o->labels : NULL; }
struct kiln_tensor * kiln_opt_loss    (struct kiln_opt_context * o) { return o ? o->loss : NULL; }
struct kiln_tensor * kiln_opt_pred    (struct kiln_opt_context * o) { return o ? o->pred : NULL; }
struct kiln_tensor * kiln_opt_ncorrect(struct kiln_opt_context * o) { return o ? o->ncorrect : NULL; }

enum kiln_status kiln_opt_prepare(struct kiln_opt_context * o, bool backward) {
    if (!o) { kiln_set_error("opt_prepare: context is NULL"); return KILN_STATUS_INVALID_ARG; }
    if (backward && !o->gb_opt) {
        kiln_set_error("opt_prepare: the model has no parameters (kiln_set_param) to train");
        return KILN_STATUS_INVALID_ARG;
    }
    if (!o->galloc) o->galloc = kiln_gallocr_new();
    if (!o->galloc) return KILN_STATUS_ALLOC_FAILED;
    /* the optimizer graph contains the other two as prefixes, so one plan
     * serves all three; it is only made once */
    struct kiln_cgraph * g = o->gb_opt ? o->gb_opt : o->gf;
    if (!o->prepared) {
        if (!kiln_gallocr_alloc_graph(o->galloc, g)) return KILN_STATUS_ALLOC_FAILED;
        o->prepared = true;
        kiln_opt_reset(o, true);
    }
    o->allocated_backward = backward;
    return KILN_STATUS_SUCCESS;
}

static enum kiln_status compute(struct kiln_opt_context * o, struct kiln_cgraph * g) {
    struct kiln_cplan plan = kiln_graph_plan(g, o->params.n_threads, o->params.threadpool);
    if (plan.work_size > o->work_size) {
        uint8_t * w = (uint8_t *) realloc(o->work, plan.work_size);
        if (!w) { kiln_set_error("opt: cannot allocate %zu bytes of work buffer", plan.work_size); return KILN_STATUS_ALLOC_FAILED; }
        o->work = w;
        o->work_size = plan.work_size;
    }
    plan.work_data = o->work;
    return kiln_graph_compute(g, &plan);
}

enum kiln_status kiln_opt_eval(struct kiln_opt_context * o, struct kiln_opt_result * result) {
    if (!o || !o->prepared) { kiln_set_error("opt_eval: call kiln_opt_prepare first"); return KILN_STATUS_INVALID_ARG; }
    struct kiln_cgraph * g = o->gf;
    if (o->allocated_backward) {
        if (o->micro == 0) kiln_graph_reset(o->gb_grad); /* zero the accumulators, loss grad = 1 */
        if (o->loss_grad && o->loss_grad->data) kiln_set_f32(o->loss_grad, 1.0f);
        const bool step = (o->micro + 1) % o->params.opt_period == 0;
        if (step) {
            const struct kiln_opt_optimizer_params op = o->params.get_opt_pars(o->params.get_opt_pars_ud);
            const int64_t it = o->iter + 1;
            float * ap = (float *) o->adamw_params->data;
            ap[0] = op.adamw.alpha;
            ap[1] = op.adamw.beta1;
            ap[2] = op.adamw.beta2;
            ap[3] = op.adamw.eps;
            ap[4] = op.adamw.wd;
            ap[5] = (float)(1.0 / (1.0 - pow(op.adamw.beta1, (double) it)));
            ap[6] = (float)(1.0 / (1.0 - pow(op.adamw.beta2, (double) it)));
            g = o->gb_opt;
        } else {
            g = o->gb_grad;
        }
        const enum kiln_status st = compute(o, g);
        if (st != KILN_STATUS_SUCCESS) return st;
        o->micro = step ? 0 : o->micro + 1;
        if (step) o->iter++;
    } else {
        const enum kiln_status st = compute(o, g);
        if (st != KILN_STATUS_SUCCESS) return st;
    }
    if (result) {
        const int64_t nbatch = o->params.outputs->ne[1] * o->params.outputs->ne[2] * o->params.outputs->ne[3];
        double l = kiln_get_f32_1d(o->loss, 0);
        if (o->params.opt_period > 1) l *= o->params.opt_period; /* report the unscaled loss */
        result->loss_sum += l;
        result->loss_sq_sum += l * l;
        result->n_loss++;
        result->ndata += nbatch;
        if (o->ncorrect) {
            result->ncorrect += *(const int64_t *) o->ncorrect->data;
            result->has_correct = true;
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_opt_epoch(struct kiln_opt_context * o, struct kiln_opt_dataset * ds,
        struct kiln_opt_result * result_train, struct kiln_opt_result * result_eval, int64_t idata_split,
        kiln_opt_epoch_callback cb_train, kiln_opt_epoch_callback cb_eval, void * ud) {
    if (!o || !ds) { kiln_set_error("opt_epoch: context or dataset is NULL"); return KILN_STATUS_INVALID_ARG; }
    struct kiln_tensor * in = kiln_opt_inputs(o);
    const int64_t nbatch = kiln_nelements(in) / kiln_opt_dataset_data(ds)->ne[0];
    const int64_t ndata = kiln_opt_dataset_ndata(ds);
    if (idata_split < 0) idata_split = ndata;
    const int64_t ib_split = idata_split / nbatch;
    const int64_t ib_max = ndata / nbatch;
    const int64_t t0 = kiln_time_us();
    enum kiln_status st;
    if (ib_split > 0) {
        if ((st = kiln_opt_prepare(o, true)) != KILN_STATUS_SUCCESS) return st;
        for (int64_t ib = 0; ib < ib_split; ib++) {
            if (!kiln_opt_dataset_get_batch(ds, in, o->labels, ib)) return KILN_STATUS_INVALID_ARG;
            if ((st = kiln_opt_eval(o, result_train)) != KILN_STATUS_SUCCESS) return st;
            if (cb_train) cb_train(true, o, ds, result_train, ib + 1, ib_split, t0, ud);
        }
    }
    const int64_t t1 = kiln_time_us();
    if (ib_max > ib_split) {
        if ((st = kiln_opt_prepare(o, false)) != KILN_STATUS_SUCCESS) return st;
        for (int64_t ib = ib_split; ib < ib_max; ib++) {
            if (!kiln_opt_dataset_get_batch(ds, in, o->labels, ib)) return KILN_STATUS_INVALID_ARG;
            if ((st = kiln_opt_eval(o, result_eval)) != KILN_STATUS_SUCCESS) return st;
            if (cb_eval) cb_eval(false, o, ds, result_eval, ib + 1 - ib_split, ib_max - ib_split, t1, ud);
        }
    }
    return KILN_STATUS_SUCCESS;
}

void kiln_opt_epoch_callback_progress_bar(bool train, struct kiln_opt_context * o, struct kiln_opt_dataset * ds,
        struct kiln_opt_result * result, int64_t ibatch, int64_t ibatch_max, int64_t t_start_us, void * ud) {
    (void) o; (void) ds; (void) ud;
    double loss, loss_unc, acc, acc_unc;
    kiln_opt_result_loss(result, &loss, &loss_unc);
    kiln_opt_result_accuracy(result, &acc, &acc_unc);
    const double dt = (double)(kiln_time_us() - t_start_us) / 1e6;
    if (ibatch == ibatch_max || ibatch % 50 == 0) {
        fprintf(stderr, "\r%s: batch %5lld/%5lld  loss %.5f±%.5f  accuracy %.2f±%.2f%%  %.1fs",
                train ? "train" : "val  ", (long long) ibatch, (long long) ibatch_max, loss, loss_unc, acc * 100, acc_unc * 100, dt);
        if (ibatch == ibatch_max) fprintf(stderr, "\n");
    }
}
