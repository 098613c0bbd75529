/*
 * ops_softmax.c — soft_max (with ggml's fused mask, scale and ALiBi) and its
 * backward. F32 rows; the exponent sum accumulates in double.
 *
 * Semantics as ggml: w = x*scale + slope(head)*mask; y = exp(w - max w) / sum.
 * A row whose every w is -inf has no maximum, so it comes out NaN (ggml does
 * the same); a -inf mask entry alone gives an exact 0.
 */
#include "ops_nn_common.h"
#include "kernels.h"

size_t kiln_cpu_work_soft_max(const struct kiln_tensor * dst, int n_threads) {
    return sizeof(float) * (size_t)(dst->ne[0] + KILN_CL_F32) * (size_t) n_threads;
}

enum kiln_status kiln_cpu_fwd_soft_max(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src  = dst->src[0];
    const struct kiln_tensor * mask = dst->src[1];
    if (src->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("soft_max: only f32 is supported, got %s", kiln_type_name(src->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const float scale    = kiln_get_op_params_f32(dst, 0);
    const float max_bias = kiln_get_op_params_f32(dst, 1);
    const int64_t nc = src->ne[0];
    const uint32_t n_head = (uint32_t) src->ne[2];
    float * wp = (float *) params->wdata + (nc + KILN_CL_F32) * params->ith;

    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(src), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, ir, &i1, &i2, &i3);
        const float slope = kiln_alibi_slope(max_bias, (uint32_t) i2, n_head);
        const float * sp = (const float *) kiln_row_ptr(src, i1, i2, i3);
        float * dp = (float *) kiln_row_ptr(dst, i1, i2, i3);

        for (int64_t i = 0; i < nc; i++) wp[i] = sp[i] * scale;
        if (mask) {
            const char * mrow = kiln_row_ptr(mask, i1, i2 % mask->ne[2], i3 % mask->ne[3]);
            if (mask->type == KILN_TYPE_F16) {
                const kiln_fp16_t * m = (const kiln_fp16_t *) mrow;
                for (int64_t i = 0; i < nc; i++) wp[i] = fmaf(slope, kiln_fp16_to_fp32(m[i]), wp[i]);
            } else {
                const float * m = (const float *) mrow;
                for (int64_t i = 0; i < nc; i++) wp[i] = fmaf(slope, m[i], wp[i]);
            }
        }
        float max = -INFINITY;
        for (int64_t i = 0; i < nc; i++) if (wp[i] > max) max = wp[i];
        /* the ISA's exp (llama.cpp's vector expf on AVX2), summed in double */
        const double sum = kiln_kernels()->f32_softmax_exp(nc, wp, dp, max);
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < nc; i++) dp[i] *= inv;
    }
    return KILN_STATUS_SUCCESS;
}

/* src0 = dy, src1 = y: dx = scale * y * (dy - dot(y, dy)) */
enum kiln_status kiln_cpu_fwd_soft_max_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * dys = dst->src[0];
    const struct kiln_tensor * ys  = dst->src[1];
    if (dys->type != KILN_TYPE_F32 || ys->type != KILN_TYPE_F32) {
        kiln_set_error("soft_max_back: only f32 is supported");
        return KILN_STATUS_UNSUPPORTED;
    }
    const float scale = kiln_get_op_params_f32(dst, 0);
    const int64_t nc = dys->ne[0];
    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(dys), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(dys, ir, &i1, &i2, &i3);
        const float * dy = (const float *) kiln_row_ptr(dys, i1, i2, i3);
        const float * y  = (const float *) kiln_row_ptr(ys, i1, i2, i3);
        float * dx = (float *) kiln_row_ptr(dst, i1, i2, i3);
        double dot = 0.0;
        for (int64_t i = 0; i < nc; i++) dot += (double)(y[i] * dy[i]);
        const float d = (float) dot;
        for (int64_t i = 0; i < nc; i++) dx[i] = (dy[i] - d) * y[i] * scale;
    }
    return KILN_STATUS_SUCCESS;
}
