/*
 * build_views.c — constructors of the ops that only reinterpret memory:
 * reshape, view, permute, transpose. They make a tensor whose data is the
 * source's (view_src), so compute has nothing to do for them.
 */
#include "internal.h"

static struct kiln_tensor * reshape_nd(struct kiln_context * ctx, struct kiln_tensor * a, int n_dims, const int64_t * ne, const char * fn) {
    if (!kiln_check_tensor(a, fn, "a")) return NULL;
    if (!kiln_is_contiguous(a)) {
        char b[96];
        return KILN_FAIL("%s: source %s is not contiguous (use kiln_cont first)", fn, kiln_shape_str(a, b, sizeof b));
    }
    int64_t n = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) return KILN_FAIL("%s: ne[%d] = %lld is negative", fn, i, (long long) ne[i]);
        n *= ne[i];
    }
    if (n != kiln_nelements(a)) {
        char b[96];
        return KILN_FAIL("%s: cannot reshape %s (%lld elements) to %lld elements", fn,
                         kiln_shape_str(a, b, sizeof b), (long long) kiln_nelements(a), (long long) n);
    }
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, a->type, n_dims, ne, a, 0);
    if (!r) return NULL;
    kiln_format_name(r, "%s (reshaped)", a->name);
    r->op = KILN_OP_RESHAPE;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_reshape(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(b, "reshape", "b")) return NULL;
    return reshape_nd(ctx, a, KILN_MAX_DIMS, b->ne, "reshape");
}
struct kiln_tensor * kiln_reshape_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0) {
    return reshape_nd(ctx, a, 1, &ne0, "reshape_1d");
}
struct kiln_tensor * kiln_reshape_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return reshape_nd(ctx, a, 2, ne, "reshape_2d");
}
struct kiln_tensor * kiln_reshape_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return reshape_nd(ctx, a, 3, ne, "reshape_3d");
}
struct kiln_tensor * kiln_reshape_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return reshape_nd(ctx, a, 4, ne, "reshape_4d");
}

/* A view with explicit strides. The extent it can touch is checked against
 * the source's bytes, so a view never reads outside its storage. */
static struct kiln_tensor * view_nd(struct kiln_context * ctx, struct kiln_tensor * a, int n_dims, const int64_t * ne,
                                    const size_t * nb, size_t offset, const char * fn) {
    if (!kiln_check_tensor(a, fn, "a")) return NULL;
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, a->type, n_dims, ne, a, offset);
    if (!r) return NULL;
    if (nb) {
        for (int i = 1; i < n_dims; i++) r->nb[i] = nb[i - 1];
        for (int i = n_dims; i < KILN_MAX_DIMS; i++) r->nb[i] = r->nb[i - 1] * (size_t) r->ne[i - 1];
        /* re-check the extent with the caller's strides */
        const size_t extent = kiln_nbytes(r);
        const size_t src_bytes = kiln_nbytes(a->view_src ? a->view_src : a);
        const size_t base = r->view_offs;
        if (extent > src_bytes || base > src_bytes - extent) {
            return KILN_FAIL("%s: view of %zu bytes at offset %zu with the given strides lies outside the source (%zu bytes)",
                             fn, extent, offset, kiln_nbytes(a));
        }
    }
    kiln_format_name(r, "%s (view)", a->name);
    r->op = KILN_OP_VIEW;
    r->src[0] = a;
    kiln_set_op_params(r, &offset, sizeof(offset));
    return r;
}

struct kiln_tensor * kiln_view_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, size_t offset) {
    return view_nd(ctx, a, 1, &ne0, NULL, offset, "view_1d");
}
struct kiln_tensor * kiln_view_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[2] = { ne0, ne1 };
    const size_t nb[1] = { nb1 };
    return view_nd(ctx, a, 2, ne, nb, offset, "view_2d");
}
struct kiln_tensor * kiln_view_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                                  size_t nb1, size_t nb2, size_t offset) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    const size_t nb[2] = { nb1, nb2 };
    return view_nd(ctx, a, 3, ne, nb, offset, "view_3d");
}
struct kiln_tensor * kiln_view_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                                  size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    const size_t nb[3] = { nb1, nb2, nb3 };
    return view_nd(ctx, a, 4, ne, nb, offset, "view_4d");
}

struct kiln_tensor * kiln_permute(struct kiln_context * ctx, struct kiln_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    if (!kiln_check_tensor(a, "permute", "a")) return NULL;
    const int ax[4] = { axis0, axis1, axis2, axis3 };
    int seen = 0;
    for (int i = 0; i < 4; i++) {
        if (ax[i] < 0 || ax[i] >= KILN_MAX_DIMS || (seen & (1 << ax[i]))) {
            return KILN_FAIL("permute: axes (%d, %d, %d, %d) are not a permutation of 0..3", axis0, axis1, axis2, axis3);
        }
        seen |= 1 << ax[i];
    }
    struct kiln_tensor * r = kiln_view_tensor(ctx, a);
    if (!r) return NULL;
    kiln_format_name(r, "%s (permuted)", a->name);
    int64_t ne[4];
    size_t nb[4];
    for (int i = 0; i < 4; i++) { ne[ax[i]] = a->ne[i]; nb[ax[i]] = a->nb[i]; }
    for (int i = 0; i < 4; i++) { r->ne[i] = ne[i]; r->nb[i] = nb[i]; }
    r->op = KILN_OP_PERMUTE;
    r->src[0] = a;
    const int32_t params[4] = { axis0, axis1, axis2, axis3 };
    kiln_set_op_params(r, params, sizeof(params));
    return r;
}

struct kiln_tensor * kiln_transpose(struct kiln_context * ctx, struct kiln_tensor * a) {
    if (!kiln_check_tensor(a, "transpose", "a")) return NULL;
    struct kiln_tensor * r = kiln_view_tensor(ctx, a);
    if (!r) return NULL;
    kiln_format_name(r, "%s (transposed)", a->name);
    r->ne[0] = a->ne[1]; r->ne[1] = a->ne[0];
    r->nb[0] = a->nb[1]; r->nb[1] = a->nb[0];
    r->op = KILN_OP_TRANSPOSE;
    r->src[0] = a;
    return r;
}
