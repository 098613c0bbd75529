/*
 * ops_window.c — forward kernels of the SAM-style vision-transformer helpers:
 * win_part / win_unpart (split an image into w x w windows with zero padding
 * and back) and get_rel_pos / add_rel_pos (decomposed relative positions).
 */
#include "ops_conv_util.h"

/* a [C, W, H] -> dst [C, w, w, npx*npy]; window (px, py) is dst plane
 * py*npx + px, and positions past the image are zero. */
enum kiln_status kiln_cpu_fwd_win_part(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    if (a->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("win_part: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int32_t npx = dst->op_params[0], npy = dst->op_params[1], w = dst->op_params[2];
    const int64_t C = dst->ne[0];
    int64_t q0, q1;
    kiln_split_rows((int64_t) npx * npy, params->ith, params->nth, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t py = q / npx, px = q % npx;
        for (int64_t i2 = 0; i2 < w; i2++) {
            for (int64_t i1 = 0; i1 < w; i1++) {
                float * out = (float *)((char *) dst->data + q * dst->nb[3] + i2 * dst->nb[2] + i1 * dst->nb[1]);
                const int64_t y = py * w + i2, x = px * w + i1;
                if (y >= a->ne[2] || x >= a->ne[1]) {
                    for (int64_t c = 0; c < C; c++) out[c] = 0.0f;
                    continue;
                }
                const char * src = (const char *) a->data + y * a->nb[2] + x * a->nb[1];
                for (int64_t c = 0; c < C; c++) out[c] = *(const float *)(src + c * a->nb[0]);
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* a [C, w, w, npx*npy] -> dst [C, w0, h0], dropping the padding */
enum kiln_status kiln_cpu_fwd_win_unpart(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    if (a->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("win_unpart: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int32_t w = dst->op_params[0];
    const int64_t C = dst->ne[0], W0 = dst->ne[1], H0 = dst->ne[2];
    const int64_t npx = (W0 + w - 1) / w;
    int64_t r0, r1;
    kiln_split_rows(H0, params->ith, params->nth, &r0, &r1);
    for (int64_t y = r0; y < r1; y++) {
        for (int64_t x = 0; x < W0; x++) {
            const int64_t q = (y / w) * npx + x / w;
            const char * src = (const char *) a->data + q * a->nb[3] + (y % w) * a->nb[2] + (x % w) * a->nb[1];
            float * out = (float *)((char *) dst->data + y * dst->nb[2] + x * dst->nb[1]);
            for (int64_t c = 0; c < C; c++) out[c] = *(const float *)(src + c * a->nb[0]);
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* a [C, 2*k - 1] -> dst F16 [C, k, q]: dst[:, i1, i2] = a[:, (k - 1 - i1) + i2] */
enum kiln_status kiln_cpu_fwd_get_rel_pos(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    if (!conv_is_float(a->type) || dst->type != KILN_TYPE_F16) {
        kiln_set_error("get_rel_pos: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t C = dst->ne[0], K = dst->ne[1];
    int64_t r0, r1;
    kiln_split_rows(dst->ne[2], params->ith, params->nth, &r0, &r1);
    for (int64_t i2 = r0; i2 < r1; i2++) {
        for (int64_t i1 = 0; i1 < K; i1++) {
            const int64_t pos = (K - i1 - 1) + i2;
            const char * src = (const char *) a->data + pos * a->nb[1];
            kiln_fp16_t * out = (kiln_fp16_t *)((char *) dst->data + i2 * dst->nb[2] + i1 * dst->nb[1]);
            if (a->type == KILN_TYPE_F16) {
                for (int64_t c = 0; c < C; c++) out[c] = *(const kiln_fp16_t *)(src + c * a->nb[0]);
            } else {
                for (int64_t c = 0; c < C; c++) out[c] = kiln_fp32_to_fp16(conv_load(a->type, src + c * a->nb[0]));
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* dst = a + ph broadcast over kw + pw broadcast over kh:
 * dst[kw + kh*K, q, b] = a[...] + ph[kh, q, b] + pw[kw, q, b], with
 * K = pw->ne[0] and q running over pw's (ne1, ne2). The additions happen in
 * ggml's order so the results match it bit for bit. */
enum kiln_status kiln_cpu_fwd_add_rel_pos(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * pw = dst->src[1];
    const struct kiln_tensor * ph = dst->src[2];
    if (a->type != KILN_TYPE_F32 || pw->type != KILN_TYPE_F32 || ph->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("add_rel_pos: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const bool inplace = dst->op_params[0] != 0;
    const int64_t K = pw->ne[0];
    const int64_t nrows = pw->ne[1] * pw->ne[2] * pw->ne[3];
    const float * pwd = (const float *) pw->data;
    const float * phd = (const float *) ph->data;
    int64_t r0, r1;
    kiln_split_rows(nrows, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        float * out = (float *) dst->data + r * K * K;
        if (!inplace) memcpy(out, (const float *) a->data + r * K * K, sizeof(float) * (size_t)(K * K));
        for (int64_t i = 0; i < K; i++) {
            const float ew = pwd[r * K + i];
            const float eh = phd[r * K + i];
            for (int64_t j = 0; j < K; j++) {
                out[i * K + j] += eh;
                out[i + j * K] += ew;
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}
