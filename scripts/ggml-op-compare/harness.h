/* harness.h — what ops.c and encoder.c share: llama.cpp's libggml loaded
 * with dlopen, tensors holding the same bytes in ggml and Kiln, and a
 * value-for-value comparison of one op's output (1 thread). */
#ifndef KILN_GGML_OP_COMPARE_HARNESS_H
#define KILN_GGML_OP_COMPARE_HARNESS_H
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "kiln.h"

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

/* a tensor of type t holding the same bytes in both: f32 data (scaled
 * uniform), converted or quantized by Kiln (formats are byte-identical) */
static struct pair mk(int t, int nd, int64_t n0, int64_t n1, int64_t n2, int64_t n3, float scale) {
    const int64_t ne[4] = { n0, n1, n2, n3 };
    struct pair p = { g_nt(gctx, t, nd, ne), kiln_new_tensor(kctx, (enum kiln_type) t, nd, ne) };
    const int64_t n = n0 * n1 * n2 * n3;
    if (t == KILN_TYPE_I32) {
        for (int64_t i = 0; i < n; i++) ((int32_t *) p.k->data)[i] = (int32_t) i;
    } else {
        float * f = malloc(sizeof(float) * (size_t) n);
        for (int64_t i = 0; i < n; i++) f[i] = runi() * scale;
        if (t == KILN_TYPE_F32) memcpy(p.k->data, f, sizeof(float) * (size_t) n);
        else if (t == KILN_TYPE_F16) kiln_fp32_to_fp16_row(f, p.k->data, n);
        else kiln_quantize_chunk((enum kiln_type) t, f, p.k->data, 0, n / n0, n0, NULL);
        free(f);
    }
    memcpy(g_gd(p.g), p.k->data, kiln_nbytes(p.k));
    return p;
}

/* threads of both computations (flash attention's split decode depends on it) */
static int cmp_threads = 1;

static int compare(const char * name, struct pair out) {
    T gg = g_ng(gctx);
    g_bfe(gg, out.g);
    g_gc(gctx, gg, cmp_threads);
    struct kiln_cgraph * kg = kiln_new_graph(kctx);
    kiln_build_forward_expand(kg, out.k);
    if (kiln_graph_compute_with_ctx(kctx, kg, cmp_threads) != KILN_STATUS_SUCCESS) { printf("%-40s kiln failed: %s\n", name, kiln_last_error()); return 1; }
    const int64_t n = kiln_nelements(out.k);
    const bool f16 = out.k->type == KILN_TYPE_F16;
    const size_t es = f16 ? 2 : 4;
    const char * a = g_gd(out.g), * b = out.k->data;
    int64_t bad = 0, first = -1;
    for (int64_t i = 0; i < n; i++) if (memcmp(a + i * es, b + i * es, es)) { if (first < 0) first = i; bad++; }
    printf("%-40s %6lld of %6lld differ", name, (long long) bad, (long long) n);
    if (bad && !f16) printf("  e.g. [%lld] ggml %.9g kiln %.9g", (long long) first, ((const float *) a)[first], ((const float *) b)[first]);
    printf("\n");
    return bad != 0;
}

static void fresh(void) {
    if (gctx) { g_free(gctx); kiln_free(kctx); }
    gctx = g_init((struct gparams) { 256 << 20, NULL, false });
    kctx = kiln_init((struct kiln_init_params) { 256 << 20, NULL, false });
}

/* libggml-base.so and libggml-cpu-$GGML_CPU.so (haswell) from dir; 0 on success */
static int load_ggml(const char * dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s/libggml-base.so", dir);
    hb = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    snprintf(p, sizeof p, "%s/libggml-cpu-%s.so", dir, getenv("GGML_CPU") ? getenv("GGML_CPU") : "haswell");
    hc = hb ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!hb || !hc) { printf("dlopen: %s\n", dlerror()); return 1; }
    g_init = (void *) G(ggml_init); g_nt = (void *) G(ggml_new_tensor); g_gd = (void *) G(ggml_get_data);
    g_ng = (void *) G(ggml_new_graph); g_bfe = (void *) G(ggml_build_forward_expand); g_free = (void *) G(ggml_free);
    g_gc = (void *) dlsym(hc, "ggml_graph_compute_with_ctx");
    return 0;
}
#endif
