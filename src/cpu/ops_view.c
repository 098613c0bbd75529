/*
 * ops_view.c — forward "kernels" of the ops that compute nothing: their
 * result shares the source's memory (NONE is a leaf).
 */
#include "../core/internal.h"

#define KILN_NOP(lower) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst) { \
        (void) params; (void) dst; return KILN_STATUS_SUCCESS; }

KILN_NOP(none)
KILN_NOP(reshape)
KILN_NOP(view)
KILN_NOP(permute)
KILN_NOP(transpose)
