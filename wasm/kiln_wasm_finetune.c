/*
 * kiln_wasm_finetune.c — LoRA fine-tuning of a loaded decoder from JS
 * (model.finetune(), js/src/finetune.ts; the C side is src/models/finetune*.c).
 *
 * kw_ft_new builds a training model over the parsed model's weights as they
 * lie in wasm memory (no copy, never repacked: the model entry's `views`
 * count is raised so that no generator rearranges those weights later), the
 * training data from text or chat JSONL, and the trainer. JS then drives one
 * optimizer step per kw_ft_step call, reading kw_ft_info after each, which is
 * where it checks for abort and posts progress. kw_ft_adapter writes the
 * adapter (llama.cpp's GGUF LoRA layout) for JS to copy out.
 *
 * Failures are KW_E_* codes with a message in kw_last_error(); nothing aborts.
 */
#include "kiln_wasm_internal.h"
#include "kiln-llama.h"
#include "kiln-opt.h"

#include <stdlib.h>
#include <string.h>

int kw_n_threads(void);
struct kiln_threadpool * kw_threadpool(void);
volatile int * kw_abort_flag(void);

struct kw_ft {
    struct kiln_model * model;
    struct kiln_finetune * ft;
    /* what JS reads (8 doubles at kw_ft_info): step, steps, epoch, loss, lr, grad_norm, tokens, val_loss */
    double info[8];
    void * adapter;
    size_t adapter_size;
};

static void ft_release(void * p) {
    struct kw_ft * f = p;
    if (!f) return;
    kiln_finetune_free(f->ft);
    kiln_model_free(f->model);
    free(f->adapter);
    free(f);
}

static struct kw_ft * get(int h, const char * fn) { return (struct kw_ft *) kw_object(h, KW_KIND_FINETUNE, fn); }

/* text: len bytes of plain text (chat = 0) or chat JSONL (chat = 1); targets: "q,v"...; dropout: LoRA dropout (0: off) */
KW_EXPORT int kw_ft_new(int model_handle, const char * text, int len, int chat, int rank, float alpha, const char * targets,
                        int n_ctx, int batch, int epochs, float lr, double seed, float val_fraction, float dropout) {
    const int ms = kw_slot(model_handle, KW_KIND_MODEL, "finetune");
    if (ms < 0) return ms;
    struct kw_entry * me = kw_entry_slot(ms);
    if (!me->gguf || !me->mctx) return kw_fail(KW_E_INVALID, "finetune: the model is not parsed");
    if (!text || len < 0) return kw_fail(KW_E_INVALID, "finetune: no data");
    struct kiln_finetune_params p = kiln_finetune_default_params();
    p.lora.rank = rank;
    p.lora.alpha = alpha;
    p.lora.seed = (uint64_t) seed;
    p.lora.dropout = dropout;
    p.lora.targets = kiln_lora_parse_targets(targets ? targets : "q,v");
    if (!p.lora.targets) return kw_fail_kiln(KW_E_INVALID, "finetune");
    p.n_ctx = n_ctx;
    p.n_batch = batch;
    p.n_epochs = epochs;
    p.lr = lr;
    p.val_fraction = val_fraction;
    p.n_threads = kw_n_threads() > 0 ? kw_n_threads() : 1;
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_ctx = 8; /* training keeps no KV cache */
    mp.n_threads = p.n_threads;
    mp.threadpool = kw_threadpool();
    mp.repack_in_place = false;
    kiln_clear_error();
    struct kiln_model * m = kiln_model_load_from_gguf(me->gguf, me->mctx, mp);
    if (!m) return kw_fail_kiln(KW_E_FORMAT, "finetune: model");
    if (n_ctx < 1 || n_ctx > kiln_model_n_ctx_train(m)) {
        const int32_t t = kiln_model_n_ctx_train(m);
        kiln_model_free(m);
        return kw_fail(KW_E_INVALID, "finetune: ctx %d out of range (1..%d, the model's training context)", n_ctx, t);
    }
#if KW_THREADS
    kiln_model_set_abort_flag(m, kw_abort_flag());
#endif
    struct kiln_finetune_data * d = chat ? kiln_finetune_data_from_chat(m, text, (size_t) len, n_ctx)
                                         : kiln_finetune_data_from_text(m, text, (size_t) len, n_ctx);
    if (!d) { kiln_model_free(m); return kw_fail_kiln(KW_E_INVALID, "finetune: data"); }
    struct kiln_finetune * ft = kiln_finetune_new(m, d, p);
    kiln_finetune_data_free(d);
    if (!ft) { kiln_model_free(m); return kw_fail_kiln(KW_E_INVALID, "finetune"); }
    struct kw_ft * f = calloc(1, sizeof *f);
    if (!f) { kiln_finetune_free(ft); kiln_model_free(m); return kw_fail(KW_E_NOMEM, "finetune: out of memory"); }
    f->model = m;
    f->ft = ft;
    f->info[1] = (double) kiln_finetune_n_steps(ft);
    me->views++; /* the training model reads these weights: generators must not repack them */
    const int h = kw_object_new(KW_KIND_FINETUNE, f, ft_release);
    if (h < 0) return h;
    kw_entry_add_dep(kw_slot(h, KW_KIND_FINETUNE, "finetune"), ms);
    return h;
}

KW_EXPORT double * kw_ft_info(int h) { struct kw_ft * f = get(h, "ft_info"); return f ? f->info : NULL; }

/* one optimizer step; 1 when all steps are done, 0 after a step */
KW_EXPORT int kw_ft_step(int h) {
    struct kw_ft * f = get(h, "ft_step");
    if (!f) return KW_E_HANDLE;
    if (kiln_finetune_step_index(f->ft) >= kiln_finetune_n_steps(f->ft)) return 1;
    struct kiln_finetune_progress pr;
    kiln_clear_error();
    const enum kiln_status st = kiln_finetune_step(f->ft, &pr);
    if (st != KILN_STATUS_SUCCESS) return kw_fail_status(st, "finetune step");
    f->info[0] = (double) pr.step;
    f->info[1] = (double) pr.n_steps;
    f->info[2] = pr.epoch;
    f->info[3] = pr.loss;
    f->info[4] = pr.lr;
    f->info[5] = pr.grad_norm;
    f->info[6] = (double) pr.tokens;
    return 0;
}

/* validation loss into info[7] */
KW_EXPORT int kw_ft_validate(int h) {
    struct kw_ft * f = get(h, "ft_validate");
    if (!f) return KW_E_HANDLE;
    kiln_clear_error();
    const enum kiln_status st = kiln_finetune_validate(f->ft, &f->info[7]);
    return st == KILN_STATUS_SUCCESS ? 0 : kw_fail_status(st, "finetune validation");
}

/* the adapter's GGUF bytes at kw_ft_adapter_ptr; returns the size */
KW_EXPORT int kw_ft_adapter(int h) {
    struct kw_ft * f = get(h, "ft_adapter");
    if (!f) return KW_E_HANDLE;
    free(f->adapter);
    f->adapter = kiln_lora_save_to_buffer(kiln_finetune_lora(f->ft), &f->adapter_size);
    if (!f->adapter) return kw_fail_kiln(KW_E_NOMEM, "finetune: adapter");
    return (int) f->adapter_size;
}

KW_EXPORT void * kw_ft_adapter_ptr(int h) { struct kw_ft * f = get(h, "ft_adapter_ptr"); return f ? f->adapter : NULL; }

KW_EXPORT int kw_ft_free(int h) { return kw_object_free(h, KW_KIND_FINETUNE, "ft_free"); }
