/*
 * nn_test_common.h — helpers shared by the nn op tests (test_ops_norm.c,
 * test_ops_softmax.c, test_ops_rope.c, test_ops_attn.c, test_ops_loss.c):
 * compute a result with 1, 2 and 4 threads, checking the bits agree.
 */
#ifndef KILN_NN_TEST_COMMON_H
#define KILN_NN_TEST_COMMON_H

#include "util/test_util.h"
#include "internal.h" /* op_params accessors */

/* Computes `out` with 1, 2 and 4 threads (inputs must not be overwritten by
 * the op). Checks every run succeeds and that 2 and 4 threads give the same
 * bytes as 1. Returns the 1-thread result in logical order (caller frees),
 * or NULL when the compute failed. */
static inline double * nn_run(struct kiln_context * ctx, struct kiln_tensor * out, const char * what) {
    static const int threads[3] = { 1, 2, 4 };
    const size_t nbytes = kiln_nbytes(out);
    unsigned char * first = (unsigned char *) malloc(nbytes ? nbytes : 1);
    double * res = NULL;
    for (int t = 0; t < 3; t++) {
        memset(out->data, 0xA5, nbytes); /* stale results must not pass */
        const enum kiln_status st = tu_compute(ctx, out, threads[t]);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "%s: compute with %d threads: status %d: %s", what, threads[t], (int) st, kiln_last_error())) {
            free(first);
            free(res);
            return NULL;
        }
        if (t == 0) {
            memcpy(first, out->data, nbytes);
            res = tu_to_f64(out);
        } else {
            CHECK(memcmp(first, out->data, nbytes) == 0, "%s: %d threads differ from 1 thread", what, threads[t]);
        }
    }
    free(first);
    return res;
}

/* checks NMSE(out, ref) <= thr and frees out */
static inline void nn_expect(double * out, const double * ref, int64_t n, double thr, const char * what) {
    if (!out) return;
    const double e = tu_nmse(out, ref, n);
    CHECK(e <= thr, "%s: nmse %.3g > %.3g (max abs diff %.3g)", what, e, thr, tu_max_abs_diff(out, ref, n));
    free(out);
}

/* NULL result with a message containing `needle` */
#define CHECK_FAILS(expr, needle, what) do { \
    kiln_clear_error(); \
    struct kiln_tensor * r_ = (expr); \
    CHECK(r_ == NULL, "%s: expected NULL", what); \
    CHECK(strstr(kiln_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, kiln_last_error(), needle); \
} while (0)

#endif
