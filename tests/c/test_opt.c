/*
 * test_opt.c — the training API: a softmax classifier on synthetic blobs
 * learns (loss below a bound, accuracy above one), deterministically for a
 * seed and a thread count; gradient accumulation over two micro-batches
 * gives the same step as one full batch; datasets shuffle reproducibly.
 */
#include "util/test_util.h"
#include "kiln-opt.h"

#include <math.h>

#define NF 8   /* features */
#define NC 4   /* classes */
#define ND 400 /* datapoints */

static struct kiln_opt_dataset * make_blobs(uint64_t seed) {
    struct kiln_opt_dataset * ds = kiln_opt_dataset_init(KILN_TYPE_F32, KILN_TYPE_F32, NF, NC, ND, 1);
    float * x = (float *) kiln_opt_dataset_data(ds)->data;
    float * y = (float *) kiln_opt_dataset_labels(ds)->data;
    tu_seed(seed);
    float centers[NC][NF];
    for (int c = 0; c < NC; c++) for (int f = 0; f < NF; f++) centers[c][f] = tu_rand_uniform(-2, 2);
    for (int i = 0; i < ND; i++) {
        const int c = i % NC;
        for (int f = 0; f < NF; f++) x[i * NF + f] = centers[c][f] + tu_rand_uniform(-0.8f, 0.8f);
        for (int k = 0; k < NC; k++) y[i * NC + k] = k == c ? 1.0f : 0.0f;
    }
    return ds;
}

struct model {
    struct kiln_context * wctx, * cctx;
    struct kiln_tensor * w, * b, * in, * out;
};

static void model_init(struct model * m, int nbatch) {
    m->wctx = tu_ctx(1 << 16);
    m->w = kiln_new_tensor_2d(m->wctx, KILN_TYPE_F32, NF, NC);
    m->b = kiln_new_tensor_1d(m->wctx, KILN_TYPE_F32, NC);
    tu_seed(7);
    tu_fill_uniform(m->w, -0.1f, 0.1f);
    kiln_set_zero(m->b);
    struct kiln_init_params p = { 1 << 20, NULL, true };
    m->cctx = kiln_init(p);
    kiln_set_param(m->cctx, m->w);
    kiln_set_param(m->cctx, m->b);
    m->in = kiln_new_tensor_2d(m->cctx, KILN_TYPE_F32, NF, nbatch);
    m->out = kiln_add(m->cctx, kiln_mul_mat(m->cctx, m->w, m->in), m->b);
}

static void model_free(struct model * m) { kiln_free(m->cctx); kiln_free(m->wctx); }

static struct kiln_opt_optimizer_params lr05(void * ud) {
    (void) ud;
    struct kiln_opt_optimizer_params p = kiln_opt_get_default_optimizer_params(NULL);
    p.adamw.alpha = 0.05f;
    return p;
}

/* trains for `epochs`; returns the final train loss; w_out gets the weights */
static double train(int nbatch, int period, int threads, int epochs, float * w_out, double * acc_out) {
    struct kiln_opt_dataset * ds = make_blobs(3);
    struct model m;
    model_init(&m, nbatch);
    struct kiln_opt_params op = kiln_opt_default_params(m.cctx, m.in, m.out, KILN_OPT_LOSS_TYPE_CROSS_ENTROPY);
    op.opt_period = period;
    op.n_threads = threads;
    op.get_opt_pars = lr05;
    struct kiln_opt_context * o = kiln_opt_init(op);
    if (!CHECK(o != NULL, "opt_init: %s", kiln_last_error())) return NAN;
    struct kiln_opt_result * r = kiln_opt_result_init();
    struct kiln_opt_result * rv = kiln_opt_result_init();
    double loss = NAN;
    for (int e = 0; e < epochs; e++) {
        kiln_opt_dataset_shuffle(ds, 100 + (uint64_t) e, 320);
        kiln_opt_result_reset(r);
        kiln_opt_result_reset(rv);
        const enum kiln_status st = kiln_opt_epoch(o, ds, r, rv, 320, NULL, NULL, NULL);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "epoch: %s", kiln_last_error())) break;
        kiln_opt_result_loss(r, &loss, NULL);
    }
    if (acc_out) kiln_opt_result_accuracy(rv, acc_out, NULL);
    if (w_out) memcpy(w_out, m.w->data, sizeof(float) * NF * NC);
    kiln_opt_result_free(r);
    kiln_opt_result_free(rv);
    kiln_opt_free(o);
    model_free(&m);
    kiln_opt_dataset_free(ds);
    return loss;
}

int main(void) {
    tu_case = "learns";
    double acc = 0;
    float w1[NF * NC], w2[NF * NC], w3[NF * NC];
    const double l1 = train(20, 1, 1, 8, w1, &acc);
    CHECK(l1 < 0.1, "final train loss %.4f < 0.1", l1);
    CHECK(acc > 0.95, "validation accuracy %.3f > 0.95", acc);

    tu_case = "deterministic";
    const double l2 = train(20, 1, 1, 8, w2, NULL);
    CHECK(l1 == l2 && memcmp(w1, w2, sizeof w1) == 0, "same seed, same result (%.9g vs %.9g)", l1, l2);
    const double l3 = train(20, 1, 2, 8, w3, NULL);
    CHECK(l1 == l3 && memcmp(w1, w3, sizeof w1) == 0, "1 and 2 threads agree (%.9g vs %.9g)", l1, l3);

    tu_case = "accumulation";
    /* 2 micro-batches of 10 == 1 batch of 20, same data order */
    float wa[NF * NC], wb[NF * NC];
    train(20, 1, 1, 1, wa, NULL);
    train(10, 2, 1, 1, wb, NULL);
    double maxd = 0;
    for (int i = 0; i < NF * NC; i++) maxd = fmax(maxd, fabs((double) wa[i] - wb[i]));
    CHECK(maxd < 1e-4, "accumulated step matches the full batch (max diff %.3g)", maxd);

    tu_case = "dataset";
    struct kiln_opt_dataset * ds = make_blobs(1);
    struct kiln_init_params p = { 1 << 16, NULL, false };
    struct kiln_context * ctx = kiln_init(p);
    struct kiln_tensor * xb = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, NF, 4);
    struct kiln_tensor * yb = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, NC, 4);
    kiln_opt_dataset_shuffle(ds, 5, -1);
    CHECK(kiln_opt_dataset_get_batch(ds, xb, yb, 0), "get_batch");
    float first[NF * 4];
    memcpy(first, xb->data, sizeof first);
    struct kiln_opt_dataset * ds2 = make_blobs(1);
    kiln_opt_dataset_shuffle(ds2, 5, -1);
    kiln_opt_dataset_get_batch(ds2, xb, yb, 0);
    CHECK(memcmp(first, xb->data, sizeof first) == 0, "shuffle is reproducible for a seed");
    CHECK(!kiln_opt_dataset_get_batch(ds, xb, yb, ND / 4) && strstr(kiln_last_error(), "out of range"), "batch index checked");
    struct kiln_tensor * bad = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, NF + 1, 4);
    CHECK(!kiln_opt_dataset_get_batch(ds, bad, NULL, 0), "batch shape checked");
    CHECK(kiln_opt_dataset_init(KILN_TYPE_F32, KILN_TYPE_F32, NF, NC, 10, 3) == NULL, "ndata must be a multiple of the shard");
    kiln_opt_dataset_free(ds);
    kiln_opt_dataset_free(ds2);
    kiln_free(ctx);
    return tu_finish();
}
