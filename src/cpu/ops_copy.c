/*
 * ops_copy.c — dup / cpy / cont (and cast, which is a cpy): copy the
 * elements of src0 into dst in logical row-major order, converting types.
 * Shapes may differ as long as the element counts match (ggml semantics).
 */
#include "ops_common.h"
#include "kernels.h"

void kiln_load_f32(enum kiln_type t, const char * p, size_t s, int64_t n, float * out) {
    if (t == KILN_TYPE_F32 && s == sizeof(float)) { memcpy(out, p, (size_t) n * sizeof(float)); return; }
    if (t == KILN_TYPE_F16 && s == sizeof(kiln_fp16_t)) { kiln_kernels()->f16_to_f32(n, (const kiln_fp16_t *) p, out); return; }
    if (t == KILN_TYPE_BF16 && s == sizeof(kiln_bf16_t)) { kiln_bf16_to_fp32_row((const kiln_bf16_t *) p, out, n); return; }
    for (int64_t i = 0; i < n; i++) out[i] = kiln_ld_f32(t, p + i * s);
}

void kiln_store_f32(enum kiln_type t, char * p, size_t s, int64_t n, const float * in) {
    if (t == KILN_TYPE_F32 && s == sizeof(float)) { memmove(p, in, (size_t) n * sizeof(float)); return; }
    if (t == KILN_TYPE_F16 && s == sizeof(kiln_fp16_t)) { kiln_kernels()->f32_to_f16(n, in, (kiln_fp16_t *) p); return; }
    if (t == KILN_TYPE_BF16 && s == sizeof(kiln_bf16_t)) { kiln_fp32_to_bf16_row_ref(in, (kiln_bf16_t *) p, n); return; }
    for (int64_t i = 0; i < n; i++) kiln_st_f32(t, p + i * s, in[i]);
}

enum kiln_status kiln_unsupported_types(const struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    kiln_set_error("%s: unsupported types: src0 %s, src1 %s, dst %s", kiln_op_name(dst->op),
                   a ? kiln_type_name(a->type) : "-", b ? kiln_type_name(b->type) : "-", kiln_type_name(dst->type));
    return KILN_STATUS_UNSUPPORTED;
}

/* Walks the elements of a tensor in logical order, from a flat index. */
struct walker {
    int64_t i0, i1, i2, i3;
    const struct kiln_tensor * t;
};
static inline void walker_init(struct walker * w, const struct kiln_tensor * t, int64_t k) {
    w->t = t;
    kiln_unravel_index(t, k, &w->i0, &w->i1, &w->i2, &w->i3);
}
static inline char * walker_ptr(const struct walker * w) {
    return (char *) kiln_elem_ptr(w->t, w->i0, w->i1, w->i2, w->i3);
}
static inline void walker_next(struct walker * w) {
    if (++w->i0 < w->t->ne[0]) return;
    w->i0 = 0;
    if (++w->i1 < w->t->ne[1]) return;
    w->i1 = 0;
    if (++w->i2 < w->t->ne[2]) return;
    w->i2 = 0;
    ++w->i3;
}

static bool rows_contiguous(const struct kiln_tensor * t) {
    return t->nb[0] == kiln_type_size(t->type) || t->ne[0] == kiln_blck_size(t->type);
}

/* Same type: bytes move unchanged. */
static enum kiln_status copy_same_type(const struct kiln_compute_params * params, const struct kiln_tensor * src, struct kiln_tensor * dst) {
    const enum kiln_type type = src->type;
    const size_t esz = kiln_type_size(type);
    const int64_t blck = kiln_blck_size(type);
    if (blck > 1) {
        /* blocks cannot be addressed one element at a time: whole rows only */
        if (kiln_are_same_shape(src, dst) && rows_contiguous(src) && rows_contiguous(dst)) {
            const int64_t nr = kiln_nrows(src);
            const size_t rs = kiln_row_size(type, src->ne[0]);
            int64_t r0, r1;
            kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
            for (int64_t r = r0; r < r1; r++) {
                int64_t i1, i2, i3;
                kiln_row_index(src, r, &i1, &i2, &i3);
                memcpy(kiln_row_ptr(dst, i1, i2, i3), kiln_row_ptr(src, i1, i2, i3), rs);
            }
            return KILN_STATUS_SUCCESS;
        }
        if (kiln_is_contiguous(src) && kiln_is_contiguous(dst)) {
            const int64_t nblk = kiln_nelements(src) / blck;
            int64_t b0, b1;
            kiln_split_rows(nblk, params->ith, params->nth, &b0, &b1);
            memcpy((char *) dst->data + b0 * esz, (const char *) src->data + b0 * esz, (size_t)(b1 - b0) * esz);
            return KILN_STATUS_SUCCESS;
        }
        kiln_set_error("%s: copying %s needs contiguous tensors of the same shape or contiguous tensors", kiln_op_name(dst->op), kiln_type_name(type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t ne00 = src->ne[0];
    if (kiln_are_same_shape(src, dst)) {
        const int64_t nr = kiln_nrows(src);
        int64_t r0, r1;
        kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
        const bool contig = src->nb[0] == esz && dst->nb[0] == esz;
        for (int64_t r = r0; r < r1; r++) {
            int64_t i1, i2, i3;
            kiln_row_index(src, r, &i1, &i2, &i3);
            const char * s = kiln_row_ptr(src, i1, i2, i3);
            char * d = kiln_row_ptr(dst, i1, i2, i3);
            if (contig) { memmove(d, s, (size_t) ne00 * esz); continue; }
            for (int64_t i0 = 0; i0 < ne00; i0++) memmove(d + i0 * dst->nb[0], s + i0 * src->nb[0], esz);
        }
        return KILN_STATUS_SUCCESS;
    }
    if (kiln_is_contiguous(src) && kiln_is_contiguous(dst)) {
        const int64_t n = kiln_nelements(src);
        int64_t e0, e1;
        kiln_split_rows(n, params->ith, params->nth, &e0, &e1);
        memmove((char *) dst->data + e0 * esz, (const char *) src->data + e0 * esz, (size_t)(e1 - e0) * esz);
        return KILN_STATUS_SUCCESS;
    }
    /* different shapes, any strides: walk src rows, follow dst flat index */
    const int64_t nr = kiln_nrows(src);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    if (r0 >= r1) return KILN_STATUS_SUCCESS;
    struct walker w;
    walker_init(&w, dst, r0 * ne00);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1, i2, i3);
        for (int64_t i0 = 0; i0 < ne00; i0++) {
            memmove(walker_ptr(&w), s + i0 * src->nb[0], esz);
            walker_next(&w);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* Different types: via f32 for float/quantized types, via double when an
 * integer or f64 type is involved (so i32 <-> i64 stays exact). */
static enum kiln_status copy_convert(const struct kiln_compute_params * params, const struct kiln_tensor * src, struct kiln_tensor * dst) {
    const enum kiln_type ts = src->type, td = dst->type;
    const bool sq = kiln_is_quantized(ts), dq = kiln_is_quantized(td);
    const int64_t ne00 = src->ne[0];
    if (sq || dq) {
        const struct kiln_type_traits * tts = kiln_get_type_traits(ts);
        const struct kiln_type_traits * ttd = kiln_get_type_traits(td);
        if ((sq && !tts->to_float) || (dq && !ttd->from_float_ref)) {
            kiln_set_error("%s: no conversion %s -> %s (the quantized type has no %s yet)", kiln_op_name(dst->op),
                           kiln_type_name(ts), kiln_type_name(td), sq && !tts->to_float ? "to_float" : "from_float");
            return KILN_STATUS_UNSUPPORTED;
        }
        if ((sq && !kiln_is_float_type(td) && !dq) || (dq && !kiln_is_float_type(ts) && !sq)) {
            kiln_set_error("%s: no conversion %s -> %s", kiln_op_name(dst->op), kiln_type_name(ts), kiln_type_name(td));
            return KILN_STATUS_UNSUPPORTED;
        }
        if (sq && !rows_contiguous(src)) {
            kiln_set_error("%s: quantized source rows must be contiguous", kiln_op_name(dst->op));
            return KILN_STATUS_UNSUPPORTED;
        }
        if (dq && (!kiln_is_contiguous(dst) || ne00 % ttd->blck_size != 0)) {
            kiln_set_error("%s: quantized destination must be contiguous and source rows (%lld) a multiple of the block size %lld",
                           kiln_op_name(dst->op), (long long) ne00, (long long) ttd->blck_size);
            return KILN_STATUS_UNSUPPORTED;
        }
    } else if (!kiln_is_elem_type(ts) || !kiln_is_elem_type(td)) {
        return kiln_unsupported_types(dst);
    }
    const bool via_f32 = (kiln_is_float_type(ts) || sq) && (kiln_is_float_type(td) || dq);
    const bool same_shape = kiln_are_same_shape(src, dst);
    const int64_t nr = kiln_nrows(src);
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    if (r0 >= r1) return KILN_STATUS_SUCCESS;
    float buf[KILN_CHUNK];
    struct walker w;
    const size_t dsz = kiln_type_size(td);
    const int64_t dblk = kiln_blck_size(td);
    /* a contiguous dst of another shape takes source row r at flat element
     * r * ne00 (a KV cache row written from [DK, heads, tokens]): written
     * as a row, not element by element */
    const bool flat = !same_shape && !dq && kiln_is_contiguous(dst);
    const bool direct = same_shape || flat;
    const size_t dstep = same_shape ? dst->nb[0] : dsz;
    if (!direct && !dq) walker_init(&w, dst, r0 * ne00);
    for (int64_t r = r0; r < r1; r++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, r, &i1, &i2, &i3);
        const char * s = kiln_row_ptr(src, i1, i2, i3);
        char * d = same_shape ? kiln_row_ptr(dst, i1, i2, i3) : flat ? (char *) dst->data + (size_t) (r * ne00) * dsz : NULL;
        if (!via_f32) {
            for (int64_t i0 = 0; i0 < ne00; i0++) {
                const double v = kiln_elem_get_f64(ts, s + i0 * src->nb[0]);
                char * p = direct ? d + i0 * dstep : walker_ptr(&w);
                kiln_elem_set_f64(td, p, v);
                if (!direct) walker_next(&w);
            }
            continue;
        }
        for (int64_t c = 0; c < ne00; c += KILN_CHUNK) {
            const int64_t n = KILN_MIN(KILN_CHUNK, ne00 - c);
            if (sq) {
                kiln_row_to_f32(ts, s + (c / kiln_blck_size(ts)) * kiln_type_size(ts), buf, n);
            } else {
                kiln_load_f32(ts, s + c * src->nb[0], src->nb[0], n, buf);
            }
            if (dq) {
                /* dst is contiguous: flat element index r*ne00 + c */
                const int64_t k = r * ne00 + c;
                kiln_row_from_f32(td, buf, (char *) dst->data + (k / dblk) * dsz, n);
            } else if (direct) {
                kiln_store_f32(td, d + c * dstep, dstep, n, buf);
            } else {
                for (int64_t j = 0; j < n; j++) {
                    kiln_st_f32(td, walker_ptr(&w), buf[j]);
                    walker_next(&w);
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

static enum kiln_status copy_fwd(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    if (kiln_nelements(src) != kiln_nelements(dst)) {
        kiln_set_error("%s: element counts differ (%lld vs %lld)", kiln_op_name(dst->op),
                       (long long) kiln_nelements(src), (long long) kiln_nelements(dst));
        return KILN_STATUS_INVALID_ARG;
    }
    if (src->type == dst->type) return copy_same_type(params, src, dst);
    return copy_convert(params, src, dst);
}

enum kiln_status kiln_cpu_fwd_dup(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return copy_fwd(params, dst); }
enum kiln_status kiln_cpu_fwd_cpy(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return copy_fwd(params, dst); }
enum kiln_status kiln_cpu_fwd_cont(const struct kiln_compute_params * params, struct kiln_tensor * dst) { return copy_fwd(params, dst); }
