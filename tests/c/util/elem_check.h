/*
 * elem_check.h — helpers for the elementwise / reduction op tests: tensors
 * in several memory layouts, rounding a double to a tensor type, and a
 * runner that computes an op with 1, 2 and 4 threads, compares each result
 * to a double-precision reference by NMSE and checks the thread counts
 * agree bit for bit.
 */
#ifndef KILN_ELEM_CHECK_H
#define KILN_ELEM_CHECK_H

#include "test_util.h"

enum ec_layout {
    EC_CONT,    /* contiguous */
    EC_TRANS,   /* transposed view of a contiguous [ne1, ne0, ne2, ne3] */
    EC_PERM,    /* permuted view: dims (1, 2, 0, 3) of a [ne1, ne2, ne0, ne3] */
    EC_PADDED,  /* view with padded rows and a non-zero offset */
    EC_LAYOUTS,
};
static const char * const ec_layout_names[EC_LAYOUTS] = { "cont", "trans", "perm", "padded" };

static inline struct kiln_tensor * ec_new(struct kiln_context * ctx, enum kiln_type type, const int64_t ne[4], int layout) {
    switch (layout) {
        case EC_TRANS: {
            struct kiln_tensor * b = kiln_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
            return kiln_transpose(ctx, b);
        }
        case EC_PERM: {
            struct kiln_tensor * b = kiln_new_tensor_4d(ctx, type, ne[1], ne[2], ne[0], ne[3]);
            return kiln_permute(ctx, b, 1, 2, 0, 3);
        }
        case EC_PADDED: {
            struct kiln_tensor * b = kiln_new_tensor_4d(ctx, type, ne[0] + 3, ne[1], ne[2], ne[3]);
            const size_t esz = kiln_type_size(type);
            /* shrink the last row so the view fits with the offset */
            return kiln_view_4d(ctx, b, ne[0], ne[1], ne[2], ne[3], b->nb[1], b->nb[2], b->nb[3], 2 * esz);
        }
        default:
            return kiln_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
    }
}

static inline int64_t ec_nel(const int64_t ne[4]) { return ne[0] * ne[1] * ne[2] * ne[3]; }

/* the value v becomes when stored in type t (ints truncate toward zero and saturate) */
static inline double ec_round(enum kiln_type t, double v) {
    switch (t) {
        case KILN_TYPE_F32:  return (float) v;
        case KILN_TYPE_F16:  return kiln_fp16_to_fp32(kiln_fp32_to_fp16((float) v));
        case KILN_TYPE_BF16: return kiln_bf16_to_fp32(kiln_fp32_to_bf16((float) v));
        case KILN_TYPE_I8:   return v != v ? 0 : fmax(-128, fmin(127, trunc(v)));
        case KILN_TYPE_I16:  return v != v ? 0 : fmax(-32768, fmin(32767, trunc(v)));
        case KILN_TYPE_I32:  return v != v ? 0 : fmax(-2147483648.0, fmin(2147483647.0, trunc(v)));
        case KILN_TYPE_I64:  return v != v ? 0 : trunc(v);
        default:             return v;
    }
}

/* NMSE threshold for a result of type t: exact (rounding only) or transcendental math */
static inline double ec_thr(enum kiln_type t, bool transcendental) {
    switch (t) {
        case KILN_TYPE_F16:  return 1e-6;
        case KILN_TYPE_BF16: return 5e-5;
        case KILN_TYPE_F32:  return transcendental ? 1e-9 : 1e-12;
        default:             return 1e-12;
    }
}

/* Bit-level record of the results of one case across thread counts. */
struct ec_bits { double * v; int64_t n; };
static inline void ec_bits_check(struct ec_bits * b, const double * v, int64_t n, int nt) {
    if (!b->v) {
        b->v = (double *) malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
        memcpy(b->v, v, sizeof(double) * (size_t) n);
        b->n = n;
        return;
    }
    int same = b->n == n;
    for (int64_t i = 0; same && i < n; i++) {
        if (memcmp(&b->v[i], &v[i], sizeof(double)) != 0 && !(isnan(b->v[i]) && isnan(v[i]))) same = 0;
    }
    CHECK(same, "results with %d threads differ bitwise from 1 thread", nt);
}
static inline void ec_bits_free(struct ec_bits * b) { free(b->v); b->v = NULL; }

static const int ec_threads[3] = { 1, 2, 4 };

/* op cases run (one op, types, shapes, layout; each over 1/2/4 threads) */
static int ec_cases = 0;

#endif
