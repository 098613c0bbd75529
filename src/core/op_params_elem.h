/*
 * op_params_elem.h — op_params layouts of the elementwise family that are
 * more than a few scalars, shared by constructors and kernels.
 */
#ifndef KILN_OP_PARAMS_ELEM_H
#define KILN_OP_PARAMS_ELEM_H

#include "internal.h"

/* MAP_CUSTOM1/2/3: ggml stores the same three fields */
struct kiln_map_custom1_op_params { kiln_custom1_op_t fun; int n_tasks; void * userdata; };
struct kiln_map_custom2_op_params { kiln_custom2_op_t fun; int n_tasks; void * userdata; };
struct kiln_map_custom3_op_params { kiln_custom3_op_t fun; int n_tasks; void * userdata; };

#endif
