/*
 * ops_common.h — helpers shared by the elementwise / reduction kernels:
 * strided loads and stores of float rows in chunks, and element access for
 * any float or integer type. Kernels convert rows to f32 chunk by chunk so
 * one loop serves F32, F16, BF16 and any strides, with a stack buffer that
 * stays small (wasm stacks are 64 KiB by default).
 */
#ifndef KILN_OPS_COMMON_H
#define KILN_OPS_COMMON_H

#include "../core/internal.h"

/* A multiple of every block size (32, 256), so chunks of quantized rows
 * start and end on block boundaries. */
#define KILN_CHUNK 1024

static inline bool kiln_is_float_type(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}
static inline bool kiln_is_int_type(enum kiln_type t) {
    return t == KILN_TYPE_I8 || t == KILN_TYPE_I16 || t == KILN_TYPE_I32 || t == KILN_TYPE_I64;
}
/* types an element of which can be read and written on its own */
static inline bool kiln_is_elem_type(enum kiln_type t) {
    return kiln_is_float_type(t) || kiln_is_int_type(t) || t == KILN_TYPE_F64;
}

static inline float kiln_ld_f32(enum kiln_type t, const void * p) {
    switch (t) {
        case KILN_TYPE_F32:  return *(const float *) p;
        case KILN_TYPE_F16:  return kiln_fp16_to_fp32(*(const kiln_fp16_t *) p);
        case KILN_TYPE_BF16: return kiln_bf16_to_fp32(*(const kiln_bf16_t *) p);
        default:             return (float) kiln_elem_get_f64(t, p);
    }
}
static inline void kiln_st_f32(enum kiln_type t, void * p, float v) {
    switch (t) {
        case KILN_TYPE_F32:  *(float *) p = v; break;
        case KILN_TYPE_F16:  *(kiln_fp16_t *) p = kiln_fp32_to_fp16(v); break;
        case KILN_TYPE_BF16: *(kiln_bf16_t *) p = kiln_fp32_to_bf16(v); break;
        default:             kiln_elem_set_f64(t, p, v); break;
    }
}

/* n elements of float type t at p, byte stride s, into out */
void kiln_load_f32(enum kiln_type t, const char * p, size_t s, int64_t n, float * out);
/* n floats into elements of float type t at p, byte stride s */
void kiln_store_f32(enum kiln_type t, char * p, size_t s, int64_t n, const float * in);

/* Row (i1, i2, i3) of t */
static inline char * kiln_row_ptr(const struct kiln_tensor * t, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}
/* flat row index -> (i1, i2, i3) */
static inline void kiln_row_index(const struct kiln_tensor * t, int64_t r, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne1 = t->ne[1], ne2 = t->ne[2];
    *i3 = r / (ne2 * ne1);
    *i2 = (r - *i3 * ne2 * ne1) / ne1;
    *i1 = r - *i3 * ne2 * ne1 - *i2 * ne1;
}

/* Kernel-side type check: sets an error naming the op and the types. */
enum kiln_status kiln_unsupported_types(const struct kiln_tensor * dst);

#endif
