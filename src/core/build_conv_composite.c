/*
 * build_conv_composite.c — the convolutions ggml builds from other ops:
 * im2col, then one mul_mat, then reshape / permute / cont. They are built
 * here exactly as ggml builds them (same intermediate types, same node
 * sequence), so graphs and their numerics port one to one:
 *
 *   conv_1d           im2col(F16) · kernel            -> [OL, OC, N]
 *   conv_1d_dw        im2col(F16) · kernel, per channel
 *   conv_2d           im2col(kernel type) · kernel, permuted to [OW, OH, OC, N]
 *   conv_depthwise_2d kernel · im2col(F16), per channel
 *
 * Note ggml's conv_1d reshapes the [N*OL, OC] product straight to
 * [OL, OC, N], which is only the convolution's layout for N = 1; it is kept
 * as is so graphs behave as they do in ggml.
 */
#include "internal.h"

#include <stdio.h>

/* A failed inner constructor already recorded why; prefix the op's name. */
static struct kiln_tensor * wrap(const char * op, struct kiln_tensor * t) {
    if (t) return t;
    char inner[512];
    snprintf(inner, sizeof inner, "%s", kiln_last_error());
    return KILN_FAIL("%s: %s", op, inner);
}

static bool check_kernel(const struct kiln_tensor * a, const struct kiln_tensor * b, const char * op) {
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(b, op, "b")) return false;
    if (!kiln_is_contiguous(a)) {
        char s[96];
        kiln_set_error("%s: kernel a %s must be contiguous", op, kiln_shape_str(a, s, sizeof s));
        return false;
    }
    return true;
}

/* a: kernel [K, IC, OC], b: data [L, IC, N] -> [OL, OC, N] */
struct kiln_tensor * kiln_conv_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s0, int p0, int d0) {
    static const char * op = "conv_1d";
    if (!check_kernel(a, b, op)) return NULL;
    if (a->ne[3] != 1) {
        char s[96];
        return KILN_FAIL("conv_1d: kernel a must be 3D [K, IC, OC], got %s", kiln_shape_str(a, s, sizeof s));
    }
    struct kiln_tensor * im2col = wrap(op, kiln_im2col(ctx, a, b, s0, 0, p0, 0, d0, 0, false, KILN_TYPE_F16)); /* [N, OL, IC*K] */
    if (!im2col) return NULL;
    struct kiln_tensor * cols = wrap(op, kiln_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[2] * im2col->ne[1]));
    struct kiln_tensor * kern = cols ? wrap(op, kiln_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2])) : NULL;
    struct kiln_tensor * r = kern ? wrap(op, kiln_mul_mat(ctx, cols, kern)) : NULL; /* [N*OL, OC] */
    if (!r) return NULL;
    return wrap(op, kiln_reshape_3d(ctx, r, im2col->ne[1], a->ne[2], im2col->ne[2]));
}

struct kiln_tensor * kiln_conv_1d_ph(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s, int d) {
    if (!kiln_check_tensor(a, "conv_1d_ph", "a")) return NULL;
    return kiln_conv_1d(ctx, a, b, s, (int)(a->ne[0] / 2), d);
}

/* a: kernel [K, 1, C], b: data [L, C] -> [OL, C, 1] */
struct kiln_tensor * kiln_conv_1d_dw(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s0, int p0, int d0) {
    static const char * op = "conv_1d_dw";
    if (!check_kernel(a, b, op)) return NULL;
    if (!kiln_is_contiguous(b)) {
        char s[96];
        return KILN_FAIL("conv_1d_dw: data b %s must be contiguous", kiln_shape_str(b, s, sizeof s));
    }
    struct kiln_tensor * nb = wrap(op, kiln_reshape_4d(ctx, b, b->ne[0], 1, b->ne[1], b->ne[2]));
    struct kiln_tensor * im2col = nb ? wrap(op, kiln_im2col(ctx, a, nb, s0, 0, p0, 0, d0, 0, false, KILN_TYPE_F16)) : NULL;
    struct kiln_tensor * r = im2col ? wrap(op, kiln_mul_mat(ctx, im2col, a)) : NULL;
    if (!r) return NULL;
    return wrap(op, kiln_reshape_3d(ctx, r, r->ne[0], r->ne[2], 1));
}

/* a: kernel [KW, KH, IC, OC], b: data [W, H, IC, N] -> [OW, OH, OC, N] */
struct kiln_tensor * kiln_conv_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1) {
    static const char * op = "conv_2d";
    if (!check_kernel(a, b, op)) return NULL;
    struct kiln_tensor * im2col = wrap(op, kiln_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, true, a->type)); /* [N, OH, OW, IC*KH*KW] */
    if (!im2col) return NULL;
    struct kiln_tensor * cols = wrap(op, kiln_reshape_2d(ctx, im2col, im2col->ne[0], im2col->ne[3] * im2col->ne[2] * im2col->ne[1]));
    struct kiln_tensor * kern = cols ? wrap(op, kiln_reshape_2d(ctx, a, a->ne[0] * a->ne[1] * a->ne[2], a->ne[3])) : NULL;
    struct kiln_tensor * r = kern ? wrap(op, kiln_mul_mat(ctx, cols, kern)) : NULL; /* [N*OH*OW, OC] */
    r = r ? wrap(op, kiln_reshape_4d(ctx, r, im2col->ne[1], im2col->ne[2], im2col->ne[3], a->ne[3])) : NULL;
    r = r ? wrap(op, kiln_permute(ctx, r, 0, 1, 3, 2)) : NULL;
    return r ? wrap(op, kiln_cont(ctx, r)) : NULL;
}

struct kiln_tensor * kiln_conv_2d_sk_p0(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "conv_2d_sk_p0", "a")) return NULL;
    return kiln_conv_2d(ctx, a, b, (int) a->ne[0], (int) a->ne[1], 0, 0, 1, 1);
}

struct kiln_tensor * kiln_conv_2d_s1_ph(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    if (!kiln_check_tensor(a, "conv_2d_s1_ph", "a")) return NULL;
    return kiln_conv_2d(ctx, a, b, 1, 1, (int)(a->ne[0] / 2), (int)(a->ne[1] / 2), 1, 1);
}

/* a: kernel [KW, KH, 1, C], b: data [W, H, C, N] -> [OW, OH, C, N] */
struct kiln_tensor * kiln_conv_depthwise_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1) {
    static const char * op = "conv_depthwise_2d";
    if (!check_kernel(a, b, op)) return NULL;
    if (!kiln_is_contiguous(b)) {
        char s[96];
        return KILN_FAIL("conv_depthwise_2d: data b %s must be contiguous", kiln_shape_str(b, s, sizeof s));
    }
    struct kiln_tensor * na = wrap(op, kiln_reshape_4d(ctx, a, a->ne[0], a->ne[1], 1, a->ne[2] * a->ne[3]));
    struct kiln_tensor * nb = na ? wrap(op, kiln_reshape_4d(ctx, b, b->ne[0], b->ne[1], 1, b->ne[2] * b->ne[3])) : NULL;
    struct kiln_tensor * im2col = nb ? wrap(op, kiln_im2col(ctx, na, nb, s0, s1, p0, p1, d0, d1, true, KILN_TYPE_F16)) : NULL;
    if (!im2col) return NULL; /* [N*C, OH, OW, KH*KW] */
    struct kiln_tensor * cols = wrap(op, kiln_reshape_4d(ctx, im2col, im2col->ne[0], im2col->ne[2] * im2col->ne[1], b->ne[2], b->ne[3]));
    struct kiln_tensor * kern = cols ? wrap(op, kiln_reshape_4d(ctx, na, na->ne[0] * na->ne[1], na->ne[2], na->ne[3], 1)) : NULL;
    struct kiln_tensor * r = kern ? wrap(op, kiln_mul_mat(ctx, kern, cols)) : NULL; /* [1, OH*OW, C, N] */
    return r ? wrap(op, kiln_reshape_4d(ctx, r, im2col->ne[1], im2col->ne[2], b->ne[2], b->ne[3])) : NULL;
}
