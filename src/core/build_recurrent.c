/*
 * build_recurrent.c — constructors of the window / relative-position ops
 * (SAM-style vision transformers: win_part, win_unpart, get_rel_pos,
 * add_rel_pos) and of the recurrent-state ops (Mamba's ssm_conv and
 * ssm_scan, RWKV v6's wkv6, gated linear attention).
 *
 * Shapes, checks and op_params follow ggml. The recurrent ops return their
 * outputs and the final states concatenated in one F32 tensor, as ggml does.
 */
#include "internal.h"

static bool check_f32(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!kiln_check_tensor(t, op, arg)) return false;
    if (t->type != KILN_TYPE_F32) {
        char s[96];
        kiln_set_error("%s: argument %s must be f32, got %s", op, arg, kiln_shape_str(t, s, sizeof s));
        return false;
    }
    return true;
}

static bool check_contiguous(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!kiln_is_contiguous(t)) {
        char s[96];
        kiln_set_error("%s: argument %s %s must be contiguous (use kiln_cont first)", op, arg, kiln_shape_str(t, s, sizeof s));
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ windows */

struct kiln_tensor * kiln_win_part(struct kiln_context * ctx, struct kiln_tensor * a, int w) {
    if (!check_f32(a, "win_part", "a")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (a->ne[3] != 1) return KILN_FAIL("win_part: a must be 3D [C, W, H], got %s", sa);
    if (w < 1) return KILN_FAIL("win_part: window size w = %d must be >= 1", w);
    if (a->ne[1] > INT32_MAX - w || a->ne[2] > INT32_MAX - w) return KILN_FAIL("win_part: a %s is too large", sa);
    const int64_t px = (w - a->ne[1] % w) % w;
    const int64_t py = (w - a->ne[2] % w) % w;
    const int64_t npx = (px + a->ne[1]) / w;
    const int64_t npy = (py + a->ne[2]) / w;
    const int64_t ne[4] = { a->ne[0], w, w, npx * npy };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 4, ne, NULL, 0);
    if (!r) return NULL;
    const int32_t params[3] = { (int32_t) npx, (int32_t) npy, w };
    kiln_set_op_params(r, params, sizeof(params));
    r->op = KILN_OP_WIN_PART;
    r->src[0] = a;
    return r;
}

struct kiln_tensor * kiln_win_unpart(struct kiln_context * ctx, struct kiln_tensor * a, int w0, int h0, int w) {
    if (!check_f32(a, "win_unpart", "a")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (w < 1 || w0 < 1 || h0 < 1) return KILN_FAIL("win_unpart: w = %d, w0 = %d and h0 = %d must be >= 1", w, w0, h0);
    if (w0 > INT32_MAX - w || h0 > INT32_MAX - w) return KILN_FAIL("win_unpart: w0 = %d or h0 = %d is too large", w0, h0);
    const int64_t npx = ((int64_t) w0 + w - 1) / w;
    const int64_t npy = ((int64_t) h0 + w - 1) / w;
    if (a->ne[1] != w || a->ne[2] != w || a->ne[3] != npx * npy) {
        return KILN_FAIL("win_unpart: a %s must be [C, %d, %d, %lld] (windows of %d covering %d x %d)",
                         sa, w, w, (long long)(npx * npy), w, w0, h0);
    }
    const int64_t ne[3] = { a->ne[0], w0, h0 };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 3, ne, NULL, 0);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, w);
    r->op = KILN_OP_WIN_UNPART;
    r->src[0] = a;
    return r;
}

/* ---------------------------------------------------- relative positions */

struct kiln_tensor * kiln_get_rel_pos(struct kiln_context * ctx, struct kiln_tensor * a, int qh, int kh) {
    if (!kiln_check_tensor(a, "get_rel_pos", "a")) return NULL;
    char sa[96];
    kiln_shape_str(a, sa, sizeof sa);
    if (a->type != KILN_TYPE_F16 && a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_BF16) {
        return KILN_FAIL("get_rel_pos: a must be f16, f32 or bf16, got %s", sa);
    }
    if (qh < 1 || qh != kh) return KILN_FAIL("get_rel_pos: qh = %d and kh = %d must be equal and >= 1", qh, kh);
    if (a->ne[1] != 2 * (int64_t) qh - 1) {
        return KILN_FAIL("get_rel_pos: a %s must have ne[1] = 2*max(qh, kh) - 1 = %lld", sa, 2 * (long long) qh - 1);
    }
    const int64_t ne[3] = { a->ne[0], kh, qh };
    /* the result is F16 whatever a is, as in ggml */
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F16, 3, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_GET_REL_POS;
    r->src[0] = a;
    return r;
}

static struct kiln_tensor * add_rel_pos_impl(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * pw,
        struct kiln_tensor * ph, bool inplace) {
    const char * op = inplace ? "add_rel_pos_inplace" : "add_rel_pos";
    if (!check_f32(a, op, "a") || !check_f32(pw, op, "pw") || !check_f32(ph, op, "ph")) return NULL;
    char sa[96], sw[96], sh[96];
    kiln_shape_str(a, sa, sizeof sa);
    kiln_shape_str(pw, sw, sizeof sw);
    kiln_shape_str(ph, sh, sizeof sh);
    if (!kiln_are_same_shape(pw, ph)) return KILN_FAIL("%s: pw and ph must have the same shape: %s vs %s", op, sw, sh);
    if (!check_contiguous(a, op, "a") || !check_contiguous(pw, op, "pw") || !check_contiguous(ph, op, "ph")) return NULL;
    if (pw->ne[3] != a->ne[2] || pw->ne[0] * pw->ne[0] != a->ne[0] || pw->ne[1] * pw->ne[2] != a->ne[1] || a->ne[3] != 1) {
        return KILN_FAIL("%s: a %s must be [pw.ne0^2, pw.ne1*pw.ne2, pw.ne3, 1] for pw %s", op, sa, sw);
    }
    struct kiln_tensor * r = inplace ? kiln_view_tensor(ctx, a) : kiln_dup_tensor(ctx, a);
    if (!r) return NULL;
    kiln_set_op_params_i32(r, 0, inplace ? 1 : 0);
    r->op = KILN_OP_ADD_REL_POS;
    r->src[0] = a;
    r->src[1] = pw;
    r->src[2] = ph;
    return r;
}

struct kiln_tensor * kiln_add_rel_pos(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * pw, struct kiln_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, false);
}

struct kiln_tensor * kiln_add_rel_pos_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * pw, struct kiln_tensor * ph) {
    return add_rel_pos_impl(ctx, a, pw, ph, true);
}

/* ------------------------------------------------------------------ SSM */

struct kiln_tensor * kiln_ssm_conv(struct kiln_context * ctx, struct kiln_tensor * sx, struct kiln_tensor * c) {
    if (!check_f32(sx, "ssm_conv", "sx") || !check_f32(c, "ssm_conv", "c")) return NULL;
    char ss[96], sc[96];
    kiln_shape_str(sx, ss, sizeof ss);
    kiln_shape_str(c, sc, sizeof sc);
    if (!kiln_is_3d(sx)) return KILN_FAIL("ssm_conv: sx must be 3D [d_conv - 1 + n_t, d_inner, n_s], got %s", ss);
    if (!kiln_is_matrix(c)) return KILN_FAIL("ssm_conv: c must be a matrix [d_conv, d_inner], got %s", sc);
    const int64_t d_conv = c->ne[0], d_inner = c->ne[1];
    const int64_t n_t = sx->ne[0] - d_conv + 1;
    if (d_conv < 1 || sx->ne[1] != d_inner || n_t < 0) {
        return KILN_FAIL("ssm_conv: sx %s and c %s do not fit: need sx = [d_conv - 1 + n_t, d_inner, n_s] with c = [d_conv, d_inner]", ss, sc);
    }
    const int64_t ne[3] = { d_inner, n_t, sx->ne[2] };
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 3, ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_SSM_CONV;
    r->src[0] = sx;
    r->src[1] = c;
    return r;
}

struct kiln_tensor * kiln_ssm_scan(struct kiln_context * ctx, struct kiln_tensor * s, struct kiln_tensor * x, struct kiln_tensor * dt,
        struct kiln_tensor * A, struct kiln_tensor * B, struct kiln_tensor * C) {
    static const char * op = "ssm_scan";
    if (!check_f32(s, op, "s") || !check_f32(x, op, "x") || !check_f32(dt, op, "dt") ||
        !check_f32(A, op, "A") || !check_f32(B, op, "B") || !check_f32(C, op, "C")) return NULL;
    if (!check_contiguous(s, op, "s") || !check_contiguous(x, op, "x") || !check_contiguous(dt, op, "dt") ||
        !check_contiguous(A, op, "A")) return NULL;
    char s0[96], s1[96], s2[96], s3[96], s4[96], s5[96];
    kiln_shape_str(s, s0, sizeof s0);
    kiln_shape_str(x, s1, sizeof s1);
    kiln_shape_str(dt, s2, sizeof s2);
    kiln_shape_str(A, s3, sizeof s3);
    kiln_shape_str(B, s4, sizeof s4);
    kiln_shape_str(C, s5, sizeof s5);
    if (B->nb[0] != sizeof(float) || C->nb[0] != sizeof(float)) return KILN_FAIL("ssm_scan: B and C must have contiguous rows");
    if (!kiln_are_same_shape(x, dt)) return KILN_FAIL("ssm_scan: x and dt must have the same shape: %s vs %s", s1, s2);
    if (!kiln_are_same_shape(B, C)) return KILN_FAIL("ssm_scan: B and C must have the same shape: %s vs %s", s4, s5);
    if (!kiln_is_matrix(A) || !kiln_is_3d(B) || !kiln_is_3d(s) || !kiln_is_3d(x)) {
        return KILN_FAIL("ssm_scan: need A 2D, and s, x, B 3D: s %s, x %s, A %s, B %s", s0, s1, s3, s4);
    }
    const int64_t d_state = s->ne[0], d_inner = s->ne[1];
    const int64_t n_t = x->ne[1], n_s = x->ne[2];
    if (s->ne[2] != n_s || x->ne[0] != d_inner || A->ne[0] != d_state || A->ne[1] != d_inner ||
        B->ne[0] != d_state || B->ne[1] != n_t || B->ne[2] != n_s) {
        return KILN_FAIL("ssm_scan: shapes do not fit: s %s = [d_state, d_inner, n_s], x %s = [d_inner, n_t, n_s], "
                         "A %s = [d_state, d_inner], B %s = [d_state, n_t, n_s]", s0, s1, s3, s4);
    }
    /* y [d_inner, n_t, n_s] followed by the final states [d_state, d_inner, n_s] */
    const int64_t ne = kiln_nelements(x) + kiln_nelements(s);
    struct kiln_tensor * r = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 1, &ne, NULL, 0);
    if (!r) return NULL;
    r->op = KILN_OP_SSM_SCAN;
    r->src[0] = s;
    r->src[1] = x;
    r->src[2] = dt;
    r->src[3] = A;
    r->src[4] = B;
    r->src[5] = C;
    return r;
}

/* ------------------------------------------------- linear attention (RWKV) */

/* k, v, r/q, g/td: [S, H, n_tokens]; state: S*S*H*n_seqs elements with
 * n_seqs = state->ne[1]; the result is [S*H, n_tokens + S*n_seqs]. */
static bool check_linear_attn(const char * op, struct kiln_tensor * const * t, const char * const * names, int n,
                              const struct kiln_tensor * state) {
    for (int i = 0; i < n; i++) {
        if (!check_f32(t[i], op, names[i]) || !check_contiguous(t[i], op, names[i])) return false;
    }
    if (!check_f32(state, op, "state") || !check_contiguous(state, op, "state")) return false;
    const int64_t S = t[0]->ne[0], H = t[0]->ne[1], T = t[0]->ne[2];
    char s0[96], s1[96];
    kiln_shape_str(t[0], s0, sizeof s0);
    if (t[0]->ne[3] != 1) { kiln_set_error("%s: %s must be 3D [S, H, n_tokens], got %s", op, names[0], s0); return false; }
    for (int i = 1; i < n; i++) {
        if (!kiln_are_same_shape(t[i], t[0])) {
            kiln_set_error("%s: %s must have the shape of %s: %s vs %s", op, names[i], names[0],
                           kiln_shape_str(t[i], s1, sizeof s1), s0);
            return false;
        }
    }
    const int64_t n_seqs = state->ne[1];
    int64_t n_state;
    if (n_seqs < 1 || __builtin_mul_overflow(S * S, H, &n_state) || __builtin_mul_overflow(n_state, n_seqs, &n_state) ||
        S > INT32_MAX || kiln_nelements(state) != n_state) {
        kiln_set_error("%s: state %s must hold S*S*H*n_seqs = %lld*%lld*%lld*ne[1] elements", op,
                       kiln_shape_str(state, s1, sizeof s1), (long long) S, (long long) S, (long long) H);
        return false;
    }
    if (T % n_seqs != 0) {
        kiln_set_error("%s: n_tokens = %lld is not a multiple of n_seqs = %lld (state ne[1])", op, (long long) T, (long long) n_seqs);
        return false;
    }
    return true;
}

struct kiln_tensor * kiln_rwkv_wkv6(struct kiln_context * ctx, struct kiln_tensor * k, struct kiln_tensor * v, struct kiln_tensor * r,
        struct kiln_tensor * tf, struct kiln_tensor * td, struct kiln_tensor * state) {
    static const char * op = "rwkv_wkv6";
    struct kiln_tensor * const t[4] = { k, v, r, td };
    static const char * const names[4] = { "k", "v", "r", "td" };
    if (!check_linear_attn(op, t, names, 4, state)) return NULL;
    if (!check_f32(tf, op, "tf") || !check_contiguous(tf, op, "tf")) return NULL;
    const int64_t S = k->ne[0], H = k->ne[1], T = k->ne[2], n_seqs = state->ne[1];
    if (kiln_nelements(tf) != S * H) {
        char s[96];
        return KILN_FAIL("rwkv_wkv6: tf %s must hold S*H = %lld elements ([S, H])", kiln_shape_str(tf, s, sizeof s), (long long)(S * H));
    }
    const int64_t ne[2] = { S * H, T + S * n_seqs };
    struct kiln_tensor * res = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 2, ne, NULL, 0);
    if (!res) return NULL;
    res->op = KILN_OP_RWKV_WKV6;
    res->src[0] = k;
    res->src[1] = v;
    res->src[2] = r;
    res->src[3] = tf;
    res->src[4] = td;
    res->src[5] = state;
    return res;
}

struct kiln_tensor * kiln_gated_linear_attn(struct kiln_context * ctx, struct kiln_tensor * k, struct kiln_tensor * v, struct kiln_tensor * q,
        struct kiln_tensor * g, struct kiln_tensor * state, float scale) {
    static const char * op = "gated_linear_attn";
    struct kiln_tensor * const t[4] = { k, v, q, g };
    static const char * const names[4] = { "k", "v", "q", "g" };
    if (!check_linear_attn(op, t, names, 4, state)) return NULL;
    const int64_t S = k->ne[0], H = k->ne[1], T = k->ne[2], n_seqs = state->ne[1];
    const int64_t ne[2] = { S * H, T + S * n_seqs };
    struct kiln_tensor * res = kiln_new_tensor_impl(ctx, KILN_TYPE_F32, 2, ne, NULL, 0);
    if (!res) return NULL;
    kiln_set_op_params_f32(res, 0, scale);
    res->op = KILN_OP_GATED_LINEAR_ATTN;
    res->src[0] = k;
    res->src[1] = v;
    res->src[2] = q;
    res->src[3] = g;
    res->src[4] = state;
    return res;
}
