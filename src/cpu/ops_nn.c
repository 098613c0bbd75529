/*
 * ops_nn.c — forward kernels: normalization, softmax, rope, attention, losses and optimizer ops.
 * STUBS: each returns KILN_STATUS_UNSUPPORTED until its kernel lands.
 */
#include "../core/internal.h"

#define KILN_STUB_OP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; kiln_set_error("op %s has no CPU kernel yet", kiln_op_name(dst->op)); return KILN_STATUS_UNSUPPORTED; }

KILN_STUB_OP(norm)
KILN_STUB_OP(rms_norm)
KILN_STUB_OP(rms_norm_back)
KILN_STUB_OP(group_norm)
KILN_STUB_OP(soft_max)
KILN_STUB_OP(soft_max_back)
KILN_STUB_OP(rope)
KILN_STUB_OP(rope_back)
KILN_STUB_OP(flash_attn_ext)
KILN_STUB_OP(cross_entropy_loss)
KILN_STUB_OP(cross_entropy_loss_back)
KILN_STUB_OP(opt_step_adamw)
KILN_STUB_OP(timestep_embedding)

size_t kiln_cpu_work_soft_max(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_rope(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_rope_back(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_flash_attn_ext(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }

size_t kiln_cpu_work_cross_entropy_loss(const struct kiln_tensor * dst, int n_threads) { (void) dst; (void) n_threads; return 0; }
