/*
 * kiln-finetune — LoRA fine-tuning of a GGUF decoder; writes an adapter that
 * llama.cpp loads (--lora in its tools, lora adapters in node-llama-cpp).
 *
 *   kiln-finetune -m BASE.gguf --data FILE [--chat] -o ADAPTER.gguf
 *       [--lora-rank R] [--lora-alpha A] [--lora-targets q,v] [--lora-dropout P]
 *       [--ctx N] [--batch B] [--grad-accum K] [--epochs E] [--lr LR]
 *       [--lr-min F] [--warmup S] [--schedule cosine|linear|constant]
 *       [--weight-decay W] [--grad-clip C] [--val F] [--seed S] [--threads T]
 *       [--checkpoint FILE [--checkpoint-every S]] [--resume FILE]
 *       [--stop-after S] [--json]
 *
 * Prints the training loss of every step and the validation loss before
 * training and after every epoch (one JSON object per line with --json).
 * --data: plain text (one document per line) or, with --chat, JSONL
 * conversations (see src/models/finetune_data.c for the template).
 * --stop-after S ends after step S (with --checkpoint, to resume later).
 */
#include "kiln-llama.h"
#include "kiln-opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(void) {
    fprintf(stderr,
            "usage: kiln-finetune -m BASE.gguf --data FILE [--chat] -o ADAPTER.gguf [--lora-rank R] [--lora-alpha A]\n"
            "         [--lora-targets q,k,v,o,gate,up,down|all] [--lora-dropout P] [--ctx N] [--batch B] [--grad-accum K] [--epochs E]\n"
            "         [--lr LR] [--lr-min F] [--warmup S] [--schedule cosine|linear|constant] [--weight-decay W]\n"
            "         [--grad-clip C] [--val F] [--seed S] [--threads T] [--checkpoint FILE] [--checkpoint-every S]\n"
            "         [--resume FILE] [--stop-after S] [--json]\n"
            "  --lora-targets: on mixture-of-experts models (qwen2moe, qwen3moe) gate, up, down adapt every routed\n"
            "         expert (one A/B pair per expert, 3-D tensors as llama.cpp applies them) and the shared expert;\n"
            "         the routers are not targets\n");
}

static char * read_all(const char * path, size_t * len) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char * b = malloc(cap);
    for (;;) {
        if (!b) { fclose(f); return NULL; }
        n += fread(b + n, 1, cap - n, f);
        if (n < cap) break;
        cap *= 2;
        char * nb = realloc(b, cap);
        if (!nb) { free(b); fclose(f); return NULL; }
        b = nb;
    }
    fclose(f);
    *len = n;
    return b;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char ** argv) {
    const char * model_path = NULL, * data_path = NULL, * out = NULL, * ckpt = NULL, * resume = NULL;
    bool chat = false, json = false;
    int64_t ckpt_every = 0, stop_after = -1;
    struct kiln_finetune_params p = kiln_finetune_default_params();
    p.lora.seed = 42;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && (i++, true))
        if (ARG("-m") || ARG("--model")) model_path = v;
        else if (ARG("--data")) data_path = v;
        else if (ARG("-o") || ARG("--output")) out = v;
        else if (strcmp(a, "--chat") == 0) chat = true;
        else if (strcmp(a, "--json") == 0) json = true;
        else if (ARG("--lora-rank")) p.lora.rank = atoi(v);
        else if (ARG("--lora-alpha")) p.lora.alpha = (float) atof(v);
        else if (ARG("--lora-dropout")) p.lora.dropout = (float) atof(v);
        else if (ARG("--lora-targets")) {
            p.lora.targets = kiln_lora_parse_targets(v);
            if (!p.lora.targets) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); return 1; }
        }
        else if (ARG("--ctx")) p.n_ctx = atoi(v);
        else if (ARG("--batch")) p.n_batch = atoi(v);
        else if (ARG("--grad-accum")) p.grad_accum = atoi(v);
        else if (ARG("--epochs")) p.n_epochs = atoi(v);
        else if (ARG("--lr")) p.lr = (float) atof(v);
        else if (ARG("--lr-min")) p.lr_min = (float) atof(v);
        else if (ARG("--warmup")) p.warmup_steps = atoi(v);
        else if (ARG("--schedule")) {
            if (strcmp(v, "cosine") == 0) p.schedule = KILN_LR_COSINE;
            else if (strcmp(v, "linear") == 0) p.schedule = KILN_LR_LINEAR;
            else if (strcmp(v, "constant") == 0) p.schedule = KILN_LR_CONSTANT;
            else { fprintf(stderr, "kiln-finetune: unknown schedule '%s'\n", v); return 1; }
        }
        else if (ARG("--weight-decay")) p.weight_decay = (float) atof(v);
        else if (ARG("--grad-clip")) p.grad_clip = (float) atof(v);
        else if (ARG("--val")) p.val_fraction = (float) atof(v);
        else if (ARG("--seed")) p.lora.seed = strtoull(v, NULL, 10);
        else if (ARG("--threads")) p.n_threads = atoi(v);
        else if (ARG("--checkpoint")) ckpt = v;
        else if (ARG("--checkpoint-every")) ckpt_every = atoll(v);
        else if (ARG("--resume")) resume = v;
        else if (ARG("--stop-after")) stop_after = atoll(v);
        else { usage(); return 1; }
#undef ARG
    }
    if (!model_path || !data_path || !out) { usage(); return 1; }
    size_t len = 0;
    char * text = read_all(data_path, &len);
    if (!text) { fprintf(stderr, "kiln-finetune: cannot read '%s'\n", data_path); return 1; }
    struct kiln_model * m = kiln_model_load_for_training(model_path, p.n_threads);
    if (!m) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); free(text); return 1; }
    if (p.n_ctx < 1 || p.n_ctx > kiln_model_n_ctx_train(m)) {
        fprintf(stderr, "kiln-finetune: --ctx %d out of range (1..%d, the model's training context)\n", p.n_ctx, kiln_model_n_ctx_train(m));
        kiln_model_free(m);
        free(text);
        return 1;
    }
    struct kiln_finetune_data * d = chat ? kiln_finetune_data_from_chat(m, text, len, p.n_ctx)
                                         : kiln_finetune_data_from_text(m, text, len, p.n_ctx);
    free(text);
    if (!d) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); kiln_model_free(m); return 1; }
    struct kiln_finetune * ft = kiln_finetune_new(m, d, p);
    const int32_t n_seq = d->n_seq;
    kiln_finetune_data_free(d);
    int rc = 1;
    if (!ft) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); goto done; }
    if (resume && kiln_finetune_load_checkpoint(ft, resume) != KILN_STATUS_SUCCESS) {
        fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error());
        goto done;
    }
    const int64_t n_steps = kiln_finetune_n_steps(ft);
    if (json) {
        printf("{\"event\":\"start\",\"sequences\":%d,\"val_sequences\":%d,\"ctx\":%d,\"steps\":%lld,\"params\":%lld,\"start_step\":%lld}\n",
               n_seq, kiln_finetune_n_val(ft), p.n_ctx, (long long) n_steps, (long long) kiln_lora_n_params(kiln_finetune_lora(ft)),
               (long long) kiln_finetune_step_index(ft));
    } else {
        printf("%d sequences of %d tokens (%d for validation), %lld steps, %lld LoRA parameters\n", n_seq, p.n_ctx,
               kiln_finetune_n_val(ft), (long long) n_steps, (long long) kiln_lora_n_params(kiln_finetune_lora(ft)));
    }
    double vl;
    if (kiln_finetune_validate(ft, &vl) != KILN_STATUS_SUCCESS) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); goto done; }
    if (json) printf("{\"event\":\"val\",\"step\":%lld,\"val_loss\":%.6f}\n", (long long) kiln_finetune_step_index(ft), vl);
    else printf("step %lld: validation loss %.4f\n", (long long) kiln_finetune_step_index(ft), vl);
    fflush(stdout);
    const double t0 = now_s();
    int64_t tokens = 0;
    while (kiln_finetune_step_index(ft) < n_steps && (stop_after < 0 || kiln_finetune_step_index(ft) < stop_after)) {
        struct kiln_finetune_progress pr;
        if (kiln_finetune_step(ft, &pr) != KILN_STATUS_SUCCESS) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); goto done; }
        tokens += pr.tokens;
        const double el = now_s() - t0;
        if (json) {
            printf("{\"event\":\"step\",\"step\":%lld,\"steps\":%lld,\"epoch\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6g,\"tokens_per_s\":%.1f}\n",
                   (long long) pr.step, (long long) pr.n_steps, pr.epoch, pr.loss, pr.lr, pr.grad_norm, tokens / (el > 0 ? el : 1e-9));
        } else {
            printf("step %lld/%lld epoch %d: loss %.4f lr %.3g grad-norm %.3g (%.0f tokens/s)\n", (long long) pr.step,
                   (long long) pr.n_steps, pr.epoch, pr.loss, pr.lr, pr.grad_norm, tokens / (el > 0 ? el : 1e-9));
        }
        const bool epoch_end = pr.step % (n_steps / p.n_epochs) == 0 || pr.step == n_steps;
        if (epoch_end) {
            if (kiln_finetune_validate(ft, &vl) != KILN_STATUS_SUCCESS) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); goto done; }
            if (json) printf("{\"event\":\"val\",\"step\":%lld,\"val_loss\":%.6f}\n", (long long) pr.step, vl);
            else printf("step %lld: validation loss %.4f\n", (long long) pr.step, vl);
        }
        if (ckpt && ((ckpt_every > 0 && pr.step % ckpt_every == 0) || pr.step == stop_after)) {
            if (kiln_finetune_save_checkpoint(ft, ckpt) != KILN_STATUS_SUCCESS) { fprintf(stderr, "kiln-finetune: %s\n", kiln_last_error()); goto done; }
        }
        fflush(stdout);
    }
    if (kiln_lora_save(kiln_finetune_lora(ft), out) != KILN_STATUS_SUCCESS) {
        fprintf(stderr, "kiln-finetune: writing '%s': %s\n", out, kiln_last_error());
        goto done;
    }
    if (json) printf("{\"event\":\"done\",\"adapter\":\"%s\",\"steps\":%lld}\n", out, (long long) kiln_finetune_step_index(ft));
    else printf("adapter written to %s\n", out);
    rc = 0;
done:
    kiln_finetune_free(ft);
    kiln_model_free(m);
    return rc;
}
