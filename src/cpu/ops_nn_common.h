/*
 * ops_nn_common.h — small helpers shared by the nn op kernels
 * (ops_norm.c, ops_softmax.c, ops_rope.c, ops_attn.c, ops_loss.c).
 */
#ifndef KILN_OPS_NN_COMMON_H
#define KILN_OPS_NN_COMMON_H

#include "../core/internal.h"

#include <math.h>

/* floats per cache line: per-thread scratch rows are padded by this much so
 * two threads never write the same line */
#define KILN_CL_F32 16

/* flattened row ir of t -> (i1, i2, i3) */
static inline void kiln_row_index(const struct kiln_tensor * t, int64_t ir, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne1 = t->ne[1], ne2 = t->ne[2];
    *i3 = ir / (ne2 * ne1);
    *i2 = (ir - *i3 * ne2 * ne1) / ne1;
    *i1 = ir - *i3 * ne2 * ne1 - *i2 * ne1;
}

static inline char * kiln_row_ptr(const struct kiln_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* ALiBi slope of head h among n_head heads (ggml's formula: a geometric
 * series over the largest power of two, interleaved for the rest) */
static inline float kiln_alibi_slope(float max_bias, uint32_t h, uint32_t n_head) {
    if (!(max_bias > 0.0f)) return 1.0f;
    const uint32_t n_head_log2 = 1u << (uint32_t) floor(log2((double) n_head));
    const float m0 = powf(2.0f, -(max_bias) / n_head_log2);
    const float m1 = powf(2.0f, -(max_bias / 2.0f) / n_head_log2);
    return h < n_head_log2 ? powf(m0, (float)(h + 1)) : powf(m1, (float)(2 * (h - n_head_log2) + 1));
}

#endif
