/*
 * ops_matmul.c — forward kernels: matrix multiplication ops.
 * STUBS: each returns KILN_STATUS_UNSUPPORTED until its kernel lands.
 */
#include "../core/internal.h"

#define KILN_STUB_OP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; kiln_set_error("op %s has no CPU kernel yet", kiln_op_name(dst->op)); return KILN_STATUS_UNSUPPORTED; }

KILN_STUB_OP(mul_mat)
KILN_STUB_OP(mul_mat_id)
KILN_STUB_OP(out_prod)

size_t kiln_cpu_work_mul_mat(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_mul_mat_id(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }
