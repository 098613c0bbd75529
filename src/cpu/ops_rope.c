/*
 * ops_rope.c — rotary position embedding (rope, rope_ext, rope_multi) and
 * its backward, on f32 or f16 rows, as ggml computes them:
 *
 *   theta_extrap(i) = pos * freq_base^(-2i/n_dims) / freq_factor[i]
 *   theta = freq_scale*theta_extrap, blended with theta_extrap by the YaRN
 *           ramp over [corr_dims[0], corr_dims[1]] times ext_factor,
 *   magnitude attn_factor (times 1 + 0.1*ln(1/freq_scale) when ext_factor != 0).
 *
 * Pairs rotated: normal (x[2i], x[2i+1]); neox and mrope (x[i], x[i+n_dims/2]);
 * vision (x[i], x[i+n_dims]) over the whole row. Dimensions past n_dims are
 * copied. The backward rotates by -theta. The per-position table of cos/sin
 * is built per thread in the work buffer, by repeated multiplication like
 * ggml, so every row sees the same table whatever the thread count.
 */
#include "ops_nn_common.h"

size_t kiln_cpu_work_rope(const struct kiln_tensor * dst, int n_threads) {
    return sizeof(float) * (size_t)(dst->ne[0] + KILN_CL_F32) * (size_t) n_threads;
}
size_t kiln_cpu_work_rope_back(const struct kiln_tensor * dst, int n_threads) {
    return kiln_cpu_work_rope(dst, n_threads);
}

static float rope_yarn_ramp(float low, float high, int64_t i0) {
    const float y = (float)(i0 / 2 - low) / KILN_MAX(0.001f, high - low);
    return 1.0f - KILN_MIN(1.0f, KILN_MAX(0.0f, y));
}

static void rope_yarn(float theta_extrap, float freq_scale, const float corr_dims[2], int64_t i0, float ext_factor,
                      float mscale, float * cos_theta, float * sin_theta) {
    const float theta_interp = freq_scale * theta_extrap;
    float theta = theta_interp;
    if (ext_factor != 0.0f) {
        const float ramp_mix = rope_yarn_ramp(corr_dims[0], corr_dims[1], i0) * ext_factor;
        theta = theta_interp * (1 - ramp_mix) + theta_extrap * ramp_mix;
        mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale);
    }
    *cos_theta = cosf(theta) * mscale;
    *sin_theta = sinf(theta) * mscale;
}

struct rope_args {
    float freq_scale, ext_factor, attn_factor, theta_scale, sin_sign;
    float corr_dims[2];
    const float * freq_factors;
    int sections[4];
    bool vision;
};

static void rope_cache(const struct rope_args * a, float p, int64_t ne0, float * cache) {
    float theta = p;
    for (int64_t i0 = 0; i0 < ne0; i0 += 2) {
        const float ff = a->freq_factors ? a->freq_factors[i0 / 2] : 1.0f;
        rope_yarn(theta / ff, a->freq_scale, a->corr_dims, i0, a->ext_factor, a->attn_factor, &cache[i0], &cache[i0 + 1]);
        cache[i0 + 1] *= a->sin_sign;
        theta *= a->theta_scale;
    }
}

/* multi-rope: the pair index cycles through sections t, h, w, e, each with its
 * own position; vision mode restarts each section's power series */
static void mrope_cache(const struct rope_args * a, const float p[4], int64_t ne0, float * cache) {
    float th[4] = { p[0], p[1], p[2], p[3] };
    const int * s = a->sections;
    const int sect_dims = s[0] + s[1] + s[2] + s[3];
    const int sec_w = s[0] + s[1];
    const int sec_e = sec_w + s[2];
    for (int64_t i0 = 0; i0 < ne0; i0 += 2) {
        const float ff = a->freq_factors ? a->freq_factors[i0 / 2] : 1.0f;
        const int sector = (int)((i0 / 2) % sect_dims);
        if (a->vision) {
            if (sector == 0) th[0] = p[0];
            else if (sector == s[0]) th[1] = p[1];
            else if (sector == sec_w) th[2] = p[2];
            else if (sector == sec_e) th[3] = p[3];
        }
        float theta = th[0];
        if (sector >= s[0] && sector < sec_w) theta = th[1];
        else if (sector >= sec_w && sector < sec_e) theta = th[2];
        else if (sector >= sec_e) theta = th[3];
        rope_yarn(theta / ff, a->freq_scale, a->corr_dims, i0, a->ext_factor, a->attn_factor, &cache[i0], &cache[i0 + 1]);
        cache[i0 + 1] *= a->sin_sign;
        for (int k = 0; k < 4; k++) th[k] *= a->theta_scale;
    }
}

static inline float ld(const void * p, int64_t i, bool f16) {
    return f16 ? kiln_fp16_to_fp32(((const kiln_fp16_t *) p)[i]) : ((const float *) p)[i];
}
static inline void st(void * p, int64_t i, float v, bool f16) {
    if (f16) ((kiln_fp16_t *) p)[i] = kiln_fp32_to_fp16(v);
    else ((float *) p)[i] = v;
}

/* rotate n_pairs pairs (ic, ic + off); cache is indexed by the pair's i0 */
static void rotate(const float * cache, const void * src, void * dst, int64_t n, int64_t off, int64_t div, bool f16) {
    for (int64_t i0 = 0; i0 < n; i0 += 2) {
        const int64_t ic = i0 / div;
        const float c = cache[i0], s = cache[i0 + 1];
        const float x0 = ld(src, ic, f16), x1 = ld(src, ic + off, f16);
        /* fused as llama.cpp's x86 build computes it (GCC contracts its
         * x0*c - x1*s into one FMA): bit-identical to it, checked by
         * scripts/ggml-op-compare, and the same on every platform */
        st(dst, ic,       fmaf(x0, c, -(x1 * s)), f16);
        st(dst, ic + off, fmaf(x0, s, x1 * c), f16);
    }
}

static enum kiln_status rope_run(const struct kiln_compute_params * params, struct kiln_tensor * dst, bool forward) {
    const struct kiln_tensor * src = dst->src[0];
    const struct kiln_tensor * posT = dst->src[1];
    const struct kiln_tensor * ffT = dst->src[2];
    if ((src->type != KILN_TYPE_F32 && src->type != KILN_TYPE_F16) || dst->type != src->type || posT->type != KILN_TYPE_I32) {
        kiln_set_error("%s: unsupported types %s / %s", kiln_op_name(dst->op), kiln_type_name(src->type), kiln_type_name(posT->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const bool f16 = src->type == KILN_TYPE_F16;
    const int n_dims = kiln_get_op_params_i32(dst, 1);
    const int mode = kiln_get_op_params_i32(dst, 2);
    const int n_ctx_orig = kiln_get_op_params_i32(dst, 4);
    const float freq_base = kiln_get_op_params_f32(dst, 5);
    const float beta_fast = kiln_get_op_params_f32(dst, 9);
    const float beta_slow = kiln_get_op_params_f32(dst, 10);
    struct rope_args a;
    a.freq_scale  = kiln_get_op_params_f32(dst, 6);
    a.ext_factor  = kiln_get_op_params_f32(dst, 7);
    a.attn_factor = kiln_get_op_params_f32(dst, 8);
    for (int k = 0; k < 4; k++) a.sections[k] = kiln_get_op_params_i32(dst, 11 + k);
    a.theta_scale = powf(freq_base, -2.0f / n_dims);
    a.sin_sign = forward ? 1.0f : -1.0f;
    a.freq_factors = ffT ? (const float *) ffT->data : NULL;
    kiln_rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, a.corr_dims);
    const bool mrope = (mode & KILN_ROPE_TYPE_MROPE) != 0;
    a.vision = mode == KILN_ROPE_TYPE_VISION;
    const bool neox = (mode & KILN_ROPE_TYPE_NEOX) != 0;

    const int64_t ne0 = src->ne[0], ne2 = src->ne[2];
    const size_t esz = kiln_type_size(src->type);
    const int32_t * pos = (const int32_t *) posT->data;
    float * cache = (float *) params->wdata + (ne0 + KILN_CL_F32) * params->ith;

    int64_t ir0, ir1;
    kiln_split_rows(kiln_nrows(src), params->ith, params->nth, &ir0, &ir1);
    int64_t last_i2 = -1;
    for (int64_t ir = ir0; ir < ir1; ir++) {
        int64_t i1, i2, i3;
        kiln_row_index(src, ir, &i1, &i2, &i3);
        if (i2 != last_i2) {
            if (mrope) {
                const float p[4] = { (float) pos[i2], (float) pos[i2 + ne2], (float) pos[i2 + 2 * ne2], (float) pos[i2 + 3 * ne2] };
                mrope_cache(&a, p, ne0, cache);
            } else {
                rope_cache(&a, (float) pos[i2], ne0, cache);
            }
            last_i2 = i2;
        }
        const char * sp = kiln_row_ptr(src, i1, i2, i3);
        char * dp = kiln_row_ptr(dst, i1, i2, i3);
        if (a.vision) {
            rotate(cache, sp, dp, ne0, n_dims, 2, f16);
        } else {
            if (mrope || neox) rotate(cache, sp, dp, n_dims, n_dims / 2, 2, f16);
            else               rotate(cache, sp, dp, n_dims, 1, 1, f16);
            if (sp != dp && ne0 > n_dims) memcpy(dp + n_dims * esz, sp + n_dims * esz, (size_t)(ne0 - n_dims) * esz);
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_rope(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    return rope_run(params, dst, true);
}
enum kiln_status kiln_cpu_fwd_rope_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    return rope_run(params, dst, false);
}
