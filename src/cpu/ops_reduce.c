/*
 * ops_reduce.c — reductions (sum, sum_rows, mean, argmax, count_equal,
 * repeat_back) and indexing / masking kernels (get_rows, get_rows_back,
 * diag, diag_mask_*, argsort). Shape-changing copies live in ops_shape.c.
 *
 * Sums accumulate in double per row, as ggml's ggml_float does, so results
 * do not depend on the thread count.
 */
#include "ops_common.h"

#include <math.h>

static double row_sum(enum kiln_type t, const char * p, size_t s, int64_t n) {
    double acc = 0.0;
    if (t == KILN_TYPE_F32 && s == sizeof(float)) {
        const float * x = (const float *) p;
        for (int64_t i = 0; i < n; i++) acc += (double) x[i];
        return acc;
    }
    for (int64_t i = 0; i < n; i++) acc += (double) kiln_ld_f32(t, p + i * s);
    return acc;
}

enum kiln_status kiln_cpu_fwd_sum(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || !kiln_is_float_type(dst->type)) return kiln_unsupported_types(dst);
    if (params->ith != 0) return KILN_STATUS_SUCCESS;
    double acc = 0.0;
    const int64_t nr = kiln_nrows(src);
    for (int64_t r = 0; r < nr && src->ne[0] > 0; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, r, &i1, &i2, &i3);
        acc += (double)(float) row_sum(src->type, kiln_row_ptr(src, i1, i2, i3), src->nb[0], src->ne[0]);
    }
    kiln_st_f32(dst->type, dst->data, (float) acc);
    return KILN_STATUS_SUCCESS;
}

static enum kiln_status sum_rows_impl(const struct kiln_compute_params * params, struct kiln_tensor * dst, bool mean) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || !kiln_is_float_type(dst->type)) return kiln_unsupported_types(dst);
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        float v = (float) row_sum(src->type, kiln_row_ptr(src, i1, i2, i3), src->nb[0], src->ne[0]);
        if (mean) v /= (float) src->ne[0];
        kiln_st_f32(dst->type, kiln_row_ptr(dst, i1, i2, i3), v);
    }
    return KILN_STATUS_SUCCESS;
}
enum kiln_status kiln_cpu_fwd_sum_rows(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return sum_rows_impl(params, dst, false); }
enum kiln_status kiln_cpu_fwd_mean(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return sum_rows_impl(params, dst, true); }

enum kiln_status kiln_cpu_fwd_argmax(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || dst->type != KILN_TYPE_I32) return kiln_unsupported_types(dst);
    const int64_t nr = src->ne[1];
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const char * p = kiln_row_ptr(src, r, 0, 0);
        /* the first maximum wins; NaNs never compare greater (ggml) */
        float best = -INFINITY;
        int32_t idx = 0;
        for (int64_t i = 0; i < src->ne[0]; i++) {
            const float v = kiln_ld_f32(src->type, p + i * src->nb[0]);
            if (v > best) { best = v; idx = (int32_t) i; }
        }
        *(int32_t *)((char *) dst->data + r * dst->nb[0]) = idx;
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_count_equal(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if (a->type != b->type || !kiln_is_elem_type(a->type) || dst->type != KILN_TYPE_I64) return kiln_unsupported_types(dst);
    if (params->ith != 0) return KILN_STATUS_SUCCESS;
    int64_t count = 0;
    const int64_t nr = kiln_nrows(a);
    const size_t esz = kiln_type_size(a->type);
    for (int64_t r = 0; r < nr; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(a, r, &i1, &i2, &i3);
        const char * pa = kiln_row_ptr(a, i1, i2, i3);
        const char * pb = kiln_row_ptr(b, i1, i2, i3);
        for (int64_t i = 0; i < a->ne[0]; i++) {
            const char * x = pa + i * a->nb[0];
            const char * y = pb + i * b->nb[0];
            if (a->type == KILN_TYPE_I32) count += *(const int32_t *) x == *(const int32_t *) y;
            else if (kiln_is_int_type(a->type)) count += memcmp(x, y, esz) == 0;
            else count += kiln_elem_get_f64(a->type, x) == kiln_elem_get_f64(a->type, y);
        }
    }
    *(int64_t *) dst->data = count;
    return KILN_STATUS_SUCCESS;
}

/* dst = sum of every repetition of dst's shape in src0 (thread 0 only).
 * Each output is accumulated in f32 over the repetitions in order (k3, k2,
 * k1, k0) and stored once, so f16/bf16 results round only at the end. */
enum kiln_status kiln_cpu_fwd_repeat_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || src->type != dst->type) return kiln_unsupported_types(dst);
    if (params->ith != 0) return KILN_STATUS_SUCCESS;
    const int64_t ne0 = dst->ne[0], ne1 = dst->ne[1], ne2 = dst->ne[2], ne3 = dst->ne[3];
    const bool empty = kiln_is_empty(src);
    const int64_t n0 = empty ? 0 : src->ne[0] / ne0, n1 = empty ? 0 : src->ne[1] / ne1;
    const int64_t n2 = empty ? 0 : src->ne[2] / ne2, n3 = empty ? 0 : src->ne[3] / ne3;
    for (int64_t i3 = 0; i3 < ne3; i3++)
    for (int64_t i2 = 0; i2 < ne2; i2++)
    for (int64_t i1 = 0; i1 < ne1; i1++) {
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < ne0; i0++) {
            float acc = 0.0f;
            for (int64_t k3 = 0; k3 < n3; k3++)
            for (int64_t k2 = 0; k2 < n2; k2++)
            for (int64_t k1 = 0; k1 < n1; k1++) {
                const char * s = kiln_row_ptr(src, k1 * ne1 + i1, k2 * ne2 + i2, k3 * ne3 + i3);
                for (int64_t k0 = 0; k0 < n0; k0++) acc += kiln_ld_f32(src->type, s + (k0 * ne0 + i0) * src->nb[0]);
            }
            kiln_st_f32(dst->type, d + i0 * dst->nb[0], acc);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* ---- indexing */

static bool read_index(const struct kiln_tensor * ids, int64_t i0, int64_t i1, int64_t i2, int64_t limit, int64_t * out) {
    const int64_t v = *(const int32_t *) kiln_elem_ptr(ids, i0, i1, i2, 0);
    *out = v;
    return v >= 0 && v < limit;
}

enum kiln_status kiln_cpu_fwd_get_rows(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src0 = dst->src[0];
    const struct kiln_tensor * src1 = dst->src[1];
    const enum kiln_type t0 = src0->type;
    const bool q = kiln_is_quantized(t0);
    if (src1->type != KILN_TYPE_I32) return kiln_unsupported_types(dst);
    if (q) {
        const struct kiln_type_traits * tt = kiln_get_type_traits(t0);
        if (!tt->to_float) {
            kiln_set_error("get_rows: no dequantization for %s yet", kiln_type_name(t0));
            return KILN_STATUS_UNSUPPORTED;
        }
        if (src0->nb[0] != kiln_type_size(t0) || dst->type != KILN_TYPE_F32) return kiln_unsupported_types(dst);
    } else if (!(t0 == dst->type && kiln_is_elem_type(t0)) && !(kiln_is_float_type(t0) && dst->type == KILN_TYPE_F32)) {
        return kiln_unsupported_types(dst);
    }
    const int64_t ne00 = src0->ne[0];
    const int64_t nr = kiln_nelements(src1);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    float buf[KILN_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i12 = r / (src1->ne[1] * src1->ne[0]);
        const int64_t i11 = (r - i12 * src1->ne[1] * src1->ne[0]) / src1->ne[0];
        const int64_t i10 = r - i12 * src1->ne[1] * src1->ne[0] - i11 * src1->ne[0];
        int64_t i01;
        if (!read_index(src1, i10, i11, i12, src0->ne[1], &i01)) {
            kiln_set_error("get_rows: index %lld at (%lld, %lld, %lld) is outside 0..%lld", (long long) i01,
                           (long long) i10, (long long) i11, (long long) i12, (long long) src0->ne[1] - 1);
            return KILN_STATUS_INVALID_ARG;
        }
        const char * s = kiln_row_ptr(src0, i01, i11, i12);
        char * d = kiln_row_ptr(dst, i10, i11, i12);
        if (t0 == dst->type) {
            const size_t esz = kiln_type_size(t0);
            if (src0->nb[0] == esz && dst->nb[0] == esz) memcpy(d, s, (size_t) ne00 * esz);
            else for (int64_t i = 0; i < ne00; i++) memcpy(d + i * dst->nb[0], s + i * src0->nb[0], esz);
            continue;
        }
        for (int64_t c = 0; c < ne00; c += KILN_CHUNK) {
            const int64_t n = KILN_MIN(KILN_CHUNK, ne00 - c);
            if (q) kiln_row_to_f32(t0, s + (c / kiln_blck_size(t0)) * kiln_type_size(t0), buf, n);
            else   kiln_load_f32(t0, s + c * src0->nb[0], src0->nb[0], n, buf);
            kiln_store_f32(dst->type, d + c * dst->nb[0], dst->nb[0], n, buf);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* dst[b[i]] += a[i] for every index, in index order (thread 0 only) */
enum kiln_status kiln_cpu_fwd_get_rows_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src0 = dst->src[0];
    const struct kiln_tensor * src1 = dst->src[1];
    if (!kiln_is_float_type(src0->type) || src1->type != KILN_TYPE_I32 || dst->type != KILN_TYPE_F32) return kiln_unsupported_types(dst);
    if (params->ith != 0) return KILN_STATUS_SUCCESS;
    const int64_t nc = dst->ne[0];
    for (int64_t i2 = 0; i2 < dst->ne[2]; i2++) {
        for (int64_t r = 0; r < dst->ne[1]; r++) {
            for (int64_t i = 0; i < nc; i++) *(float *)((char *) dst->data + r * dst->nb[1] + i2 * dst->nb[2] + i * dst->nb[0]) = 0.0f;
        }
    }
    for (int64_t i2 = 0; i2 < src1->ne[1]; i2++) {
        for (int64_t i = 0; i < src1->ne[0]; i++) {
            int64_t r;
            if (!read_index(src1, i, i2, 0, dst->ne[1], &r)) {
                kiln_set_error("get_rows_back: index %lld at (%lld, %lld) is outside 0..%lld", (long long) r, (long long) i,
                               (long long) i2, (long long) dst->ne[1] - 1);
                return KILN_STATUS_INVALID_ARG;
            }
            const char * s = kiln_row_ptr(src0, i, i2, 0);
            char * d = (char *) dst->data + r * dst->nb[1] + i2 * dst->nb[2];
            for (int64_t j = 0; j < nc; j++) {
                *(float *)(d + j * dst->nb[0]) += kiln_ld_f32(src0->type, s + j * src0->nb[0]);
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_diag(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_elem_type(src->type) || src->type != dst->type) return kiln_unsupported_types(dst);
    if (params->ith != 0) return KILN_STATUS_SUCCESS;
    const size_t esz = kiln_type_size(dst->type);
    for (int64_t i3 = 0; i3 < dst->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < dst->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < dst->ne[1]; i1++) {
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) memset(d + i0 * dst->nb[0], 0, esz);
        memcpy(d + i1 * dst->nb[0], kiln_elem_ptr(src, i1, 0, i2, i3), esz);
    }
    return KILN_STATUS_SUCCESS;
}

/* dst = src0 with elements i0 > n_past + i1 replaced by value */
static enum kiln_status diag_mask(const struct kiln_compute_params * params, struct kiln_tensor * dst, float value) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_float_type(src->type) || src->type != dst->type) return kiln_unsupported_types(dst);
    const int64_t n_past = kiln_get_op_params_i32(dst, 0);
    const int64_t ne0 = dst->ne[0];
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    float buf[KILN_CHUNK];
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1, i2, i3);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t c = 0; c < ne0; c += KILN_CHUNK) {
            const int64_t n = KILN_MIN(KILN_CHUNK, ne0 - c);
            kiln_load_f32(src->type, s + c * src->nb[0], src->nb[0], n, buf);
            for (int64_t j = 0; j < n; j++) if (c + j > n_past + i1) buf[j] = value;
            kiln_store_f32(dst->type, d + c * dst->nb[0], dst->nb[0], n, buf);
        }
    }
    return KILN_STATUS_SUCCESS;
}
enum kiln_status kiln_cpu_fwd_diag_mask_inf(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return diag_mask(params, dst, -INFINITY); }
enum kiln_status kiln_cpu_fwd_diag_mask_zero(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return diag_mask(params, dst, 0.0f); }

/* ---- argsort: heap sort on (value, index) pairs. The order is total (ties
 * broken by index, NaN sorts above everything), so the result is unique:
 * it does not depend on the algorithm or the thread count. */

struct sort_row { const char * p; size_t s; enum kiln_type t; bool desc; };

static inline double sort_val(const struct sort_row * r, int32_t i) {
    if (r->t == KILN_TYPE_F32) return *(const float *)(r->p + (size_t) i * r->s);
    return kiln_elem_get_f64(r->t, r->p + (size_t) i * r->s);
}
/* true when element i goes before element j */
static inline bool sort_before(const struct sort_row * r, int32_t i, int32_t j) {
    const double a = sort_val(r, i), b = sort_val(r, j);
    const bool an = isnan(a), bn = isnan(b);
    if (an || bn) {
        if (an && bn) return i < j;
        /* NaN is the largest value */
        return r->desc ? an : bn;
    }
    if (a != b) return r->desc ? a > b : a < b;
    return i < j;
}
static void sift_down(const struct sort_row * r, int32_t * h, int64_t start, int64_t n) {
    int64_t root = start;
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= n) return;
        /* max-heap with respect to "goes after" */
        if (child + 1 < n && sort_before(r, h[child], h[child + 1])) child++;
        if (!sort_before(r, h[root], h[child])) return;
        const int32_t t = h[root]; h[root] = h[child]; h[child] = t;
        root = child;
    }
}

enum kiln_status kiln_cpu_fwd_argsort(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (!kiln_is_elem_type(src->type) || dst->type != KILN_TYPE_I32) return kiln_unsupported_types(dst);
    if (dst->nb[0] != sizeof(int32_t)) {
        kiln_set_error("argsort: dst rows must be contiguous");
        return KILN_STATUS_UNSUPPORTED;
    }
    const bool desc = kiln_get_op_params_i32(dst, 0) == KILN_SORT_ORDER_DESC;
    const int64_t n = src->ne[0];
    const int64_t nr = kiln_nrows(src);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, r, &i1, &i2, &i3);
        const struct sort_row row = { kiln_row_ptr(src, i1, i2, i3), src->nb[0], src->type, desc };
        int32_t * h = (int32_t *) kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t i = 0; i < n; i++) h[i] = (int32_t) i;
        for (int64_t i = n / 2 - 1; i >= 0; i--) sift_down(&row, h, i, n);
        for (int64_t end = n - 1; end > 0; end--) {
            const int32_t t = h[0]; h[0] = h[end]; h[end] = t;
            sift_down(&row, h, 0, end);
        }
    }
    return KILN_STATUS_SUCCESS;
}
