/* ops.c — developer check (not CI): ops of the llama graph, Kiln against a
 * real libggml-cpu (llama.cpp's prebuilt CPU build shipped by
 * @node-llama-cpp), bit for bit, 1 thread. See run.sh. Each case builds the
 * same op in both libraries over the same bytes and counts differing values.
 * Env: MMK=K (mul_mat inner size, default 192), HD=D (attention head size,
 * default 8). */
#include "harness.h"

int main(int argc, char ** argv) {
    if (load_ggml(argc > 1 ? argv[1] : ".")) return 1;
    T (*g_mm)(T, T, T) = (void *) G(ggml_mul_mat);
    T (*g_rms)(T, T, float) = (void *) G(ggml_rms_norm);
    T (*g_silu)(T, T) = (void *) G(ggml_silu);
    T (*g_swiglu)(T, T, T) = (void *) G(ggml_swiglu_split);
    T (*g_mul)(T, T, T) = (void *) G(ggml_mul);
    T (*g_add)(T, T, T) = (void *) G(ggml_add);
    T (*g_smx)(T, T, T, float, float) = (void *) G(ggml_soft_max_ext);
    T (*g_gr)(T, T, T) = (void *) G(ggml_get_rows);
    T (*g_cpy)(T, T, T) = (void *) G(ggml_cpy);
    T (*g_fa)(T, T, T, T, T, float, float, float) = (void *) G(ggml_flash_attn_ext);
    void (*g_fap)(T, int) = (void *) G(ggml_flash_attn_ext_set_prec);
    int fails = 0;
    char name[128];

    const int mtypes[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1, KILN_TYPE_IQ4_NL };
    const int64_t ncols[] = { 1, 2, 5, 29 };
    for (size_t ti = 0; ti < sizeof mtypes / sizeof mtypes[0]; ti++) {
        for (int ci = 0; ci < 4; ci++) {
            fresh();
            const int64_t K = getenv("MMK") ? atoi(getenv("MMK")) : 192;
            struct pair w = mk(mtypes[ti], 2, K, 64, 1, 1, 0.5f), x = mk(KILN_TYPE_F32, 2, K, ncols[ci], 1, 1, 2);
            snprintf(name, sizeof name, "mul_mat %s x %lld", kiln_type_name((enum kiln_type) mtypes[ti]), (long long) ncols[ci]);
            fails += compare(name, (struct pair) { g_mm(gctx, w.g, x.g), kiln_mul_mat(kctx, w.k, x.k) });
        }
    }
    for (int ci = 0; ci < 4; ci++) {
        fresh();
        struct pair x = mk(KILN_TYPE_F32, 2, 64, ncols[ci], 1, 1, 3);
        snprintf(name, sizeof name, "rms_norm x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_rms(gctx, x.g, 1e-5f), kiln_rms_norm(kctx, x.k, 1e-5f) });
        fresh();
        struct pair a = mk(KILN_TYPE_F32, 2, 192, ncols[ci], 1, 1, 6), b = mk(KILN_TYPE_F32, 2, 192, ncols[ci], 1, 1, 3);
        snprintf(name, sizeof name, "silu x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_silu(gctx, a.g), kiln_silu(kctx, a.k) });
        snprintf(name, sizeof name, "swiglu_split vs silu*mul x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_swiglu(gctx, a.g, b.g), kiln_mul(kctx, kiln_silu(kctx, a.k), b.k) });
        snprintf(name, sizeof name, "mul x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_mul(gctx, a.g, b.g), kiln_mul(kctx, a.k, b.k) });
        snprintf(name, sizeof name, "add x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_add(gctx, a.g, b.g), kiln_add(kctx, a.k, b.k) });
        fresh();
        struct pair s = mk(KILN_TYPE_F32, 3, 32, ncols[ci], 8, 1, 4), m = mk(KILN_TYPE_F32, 2, 32, ncols[ci], 1, 1, 0);
        snprintf(name, sizeof name, "soft_max_ext x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_smx(gctx, s.g, m.g, 0.35f, 0.0f), kiln_soft_max_ext(kctx, s.k, m.k, 0.35f, 0.0f) });
        fresh();
        struct pair c = mk(KILN_TYPE_F32, 2, 256, ncols[ci], 1, 1, 3), d = mk(KILN_TYPE_F16, 2, 256, ncols[ci], 1, 1, 1);
        snprintf(name, sizeof name, "cpy f32->f16 x %lld", (long long) ncols[ci]);
        fails += compare(name, (struct pair) { g_cpy(gctx, c.g, d.g), kiln_cpy(kctx, c.k, d.k) });
    }
    for (size_t ti = 0; ti < sizeof mtypes / sizeof mtypes[0]; ti++) {
        fresh();
        struct pair e = mk(mtypes[ti], 2, 64, 512, 1, 1, 0.5f), ids = mk(KILN_TYPE_I32, 1, 7, 1, 1, 1, 0);
        snprintf(name, sizeof name, "get_rows %s", kiln_type_name((enum kiln_type) mtypes[ti]));
        fails += compare(name, (struct pair) { g_gr(gctx, e.g, ids.g), kiln_get_rows(kctx, e.k, ids.k) });
    }
    /* flash attention: q [hd, nq, nh], k/v [hd, nkv, nkvh] f16, mask [nkv, nq_pad] f16 */
    const int64_t nqs[] = { 1, 2, 5, 29 };
    for (int kt = 0; kt < 2; kt++) {
        for (int qi = 0; qi < 4; qi++) {
            fresh();
            const int64_t hd = getenv("HD") ? atoi(getenv("HD")) : 8, nq = nqs[qi], nkv = 32, nh = 8, nkvh = 4;
            const int kvt = kt ? KILN_TYPE_F32 : KILN_TYPE_F16;
            struct pair q = mk(KILN_TYPE_F32, 3, hd, nq, nh, 1, 2), k = mk(kvt, 3, hd, nkv, nkvh, 1, 2), v = mk(kvt, 3, hd, nkv, nkvh, 1, 2);
            const int64_t npad = (nq + 63) / 64 * 64;
            struct pair m = mk(KILN_TYPE_F16, 2, nkv, npad, 1, 1, 0);
            /* causal-ish mask: -inf past position nkv - nq + row */
            kiln_fp16_t * mk16 = m.k->data;
            for (int64_t r = 0; r < npad; r++) for (int64_t j = 0; j < nkv; j++)
                mk16[r * nkv + j] = kiln_fp32_to_fp16(j <= nkv - nq + r ? 0.0f : -INFINITY);
            memcpy(g_gd(m.g), m.k->data, kiln_nbytes(m.k));
            T ga = g_fa(gctx, q.g, k.g, v.g, m.g, 0.35355f, 0.0f, 0.0f);
            g_fap(ga, 10 /* GGML_PREC_F32 */);
            struct kiln_tensor * ka = kiln_flash_attn_ext(kctx, q.k, k.k, v.k, m.k, 0.35355f, 0.0f, 0.0f);
            kiln_flash_attn_ext_set_prec(ka, KILN_PREC_F32);
            snprintf(name, sizeof name, "flash_attn_ext %s kv, %lld q", kt ? "f32" : "f16", (long long) nq);
            fails += compare(name, (struct pair) { ga, ka });
        }
    }
    /* flash attention's other two paths: tiled prompts (>= 64 q rows; ragged
     * tiles, several KV steps, softcap, no mask) and the split decode (1 q
     * row, >= 512 cached positions) at 1-4 threads */
    struct { int64_t nq, nkv; float softcap; int use_mask, nth; } fac[] = {
        { 64, 32, 0, 1, 1 }, { 100, 200, 0, 1, 1 }, { 150, 150, 0, 1, 2 }, { 150, 300, 30, 1, 3 },
        { 70, 130, 20, 0, 1 }, { 65, 64, 0, 0, 4 },
        { 1, 512, 0, 1, 1 }, { 1, 600, 0, 1, 2 }, { 1, 777, 0, 1, 3 }, { 1, 1030, 25, 1, 4 }, { 1, 520, 0, 0, 4 },
    };
    for (int kt = 0; kt < 2; kt++) {
        for (size_t ci = 0; ci < sizeof fac / sizeof fac[0]; ci++) {
            fresh();
            const int64_t hd = getenv("HD") ? atoi(getenv("HD")) : 8, nq = fac[ci].nq, nkv = fac[ci].nkv, nh = 8, nkvh = 4;
            const int kvt = kt ? KILN_TYPE_F32 : KILN_TYPE_F16;
            struct pair q = mk(KILN_TYPE_F32, 3, hd, nq, nh, 1, 2), k = mk(kvt, 3, hd, nkv, nkvh, 1, 2), v = mk(kvt, 3, hd, nkv, nkvh, 1, 2);
            const int64_t npad = (nq + 63) / 64 * 64;
            struct pair m = mk(KILN_TYPE_F16, 2, nkv, npad, 1, 1, 0);
            kiln_fp16_t * mk16 = m.k->data;
            for (int64_t r = 0; r < npad; r++) for (int64_t j = 0; j < nkv; j++)
                mk16[r * nkv + j] = kiln_fp32_to_fp16(j <= nkv - nq + r - 3 * (nq == 1) ? 0.0f : -INFINITY);
            memcpy(g_gd(m.g), m.k->data, kiln_nbytes(m.k));
            T gm = fac[ci].use_mask ? m.g : NULL;
            struct kiln_tensor * km = fac[ci].use_mask ? m.k : NULL;
            T ga = g_fa(gctx, q.g, k.g, v.g, gm, 0.35355f, 0.0f, fac[ci].softcap);
            g_fap(ga, 10 /* GGML_PREC_F32 */);
            struct kiln_tensor * ka = kiln_flash_attn_ext(kctx, q.k, k.k, v.k, km, 0.35355f, 0.0f, fac[ci].softcap);
            kiln_flash_attn_ext_set_prec(ka, KILN_PREC_F32);
            snprintf(name, sizeof name, "fa %s kv, %lld q x %lld kv%s%s, %d thr", kt ? "f32" : "f16", (long long) nq,
                     (long long) nkv, fac[ci].softcap != 0 ? " softcap" : "", fac[ci].use_mask ? "" : " nomask", fac[ci].nth);
            cmp_threads = fac[ci].nth;
            fails += compare(name, (struct pair) { ga, ka });
            cmp_threads = 1;
        }
    }
    printf("%d cases differ\n", fails);
    return fails ? 1 : 0;
}
