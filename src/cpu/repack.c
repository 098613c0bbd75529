/*
 * repack.c — kiln_repack_tensor(): Q4_0 / Q8_0 / IQ4_NL weights to the x4 layout
 * of src/cpu/repack.h, in place, marked by tensor->extra.
 */
#include "repack.h"
#include "../core/internal.h"
#include "kernels.h"

#include <stdlib.h>
#include <string.h>

/* the marker: extra points at one of these, so no allocation to free */
struct kiln_repack_tag { enum kiln_type type; int rows; };
static const struct kiln_repack_tag tag_q4_0 = { KILN_TYPE_Q4_0, KILN_REPACK_ROWS };
static const struct kiln_repack_tag tag_q8_0 = { KILN_TYPE_Q8_0, KILN_REPACK_ROWS };
static const struct kiln_repack_tag tag_iq4_nl = { KILN_TYPE_IQ4_NL, KILN_REPACK_ROWS };

static const struct kiln_repack_tag * tag_for(enum kiln_type type) {
    switch (type) {
        case KILN_TYPE_Q4_0:   return &tag_q4_0;
        case KILN_TYPE_Q8_0:   return &tag_q8_0;
        case KILN_TYPE_IQ4_NL: return &tag_iq4_nl;
        default:               return NULL;
    }
}

int kiln_repacked_rows(const struct kiln_tensor * t) {
    if (!t || !t->extra) return 0;
    if (t->extra == (const void *) &tag_q4_0 || t->extra == (const void *) &tag_q8_0 ||
        t->extra == (const void *) &tag_iq4_nl) {
        return ((const struct kiln_repack_tag *) t->extra)->rows;
    }
    return 0;
}

bool kiln_tensor_is_repacked(const struct kiln_tensor * tensor) {
    return kiln_repacked_rows(tensor) > 0;
}

bool kiln_repack_has_kernel(enum kiln_type type) {
    if ((int) type < 0 || type >= KILN_TYPE_COUNT || !tag_for(type)) return false;
    const struct kiln_kernels * k = kiln_kernels();
    return k && k->vec_dot_x4[type] != NULL;
}

/* bytes of one block's scale, and of its quants */
static void geometry(enum kiln_type type, size_t * qbytes) {
    *qbytes = type == KILN_TYPE_Q8_0 ? QK8_0 : QK4_0 / 2; /* q4_0, iq4_nl: 16 bytes of nibbles */
}

static void pack_group(enum kiln_type type, const char * rows, size_t row_size, int64_t nb, char * out) {
    size_t qb;
    geometry(type, &qb);
    const size_t bs = sizeof(kiln_fp16_t) + qb; /* plain block */
    for (int64_t b = 0; b < nb; b++) {
        char * xb = out + (size_t) b * 4 * bs;
        for (int r = 0; r < 4; r++) {
            const char * src = rows + (size_t) r * row_size + (size_t) b * bs;
            memcpy(xb + r * sizeof(kiln_fp16_t), src, sizeof(kiln_fp16_t));
            memcpy(xb + 4 * sizeof(kiln_fp16_t) + r * qb, src + sizeof(kiln_fp16_t), qb);
        }
    }
}

void kiln_repack_unpack_row(enum kiln_type type, const void * group, int r, int64_t n, void * out) {
    size_t qb;
    geometry(type, &qb);
    const size_t bs = sizeof(kiln_fp16_t) + qb;
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; b++) {
        const char * xb = (const char *) group + (size_t) b * 4 * bs;
        char * dst = (char *) out + (size_t) b * bs;
        memcpy(dst, xb + r * sizeof(kiln_fp16_t), sizeof(kiln_fp16_t));
        memcpy(dst + sizeof(kiln_fp16_t), xb + 4 * sizeof(kiln_fp16_t) + r * qb, qb);
    }
}

bool kiln_repack_tensor(struct kiln_tensor * t) {
    if (!t) {
        kiln_set_error("repack: NULL tensor");
        return false;
    }
    if (!tag_for(t->type)) {
        kiln_set_error("repack: %s weights have no interleaved layout (q4_0, q8_0 and iq4_nl do)", kiln_type_name(t->type));
        return false;
    }
    if (kiln_repacked_rows(t)) return true;
    if (t->extra) {
        kiln_set_error("repack: tensor '%s' already carries backend data", t->name);
        return false;
    }
    if (!t->data || t->view_src || !kiln_is_contiguous(t)) {
        kiln_set_error("repack: tensor '%s' must own contiguous data (not a view)", t->name);
        return false;
    }
    const int64_t ne00 = t->ne[0], ne01 = t->ne[1];
    const int64_t nmat = t->ne[2] * t->ne[3];
    const int64_t ngroups = ne01 / 4;
    if (ngroups == 0) {
        kiln_set_error("repack: tensor '%s' has %lld rows, fewer than a group of 4", t->name, (long long) ne01);
        return false;
    }
    const size_t row_size = t->nb[1];
    char * tmp = malloc(4 * row_size);
    if (!tmp) {
        kiln_set_error("repack: out of memory");
        return false;
    }
    for (int64_t m = 0; m < nmat; m++) {
        char * mat = (char *) t->data + (size_t) m * t->nb[2];
        for (int64_t g = 0; g < ngroups; g++) {
            char * rows = mat + (size_t) g * 4 * row_size;
            pack_group(t->type, rows, row_size, ne00 / 32, tmp);
            memcpy(rows, tmp, 4 * row_size);
        }
    }
    free(tmp);
    t->extra = (void *) tag_for(t->type);
    return true;
}
