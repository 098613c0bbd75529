/*
 * mnist.c — the MNIST example models (see kiln-mnist.h).
 */
#include "kiln-mnist.h"
#include "kiln-gguf.h"
#include "kiln-opt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kiln_mnist_arch_from_name(const char * name) {
    if (!name) return -1;
    if (strcmp(name, "fc") == 0 || strcmp(name, "mnist-fc") == 0) return KILN_MNIST_FC;
    if (strcmp(name, "cnn") == 0 || strcmp(name, "mnist-cnn") == 0) return KILN_MNIST_CNN;
    return -1;
}

const char * kiln_mnist_arch_name(enum kiln_mnist_arch arch) {
    return arch == KILN_MNIST_FC ? "mnist-fc" : "mnist-cnn";
}

#define CNN_C1 8
#define CNN_C2 16

/* the weights of an architecture, in save order */
struct wdesc { const char * name; int n_dims; int64_t ne[4]; int64_t fan_in; size_t off; };

static int weight_descs(enum kiln_mnist_arch arch, struct wdesc * d) {
    if (arch == KILN_MNIST_FC) {
        const struct wdesc fc[] = {
            { "fc1.weight", 2, { KILN_MNIST_NPIXELS, KILN_MNIST_NHIDDEN, 1, 1 }, KILN_MNIST_NPIXELS, offsetof(struct kiln_mnist_model, fc1_w) },
            { "fc1.bias",   1, { KILN_MNIST_NHIDDEN, 1, 1, 1 },                   KILN_MNIST_NPIXELS, offsetof(struct kiln_mnist_model, fc1_b) },
            { "fc2.weight", 2, { KILN_MNIST_NHIDDEN, KILN_MNIST_NCLASSES, 1, 1 }, KILN_MNIST_NHIDDEN, offsetof(struct kiln_mnist_model, fc2_w) },
            { "fc2.bias",   1, { KILN_MNIST_NCLASSES, 1, 1, 1 },                  KILN_MNIST_NHIDDEN, offsetof(struct kiln_mnist_model, fc2_b) },
        };
        memcpy(d, fc, sizeof(fc));
        return 4;
    }
    const int64_t flat = (KILN_MNIST_NX / 4) * (KILN_MNIST_NX / 4) * CNN_C2;
    const struct wdesc cnn[] = {
        /* conv kernels are [KW, KH, IC, OC] */
        { "conv1.kernel", 4, { 3, 3, 1, CNN_C1 },      9,          offsetof(struct kiln_mnist_model, conv1_k) },
        { "conv1.bias",   3, { 1, 1, CNN_C1, 1 },      9,          offsetof(struct kiln_mnist_model, conv1_b) },
        { "conv2.kernel", 4, { 3, 3, CNN_C1, CNN_C2 }, 9 * CNN_C1, offsetof(struct kiln_mnist_model, conv2_k) },
        { "conv2.bias",   3, { 1, 1, CNN_C2, 1 },      9 * CNN_C1, offsetof(struct kiln_mnist_model, conv2_b) },
        { "dense.weight", 2, { flat, KILN_MNIST_NCLASSES, 1, 1 }, flat, offsetof(struct kiln_mnist_model, dense_w) },
        { "dense.bias",   1, { KILN_MNIST_NCLASSES, 1, 1, 1 },    flat, offsetof(struct kiln_mnist_model, dense_b) },
    };
    memcpy(d, cnn, sizeof(cnn));
    return 6;
}

static struct kiln_tensor ** slot(struct kiln_mnist_model * m, const struct wdesc * d) {
    return (struct kiln_tensor **)((char *) m + d->off);
}

static struct kiln_mnist_model * alloc_model(enum kiln_mnist_arch arch) {
    struct kiln_mnist_model * m = (struct kiln_mnist_model *) calloc(1, sizeof(*m));
    if (!m) { kiln_set_last_error("mnist: out of memory"); return NULL; }
    m->arch = arch;
    struct wdesc d[8];
    const int n = weight_descs(arch, d);
    size_t bytes = 0;
    for (int i = 0; i < n; i++) bytes += (size_t)(d[i].ne[0] * d[i].ne[1] * d[i].ne[2] * d[i].ne[3]) * sizeof(float) + kiln_tensor_overhead() + 64;
    struct kiln_init_params p = { bytes, NULL, false };
    m->ctx_weights = kiln_init(p);
    if (!m->ctx_weights) { free(m); return NULL; }
    for (int i = 0; i < n; i++) {
        struct kiln_tensor * t = kiln_new_tensor(m->ctx_weights, KILN_TYPE_F32, d[i].n_dims, d[i].ne);
        if (!t) { kiln_mnist_model_free(m); return NULL; }
        kiln_set_name(t, d[i].name);
        *slot(m, &d[i]) = t;
    }
    return m;
}

struct kiln_mnist_model * kiln_mnist_model_init_random(enum kiln_mnist_arch arch, uint64_t seed) {
    struct kiln_mnist_model * m = alloc_model(arch);
    if (!m) return NULL;
    struct wdesc d[8];
    const int n = weight_descs(arch, d);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < n; i++) {
        struct kiln_tensor * t = *slot(m, &d[i]);
        const float bound = 1.0f / sqrtf((float) d[i].fan_in);
        float * w = (float *) t->data;
        for (int64_t j = 0; j < kiln_nelements(t); j++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            const float u = (float)((s >> 11) * (1.0 / 9007199254740992.0));
            w[j] = (2.0f * u - 1.0f) * bound;
        }
    }
    return m;
}

struct kiln_mnist_model * kiln_mnist_model_load(const char * path) {
    struct kiln_context * wctx = NULL;
    struct kiln_gguf_init_params gp = { false, &wctx, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, gp);
    if (!g) return NULL;
    const int64_t k = kiln_gguf_find_key(g, "general.architecture");
    const int arch = k >= 0 ? kiln_mnist_arch_from_name(kiln_gguf_get_val_str(g, k)) : -1;
    if (arch < 0) {
        kiln_gguf_free(g);
        kiln_free(wctx);
        kiln_set_last_error("mnist: %s is not an MNIST model (general.architecture is not mnist-fc / mnist-cnn)", path);
        return NULL;
    }
    struct kiln_mnist_model * m = alloc_model((enum kiln_mnist_arch) arch);
    if (!m) { kiln_gguf_free(g); kiln_free(wctx); return NULL; }
    struct wdesc d[8];
    const int n = weight_descs(m->arch, d);
    for (int i = 0; i < n; i++) {
        struct kiln_tensor * dst = *slot(m, &d[i]);
        struct kiln_tensor * src = kiln_get_tensor(wctx, d[i].name);
        if (!src || src->type != KILN_TYPE_F32 || !kiln_are_same_shape(src, dst)) {
            kiln_set_last_error("mnist: tensor '%s' is missing or has the wrong type/shape in %s", d[i].name, path);
            kiln_gguf_free(g);
            kiln_free(wctx);
            kiln_mnist_model_free(m);
            return NULL;
        }
        memcpy(dst->data, src->data, kiln_nbytes(dst));
    }
    kiln_gguf_free(g);
    kiln_free(wctx);
    return m;
}

bool kiln_mnist_model_save(const struct kiln_mnist_model * m, const char * path) {
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    if (!g) return false;
    bool ok = kiln_gguf_set_val_str(g, "general.architecture", kiln_mnist_arch_name(m->arch));
    struct wdesc d[8];
    const int n = weight_descs(m->arch, d);
    for (int i = 0; ok && i < n; i++) ok = kiln_gguf_add_tensor(g, *slot((struct kiln_mnist_model *) m, &d[i]));
    ok = ok && kiln_gguf_write_to_file(g, path, false);
    kiln_gguf_free(g);
    return ok;
}

bool kiln_mnist_model_build(struct kiln_mnist_model * m, int nbatch, bool trainable) {
    if (!m || nbatch < 1) { kiln_set_last_error("mnist: bad model or batch size"); return false; }
    kiln_free(m->ctx_compute);
    struct kiln_init_params p = { kiln_tensor_overhead() * 256 + kiln_graph_overhead(), NULL, true };
    m->ctx_compute = kiln_init(p);
    if (!m->ctx_compute) return false;
    struct kiln_context * ctx = m->ctx_compute;
    m->nbatch = nbatch;
    struct wdesc d[8];
    const int n = weight_descs(m->arch, d);
    for (int i = 0; i < n; i++) {
        struct kiln_tensor * t = *slot(m, &d[i]);
        if (trainable) kiln_set_param(ctx, t);
        else t->flags &= ~KILN_TENSOR_FLAG_PARAM;
    }
    struct kiln_tensor * out = NULL;
    if (m->arch == KILN_MNIST_FC) {
        m->images = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, KILN_MNIST_NPIXELS, nbatch);
        struct kiln_tensor * h = kiln_relu(ctx, kiln_add(ctx, kiln_mul_mat(ctx, m->fc1_w, m->images), m->fc1_b));
        out = kiln_add(ctx, kiln_mul_mat(ctx, m->fc2_w, h), m->fc2_b);
    } else {
        m->images = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, KILN_MNIST_NX, KILN_MNIST_NX, 1, nbatch);
        struct kiln_tensor * c1 = kiln_relu(ctx, kiln_add(ctx, kiln_conv_2d(ctx, m->conv1_k, m->images, 1, 1, 1, 1, 1, 1), m->conv1_b));
        struct kiln_tensor * p1 = kiln_pool_2d(ctx, c1, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
        struct kiln_tensor * c2 = kiln_relu(ctx, kiln_add(ctx, kiln_conv_2d(ctx, m->conv2_k, p1, 1, 1, 1, 1, 1, 1), m->conv2_b));
        struct kiln_tensor * p2 = kiln_pool_2d(ctx, c2, KILN_OP_POOL_MAX, 2, 2, 2, 2, 0, 0);
        struct kiln_tensor * flat = p2 ? kiln_reshape_2d(ctx, kiln_cont(ctx, p2), m->dense_w->ne[0], nbatch) : NULL;
        out = kiln_add(ctx, kiln_mul_mat(ctx, m->dense_w, flat), m->dense_b);
    }
    if (!m->images || !out) return false;
    kiln_set_name(m->images, "images");
    kiln_set_input(m->images);
    m->logits = out;
    kiln_set_name(out, "logits");
    kiln_set_output(out);
    return true;
}

void kiln_mnist_model_free(struct kiln_mnist_model * m) {
    if (!m) return;
    kiln_free(m->ctx_compute);
    kiln_free(m->ctx_weights);
    free(m);
}

bool kiln_mnist_parse_idx(const uint8_t * buf, size_t size, int want_dims, int64_t dims[3], const uint8_t ** data) {
    if (!buf || size < 4 || buf[0] != 0 || buf[1] != 0 || buf[2] != 0x08 || buf[3] != want_dims || want_dims < 1 || want_dims > 3) {
        kiln_set_last_error("mnist: not an IDX file of %d dimensions of unsigned bytes", want_dims);
        return false;
    }
    if (size < 4 + 4 * (size_t) want_dims) { kiln_set_last_error("mnist: IDX header truncated"); return false; }
    uint64_t total = 1;
    for (int i = 0; i < want_dims; i++) {
        const uint8_t * b = buf + 4 + 4 * i;
        dims[i] = ((int64_t) b[0] << 24) | ((int64_t) b[1] << 16) | ((int64_t) b[2] << 8) | b[3];
        if (dims[i] <= 0 || dims[i] > 100000000) { kiln_set_last_error("mnist: IDX dimension %d is %lld", i, (long long) dims[i]); return false; }
        total *= (uint64_t) dims[i];
        if (total > ((uint64_t) 1 << 34)) { kiln_set_last_error("mnist: IDX file too large"); return false; }
    }
    const size_t off = 4 + 4 * (size_t) want_dims;
    if (total > size - off) {
        kiln_set_last_error("mnist: IDX payload truncated: %llu bytes expected, %zu present", (unsigned long long) total, size - off);
        return false;
    }
    *data = buf + off;
    return true;
}

struct kiln_opt_dataset * kiln_mnist_dataset(const uint8_t * images, const uint8_t * labels, int64_t n) {
    struct kiln_opt_dataset * ds = kiln_opt_dataset_init(KILN_TYPE_F32, KILN_TYPE_F32, KILN_MNIST_NPIXELS, KILN_MNIST_NCLASSES, n, 1);
    if (!ds) return NULL;
    float * x = (float *) kiln_opt_dataset_data(ds)->data;
    float * y = (float *) kiln_opt_dataset_labels(ds)->data;
    for (int64_t i = 0; i < n * KILN_MNIST_NPIXELS; i++) x[i] = images[i] / 255.0f;
    memset(y, 0, sizeof(float) * (size_t)(n * KILN_MNIST_NCLASSES));
    for (int64_t i = 0; i < n; i++) {
        if (labels[i] >= KILN_MNIST_NCLASSES) {
            kiln_set_last_error("mnist: label %d of image %lld out of range", labels[i], (long long) i);
            kiln_opt_dataset_free(ds);
            return NULL;
        }
        y[i * KILN_MNIST_NCLASSES + labels[i]] = 1.0f;
    }
    return ds;
}

static uint8_t * read_file(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) { kiln_set_last_error("mnist: cannot open %s", path); return NULL; }
    uint8_t * buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : (1 << 20);
            uint8_t * nb = (uint8_t *) realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); kiln_set_last_error("mnist: out of memory reading %s", path); return NULL; }
            buf = nb;
        }
        const size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    fclose(f);
    *size = n;
    return buf;
}

struct kiln_opt_dataset * kiln_mnist_dataset_load(const char * dir, const char * prefix, int64_t limit) {
    char path[4096];
    size_t ni = 0, nl = 0;
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, prefix);
    uint8_t * bi = read_file(path, &ni);
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, prefix);
    uint8_t * bl = bi ? read_file(path, &nl) : NULL;
    struct kiln_opt_dataset * ds = NULL;
    int64_t di[3], dl[3];
    const uint8_t * img, * lab;
    if (bi && bl && kiln_mnist_parse_idx(bi, ni, 3, di, &img) && kiln_mnist_parse_idx(bl, nl, 1, dl, &lab)) {
        if (di[0] != dl[0] || di[1] != KILN_MNIST_NX || di[2] != KILN_MNIST_NX) {
            kiln_set_last_error("mnist: %s images and labels do not match", prefix);
        } else {
            ds = kiln_mnist_dataset(img, lab, limit > 0 && limit < di[0] ? limit : di[0]);
        }
    }
    free(bi);
    free(bl);
    return ds;
}
