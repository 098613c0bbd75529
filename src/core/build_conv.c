/*
 * build_conv.c — constructors of the convolution-family ops that are one
 * node each: im2col, im2col_back, conv_transpose_1d, conv_transpose_2d_p0,
 * pool_1d, pool_2d, pool_2d_back.
 *
 * Shapes, op_params layouts and output-size formulas are ggml's, so graphs
 * port one to one. The composite convolutions (im2col + mul_mat) live in
 * build_conv_composite.c: keeping them apart lets programs that only use
 * these single-node ops link without the matmul constructors.
 */
#include "internal.h"

#include <math.h>

static bool conv_float_type(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

static bool check_not_empty(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (kiln_is_empty(t)) {
        char s[96];
        kiln_set_error("%s: argument %s %s is empty", op, arg, kiln_shape_str(t, s, sizeof s));
        return false;
    }
    return true;
}

/* ggml's output length of a convolution, with C's truncating division
 * (a kernel longer than the padded input by less than a stride still gives
 * one output, as in ggml). Returns false when the arithmetic overflows. */
static bool conv_out_size(int64_t ins, int64_t ks, int s, int p, int d, int64_t * out) {
    int64_t span, num;
    if (__builtin_mul_overflow((int64_t) d, ks - 1, &span)) return false;
    if (__builtin_sub_overflow(ins - 1, span, &num) || __builtin_add_overflow(num, 2 * (int64_t) p, &num)) return false;
    *out = num / s + 1;
    return true;
}

/* ggml computes pooling output sizes in float (the padding is a float). */
static int64_t pool_out_size(int64_t ins, int ks, int s, float p) {
    const float v = ((float) ins + 2 * p - (float) ks) / (float) s + 1;
    if (!(v < 9.0e18f && v > -9.0e18f)) return 0;
    return (int64_t) v; /* truncated toward zero, as ggml stores it */
}

/* ------------------------------------------------------------ im2col */

struct kiln_tensor * kiln_im2col(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum kiln_type dst_type) {
    static const char * op = "im2col";
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(b, op, "b")) return NULL;
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (dst_type != KILN_TYPE_F32 && dst_type != KILN_TYPE_F16) {
        return KILN_FAIL("im2col: dst_type must be f32 or f16, got %s",
                         kiln_type_is_valid((int) dst_type) ? kiln_type_name(dst_type) : "an invalid type id");
    }
    if (!conv_float_type(b->type)) return KILN_FAIL("im2col: data b must be f32, f16 or bf16, got %s", sb);
    if (!check_not_empty(a, op, "a") || !check_not_empty(b, op, "b")) return NULL;
    if (s0 < 1 || d0 < 1 || p0 < 0 || (is_2D && (s1 < 1 || d1 < 1 || p1 < 0))) {
        return KILN_FAIL("im2col: strides and dilations must be >= 1 and paddings >= 0 "
                         "(s0=%d s1=%d p0=%d p1=%d d0=%d d1=%d%s)", s0, s1, p0, p1, d0, d1, is_2D ? "" : ", 1D uses only s0 p0 d0");
    }
    if (is_2D) {
        if (a->ne[2] != b->ne[2]) {
            return KILN_FAIL("im2col: kernel a has %lld input channels (ne[2]) but data b has %lld: %s vs %s",
                             (long long) a->ne[2], (long long) b->ne[2], sa, sb);
        }
    } else {
        if (a->ne[1] != b->ne[1]) {
            return KILN_FAIL("im2col: 1D kernel a has %lld input channels (ne[1]) but data b has %lld: %s vs %s",
                             (long long) a->ne[1], (long long) b->ne[1], sa, sb);
        }
        if (b->ne[3] != 1) return KILN_FAIL("im2col: 1D data b must have ne[3] = 1, got %s", sb);
    }
    int64_t OW = 0, OH = 1;
    if (!conv_out_size(b->ne[0], a->ne[0], s0, p0, d0, &OW) ||
        (is_2D && !conv_out_size(b->ne[1], a->ne[1], s1, p1, d1, &OH))) {
        return KILN_FAIL("im2col: output size overflows (kernel %s, data %s)", sa, sb);
    }
    if (OW <= 0 || OH <= 0) {
        return KILN_FAIL("im2col: data b %s is too small for kernel a %s (output %lld x %lld with s=(%d,%d) p=(%d,%d) d=(%d,%d))",
                         sb, sa, (long long) OW, (long long) OH, s0, s1, p0, p1, d0, d1);
    }
    int64_t K;
    if (__builtin_mul_overflow(a->ne[0], a->ne[1], &K) || (is_2D && __builtin_mul_overflow(K, a->ne[2], &K))) {
        return KILN_FAIL("im2col: kernel size overflows (%s)", sa);
    }
    const int64_t ne[4] = { K, OW, is_2D ? OH : b->ne[2], is_2D ? b->ne[3] : 1 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, dst_type, 4, ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[7] = { s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_IM2COL;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_im2col_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int64_t * ne, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D) {
    static const char * op = "im2col_back";
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(b, op, "b")) return NULL;
    if (!ne) return KILN_FAIL("im2col_back: ne (the image shape) is NULL");
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) {
        return KILN_FAIL("im2col_back: gradient a must be f32 or f16, got %s", sa);
    }
    for (int i = 0; i < 4; i++) {
        if (ne[i] < 1) return KILN_FAIL("im2col_back: image shape ne[%d] = %lld must be >= 1", i, (long long) ne[i]);
    }
    if (!check_not_empty(b, op, "b")) return NULL;
    if (s0 < 1 || d0 < 1 || p0 < 0 || (is_2D && (s1 < 1 || d1 < 1 || p1 < 0))) {
        return KILN_FAIL("im2col_back: strides and dilations must be >= 1 and paddings >= 0 "
                         "(s0=%d s1=%d p0=%d p1=%d d0=%d d1=%d)", s0, s1, p0, p1, d0, d1);
    }
    /* image [IW, IH, IC, N] (2D) or [IW, IC, N, 1] (1D) */
    const int64_t IW = ne[0];
    const int64_t IH = is_2D ? ne[1] : 1;
    const int64_t IC = is_2D ? ne[2] : ne[1];
    const int64_t N  = is_2D ? ne[3] : ne[2];
    if (!is_2D && ne[3] != 1) return KILN_FAIL("im2col_back: a 1D image must have ne[3] = 1, got %lld", (long long) ne[3]);
    const int64_t KW = b->ne[0];
    const int64_t KH = is_2D ? b->ne[1] : 1;
    int64_t OW = 0, OH = 1, K;
    if (!conv_out_size(IW, KW, s0, p0, d0, &OW) || (is_2D && !conv_out_size(IH, KH, s1, p1, d1, &OH)) ||
        __builtin_mul_overflow(IC, KH * KW, &K)) {
        return KILN_FAIL("im2col_back: sizes overflow (kernel %s)", sb);
    }
    const int64_t want[4] = { K, OW, is_2D ? OH : N, is_2D ? N : 1 };
    if (a->ne[0] != want[0] || a->ne[1] != want[1] || a->ne[2] != want[2] || a->ne[3] != want[3]) {
        return KILN_FAIL("im2col_back: gradient a %s does not match the im2col output [%lld, %lld, %lld, %lld] "
                         "of image [%lld, %lld, %lld, %lld] and kernel %s",
                         sa, (long long) want[0], (long long) want[1], (long long) want[2], (long long) want[3],
                         (long long) ne[0], (long long) ne[1], (long long) ne[2], (long long) ne[3], sb);
    }
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[7] = { s0, s1, p0, p1, d0, d1, is_2D ? 1 : 0 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_IM2COL_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* --------------------------------------------------- transposed convs */

struct kiln_tensor * kiln_conv_transpose_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int p0, int d0) {
    static const char * op = "conv_transpose_1d";
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(b, op, "b")) return NULL;
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) return KILN_FAIL("conv_transpose_1d: kernel a must be f32 or f16, got %s", sa);
    if (b->type != KILN_TYPE_F32) return KILN_FAIL("conv_transpose_1d: data b must be f32, got %s", sb);
    if (!kiln_is_matrix(b)) return KILN_FAIL("conv_transpose_1d: data b must be a matrix [L, IC], got %s", sb);
    if (a->ne[3] != 1) return KILN_FAIL("conv_transpose_1d: kernel a must be 3D [K, OC, IC], got %s", sa);
    if (a->ne[2] != b->ne[1]) {
        return KILN_FAIL("conv_transpose_1d: kernel a has %lld input channels (ne[2]) but data b has %lld (ne[1]): %s vs %s",
                         (long long) a->ne[2], (long long) b->ne[1], sa, sb);
    }
    if (s0 < 1) return KILN_FAIL("conv_transpose_1d: stride s0 = %d must be >= 1", s0);
    if (p0 != 0) return KILN_FAIL("conv_transpose_1d: only padding p0 = 0 is supported (as in ggml), got %d", p0);
    if (d0 != 1) return KILN_FAIL("conv_transpose_1d: only dilation d0 = 1 is supported (as in ggml), got %d", d0);
    if (!check_not_empty(a, op, "a") || !check_not_empty(b, op, "b")) return NULL;
    int64_t ol;
    if (__builtin_mul_overflow(b->ne[0] - 1, (int64_t) s0, &ol) || __builtin_add_overflow(ol, a->ne[0], &ol)) {
        return KILN_FAIL("conv_transpose_1d: output length overflows (%s, s0 = %d)", sb, s0);
    }
    const int64_t ne[4] = { ol, a->ne[1], b->ne[2], 1 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[3] = { s0, p0, d0 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_CONV_TRANSPOSE_1D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_conv_transpose_2d_p0(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int stride) {
    static const char * op = "conv_transpose_2d_p0";
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(b, op, "b")) return NULL;
    char sa[96], sb[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(b, sb, sizeof sb);
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) return KILN_FAIL("conv_transpose_2d_p0: kernel a must be f32 or f16, got %s", sa);
    if (b->type != KILN_TYPE_F32) return KILN_FAIL("conv_transpose_2d_p0: data b must be f32, got %s", sb);
    if (a->ne[3] != b->ne[2]) {
        return KILN_FAIL("conv_transpose_2d_p0: kernel a has %lld input channels (ne[3]) but data b has %lld (ne[2]): %s vs %s",
                         (long long) a->ne[3], (long long) b->ne[2], sa, sb);
    }
    if (stride < 1) return KILN_FAIL("conv_transpose_2d_p0: stride = %d must be >= 1", stride);
    if (!check_not_empty(a, op, "a") || !check_not_empty(b, op, "b")) return NULL;
    int64_t ow, oh;
    if (__builtin_mul_overflow(b->ne[0] - 1, (int64_t) stride, &ow) || __builtin_add_overflow(ow, a->ne[0], &ow) ||
        __builtin_mul_overflow(b->ne[1] - 1, (int64_t) stride, &oh) || __builtin_add_overflow(oh, a->ne[1], &oh)) {
        return KILN_FAIL("conv_transpose_2d_p0: output size overflows (%s, stride = %d)", sb, stride);
    }
    const int64_t ne[4] = { ow, oh, a->ne[2], b->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, stride);
    r->op = KILN_OP_CONV_TRANSPOSE_2D;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* -------------------------------------------------------------- pooling */

static bool check_pool_args(const char * op, enum kiln_op_pool pool, int k, int s, double p, const char * dim) {
    if ((int) pool < 0 || (int) pool >= KILN_OP_POOL_COUNT) {
        kiln_set_error("%s: pool op %d is neither KILN_OP_POOL_MAX nor KILN_OP_POOL_AVG", op, (int) pool);
        return false;
    }
    if (k < 1 || s < 1 || !(p >= 0.0) || p > 1.0e9) {
        kiln_set_error("%s: kernel%s and stride%s must be >= 1 and padding%s >= 0 (k=%d s=%d p=%g)", op, dim, dim, dim, k, s, p);
        return false;
    }
    return true;
}

struct kiln_tensor * kiln_pool_1d(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_op_pool pool, int k0, int s0, int p0) {
    static const char * op = "pool_1d";
    if (!kiln_check_tensor(a, op, "a")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) return KILN_FAIL("pool_1d: a must be f32 or f16, got %s", sa);
    if (!check_pool_args(op, pool, k0, s0, p0, " 0")) return NULL;
    const int64_t ow = pool_out_size(a->ne[0], k0, s0, (float) p0);
    if (ow <= 0) return KILN_FAIL("pool_1d: input %s is too short for kernel %d (stride %d, padding %d)", sa, k0, s0, p0);
    const int64_t ne[4] = { ow, a->ne[1], a->ne[2], a->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[4] = { (int32_t) pool, k0, s0, p0 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_POOL_1D;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_pool_2d(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_op_pool pool,
        int k0, int k1, int s0, int s1, float p0, float p1) {
    static const char * op = "pool_2d";
    if (!kiln_check_tensor(a, op, "a")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) return KILN_FAIL("pool_2d: a must be f32 or f16, got %s", sa);
    if (!check_pool_args(op, pool, k0, s0, p0, " 0") || !check_pool_args(op, pool, k1, s1, p1, " 1")) return NULL;
    const int64_t ow = pool_out_size(a->ne[0], k0, s0, p0);
    const int64_t oh = pool_out_size(a->ne[1], k1, s1, p1);
    if (ow <= 0 || oh <= 0) {
        return KILN_FAIL("pool_2d: input %s is too small for kernel %dx%d (stride %dx%d, padding %gx%g)", sa, k0, k1, s0, s1, p0, p1);
    }
    const int64_t ne[4] = { ow, oh, a->ne[2], a->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    /* ggml stores the float paddings truncated to int32 */
    const int32_t params[7] = { (int32_t) pool, k0, k1, s0, s1, (int32_t) p0, (int32_t) p1 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_POOL_2D;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_pool_2d_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * af, enum kiln_op_pool pool,
        int k0, int k1, int s0, int s1, float p0, float p1) {
    static const char * op = "pool_2d_back";
    if (!kiln_check_tensor(a, op, "a") || !kiln_check_tensor(af, op, "af")) return NULL;
    char sa[96], sf[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(af, sf, sizeof sf);
    if (a->type != KILN_TYPE_F32) return KILN_FAIL("pool_2d_back: gradient a must be f32, got %s", sa);
    if (af->type != KILN_TYPE_F32 && af->type != KILN_TYPE_F16) return KILN_FAIL("pool_2d_back: forward input af must be f32 or f16, got %s", sf);
    if (!check_pool_args(op, pool, k0, s0, p0, " 0") || !check_pool_args(op, pool, k1, s1, p1, " 1")) return NULL;
    const int64_t ow = pool_out_size(af->ne[0], k0, s0, p0);
    const int64_t oh = pool_out_size(af->ne[1], k1, s1, p1);
    if (a->ne[0] != ow || a->ne[1] != oh || a->ne[2] != af->ne[2] || a->ne[3] != af->ne[3]) {
        return KILN_FAIL("pool_2d_back: gradient a %s does not match the pool_2d output [%lld, %lld, %lld, %lld] of af %s",
                         sa, (long long) ow, (long long) oh, (long long) af->ne[2], (long long) af->ne[3], sf);
    }
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, af->ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[7] = { (int32_t) pool, k0, k1, s0, s1, (int32_t) p0, (int32_t) p1 };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_POOL_2D_BACK;
    r->src[0] = a;
    r->src[1] = af;
    return r;
}
