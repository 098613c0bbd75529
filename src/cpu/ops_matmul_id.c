/*
 * ops_matmul_id.c — forward kernels of mul_mat_id (mixture of experts) and
 * out_prod.
 *
 * mul_mat_id groups the (slot, token) rows by expert (thread 0, in slot-
 * then-token order, so the grouping is the same for any thread count), then
 * hands out blocks of one expert's rows x weight rows by the chunk counter.
 *
 * Q4_K experts repacked to the x8 layout (repack.h; llama.cpp's AVX2 build
 * repacks 3-D expert tensors too, when ne[1] % 8 == 0): every activation row
 * is quantized to q8_K by the plain row quantizer and each group of 8 weight
 * rows is summed in the x8 mat-vec order, one row at a time, as llama.cpp's
 * mul_mat_id over repacked weights does (its gemv per row, never its gemm).
 */
#include "ops_matmul.h"
#include "repack.h"

#include <limits.h>
#include <math.h>

#define ID_BLOCK0 32  /* weight rows per chunk */
#define ID_BLOCK1 16  /* activation rows (slot, token) per chunk */

struct id_layout {
    size_t off_map;    /* int32 offsets[n_as + 1] */
    size_t off_ent;    /* int32 entries[2 * n_used * n_tok]: (slot, token) */
    size_t off_err;    /* int32 bad id flag */
    size_t off_unpack; /* repacked experts without a group kernel: one plain row per thread */
    size_t total;
};

static void id_layout(const struct kiln_tensor * dst, const struct kiln_mm_act * act, int nth, struct id_layout * l) {
    const int64_t n_as = dst->src[0]->ne[2];
    const int64_t n_rows = dst->src[2]->ne[0] * dst->src[2]->ne[1];
    const size_t unpack = kiln_repacked_rows(dst->src[0]) ? KILN_PAD(dst->src[0]->nb[1], KILN_MM_ALIGN) : 0;
    l->off_map = kiln_mm_act_work(act, nth);
    l->off_map = KILN_PAD(l->off_map, KILN_MM_ALIGN);
    l->off_ent = l->off_map + KILN_PAD((size_t)(n_as + 1) * sizeof(int32_t), KILN_MM_ALIGN);
    l->off_err = l->off_ent + KILN_PAD((size_t) n_rows * 2 * sizeof(int32_t), KILN_MM_ALIGN);
    l->off_unpack = l->off_err + KILN_MM_ALIGN;
    l->total = l->off_unpack + unpack * (size_t) nth;
}

/* the activations' plan: every row through the plain quantizer (no 4-row
 * q8_K rule: llama.cpp's repacked mul_mat_id quantizes row by row) */
static bool id_act_plan(const struct kiln_kernels * k, const struct kiln_tensor * dst, struct kiln_mm_act * act) {
    if (!kiln_mm_act_plan(k, "mul_mat_id", dst->src[0], dst->src[1], act)) return false;
    act->x4_rule = false;
    return true;
}

size_t kiln_cpu_work_mul_mat_id(const struct kiln_tensor * dst, int n_threads) {
    struct kiln_mm_act act;
    if (!id_act_plan(kiln_kernels(), dst, &act)) return 0;
    struct id_layout l;
    id_layout(dst, &act, n_threads, &l);
    return l.total;
}

static int32_t id_at(const struct kiln_tensor * ids, int64_t s, int64_t t) {
    return *(const int32_t *) ((const char *) ids->data + s * ids->nb[0] + t * ids->nb[1]);
}

enum kiln_status kiln_mm_id_sort(const struct kiln_compute_params * params, const char * op, const struct kiln_tensor * ids,
                                 int64_t n_as, int32_t * offs, int32_t * ent, int32_t * err) {
    const int64_t n_used = ids->ne[0], n_tok = ids->ne[1];
    if (params->ith == 0) {
        err[0] = -1;
        for (int64_t e = 0; e <= n_as; e++) offs[e] = 0;
        for (int64_t t = 0; t < n_tok && err[0] < 0; t++) {
            for (int64_t s = 0; s < n_used; s++) {
                const int32_t id = id_at(ids, s, t);
                if (id < 0 || id >= n_as) { err[0] = id < 0 ? INT32_MAX : id; err[1] = (int32_t) (s + n_used * t); break; }
                offs[id + 1]++;
            }
        }
        if (err[0] < 0) {
            for (int64_t e = 0; e < n_as; e++) offs[e + 1] += offs[e];
            for (int64_t t = 0; t < n_tok; t++) {
                for (int64_t s = 0; s < n_used; s++) {
                    const int32_t pos = offs[id_at(ids, s, t)]++;
                    ent[2 * pos] = (int32_t) s;
                    ent[2 * pos + 1] = (int32_t) t;
                }
            }
            for (int64_t e = n_as; e > 0; e--) offs[e] = offs[e - 1];
            offs[0] = 0;
        }
        kiln_chunk_reset(params, 0);
    }
    kiln_barrier(params);
    if (err[0] >= 0) {
        kiln_set_error("%s: ids[%d] = %d is not an expert index in [0, %lld)", op, (int) err[1],
                       err[0] == INT32_MAX ? -1 : (int) err[0], (long long) n_as);
        return KILN_STATUS_INVALID_ARG;
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_mul_mat_id(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * as  = dst->src[0];
    const struct kiln_tensor * b   = dst->src[1];
    const struct kiln_tensor * ids = dst->src[2];
    const struct kiln_kernels * k = kiln_kernels();
    if (dst->type != KILN_TYPE_F32 || dst->nb[0] != sizeof(float)) {
        kiln_set_error("mul_mat_id: dst must be contiguous f32");
        return KILN_STATUS_UNSUPPORTED;
    }
    if (as->nb[0] != kiln_type_size(as->type)) {
        kiln_set_error("mul_mat_id: the rows of as must be contiguous (kiln_cont it first)");
        return KILN_STATUS_UNSUPPORTED;
    }
    const int rep = kiln_repacked_rows(as);
    if (kiln_tensor_is_repacked(as) && (as->type != KILN_TYPE_Q4_K || rep <= 0 || as->ne[1] % rep != 0)) {
        kiln_set_error("mul_mat_id: expert weights '%s' are repacked in a layout it does not read (Q4_K x8 with whole groups only)", as->name);
        return KILN_STATUS_UNSUPPORTED;
    }
    struct kiln_mm_act act;
    if (!id_act_plan(k, dst, &act)) return KILN_STATUS_UNSUPPORTED;
    struct id_layout l;
    id_layout(dst, &act, params->nth, &l);
    if (l.total > params->wsize) {
        kiln_set_error("mul_mat_id: work buffer of %zu bytes is too small (%zu needed)", params->wsize, l.total);
        return KILN_STATUS_FAILED;
    }

    const int64_t K = as->ne[0], N = as->ne[1], n_as = as->ne[2];
    const int64_t ne11 = b->ne[1];
    int32_t * offs = (int32_t *) ((char *) params->wdata + l.off_map);
    int32_t * ent  = (int32_t *) ((char *) params->wdata + l.off_ent);
    int32_t * err  = (int32_t *) ((char *) params->wdata + l.off_err);

    kiln_mm_act_convert(params, k, b, &act);
    {
        const enum kiln_status st = kiln_mm_id_sort(params, "mul_mat_id", ids, n_as, offs, ent, err);
        if (st != KILN_STATUS_SUCCESS) return st;
    }

    const int64_t nbl0 = (N + ID_BLOCK0 - 1) / ID_BLOCK0;
    int64_t nchunks = 0;
    for (int64_t e = 0; e < n_as; e++) nchunks += nbl0 * ((offs[e + 1] - offs[e] + ID_BLOCK1 - 1) / ID_BLOCK1);
    if (nchunks > INT_MAX) nchunks = INT_MAX;
    const kiln_vec_dot_t dot = k->vec_dot[as->type];
    const kiln_vec_dot_t dot8 = rep ? k->vec_dot_x4[as->type] : NULL;
    const int shift = rep ? kiln_repack_scale_shift(as) : 0;
    const float unshift = ldexpf(1.0f, -shift);
    char * unpacked = (char *) params->wdata + l.off_unpack + (rep ? KILN_PAD(as->nb[1], KILN_MM_ALIGN) * (size_t) params->ith : 0);

    int64_t c;
    while ((c = kiln_chunk_next(params)) < nchunks) {
        int64_t e = 0, local = c;
        for (; e < n_as; e++) {
            const int64_t n = nbl0 * ((offs[e + 1] - offs[e] + ID_BLOCK1 - 1) / ID_BLOCK1);
            if (local < n) break;
            local -= n;
        }
        const int64_t i0 = (local % nbl0) * ID_BLOCK0, i1 = KILN_MIN(N, i0 + ID_BLOCK0);
        const int64_t q0 = offs[e] + (local / nbl0) * ID_BLOCK1, q1 = KILN_MIN((int64_t) offs[e + 1], q0 + ID_BLOCK1);
        const char * a = (const char *) as->data + e * as->nb[2];
        for (int64_t q = q0; q < q1; q++) {
            const int64_t s = ent[2 * q], t = ent[2 * q + 1];
            const char * brow = kiln_mm_act_row(params, b, &act, s % ne11, t, 0);
            float * drow = (float *) ((char *) dst->data + s * dst->nb[1] + t * dst->nb[2]);
            if (!rep) {
                for (int64_t i = i0; i < i1; i++) dot(K, &drow[i], a + i * as->nb[1], brow);
                continue;
            }
            /* i0 is a multiple of ID_BLOCK0 (of rep) and N of rep: whole groups */
            for (int64_t i = i0; i < i1; i += rep) {
                const char * group = a + i * as->nb[1];
                if (dot8) {
                    dot8(K, &drow[i], group, brow);
                    if (shift) {
                        for (int r = 0; r < rep; r++) drow[i + r] *= unshift;
                    }
                    continue;
                }
                for (int r = 0; r < rep; r++) {
                    kiln_repack_unpack_row(as->type, shift, group, r, K, unpacked);
                    dot(K, &drow[i + r], unpacked, brow);
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* ---- out_prod: dst[i, j, i2, i3] = sum_k a[i, k, i2/r2, i3/r3] * b[j, k, i2, i3]
 * Each dst row is built by axpy over k in order: deterministic. Rows of a
 * that are not contiguous f32 are converted into a per-thread f32 row. */

#define OP_BLOCK 8 /* dst rows per chunk */
#define OPQ_BLOCK 64 /* dst rows per chunk when rows of a are converted */

static bool op_a_direct(const struct kiln_tensor * a) {
    return a->type == KILN_TYPE_F32 && a->nb[0] == sizeof(float);
}

size_t kiln_cpu_work_out_prod(const struct kiln_tensor * dst, int n_threads) {
    const struct kiln_tensor * a = dst->src[0];
    if (op_a_direct(a)) return 0;
    return KILN_PAD((size_t) a->ne[0] * sizeof(float), KILN_MM_ALIGN) * (size_t) n_threads;
}

enum kiln_status kiln_cpu_fwd_out_prod(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    const struct kiln_kernels * k = kiln_kernels();
    if (dst->type != KILN_TYPE_F32 || dst->nb[0] != sizeof(float)) {
        kiln_set_error("out_prod: dst must be contiguous f32");
        return KILN_STATUS_UNSUPPORTED;
    }
    const bool direct = op_a_direct(a);
    const struct kiln_type_traits * tt = kiln_get_type_traits(a->type);
    const bool a_rows = a->nb[0] == kiln_type_size(a->type);
    /* contiguous rows convert with the type's to_float; strided rows only
     * element by element, which needs a non-block type */
    const bool convertible = a_rows ? (tt && tt->to_float) : kiln_blck_size(a->type) == 1;
    if (!direct && !convertible) {
        kiln_set_error("out_prod: a of type %s is not supported (no conversion to f32)", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    if (!direct && kiln_cpu_work_out_prod(dst, params->nth) > params->wsize) {
        kiln_set_error("out_prod: work buffer too small");
        return KILN_STATUS_FAILED;
    }
    const int64_t M = a->ne[0], K = a->ne[1];
    const int64_t P = b->ne[0], ne2 = b->ne[2], ne3 = b->ne[3];
    const int64_t r2 = ne2 / a->ne[2], r3 = ne3 / a->ne[3];
    float * tmp = direct ? NULL : (float *) ((char *) params->wdata + KILN_PAD((size_t) M * sizeof(float), KILN_MM_ALIGN) * (size_t) params->ith);

    if (params->ith == 0) kiln_chunk_reset(params, 0);
    kiln_barrier(params);
    if (!direct) {
        /* converted rows: each row of a is converted once per block of
         * OPQ_BLOCK dst rows and added into all of them (the order of the sum
         * over k per dst element is the same as below) */
        const int64_t nblk = (P + OPQ_BLOCK - 1) / OPQ_BLOCK;
        const int64_t nchunks = nblk * ne2 * ne3;
        int64_t c;
        while ((c = kiln_chunk_next(params)) < nchunks) {
            const int64_t jb = c % nblk, i2 = (c / nblk) % ne2, i3 = c / (nblk * ne2);
            const int64_t j0 = jb * OPQ_BLOCK, j1 = KILN_MIN(P, j0 + OPQ_BLOCK);
            for (int64_t j = j0; j < j1; j++) {
                memset((char *) dst->data + j * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3], 0, (size_t) M * sizeof(float));
            }
            const char * abase = (const char *) a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
            for (int64_t q = 0; q < K; q++) {
                const char * arow = abase + q * a->nb[1];
                if (a->nb[0] == kiln_type_size(a->type)) kiln_row_to_f32(a->type, arow, tmp, M);
                else for (int64_t i = 0; i < M; i++) tmp[i] = (float) kiln_elem_get_f64(a->type, arow + i * a->nb[0]);
                for (int64_t j = j0; j < j1; j++) {
                    const float w = (float) kiln_elem_get_f64(b->type, (const char *) b->data + j * b->nb[0] + q * b->nb[1] + i2 * b->nb[2] + i3 * b->nb[3]);
                    float * drow = (float *) ((char *) dst->data + j * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
                    k->f32_axpy(M, w, tmp, drow);
                }
            }
        }
        return KILN_STATUS_SUCCESS;
    }
    const int64_t nrows = P * ne2 * ne3;
    const int64_t nchunks = (nrows + OP_BLOCK - 1) / OP_BLOCK;
    int64_t c;
    while ((c = kiln_chunk_next(params)) < nchunks) {
        for (int64_t r = c * OP_BLOCK; r < KILN_MIN(nrows, (c + 1) * OP_BLOCK); r++) {
            const int64_t j = r % P, i2 = (r / P) % ne2, i3 = r / (P * ne2);
            float * drow = (float *) ((char *) dst->data + j * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
            memset(drow, 0, (size_t) M * sizeof(float));
            const char * abase = (const char *) a->data + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
            const char * bbase = (const char *) b->data + j * b->nb[0] + i2 * b->nb[2] + i3 * b->nb[3];
            for (int64_t q = 0; q < K; q++) {
                const float w = (float) kiln_elem_get_f64(b->type, bbase + q * b->nb[1]);
                const char * arow = abase + q * a->nb[1];
                const float * x = (const float *) arow;
                if (!direct) {
                    if (a->nb[0] == kiln_type_size(a->type)) kiln_row_to_f32(a->type, arow, tmp, M);
                    else for (int64_t i = 0; i < M; i++) tmp[i] = (float) kiln_elem_get_f64(a->type, arow + i * a->nb[0]);
                    x = tmp;
                }
                k->f32_axpy(M, w, x, drow);
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}
