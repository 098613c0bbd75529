/* encoder.c — developer check (not CI): the ops of the bert encoder graph
 * (src/models/bert.c), Kiln against a real libggml-cpu (llama.cpp's prebuilt
 * CPU build shipped by @node-llama-cpp), bit for bit, 1 thread, at
 * all-MiniLM-L6's shapes (384 wide, 12 heads of 32, FFN 1536) for several
 * token counts. See run.sh. Each case builds the same op in both libraries
 * over the same bytes and counts differing values. */
#include "harness.h"

/* src/models/bert.c's GELU (ggml's f16 table), from libkiln */
void decoder_init_gelu_table(void);
void decoder_gelu_f16_table(float * y, const float * x, int64_t n);

static void gelu_rows(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * ud) {
    (void) ud;
    for (int64_t r = ith; r < kiln_nrows(a); r += nth) {
        decoder_gelu_f16_table((float *) ((char *) dst->data + r * dst->nb[1]), (const float *) ((const char *) a->data + r * a->nb[1]), a->ne[0]);
    }
}

int main(int argc, char ** argv) {
    if (load_ggml(argc > 1 ? argv[1] : ".")) return 1;
    T (*g_mm)(T, T, T) = (void *) G(ggml_mul_mat);
    T (*g_norm)(T, T, float) = (void *) G(ggml_norm);
    T (*g_gelu)(T, T) = (void *) G(ggml_gelu);
    T (*g_add)(T, T, T) = (void *) G(ggml_add);
    T (*g_mul)(T, T, T) = (void *) G(ggml_mul);
    T (*g_smx)(T, T, T, float, float) = (void *) G(ggml_soft_max_ext);
    T (*g_perm)(T, T, int, int, int, int) = (void *) G(ggml_permute);
    T (*g_cont)(T, T) = (void *) G(ggml_cont);
    T (*g_tr)(T, T) = (void *) G(ggml_transpose);
    decoder_init_gelu_table();
    const int64_t E = getenv("E") ? atoi(getenv("E")) : 384, F = 4 * E, HD = 32, NH = E / HD;
    const int64_t toks[] = { 4, 13, 16, 29, 64 };
    int fails = 0;
    char name[128];
    for (int ti = 0; ti < 5; ti++) {
        const int64_t n = toks[ti];
        fresh();
        struct pair x = mk(KILN_TYPE_F32, 2, E, n, 1, 1, 3), w = mk(KILN_TYPE_F32, 1, E, 1, 1, 1, 1), b = mk(KILN_TYPE_F32, 1, E, 1, 1, 1, 1);
        snprintf(name, sizeof name, "norm %lld x %lld", (long long) E, (long long) n);
        fails += compare(name, (struct pair) { g_norm(gctx, x.g, 1e-12f), kiln_norm(kctx, x.k, 1e-12f) });
        snprintf(name, sizeof name, "norm * w + b %lld x %lld", (long long) E, (long long) n);
        fails += compare(name, (struct pair) { g_add(gctx, g_mul(gctx, g_norm(gctx, x.g, 1e-12f), w.g), b.g),
                                               kiln_add(kctx, kiln_mul(kctx, kiln_norm(kctx, x.k, 1e-12f), w.k), b.k) });
        fresh();
        struct pair u = mk(KILN_TYPE_F32, 2, F, n, 1, 1, 4);
        snprintf(name, sizeof name, "gelu (f16 table) %lld x %lld", (long long) F, (long long) n);
        fails += compare(name, (struct pair) { g_gelu(gctx, u.g), kiln_map_custom1(kctx, u.k, gelu_rows, 1, NULL) });
        for (int t = 0; t < 2; t++) {
            const int wt = t ? KILN_TYPE_Q8_0 : KILN_TYPE_F32;
            fresh();
            struct pair wq = mk(wt, 2, E, E, 1, 1, 0.1f), xq = mk(KILN_TYPE_F32, 2, E, n, 1, 1, 2);
            snprintf(name, sizeof name, "mul_mat %s %lldx%lld x %lld", kiln_type_name((enum kiln_type) wt), (long long) E, (long long) E, (long long) n);
            fails += compare(name, (struct pair) { g_mm(gctx, wq.g, xq.g), kiln_mul_mat(kctx, wq.k, xq.k) });
            fresh();
            struct pair wd = mk(wt, 2, F, E, 1, 1, 0.05f), xd = mk(KILN_TYPE_F32, 2, F, n, 1, 1, 2);
            snprintf(name, sizeof name, "mul_mat %s %lldx%lld x %lld", kiln_type_name((enum kiln_type) wt), (long long) F, (long long) E, (long long) n);
            fails += compare(name, (struct pair) { g_mm(gctx, wd.g, xd.g), kiln_mul_mat(kctx, wd.k, xd.k) });
        }
        /* attention as bert.c and llama.cpp's build_attn_mha without flash attention */
        fresh();
        struct pair q = mk(KILN_TYPE_F32, 3, HD, NH, n, 1, 2), k = mk(KILN_TYPE_F32, 3, HD, NH, n, 1, 2), v = mk(KILN_TYPE_F32, 3, HD, NH, n, 1, 2);
        T gkq = g_mm(gctx, g_perm(gctx, k.g, 0, 2, 1, 3), g_perm(gctx, q.g, 0, 2, 1, 3));
        struct kiln_tensor * kkq = kiln_mul_mat(kctx, kiln_permute(kctx, k.k, 0, 2, 1, 3), kiln_permute(kctx, q.k, 0, 2, 1, 3));
        snprintf(name, sizeof name, "kq = K^T Q (permuted) hd %lld, %lld tokens", (long long) HD, (long long) n);
        fails += compare(name, (struct pair) { gkq, kkq });
        struct pair m = mk(KILN_TYPE_F32, 2, n, n, 1, 1, 0);
        T gsm = g_smx(gctx, gkq, m.g, 1.0f / sqrtf((float) HD), 0.0f);
        struct kiln_tensor * ksm = kiln_soft_max_ext(kctx, kkq, NULL, 1.0f / sqrtf((float) HD), 0.0f);
        snprintf(name, sizeof name, "soft_max_ext(kq, 0 mask / none)");
        fails += compare(name, (struct pair) { gsm, ksm });
        T gvt = g_cont(gctx, g_tr(gctx, g_perm(gctx, v.g, 0, 2, 1, 3)));
        struct kiln_tensor * kvt = kiln_cont(kctx, kiln_transpose(kctx, kiln_permute(kctx, v.k, 0, 2, 1, 3)));
        /* the same softmax output in both (the kqv product alone) */
        struct pair s = mk(KILN_TYPE_F32, 3, n, n, NH, 1, 1);
        snprintf(name, sizeof name, "kqv = V^T softmax, %lld tokens", (long long) n);
        fails += compare(name, (struct pair) { g_mm(gctx, gvt, s.g), kiln_mul_mat(kctx, kvt, s.k) });
    }
    printf("%d cases differ\n", fails);
    return fails ? 1 : 0;
}
