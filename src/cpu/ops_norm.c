/*
 * ops_norm.c — forward kernels: norm, rms_norm, rms_norm_back, group_norm.
 * F32 rows; sums accumulate in double like ggml's ggml_float, so long rows
 * (>= 65536) keep their precision. Each row is computed the same way on any
 * thread, so results do not depend on the thread count.
 */
#include "ops_nn_common.h"
#include "kernels.h"

static enum kiln_status check_f32(const struct kiln_tensor * dst, const struct kiln_tensor * src) {
    if (src->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("%s: only f32 is supported, got %s", kiln_op_name(dst->op), kiln_type_name(src->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    return KILN_STATUS_SUCCESS;
}

/* The centered squares of a norm row, in the order of ggml's norm
 * (ggml_vec_cvar_f32): y[i] = x[i] - mean, and the squares summed in groups
 * whose float sum is added in double, the last n % group one by one. The
 * mean is float(sum in double) / n in float (both builds). A value that
 * lands on the other side of a Q8_0 or F16 rounding step (the next
 * mat-mul's input) would otherwise move by a whole step.
 *   llama.cpp's x86 build (AVX2 + FMA; Kiln's x86, scalar and wasm rows):
 *     groups of 8, reduced ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7));
 *   its arm64 build (NEON): groups of 4, reduced pairwise as vaddvq_f32
 *     does, (s0 + s1) + (s2 + s3). */
static double centered_sq_sum(int64_t n, const float * x, float * y, float mean, bool arm) {
    const int g = arm ? 4 : 8;
    double sum2 = 0.0;
    int64_t i = 0;
    for (; i + g <= n; i += g) {
        float s[8];
        for (int j = 0; j < g; j++) {
            const float v = x[i + j] - mean;
            y[i + j] = v;
            s[j] = v * v;
        }
        sum2 += (double) (arm ? (s[0] + s[1]) + (s[2] + s[3])
                              : ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7])));
    }
    for (; i < n; i++) {
        const float v = x[i] - mean;
        y[i] = v;
        sum2 += (double) (v * v);
    }
    return sum2;
}

enum kiln_status kiln_cpu_fwd_norm(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    enum kiln_status st = check_f32(dst, src);
    if (st != KILN_STATUS_SUCCESS) return st;
    const float eps = kiln_get_op_params_f32(dst, 0);
    const int64_t n = src->ne[0];
    const bool arm = kiln_kernels()->isa_id == KILN_ISA_NEON;
    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(src), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, ir, &i1, &i2, &i3);
        const float * x = (const float *) kiln_row_ptr(src, i1, i2, i3);
        float * y = (float *) kiln_row_ptr(dst, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double) x[i];
        const float mean = (float) sum / (float) n;
        const double sum2 = centered_sq_sum(n, x, y, mean, arm);
        const float variance = (float)(sum2 / n);
        const float scale = 1.0f / sqrtf(variance + eps);
        for (int64_t i = 0; i < n; i++) y[i] *= scale;
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_rms_norm(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    enum kiln_status st = check_f32(dst, src);
    if (st != KILN_STATUS_SUCCESS) return st;
    const float eps = kiln_get_op_params_f32(dst, 0);
    const int64_t n = src->ne[0];
    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(src), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, ir, &i1, &i2, &i3);
        const float * x = (const float *) kiln_row_ptr(src, i1, i2, i3);
        float * y = (float *) kiln_row_ptr(dst, i1, i2, i3);
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
        const float mean = (float)(sum / n);
        const float scale = 1.0f / sqrtf(mean + eps);
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    }
    return KILN_STATUS_SUCCESS;
}

/* src0 = x, src1 = dy (kiln.h's order). With r = 1/sqrt(mean(x^2) + eps):
 * dx = r * (dy - x * sum(x*dy) / (sum(x^2) + n*eps)) */
enum kiln_status kiln_cpu_fwd_rms_norm_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * xs = dst->src[0];
    const struct kiln_tensor * dys = dst->src[1];
    enum kiln_status st = check_f32(dst, xs);
    if (st == KILN_STATUS_SUCCESS) st = check_f32(dst, dys);
    if (st != KILN_STATUS_SUCCESS) return st;
    const float eps = kiln_get_op_params_f32(dst, 0);
    const int64_t n = xs->ne[0];
    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(xs), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(xs, ir, &i1, &i2, &i3);
        const float * x  = (const float *) kiln_row_ptr(xs, i1, i2, i3);
        const float * dz = (const float *) kiln_row_ptr(dys, i1, i2, i3);
        float * dx = (float *) kiln_row_ptr(dst, i1, i2, i3);
        double sum_xx = 0.0, sum_xdz = 0.0;
        for (int64_t i = 0; i < n; i++) {
            sum_xx  += (double)(x[i] * x[i]);
            sum_xdz += (double)(x[i] * dz[i]);
        }
        const float mean_eps = (float) sum_xx / n + eps;
        const float sum_eps  = (float) sum_xx + eps * n;
        const float rrms = 1.0f / sqrtf(mean_eps);
        const float k = (float)(-sum_xdz) / sum_eps;
        for (int64_t i = 0; i < n; i++) dx[i] = (x[i] * k + dz[i]) * rrms;
    }
    return KILN_STATUS_SUCCESS;
}

/* Channels (ne[2]) are split into n_groups groups of ceil(ne2/n_groups);
 * each group of each ne[3] slice is normalized over ne0*ne1*channels.
 * Threads take whole groups. */
enum kiln_status kiln_cpu_fwd_group_norm(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src = dst->src[0];
    enum kiln_status st = check_f32(dst, src);
    if (st != KILN_STATUS_SUCCESS) return st;
    const int n_groups = kiln_get_op_params_i32(dst, 0);
    const float eps = kiln_get_op_params_f32(dst, 1);
    const int64_t ne0 = src->ne[0], ne1 = src->ne[1], nch = src->ne[2], ne3 = src->ne[3];
    const int64_t per_group = (nch + n_groups - 1) / n_groups;
    for (int64_t g = params->ith; g < n_groups; g += params->nth) {
        const int64_t c0 = g * per_group;
        const int64_t c1 = KILN_MIN(c0 + per_group, nch);
        if (c0 >= c1) continue;
        const int64_t count = ne0 * ne1 * (c1 - c0);
        for (int64_t i3 = 0; i3 < ne3; i3++) {
            double sum = 0.0;
            for (int64_t i2 = c0; i2 < c1; i2++) {
                for (int64_t i1 = 0; i1 < ne1; i1++) {
                    const float * x = (const float *) kiln_row_ptr(src, i1, i2, i3);
                    double sr = 0.0;
                    for (int64_t i0 = 0; i0 < ne0; i0++) sr += (double) x[i0];
                    sum += sr;
                }
            }
            const float mean = (float)(sum / count);
            double sum2 = 0.0;
            for (int64_t i2 = c0; i2 < c1; i2++) {
                for (int64_t i1 = 0; i1 < ne1; i1++) {
                    const float * x = (const float *) kiln_row_ptr(src, i1, i2, i3);
                    float * y = (float *) kiln_row_ptr(dst, i1, i2, i3);
                    double sr = 0.0;
                    for (int64_t i0 = 0; i0 < ne0; i0++) {
                        const float v = x[i0] - mean;
                        y[i0] = v;
                        sr += (double)(v * v);
                    }
                    sum2 += sr;
                }
            }
            const float variance = (float)(sum2 / count);
            const float scale = 1.0f / sqrtf(variance + eps);
            for (int64_t i2 = c0; i2 < c1; i2++) {
                for (int64_t i1 = 0; i1 < ne1; i1++) {
                    float * y = (float *) kiln_row_ptr(dst, i1, i2, i3);
                    for (int64_t i0 = 0; i0 < ne0; i0++) y[i0] *= scale;
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}
