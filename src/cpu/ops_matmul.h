/*
 * ops_matmul.h — what the matmul kernels share: how src1 (activations)
 * reaches the dot products (used in place, or converted into the work
 * buffer as the weight type's vec_dot_type, like ggml does).
 */
#ifndef KILN_OPS_MATMUL_H
#define KILN_OPS_MATMUL_H

#include "../core/internal.h"
#include "kernels.h"

#define KILN_MM_ALIGN 64

struct kiln_mm_act {
    enum kiln_type vdt;  /* the weight type's vec_dot_type */
    bool    convert;     /* rows are converted into the work buffer */
    bool    stage;       /* conversion goes through an f32 row per thread */
    size_t  row_size;    /* bytes of one converted row */
    int64_t nrows;       /* ne11 * ne12 * ne13 */
    size_t  act_bytes;   /* converted rows, padded */
    size_t  stage_bytes; /* one thread's f32 row, padded */
    bool    x4_rule;     /* rows in full groups of 4 quantize with kiln_quantize_row_q8_K_x4
                            (a repacked K-quant where the table's q8_K_x4_rule says so, repack.h) */
    size_t  aux_off;     /* > 0: each converted q8_0 row's aux blocks (kiln_q8_0_aux, or aux8; repack.h)
                            at wdata + aux_off + r * aux_row (kiln_mm_act_want_aux) */
    size_t  aux_row;
    bool    aux8;        /* the aux blocks are kiln_q8_0_aux8 (Q8_0 weights) */
    bool    priv;        /* one row, converted by every thread into its own
                            slot of act_bytes (kiln_mm_act_want_private) */
};

/* false (with the error set) when src0's type has no dot product or the
 * activations cannot be converted to it */
bool kiln_mm_act_plan(const struct kiln_kernels * k, const char * op, const struct kiln_tensor * src0,
                      const struct kiln_tensor * src1, struct kiln_mm_act * p);
size_t kiln_mm_act_work(const struct kiln_mm_act * p, int n_threads);
/* after a successful plan of a single activation row: every thread
 * converts it into its own slot (the same bytes), so the threads start
 * their dots without waiting for each other */
void kiln_mm_act_want_private(struct kiln_mm_act * p);
/* after a successful plan: also write each row's aux blocks (inside
 * act_bytes; kiln_q8_0_aux for Q4_0 weights, kiln_q8_0_aux8 for Q8_0), for
 * a kernel table whose 16-row gemm of src0's type takes them */
void kiln_mm_act_want_aux(const struct kiln_kernels * k, const struct kiln_tensor * src0, struct kiln_mm_act * p);
/* thread ith's share of the conversion into wdata (no barrier) */
/* Thread 0 sorts mul_mat_id's (slot, token) entries by expert (counting
 * sort: offs[e]..offs[e+1] index ent's pairs of expert e) and validates the
 * ids; after the barrier every thread sees the result, or an error naming
 * op and the first id outside [0, n_as). */
enum kiln_status kiln_mm_id_sort(const struct kiln_compute_params * params, const char * op, const struct kiln_tensor * ids,
                                 int64_t n_as, int32_t * offs, int32_t * ent, int32_t * err);

void kiln_mm_act_convert(const struct kiln_compute_params * params, const struct kiln_kernels * k,
                         const struct kiln_tensor * src1, const struct kiln_mm_act * p);
/* row (i11, i12, i13) of the activations, converted or in place */
static inline const char * kiln_mm_act_row(const struct kiln_compute_params * params, const struct kiln_tensor * src1,
                                           const struct kiln_mm_act * p, int64_t i11, int64_t i12, int64_t i13) {
    if (p->priv) return (const char *) params->wdata + (size_t) params->ith * p->act_bytes;
    if (p->convert) {
        const int64_t r = i11 + src1->ne[1] * (i12 + src1->ne[2] * i13);
        return (const char *) params->wdata + (size_t) r * p->row_size;
    }
    return (const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] + i13 * src1->nb[3];
}
/* row (i11, i12, i13)'s aux blocks, NULL when not planned */
static inline const char * kiln_mm_act_aux(const struct kiln_compute_params * params, const struct kiln_tensor * src1,
                                           const struct kiln_mm_act * p, int64_t i11, int64_t i12, int64_t i13) {
    if (!p->aux_off) return NULL;
    const int64_t r = i11 + src1->ne[1] * (i12 + src1->ne[2] * i13);
    return (const char *) params->wdata + p->aux_off + (size_t) r * p->aux_row;
}

#endif
