/*
 * ops_conv.c — forward kernels: convolution, pooling, window and recurrent-state ops.
 * STUBS: each returns KILN_STATUS_UNSUPPORTED until its kernel lands.
 */
#include "../core/internal.h"

#define KILN_STUB_OP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; kiln_set_error("op %s has no CPU kernel yet", kiln_op_name(dst->op)); return KILN_STATUS_UNSUPPORTED; }

KILN_STUB_OP(conv_transpose_1d)
KILN_STUB_OP(im2col)
KILN_STUB_OP(im2col_back)
KILN_STUB_OP(conv_transpose_2d)
KILN_STUB_OP(pool_1d)
KILN_STUB_OP(pool_2d)
KILN_STUB_OP(pool_2d_back)
KILN_STUB_OP(win_part)
KILN_STUB_OP(win_unpart)
KILN_STUB_OP(get_rel_pos)
KILN_STUB_OP(add_rel_pos)
KILN_STUB_OP(ssm_conv)
KILN_STUB_OP(ssm_scan)
KILN_STUB_OP(rwkv_wkv6)
KILN_STUB_OP(gated_linear_attn)

size_t kiln_cpu_work_conv_transpose_1d(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_conv_transpose_2d(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }
