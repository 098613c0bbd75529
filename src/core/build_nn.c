/*
 * build_nn.c — constructors of the neural-network ops: norms, softmax, rope,
 * flash attention, losses, the AdamW step and timestep embeddings.
 *
 * Shapes, sources and op_params follow ggml exactly (see the op_params notes
 * per op) so a ggml graph ports one to one. Everything ggml would assert on
 * is checked here and reported as NULL + kiln_last_error().
 */
#include "internal.h"

#include <math.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

static const char * shp(const struct kiln_tensor * t, char * buf) { return kiln_shape_str(t, buf, 96); }

/* kernels read rows element by element along ne[0] */
static bool check_rows_contiguous(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (t->nb[0] != kiln_type_size(t->type)) {
        kiln_set_error("%s: argument %s must have contiguous rows (nb[0] = %zu, element size %zu)",
                       op, arg, t->nb[0], kiln_type_size(t->type));
        return false;
    }
    return true;
}

static bool check_f32_rows(const struct kiln_tensor * t, const char * op, const char * arg) {
    return kiln_check_type(t, KILN_TYPE_F32, op, arg) && check_rows_contiguous(t, op, arg);
}

static bool is_float_type(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

/* result of an op on a: a fresh tensor of a's shape, or a view of a */
static struct kiln_tensor * result_like(struct kiln_context * ctx, struct kiln_tensor * a, bool inplace) {
    return inplace ? kiln_view_tensor(ctx, a) : kiln_dup_tensor(ctx, a);
}

/* ------------------------------------------------------------ norms */

/* op_params: [0] = eps (f32) */
static struct kiln_tensor * norm_impl(struct kiln_context * ctx, struct kiln_tensor * a, float eps,
                                      enum kiln_op op, bool inplace, const char * fn) {
    if (!check_f32_rows(a, fn, "a")) return NULL;
    if (!(eps >= 0.0f)) return KILN_FAIL("%s: eps = %g must be >= 0", fn, (double) eps);
    struct kiln_tensor * r = result_like(ctx, a, inplace);
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, eps);
    r->op = op;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_norm(struct kiln_context * ctx, struct kiln_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, KILN_OP_NORM, false, "norm");
}
struct kiln_tensor * kiln_norm_inplace(struct kiln_context * ctx, struct kiln_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, KILN_OP_NORM, true, "norm_inplace");
}
struct kiln_tensor * kiln_rms_norm(struct kiln_context * ctx, struct kiln_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, KILN_OP_RMS_NORM, false, "rms_norm");
}
struct kiln_tensor * kiln_rms_norm_inplace(struct kiln_context * ctx, struct kiln_tensor * a, float eps) {
    return norm_impl(ctx, a, eps, KILN_OP_RMS_NORM, true, "rms_norm_inplace");
}

/* a = x (the forward input), b = dy; result dx has a's shape.
 * op_params: [0] = eps (f32) */
struct kiln_tensor * kiln_rms_norm_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float eps) {
    const char * fn = "rms_norm_back";
    if (!check_f32_rows(a, fn, "a") || !check_f32_rows(b, fn, "b")) return NULL;
    if (!kiln_check_same_shape(a, b, fn)) return NULL;
    if (!(eps >= 0.0f)) return KILN_FAIL("%s: eps = %g must be >= 0", fn, (double) eps);
    struct kiln_tensor * r = kiln_dup_tensor(ctx, a);
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, eps);
    r->op = KILN_OP_RMS_NORM_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* groups split ne[2] (channels); op_params: [0] = n_groups (i32), [1] = eps (f32) */
static struct kiln_tensor * group_norm_impl(struct kiln_context * ctx, struct kiln_tensor * a, int n_groups, float eps,
                                            bool inplace, const char * fn) {
    if (!check_f32_rows(a, fn, "a")) return NULL;
    if (n_groups < 1) return KILN_FAIL("%s: n_groups = %d must be >= 1", fn, n_groups);
    if (!(eps >= 0.0f)) return KILN_FAIL("%s: eps = %g must be >= 0", fn, (double) eps);
    struct kiln_tensor * r = result_like(ctx, a, inplace);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, n_groups);
    kiln_set_op_params_f32(r, 1, eps);
    r->op = KILN_OP_GROUP_NORM;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_group_norm(struct kiln_context * ctx, struct kiln_tensor * a, int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, false, "group_norm");
}
struct kiln_tensor * kiln_group_norm_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_groups, float eps) {
    return group_norm_impl(ctx, a, n_groups, eps, true, "group_norm_inplace");
}

/* ------------------------------------------------------------ softmax */

/* mask: F16/F32 [ne0, >= ne1, ne2 | a.ne2, ne3 | a.ne3], rows contiguous.
 * op_params: [0] = scale (f32), [1] = max_bias (f32) */
static struct kiln_tensor * soft_max_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * mask,
                                          float scale, float max_bias, bool inplace, const char * fn) {
    char sa[96], sm[96];
    if (!check_f32_rows(a, fn, "a")) return NULL;
    if (mask) {
        if (!kiln_check_tensor(mask, fn, "mask")) return NULL;
        if (mask->type != KILN_TYPE_F16 && mask->type != KILN_TYPE_F32) {
            return KILN_FAIL("%s: mask must be f16 or f32, got %s", fn, kiln_type_name(mask->type));
        }
        if (!check_rows_contiguous(mask, fn, "mask")) return NULL;
        if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] ||
            a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0) {
            return KILN_FAIL("%s: mask %s does not fit a %s (needs ne0 equal, ne1 >= a's, ne2/ne3 dividing a's)",
                             fn, shp(mask, sm), shp(a, sa));
        }
    }
    if (max_bias > 0.0f && !mask) return KILN_FAIL("%s: max_bias = %g (ALiBi) needs a mask", fn, (double) max_bias);
    struct kiln_tensor * r = result_like(ctx, a, inplace);
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, scale);
    kiln_set_op_params_f32(r, 1, max_bias);
    r->op = KILN_OP_SOFT_MAX;
    r->src[0] = a;
    r->src[1] = mask;
    return r;
}

struct kiln_tensor * kiln_soft_max(struct kiln_context * ctx, struct kiln_tensor * a) {
    return soft_max_impl(ctx, a, NULL, 1.0f, 0.0f, false, "soft_max");
}
struct kiln_tensor * kiln_soft_max_inplace(struct kiln_context * ctx, struct kiln_tensor * a) {
    return soft_max_impl(ctx, a, NULL, 1.0f, 0.0f, true, "soft_max_inplace");
}
struct kiln_tensor * kiln_soft_max_ext(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * mask, float scale, float max_bias) {
    return soft_max_impl(ctx, a, mask, scale, max_bias, false, "soft_max_ext");
}

/* a = dy, b = y; op_params as soft_max. ggml's kernel has no ALiBi rule,
 * so max_bias != 0 is refused here instead of failing at compute. */
static struct kiln_tensor * soft_max_back_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
                                               float scale, float max_bias, bool inplace, const char * fn) {
    if (!check_f32_rows(a, fn, "a") || !check_f32_rows(b, fn, "b")) return NULL;
    if (!kiln_check_same_shape(a, b, fn)) return NULL;
    if (max_bias != 0.0f) return KILN_FAIL("%s: max_bias = %g is not supported (only 0)", fn, (double) max_bias);
    struct kiln_tensor * r = result_like(ctx, a, inplace);
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, scale);
    kiln_set_op_params_f32(r, 1, max_bias);
    r->op = KILN_OP_SOFT_MAX_BACK;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

struct kiln_tensor * kiln_soft_max_ext_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float scale, float max_bias) {
    return soft_max_back_impl(ctx, a, b, scale, max_bias, false, "soft_max_ext_back");
}
struct kiln_tensor * kiln_soft_max_ext_back_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float scale, float max_bias) {
    return soft_max_back_impl(ctx, a, b, scale, max_bias, true, "soft_max_ext_back_inplace");
}

/* ------------------------------------------------------------ rope */

static float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
    return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float) M_PI)) / (2 * logf(base));
}

void kiln_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]) {
    /* the dimension where the wavelength reaches beta rotations over n_ctx_orig */
    const float start = floorf(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
    const float end   = ceilf (rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = end < (float)(n_dims - 1) ? end : (float)(n_dims - 1);
}

/* op_params: [0] n_past=0 [1] n_dims [2] mode [3] n_ctx=0 [4] n_ctx_orig,
 * f32 [5..10] freq_base freq_scale ext_factor attn_factor beta_fast beta_slow,
 * i32 [11..14] sections */
static struct kiln_tensor * rope_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, const int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow,
        bool inplace, enum kiln_op op, const char * fn) {
    char sa[96], sb[96];
    if (!kiln_check_tensor(a, fn, "a") || !kiln_check_tensor(b, fn, "b")) return NULL;
    if (a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) {
        return KILN_FAIL("%s: a must be f32 or f16, got %s", fn, kiln_type_name(a->type));
    }
    if (!check_rows_contiguous(a, fn, "a")) return NULL;
    if (!kiln_check_type(b, KILN_TYPE_I32, fn, "b (positions)")) return NULL;
    if (!kiln_is_vector(b) || !kiln_is_contiguous(b)) return KILN_FAIL("%s: positions b must be a contiguous vector, got %s", fn, shp(b, sb));
    if (mode & 1) return KILN_FAIL("%s: mode %d: bit 0 is not a rope mode (use 0 = normal, %d = neox)", fn, mode, KILN_ROPE_TYPE_NEOX);
    const bool mrope = (mode & KILN_ROPE_TYPE_MROPE) != 0;
    if (mrope && mode != KILN_ROPE_TYPE_MROPE && mode != KILN_ROPE_TYPE_VISION) {
        return KILN_FAIL("%s: unknown multi-rope mode %d (use %d or %d)", fn, mode, KILN_ROPE_TYPE_MROPE, KILN_ROPE_TYPE_VISION);
    }
    if (!mrope && mode != 0 && mode != KILN_ROPE_TYPE_NEOX) {
        return KILN_FAIL("%s: unknown rope mode %d (use 0 = normal, %d = neox)", fn, mode, KILN_ROPE_TYPE_NEOX);
    }
    if (mrope && !sections) return KILN_FAIL("%s: multi-rope mode %d needs kiln_rope_multi (sections)", fn, mode);
    if (n_dims <= 0 || n_dims % 2 != 0) return KILN_FAIL("%s: n_dims = %d must be even and > 0", fn, n_dims);
    if (mode == KILN_ROPE_TYPE_VISION) {
        if (2 * (int64_t) n_dims != a->ne[0]) {
            return KILN_FAIL("%s: vision rope needs n_dims = ne0/2, got n_dims %d for %s", fn, n_dims, shp(a, sa));
        }
    } else if (n_dims > a->ne[0]) {
        return KILN_FAIL("%s: n_dims = %d exceeds the row size of %s", fn, n_dims, shp(a, sa));
    }
    if (mrope) {
        if (b->ne[0] != 4 * a->ne[2]) {
            return KILN_FAIL("%s: multi-rope needs 4 positions per token: b %s vs a %s", fn, shp(b, sb), shp(a, sa));
        }
        if (sections[0] < 0 || sections[1] < 0 || sections[2] < 0 || sections[3] < 0 ||
            (sections[0] <= 0 && sections[1] <= 0 && sections[2] <= 0)) {
            return KILN_FAIL("%s: sections {%d, %d, %d, %d} must be >= 0 with one of the first three > 0",
                             fn, sections[0], sections[1], sections[2], sections[3]);
        }
        if ((int64_t) sections[0] + sections[1] + sections[2] + sections[3] > a->ne[0]) {
            return KILN_FAIL("%s: sections sum to more than the row size of %s", fn, shp(a, sa));
        }
    } else if (b->ne[0] != a->ne[2]) {
        return KILN_FAIL("%s: positions b %s must have one entry per a->ne[2]: a %s", fn, shp(b, sb), shp(a, sa));
    }
    if (c) {
        if (!kiln_check_type(c, KILN_TYPE_F32, fn, "c (freq factors)")) return NULL;
        if (!kiln_is_contiguous(c) || c->ne[0] < n_dims / 2) {
            return KILN_FAIL("%s: freq factors c %s must be contiguous with at least n_dims/2 = %d entries", fn, shp(c, sb), n_dims / 2);
        }
    }
    if (!(freq_base > 0.0f)) return KILN_FAIL("%s: freq_base = %g must be > 0", fn, (double) freq_base);
    struct kiln_tensor * r = result_like(ctx, a, inplace);
    if (!r) return NULL;
    int32_t params[15] = { 0, n_dims, mode, 0, n_ctx_orig };
    memcpy(params + 5,  &freq_base,   sizeof(float));
    memcpy(params + 6,  &freq_scale,  sizeof(float));
    memcpy(params + 7,  &ext_factor,  sizeof(float));
    memcpy(params + 8,  &attn_factor, sizeof(float));
    memcpy(params + 9,  &beta_fast,   sizeof(float));
    memcpy(params + 10, &beta_slow,   sizeof(float));
    if (sections) memcpy(params + 11, sections, 4 * sizeof(int32_t));
    kiln_set_op_params(r, params, sizeof(params));
    r->op = op;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}

struct kiln_tensor * kiln_rope(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, NULL, n_dims, NULL, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, false, KILN_OP_ROPE, "rope");
}
struct kiln_tensor * kiln_rope_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int n_dims, int mode) {
    return rope_impl(ctx, a, b, NULL, n_dims, NULL, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, true, KILN_OP_ROPE, "rope_inplace");
}
struct kiln_tensor * kiln_rope_ext(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, NULL, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, KILN_OP_ROPE, "rope_ext");
}
struct kiln_tensor * kiln_rope_ext_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, NULL, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, true, KILN_OP_ROPE, "rope_ext_inplace");
}
struct kiln_tensor * kiln_rope_multi(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    if (!sections) return KILN_FAIL("rope_multi: sections is NULL");
    if (!(mode & KILN_ROPE_TYPE_MROPE)) {
        return KILN_FAIL("rope_multi: mode %d is not a multi-rope mode (%d or %d)", mode, KILN_ROPE_TYPE_MROPE, KILN_ROPE_TYPE_VISION);
    }
    return rope_impl(ctx, a, b, c, n_dims, sections, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, KILN_OP_ROPE, "rope_multi");
}
struct kiln_tensor * kiln_rope_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow) {
    return rope_impl(ctx, a, b, c, n_dims, NULL, mode, n_ctx_orig, freq_base, freq_scale, ext_factor, attn_factor,
                     beta_fast, beta_slow, false, KILN_OP_ROPE_BACK, "rope_back");
}

/* ------------------------------------------------------------ attention */

/* q [DK, n_batch, n_head, ne3] f32; k [DK, n_kv, n_head_kv, ne3], v [DV, n_kv,
 * n_head_kv, ne3] (f32/f16, or any type with a to_float, rows contiguous);
 * mask [>= n_kv, >= n_batch, ne32 | n_head, ne33 | ne3] f16/f32.
 * result f32 [DV, n_head, n_batch, ne3].
 * op_params: f32 [0] scale [1] max_bias [2] logit_softcap, i32 [3] prec */
struct kiln_tensor * kiln_flash_attn_ext(struct kiln_context * ctx, struct kiln_tensor * q, struct kiln_tensor * k, struct kiln_tensor * v,
        struct kiln_tensor * mask, float scale, float max_bias, float logit_softcap) {
    const char * fn = "flash_attn_ext";
    char s1[96], s2[96], s3[96];
    if (!check_f32_rows(q, fn, "q")) return NULL;
    if (!kiln_check_tensor(k, fn, "k") || !kiln_check_tensor(v, fn, "v")) return NULL;
    if (!check_rows_contiguous(k, fn, "k") || !check_rows_contiguous(v, fn, "v")) return NULL;
    /* quantized K/V would need per-block rows; not wired yet */
    if (!is_float_type(k->type) || !is_float_type(v->type)) {
        return KILN_FAIL("%s: k and v must be f32, f16 or bf16, got %s and %s", fn, kiln_type_name(k->type), kiln_type_name(v->type));
    }
    if (k->ne[0] != q->ne[0]) return KILN_FAIL("%s: head size of k %s differs from q %s", fn, shp(k, s1), shp(q, s2));
    if (v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) {
        return KILN_FAIL("%s: v %s must have k's n_kv, n_head_kv and ne3: k %s", fn, shp(v, s1), shp(k, s2));
    }
    if (k->ne[2] == 0 || q->ne[2] % k->ne[2] != 0 || q->ne[3] != k->ne[3]) {
        return KILN_FAIL("%s: k heads %s do not broadcast to q heads %s (n_head must be a multiple of n_head_kv, ne3 equal)",
                         fn, shp(k, s1), shp(q, s2));
    }
    if (mask) {
        if (!kiln_check_tensor(mask, fn, "mask")) return NULL;
        if (mask->type != KILN_TYPE_F16 && mask->type != KILN_TYPE_F32) {
            return KILN_FAIL("%s: mask must be f16 or f32, got %s", fn, kiln_type_name(mask->type));
        }
        if (!check_rows_contiguous(mask, fn, "mask")) return NULL;
        if (mask->ne[0] < k->ne[1] || mask->ne[1] < q->ne[1] ||
            q->ne[2] % mask->ne[2] != 0 || q->ne[3] % mask->ne[3] != 0) {
            return KILN_FAIL("%s: mask %s does not fit q %s and k %s (needs ne0 >= n_kv, ne1 >= n_batch, ne2/ne3 dividing q's)",
                             fn, shp(mask, s1), shp(q, s2), shp(k, s3));
        }
    }
    if (max_bias > 0.0f && !mask) return KILN_FAIL("%s: max_bias = %g (ALiBi) needs a mask", fn, (double) max_bias);
    const int64_t ne[4] = { v->ne[0], q->ne[2], q->ne[1], q->ne[3] };
    struct kiln_tensor * r = kiln_new_tensor(ctx, KILN_TYPE_F32, 4, ne);
    if (!r) return NULL;
    kiln_set_op_params_f32(r, 0, scale);
    kiln_set_op_params_f32(r, 1, max_bias);
    kiln_set_op_params_f32(r, 2, logit_softcap);
    kiln_set_op_params_i32(r, 3, KILN_PREC_DEFAULT);
    r->op = KILN_OP_FLASH_ATTN_EXT;
    r->src[0] = q;
    r->src[1] = k;
    r->src[2] = v;
    r->src[3] = mask;
    return r;
}

void kiln_flash_attn_ext_set_prec(struct kiln_tensor * a, enum kiln_prec prec) {
    if (!a || a->op != KILN_OP_FLASH_ATTN_EXT) {
        kiln_set_error("flash_attn_ext_set_prec: tensor is not a flash_attn_ext result");
        return;
    }
    /* the CPU kernel always accumulates in f32; the flag is kept for ports */
    kiln_set_op_params_i32(a, 3, (int32_t) prec);
}

/* ------------------------------------------------------------ losses, optimizer */

/* a: logits, b: target probabilities, same shape -> f32 [1] */
struct kiln_tensor * kiln_cross_entropy_loss(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b) {
    const char * fn = "cross_entropy_loss";
    if (!check_f32_rows(a, fn, "a") || !check_f32_rows(b, fn, "b")) return NULL;
    if (!kiln_check_same_shape(a, b, fn)) return NULL;
    struct kiln_tensor * r = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1);
    if (!r) return NULL;
    r->op = KILN_OP_CROSS_ENTROPY_LOSS;
    r->src[0] = a;
    r->src[1] = b;
    return r;
}

/* a: d loss (f32, 1 element), b: logits, c: labels -> shape of b */
struct kiln_tensor * kiln_cross_entropy_loss_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c) {
    const char * fn = "cross_entropy_loss_back";
    char s1[96];
    if (!kiln_check_type(a, KILN_TYPE_F32, fn, "a (loss gradient)")) return NULL;
    if (kiln_nelements(a) != 1) return KILN_FAIL("%s: loss gradient a must have 1 element, got %s", fn, shp(a, s1));
    if (!check_f32_rows(b, fn, "b") || !check_f32_rows(c, fn, "c")) return NULL;
    if (!kiln_check_same_shape(b, c, fn)) return NULL;
    struct kiln_tensor * r = kiln_dup_tensor(ctx, b);
    if (!r) return NULL;
    r->op = KILN_OP_CROSS_ENTROPY_LOSS_BACK;
    r->src[0] = a;
    r->src[1] = b;
    r->src[2] = c;
    return r;
}

/* in place on a (a view of a is returned); a must be flagged PARAM */
struct kiln_tensor * kiln_opt_step_adamw(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * grad,
        struct kiln_tensor * m, struct kiln_tensor * v, struct kiln_tensor * adamw_params) {
    const char * fn = "opt_step_adamw";
    char s1[96];
    if (!check_f32_rows(a, fn, "a") || !check_f32_rows(grad, fn, "grad") ||
        !check_f32_rows(m, fn, "m") || !check_f32_rows(v, fn, "v")) return NULL;
    if (!kiln_check_type(adamw_params, KILN_TYPE_F32, fn, "adamw_params")) return NULL;
    if (!(a->flags & KILN_TENSOR_FLAG_PARAM)) return KILN_FAIL("%s: a is not a parameter (kiln_set_param)", fn);
    if (!kiln_check_same_shape(a, grad, fn) || !kiln_check_same_shape(a, m, fn) || !kiln_check_same_shape(a, v, fn)) return NULL;
    if (kiln_nelements(adamw_params) != 7 || !kiln_is_contiguous(adamw_params)) {
        return KILN_FAIL("%s: adamw_params must be 7 contiguous f32 values, got %s", fn, shp(adamw_params, s1));
    }
    struct kiln_tensor * r = kiln_view_tensor(ctx, a);
    if (!r) return NULL;
    r->op = KILN_OP_OPT_STEP_ADAMW;
    r->src[0] = a;
    r->src[1] = grad;
    r->src[2] = m;
    r->src[3] = v;
    r->src[4] = adamw_params;
    return r;
}

/* ------------------------------------------------------------ embeddings */

/* timesteps f32 [N] -> f32 [dim, N]: cos of the first half of the
 * frequencies, then sin; an odd dim leaves the last column 0.
 * op_params: [0] dim, [1] max_period */
struct kiln_tensor * kiln_timestep_embedding(struct kiln_context * ctx, struct kiln_tensor * timesteps, int dim, int max_period) {
    const char * fn = "timestep_embedding";
    char s1[96];
    if (!check_f32_rows(timesteps, fn, "timesteps")) return NULL;
    if (!kiln_is_vector(timesteps)) return KILN_FAIL("%s: timesteps must be a vector, got %s", fn, shp(timesteps, s1));
    if (dim < 1) return KILN_FAIL("%s: dim = %d must be >= 1", fn, dim);
    if (max_period < 1) return KILN_FAIL("%s: max_period = %d must be >= 1", fn, max_period);
    struct kiln_tensor * r = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, dim, timesteps->ne[0]);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, dim);
    kiln_set_op_params_i32(r, 1, max_period);
    r->op = KILN_OP_TIMESTEP_EMBEDDING;
    r->src[0] = timesteps;
    return r;
}
