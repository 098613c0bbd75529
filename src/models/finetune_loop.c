/*
 * finetune_loop.c — the LoRA training loop: a seeded split of the sequences
 * into training and validation, a seeded shuffle per epoch, micro-batches
 * with gradient accumulation, global-norm clipping, AdamW (decoupled weight
 * decay, bias-corrected moments) under a warmup + cosine / linear schedule,
 * and checkpoints of adapter + moments + step.
 *
 * Everything the loop does is a function of (seed, step): the order of the
 * sequences in epoch e is a permutation drawn from (seed, e), so a run
 * resumed from the checkpoint of step s computes exactly the steps an
 * uninterrupted run computes after s. The same holds for LoRA dropout: the
 * masks of a micro-batch are drawn from (seed, step, micro-batch).
 */
#include "finetune_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kiln_finetune {
    struct kiln_finetune_params p;
    struct kiln_lora * lora;
    int32_t n_ctx, n_train, n_val;
    int32_t * tokens, * targets; /* [n_seq * n_ctx], training sequences first */
    int32_t * order;             /* this epoch's order of the training sequences */
    int32_t order_epoch;
    int64_t step, n_steps, steps_per_epoch;
    float ** m, ** v;            /* AdamW moments per tensor */
};

struct kiln_finetune_params kiln_finetune_default_params(void) {
    struct kiln_finetune_params p = {
        .lora = kiln_lora_default_params(),
        .n_ctx = 64,
        .n_batch = 4,
        .grad_accum = 1,
        .n_epochs = 1,
        .lr = 1e-3f,
        .lr_min = 0.1f,
        .warmup_steps = 0,
        .schedule = KILN_LR_COSINE,
        .weight_decay = 0.0f,
        .beta1 = 0.9f,
        .beta2 = 0.999f,
        .eps = 1e-8f,
        .grad_clip = 1.0f,
        .val_fraction = 0.1f,
        .n_threads = 0,
    };
    return p;
}

/* Fisher-Yates from a stream seeded by (seed, salt) */
static void permute(int32_t * a, int32_t n, uint64_t seed, uint64_t salt) {
    uint64_t s = seed ^ (salt * 0xd1b54a32d192ed03ULL);
    for (int32_t i = 0; i < n; i++) a[i] = i;
    for (int32_t i = n - 1; i > 0; i--) {
        const int32_t j = (int32_t) (lora_mix(&s) % (uint64_t) (i + 1));
        const int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

void kiln_finetune_free(struct kiln_finetune * ft) {
    if (!ft) return;
    if (ft->m) for (int i = 0; i < kiln_lora_n_tensors(ft->lora); i++) free(ft->m[i]);
    if (ft->v) for (int i = 0; i < kiln_lora_n_tensors(ft->lora); i++) free(ft->v[i]);
    free(ft->m);
    free(ft->v);
    kiln_lora_free(ft->lora);
    free(ft->tokens);
    free(ft->targets);
    free(ft->order);
    free(ft);
}

struct kiln_finetune * kiln_finetune_new(struct kiln_model * model, const struct kiln_finetune_data * data,
                                         struct kiln_finetune_params p) {
    if (!model || !data || !data->tokens || !data->targets || data->n_seq < 1 || data->n_ctx < 1) {
        kiln_set_last_error("finetune: no model or no training data");
        return NULL;
    }
    if (p.n_batch < 1 || p.grad_accum < 1 || p.n_epochs < 1 || !(p.lr > 0.0f) || p.warmup_steps < 0 ||
        !(p.val_fraction >= 0.0f && p.val_fraction < 1.0f) || p.grad_clip < 0.0f || !(p.beta1 >= 0.0f && p.beta1 < 1.0f) ||
        !(p.beta2 >= 0.0f && p.beta2 < 1.0f) || !(p.eps > 0.0f) || p.weight_decay < 0.0f || p.lr_min < 0.0f) {
        kiln_set_last_error("finetune: bad parameters (batch, accumulation and epochs >= 1, lr > 0, 0 <= val_fraction < 1, betas in [0, 1))");
        return NULL;
    }
    struct kiln_finetune * ft = calloc(1, sizeof *ft);
    if (!ft) { kiln_set_last_error("finetune: out of memory"); return NULL; }
    ft->p = p;
    if (p.n_threads > 0) model->n_threads = p.n_threads;
    ft->lora = kiln_lora_new(model, p.lora);
    if (!ft->lora) { kiln_finetune_free(ft); return NULL; }
    const int32_t n = data->n_seq, T = data->n_ctx;
    ft->n_ctx = T;
    ft->n_val = (int32_t) floor((double) n * p.val_fraction);
    if (p.val_fraction > 0.0f && ft->n_val == 0 && n >= 2) ft->n_val = 1;
    ft->n_train = n - ft->n_val;
    const size_t sz = sizeof(int32_t) * (size_t) n * (size_t) T;
    ft->tokens = malloc(sz);
    ft->targets = malloc(sz);
    ft->order = malloc(sizeof(int32_t) * (size_t) n);
    const int nt = kiln_lora_n_tensors(ft->lora);
    ft->m = calloc((size_t) nt, sizeof(float *));
    ft->v = calloc((size_t) nt, sizeof(float *));
    if (!ft->tokens || !ft->targets || !ft->order || !ft->m || !ft->v) goto oom;
    for (int i = 0; i < nt; i++) {
        const size_t ne = (size_t) kiln_nelements(kiln_lora_tensor(ft->lora, i));
        ft->m[i] = calloc(ne, sizeof(float));
        ft->v[i] = calloc(ne, sizeof(float));
        if (!ft->m[i] || !ft->v[i]) goto oom;
    }
    /* the split: a seeded permutation of all sequences, the last n_val held out */
    permute(ft->order, n, p.lora.seed, 0x5eed);
    for (int32_t i = 0; i < n; i++) {
        memcpy(ft->tokens + (size_t) i * T, data->tokens + (size_t) ft->order[i] * T, sizeof(int32_t) * (size_t) T);
        memcpy(ft->targets + (size_t) i * T, data->targets + (size_t) ft->order[i] * T, sizeof(int32_t) * (size_t) T);
    }
    ft->order_epoch = -1;
    const int64_t per_step = (int64_t) p.n_batch * p.grad_accum;
    ft->steps_per_epoch = (ft->n_train + per_step - 1) / per_step;
    ft->n_steps = ft->steps_per_epoch * p.n_epochs;
    return ft;
oom:
    kiln_finetune_free(ft);
    kiln_set_last_error("finetune: out of memory");
    return NULL;
}

int64_t kiln_finetune_n_steps(const struct kiln_finetune * ft) { return ft ? ft->n_steps : 0; }
int64_t kiln_finetune_step_index(const struct kiln_finetune * ft) { return ft ? ft->step : 0; }
int32_t kiln_finetune_n_val(const struct kiln_finetune * ft) { return ft ? ft->n_val : 0; }
struct kiln_lora * kiln_finetune_lora(struct kiln_finetune * ft) { return ft ? ft->lora : NULL; }

/* learning rate of step s (0-based): linear warmup, then decay to lr * lr_min */
static double lr_at(const struct kiln_finetune_params * p, int64_t s, int64_t n_steps) {
    if (p->warmup_steps > 0 && s < p->warmup_steps) return p->lr * (double) (s + 1) / (double) p->warmup_steps;
    const int64_t span = n_steps - p->warmup_steps;
    const double t = span > 1 ? (double) (s - p->warmup_steps) / (double) (span - 1) : 1.0;
    const double lo = p->lr * p->lr_min;
    switch (p->schedule) {
        case KILN_LR_COSINE: return lo + (p->lr - lo) * 0.5 * (1.0 + cos(M_PI * t));
        case KILN_LR_LINEAR: return p->lr + (lo - p->lr) * t;
        default: return p->lr;
    }
}

enum kiln_status kiln_finetune_step(struct kiln_finetune * ft, struct kiln_finetune_progress * out) {
    if (!ft) { kiln_set_last_error("finetune_step: NULL trainer"); return KILN_STATUS_INVALID_ARG; }
    if (ft->step >= ft->n_steps) { kiln_set_last_error("finetune_step: all %lld steps are done", (long long) ft->n_steps); return KILN_STATUS_INVALID_ARG; }
    const struct kiln_finetune_params * p = &ft->p;
    const int32_t epoch = (int32_t) (ft->step / ft->steps_per_epoch);
    const int64_t in_epoch = ft->step % ft->steps_per_epoch;
    if (ft->order_epoch != epoch) {
        permute(ft->order, ft->n_train, p->lora.seed, (uint64_t) epoch + 1);
        ft->order_epoch = epoch;
    }
    struct kiln_lora * l = ft->lora;
    kiln_lora_zero_grad(l);
    const int32_t T = ft->n_ctx;
    int32_t * tk = malloc(sizeof(int32_t) * (size_t) p->n_batch * (size_t) T);
    int32_t * tg = malloc(sizeof(int32_t) * (size_t) p->n_batch * (size_t) T);
    if (!tk || !tg) {
        free(tk);
        free(tg);
        kiln_set_last_error("finetune_step: out of memory");
        return KILN_STATUS_ALLOC_FAILED;
    }
    double loss_sum = 0.0;
    int64_t n_scored = 0, n_tokens = 0;
    enum kiln_status st = KILN_STATUS_SUCCESS;
    for (int32_t a = 0; a < p->grad_accum && st == KILN_STATUS_SUCCESS; a++) {
        const int64_t first = (in_epoch * p->grad_accum + a) * p->n_batch;
        if (first >= ft->n_train) break;
        const int32_t ns = (int32_t) (first + p->n_batch <= ft->n_train ? p->n_batch : ft->n_train - first);
        for (int32_t s = 0; s < ns; s++) {
            const size_t src = (size_t) ft->order[first + s] * (size_t) T;
            memcpy(tk + (size_t) s * T, ft->tokens + src, sizeof(int32_t) * (size_t) T);
            memcpy(tg + (size_t) s * T, ft->targets + src, sizeof(int32_t) * (size_t) T);
        }
        double loss = 0.0;
        int64_t n = 0;
        /* dropout masks: a function of (seed, step, micro-batch), so a resumed run draws the same ones */
        kiln_lora_set_dropout_key(l, ft->step * p->grad_accum + a);
        st = kiln_lora_eval(l, tk, tg, ns, T, true, &loss, &n);
        loss_sum += loss * (double) n;
        n_scored += n;
        n_tokens += (int64_t) ns * T;
    }
    kiln_lora_set_dropout_key(l, -1);
    free(tk);
    free(tg);
    if (st != KILN_STATUS_SUCCESS) return st;
    /* the gradient of the mean loss over the step's scored tokens */
    const int nt = kiln_lora_n_tensors(l);
    const double inv = n_scored > 0 ? 1.0 / (double) n_scored : 0.0;
    double norm2 = 0.0;
    for (int i = 0; i < nt; i++) {
        float * g = kiln_lora_grad(l, i);
        const int64_t ne = kiln_nelements(kiln_lora_tensor(l, i));
        for (int64_t j = 0; j < ne; j++) {
            g[j] = (float) (g[j] * inv);
            norm2 += (double) g[j] * g[j];
        }
    }
    const double norm = sqrt(norm2);
    const double clip = p->grad_clip > 0.0f && norm > p->grad_clip ? p->grad_clip / norm : 1.0;
    const double lr = lr_at(p, ft->step, ft->n_steps);
    const int64_t t = ft->step + 1;
    const double bc1 = 1.0 - pow(p->beta1, (double) t), bc2 = 1.0 - pow(p->beta2, (double) t);
    for (int i = 0; i < nt; i++) {
        struct kiln_tensor * w = kiln_lora_tensor(l, i);
        float * x = w->data, * g = kiln_lora_grad(l, i), * m = ft->m[i], * v = ft->v[i];
        const int64_t ne = kiln_nelements(w);
        for (int64_t j = 0; j < ne; j++) {
            const float gj = (float) (g[j] * clip);
            m[j] = p->beta1 * m[j] + (1.0f - p->beta1) * gj;
            v[j] = p->beta2 * v[j] + (1.0f - p->beta2) * gj * gj;
            const double mh = m[j] / bc1, vh = v[j] / bc2;
            x[j] = (float) (x[j] - lr * (mh / (sqrt(vh) + p->eps) + p->weight_decay * x[j]));
        }
    }
    ft->step++;
    if (out) {
        out->step = ft->step;
        out->n_steps = ft->n_steps;
        out->epoch = epoch;
        out->loss = n_scored > 0 ? loss_sum / (double) n_scored : 0.0;
        out->lr = lr;
        out->grad_norm = norm;
        out->tokens = n_tokens;
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_finetune_validate(struct kiln_finetune * ft, double * loss) {
    if (!ft || !loss) { kiln_set_last_error("finetune_validate: NULL argument"); return KILN_STATUS_INVALID_ARG; }
    *loss = 0.0;
    const int32_t first = ft->n_val > 0 ? ft->n_train : 0, n = ft->n_val > 0 ? ft->n_val : ft->n_train;
    const int32_t T = ft->n_ctx, nb = ft->p.n_batch;
    double sum = 0.0;
    int64_t n_scored = 0;
    for (int32_t s = 0; s < n; s += nb) {
        const int32_t ns = s + nb <= n ? nb : n - s;
        const size_t off = (size_t) (first + s) * (size_t) T;
        double l = 0.0;
        int64_t k = 0;
        enum kiln_status st = kiln_lora_eval(ft->lora, ft->tokens + off, ft->targets + off, ns, T, false, &l, &k);
        if (st != KILN_STATUS_SUCCESS) return st;
        sum += l * (double) k;
        n_scored += k;
    }
    *loss = n_scored > 0 ? sum / (double) n_scored : 0.0;
    return KILN_STATUS_SUCCESS;
}

/* ---- checkpoints: "KLNC", version, step, n_steps, n_tensors, then per
 * tensor its element count and the values, m and v (f32, little-endian as
 * the host); the shape of the run must match the trainer's */

#define CKPT_MAGIC 0x434e4c4bu /* "KLNC" */
#define CKPT_VERSION 1u

enum kiln_status kiln_finetune_save_checkpoint(const struct kiln_finetune * ft, const char * path) {
    if (!ft || !path) { kiln_set_last_error("finetune_save_checkpoint: NULL argument"); return KILN_STATUS_INVALID_ARG; }
    FILE * f = fopen(path, "wb");
    if (!f) { kiln_set_last_error("finetune_save_checkpoint: cannot write '%s'", path); return KILN_STATUS_FAILED; }
    const uint32_t head[3] = { CKPT_MAGIC, CKPT_VERSION, (uint32_t) kiln_lora_n_tensors(ft->lora) };
    const int64_t steps[2] = { ft->step, ft->n_steps };
    bool ok = fwrite(head, sizeof head, 1, f) == 1 && fwrite(steps, sizeof steps, 1, f) == 1;
    for (int i = 0; ok && i < (int) head[2]; i++) {
        const struct kiln_tensor * t = kiln_lora_tensor(ft->lora, i);
        const int64_t ne = kiln_nelements(t);
        ok = fwrite(&ne, sizeof ne, 1, f) == 1 && fwrite(t->data, sizeof(float), (size_t) ne, f) == (size_t) ne &&
             fwrite(ft->m[i], sizeof(float), (size_t) ne, f) == (size_t) ne && fwrite(ft->v[i], sizeof(float), (size_t) ne, f) == (size_t) ne;
    }
    ok = fclose(f) == 0 && ok;
    if (!ok) { kiln_set_last_error("finetune_save_checkpoint: writing '%s' failed", path); return KILN_STATUS_FAILED; }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_finetune_load_checkpoint(struct kiln_finetune * ft, const char * path) {
    if (!ft || !path) { kiln_set_last_error("finetune_load_checkpoint: NULL argument"); return KILN_STATUS_INVALID_ARG; }
    FILE * f = fopen(path, "rb");
    if (!f) { kiln_set_last_error("finetune_load_checkpoint: cannot open '%s'", path); return KILN_STATUS_FAILED; }
    uint32_t head[3];
    int64_t steps[2];
    const int nt = kiln_lora_n_tensors(ft->lora);
    enum kiln_status st = KILN_STATUS_INVALID_ARG;
    if (fread(head, sizeof head, 1, f) != 1 || head[0] != CKPT_MAGIC || head[1] != CKPT_VERSION) {
        kiln_set_last_error("finetune_load_checkpoint: '%s' is not a Kiln fine-tuning checkpoint", path);
    } else if (head[2] != (uint32_t) nt || fread(steps, sizeof steps, 1, f) != 1 || steps[1] != ft->n_steps ||
               steps[0] < 0 || steps[0] > steps[1]) {
        kiln_set_last_error("finetune_load_checkpoint: '%s' belongs to another run (adapter tensors or step count differ)", path);
    } else {
        /* read into scratch first: a truncated file leaves the trainer as it was */
        float ** tmp = calloc((size_t) nt * 3, sizeof(float *));
        bool ok = tmp != NULL;
        for (int i = 0; ok && i < nt; i++) {
            const int64_t ne = kiln_nelements(kiln_lora_tensor(ft->lora, i));
            int64_t fne = 0;
            ok = fread(&fne, sizeof fne, 1, f) == 1 && fne == ne;
            for (int k = 0; ok && k < 3; k++) {
                tmp[3 * i + k] = malloc(sizeof(float) * (size_t) ne);
                ok = tmp[3 * i + k] && fread(tmp[3 * i + k], sizeof(float), (size_t) ne, f) == (size_t) ne;
            }
        }
        if (ok) {
            for (int i = 0; i < nt; i++) {
                struct kiln_tensor * t = kiln_lora_tensor(ft->lora, i);
                memcpy(t->data, tmp[3 * i], kiln_nbytes(t));
                memcpy(ft->m[i], tmp[3 * i + 1], kiln_nbytes(t));
                memcpy(ft->v[i], tmp[3 * i + 2], kiln_nbytes(t));
            }
            ft->step = steps[0];
            st = KILN_STATUS_SUCCESS;
        } else {
            kiln_set_last_error("finetune_load_checkpoint: '%s' is truncated or does not match the adapter", path);
        }
        if (tmp) for (int i = 0; i < 3 * nt; i++) free(tmp[i]);
        free(tmp);
    }
    fclose(f);
    return st;
}
