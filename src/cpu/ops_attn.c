/*
 * ops_attn.c — flash_attn_ext: softmax(Q K^T * scale [softcapped] + slope*mask) V
 * for one query row at a time with the online softmax (running max M and sum
 * S, rescaling the V accumulator when M grows), so no n_kv-sized score row
 * is ever stored. K/V heads broadcast over Q heads (GQA). The result is
 * written permuted as ggml's: [DV, n_head, n_batch, ne3].
 *
 * Masked positions (-inf after the slope) are skipped. A query row whose
 * every position is masked has S = 0 and comes out 0, as in current ggml
 * (instead of 0/0 = NaN).
 *
 * With F16 K and V the arithmetic is ggml CPU's, which llama.cpp runs with
 * its default F16 KV cache: Q rounded to F16 before the K dot products
 * (the ISA's f16 dot, llama.cpp's order on AVX2), and the softmax*V
 * accumulator kept in F16
 * (each update rounded, fused). With F32 K and V likewise: the ISA's f32
 * dot, fused V updates, an unfused S update. ggml ignores the precision hint on the CPU, and so
 * does this. Keeping these in F32 instead moved stories260K's log-probs by
 * ~1e-2 against llama.cpp and changed greedy continuations of quantized
 * models (tests/oracle).
 *
 * Where the kernel table has no hardware fp16 conversion (wasm: the
 * f16val kernels), F16 K/V rows are converted once for a tile of query
 * rows that share them, with the same arithmetic per row (same bits).
 */
#include "ops_nn_common.h"
#include "kernels.h"

/* query rows that go together through flash_attn_tile_f16val */
#define FA_TILE 8

/* per thread, the larger of: V accumulator (DV), V row in f32 (DV), K row
 * in f32 (DK); and the tile path's Q and accumulator rows (FA_TILE x (DK +
 * DV)), its K and V row (DK + DV) and Q in F16 (DK halves) */
static int64_t work_floats(int64_t DK, int64_t DV) {
    return KILN_MAX(DK + 2 * DV, (FA_TILE + 1) * (DK + DV) + DK) + KILN_CL_F32;
}

size_t kiln_cpu_work_flash_attn_ext(const struct kiln_tensor * dst, int n_threads) {
    return sizeof(float) * (size_t) work_floats(dst->src[1]->ne[0], dst->src[2]->ne[0]) * (size_t) n_threads;
}

/* slope * mask[ic] (0 without a mask) */
static inline float mask_value(const struct kiln_tensor * mask, const char * mrow, int64_t ic, float slope) {
    if (!mrow) return 0.0f;
    const float m = mask->type == KILN_TYPE_F16 ? kiln_fp16_to_fp32(((const kiln_fp16_t *) mrow)[ic])
                                                : ((const float *) mrow)[ic];
    return slope * m;
}

/* one query row with F16 K and V, as ggml's CPU kernel computes it */
static void flash_attn_row_f16(const struct kiln_tensor * k, const struct kiln_tensor * v,
                               const struct kiln_tensor * mask, const char * mrow, const float * pq,
                               kiln_fp16_t * q16, kiln_fp16_t * acc16, float * acc,
                               int64_t DK, int64_t DV, int64_t n_kv, int64_t ik2, int64_t ik3,
                               float scale, float softcap, float slope, float * out) {
    const struct kiln_kernels * kk = kiln_kernels();
    kk->f32_to_f16(DK, pq, q16);
    for (int64_t d = 0; d < DV; d++) acc16[d] = 0; /* +0.0 */
    float M = -INFINITY, S = 0.0f;
    for (int64_t ic = 0; ic < n_kv; ic++) {
        const float mv = mask_value(mask, mrow, ic, slope);
        if (mv == -INFINITY) continue; /* masked out */
        const kiln_fp16_t * kr = (const kiln_fp16_t *) kiln_row_ptr(k, ic, ik2, ik3);
        /* the ISA's f16 dot: on AVX2 llama.cpp's (vectors of 32, then the
         * rest of the products summed in double) */
        float s = kk->f16_dot(DK, kr, q16) * scale;
        if (softcap != 0.0f) s = softcap * tanhf(s);
        s += mv;
        float ms = 1.0f, vs = 1.0f;
        if (s > M) {
            const float Mold = M;
            M = s;
            ms = expf(Mold - M);
            kk->f16_scale(DV, acc16, ms);
        } else {
            vs = expf(s - M);
        }
        const kiln_fp16_t * vr = (const kiln_fp16_t *) kiln_row_ptr(v, ic, ik2, ik3);
        kk->f16_mad(DV, acc16, vr, vs);
        S = S * ms + vs;
    }
    const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
    kk->f16_to_f32(DV, acc16, acc);
    for (int64_t d = 0; d < DV; d++) out[d] = acc[d] * S_inv;
}

/* Query rows ir0..ir1 (all of one K/V head) with F16 K and V, on a table
 * with the f16val kernels (kernels.h; wasm, which has no hardware fp16
 * conversion): each K and V row is converted to f32 once for all the
 * rows, Q once per row (F16-rounded, as flash_attn_row_f16's q16), and the
 * F16 accumulators are kept as floats rounded to fp16 at every step. Per
 * row these are flash_attn_row_f16's operations in its order, so the
 * results are the same bits. */
static void flash_attn_tile_f16val(const struct kiln_tensor * q, const struct kiln_tensor * k, const struct kiln_tensor * v,
                                   const struct kiln_tensor * mask, struct kiln_tensor * dst, int64_t ir0, int64_t ir1,
                                   float scale, float softcap, float max_bias, float * work) {
    const struct kiln_kernels * kk = kiln_kernels();
    const int64_t DK = k->ne[0], DV = v->ne[0], n_kv = k->ne[1];
    const int64_t nq1 = q->ne[1], nq2 = q->ne[2];
    const int64_t rk2 = nq2 / k->ne[2], rk3 = q->ne[3] / k->ne[3];
    const int nt = (int) (ir1 - ir0);
    float * qf = work;                    /* nt x DK */
    float * acc = qf + FA_TILE * DK;      /* nt x DV */
    float * kf = acc + FA_TILE * DV;      /* DK */
    float * vf = kf + DK;                 /* DV */
    kiln_fp16_t * q16 = (kiln_fp16_t *) (vf + DV);
    const char * mrow[FA_TILE];
    float * out[FA_TILE];
    float slope[FA_TILE], M[FA_TILE], S[FA_TILE], mv[FA_TILE];
    int64_t ik2 = 0, ik3 = 0;
    for (int t = 0; t < nt; t++) {
        const int64_t ir = ir0 + t;
        const int64_t iq3 = ir / (nq2 * nq1);
        const int64_t iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        const int64_t iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        ik2 = iq2 / rk2; ik3 = iq3 / rk3;
        slope[t] = kiln_alibi_slope(max_bias, (uint32_t) iq2, (uint32_t) nq2);
        mrow[t] = mask ? kiln_row_ptr(mask, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : NULL;
        out[t] = (float *) kiln_row_ptr(dst, iq2, iq1, iq3);
        kk->f32_to_f16(DK, (const float *) kiln_row_ptr(q, iq1, iq2, iq3), q16);
        kk->f16_to_f32(DK, q16, qf + t * DK);
        for (int64_t d = 0; d < DV; d++) acc[t * DV + d] = 0.0f;
        M[t] = -INFINITY; S[t] = 0.0f;
    }
    for (int64_t ic = 0; ic < n_kv; ic++) {
        bool any = false;
        for (int t = 0; t < nt; t++) {
            mv[t] = mask_value(mask, mrow[t], ic, slope[t]);
            any |= mv[t] != -INFINITY;
        }
        if (!any) continue; /* masked out for every row */
        kk->f16_to_f32(DK, (const kiln_fp16_t *) kiln_row_ptr(k, ic, ik2, ik3), kf);
        kk->f16_to_f32(DV, (const kiln_fp16_t *) kiln_row_ptr(v, ic, ik2, ik3), vf);
        for (int t = 0; t < nt; t++) {
            if (mv[t] == -INFINITY) continue;
            float * a = acc + t * DV;
            float s = kk->f16val_dot(DK, kf, qf + t * DK) * scale;
            if (softcap != 0.0f) s = softcap * tanhf(s);
            s += mv[t];
            float ms = 1.0f, vs = 1.0f;
            if (s > M[t]) {
                const float Mold = M[t];
                M[t] = s;
                ms = expf(Mold - s);
                kk->f16val_scale(DV, a, ms);
            } else {
                vs = expf(s - M[t]);
            }
            kk->f16val_mad(DV, a, vf, vs);
            S[t] = S[t] * ms + vs;
        }
    }
    for (int t = 0; t < nt; t++) {
        const float S_inv = S[t] == 0.0f ? 0.0f : 1.0f / S[t];
        for (int64_t d = 0; d < DV; d++) out[t][d] = acc[t * DV + d] * S_inv;
    }
}

enum kiln_status kiln_cpu_fwd_flash_attn_ext(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * q = dst->src[0];
    const struct kiln_tensor * k = dst->src[1];
    const struct kiln_tensor * v = dst->src[2];
    const struct kiln_tensor * mask = dst->src[3];
    if (q->type != KILN_TYPE_F32 || dst->type != KILN_TYPE_F32) {
        kiln_set_error("flash_attn_ext: q must be f32, got %s", kiln_type_name(q->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const int64_t DK = k->ne[0], DV = v->ne[0], n_kv = k->ne[1];
    const int64_t nq1 = q->ne[1], nq2 = q->ne[2], nq3 = q->ne[3];
    const int64_t rk2 = nq2 / k->ne[2], rk3 = nq3 / k->ne[3];

    float scale = kiln_get_op_params_f32(dst, 0);
    const float max_bias = kiln_get_op_params_f32(dst, 1);
    const float softcap = kiln_get_op_params_f32(dst, 2);
    if (softcap != 0.0f) scale /= softcap;

    float * acc = (float *) params->wdata + work_floats(DK, DV) * params->ith;
    float * vrow = acc + DV;
    float * krow = vrow + DV;
    const bool k_f32 = k->type == KILN_TYPE_F32, v_f32 = v->type == KILN_TYPE_F32;
    const bool f16_kv = k->type == KILN_TYPE_F16 && v->type == KILN_TYPE_F16;
    /* f16_kv: Q in F16 in krow's space, the F16 accumulator in vrow's */
    kiln_fp16_t * q16 = (kiln_fp16_t *) krow;
    kiln_fp16_t * acc16 = (kiln_fp16_t *) vrow;

    int64_t ir0, ir1;
    kiln_split_rows(nq1 * nq2 * nq3, params->ith, params->nth, &ir0, &ir1);
    if (f16_kv && kiln_kernels()->f16val_mad) {
        /* tiles of up to FA_TILE consecutive rows that share a K/V head */
#define KV_HEAD(r) (((r) / nq1) % nq2 / rk2 + ((r) / (nq1 * nq2)) / rk3 * k->ne[2])
        for (int64_t ir = ir0; ir < ir1;) {
            int64_t end = ir + 1;
            while (end < ir1 && end - ir < FA_TILE && KV_HEAD(end) == KV_HEAD(ir)) end++;
            flash_attn_tile_f16val(q, k, v, mask, dst, ir, end, scale, softcap, max_bias, acc);
            ir = end;
        }
#undef KV_HEAD
        return KILN_STATUS_SUCCESS;
    }
    for (int64_t ir = ir0; ir < ir1; ir++) {
        const int64_t iq3 = ir / (nq2 * nq1);
        const int64_t iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        const int64_t iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        const float slope = kiln_alibi_slope(max_bias, (uint32_t) iq2, (uint32_t) nq2);
        const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;

        const float * pq = (const float *) kiln_row_ptr(q, iq1, iq2, iq3);
        const char * mrow = mask ? kiln_row_ptr(mask, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : NULL;

        float M = -INFINITY, S = 0.0f;
        for (int64_t d = 0; d < DV; d++) acc[d] = 0.0f;
        if (f16_kv) {
            flash_attn_row_f16(k, v, mask, mrow, pq, q16, acc16, acc, DK, DV, n_kv, ik2, ik3, scale, softcap, slope,
                               (float *) kiln_row_ptr(dst, iq2, iq1, iq3));
            continue;
        }

        for (int64_t ic = 0; ic < n_kv; ic++) {
            const float mv = mask_value(mask, mrow, ic, slope);
            if (mv == -INFINITY) continue;
            const char * kp = kiln_row_ptr(k, ic, ik2, ik3);
            const float * kr = (const float *) kp;
            if (!k_f32) { kiln_row_to_f32(k->type, kp, krow, DK); kr = krow; }
            /* the ISA's f32 dot (llama.cpp's order on AVX2), k first as there */
            float s = kiln_kernels()->f32_dot(DK, kr, pq);
            s *= scale;
            if (softcap != 0.0f) s = softcap * tanhf(s);
            s += mv;

            float ms = 1.0f, vs = 1.0f;
            if (s > M) {
                const float Mold = M;
                M = s;
                ms = expf(Mold - M);
                for (int64_t d = 0; d < DV; d++) acc[d] *= ms;
            } else {
                vs = expf(s - M);
            }
            const char * vp = kiln_row_ptr(v, ic, ik2, ik3);
            const float * vr = (const float *) vp;
            if (!v_f32) { kiln_row_to_f32(v->type, vp, vrow, DV); vr = vrow; }
            /* fused as llama.cpp's vector mad; S unfused, as there */
            for (int64_t d = 0; d < DV; d++) acc[d] = fmaf(vr[d], vs, acc[d]);
            S = S * ms + vs;
        }
        const float S_inv = S == 0.0f ? 0.0f : 1.0f / S;
        float * out = (float *) kiln_row_ptr(dst, iq2, iq1, iq3);
        for (int64_t d = 0; d < DV; d++) out[d] = acc[d] * S_inv;
    }
    return KILN_STATUS_SUCCESS;
}
