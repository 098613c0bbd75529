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
 *
 * That is ggml's row path. ggml CPU takes two more by shape, and so does
 * this, with their arithmetic (each checked value for value against
 * llama.cpp's haswell library: scripts/ggml-op-compare):
 * - prompts of >= 64 query rows with F32 or F16 K = V type and DV a
 *   multiple of 8: tiles of 64 rows x 64 positions, scores and
 *   accumulators in f32 (flash_attn_tiled);
 * - one query row against >= 512 positions with F32 or F16 K = V type:
 *   the positions split among the threads and merged
 *   (flash_attn_split_kv), so the result depends on the thread count as
 *   llama.cpp's does.
 * ggml's own wasm (SIMD128) and NEON builds test DV against 4 instead of
 * 8; every ISA here tests 8, so all of them take the same paths (and the
 * AVX-512 row stays the AVX2 row's bits). The tiled path's fused
 * multiply-adds are the ISA's f32_gemm_fma or f32_axpy: fused on AVX2,
 * AVX-512 and NEON, multiply then add on wasm SIMD128 as ggml's wasm build
 * does.
 */
#include "ops_nn_common.h"
#include "kernels.h"

/* query rows that go together through flash_attn_tile_f16val */
#define FA_TILE 8

/* ggml's prompt path (flash_attn_tiled below): Q_TILE query rows x KV_TILE
 * cached positions per step */
#define Q_TILE 64
#define KV_TILE 64
/* it is taken when DV is a multiple of ggml's SIMD width for f32; the AVX2
 * build that the oracle pins has 8, and every row here uses 8 so that all
 * ISAs take the same path (ggml's own wasm build has 4, NEON 4, AVX-512 16) */
#define FA_F32_EPR 8
/* ggml's decode path (flash_attn_split_kv): one query row and at least this
 * many cached positions, which are split among the threads */
#define SPLIT_KV_MIN 512

/* per thread, the largest of: the row path's V accumulator (DV), V row in
 * f32 (DV), K row in f32 (DK); the f16val tile's Q and accumulator rows
 * (FA_TILE x (DK + DV)), its K and V row (DK + DV) and Q in F16 (DK
 * halves); the tiled path's Q tile and K tile (Q_TILE x DK each), scores
 * and mask (Q_TILE x KV_TILE each), V tile and accumulators (Q_TILE x DV
 * each) and a K row (DK) */
static int64_t work_floats(int64_t DK, int64_t DV) {
    const int64_t row = KILN_MAX(DK + 2 * DV, (FA_TILE + 1) * (DK + DV) + DK);
    const int64_t tiled = 2 * Q_TILE * DK + 2 * Q_TILE * KV_TILE + 2 * Q_TILE * DV + DK;
    return KILN_MAX(row, tiled) + KILN_CL_F32;
}

/* after the per-thread parts: the split decode's partial results, [head][thread][M, S, VKQ[DV]] */
size_t kiln_cpu_work_flash_attn_ext(const struct kiln_tensor * dst, int n_threads) {
    const int64_t DK = dst->src[1]->ne[0], DV = dst->src[2]->ne[0];
    const int64_t partials = kiln_flash_attn_split_kv(dst) ? dst->src[0]->ne[2] * n_threads * (2 + DV) : 0;
    return sizeof(float) * ((size_t) work_floats(DK, DV) * (size_t) n_threads + (size_t) partials);
}

/* slope * mask[ic] (0 without a mask) */
static inline float mask_value(const struct kiln_tensor * mask, const char * mrow, int64_t ic, float slope) {
    if (!mrow) return 0.0f;
    const float m = mask->type == KILN_TYPE_F16 ? kiln_fp16_to_fp32(((const kiln_fp16_t *) mrow)[ic])
                                                : ((const float *) mrow)[ic];
    return slope * m;
}

/* The online softmax state of one query row over cached positions
 * ic0..ic1: running max M, sum S and the V accumulator acc (DV floats, not
 * yet divided by S). */
struct fa_row_state { float M, S; };

/* the running sum S = S * ms + vs of a row: llama.cpp's x86 build rounds
 * the product, its arm64 build (clang, contracting) fuses it */
static inline float fa_sum(float S, float ms, float vs) {
#if defined(__aarch64__)
    return fmaf(S, ms, vs);
#else
    return S * ms + vs;
#endif
}

/* one query row with F16 K and V, as ggml's CPU kernel computes it */
static struct fa_row_state flash_attn_row_f16(const struct kiln_tensor * k, const struct kiln_tensor * v,
                               const struct kiln_tensor * mask, const char * mrow, const float * pq,
                               kiln_fp16_t * q16, kiln_fp16_t * acc16, float * acc,
                               int64_t DK, int64_t DV, int64_t ic0, int64_t ic1, int64_t ik2, int64_t ik3,
                               float scale, float softcap, float slope) {
    const struct kiln_kernels * kk = kiln_kernels();
    kk->f32_to_f16(DK, pq, q16);
    for (int64_t d = 0; d < DV; d++) acc16[d] = 0; /* +0.0 */
    float M = -INFINITY, S = 0.0f;
    for (int64_t ic = ic0; ic < ic1; ic++) {
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
        S = fa_sum(S, ms, vs);
    }
    kk->f16_to_f32(DV, acc16, acc);
    return (struct fa_row_state) { M, S };
}

/* one query row with F32 (or BF16, or mixed) K and V; krow and vrow hold
 * converted rows */
static struct fa_row_state flash_attn_row_f32(const struct kiln_tensor * k, const struct kiln_tensor * v,
                               const struct kiln_tensor * mask, const char * mrow, const float * pq,
                               float * krow, float * vrow, float * acc,
                               int64_t DK, int64_t DV, int64_t ic0, int64_t ic1, int64_t ik2, int64_t ik3,
                               float scale, float softcap, float slope) {
    const bool k_f32 = k->type == KILN_TYPE_F32, v_f32 = v->type == KILN_TYPE_F32;
    float M = -INFINITY, S = 0.0f;
    for (int64_t d = 0; d < DV; d++) acc[d] = 0.0f;
    for (int64_t ic = ic0; ic < ic1; ic++) {
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
        /* fused as llama.cpp's vector mad */
        for (int64_t d = 0; d < DV; d++) acc[d] = fmaf(vr[d], vs, acc[d]);
        S = fa_sum(S, ms, vs);
    }
    return (struct fa_row_state) { M, S };
}

/* Query row ir (iq1, iq2, iq3) over cached positions ic0..ic1 by the row
 * path: its state, acc filled (work: this thread's part of wdata). */
static struct fa_row_state flash_attn_row(const struct kiln_tensor * q, const struct kiln_tensor * k,
                                          const struct kiln_tensor * v, const struct kiln_tensor * mask,
                                          int64_t iq1, int64_t iq2, int64_t iq3, int64_t ic0, int64_t ic1,
                                          float scale, float softcap, float max_bias, float * work) {
    const int64_t DK = k->ne[0], DV = v->ne[0];
    const int64_t rk2 = q->ne[2] / k->ne[2], rk3 = q->ne[3] / k->ne[3];
    const float slope = kiln_alibi_slope(max_bias, (uint32_t) iq2, (uint32_t) q->ne[2]);
    const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;
    const float * pq = (const float *) kiln_row_ptr(q, iq1, iq2, iq3);
    const char * mrow = mask ? kiln_row_ptr(mask, iq1, iq2 % mask->ne[2], iq3 % mask->ne[3]) : NULL;
    float * acc = work, * vrow = acc + DV, * krow = vrow + DV;
    if (k->type == KILN_TYPE_F16 && v->type == KILN_TYPE_F16) {
        /* Q in F16 in krow's space, the F16 accumulator in vrow's */
        return flash_attn_row_f16(k, v, mask, mrow, pq, (kiln_fp16_t *) krow, (kiln_fp16_t *) vrow, acc,
                                  DK, DV, ic0, ic1, ik2, ik3, scale, softcap, slope);
    }
    return flash_attn_row_f32(k, v, mask, mrow, pq, krow, vrow, acc, DK, DV, ic0, ic1, ik2, ik3, scale, softcap, slope);
}

/* C[m x n] += A[m x k] B[k x n], one FMA chain per value in k order (the
 * ISA's f32_axpy: multiply then add on wasm SIMD128) */
static void gemm_acc(const struct kiln_kernels * kk, int m, int k, int n, float * C, const float * A, const float * B) {
    if (kk->f32_gemm_fma) { kk->f32_gemm_fma(m, k, n, C, A, B); return; }
    for (int i = 0; i < m; i++) {
        for (int q = 0; q < k; q++) kk->f32_axpy(n, A[i * k + q], B + q * n, C + i * n);
    }
}

/*
 * ggml's prompt path: query rows ir0..ir1 in tiles of up to Q_TILE rows of
 * one head, each against the cache in steps of KV_TILE positions, with F32
 * or F16 K and V of one type (converted to f32; Q stays f32). Per step:
 *   KQ = Q K^T by fused multiply-adds in the order of the head dimension
 *   (ggml's simd_gemm: every score one chain of FMAs from 0), times scale;
 *   positions past the cache's end get -inf, then softcap (tanh, times
 *   softcap: these become -softcap, as in ggml) and the mask are applied;
 *   per row the step's max m, M' = max(M, m), the accumulator and S scaled
 *   by expf(M - M') when M grows, and the row's exponentials exp(KQ - M')
 *   by the ISA's softmax kernel (ggml's vector expf), whose double sum is
 *   added to S in double and rounded;
 *   VKQ += P V, again one FMA chain per value over the step's positions in
 *   order, the positions past the end included: weight 0 (with a softcap
 *   and no mask e^(-softcap - M'), as in ggml) against the V rows left
 *   there by the step before (zeros in the first), as ggml's buffer holds.
 * A step whose mask is -inf for every row of the tile is skipped, and a row
 * whose scores are all -inf gets weight 0 for the step. Each row's result
 * depends on its own data only, so the tile boundaries (and the split among
 * threads) do not change any value.
 */
static void flash_attn_tiled(const struct kiln_tensor * q, const struct kiln_tensor * k, const struct kiln_tensor * v,
                             const struct kiln_tensor * mask, struct kiln_tensor * dst, int64_t ir0, int64_t ir1,
                             float scale, float softcap, float max_bias, float * work) {
    const struct kiln_kernels * kk = kiln_kernels();
    const int64_t DK = k->ne[0], DV = v->ne[0], n_kv = k->ne[1];
    const int64_t nq1 = q->ne[1], nq2 = q->ne[2];
    const int64_t rk2 = nq2 / k->ne[2], rk3 = q->ne[3] / k->ne[3];
    const bool f16 = k->type == KILN_TYPE_F16;
    float * Qt = work;                  /* Q_TILE x DK */
    float * Kt = Qt + Q_TILE * DK;      /* DK x KV_TILE (transposed) */
    float * KQ = Kt + DK * KV_TILE;     /* Q_TILE x KV_TILE */
    float * mk = KQ + Q_TILE * KV_TILE; /* Q_TILE x KV_TILE */
    float * Vt = mk + Q_TILE * KV_TILE; /* KV_TILE x DV */
    float * VKQ = Vt + KV_TILE * DV;    /* Q_TILE x DV */
    float * krow = VKQ + Q_TILE * DV;   /* DK */
    float M[Q_TILE], S[Q_TILE];
    bool skip[Q_TILE];

    for (int64_t ir = ir0; ir < ir1;) {
        const int64_t iq3 = ir / (nq2 * nq1);
        const int64_t iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        const int64_t iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        const int nt = (int) KILN_MIN(Q_TILE, KILN_MIN(ir1 - ir, nq1 - iq1));
        const float slope = kiln_alibi_slope(max_bias, (uint32_t) iq2, (uint32_t) nq2);
        const int64_t ik2 = iq2 / rk2, ik3 = iq3 / rk3;

        for (int t = 0; t < nt; t++) {
            memcpy(Qt + t * DK, kiln_row_ptr(q, iq1 + t, iq2, iq3), sizeof(float) * (size_t) DK);
            M[t] = -INFINITY;
            S[t] = 0.0f;
        }
        memset(VKQ, 0, sizeof(float) * (size_t) (nt * DV));
        memset(Vt, 0, sizeof(float) * (size_t) (KV_TILE * DV));
        memset(Kt, 0, sizeof(float) * (size_t) (DK * KV_TILE));

        for (int64_t ic = 0; ic < n_kv; ic += KV_TILE) {
            const int nkv = (int) KILN_MIN(KV_TILE, n_kv - ic);
            if (mask) {
                bool any = false;
                for (int t = 0; t < nt; t++) {
                    const char * mrow = kiln_row_ptr(mask, iq1 + t, iq2 % mask->ne[2], iq3 % mask->ne[3]);
                    float * m = mk + t * KV_TILE;
                    /* mask_value's slope * value, a row at a time */
                    if (mask->type == KILN_TYPE_F16) kk->f16_to_f32(nkv, (const kiln_fp16_t *) mrow + ic, m);
                    else memcpy(m, (const float *) mrow + ic, sizeof(float) * (size_t) nkv);
                    kk->f32_scale(nkv, slope, m, m);
                    for (int j = 0; j < nkv; j++) any |= m[j] != -INFINITY;
                    for (int j = nkv; j < KV_TILE; j++) m[j] = -INFINITY;
                }
                if (!any) continue; /* masked out for every row of the tile */
            }
            for (int j = 0; j < nkv; j++) {
                const float * kr = (const float *) kiln_row_ptr(k, ic + j, ik2, ik3);
                if (f16) { kk->f16_to_f32(DK, (const kiln_fp16_t *) kr, krow); kr = krow; }
                for (int64_t d = 0; d < DK; d++) Kt[d * KV_TILE + j] = kr[d];
            }
            memset(KQ, 0, sizeof(float) * (size_t) (nt * KV_TILE));
            gemm_acc(kk, nt, (int) DK, KV_TILE, KQ, Qt, Kt);
            for (int t = 0; t < nt; t++) {
                float * s = KQ + t * KV_TILE;
                kk->f32_scale(KV_TILE, scale, s, s);
                for (int j = nkv; j < KV_TILE; j++) s[j] = -INFINITY;
                if (softcap != 0.0f) {
                    for (int j = 0; j < KV_TILE; j++) s[j] = tanhf(s[j]);
                    kk->f32_scale(KV_TILE, softcap, s, s);
                }
                if (mask) kk->f32_add(KV_TILE, s, mk + t * KV_TILE, s);

                float mx = -INFINITY;
                for (int j = 0; j < KV_TILE; j++) mx = mx > s[j] ? mx : s[j];
                skip[t] = mx == -INFINITY;
                if (skip[t]) continue;
                const float Mold = M[t], Mnew = fmaxf(Mold, mx);
                if (Mnew > Mold) {
                    const float ms = expf(Mold - Mnew);
                    kk->f32_scale(DV, ms, VKQ + t * DV, VKQ + t * DV);
                    S[t] *= ms;
                }
                M[t] = Mnew;
                S[t] = (float) ((double) S[t] + kk->f32_softmax_exp(KV_TILE, s, s, Mnew));
            }
            for (int j = 0; j < nkv; j++) {
                const char * vp = kiln_row_ptr(v, ic + j, ik2, ik3);
                if (f16) kk->f16_to_f32(DV, (const kiln_fp16_t *) vp, Vt + j * DV);
                else memcpy(Vt + j * DV, vp, sizeof(float) * (size_t) DV);
            }
            for (int t = 0; t < nt; t++) {
                if (skip[t]) memset(KQ + t * KV_TILE, 0, sizeof(float) * KV_TILE);
            }
            gemm_acc(kk, nt, KV_TILE, (int) DV, VKQ, KQ, Vt);
        }
        for (int t = 0; t < nt; t++) {
            const float S_inv = S[t] == 0.0f ? 0.0f : 1.0f / S[t];
            kk->f32_scale(DV, S_inv, VKQ + t * DV, (float *) kiln_row_ptr(dst, iq2, iq1 + t, iq3));
        }
        ir += nt;
    }
}

/*
 * ggml's decode path: one query row per head and n_kv >= SPLIT_KV_MIN. The
 * cache is cut into nth chunks of ceil(n_kv / nth) positions; thread ith
 * runs the row path on chunk ith for every head and leaves (M, S, acc) in
 * wdata; after a barrier each head's chunks are merged in chunk order
 * (empty ones skipped): M' = max(M, Mc), acc = acc e^(M-M') + accc e^(Mc-M')
 * and S likewise (the second product rounded, the first fused onto it, as
 * GCC contracts ggml's expression), and acc / S is written.
 * The result depends on nth, as llama.cpp's does on its thread count.
 */
static void flash_attn_split_kv(const struct kiln_compute_params * params, const struct kiln_tensor * q,
                                const struct kiln_tensor * k, const struct kiln_tensor * v,
                                const struct kiln_tensor * mask, struct kiln_tensor * dst,
                                float scale, float softcap, float max_bias) {
    const int ith = params->ith, nth = params->nth;
    const int64_t DK = k->ne[0], DV = v->ne[0], n_kv = k->ne[1], nh = q->ne[2];
    const int64_t per_thread = work_floats(DK, DV), psize = 2 + DV;
    float * work = (float *) params->wdata + per_thread * ith;
    float * partials = (float *) params->wdata + per_thread * nth; /* [head][chunk][M, S, acc] */
    const int64_t chunk = (n_kv + nth - 1) / nth;
    const int64_t ic0 = chunk * ith, ic1 = KILN_MIN(ic0 + chunk, n_kv);
    for (int64_t h = 0; h < nh; h++) {
        float * p = partials + (h * nth + ith) * psize;
        if (ic0 >= n_kv) { p[0] = -INFINITY; p[1] = 0.0f; continue; }
        const struct fa_row_state st = flash_attn_row(q, k, v, mask, 0, h, 0, ic0, ic1, scale, softcap, max_bias, work);
        p[0] = st.M;
        p[1] = st.S;
        memcpy(p + 2, work, sizeof(float) * (size_t) DV);
    }
    kiln_barrier(params);
    for (int64_t h = ith; h < nh; h += nth) {
        float * acc = work;
        float M = -INFINITY, S = 0.0f;
        memset(acc, 0, sizeof(float) * (size_t) DV);
        for (int c = 0; c < nth; c++) {
            if (chunk * c >= n_kv) continue;
            const float * p = partials + (h * nth + c) * psize;
            if (p[1] == 0.0f) continue;
            const float Mn = fmaxf(M, p[0]);
            const float so = expf(M - Mn), sn = expf(p[0] - Mn);
            for (int64_t d = 0; d < DV; d++) acc[d] = fmaf(acc[d], so, p[2 + d] * sn);
            S = fmaf(S, so, p[1] * sn);
            M = Mn;
        }
        float * out = (float *) kiln_row_ptr(dst, h, 0, 0);
        if (S != 0.0f) {
            const float S_inv = 1.0f / S;
            for (int64_t d = 0; d < DV; d++) out[d] = acc[d] * S_inv;
        } else {
            memcpy(out, acc, sizeof(float) * (size_t) DV);
        }
    }
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
    const int64_t DK = k->ne[0], DV = v->ne[0];
    const int64_t nq1 = q->ne[1], nq2 = q->ne[2], nq3 = q->ne[3];
    const int64_t rk2 = nq2 / k->ne[2], rk3 = nq3 / k->ne[3];

    float scale = kiln_get_op_params_f32(dst, 0);
    const float max_bias = kiln_get_op_params_f32(dst, 1);
    const float softcap = kiln_get_op_params_f32(dst, 2);
    if (softcap != 0.0f) scale /= softcap;

    if (kiln_flash_attn_split_kv(dst)) {
        flash_attn_split_kv(params, q, k, v, mask, dst, scale, softcap, max_bias);
        return KILN_STATUS_SUCCESS;
    }
    float * work = (float *) params->wdata + work_floats(DK, DV) * params->ith;
    const bool f32_or_f16 = k->type == KILN_TYPE_F32 || k->type == KILN_TYPE_F16;

    int64_t ir0, ir1;
    kiln_split_rows(nq1 * nq2 * nq3, params->ith, params->nth, &ir0, &ir1);
    if (f32_or_f16 && k->type == v->type && nq1 >= Q_TILE && DV % FA_F32_EPR == 0) {
        flash_attn_tiled(q, k, v, mask, dst, ir0, ir1, scale, softcap, max_bias, work);
        return KILN_STATUS_SUCCESS;
    }
    if (k->type == KILN_TYPE_F16 && v->type == KILN_TYPE_F16 && kiln_kernels()->f16val_mad) {
        /* tiles of up to FA_TILE consecutive rows that share a K/V head */
#define KV_HEAD(r) (((r) / nq1) % nq2 / rk2 + ((r) / (nq1 * nq2)) / rk3 * k->ne[2])
        for (int64_t ir = ir0; ir < ir1;) {
            int64_t end = ir + 1;
            while (end < ir1 && end - ir < FA_TILE && KV_HEAD(end) == KV_HEAD(ir)) end++;
            flash_attn_tile_f16val(q, k, v, mask, dst, ir, end, scale, softcap, max_bias, work);
            ir = end;
        }
#undef KV_HEAD
        return KILN_STATUS_SUCCESS;
    }
    for (int64_t ir = ir0; ir < ir1; ir++) {
        const int64_t iq3 = ir / (nq2 * nq1);
        const int64_t iq2 = (ir - iq3 * nq2 * nq1) / nq1;
        const int64_t iq1 = ir - iq3 * nq2 * nq1 - iq2 * nq1;
        const struct fa_row_state st = flash_attn_row(q, k, v, mask, iq1, iq2, iq3, 0, k->ne[1], scale, softcap, max_bias, work);
        const float S_inv = st.S == 0.0f ? 0.0f : 1.0f / st.S;
        float * out = (float *) kiln_row_ptr(dst, iq2, iq1, iq3);
        for (int64_t d = 0; d < DV; d++) out[d] = work[d] * S_inv;
    }
    return KILN_STATUS_SUCCESS;
}

bool kiln_flash_attn_split_kv(const struct kiln_tensor * dst) {
    const struct kiln_tensor * q = dst->src[0], * k = dst->src[1], * v = dst->src[2];
    return q->ne[1] == 1 && q->ne[3] == 1 && k->type == v->type &&
           (k->type == KILN_TYPE_F32 || k->type == KILN_TYPE_F16) && k->ne[1] >= SPLIT_KV_MIN;
}
