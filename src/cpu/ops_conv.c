/*
 * ops_conv.c — forward kernels of im2col, im2col_back, conv_transpose_1d and
 * conv_transpose_2d (ggml semantics; see build_conv.c for the shapes).
 *
 * Every output element is produced by one thread with a fixed order of
 * operations, so results do not depend on the thread count.
 */
#include "ops_conv_util.h"

/* ------------------------------------------------------------ im2col */

/* src0: kernel [KW, KH, IC, OC] (shape only), src1: image [IW, IH, IC, N]
 * dst: [IC*KH*KW, OW, OH, N]; 1D: kernel [KW, IC, OC], image [IW, IC, N],
 * dst [IC*KW, OW, N]. One dst row per (n, oh, ow); rows are split. */
enum kiln_status kiln_cpu_fwd_im2col(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    const int32_t s0 = dst->op_params[0], s1 = dst->op_params[1];
    const int32_t p0 = dst->op_params[2], p1 = dst->op_params[3];
    const int32_t d0 = dst->op_params[4], d1 = dst->op_params[5];
    const bool is_2D = dst->op_params[6] == 1;

    if (!conv_is_float(b->type) || (dst->type != KILN_TYPE_F32 && dst->type != KILN_TYPE_F16)) {
        kiln_set_error("im2col: unsupported types (data %s, dst %s)", kiln_type_name(b->type), kiln_type_name(dst->type));
        return KILN_STATUS_UNSUPPORTED;
    }

    const int64_t N  = is_2D ? b->ne[3] : b->ne[2];
    const int64_t IC = is_2D ? b->ne[2] : b->ne[1];
    const int64_t IH = is_2D ? b->ne[1] : 1;
    const int64_t IW = b->ne[0];
    const int64_t KH = is_2D ? a->ne[1] : 1;
    const int64_t KW = a->ne[0];
    const int64_t OH = is_2D ? dst->ne[2] : 1;
    const int64_t OW = dst->ne[1];
    const size_t nb_n = is_2D ? b->nb[3] : b->nb[2];
    const size_t nb_c = is_2D ? b->nb[2] : b->nb[1];
    const size_t nb_h = is_2D ? b->nb[1] : 0;
    const size_t nb_w = b->nb[0];
    const size_t dnb_w = dst->nb[1];
    const size_t dnb_h = is_2D ? dst->nb[2] : 0;
    const size_t dnb_n = is_2D ? dst->nb[3] : dst->nb[2];

    int64_t r0, r1;
    kiln_split_rows(N * OH * OW, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t in  = r / (OH * OW);
        const int64_t ioh = (r / OW) % OH;
        const int64_t iow = r % OW;
        char * drow = (char *) dst->data + in * dnb_n + ioh * dnb_h + iow * dnb_w;
        const char * img = (const char *) b->data + in * nb_n;
        int64_t col = 0;
        for (int64_t iic = 0; iic < IC; iic++) {
            const char * plane = img + iic * nb_c;
            for (int64_t ikh = 0; ikh < KH; ikh++) {
                const int64_t iih = ioh * s1 + ikh * d1 - p1;
                const bool row_in = !is_2D || (iih >= 0 && iih < IH);
                for (int64_t ikw = 0; ikw < KW; ikw++, col++) {
                    const int64_t iiw = iow * s0 + ikw * d0 - p0;
                    float v = 0.0f;
                    if (row_in && iiw >= 0 && iiw < IW) v = conv_load(b->type, plane + (is_2D ? iih : 0) * nb_h + iiw * nb_w);
                    if (dst->type == KILN_TYPE_F32) ((float *) drow)[col] = v;
                    else ((kiln_fp16_t *) drow)[col] = kiln_fp32_to_fp16(v);
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* src0: gradient of the im2col output, src1: kernel (shape only),
 * dst: image-shaped gradient. Each image element sums the columns that
 * copied it in the forward pass; (n, c) planes are split across threads. */
enum kiln_status kiln_cpu_fwd_im2col_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * g = dst->src[0];
    const struct kiln_tensor * kern = dst->src[1];
    const int32_t s0 = dst->op_params[0], s1 = dst->op_params[1];
    const int32_t p0 = dst->op_params[2], p1 = dst->op_params[3];
    const int32_t d0 = dst->op_params[4], d1 = dst->op_params[5];
    const bool is_2D = dst->op_params[6] == 1;

    if ((g->type != KILN_TYPE_F32 && g->type != KILN_TYPE_F16) || dst->type != KILN_TYPE_F32) {
        kiln_set_error("im2col_back: unsupported types (gradient %s, dst %s)", kiln_type_name(g->type), kiln_type_name(dst->type));
        return KILN_STATUS_UNSUPPORTED;
    }

    const int64_t N  = is_2D ? dst->ne[3] : dst->ne[2];
    const int64_t IC = is_2D ? dst->ne[2] : dst->ne[1];
    const int64_t IH = is_2D ? dst->ne[1] : 1;
    const int64_t IW = dst->ne[0];
    const int64_t KH = is_2D ? kern->ne[1] : 1;
    const int64_t KW = kern->ne[0];
    const int64_t OH = is_2D ? g->ne[2] : 1;
    const int64_t OW = g->ne[1];
    const size_t gnb_w = g->nb[1];
    const size_t gnb_h = is_2D ? g->nb[2] : 0;
    const size_t gnb_n = is_2D ? g->nb[3] : g->nb[2];
    const size_t dnb_c = is_2D ? dst->nb[2] : dst->nb[1];
    const size_t dnb_n = is_2D ? dst->nb[3] : dst->nb[2];
    const size_t dnb_h = is_2D ? dst->nb[1] : 0;

    int64_t q0, q1;
    kiln_split_rows(N * IC, params->ith, params->nth, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t in = q / IC, iic = q % IC;
        char * plane = (char *) dst->data + in * dnb_n + iic * dnb_c;
        const char * gbase = (const char *) g->data + in * gnb_n;
        for (int64_t iih = 0; iih < IH; iih++) {
            for (int64_t iiw = 0; iiw < IW; iiw++) {
                float grad = 0.0f;
                for (int64_t ikh = 0; ikh < KH; ikh++) {
                    int64_t ioh = 0;
                    if (is_2D) {
                        const int64_t th = iih + p1 - ikh * d1;
                        if (th % s1 != 0) continue;
                        ioh = th / s1;
                        if (ioh < 0 || ioh >= OH) continue;
                    }
                    for (int64_t ikw = 0; ikw < KW; ikw++) {
                        /* only the positions the forward stride actually visited */
                        const int64_t tw = iiw + p0 - ikw * d0;
                        if (tw % s0 != 0) continue;
                        const int64_t iow = tw / s0;
                        if (iow < 0 || iow >= OW) continue;
                        const int64_t col = (iic * KH + ikh) * KW + ikw;
                        grad += conv_load(g->type, gbase + ioh * gnb_h + iow * gnb_w + col * g->nb[0]);
                    }
                }
                *(float *)(plane + iih * dnb_h + iiw * dst->nb[0]) = grad;
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* -------------------------------------------------- conv_transpose_1d */

/* The work buffer holds the kernel as [IC] vectors per (oc, k) and the data
 * as [IC] vectors per position, so every output term is one contiguous dot
 * product over input channels. With an F16 kernel the data is rounded to
 * F16 first, as ggml does. */
size_t kiln_cpu_work_conv_transpose_1d(const struct kiln_tensor * dst, int n_threads) {
    (void) n_threads;
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if (!a || !b) return 0;
    return sizeof(float) * (size_t)(a->ne[0] * a->ne[1] * a->ne[2] + b->ne[0] * b->ne[1]);
}

enum kiln_status kiln_cpu_fwd_conv_transpose_1d(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0]; /* [K, OC, IC] */
    const struct kiln_tensor * b = dst->src[1]; /* [L, IC] */
    if ((a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) || b->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("conv_transpose_1d: unsupported types (kernel %s, data %s)", kiln_type_name(a->type), kiln_type_name(b->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t K = a->ne[0], OC = a->ne[1], IC = a->ne[2], L = b->ne[0];
    const int32_t s0 = dst->op_params[0];
    const size_t need = kiln_cpu_work_conv_transpose_1d(dst, params->nth);
    if (params->wsize < need || !params->wdata) {
        kiln_set_error("conv_transpose_1d: work buffer of %zu bytes is smaller than the %zu needed", params->wsize, need);
        return KILN_STATUS_FAILED;
    }
    float * wk = (float *) params->wdata;  /* [(oc*K + k)*IC + c] */
    float * ws = wk + K * OC * IC;         /* [l*IC + c] */
    const bool round16 = a->type == KILN_TYPE_F16;

    int64_t i0, i1;
    kiln_split_rows(OC, params->ith, params->nth, &i0, &i1);
    for (int64_t oc = i0; oc < i1; oc++) {
        for (int64_t k = 0; k < K; k++) {
            for (int64_t c = 0; c < IC; c++) {
                wk[(oc * K + k) * IC + c] = conv_load(a->type, (const char *) a->data + k * a->nb[0] + oc * a->nb[1] + c * a->nb[2]);
            }
        }
    }
    kiln_split_rows(L, params->ith, params->nth, &i0, &i1);
    for (int64_t l = i0; l < i1; l++) {
        for (int64_t c = 0; c < IC; c++) {
            const float v = *(const float *)((const char *) b->data + l * b->nb[0] + c * b->nb[1]);
            ws[l * IC + c] = round16 ? kiln_fp16_to_fp32(kiln_fp32_to_fp16(v)) : v;
        }
    }
    kiln_barrier(params);

    const int64_t OL = dst->ne[0];
    kiln_split_rows(OC, params->ith, params->nth, &i0, &i1);
    for (int64_t oc = i0; oc < i1; oc++) {
        float * out = (float *)((char *) dst->data + oc * dst->nb[1]);
        for (int64_t i = 0; i < OL; i++) out[i] = 0.0f;
        for (int64_t l = 0; l < L; l++) {
            const float * x = ws + l * IC;
            for (int64_t k = 0; k < K; k++) {
                out[l * s0 + k] += conv_dot(x, wk + (oc * K + k) * IC, IC);
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* -------------------------------------------------- conv_transpose_2d */

size_t kiln_cpu_work_conv_transpose_2d(const struct kiln_tensor * dst, int n_threads) {
    (void) n_threads;
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if (!a || !b) return 0;
    return sizeof(float) * (size_t)(a->ne[0] * a->ne[1] * a->ne[2] * a->ne[3] + b->ne[0] * b->ne[1] * b->ne[2] * b->ne[3]);
}

/* a: kernel [KW, KH, OC, IC], b: data [W, H, IC, N], dst [OW, OH, OC, N].
 * ggml computes only the first image of a batch; every image is computed
 * here (identical results for N = 1). */
enum kiln_status kiln_cpu_fwd_conv_transpose_2d(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if ((a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) || b->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("conv_transpose_2d: unsupported types (kernel %s, data %s)", kiln_type_name(a->type), kiln_type_name(b->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t KW = a->ne[0], KH = a->ne[1], OC = a->ne[2], IC = a->ne[3];
    const int64_t W = b->ne[0], H = b->ne[1], N = b->ne[3];
    const int32_t stride = dst->op_params[0];
    const size_t need = kiln_cpu_work_conv_transpose_2d(dst, params->nth);
    if (params->wsize < need || !params->wdata) {
        kiln_set_error("conv_transpose_2d: work buffer of %zu bytes is smaller than the %zu needed", params->wsize, need);
        return KILN_STATUS_FAILED;
    }
    float * wk = (float *) params->wdata;   /* [((oc*KH + kh)*KW + kw)*IC + c] */
    float * ws = wk + KW * KH * OC * IC;    /* [((n*H + h)*W + w)*IC + c] */
    const bool round16 = a->type == KILN_TYPE_F16;

    int64_t i0, i1;
    kiln_split_rows(OC, params->ith, params->nth, &i0, &i1);
    for (int64_t oc = i0; oc < i1; oc++) {
        for (int64_t kh = 0; kh < KH; kh++) {
            for (int64_t kw = 0; kw < KW; kw++) {
                float * v = wk + ((oc * KH + kh) * KW + kw) * IC;
                for (int64_t c = 0; c < IC; c++) {
                    v[c] = conv_load(a->type, (const char *) a->data + kw * a->nb[0] + kh * a->nb[1] + oc * a->nb[2] + c * a->nb[3]);
                }
            }
        }
    }
    kiln_split_rows(N * H, params->ith, params->nth, &i0, &i1);
    for (int64_t r = i0; r < i1; r++) {
        const int64_t n = r / H, h = r % H;
        for (int64_t w = 0; w < W; w++) {
            float * v = ws + ((n * H + h) * W + w) * IC;
            for (int64_t c = 0; c < IC; c++) {
                const float x = *(const float *)((const char *) b->data + w * b->nb[0] + h * b->nb[1] + c * b->nb[2] + n * b->nb[3]);
                v[c] = round16 ? kiln_fp16_to_fp32(kiln_fp32_to_fp16(x)) : x;
            }
        }
    }
    kiln_barrier(params);

    const int64_t OW = dst->ne[0], OH = dst->ne[1];
    kiln_split_rows(N * OC, params->ith, params->nth, &i0, &i1);
    for (int64_t pl = i0; pl < i1; pl++) {
        const int64_t n = pl / OC, oc = pl % OC;
        char * plane = (char *) dst->data + oc * dst->nb[2] + n * dst->nb[3];
        for (int64_t y = 0; y < OH; y++) {
            float * row = (float *)(plane + y * dst->nb[1]);
            for (int64_t x = 0; x < OW; x++) row[x] = 0.0f;
        }
        for (int64_t h = 0; h < H; h++) {
            for (int64_t w = 0; w < W; w++) {
                const float * x = ws + ((n * H + h) * W + w) * IC;
                for (int64_t kh = 0; kh < KH; kh++) {
                    float * row = (float *)(plane + (h * stride + kh) * dst->nb[1]);
                    for (int64_t kw = 0; kw < KW; kw++) {
                        row[w * stride + kw] += conv_dot(x, wk + ((oc * KH + kh) * KW + kw) * IC, IC);
                    }
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}
