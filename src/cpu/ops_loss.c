/*
 * ops_loss.c — cross_entropy_loss (+ back), the AdamW step and timestep
 * embeddings.
 *
 * cross_entropy_loss = -(1/nr) * sum_rows sum_i b_i * log_softmax(a)_i.
 * ggml sums per thread and then across threads, which makes the last bits
 * depend on the thread count; here every row's loss goes to its own slot of
 * the work buffer and thread 0 adds them in row order, so 1, 2 and 4
 * threads give the same bits.
 */
#include "ops_nn_common.h"

/* nr doubles (row losses), then per thread one row of nc floats */
size_t kiln_cpu_work_cross_entropy_loss(const struct kiln_tensor * dst, int n_threads) {
    const struct kiln_tensor * a = dst->src[0];
    return sizeof(double) * (size_t) kiln_nrows(a) + sizeof(float) * (size_t)(a->ne[0] + KILN_CL_F32) * (size_t) n_threads;
}

enum kiln_status kiln_cpu_fwd_cross_entropy_loss(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    const struct kiln_tensor * b = dst->src[1];
    if (a->type != KILN_TYPE_F32 || b->type != KILN_TYPE_F32) {
        kiln_set_error("cross_entropy_loss: only f32 is supported");
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t nc = a->ne[0], nr = kiln_nrows(a);
    double * row_loss = (double *) params->wdata;
    float * st = (float *)(row_loss + nr) + (nc + KILN_CL_F32) * params->ith;

    int64_t ir0, ir1;
    kiln_split_rows(nr, params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(a, ir, &i1, &i2, &i3);
        const float * s0 = (const float *) kiln_row_ptr(a, i1, i2, i3);
        const float * s1 = (const float *) kiln_row_ptr(b, i1, i2, i3);
        float max = -INFINITY;
        for (int64_t i = 0; i < nc; i++) if (s0[i] > max) max = s0[i];
        double sum = 0.0;
        for (int64_t i = 0; i < nc; i++) {
            st[i] = s0[i] - max;
            sum += (double) expf(st[i]);
        }
        const float log_sum = (float) log(sum);
        double row = 0.0;
        for (int64_t i = 0; i < nc; i++) row += (double)((st[i] - log_sum) * s1[i]);
        row_loss[ir] = row;
    }
    kiln_barrier(params);
    if (params->ith == 0) {
        double total = 0.0;
        for (int64_t ir = 0; ir < nr; ir++) total += row_loss[ir];
        ((float *) dst->data)[0] = (float)(-total / (double) nr);
    }
    return KILN_STATUS_SUCCESS;
}

/* src0 = d loss, src1 = logits, src2 = labels: dx = (softmax(logits) - labels) * d/nr */
enum kiln_status kiln_cpu_fwd_cross_entropy_loss_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * g = dst->src[0];
    const struct kiln_tensor * a = dst->src[1];
    const struct kiln_tensor * b = dst->src[2];
    if (g->type != KILN_TYPE_F32 || a->type != KILN_TYPE_F32 || b->type != KILN_TYPE_F32) {
        kiln_set_error("cross_entropy_loss_back: only f32 is supported");
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t nc = a->ne[0], nr = kiln_nrows(a);
    const float d_by_nr = ((const float *) g->data)[0] / (float) nr;
    int64_t ir0, ir1;
    kiln_split_rows(nr, params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(a, ir, &i1, &i2, &i3);
        const float * s0 = (const float *) kiln_row_ptr(a, i1, i2, i3);
        const float * s1 = (const float *) kiln_row_ptr(b, i1, i2, i3);
        float * ds = (float *) kiln_row_ptr(dst, i1, i2, i3);
        float max = -INFINITY;
        for (int64_t i = 0; i < nc; i++) if (s0[i] > max) max = s0[i];
        double sum = 0.0;
        for (int64_t i = 0; i < nc; i++) {
            const float e = expf(s0[i] - max);
            ds[i] = e;
            sum += (double) e;
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < nc; i++) ds[i] = (ds[i] * inv - s1[i]) * d_by_nr;
    }
    return KILN_STATUS_SUCCESS;
}

/* params: alpha, beta1, beta2, eps, wd, beta1h, beta2h (see kiln.h):
 * m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g^2;
 * w = w*(1 - alpha*wd) - alpha * (m*beta1h) / (sqrt(v*beta2h) + eps) */
enum kiln_status kiln_cpu_fwd_opt_step_adamw(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * w = dst->src[0];
    const struct kiln_tensor * g = dst->src[1];
    const struct kiln_tensor * m = dst->src[2];
    const struct kiln_tensor * v = dst->src[3];
    const struct kiln_tensor * p = dst->src[4];
    if (w->type != KILN_TYPE_F32 || g->type != KILN_TYPE_F32 || m->type != KILN_TYPE_F32 ||
        v->type != KILN_TYPE_F32 || p->type != KILN_TYPE_F32) {
        kiln_set_error("opt_step_adamw: only f32 is supported");
        return KILN_STATUS_UNSUPPORTED;
    }
    const float * pp = (const float *) p->data;
    const float alpha = pp[0], beta1 = pp[1], beta2 = pp[2], eps = pp[3], wd = pp[4], beta1h = pp[5], beta2h = pp[6];
    const float keep = 1.0f - alpha * wd;
    const int64_t nc = w->ne[0];
    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(w), params->ith, params->nth, &ir0, &ir1);
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(w, ir, &i1, &i2, &i3);
        float * wr = (float *) kiln_row_ptr(w, i1, i2, i3);
        const float * gr = (const float *) kiln_row_ptr(g, i1, i2, i3);
        float * mr = (float *) kiln_row_ptr(m, i1, i2, i3);
        float * vr = (float *) kiln_row_ptr(v, i1, i2, i3);
        for (int64_t i = 0; i < nc; i++) {
            const float gi = gr[i];
            mr[i] = mr[i] * beta1 + gi * (1.0f - beta1);
            vr[i] = vr[i] * beta2 + gi * gi * (1.0f - beta2);
            const float mh = mr[i] * beta1h;
            const float vh = sqrtf(vr[i] * beta2h) + eps;
            wr[i] = wr[i] * keep - alpha * mh / vh;
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* row i: [cos(t_i f_0) .. cos(t_i f_{h-1}), sin(t_i f_0) .. sin(t_i f_{h-1}), (0 if dim odd)]
 * with h = dim/2, f_j = exp(-ln(max_period) * j / h). Threads take rows. */
enum kiln_status kiln_cpu_fwd_timestep_embedding(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * ts = dst->src[0];
    if (ts->type != KILN_TYPE_F32) {
        kiln_set_error("timestep_embedding: timesteps must be f32");
        return KILN_STATUS_UNSUPPORTED;
    }
    const int dim = kiln_get_op_params_i32(dst, 0);
    const int max_period = kiln_get_op_params_i32(dst, 1);
    const int half = dim / 2;
    int64_t ir0, ir1;
    kiln_split_rows(ts->ne[0], params->ith, params->nth, &ir0, &ir1);
    for (int64_t i = ir0; i < ir1; i++) {
        float * e = (float *)((char *) dst->data + i * dst->nb[1]);
        const float t = *(const float *)((const char *) ts->data + i * ts->nb[0]);
        for (int j = 0; j < half; j++) {
            const float freq = expf(-logf((float) max_period) * j / half);
            const float arg = t * freq;
            e[j] = cosf(arg);
            e[j + half] = sinf(arg);
        }
        if (dim % 2 != 0) e[2 * half] = 0.0f;
    }
    return KILN_STATUS_SUCCESS;
}
