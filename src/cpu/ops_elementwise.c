/*
 * ops_elementwise.c — forward kernels: elementwise and unary ops.
 * STUBS: each returns KILN_STATUS_UNSUPPORTED until its kernel lands.
 */
#include "../core/internal.h"

#define KILN_STUB_OP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; kiln_set_error("op %s has no CPU kernel yet", kiln_op_name(dst->op)); return KILN_STATUS_UNSUPPORTED; }

KILN_STUB_OP(dup)
KILN_STUB_OP(add)
KILN_STUB_OP(add1)
KILN_STUB_OP(acc)
KILN_STUB_OP(sub)
KILN_STUB_OP(mul)
KILN_STUB_OP(div)
KILN_STUB_OP(sqr)
KILN_STUB_OP(sqrt)
KILN_STUB_OP(log)
KILN_STUB_OP(sin)
KILN_STUB_OP(cos)
KILN_STUB_OP(scale)
KILN_STUB_OP(set)
KILN_STUB_OP(cpy)
KILN_STUB_OP(cont)
KILN_STUB_OP(clamp)
KILN_STUB_OP(unary)
KILN_STUB_OP(leaky_relu)
KILN_STUB_OP(silu_back)
KILN_STUB_OP(map_custom1)
KILN_STUB_OP(map_custom2)
KILN_STUB_OP(map_custom3)
