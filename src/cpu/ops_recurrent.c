/*
 * ops_recurrent.c — forward kernels of the recurrent-state ops: Mamba's
 * ssm_conv and ssm_scan, RWKV v6's wkv6, and gated linear attention.
 *
 * Each thread owns a range of channels (ssm) or heads (wkv6, gla) for every
 * token, so the per-element order of operations is the same for any thread
 * count.
 */
#include "ops_conv_util.h"

/* sx [d_conv - 1 + n_t, d_inner, n_s], c [d_conv, d_inner] -> [d_inner, n_t, n_s]:
 * a causal depthwise convolution, one sliding window per token. */
enum kiln_status kiln_cpu_fwd_ssm_conv(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * sx = dst->src[0];
    const struct kiln_tensor * c = dst->src[1];
    if (sx->type != KILN_TYPE_F32 || c->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("ssm_conv: unsupported type %s", kiln_type_name(sx->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t nc = c->ne[0], nr = sx->ne[1], n_t = dst->ne[1], n_s = dst->ne[2];
    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t i3 = 0; i3 < n_s; i3++) {
        for (int64_t i2 = 0; i2 < n_t; i2++) {
            for (int64_t i1 = r0; i1 < r1; i1++) {
                const char * s = (const char *) sx->data + i1 * sx->nb[1] + i2 * sx->nb[0] + i3 * sx->nb[2];
                const char * w = (const char *) c->data + i1 * c->nb[1];
                float sum = 0.0f;
                for (int64_t i0 = 0; i0 < nc; i0++) {
                    sum += *(const float *)(s + i0 * sx->nb[0]) * *(const float *)(w + i0 * c->nb[0]);
                }
                *(float *)((char *) dst->data + i1 * dst->nb[0] + i2 * dst->nb[1] + i3 * dst->nb[2]) = sum;
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* Mamba selective scan (the d_state x d_inner state form). dst holds
 * y [d_inner, n_t, n_s] followed by the final states [d_state, d_inner, n_s];
 * the states area doubles as the running state after the first token. */
enum kiln_status kiln_cpu_fwd_ssm_scan(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * s0t = dst->src[0]; /* {d_state, d_inner, n_s} */
    const struct kiln_tensor * x   = dst->src[1]; /* {d_inner, n_t, n_s} */
    const struct kiln_tensor * dt  = dst->src[2]; /* {d_inner, n_t, n_s} */
    const struct kiln_tensor * A   = dst->src[3]; /* {d_state, d_inner} */
    const struct kiln_tensor * B   = dst->src[4]; /* {d_state, n_t, n_s} */
    const struct kiln_tensor * C   = dst->src[5]; /* {d_state, n_t, n_s} */
    for (int i = 0; i < 6; i++) {
        if (dst->src[i]->type != KILN_TYPE_F32) {
            kiln_set_error("ssm_scan: unsupported type %s", kiln_type_name(dst->src[i]->type));
            return KILN_STATUS_UNSUPPORTED;
        }
    }
    const int64_t nc = s0t->ne[0], nr = s0t->ne[1], n_t = x->ne[1], n_s = x->ne[2];
    float * y_all = (float *) dst->data;
    float * s_all = y_all + kiln_nelements(x);

    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t i3 = 0; i3 < n_s; i3++) {
        float * s = s_all + i3 * nc * nr;
        const float * sin = (const float *) s0t->data + i3 * nc * nr;
        if (n_t == 0) { /* no token: the final state is the initial one */
            for (int64_t i1 = r0; i1 < r1; i1++) memcpy(s + i1 * nc, sin + i1 * nc, sizeof(float) * (size_t) nc);
        }
        for (int64_t i2 = 0; i2 < n_t; i2++) {
            const float * prev = i2 == 0 ? sin : s;
            const float * xr  = (const float *) x->data + (i3 * n_t + i2) * nr;
            const float * dtr = (const float *) dt->data + (i3 * n_t + i2) * nr;
            const float * Br = (const float *)((const char *) B->data + i2 * B->nb[1] + i3 * B->nb[2]);
            const float * Cr = (const float *)((const char *) C->data + i2 * C->nb[1] + i3 * C->nb[2]);
            float * y = y_all + (i3 * n_t + i2) * nr;
            for (int64_t i1 = r0; i1 < r1; i1++) {
                const float dv = dtr[i1];
                const float dt_sp = dv <= 20.0f ? log1pf(expf(dv)) : dv; /* softplus */
                const float x_dt = xr[i1] * dt_sp;
                const float * Ar = (const float *) A->data + i1 * nc;
                float sum = 0.0f;
                for (int64_t i0 = 0; i0 < nc; i0++) {
                    const int64_t i = i0 + i1 * nc;
                    const float st = prev[i] * expf(dt_sp * Ar[i0]) + Br[i0] * x_dt;
                    sum += st * Cr[i0];
                    s[i] = st;
                }
                y[i1] = sum;
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* Shared walk of wkv6 and gla over tokens and this thread's heads.
 * For head h, token t (sequence t / (T / n_seqs)), key index i, value j:
 *   wkv6: out[j] += r_i * (tf_i * k_i v_j + S_ij),  S_ij = S_ij * td_i + k_i v_j
 *   gla:  S_ij = S_ij * g_i + k_i v_j,               out[j] += (q_i * scale) * S_ij
 * dst holds the outputs [S*H, T] followed by the final states. */
static void linear_attn(const struct kiln_compute_params * params, struct kiln_tensor * dst, bool is_gla) {
    const struct kiln_tensor * state_in = dst->src[is_gla ? 4 : 5];
    const int64_t T = dst->src[1]->ne[2];
    const int64_t H = dst->src[1]->ne[1];
    const int64_t S = dst->src[1]->ne[0];
    const int64_t C = S * H;
    const int64_t n_seqs = state_in->ne[1];
    const int64_t t_per_seq = T / n_seqs;
    const float scale = is_gla ? kiln_get_op_params_f32(dst, 0) : 1.0f;

    const float * k  = (const float *) dst->src[0]->data;
    const float * v  = (const float *) dst->src[1]->data;
    const float * rq = (const float *) dst->src[2]->data;              /* r or q */
    const float * tf = is_gla ? NULL : (const float *) dst->src[3]->data;
    const float * dk = (const float *) dst->src[is_gla ? 3 : 4]->data; /* td or g */
    float * out_all = (float *) dst->data;
    float * state_all = out_all + C * T;

    int64_t h0, h1;
    kiln_split_rows(H, params->ith, params->nth, &h0, &h1);
    for (int64_t t = 0; t < T; t++) {
        const int64_t seq = t / t_per_seq;
        float * st = state_all + seq * S * C;
        const float * prev = t % t_per_seq ? st : (const float *) state_in->data + seq * S * C;
        for (int64_t h = h0; h < h1; h++) {
            const int64_t th = t * C + h * S;
            float * out = out_all + th;
            for (int64_t j = 0; j < S; j++) out[j] = 0.0f;
            for (int64_t i = 0; i < S; i++) {
                const float ki = k[th + i];
                const float ri = is_gla ? rq[th + i] * scale : rq[th + i];
                const float di = dk[th + i];
                const float tfi = is_gla ? 0.0f : tf[h * S + i];
                const int64_t row = h * S * S + i * S;
                for (int64_t j = 0; j < S; j++) {
                    const float kv = v[th + j] * ki;
                    const float sp = prev[row + j];
                    if (is_gla) {
                        const float sn = sp * di + kv;
                        out[j] += sn * ri;
                        st[row + j] = sn;
                    } else {
                        out[j] += (kv * tfi + sp) * ri;
                        st[row + j] = sp * di + kv;
                    }
                }
            }
        }
    }
}

static bool linear_attn_types_ok(const struct kiln_tensor * dst, int n_src, const char * op) {
    for (int i = 0; i < n_src; i++) {
        if (dst->src[i]->type != KILN_TYPE_F32 || !kiln_is_contiguous(dst->src[i])) {
            kiln_set_error("%s: source %d must be contiguous f32, got %s", op, i, kiln_type_name(dst->src[i]->type));
            return false;
        }
    }
    return true;
}

enum kiln_status kiln_cpu_fwd_rwkv_wkv6(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    if (!linear_attn_types_ok(dst, 6, "rwkv_wkv6")) return KILN_STATUS_UNSUPPORTED;
    linear_attn(params, dst, false);
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_gated_linear_attn(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    if (!linear_attn_types_ok(dst, 5, "gated_linear_attn")) return KILN_STATUS_UNSUPPORTED;
    linear_attn(params, dst, true);
    return KILN_STATUS_SUCCESS;
}
