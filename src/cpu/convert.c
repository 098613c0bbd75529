/*
 * convert.c — row conversions between any type and f32, used by ops that
 * accept several input types (dup/cpy/get_rows) and by tests.
 */
#include "kernels.h"
#include "../core/internal.h"

bool kiln_row_to_f32(enum kiln_type type, const void * src, float * dst, int64_t n) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(type);
    if (!tt) { kiln_set_error("row_to_f32: invalid type %d", (int) type); return false; }
    /* f16 rows (KV caches in attention) through the kernel table: F16C /
     * NEON converts, exact like the scalar path */
    if (type == KILN_TYPE_F16) { kiln_kernels()->f16_to_f32(n, (const kiln_fp16_t *) src, dst); return true; }
    if (tt->to_float) { tt->to_float(src, dst, n); return true; }
    if (tt->blck_size == 1) {
        for (int64_t i = 0; i < n; i++) dst[i] = (float) kiln_elem_get_f64(type, (const char *) src + i * tt->type_size);
        return true;
    }
    kiln_set_error("row_to_f32: no conversion from %s to f32", tt->type_name);
    return false;
}

bool kiln_row_from_f32(enum kiln_type type, const float * src, void * dst, int64_t n) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(type);
    if (!tt) { kiln_set_error("row_from_f32: invalid type %d", (int) type); return false; }
    if (tt->from_float_ref) { tt->from_float_ref(src, dst, n); return true; }
    if (tt->blck_size == 1) {
        for (int64_t i = 0; i < n; i++) kiln_elem_set_f64(type, (char *) dst + i * tt->type_size, src[i]);
        return true;
    }
    kiln_set_error("row_from_f32: no conversion from f32 to %s", tt->type_name);
    return false;
}
