/*
 * ops_conv_check.h — the check the convolution/pooling/recurrent op tests
 * share: compute a result with 1, 2 and 4 threads, compare each run with a
 * double-precision reference by NMSE, and require every thread count to
 * give the same bytes.
 */
#ifndef KILN_OPS_CONV_CHECK_H
#define KILN_OPS_CONV_CHECK_H

#include "util/test_util.h"

/* Called before each run (for in-place ops that consume their input). */
typedef void (*cc_reset_fn)(void * user);

static inline void cc_check_threads_reset(struct kiln_context * ctx, struct kiln_tensor * out, const double * ref,
                                          double max_nmse, const char * what, cc_reset_fn reset, void * user) {
    static const int threads[3] = { 1, 2, 4 };
    const size_t nbytes = kiln_nbytes(out);
    const int64_t n = kiln_nelements(out);
    unsigned char * first = NULL;
    for (int t = 0; t < 3; t++) {
        if (reset) reset(user);
        else memset(out->data, 0xff, nbytes); /* NaN everywhere: unwritten elements fail */
        const enum kiln_status st = tu_compute(ctx, out, threads[t]);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "%s: compute with %d threads: %s", what, threads[t], kiln_last_error())) break;
        double * got = tu_to_f64(out);
        const double e = tu_nmse(got, ref, n);
        CHECK(e <= max_nmse, "%s: %d threads: nmse %.3g > %.3g (max abs diff %.3g)", what, threads[t], e, max_nmse,
              tu_max_abs_diff(got, ref, n));
        free(got);
        if (!first) {
            first = (unsigned char *) malloc(nbytes ? nbytes : 1);
            memcpy(first, out->data, nbytes);
        } else {
            CHECK(memcmp(first, out->data, nbytes) == 0, "%s: %d threads differ from 1 thread", what, threads[t]);
        }
    }
    free(first);
}

static inline void cc_check_threads(struct kiln_context * ctx, struct kiln_tensor * out, const double * ref,
                                    double max_nmse, const char * what) {
    cc_check_threads_reset(ctx, out, ref, max_nmse, what, NULL, NULL);
}

/* the constructor returned NULL and the message mentions `needle` */
#define CHECK_FAILS(expr, needle) do { \
        kiln_clear_error(); \
        struct kiln_tensor * cc_r_ = (expr); \
        CHECK(cc_r_ == NULL, "expected NULL from %s", #expr); \
        CHECK(strstr(kiln_last_error(), (needle)) != NULL, "%s: message '%s' lacks '%s'", #expr, kiln_last_error(), (needle)); \
    } while (0)

/* logical index of a 4D element (i0 fastest) */
static inline int64_t cc_idx(const struct kiln_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return i0 + t->ne[0] * (i1 + t->ne[1] * (i2 + t->ne[2] * i3));
}

#endif
