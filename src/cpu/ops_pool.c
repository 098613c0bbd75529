/*
 * ops_pool.c — forward kernels of pool_1d, pool_2d and pool_2d_back.
 *
 * ggml semantics: windows start at o*s - p; positions outside the input are
 * skipped; MAX starts from -FLT_MAX; AVG divides by the full window size k
 * (padding counts as zeros). ggml's pool_1d only runs with s = k and p = 0;
 * the general case here reduces to it there.
 */
#include "ops_conv_util.h"

enum kiln_status kiln_cpu_fwd_pool_1d(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    if ((a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) || dst->type != KILN_TYPE_F32) {
        kiln_set_error("pool_1d: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const enum kiln_op_pool op = (enum kiln_op_pool) dst->op_params[0];
    const int k0 = dst->op_params[1], s0 = dst->op_params[2], p0 = dst->op_params[3];
    const int64_t IW = a->ne[0], OW = dst->ne[0];
    const int64_t nr = dst->ne[1] * dst->ne[2] * dst->ne[3];

    int64_t r0, r1;
    kiln_split_rows(nr, params->ith, params->nth, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
        const char * src = (const char *) a->data + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3];
        float * out = (float *)((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int64_t o = 0; o < OW; o++) {
            const int64_t ix = o * s0 - p0;
            float acc = op == KILN_OP_POOL_MAX ? -FLT_MAX : 0.0f;
            for (int k = 0; k < k0; k++) {
                const int64_t j = ix + k;
                if (j < 0 || j >= IW) continue;
                const float v = conv_load(a->type, src + j * a->nb[0]);
                if (op == KILN_OP_POOL_AVG) acc += v;
                else if (v > acc) acc = v;
            }
            if (op == KILN_OP_POOL_AVG) acc /= k0;
            out[o] = acc;
        }
    }
    return KILN_STATUS_SUCCESS;
}

enum kiln_status kiln_cpu_fwd_pool_2d(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * a = dst->src[0];
    if ((a->type != KILN_TYPE_F32 && a->type != KILN_TYPE_F16) || dst->type != KILN_TYPE_F32) {
        kiln_set_error("pool_2d: unsupported type %s", kiln_type_name(a->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const enum kiln_op_pool op = (enum kiln_op_pool) dst->op_params[0];
    const int k0 = dst->op_params[1], k1 = dst->op_params[2];
    const int s0 = dst->op_params[3], s1 = dst->op_params[4];
    const int p0 = dst->op_params[5], p1 = dst->op_params[6];
    const int ka = k0 * k1;
    const int64_t IW = a->ne[0], IH = a->ne[1], OW = dst->ne[0], OH = dst->ne[1];

    int64_t q0, q1;
    kiln_split_rows(dst->ne[2] * dst->ne[3], params->ith, params->nth, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t i2 = q % dst->ne[2], i3 = q / dst->ne[2];
        const char * src = (const char *) a->data + i2 * a->nb[2] + i3 * a->nb[3];
        char * dplane = (char *) dst->data + i2 * dst->nb[2] + i3 * dst->nb[3];
        for (int64_t oy = 0; oy < OH; oy++) {
            float * out = (float *)(dplane + oy * dst->nb[1]);
            const int64_t iy = oy * s1 - p1;
            for (int64_t ox = 0; ox < OW; ox++) {
                const int64_t ix = ox * s0 - p0;
                float acc = op == KILN_OP_POOL_MAX ? -FLT_MAX : 0.0f;
                for (int ky = 0; ky < k1; ky++) {
                    if (iy + ky < 0 || iy + ky >= IH) continue;
                    const char * srow = src + (iy + ky) * a->nb[1];
                    for (int kx = 0; kx < k0; kx++) {
                        const int64_t j = ix + kx;
                        if (j < 0 || j >= IW) continue;
                        const float v = conv_load(a->type, srow + j * a->nb[0]);
                        if (op == KILN_OP_POOL_AVG) acc += v;
                        else if (v > acc) acc = v;
                    }
                }
                if (op == KILN_OP_POOL_AVG) acc /= ka;
                out[ox] = acc;
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}

/* src0: gradient of the pool output [OW, OH, C, N], src1: the pool's input.
 * MAX routes each gradient to the first maximum of its window; AVG spreads
 * it as grad/k over the window's in-bounds positions. Planes are split
 * across threads (the op table runs it on one thread, like ggml). */
enum kiln_status kiln_cpu_fwd_pool_2d_back(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * dy = dst->src[0];
    const struct kiln_tensor * af = dst->src[1];
    if (dy->type != KILN_TYPE_F32 || (af->type != KILN_TYPE_F32 && af->type != KILN_TYPE_F16) || dst->type != KILN_TYPE_F32) {
        kiln_set_error("pool_2d_back: unsupported types (gradient %s, input %s)", kiln_type_name(dy->type), kiln_type_name(af->type));
        return KILN_STATUS_UNSUPPORTED;
    }
    const enum kiln_op_pool op = (enum kiln_op_pool) dst->op_params[0];
    const int k0 = dst->op_params[1], k1 = dst->op_params[2];
    const int s0 = dst->op_params[3], s1 = dst->op_params[4];
    const int p0 = dst->op_params[5], p1 = dst->op_params[6];
    const int ka = k0 * k1;
    const int64_t IW = dst->ne[0], IH = dst->ne[1], OW = dy->ne[0], OH = dy->ne[1];

    int64_t q0, q1;
    kiln_split_rows(dst->ne[2] * dst->ne[3], params->ith, params->nth, &q0, &q1);
    for (int64_t q = q0; q < q1; q++) {
        const int64_t i2 = q % dst->ne[2], i3 = q / dst->ne[2];
        char * dplane = (char *) dst->data + i2 * dst->nb[2] + i3 * dst->nb[3];
        const char * fplane = (const char *) af->data + i2 * af->nb[2] + i3 * af->nb[3];
        const char * gplane = (const char *) dy->data + i2 * dy->nb[2] + i3 * dy->nb[3];
        for (int64_t y = 0; y < IH; y++) {
            float * row = (float *)(dplane + y * dst->nb[1]);
            for (int64_t x = 0; x < IW; x++) row[x] = 0.0f;
        }
        for (int64_t oy = 0; oy < OH; oy++) {
            const int64_t iy = oy * s1 - p1;
            for (int64_t ox = 0; ox < OW; ox++) {
                const int64_t ix = ox * s0 - p0;
                const float g = *(const float *)(gplane + oy * dy->nb[1] + ox * dy->nb[0]);
                if (op == KILN_OP_POOL_MAX) {
                    float best = -FLT_MAX;
                    int64_t bx = -1, by = -1;
                    for (int ky = 0; ky < k1; ky++) {
                        if (iy + ky < 0 || iy + ky >= IH) continue;
                        for (int kx = 0; kx < k0; kx++) {
                            const int64_t j = ix + kx;
                            if (j < 0 || j >= IW) continue;
                            const float v = conv_load(af->type, fplane + (iy + ky) * af->nb[1] + j * af->nb[0]);
                            if (v <= best) continue;
                            best = v;
                            bx = j;
                            by = iy + ky;
                        }
                    }
                    if (bx < 0) continue;
                    *(float *)(dplane + by * dst->nb[1] + bx * dst->nb[0]) += g;
                } else {
                    const float gk = g / ka;
                    for (int ky = 0; ky < k1; ky++) {
                        if (iy + ky < 0 || iy + ky >= IH) continue;
                        float * row = (float *)(dplane + (iy + ky) * dst->nb[1]);
                        for (int kx = 0; kx < k0; kx++) {
                            const int64_t j = ix + kx;
                            if (j < 0 || j >= IW) continue;
                            row[j] += gk;
                        }
                    }
                }
            }
        }
    }
    return KILN_STATUS_SUCCESS;
}
