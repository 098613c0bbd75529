/* encoder.c — developer check (not CI): the ops of the bert encoder graph
 * (src/models/bert.c), Kiln against a real libggml-cpu (llama.cpp's prebuilt
 * CPU build shipped by @node-llama-cpp), bit for bit, 1 thread, at
 * all-MiniLM-L6's shapes (384 wide, 12 heads of 32, FFN 1536) for several
 * token counts. See run.sh. Each case builds the same op in both libraries
 * over the same bytes and counts differing values. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "kiln.h"

/* src/models/bert.c's GELU (ggml's f16 table), from libkiln */
void decoder_init_gelu_table(void);
void decoder_gelu_f16_table(float * y, const float * x, int64_t n);

struct gparams { size_t mem_size; void * mem_buffer; bool no_alloc; };
typedef void * T;
static void * hb, * hc;
#define G(name) ((void * (*)()) dlsym(hb, #name))

static T (*g_init)(struct gparams);
static T (*g_nt)(T, int, int, const int64_t *);
static T (*g_gd)(T);
static T (*g_ng)(T);
static void (*g_bfe)(T, T);
static int (*g_gc)(T, T, int);
static void (*g_free)(T);

static uint64_t rs = 88172645463325252ull;
static float runi(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (float) ((rs >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }

struct pair { T g; struct kiln_tensor * k; };
static T gctx; static struct kiln_context * kctx;

static struct pair mk(int t, int nd, int64_t n0, int64_t n1, int64_t n2, int64_t n3, float scale) {
    const int64_t ne[4] = { n0, n1, n2, n3 };
    struct pair p = { g_nt(gctx, t, nd, ne), kiln_new_tensor(kctx, (enum kiln_type) t, nd, ne) };
    const int64_t n = n0 * n1 * n2 * n3;
    float * f = malloc(sizeof(float) * (size_t) n);
    for (int64_t i = 0; i < n; i++) f[i] = runi() * scale;
    if (t == KILN_TYPE_F32) memcpy(p.k->data, f, sizeof(float) * (size_t) n);
    else kiln_quantize_chunk((enum kiln_type) t, f, p.k->data, 0, n / n0, n0, NULL);
    free(f);
    memcpy(g_gd(p.g), p.k->data, kiln_nbytes(p.k));
    return p;
}

static int compare(const char * name, struct pair out) {
    T gg = g_ng(gctx);
    g_bfe(gg, out.g);
    g_gc(gctx, gg, 1);
    struct kiln_cgraph * kg = kiln_new_graph(kctx);
    kiln_build_forward_expand(kg, out.k);
    if (kiln_graph_compute_with_ctx(kctx, kg, 1) != KILN_STATUS_SUCCESS) { printf("%-44s kiln failed: %s\n", name, kiln_last_error()); return 1; }
    const int64_t n = kiln_nelements(out.k);
    const float * a = g_gd(out.g), * b = out.k->data;
    int64_t bad = 0, first = -1;
    double maxrel = 0;
    for (int64_t i = 0; i < n; i++) {
        if (memcmp(a + i, b + i, 4)) {
            if (first < 0) first = i;
            bad++;
            const double r = fabs((double) a[i] - b[i]) / (fabs(a[i]) > 1e-30 ? fabs(a[i]) : 1e-30);
            if (r > maxrel) maxrel = r;
        }
    }
    printf("%-44s %6lld of %6lld differ", name, (long long) bad, (long long) n);
    if (bad) printf("  max rel %.2e  e.g. [%lld] ggml %.9g kiln %.9g", maxrel, (long long) first, a[first], b[first]);
    printf("\n");
    return bad != 0;
}

static void fresh(void) {
    if (gctx) { g_free(gctx); kiln_free(kctx); }
    gctx = g_init((struct gparams) { 512 << 20, NULL, false });
    kctx = kiln_init((struct kiln_init_params) { 512 << 20, NULL, false });
}

static void gelu_rows(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * ud) {
    (void) ud;
    for (int64_t r = ith; r < kiln_nrows(a); r += nth) {
        decoder_gelu_f16_table((float *) ((char *) dst->data + r * dst->nb[1]), (const float *) ((const char *) a->data + r * a->nb[1]), a->ne[0]);
    }
}

int main(int argc, char ** argv) {
    const char * dir = argc > 1 ? argv[1] : ".";
    char p[4096];
    snprintf(p, sizeof p, "%s/libggml-base.so", dir);
    hb = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    snprintf(p, sizeof p, "%s/libggml-cpu-%s.so", dir, getenv("GGML_CPU") ? getenv("GGML_CPU") : "haswell");
    hc = hb ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!hb || !hc) { printf("dlopen: %s\n", dlerror()); return 1; }
    g_init = (void *) G(ggml_init); g_nt = (void *) G(ggml_new_tensor); g_gd = (void *) G(ggml_get_data);
    g_ng = (void *) G(ggml_new_graph); g_bfe = (void *) G(ggml_build_forward_expand); g_free = (void *) G(ggml_free);
    g_gc = (void *) dlsym(hc, "ggml_graph_compute_with_ctx");
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
