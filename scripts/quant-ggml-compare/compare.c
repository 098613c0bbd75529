/* compare.c — developer check (not CI): kiln quantizers / dequantizers against
 * a real libggml-base.so (ggml_quantize_chunk, quantize_row_*_ref, to_float)
 * byte for byte, for every GGUF block type, 4 data distributions, with and
 * without an importance matrix. See run.sh. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "kiln.h"
#include "quants.h"

struct gtraits { const char * name; int64_t bs; int64_t bsi; size_t ts; bool q; void (*to_float)(const void *, float *, int64_t); void (*from_ref)(const float *, void *, int64_t); };
typedef const struct gtraits * (*gtt_fn)(int);
typedef size_t (*gqc_fn)(int, const float *, void *, int64_t, int64_t, int64_t, const float *);
typedef void (*gqi_fn)(int);

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static float runi(void) { return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1; }

int main(void) {
    void * h = dlopen(getenv("GGML_BASE_SO") ? getenv("GGML_BASE_SO") : "libggml-base.so", RTLD_NOW);
    if (!h) { printf("dlopen: %s\n", dlerror()); return 1; }
    gtt_fn gtt = (gtt_fn) dlsym(h, "ggml_get_type_traits");
    gqc_fn gqc = (gqc_fn) dlsym(h, "ggml_quantize_chunk");
    gqi_fn gqi = (gqi_fn) dlsym(h, "ggml_quantize_init");
    const int types[] = {2,3,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,29,34,35};
    const int64_t npr = 1024, nr = 8, n = npr * nr;
    float * x = malloc(n * 4), * im = malloc(npr * 4), * ya = malloc(n * 4), * yb = malloc(n * 4);
    uint8_t * a = malloc(n * 4), * b = malloc(n * 4);
    int fails = 0;
    for (int dist = 0; dist < 4; dist++) {
        for (int64_t i = 0; i < n; i++) {
            float v = runi();
            if (dist == 1) v = v * v * v * 3;                 /* heavy tails */
            if (dist == 2) v = (i % 37 == 0) ? 20 * v : 0.01f * v; /* outliers */
            if (dist == 3) v = (float)((int)(v * 8)) / 4;      /* few distinct values, ties */
            x[i] = v;
        }
        for (int64_t i = 0; i < npr; i++) im[i] = 0.1f + fabsf(runi()) * 3;
        for (size_t k = 0; k < sizeof(types)/sizeof(types[0]); k++) {
            const int t = types[k];
            const struct gtraits * g = gtt(t);
            const struct kiln_type_traits * kt = kiln_get_type_traits((enum kiln_type) t);
            size_t rsz = kiln_row_size((enum kiln_type) t, npr);
            /* reference row quantizer */
            if (g->from_ref && kt->from_float_ref) {
                memset(a, 0, n*4); memset(b, 0, n*4);
                g->from_ref(x, a, n); kt->from_float_ref(x, b, n);
                int bad = memcmp(a, b, rsz * nr) != 0;
                if (t == 15) { /* q8_K: bsums garbage when zero block; compare d+qs */ bad = 0; for (int64_t i=0;i<n/256;i++) bad |= memcmp(a+i*292, b+i*292, 260) != 0; }
                if (bad) { fails++; size_t off=0; while (a[off]==b[off]) off++; printf("REF  %-8s dist %d differs at byte %zu (block %zu)\n", g->name, dist, off, off / g->ts); }
            } else if (g->from_ref || kt->from_float_ref) printf("note %-8s ref: ggml %p kiln %p\n", g->name, (void*)g->from_ref, (void*)kt->from_float_ref);
            /* chunk, without and with imatrix */
            for (int wi = 0; wi < 2; wi++) {
                if (!kt->from_float_ref) continue;
                if (t == 9 || t == 15) continue;
                gqi(t);
                memset(a, 0, n*4); memset(b, 0, n*4);
                size_t ga = gqc(t, x, a, 0, nr, npr, wi ? im : NULL);
                size_t kb = kiln_quantize_chunk((enum kiln_type) t, x, b, 0, nr, npr, wi ? im : NULL);
                if (ga != kb || memcmp(a, b, ga) != 0) { fails++; size_t off=0; while (off < ga && a[off]==b[off]) off++; printf("CHUNK%s %-8s dist %d differs at byte %zu (block %zu) sizes %zu %zu\n", wi?"+im":"", g->name, dist, off, off / g->ts, ga, kb); }
            }
            /* dequantize random bytes with sane scales: compare via ggml's own bytes */
            if (g->to_float && kt->to_float) {
                if (kt->from_float_ref) { g->from_ref ? g->from_ref(x, a, n) : (void)0; }
                else { gqi(t); gqc(t, x, a, 0, nr, npr, im); }
                g->to_float(a, ya, n); kt->to_float(a, yb, n);
                if (memcmp(ya, yb, n * 4) != 0) { fails++; int64_t i=0; while (ya[i]==yb[i]) i++; printf("DEQ  %-8s dist %d differs at %lld: %g vs %g\n", g->name, dist, (long long)i, ya[i], yb[i]); }
            }
        }
    }
    printf("%d mismatches\n", fails);
    return fails != 0;
}
