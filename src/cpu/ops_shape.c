/*
 * ops_shape.c — kernels that rearrange elements into a new shape: repeat,
 * concat, pad, pad_reflect_1d, upscale (nearest), and arange.
 */
#include "ops_common.h"

/* dst = src0 tiled: dst[i] = src0[i mod ne0] (any element type) */
enum kiln_status kiln_cpu_fwd_repeat(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (src->type != dst->type || !kiln_is_elem_type(src->type)) return kiln_unsupported_types(dst);
    const size_t esz = kiln_type_size(dst->type);
    const int64_t ne0 = dst->ne[0], ne00 = src->ne[0];
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    const bool contig = src->nb[0] == esz && dst->nb[0] == esz;
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1 % src->ne[1], i2 % src->ne[2], i3 % src->ne[3]);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        if (contig) {
            for (int64_t k = 0; k < ne0; k += ne00) memcpy(d + k * esz, s, (size_t) ne00 * esz);
            continue;
        }
        for (int64_t i0 = 0; i0 < ne0; i0++) memcpy(d + i0 * dst->nb[0], s + (i0 % ne00) * src->nb[0], esz);
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_concat(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if (a->type != dst->type || b->type != dst->type || !kiln_is_elem_type(dst->type)) return kiln_unsupported_types(dst);
    const int dim = kiln_get_op_params_i32(dst, 0);
    if (dim < 0 || dim > 3) { kiln_set_error("concat: dim %d outside 0..3", dim); return KILN_STATUS_INVALID_ARG; }
    const size_t esz = kiln_type_size(dst->type);
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i[4];
        kiln_row_index(dst, r, &i[1], &i[2], &i[3]);
        char * d = kiln_row_ptr(dst, i[1], i[2], i[3]);
        for (i[0] = 0; i[0] < dst->ne[0]; i[0]++) {
            const char * s;
            if (i[dim] < a->ne[dim]) {
                s = kiln_elem_ptr(a, i[0], i[1], i[2], i[3]);
            } else {
                int64_t j[4] = { i[0], i[1], i[2], i[3] };
                j[dim] -= a->ne[dim];
                s = kiln_elem_ptr(b, j[0], j[1], j[2], j[3]);
            }
            memcpy(d + i[0] * dst->nb[0], s, esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* zeros after the end of each dim */
enum kiln_status kiln_cpu_fwd_pad(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (src->type != dst->type || !kiln_is_elem_type(src->type)) return kiln_unsupported_types(dst);
    const size_t esz = kiln_type_size(dst->type);
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        const bool in_row = i1 < src->ne[1] && i2 < src->ne[2] && i3 < src->ne[3];
        const char * s = in_row ? kiln_row_ptr(src, i1, i2, i3) : NULL;
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            if (in_row && i0 < src->ne[0]) memcpy(d + i0 * dst->nb[0], s + i0 * src->nb[0], esz);
            else memset(d + i0 * dst->nb[0], 0, esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* dst row = reflect(p0) | src row | reflect(p1), edges not repeated */
enum kiln_status kiln_cpu_fwd_pad_reflect_1d(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (src->type != dst->type || !kiln_is_float_type(src->type)) return kiln_unsupported_types(dst);
    const int64_t p0 = kiln_get_op_params_i32(dst, 0);
    const int64_t ne00 = src->ne[0];
    const size_t esz = kiln_type_size(dst->type);
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1, i2, i3);
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            int64_t j = i0 - p0;
            if (j < 0) j = -j;
            else if (j >= ne00) j = 2 * (ne00 - 1) - j;
            memcpy(d + i0 * dst->nb[0], s + j * src->nb[0], esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* nearest neighbour, with ggml's float scale factors (ne / ne_src) */
enum kiln_status kiln_cpu_fwd_upscale(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (src->type != dst->type || !kiln_is_elem_type(src->type)) return kiln_unsupported_types(dst);
    const float sf0 = (float) dst->ne[0] / (float) src->ne[0];
    const float sf1 = (float) dst->ne[1] / (float) src->ne[1];
    const float sf2 = (float) dst->ne[2] / (float) src->ne[2];
    const float sf3 = (float) dst->ne[3] / (float) src->ne[3];
    const size_t esz = kiln_type_size(dst->type);
    const int64_t nr = kiln_nrows(dst);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(dst, r, &i1, &i2, &i3);
        const int64_t i01 = (int64_t)((float) i1 / sf1);
        const int64_t i02 = (int64_t)((float) i2 / sf2);
        const int64_t i03 = (int64_t)((float) i3 / sf3);
        const char * s = kiln_row_ptr(src, KILN_MIN(i01, src->ne[1] - 1), KILN_MIN(i02, src->ne[2] - 1), KILN_MIN(i03, src->ne[3] - 1));
        char * d = kiln_row_ptr(dst, i1, i2, i3);
        for (int64_t i0 = 0; i0 < dst->ne[0]; i0++) {
            const int64_t i00 = KILN_MIN((int64_t)((float) i0 / sf0), src->ne[0] - 1);
            memcpy(d + i0 * dst->nb[0], s + i00 * src->nb[0], esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_arange(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    if (dst->type != KILN_TYPE_F32) return kiln_unsupported_types(dst);
    const float start = kiln_get_op_params_f32(dst, 0);
    const float step = kiln_get_op_params_f32(dst, 2);
    const int64_t n = dst->ne[0];
    int64_t e0, e1;
    kiln_split_rows(n, params->ith, params->nth, &e0, &e1);
    for (int64_t i = e0; i < e1; i++) *(float *)((char *) dst->data + i * dst->nb[0]) = start + step * (float) i;
    return KILN_STATUS_SUCCESS;
}
