/*
 * vec_list.h — the vector kernels every ISA implements, as one X-list:
 * X(ret, name, params, S) per kernel. The same list declares each ISA's
 * functions (arch.h: name##__##S), makes the kernel table's fields
 * (kernels.h), fills every ISA's table (kernels.c) and drives the tests
 * (tests/c/test_kernels.c checks each field of each table is that ISA's
 * function and has a test) — adding a kernel here is the one edit that
 * reaches all of them.
 *
 * Contracts (the scalar version is the reference each SIMD one is tested
 * against):
 *   f32_dot, f16_dot, bf16_dot   sum of x[i] * y[i], float lanes
 *   f32_softmax_exp              y[i] = exp(x[i] - max); returns the sum of y
 *                                (softmax row; y may alias x)
 *   f32_axpy  y += a * x         f32_scale  y = a * x   (y may alias x)
 *   f32_add   z = x + y          f32_mul    z = x * y
 *   f32_exp, f32_silu (x / (1 + exp(-x))), f32_gelu (tanh approximation, as ggml)
 *   f32_to_f16, f16_to_f32       bit-exact with kiln_fp32_to_fp16 /
 *                                kiln_fp16_to_fp32 (round to nearest even)
 */
#ifndef KILN_VEC_LIST_H
#define KILN_VEC_LIST_H

#include "kiln.h"

#define KILN_VEC_LIST(X, S) \
    X(float,  f32_dot,         (int64_t n, const float * x, const float * y), S) \
    X(float,  f16_dot,         (int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y), S) \
    X(float,  bf16_dot,        (int64_t n, const kiln_bf16_t * x, const kiln_bf16_t * y), S) \
    X(double, f32_softmax_exp, (int64_t n, const float * x, float * y, float max), S) \
    X(void,   f32_axpy,        (int64_t n, float a, const float * x, float * y), S) \
    X(void,   f32_scale,       (int64_t n, float a, const float * x, float * y), S) \
    X(void,   f32_add,         (int64_t n, const float * x, const float * y, float * z), S) \
    X(void,   f32_mul,         (int64_t n, const float * x, const float * y, float * z), S) \
    X(void,   f32_exp,         (int64_t n, const float * x, float * y), S) \
    X(void,   f32_silu,        (int64_t n, const float * x, float * y), S) \
    X(void,   f32_gelu,        (int64_t n, const float * x, float * y), S) \
    X(void,   f32_to_f16,      (int64_t n, const float * x, kiln_fp16_t * y), S) \
    X(void,   f16_to_f32,      (int64_t n, const kiln_fp16_t * x, float * y), S)

/* the uses: a declaration of ISA S's function, a table field */
#define KILN_VEC_DECLARE(ret, name, params, S) ret name##__##S params;
#define KILN_VEC_FIELD(ret, name, params, S) ret (*name) params;

#endif
