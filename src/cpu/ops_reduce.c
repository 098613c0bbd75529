/*
 * ops_reduce.c — forward kernels: reductions, indexing and shape-changing ops.
 * STUBS: each returns KILN_STATUS_UNSUPPORTED until its kernel lands.
 */
#include "../core/internal.h"

#define KILN_STUB_OP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; kiln_set_error("op %s has no CPU kernel yet", kiln_op_name(dst->op)); return KILN_STATUS_UNSUPPORTED; }

KILN_STUB_OP(sum)
KILN_STUB_OP(sum_rows)
KILN_STUB_OP(mean)
KILN_STUB_OP(argmax)
KILN_STUB_OP(count_equal)
KILN_STUB_OP(repeat)
KILN_STUB_OP(repeat_back)
KILN_STUB_OP(concat)
KILN_STUB_OP(get_rows)
KILN_STUB_OP(get_rows_back)
KILN_STUB_OP(diag)
KILN_STUB_OP(diag_mask_inf)
KILN_STUB_OP(diag_mask_zero)
KILN_STUB_OP(arange)
KILN_STUB_OP(argsort)
KILN_STUB_OP(pad)
KILN_STUB_OP(pad_reflect_1d)
KILN_STUB_OP(upscale)
