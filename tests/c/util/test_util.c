#include "test_util.h"

#include <stdarg.h>

int tu_passed = 0;
int tu_failed = 0;
const char * tu_case = "";

int tu_check(int ok, const char * file, int line, const char * fmt, ...) {
    if (ok) { tu_passed++; return 1; }
    tu_failed++;
    fprintf(stderr, "FAIL %s:%d [%s] ", file, line, tu_case);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return 0;
}

int tu_finish(void) {
    printf("%d passed, %d failed\n", tu_passed, tu_failed);
    return tu_failed == 0 && tu_passed > 0 ? 0 : 1;
}

static uint64_t tu_state = 0x9E3779B97F4A7C15ull;
void tu_seed(uint64_t seed) { tu_state = seed ? seed : 0x9E3779B97F4A7C15ull; }
uint64_t tu_rand_u64(void) {
    uint64_t x = tu_state;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return tu_state = x;
}
float tu_rand_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((tu_rand_u64() >> 11) * (1.0 / 9007199254740992.0));
}

static void * elem(const struct kiln_tensor * t, int64_t i) {
    int64_t i0, i1, i2, i3;
    kiln_unravel_index(t, i, &i0, &i1, &i2, &i3);
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

static double get_any(enum kiln_type type, const void * p) {
    switch (type) {
        case KILN_TYPE_F32:  return *(const float *) p;
        case KILN_TYPE_F16:  return kiln_fp16_to_fp32(*(const kiln_fp16_t *) p);
        case KILN_TYPE_BF16: return kiln_bf16_to_fp32(*(const kiln_bf16_t *) p);
        case KILN_TYPE_F64:  return *(const double *) p;
        case KILN_TYPE_I8:   return *(const int8_t *) p;
        case KILN_TYPE_I16:  return *(const int16_t *) p;
        case KILN_TYPE_I32:  return *(const int32_t *) p;
        case KILN_TYPE_I64:  return (double) *(const int64_t *) p;
        default: return NAN;
    }
}
static void set_any(enum kiln_type type, void * p, double v) {
    switch (type) {
        case KILN_TYPE_F32:  *(float *) p = (float) v; break;
        case KILN_TYPE_F16:  *(kiln_fp16_t *) p = kiln_fp32_to_fp16((float) v); break;
        case KILN_TYPE_BF16: *(kiln_bf16_t *) p = kiln_fp32_to_bf16((float) v); break;
        case KILN_TYPE_F64:  *(double *) p = v; break;
        case KILN_TYPE_I8:   *(int8_t *) p = (int8_t) lrint(v); break;
        case KILN_TYPE_I16:  *(int16_t *) p = (int16_t) lrint(v); break;
        case KILN_TYPE_I32:  *(int32_t *) p = (int32_t) lrint(v); break;
        case KILN_TYPE_I64:  *(int64_t *) p = (int64_t) llrint(v); break;
        default: break;
    }
}

void tu_fill_uniform(struct kiln_tensor * t, float lo, float hi) {
    const int64_t n = kiln_nelements(t);
    for (int64_t i = 0; i < n; i++) set_any(t->type, elem(t, i), tu_rand_uniform(lo, hi));
}

double * tu_to_f64(const struct kiln_tensor * t) {
    const int64_t n = kiln_nelements(t);
    double * v = (double *) malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = get_any(t->type, elem(t, i));
    return v;
}

double * tu_weights_f64(const struct kiln_tensor * t) {
    const int64_t ne0 = t->ne[0], nr = kiln_nrows(t);
    double * v = (double *) malloc(sizeof(double) * (size_t) (ne0 * nr > 0 ? ne0 * nr : 1));
    float * row = (float *) malloc(sizeof(float) * (size_t) (ne0 > 0 ? ne0 : 1));
    const struct kiln_type_traits * tr = kiln_get_type_traits(t->type);
    for (int64_t i = 0; i < nr; i++) {
        const char * src = (const char *) t->data + i * t->nb[1];
        if (t->type == KILN_TYPE_F32) memcpy(row, src, sizeof(float) * (size_t) ne0);
        else tr->to_float(src, row, ne0);
        for (int64_t j = 0; j < ne0; j++) v[i * ne0 + j] = row[j];
    }
    free(row);
    return v;
}

void tu_from_f64(struct kiln_tensor * t, const double * v) {
    const int64_t n = kiln_nelements(t);
    for (int64_t i = 0; i < n; i++) set_any(t->type, elem(t, i), v[i]);
}

double tu_nmse(const double * out, const double * ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        /* matching non-finite values (inf/-inf/nan in both) count as equal */
        if (!isfinite(ref[i]) || !isfinite(out[i])) {
            if (isnan(ref[i]) && isnan(out[i])) continue;
            if (ref[i] == out[i]) continue;
            return INFINITY;
        }
        const double d = out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (den == 0) return num == 0 ? 0 : num;
    return num / den;
}

double tu_max_abs_diff(const double * out, const double * ref, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(ref[i]) && isnan(out[i])) continue;
        if (ref[i] == out[i]) continue;
        const double d = fabs(out[i] - ref[i]);
        if (!(d <= m)) m = d; /* nan-aware */
    }
    return m;
}

enum kiln_status tu_compute(struct kiln_context * ctx, struct kiln_tensor * out, int n_threads) {
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    if (!g) return KILN_STATUS_ALLOC_FAILED;
    enum kiln_status st = kiln_build_forward_expand(g, out);
    if (st != KILN_STATUS_SUCCESS) return st;
    return kiln_graph_compute_with_ctx(ctx, g, n_threads);
}

struct kiln_context * tu_ctx(size_t mem_size) {
    struct kiln_init_params p = { mem_size, NULL, false };
    return kiln_init(p);
}

char * tu_read_file(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    char * b = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0) b = malloc((size_t) n + 1);
    if (b && fread(b, 1, (size_t) n, f) != (size_t) n) {
        free(b);
        b = NULL;
    }
    if (b) {
        b[n] = 0;
        if (size) *size = (size_t) n;
    }
    fclose(f);
    return b;
}
