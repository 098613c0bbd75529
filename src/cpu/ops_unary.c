/*
 * ops_unary.c — one-input elementwise kernels: sqr, sqrt, log, sin, cos,
 * scale, clamp, leaky_relu and the 14 UNARY ops. dst has src0's shape; both
 * may have any strides and be F32, F16 or BF16 (math in f32, like ggml).
 */
#include "ops_common.h"
#include "kernels.h"

#include <math.h>

typedef void (*map_fn)(float * y, const float * x, int64_t n, const float * p);

/* Applies fn row by row; rows split by thread. In-place (dst is a view of
 * src0) is fine: each element is read before it is written. */
static enum kiln_status map1(const struct kiln_compute_params * params, struct kiln_tensor * dst, map_fn fn, const float * p) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || !kiln_is_float_type(dst->type)) return kiln_unsupported_types(dst);
    if (!kiln_are_same_shape(src, dst)) {
        kiln_set_error("%s: src0 and dst shapes differ", kiln_op_name(dst->op));
        return KILN_STATUS_INVALID_ARG;
    }
    const int64_t ne0 = dst->ne[0];
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    const bool fast = src->type == KILN_TYPE_F32 && dst->type == KILN_TYPE_F32 &&
                      src->nb[0] == sizeof(float) && dst->nb[0] == sizeof(float);
    float buf[KILN_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1, i2, i3);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        if (fast) { fn((float *) d, (const float *) s, ne0, p); continue; }
        for (int64_t c = 0; c < ne0; c += KILN_CHUNK) {
            const int64_t n = KILN_MIN(KILN_CHUNK, ne0 - c);
            kiln_load_f32(src->type, s + c * src->nb[0], src->nb[0], n, buf);
            fn(buf, buf, n, p);
            kiln_store_f32(dst->type, d + c * dst->nb[0], dst->nb[0], n, buf);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* ---- the element functions (y may alias x) */

static void f_sqr (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i]; }
static void f_sqrt(float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = sqrtf(x[i]); }
static void f_log (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = logf(x[i]); }
static void f_sin (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = sinf(x[i]); }
static void f_cos (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = cosf(x[i]); }
/* scale, exp, silu and gelu go through the selected ISA's kernel table */
static void f_scale(float * y, const float * x, int64_t n, const float * p) { kiln_kernels()->f32_scale(n, p[0], x, y); }
static void f_clamp(float * y, const float * x, int64_t n, const float * p) {
    const float lo = p[0], hi = p[1];
    for (int64_t i = 0; i < n; i++) y[i] = fminf(fmaxf(x[i], lo), hi);
}
static void f_leaky_relu(float * y, const float * x, int64_t n, const float * p) {
    const float ns = p[0];
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] > 0.f ? x[i] : 0.f) + ns * (x[i] < 0.f ? x[i] : 0.f);
}

static void f_abs (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]); }
static void f_sgn (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? 1.f : (x[i] < 0.f ? -1.f : 0.f); }
static void f_neg (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = -x[i]; }
static void f_step(float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? 1.f : 0.f; }
static void f_tanh(float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = tanhf(x[i]); }
static void f_elu (float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : expm1f(x[i]); }
static void f_relu(float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0.f ? x[i] : 0.f; }
static void f_sigmoid(float * y, const float * x, int64_t n, const float * p) { (void) p; for (int64_t i = 0; i < n; i++) y[i] = 1.f / (1.f + expf(-x[i])); }
/* ggml's tanh approximation, in the kernel table's cancellation-free form
 * x / (1 + exp(-2u)) == 0.5 x (1 + tanh(u)) */
static void f_gelu(float * y, const float * x, int64_t n, const float * p) { (void) p; kiln_kernels()->f32_gelu(n, x, y); }
static void f_gelu_quick(float * y, const float * x, int64_t n, const float * p) {
    (void) p;
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * (1.0f / (1.0f + expf(-1.702f * x[i])));
}
static void f_silu(float * y, const float * x, int64_t n, const float * p) { (void) p; kiln_kernels()->f32_silu(n, x, y); }
static void f_hardswish(float * y, const float * x, int64_t n, const float * p) {
    (void) p;
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * fminf(1.0f, fmaxf(0.0f, (x[i] + 3.0f) / 6.0f));
}
static void f_hardsigmoid(float * y, const float * x, int64_t n, const float * p) {
    (void) p;
    for (int64_t i = 0; i < n; i++) y[i] = fminf(1.0f, fmaxf(0.0f, (x[i] + 3.0f) / 6.0f));
}
static void f_exp(float * y, const float * x, int64_t n, const float * p) { (void) p; kiln_kernels()->f32_exp(n, x, y); }

#define UNARY_FN_(UPPER, lower, name) [KILN_UNARY_OP_##UPPER] = f_##lower,
static const map_fn unary_fns[KILN_UNARY_OP_COUNT] = { KILN_UNARY_OP_LIST(UNARY_FN_) };
#undef UNARY_FN_

enum kiln_status kiln_cpu_fwd_sqr (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return map1(params, dst, f_sqr, NULL); }
enum kiln_status kiln_cpu_fwd_sqrt(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return map1(params, dst, f_sqrt, NULL); }
enum kiln_status kiln_cpu_fwd_log (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return map1(params, dst, f_log, NULL); }
enum kiln_status kiln_cpu_fwd_sin (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return map1(params, dst, f_sin, NULL); }
enum kiln_status kiln_cpu_fwd_cos (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return map1(params, dst, f_cos, NULL); }

enum kiln_status kiln_cpu_fwd_scale(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const float p[1] = { kiln_get_op_params_f32(dst, 0) };
    return map1(params, dst, f_scale, p);
}
enum kiln_status kiln_cpu_fwd_clamp(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const float p[2] = { kiln_get_op_params_f32(dst, 0), kiln_get_op_params_f32(dst, 1) };
    return map1(params, dst, f_clamp, p);
}
enum kiln_status kiln_cpu_fwd_leaky_relu(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const float p[1] = { kiln_get_op_params_f32(dst, 0) };
    return map1(params, dst, f_leaky_relu, p);
}
enum kiln_status kiln_cpu_fwd_unary(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const int32_t op = kiln_get_op_params_i32(dst, 0);
    if (op < 0 || op >= KILN_UNARY_OP_COUNT) {
        kiln_set_error("unary: invalid unary op id %d", (int) op);
        return KILN_STATUS_INVALID_ARG;
    }
    return map1(params, dst, unary_fns[op], NULL);
}
