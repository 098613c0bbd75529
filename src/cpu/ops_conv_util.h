/*
 * ops_conv_util.h — small helpers shared by the convolution, pooling,
 * window and recurrent kernels (ops_conv.c, ops_pool.c, ops_window.c,
 * ops_recurrent.c).
 */
#ifndef KILN_OPS_CONV_UTIL_H
#define KILN_OPS_CONV_UTIL_H

#include "../core/internal.h"

#include <float.h>
#include <math.h>

static inline bool conv_is_float(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

/* one element of an f32 / f16 / bf16 tensor */
static inline float conv_load(enum kiln_type t, const void * p) {
    switch (t) {
        case KILN_TYPE_F32:  return *(const float *) p;
        case KILN_TYPE_F16:  return kiln_fp16_to_fp32(*(const kiln_fp16_t *) p);
        case KILN_TYPE_BF16: return kiln_bf16_to_fp32(*(const kiln_bf16_t *) p);
        default:             return 0.0f;
    }
}

/* plain sequential f32 dot product: the order is fixed, so results do not
 * depend on how rows were split across threads */
static inline float conv_dot(const float * x, const float * y, int64_t n) {
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

#endif
