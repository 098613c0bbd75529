/*
 * test_mnist.c — a short training run of the FC model on a Fashion-MNIST
 * subset (tests/data/fashion-mnist) gets its loss below a bound,
 * deterministically for a seed; the model saved as GGUF and loaded back
 * predicts exactly the same; malformed IDX input is rejected.
 */
#include "util/test_util.h"
#include "kiln-mnist.h"
#include "kiln-opt.h"

#include <math.h>

#define DATA "tests/data/fashion-mnist"

static struct kiln_opt_optimizer_params lr(void * ud) {
    (void) ud;
    struct kiln_opt_optimizer_params p = kiln_opt_get_default_optimizer_params(NULL);
    p.adamw.alpha = 2e-3f;
    return p;
}

/* 4 epochs of 45 batches of 20 (180 steps); returns final train loss, val accuracy */
static double train(struct kiln_mnist_model ** out, double * val_acc) {
    struct kiln_opt_dataset * ds = kiln_mnist_dataset_load(DATA, "train", 0);
    if (!CHECK(ds != NULL, "dataset: %s", kiln_last_error())) return NAN;
    struct kiln_mnist_model * m = kiln_mnist_model_init_random(KILN_MNIST_FC, 1);
    CHECK(m && kiln_mnist_model_build(m, 20, true), "build: %s", kiln_last_error());
    struct kiln_opt_params op = kiln_opt_default_params(m->ctx_compute, m->images, m->logits, KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.n_threads = 2;
    op.get_opt_pars = lr;
    struct kiln_opt_context * o = kiln_opt_init(op);
    CHECK(o != NULL, "opt_init: %s", kiln_last_error());
    struct kiln_opt_result * rt = kiln_opt_result_init(), * rv = kiln_opt_result_init();
    double loss = NAN;
    for (int e = 0; e < 4 && o; e++) {
        kiln_opt_dataset_shuffle(ds, 10 + (uint64_t) e, 900);
        kiln_opt_result_reset(rt);
        kiln_opt_result_reset(rv);
        CHECK(kiln_opt_epoch(o, ds, rt, rv, 900, NULL, NULL, NULL) == KILN_STATUS_SUCCESS, "epoch: %s", kiln_last_error());
        kiln_opt_result_loss(rt, &loss, NULL);
    }
    kiln_opt_result_accuracy(rv, val_acc, NULL);
    kiln_opt_result_free(rt);
    kiln_opt_result_free(rv);
    kiln_opt_free(o);
    kiln_opt_dataset_free(ds);
    *out = m;
    return loss;
}

static void predict(struct kiln_mnist_model * m, struct kiln_opt_dataset * test, double * loss, double * acc) {
    CHECK(kiln_mnist_model_build(m, 50, false), "build eval: %s", kiln_last_error());
    struct kiln_opt_params op = kiln_opt_default_params(m->ctx_compute, m->images, m->logits, KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    struct kiln_opt_context * o = kiln_opt_init(op);
    struct kiln_opt_result * r = kiln_opt_result_init();
    CHECK(kiln_opt_epoch(o, test, NULL, r, 0, NULL, NULL, NULL) == KILN_STATUS_SUCCESS, "eval: %s", kiln_last_error());
    kiln_opt_result_loss(r, loss, NULL);
    kiln_opt_result_accuracy(r, acc, NULL);
    kiln_opt_result_free(r);
    kiln_opt_free(o);
}

int main(void) {
    tu_case = "train";
    struct kiln_mnist_model * m1 = NULL, * m2 = NULL;
    double va1 = 0, va2 = 0;
    const double l1 = train(&m1, &va1);
    printf("FC, 180 steps: train loss %.4f, validation accuracy %.1f%%\n", l1, va1 * 100);
    CHECK(l1 < 0.75, "train loss %.4f below 0.75", l1);
    CHECK(va1 > 0.65, "validation accuracy %.3f above 0.65", va1);

    tu_case = "deterministic";
    const double l2 = train(&m2, &va2);
    CHECK(l1 == l2 && memcmp(m1->fc1_w->data, m2->fc1_w->data, kiln_nbytes(m1->fc1_w)) == 0,
          "same seed, same weights (%.9g vs %.9g)", l1, l2);

    tu_case = "save/load";
    struct kiln_opt_dataset * test = kiln_mnist_dataset_load(DATA, "t10k", 0);
    CHECK(test != NULL, "test set: %s", kiln_last_error());
    double tl1, ta1, tl2, ta2;
    predict(m1, test, &tl1, &ta1);
    const char * path = "build-mnist-test.gguf";
    CHECK(kiln_mnist_model_save(m1, path), "save: %s", kiln_last_error());
    struct kiln_mnist_model * m3 = kiln_mnist_model_load(path);
    CHECK(m3 != NULL && m3->arch == KILN_MNIST_FC, "load: %s", kiln_last_error());
    if (m3) {
        predict(m3, test, &tl2, &ta2);
        CHECK(tl1 == tl2 && ta1 == ta2, "reloaded model predicts the same (loss %.6f vs %.6f)", tl1, tl2);
    }
    remove(path);
    printf("test subset: loss %.4f accuracy %.1f%%\n", tl1, ta1 * 100);

    tu_case = "bad input";
    const uint8_t bad[8] = { 0, 0, 8, 3, 0, 0, 0, 9 };
    int64_t dims[3];
    const uint8_t * p;
    CHECK(!kiln_mnist_parse_idx(bad, sizeof bad, 3, dims, &p) && strstr(kiln_last_error(), "truncated"), "short header: %s", kiln_last_error());
    const uint8_t big[16] = { 0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 28, 0, 0, 0, 28 };
    CHECK(!kiln_mnist_parse_idx(big, sizeof big, 3, dims, &p) && strstr(kiln_last_error(), "payload truncated"), "short payload: %s", kiln_last_error());
    const uint8_t lab[9] = { 0, 0, 8, 1, 0, 0, 0, 1, 12 };
    const uint8_t img[784] = { 0 };
    CHECK(kiln_mnist_parse_idx(lab, sizeof lab, 1, dims, &p) && kiln_mnist_dataset(img, p, 1) == NULL && strstr(kiln_last_error(), "out of range"),
          "label 12 rejected: %s", kiln_last_error());
    CHECK(kiln_mnist_model_load("tests/data/vocab/ggml-vocab-gpt-2.gguf") == NULL && strstr(kiln_last_error(), "not an MNIST model"),
          "non-MNIST GGUF rejected: %s", kiln_last_error());

    kiln_opt_dataset_free(test);
    kiln_mnist_model_free(m1);
    kiln_mnist_model_free(m2);
    kiln_mnist_model_free(m3);
    return tu_finish();
}
