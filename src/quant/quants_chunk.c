/*
 * quants_chunk.c — kiln_quantize_chunk / kiln_quantize_requires_imatrix,
 * shaped like ggml's: rows [start/n_per_row, +nrows) of src go to the same
 * rows of dst; without an imatrix the reference quantizers run, with one
 * the importance-weighted ones (as ggml's quantize_<type> functions do).
 */
#include "quants.h"
#include "internal.h"

#include <string.h>

bool kiln_quantize_requires_imatrix(enum kiln_type type) {
    return type == KILN_TYPE_IQ2_XXS || type == KILN_TYPE_IQ2_XS || type == KILN_TYPE_IQ1_S;
}

typedef void (*imat_fn)(const float * x, void * y, int64_t n, const float * qw);

static imat_fn imat_for(enum kiln_type type) {
    switch (type) {
        case KILN_TYPE_Q4_0:   return kiln_quantize_row_q4_0_imat;
        case KILN_TYPE_Q4_1:   return kiln_quantize_row_q4_1_imat;
        case KILN_TYPE_Q5_0:   return kiln_quantize_row_q5_0_imat;
        case KILN_TYPE_Q5_1:   return kiln_quantize_row_q5_1_imat;
        case KILN_TYPE_Q2_K:   return kiln_quantize_row_q2_K_imat;
        case KILN_TYPE_Q3_K:   return kiln_quantize_row_q3_K_imat;
        case KILN_TYPE_Q4_K:   return kiln_quantize_row_q4_K_imat;
        case KILN_TYPE_Q5_K:   return kiln_quantize_row_q5_K_imat;
        case KILN_TYPE_Q6_K:   return kiln_quantize_row_q6_K_imat;
        case KILN_TYPE_IQ4_NL: return kiln_quantize_row_iq4_nl_imat;
        case KILN_TYPE_IQ4_XS: return kiln_quantize_row_iq4_xs_imat;
        default:               return NULL;
    }
}

size_t kiln_quantize_chunk(enum kiln_type type, const float * src, void * dst, int64_t start,
                           int64_t nrows, int64_t n_per_row, const float * imatrix) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(type);
    if (!tt) {
        kiln_set_error("kiln_quantize_chunk: invalid type %d", (int) type);
        return 0;
    }
    if (!src || !dst) {
        kiln_set_error("kiln_quantize_chunk: NULL src or dst");
        return 0;
    }
    if (nrows < 0 || n_per_row <= 0 || start < 0) {
        kiln_set_error("kiln_quantize_chunk: bad sizes start=%lld nrows=%lld n_per_row=%lld",
                       (long long) start, (long long) nrows, (long long) n_per_row);
        return 0;
    }
    if (n_per_row % tt->blck_size != 0) {
        kiln_set_error("kiln_quantize_chunk: n_per_row %lld is not a multiple of the %s block size %lld",
                       (long long) n_per_row, tt->type_name, (long long) tt->blck_size);
        return 0;
    }
    if (start % n_per_row != 0) {
        kiln_set_error("kiln_quantize_chunk: start %lld is not a multiple of n_per_row %lld",
                       (long long) start, (long long) n_per_row);
        return 0;
    }
    if (kiln_quantize_requires_imatrix(type) && !imatrix) {
        kiln_set_error("kiln_quantize_chunk: type %s requires an importance matrix", tt->type_name);
        return 0;
    }
    if (!tt->from_float_ref) {
        kiln_set_error("kiln_quantize_chunk: no quantizer for type %s", tt->type_name);
        return 0;
    }
    const int64_t start_row = start / n_per_row;
    const size_t row_size = kiln_row_size(type, n_per_row);
    char * out = (char *) dst + (size_t) start_row * row_size;
    const float * in = src + start;

    const imat_fn fi = imatrix ? imat_for(type) : NULL;
    if (fi) {
        for (int64_t r = 0; r < nrows; ++r) {
            fi(in + r * n_per_row, out + (size_t) r * row_size, n_per_row, imatrix);
        }
    } else if (type == KILN_TYPE_IQ4_NL || type == KILN_TYPE_IQ4_XS) {
        /* ggml's chunk path for these runs the 7-candidate search even
         * without an imatrix (the _ref row function of iq4_nl does not) */
        const imat_fn f = imat_for(type);
        for (int64_t r = 0; r < nrows; ++r) {
            f(in + r * n_per_row, out + (size_t) r * row_size, n_per_row, NULL);
        }
    } else {
        tt->from_float_ref(in, out, nrows * n_per_row);
    }
    return (size_t) nrows * row_size;
}
