/* synth_fill.h — fill a weight tensor of random-weight test models row by
 * row with offset + scale * rnd(), converted to the tensor's type (shared by
 * kiln-synth-model and bench-make_synthetic). */
#ifndef KILN_TOOLS_SYNTH_FILL_H
#define KILN_TOOLS_SYNTH_FILL_H

#include "kiln.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool synth_fill(struct kiln_tensor * t, float scale, float offset, float (*rnd)(void)) {
    const int64_t ne0 = t->ne[0], rows = kiln_nrows(t);
    float * row = malloc(sizeof(float) * (size_t) ne0);
    if (!row) return false;
    const struct kiln_type_traits * tr = kiln_get_type_traits(t->type);
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < ne0; j++) row[j] = offset + scale * rnd();
        char * dst = (char *) t->data + i * kiln_row_size(t->type, ne0);
        if (t->type == KILN_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) ne0);
        else tr->from_float_ref(row, dst, ne0);
    }
    free(row);
    return true;
}

#endif
