/*
 * kiln_wasm_train.c — training the (Fashion-)MNIST example models from JS.
 *
 * A training session (kw_train_new) owns a model, its optimizer context and
 * the batch size; training, evaluation and classification all run through
 * that one optimizer context (forward-only graphs are prefixes of the
 * optimizer graph), so evaluating mid-training keeps the AdamW moments.
 * Datasets (kw_train_dataset) hold images scaled to [0, 1] and one-hot
 * labels. JS drives the loop one batch at a time, which is where it checks
 * for abort/pause and posts progress.
 *
 * Handles here are their own table (kind bits 0x2 << 24 for sessions,
 * 0x3 << 24 for datasets, a generation above the slot), so a freed or foreign
 * handle is refused with KW_E_HANDLE. Nothing aborts: every failure is a
 * KW_E_* code with a message in kw_last_error().
 */
#include "kiln_wasm_internal.h"
#include "kiln-opt.h"
#include "kiln-mnist.h"
#include "kiln-gguf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct kiln_threadpool * kw_threadpool(void);
int kw_init(int n_threads);
int kw_n_threads(void);

#define KT_MAX 64
#define KT_SESSION 2
#define KT_DATASET 3

struct kt_session {
    struct kiln_mnist_model * model;
    struct kiln_opt_context * opt;
    struct kiln_opt_result * result;
    int nbatch;
    float lr;
    double loss, accuracy; /* of the last step / evaluation */
    double n_eval;
    uint8_t * gguf;
};

struct kt_slot { int kind; int gen; void * p; };
static struct kt_slot g_slots[KT_MAX];

static int kt_new(int kind, void * p) {
    for (int i = 0; i < KT_MAX; i++) {
        if (!g_slots[i].kind) {
            g_slots[i].kind = kind;
            g_slots[i].gen = (g_slots[i].gen + 1) & 0x3ff;
            g_slots[i].p = p;
            return (kind << 24) | (g_slots[i].gen << 8) | (i + 1);
        }
    }
    return kw_fail(KW_E_NOMEM, "train: too many live sessions/datasets (%d)", KT_MAX);
}

static void * kt_get(int h, int kind, const char * fn) {
    const int i = (h & 0xff) - 1;
    if (h <= 0 || (h >> 24) != kind || i < 0 || i >= KT_MAX || g_slots[i].kind != kind || g_slots[i].gen != ((h >> 8) & 0x3ff)) {
        kw_fail(KW_E_HANDLE, "%s: not a live %s handle", fn, kind == KT_SESSION ? "training session" : "dataset");
        return NULL;
    }
    return g_slots[i].p;
}

static void kt_drop(int h) { g_slots[(h & 0xff) - 1].kind = 0; g_slots[(h & 0xff) - 1].p = NULL; }

}

/* ---------------------------------------------------------- datasets */

/* images: n*784 bytes, labels: n bytes in 0..9 (both copied) */
KW_EXPORT int kw_train_dataset(const uint8_t * images, const uint8_t * labels, int n) {
    if (!images || !labels) return kw_fail(KW_E_INVALID, "train_dataset: images or labels missing");
    if (n < 1) return kw_fail(KW_E_INVALID, "train_dataset: %d images", n);
    for (int i = 0; i < n; i++) {
        if (labels[i] >= KILN_MNIST_NCLASSES) return kw_fail(KW_E_INVALID, "train_dataset: label %d of image %d is not a class 0..9", labels[i], i);
    }
    kiln_clear_error();
    struct kiln_opt_dataset * ds = kiln_mnist_dataset(images, labels, n);
    if (!ds) return kw_fail_kiln(KW_E_NOMEM, "train_dataset");
    const int h = kt_new(KT_DATASET, ds);
    if (h < 0) kiln_opt_dataset_free(ds);
    return h;
}

KW_EXPORT int kw_train_dataset_free(int h) {
    struct kiln_opt_dataset * ds = (struct kiln_opt_dataset *) kt_get(h, KT_DATASET, "train_dataset_free");
    if (!ds) return KW_E_HANDLE;
    kiln_opt_dataset_free(ds);
    kt_drop(h);
    return KW_OK;
}

/* shuffles for an epoch; returns the number of full batches of the session's size */
KW_EXPORT int kw_train_shuffle(int hs, int hd, double seed) {
    struct kt_session * s = (struct kt_session *) kt_get(hs, KT_SESSION, "train_shuffle");
    struct kiln_opt_dataset * ds = s ? (struct kiln_opt_dataset *) kt_get(hd, KT_DATASET, "train_shuffle") : NULL;
    if (!ds) return KW_E_HANDLE;
    if (!(seed >= 0)) return kw_fail(KW_E_INVALID, "train_shuffle: seed %g", seed);
    kiln_opt_dataset_shuffle(ds, (uint64_t) seed, -1);
    return (int) (kiln_opt_dataset_ndata(ds) / s->nbatch);
}

/* ---------------------------------------------------------- sessions */

static struct kiln_opt_optimizer_params opt_pars(void * ud) {
    struct kiln_opt_optimizer_params p = kiln_opt_get_default_optimizer_params(NULL);
    p.adamw.alpha = ((struct kt_session *) ud)->lr;
    p.sgd.alpha = p.adamw.alpha;
    return p;
}

static void session_free(struct kt_session * s) {
    if (!s) return;
    if (s->opt) kiln_opt_free(s->opt);
    if (s->result) kiln_opt_result_free(s->result);
    if (s->model) kiln_mnist_model_free(s->model);
    free(s->gguf);
    free(s);
}

/* arch: 0 fc, 1 cnn */
KW_EXPORT int kw_train_new(int arch, double seed, int nbatch, double lr) {
    if (arch != KILN_MNIST_FC && arch != KILN_MNIST_CNN) return kw_fail(KW_E_INVALID, "train: model %d is neither fc (0) nor cnn (1)", arch);
    if (!(seed >= 0) || seed > 9007199254740991.0) return kw_fail(KW_E_INVALID, "train: seed %g is not a non-negative integer", seed);
    if (nbatch < 1 || nbatch > 4096) return kw_fail(KW_E_INVALID, "train: batch size %d outside 1..4096", nbatch);
    if (!(lr > 0) || !(lr < 10)) return kw_fail(KW_E_INVALID, "train: learning rate %g outside (0, 10)", lr);
    if (!kw_threadpool() && kw_init(1) < 0) return KW_E_NOMEM;
    struct kt_session * s = (struct kt_session *) calloc(1, sizeof *s);
    if (!s) return kw_fail(KW_E_NOMEM, "train: out of memory");
    s->nbatch = nbatch;
    s->lr = (float) lr;
    kiln_clear_error();
    s->model = kiln_mnist_model_init_random((enum kiln_mnist_arch) arch, (uint64_t) seed);
    if (!s->model || !kiln_mnist_model_build(s->model, nbatch, true)) { session_free(s); return kw_fail_kiln(KW_E_NOMEM, "train: model"); }
    struct kiln_opt_params op = kiln_opt_default_params(s->model->ctx_compute, s->model->images, s->model->logits,
                                                        KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.n_threads = kw_n_threads();
    op.threadpool = kw_threadpool();
    op.get_opt_pars = opt_pars;
    op.get_opt_pars_ud = s;
    s->opt = kiln_opt_init(op);
    s->result = kiln_opt_result_init();
    if (!s->opt || !s->result) { session_free(s); return kw_fail_kiln(KW_E_NOMEM, "train: optimizer"); }
    const int h = kt_new(KT_SESSION, s);
    if (h < 0) session_free(s);
    return h;
}

KW_EXPORT int kw_train_free(int h) {
    struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_free");
    if (!s) return KW_E_HANDLE;
    session_free(s);
    kt_drop(h);
    return KW_OK;
}

KW_EXPORT int kw_train_batch_size(int h) {
    struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_batch_size");
    return s ? s->nbatch : KW_E_HANDLE;
}

/* one optimizer step on batch ibatch (shuffled order); loss/accuracy in kw_train_loss/accuracy */
KW_EXPORT int kw_train_step(int hs, int hd, int ibatch) {
    struct kt_session * s = (struct kt_session *) kt_get(hs, KT_SESSION, "train_step");
    struct kiln_opt_dataset * ds = s ? (struct kiln_opt_dataset *) kt_get(hd, KT_DATASET, "train_step") : NULL;
    if (!ds) return KW_E_HANDLE;
    if (ibatch < 0 || (int64_t) (ibatch + 1) * s->nbatch > kiln_opt_dataset_ndata(ds)) {
        return kw_fail(KW_E_INVALID, "train_step: batch %d of %d images is outside a dataset of %lld", ibatch, s->nbatch,
                       (long long) kiln_opt_dataset_ndata(ds));
    }
    kiln_clear_error();
    int rc = kw_fail_status(kiln_opt_prepare(s->opt, true), "train_step");
    if (rc < 0) return rc;
    if (!kiln_opt_dataset_get_batch(ds, kiln_opt_inputs(s->opt), kiln_opt_labels(s->opt), ibatch)) return kw_fail_kiln(KW_E_INVALID, "train_step");
    kiln_opt_result_reset(s->result);
    rc = kw_fail_status(kiln_opt_eval(s->opt, s->result), "train_step");
    if (rc < 0) return rc;
    double unc;
    kiln_opt_result_loss(s->result, &s->loss, &unc);
    kiln_opt_result_accuracy(s->result, &s->accuracy, &unc);
    return KW_OK;
}

KW_EXPORT double kw_train_loss(int h) { struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_loss"); return s ? s->loss : NAN; }
KW_EXPORT double kw_train_accuracy(int h) { struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_accuracy"); return s ? s->accuracy : NAN; }
KW_EXPORT double kw_train_n_eval(int h) { struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_n_eval"); return s ? s->n_eval : NAN; }

/* Forward pass of n (<= nbatch) images already scaled (float [784, n]);
 * the rest of the batch is zero. Logits of image i at out + 10 i. */
static int forward(struct kt_session * s, const float * x, int n, const float ** logits) {
    kiln_clear_error();
    int rc = kw_fail_status(kiln_opt_prepare(s->opt, false), "forward");
    if (rc < 0) return rc;
    struct kiln_tensor * in = kiln_opt_inputs(s->opt);
    memcpy(in->data, x, (size_t) n * KILN_MNIST_NPIXELS * sizeof(float));
    memset((float *) in->data + (size_t) n * KILN_MNIST_NPIXELS, 0, (size_t) (s->nbatch - n) * KILN_MNIST_NPIXELS * sizeof(float));
    struct kiln_tensor * lab = kiln_opt_labels(s->opt);
    if (lab && lab->data) memset(lab->data, 0, kiln_nbytes(lab));
    rc = kw_fail_status(kiln_opt_eval(s->opt, NULL), "forward");
    if (rc < 0) return rc;
    *logits = (const float *) kiln_opt_outputs(s->opt)->data;
    return KW_OK;
}

/* softmax in double; returns log p[label] */
static double softmax10(const float * z, double * p) {
    double mx = z[0], sum = 0;
    for (int k = 1; k < KILN_MNIST_NCLASSES; k++) if (z[k] > mx) mx = z[k];
    for (int k = 0; k < KILN_MNIST_NCLASSES; k++) { p[k] = exp((double) z[k] - mx); sum += p[k]; }
    for (int k = 0; k < KILN_MNIST_NCLASSES; k++) p[k] /= sum;
    return mx + log(sum);
}

/* mean loss and accuracy over every image of the dataset (in its stored order) */
KW_EXPORT int kw_train_evaluate(int hs, int hd) {
    struct kt_session * s = (struct kt_session *) kt_get(hs, KT_SESSION, "train_evaluate");
    struct kiln_opt_dataset * ds = s ? (struct kiln_opt_dataset *) kt_get(hd, KT_DATASET, "train_evaluate") : NULL;
    if (!ds) return KW_E_HANDLE;
    const int64_t n = kiln_opt_dataset_ndata(ds);
    const float * data = (const float *) kiln_opt_dataset_data(ds)->data;
    const float * labels = (const float *) kiln_opt_dataset_labels(ds)->data;
    double loss = 0;
    int64_t correct = 0;
    for (int64_t i0 = 0; i0 < n; i0 += s->nbatch) {
        const int m = (int) (n - i0 < s->nbatch ? n - i0 : s->nbatch);
        const float * z;
        const int rc = forward(s, data + i0 * KILN_MNIST_NPIXELS, m, &z);
        if (rc < 0) return rc;
        for (int i = 0; i < m; i++) {
            double p[KILN_MNIST_NCLASSES];
            const float * zi = z + (size_t) i * KILN_MNIST_NCLASSES;
            const double lse = softmax10(zi, p);
            const float * li = labels + (i0 + i) * KILN_MNIST_NCLASSES;
            int best = 0, truth = 0;
            for (int k = 1; k < KILN_MNIST_NCLASSES; k++) {
                if (zi[k] > zi[best]) best = k;
                if (li[k] > li[truth]) truth = k;
            }
            loss += lse - zi[truth];
            correct += best == truth;
        }
    }
    s->loss = loss / (double) n;
    s->accuracy = (double) correct / (double) n;
    s->n_eval = (double) n;
    return KW_OK;
}

/* one image (784 bytes) -> 10 class probabilities at out */
KW_EXPORT int kw_train_classify(int h, const uint8_t * image, float * out) {
    struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_classify");
    if (!s) return KW_E_HANDLE;
    if (!image || !out) return kw_fail(KW_E_INVALID, "train_classify: image or output missing");
    float x[KILN_MNIST_NPIXELS];
    for (int i = 0; i < KILN_MNIST_NPIXELS; i++) x[i] = image[i] / 255.0f;
    const float * z;
    const int rc = forward(s, x, 1, &z);
    if (rc < 0) return rc;
    double p[KILN_MNIST_NCLASSES];
    softmax10(z, p);
    for (int k = 0; k < KILN_MNIST_NCLASSES; k++) out[k] = (float) p[k];
    return KW_OK;
}

/* the weights as a GGUF file (the layout kiln-mnist eval reads); returns
 * its size, the bytes at kw_train_gguf_data() until the next call or free */
KW_EXPORT int kw_train_gguf(int h) {
    struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_gguf");
    if (!s) return KW_E_HANDLE;
    free(s->gguf);
    s->gguf = NULL;
    kiln_clear_error();
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    if (!g) return kw_fail_kiln(KW_E_NOMEM, "train_gguf");
    const struct kiln_mnist_model * m = s->model;
    bool ok = kiln_gguf_set_val_str(g, "general.architecture", kiln_mnist_arch_name(m->arch));
    struct kiln_tensor * ws[] = { m->fc1_w, m->fc1_b, m->fc2_w, m->fc2_b, m->conv1_k, m->conv1_b, m->conv2_k, m->conv2_b, m->dense_w, m->dense_b };
    for (size_t i = 0; ok && i < sizeof ws / sizeof ws[0]; i++) if (ws[i]) ok = kiln_gguf_add_tensor(g, ws[i]);
    const size_t size = ok ? kiln_gguf_get_write_size(g, false) : 0;
    if (size == 0 || size > 0x7fffffff) { kiln_gguf_free(g); return kw_fail_kiln(KW_E_FAILED, "train_gguf"); }
    s->gguf = (uint8_t *) malloc(size);
    if (!s->gguf) { kiln_gguf_free(g); return kw_fail(KW_E_NOMEM, "train_gguf: out of memory"); }
    const size_t w = kiln_gguf_write_to_buffer(g, s->gguf, size, false);
    kiln_gguf_free(g);
    if (w != size) { free(s->gguf); s->gguf = NULL; return kw_fail_kiln(KW_E_FAILED, "train_gguf"); }
    return (int) size;
}

KW_EXPORT void * kw_train_gguf_data(int h) {
    struct kt_session * s = (struct kt_session *) kt_get(h, KT_SESSION, "train_gguf_data");
    return s ? s->gguf : NULL;
}
