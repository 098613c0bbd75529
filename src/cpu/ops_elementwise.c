/*
 * ops_elementwise.c — two-input elementwise kernels: add, add1, sub, mul,
 * div (src1 broadcasts to src0 in every dim), silu_back, acc, set, and the
 * custom map ops.
 *
 * Types: src0 and dst F32/F16/BF16 (add: also quantized through to_float /
 * from_float, for add_cast), src1 F32/F16/BF16; math in f32 like ggml.
 */
#include "ops_common.h"
#include "kernels.h"
#include "../core/op_params_elem.h"

#include <math.h>

typedef void (*bin_fn)(float * d, const float * a, const float * b, int64_t n);

/* add and mul go through the kernel table (exact in every ISA) */
static void b_add(float * d, const float * a, const float * b, int64_t n) { kiln_kernels()->f32_add(n, a, b, d); }
static void b_sub(float * d, const float * a, const float * b, int64_t n) { for (int64_t i = 0; i < n; i++) d[i] = a[i] - b[i]; }
static void b_mul(float * d, const float * a, const float * b, int64_t n) { kiln_kernels()->f32_mul(n, a, b, d); }
static void b_div(float * d, const float * a, const float * b, int64_t n) { for (int64_t i = 0; i < n; i++) d[i] = a[i] / b[i]; }
/* a = x, b = dy: d silu(x)/dx * dy */
static void b_silu_back(float * d, const float * a, const float * b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const float s = 1.0f / (1.0f + expf(-a[i]));
        d[i] = b[i] * s * (1.0f + a[i] * (1.0f - s));
    }
}

static bool quant_ok(enum kiln_type t, bool to) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(t);
    return tt && tt->is_quantized && (to ? tt->to_float != NULL : tt->from_float_ref != NULL);
}

static enum kiln_status binary(const struct kiln_compute_params * params, struct kiln_tensor * dst, bin_fn fn) {
    const struct kiln_tensor * src0 = dst->src[0];
    const struct kiln_tensor * src1 = dst->src[1];
    const bool q0 = kiln_is_quantized(src0->type), qd = kiln_is_quantized(dst->type);
    if (!(kiln_is_float_type(src0->type) || (q0 && quant_ok(src0->type, true))) || !kiln_is_float_type(src1->type) ||
        !(kiln_is_float_type(dst->type) || (qd && quant_ok(dst->type, false)))) {
        return kiln_unsupported_types(dst);
    }
    if ((q0 && src0->nb[0] != kiln_type_size(src0->type)) || (qd && dst->nb[0] != kiln_type_size(dst->type))) {
        kiln_set_error("%s: quantized rows must be contiguous", kiln_op_name(dst->op));
        return KILN_STATUS_UNSUPPORTED;
    }
    if (!kiln_are_same_shape(src0, dst) || !kiln_can_repeat(src1, src0)) {
        kiln_set_error("%s: shapes do not match", kiln_op_name(dst->op));
        return KILN_STATUS_INVALID_ARG;
    }
    const int64_t ne0 = dst->ne[0];
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1], ne12 = src1->ne[2], ne13 = src1->ne[3];
    const size_t nb10 = src1->nb[0];
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    const bool fast = src0->type == KILN_TYPE_F32 && src1->type == KILN_TYPE_F32 && dst->type == KILN_TYPE_F32 &&
                      src0->nb[0] == sizeof(float) && nb10 == sizeof(float) && dst->nb[0] == sizeof(float) && ne10 == ne0;
    float ba[KILN_CHUNK], bb[KILN_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const char * s0 = kiln_row_ptr(src0, i1, i2, i3);
        const char * s1 = kiln_row_ptr(src1, i1 % ne11, i2 % ne12, i3 % ne13);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        if (fast) { fn((float *) d, (const float *) s0, (const float *) s1, ne0); continue; }
        for (int64_t c = 0; c < ne0; c += KILN_CHUNK) {
            const int64_t n = KILN_MIN(KILN_CHUNK, ne0 - c);
            if (q0) kiln_row_to_f32(src0->type, s0 + (c / kiln_blck_size(src0->type)) * kiln_type_size(src0->type), ba, n);
            else    kiln_load_f32(src0->type, s0 + c * src0->nb[0], src0->nb[0], n, ba);
            if (ne10 == ne0) {
                kiln_load_f32(src1->type, s1 + c * nb10, nb10, n, bb);
            } else {
                int64_t k = c % ne10;
                for (int64_t j = 0; j < n; j++) {
                    bb[j] = kiln_ld_f32(src1->type, s1 + k * nb10);
                    if (++k == ne10) k = 0;
                }
            }
            fn(ba, ba, bb, n);
            if (qd) kiln_row_from_f32(dst->type, ba, d + (c / kiln_blck_size(dst->type)) * kiln_type_size(dst->type), n);
            else    kiln_store_f32(dst->type, d + c * dst->nb[0], dst->nb[0], n, ba);
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_add (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_add); }
enum kiln_status kiln_cpu_fwd_add1(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_add); }
enum kiln_status kiln_cpu_fwd_sub (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_sub); }
enum kiln_status kiln_cpu_fwd_mul (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_mul); }
enum kiln_status kiln_cpu_fwd_div (const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_div); }
enum kiln_status kiln_cpu_fwd_silu_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return binary(params, dst, b_silu_back); }

/* ---- acc / set: dst = src0, then a strided view of dst (b's shape,
 * strides nb1..nb3 and a byte offset from op_params) gets src1 added / set */

static void copy_contiguous_split(const struct kiln_compute_params * params, const struct kiln_tensor * src0, struct kiln_tensor * dst) {
    const size_t n = kiln_nbytes(dst);
    const size_t per = (n + (size_t) params->nth - 1) / (size_t) params->nth;
    const size_t b0 = KILN_MIN(n, per * (size_t) params->ith);
    const size_t b1 = KILN_MIN(n, b0 + per);
    if (b1 > b0) memcpy((char *) dst->data + b0, (const char *) src0->data + b0, b1 - b0);
}

static enum kiln_status acc_or_set(const struct kiln_compute_params * params, struct kiln_tensor * dst, bool is_acc) {
    const struct kiln_tensor * src0 = dst->src[0];
    const struct kiln_tensor * src1 = dst->src[1];
    const size_t nb1 = (size_t) kiln_get_op_params_i32(dst, 0);
    const size_t nb2 = (size_t) kiln_get_op_params_i32(dst, 1);
    const size_t nb3 = (size_t) kiln_get_op_params_i32(dst, 2);
    const size_t offset = (size_t) kiln_get_op_params_i32(dst, 3);
    const bool inplace = kiln_get_op_params_i32(dst, 4) != 0;
    if (is_acc ? (src0->type != KILN_TYPE_F32 || src1->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32)
               : (src0->type != src1->type || src0->type != dst->type || !kiln_is_elem_type(src0->type))) {
        return kiln_unsupported_types(dst);
    }
    if (!kiln_is_contiguous(src0) || !kiln_is_contiguous(dst)) {
        kiln_set_error("%s: src0 and dst must be contiguous", kiln_op_name(dst->op));
        return KILN_STATUS_UNSUPPORTED;
    }
    if (!inplace && dst->data != src0->data) {
        copy_contiguous_split(params, src0, dst);
        kiln_barrier(params);
    }
    const size_t esz = kiln_type_size(dst->type);
    const int64_t ne10 = src1->ne[0];
    const int64_t nr = kiln_nrows(src1);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(src1, r, &i1, &i2, &i3);
        const size_t off = offset + (size_t) i3 * nb3 + (size_t) i2 * nb2 + (size_t) i1 * nb1;
        char * d = (char *) dst->data + off;
        const char * s1 = kiln_row_ptr(src1, i1, i2, i3);
        if (is_acc) {
            const float * s0 = (const float *)((const char *) src0->data + off);
            for (int64_t i0 = 0; i0 < ne10; i0++) {
                ((float *) d)[i0] = s0[i0] + *(const float *)(s1 + i0 * src1->nb[0]);
            }
        } else {
            for (int64_t i0 = 0; i0 < ne10; i0++) memcpy(d + i0 * esz, s1 + i0 * src1->nb[0], esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_acc(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return acc_or_set(params, dst, true); }
enum kiln_status kiln_cpu_fwd_set(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return acc_or_set(params, dst, false); }

/* ---- custom maps: threads ith >= n_tasks sit this node out */

static int custom_tasks(int n_tasks, int nth) {
    return n_tasks == KILN_N_TASKS_MAX ? nth : KILN_MIN(n_tasks, nth);
}

enum kiln_status kiln_cpu_fwd_map_custom1(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    struct kiln_map_custom1_op_params p;
    memcpy(&p, dst->op_params, sizeof(p));
    const int nt = custom_tasks(p.n_tasks, params->nth);
    if (params->ith < nt) p.fun(dst, dst->src[0], params->ith, nt, p.userdata);
    return KILN_STATUS_SUCCESS;
}
enum kiln_status kiln_cpu_fwd_map_custom2(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    struct kiln_map_custom2_op_params p;
    memcpy(&p, dst->op_params, sizeof(p));
    const int nt = custom_tasks(p.n_tasks, params->nth);
    if (params->ith < nt) p.fun(dst, dst->src[0], dst->src[1], params->ith, nt, p.userdata);
    return KILN_STATUS_SUCCESS;
}
enum kiln_status kiln_cpu_fwd_map_custom3(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    struct kiln_map_custom3_op_params p;
    memcpy(&p, dst->op_params, sizeof(p));
    const int nt = custom_tasks(p.n_tasks, params->nth);
    if (params->ith < nt) p.fun(dst, dst->src[0], dst->src[1], dst->src[2], params->ith, nt, p.userdata);
    return KILN_STATUS_SUCCESS;
}
