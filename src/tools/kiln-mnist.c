/*
 * kiln-mnist — train and evaluate the (Fashion-)MNIST example models.
 *
 *   kiln-mnist train --data DIR --model fc|cnn --epochs N --out model.gguf
 *                    [--batch 100] [--lr 1e-3] [--lr-decay 1] [--threads N] [--seed S]
 *                    [--subset N] [--val-split 0.05]
 *   kiln-mnist eval  --data DIR --model model.gguf [--threads N]
 *
 * DIR holds the IDX files (gzip-compressed or not):
 * train-images-idx3-ubyte(.gz), train-labels-idx1-ubyte(.gz), t10k-…
 */
#include "kiln.h"
#include "kiln-mnist.h"
#include "kiln-opt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* reads a whole file through zlib (gzip-compressed or plain: gzread
 * handles both) into a malloc'd buffer */
static uint8_t * read_gz(const char * dir, const char * name, size_t * size) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        f = gzopen(path, "rb");
    }
    if (!f) { fprintf(stderr, "kiln-mnist: cannot open %s/%s(.gz)\n", dir, name); return NULL; }
    uint8_t * buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : (1 << 22);
            uint8_t * nb = (uint8_t *) realloc(buf, cap);
            if (!nb) { free(buf); gzclose(f); return NULL; }
            buf = nb;
        }
        const int r = gzread(f, buf + n, (unsigned)(cap - n));
        if (r <= 0) break;
        n += (size_t) r;
    }
    gzclose(f);
    *size = n;
    return buf;
}

/* images scaled to [0, 1]; labels one-hot */
static struct kiln_opt_dataset * load_split(const char * dir, const char * prefix, int64_t limit) {
    char name[64];
    size_t ni = 0, nl = 0;
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    uint8_t * bi = read_gz(dir, name, &ni);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    uint8_t * bl = bi ? read_gz(dir, name, &nl) : NULL;
    struct kiln_opt_dataset * ds = NULL;
    int64_t di[3], dl[3];
    const uint8_t * img, * lab;
    if (bi && bl) {
        if (!kiln_mnist_parse_idx(bi, ni, 3, di, &img) || !kiln_mnist_parse_idx(bl, nl, 1, dl, &lab)) {
            fprintf(stderr, "kiln-mnist: %s: %s\n", prefix, kiln_last_error());
        } else if (di[0] != dl[0] || di[1] != KILN_MNIST_NX || di[2] != KILN_MNIST_NX) {
            fprintf(stderr, "kiln-mnist: %s: images and labels do not match\n", prefix);
        } else {
            ds = kiln_mnist_dataset(img, lab, limit > 0 && limit < di[0] ? limit : di[0]);
            if (!ds) fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error());
        }
    }
    free(bi);
    free(bl);
    return ds;
}

struct lr_ud { float lr; };
static struct kiln_opt_optimizer_params opt_pars(void * ud) {
    struct kiln_opt_optimizer_params p = kiln_opt_get_default_optimizer_params(NULL);
    p.adamw.alpha = ((struct lr_ud *) ud)->lr;
    p.sgd.alpha = p.adamw.alpha;
    return p;
}

static int evaluate(struct kiln_mnist_model * m, struct kiln_opt_dataset * test, int nbatch, int threads, double * acc_out) {
    if (!kiln_mnist_model_build(m, nbatch, false)) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); return 1; }
    struct kiln_opt_params op = kiln_opt_default_params(m->ctx_compute, m->images, m->logits, KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.n_threads = threads;
    struct kiln_opt_context * o = kiln_opt_init(op);
    if (!o) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); return 1; }
    struct kiln_opt_result * r = kiln_opt_result_init();
    const int64_t t0 = kiln_time_us();
    enum kiln_status st = kiln_opt_epoch(o, test, NULL, r, 0, NULL, NULL, NULL);
    if (st != KILN_STATUS_SUCCESS) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); kiln_opt_free(o); kiln_opt_result_free(r); return 1; }
    double loss, lu, acc, au;
    kiln_opt_result_loss(r, &loss, &lu);
    kiln_opt_result_accuracy(r, &acc, &au);
    const double dt = (kiln_time_us() - t0) / 1e6;
    printf("test: loss %.5f±%.5f accuracy %.2f±%.2f%% (%lld images, %.0f images/s)\n", loss, lu, acc * 100, au * 100,
           (long long) kiln_opt_result_ndata(r), kiln_opt_result_ndata(r) / dt);
    if (acc_out) *acc_out = acc;
    kiln_opt_result_free(r);
    kiln_opt_free(o);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
        "usage: kiln-mnist train --data DIR --model fc|cnn [--epochs N] [--out model.gguf] [--batch B] [--lr LR]\n"
        "                        [--lr-decay D] [--threads N] [--seed S] [--subset N] [--val-split F]\n"
        "       kiln-mnist eval  --data DIR --model model.gguf [--threads N] [--batch B]\n");
}

int main(int argc, char ** argv) {
    if (argc < 2) { usage(); return 1; }
    const char * cmd = argv[1];
    const char * data = "/usr/share/datasets/fashion-mnist";
    const char * model = NULL, * out = NULL;
    int epochs = 1, nbatch = 100, threads = 2;
    float lr = 1e-3f, val_split = 0.05f, lr_decay = 1.0f;
    uint64_t seed = 1;
    int64_t subset = 0;
    for (int i = 2; i < argc; i++) {
        const char * a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { usage(); return 1; }
        if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--epochs")) epochs = atoi(v);
        else if (!strcmp(a, "--batch")) nbatch = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--lr")) lr = (float) atof(v);
        else if (!strcmp(a, "--lr-decay")) lr_decay = (float) atof(v);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--subset")) subset = atoll(v);
        else if (!strcmp(a, "--val-split")) val_split = (float) atof(v);
        else { usage(); return 1; }
        i++;
    }
    if (!model || nbatch < 1 || epochs < 0 || threads < 1 || !(lr_decay > 0.0f && lr_decay <= 1.0f)) { usage(); return 1; }

    if (!strcmp(cmd, "eval")) {
        struct kiln_mnist_model * m = kiln_mnist_model_load(model);
        if (!m) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); return 1; }
        struct kiln_opt_dataset * test = load_split(data, "t10k", subset);
        if (!test) { kiln_mnist_model_free(m); return 1; }
        const int rc = evaluate(m, test, nbatch, threads, NULL);
        kiln_opt_dataset_free(test);
        kiln_mnist_model_free(m);
        return rc;
    }
    if (strcmp(cmd, "train") != 0) { usage(); return 1; }

    const int arch = kiln_mnist_arch_from_name(model);
    if (arch < 0) { fprintf(stderr, "kiln-mnist: unknown model '%s' (fc or cnn)\n", model); return 1; }
    struct kiln_opt_dataset * train = load_split(data, "train", subset);
    struct kiln_opt_dataset * test = load_split(data, "t10k", subset > 0 ? subset / 6 : 0);
    if (!train || !test) return 1;
    struct kiln_mnist_model * m = kiln_mnist_model_init_random((enum kiln_mnist_arch) arch, seed);
    if (!m || !kiln_mnist_model_build(m, nbatch, true)) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); return 1; }
    struct lr_ud ud = { lr };
    struct kiln_opt_params op = kiln_opt_default_params(m->ctx_compute, m->images, m->logits, KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.n_threads = threads;
    op.get_opt_pars = opt_pars;
    op.get_opt_pars_ud = &ud;
    struct kiln_opt_context * o = kiln_opt_init(op);
    if (!o) { fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error()); return 1; }
    const int64_t ndata = kiln_opt_dataset_ndata(train);
    int64_t split = (int64_t)((1.0f - val_split) * (float) ndata);
    split -= split % nbatch;
    struct kiln_opt_result * rt = kiln_opt_result_init(), * rv = kiln_opt_result_init();
    const int64_t t0 = kiln_time_us();
    for (int e = 0; e < epochs; e++) {
        kiln_opt_dataset_shuffle(train, seed + (uint64_t) e, split);
        kiln_opt_result_reset(rt);
        kiln_opt_result_reset(rv);
        fprintf(stderr, "epoch %d/%d (lr %.3g)\n", e + 1, epochs, ud.lr);
        if (kiln_opt_epoch(o, train, rt, rv, split, kiln_opt_epoch_callback_progress_bar,
                           kiln_opt_epoch_callback_progress_bar, NULL) != KILN_STATUS_SUCCESS) {
            fprintf(stderr, "kiln-mnist: %s\n", kiln_last_error());
            return 1;
        }
        ud.lr *= lr_decay; /* per epoch: small late steps settle the weights */
    }
    const double dt = (kiln_time_us() - t0) / 1e6;
    fprintf(stderr, "trained %d epochs in %.1f s (%.0f images/s)\n", epochs, dt, epochs * (double) split / (dt > 0 ? dt : 1));
    kiln_opt_free(o);
    kiln_opt_result_free(rt);
    kiln_opt_result_free(rv);
    double acc = 0;
    const int rc = evaluate(m, test, nbatch, threads, &acc);
    if (rc == 0 && out) {
        if (!kiln_mnist_model_save(m, out)) { fprintf(stderr, "kiln-mnist: cannot save %s: %s\n", out, kiln_last_error()); return 1; }
        fprintf(stderr, "saved %s\n", out);
    }
    kiln_mnist_model_free(m);
    kiln_opt_dataset_free(train);
    kiln_opt_dataset_free(test);
    return rc;
}
