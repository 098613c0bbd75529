/*
 * ops_matmul_id_back.c — the two products mul_mat_id's backward rule needs
 * (src/core/backward.c), for as [K, N, n_as], ids [n_used, n_tok]:
 *
 *   mul_mat_id_back(as, g, ids) -> [K, n_used, n_tok]
 *       dst[:, e, t] = as[:, :, ids[e, t]] g[:, e, t]
 *       (each expert's matrix times g: the gradient w.r.t. mul_mat_id's b
 *       before the slots sharing a row of b are summed)
 *   out_prod_id(a, g, ids, n_as) -> [K, N, n_as]
 *       dst[:, :, x] = sum over (e, t) with ids[e, t] = x of a[:, e % a.ne1, t] g[:, e, t]^T
 *       (the gradient w.r.t. the experts' matrices; experts no row chose get 0)
 *
 * Both group the (slot, token) entries by expert first (thread 0, token-
 * then-slot order, as mul_mat_id's forward), so every sum runs in an order
 * fixed by the ids alone: the results are the same for any thread count.
 * as may be quantized or F16 (a frozen base weight): its rows are converted
 * to f32 one at a time into a per-thread row, never into an f32 copy.
 */
#include "ops_matmul.h"

#include <limits.h>

#define IDB_BLOCK 16 /* entries (mul_mat_id_back) or dst rows (out_prod_id) per chunk */

struct idb_layout {
    size_t off_map; /* int32 offsets[n_as + 1] */
    size_t off_ent; /* int32 entries[2 * n_used * n_tok]: (slot, token) */
    size_t off_err; /* int32 bad id flag, position */
    size_t off_row; /* per thread: one f32 row of K (mul_mat_id_back, rows converted) */
    size_t total;
};

static bool row_direct(const struct kiln_tensor * as) { return as->type == KILN_TYPE_F32; }

static void idb_layout(const struct kiln_tensor * ids, int64_t n_as, size_t row_bytes, int nth, struct idb_layout * l) {
    const int64_t n_rows = ids->ne[0] * ids->ne[1];
    l->off_map = 0;
    l->off_ent = KILN_PAD((size_t) (n_as + 1) * sizeof(int32_t), KILN_MM_ALIGN);
    l->off_err = l->off_ent + KILN_PAD((size_t) n_rows * 2 * sizeof(int32_t), KILN_MM_ALIGN);
    l->off_row = l->off_err + KILN_MM_ALIGN;
    l->total = l->off_row + KILN_PAD(row_bytes, KILN_MM_ALIGN) * (size_t) nth;
}

static size_t back_row_bytes(const struct kiln_tensor * as) {
    return row_direct(as) ? 0 : (size_t) as->ne[0] * sizeof(float);
}

size_t kiln_cpu_work_mul_mat_id_back(const struct kiln_tensor * dst, int n_threads) {
    struct idb_layout l;
    idb_layout(dst->src[2], dst->src[0]->ne[2], back_row_bytes(dst->src[0]), n_threads, &l);
    return l.total;
}

size_t kiln_cpu_work_out_prod_id(const struct kiln_tensor * dst, int n_threads) {
    struct idb_layout l;
    idb_layout(dst->src[2], dst->ne[2], 0, n_threads, &l);
    return l.total;
}


static float g_at(const struct kiln_tensor * g, int64_t n, int64_t e, int64_t t) {
    return *(const float *) ((const char *) g->data + n * g->nb[0] + e * g->nb[1] + t * g->nb[2]);
}

enum kiln_status kiln_cpu_fwd_mul_mat_id_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * as = dst->src[0], * g = dst->src[1], * ids = dst->src[2];
    const struct kiln_kernels * k = kiln_kernels();
    const struct kiln_type_traits * tt = kiln_get_type_traits(as->type);
    if (dst->type != KILN_TYPE_F32 || dst->nb[0] != sizeof(float) || g->type != KILN_TYPE_F32 ||
        as->nb[0] != kiln_type_size(as->type) || (!row_direct(as) && !(tt && tt->to_float))) {
        kiln_set_error("mul_mat_id_back: needs f32 dst and g and contiguous rows of as convertible to f32 (as is %s)",
                       kiln_type_name(as->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    if (kiln_tensor_is_repacked(as)) {
        kiln_set_error("mul_mat_id_back: expert weights '%s' are repacked for generation (train a model in the file's layout)", as->name);
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t K = as->ne[0], N = as->ne[1], n_as = as->ne[2];
    struct idb_layout l;
    idb_layout(ids, n_as, back_row_bytes(as), params->nth, &l);
    if (l.total > params->wsize) {
        kiln_set_error("mul_mat_id_back: work buffer of %zu bytes is too small (%zu needed)", params->wsize, l.total);
        return KILN_STATUS_FAILED;
    }
    int32_t * offs = (int32_t *) ((char *) params->wdata + l.off_map);
    int32_t * ent = (int32_t *) ((char *) params->wdata + l.off_ent);
    int32_t * err = (int32_t *) ((char *) params->wdata + l.off_err);
    float * tmp = (float *) ((char *) params->wdata + l.off_row + KILN_PAD(back_row_bytes(as), KILN_MM_ALIGN) * (size_t) params->ith);
    const enum kiln_status st = kiln_mm_id_sort(params, "mul_mat_id_back", ids, n_as, offs, ent, err);
    if (st != KILN_STATUS_SUCCESS) return st;

    /* a chunk: up to IDB_BLOCK entries of one expert; each row n of the
     * expert is converted once per chunk and added, times g[n, e, t], into
     * every entry's output (the sum over n runs in order 0..N-1) */
    int64_t nchunks = 0;
    for (int64_t e = 0; e < n_as; e++) nchunks += (offs[e + 1] - offs[e] + IDB_BLOCK - 1) / IDB_BLOCK;
    if (nchunks > INT_MAX) nchunks = INT_MAX;
    int64_t c;
    while ((c = kiln_chunk_next(params)) < nchunks) {
        int64_t x = 0, local = c;
        for (; x < n_as; x++) {
            const int64_t n = (offs[x + 1] - offs[x] + IDB_BLOCK - 1) / IDB_BLOCK;
            if (local < n) break;
            local -= n;
        }
        const int64_t q0 = offs[x] + local * IDB_BLOCK, q1 = KILN_MIN((int64_t) offs[x + 1], q0 + IDB_BLOCK);
        for (int64_t q = q0; q < q1; q++) {
            memset((char *) dst->data + ent[2 * q] * dst->nb[1] + ent[2 * q + 1] * dst->nb[2], 0, (size_t) K * sizeof(float));
        }
        const char * base = (const char *) as->data + x * as->nb[2];
        for (int64_t n = 0; n < N; n++) {
            const float * row = (const float *) (base + n * as->nb[1]);
            if (!row_direct(as)) {
                kiln_row_to_f32(as->type, base + n * as->nb[1], tmp, K);
                row = tmp;
            }
            for (int64_t q = q0; q < q1; q++) {
                const int64_t s = ent[2 * q], t = ent[2 * q + 1];
                k->f32_axpy(K, g_at(g, n, s, t), row, (float *) ((char *) dst->data + s * dst->nb[1] + t * dst->nb[2]));
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_out_prod_id(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0], * g = dst->src[1], * ids = dst->src[2];
    const struct kiln_kernels * k = kiln_kernels();
    if (dst->type != KILN_TYPE_F32 || dst->nb[0] != sizeof(float) || a->type != KILN_TYPE_F32 || a->nb[0] != sizeof(float) ||
        g->type != KILN_TYPE_F32) {
        kiln_set_error("out_prod_id: needs f32 dst, g and a with contiguous rows");
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t K = dst->ne[0], N = dst->ne[1], n_as = dst->ne[2], na1 = a->ne[1];
    struct idb_layout l;
    idb_layout(ids, n_as, 0, params->nth, &l);
    if (l.total > params->wsize) {
        kiln_set_error("out_prod_id: work buffer of %zu bytes is too small (%zu needed)", params->wsize, l.total);
        return KILN_STATUS_FAILED;
    }
    int32_t * offs = (int32_t *) ((char *) params->wdata + l.off_map);
    int32_t * ent = (int32_t *) ((char *) params->wdata + l.off_ent);
    int32_t * err = (int32_t *) ((char *) params->wdata + l.off_err);
    const enum kiln_status st = kiln_mm_id_sort(params, "out_prod_id", ids, n_as, offs, ent, err);
    if (st != KILN_STATUS_SUCCESS) return st;

    /* a chunk: IDB_BLOCK rows n of one expert's dst; every entry of the
     * expert is added in sorted order (the same order for every row) */
    const int64_t nblk = (N + IDB_BLOCK - 1) / IDB_BLOCK;
    const int64_t nchunks = nblk * n_as;
    int64_t c;
    while ((c = kiln_chunk_next(params)) < nchunks) {
        const int64_t x = c / nblk, n0 = (c % nblk) * IDB_BLOCK, n1 = KILN_MIN(N, n0 + IDB_BLOCK);
        char * dx = (char *) dst->data + x * dst->nb[2];
        for (int64_t n = n0; n < n1; n++) memset(dx + n * dst->nb[1], 0, (size_t) K * sizeof(float));
        for (int64_t q = offs[x]; q < offs[x + 1]; q++) {
            const int64_t s = ent[2 * q], t = ent[2 * q + 1];
            const float * arow = (const float *) ((const char *) a->data + (s % na1) * a->nb[1] + t * a->nb[2]);
            for (int64_t n = n0; n < n1; n++) k->f32_axpy(K, g_at(g, n, s, t), arow, (float *) (dx + n * dst->nb[1]));
        }
    }
    return KILN_STATUS_SUCCESS;
}
