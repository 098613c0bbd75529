/* rope.c — developer check (not CI): kiln_rope_ext against a real
 * libggml-cpu (llama.cpp's prebuilt CPU build from @node-llama-cpp), bit for
 * bit, for the llama (normal) and NeoX orderings. See run.sh. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kiln.h"

struct gparams { size_t mem_size; void * mem_buffer; bool no_alloc; };
typedef void * (*init_fn)(struct gparams);
typedef void * (*nt3_fn)(void *, int, int64_t, int64_t, int64_t);
typedef void * (*nt1_fn)(void *, int, int64_t);
typedef void * (*rope_fn)(void *, void *, void *, void *, int, int, int, float, float, float, float, float, float);
typedef void * (*ng_fn)(void *);
typedef void (*bfe_fn)(void *, void *);
typedef int (*gc_fn)(void *, void *, int);
typedef void * (*gd_fn)(void *);

static uint64_t rs = 88172645463325252ull;
static float runi(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (float) ((rs >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }

int main(int argc, char ** argv) {
    const char * dir = argc > 1 ? argv[1] : ".";
    char p[4096];
    snprintf(p, sizeof p, "%s/libggml-base.so", dir);
    void * hb = dlopen(p, RTLD_NOW | RTLD_GLOBAL);
    snprintf(p, sizeof p, "%s/libggml-cpu-%s.so", dir, getenv("GGML_CPU") ? getenv("GGML_CPU") : "haswell");
    void * hc = hb ? dlopen(p, RTLD_NOW | RTLD_GLOBAL) : NULL;
    if (!hb || !hc) { printf("dlopen: %s\n", dlerror()); return 1; }
    init_fn g_init = (init_fn) dlsym(hb, "ggml_init");
    nt3_fn g_nt3 = (nt3_fn) dlsym(hb, "ggml_new_tensor_3d");
    nt1_fn g_nt1 = (nt1_fn) dlsym(hb, "ggml_new_tensor_1d");
    rope_fn g_rope = (rope_fn) dlsym(hb, "ggml_rope_ext");
    ng_fn g_ng = (ng_fn) dlsym(hb, "ggml_new_graph");
    bfe_fn g_bfe = (bfe_fn) dlsym(hb, "ggml_build_forward_expand");
    gd_fn g_gd = (gd_fn) dlsym(hb, "ggml_get_data");
    gc_fn g_gc = (gc_fn) dlsym(hc, "ggml_graph_compute_with_ctx");
    const int64_t hd = 8, nh = 8, nt = 64;
    int fails = 0;
    for (int mode = 0; mode <= 2; mode += 2) {
        void * gctx = g_init((struct gparams) { 64 << 20, NULL, false });
        struct kiln_context * kctx = kiln_init((struct kiln_init_params) { 64 << 20, NULL, false });
        void * ga = g_nt3(gctx, 0, hd, nh, nt), * gp = g_nt1(gctx, 26 /* I32 */, nt);
        struct kiln_tensor * ka = kiln_new_tensor_3d(kctx, KILN_TYPE_F32, hd, nh, nt);
        struct kiln_tensor * kp = kiln_new_tensor_1d(kctx, KILN_TYPE_I32, nt);
        float * a = g_gd(ga);
        int32_t * pos = g_gd(gp);
        for (int64_t i = 0; i < hd * nh * nt; i++) a[i] = runi() * 3;
        for (int64_t i = 0; i < nt; i++) pos[i] = (int32_t) i;
        memcpy(ka->data, a, sizeof(float) * hd * nh * nt);
        memcpy(kp->data, pos, sizeof(int32_t) * nt);
        void * gr = g_rope(gctx, ga, gp, NULL, (int) hd, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        void * gg = g_ng(gctx);
        g_bfe(gg, gr);
        g_gc(gctx, gg, 1);
        struct kiln_tensor * kr = kiln_rope_ext(kctx, ka, kp, NULL, (int) hd, mode, 0, 10000.0f, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
        struct kiln_cgraph * kg = kiln_new_graph(kctx);
        kiln_build_forward_expand(kg, kr);
        kiln_graph_compute_with_ctx(kctx, kg, 1);
        const float * x = g_gd(gr), * y = kr->data;
        int bad = 0;
        for (int64_t i = 0; i < hd * nh * nt; i++) {
            if (memcmp(&x[i], &y[i], 4) != 0) {
                if (bad < 5) printf("mode %d [%lld] (pos %lld): ggml %.9g kiln %.9g\n", mode, (long long) i, (long long) (i / (hd * nh)), x[i], y[i]);
                bad++;
            }
        }
        printf("rope mode %d: %d of %lld values differ\n", mode, bad, (long long) (hd * nh * nt));
        fails += bad;
        kiln_free(kctx);
    }
    return fails ? 1 : 0;
}
