#include "gguf_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct reader {
    const uint8_t * p;
    size_t size;
    size_t pos;
    char * err;
    size_t err_size;
    bool failed;
};

static bool fail(struct reader * r, const char * fmt, ...) {
    if (!r->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->err_size, fmt, ap);
        va_end(ap);
    }
    r->failed = true;
    return false;
}

static bool rd(struct reader * r, void * out, size_t n) {
    if (r->failed || n > r->size - r->pos) {
        return fail(r, "gguf: truncated file (need %zu bytes at offset %zu of %zu)", n, r->pos, r->size);
    }
    memcpy(out, r->p + r->pos, n);
    r->pos += n;
    return true;
}

static bool rd_str(struct reader * r, struct gf_str * s) {
    uint64_t n = 0;
    if (!rd(r, &n, 8)) {
        return false;
    }
    if (n > r->size - r->pos) {
        return fail(r, "gguf: string of %llu bytes at offset %zu runs past the end", (unsigned long long) n, r->pos);
    }
    s->s = (const char *) r->p + r->pos;
    s->n = n;
    r->pos += n;
    return true;
}

static size_t scalar_size(enum gf_type t) {
    switch (t) {
        case GF_U8: case GF_I8: case GF_BOOL: return 1;
        case GF_U16: case GF_I16: return 2;
        case GF_U32: case GF_I32: case GF_F32: return 4;
        case GF_U64: case GF_I64: case GF_F64: return 8;
        default: return 0;
    }
}

static bool read_kv(struct reader * r, struct gf_kv * kv) {
    uint32_t t = 0;
    if (!rd_str(r, &kv->key) || !rd(r, &t, 4)) {
        return false;
    }
    kv->type = (enum gf_type) t;
    if (t == GF_STRING) {
        struct gf_str s;
        kv->data = r->p + r->pos;
        return rd_str(r, &s);
    }
    if (t == GF_ARRAY) {
        uint32_t at = 0;
        if (!rd(r, &at, 4) || !rd(r, &kv->arr_n, 8)) {
            return false;
        }
        kv->arr_type = (enum gf_type) at;
        kv->data = r->p + r->pos;
        if (at == GF_STRING) {
            if (kv->arr_n > (r->size - r->pos) / 8) {
                return fail(r, "gguf: array '%.*s' claims %llu strings", (int) kv->key.n, kv->key.s, (unsigned long long) kv->arr_n);
            }
            kv->strs = malloc((kv->arr_n ? kv->arr_n : 1) * sizeof(struct gf_str));
            if (!kv->strs) {
                return fail(r, "gguf: out of memory");
            }
            for (uint64_t i = 0; i < kv->arr_n; i++) {
                if (!rd_str(r, &kv->strs[i])) {
                    return false;
                }
            }
            return true;
        }
        size_t es = scalar_size(kv->arr_type);
        if (es == 0) {
            return fail(r, "gguf: array '%.*s' has unsupported element type %u", (int) kv->key.n, kv->key.s, at);
        }
        if (kv->arr_n > (r->size - r->pos) / es) {
            return fail(r, "gguf: array '%.*s' runs past the end", (int) kv->key.n, kv->key.s);
        }
        r->pos += kv->arr_n * es;
        return true;
    }
    size_t es = scalar_size(kv->type);
    if (es == 0) {
        return fail(r, "gguf: key '%.*s' has unknown type %u", (int) kv->key.n, kv->key.s, t);
    }
    kv->data = r->p + r->pos;
    if (es > r->size - r->pos) {
        return fail(r, "gguf: truncated value of '%.*s'", (int) kv->key.n, kv->key.s);
    }
    r->pos += es;
    return true;
}

static struct gf_file * parse(uint8_t * buf, size_t size, char * err, size_t err_size) {
    struct reader r = { buf, size, 0, err, err_size, false };
    struct gf_file * f = calloc(1, sizeof(*f));
    if (!f) {
        free(buf);
        snprintf(err, err_size, "gguf: out of memory");
        return NULL;
    }
    f->buf = buf;
    f->size = size;
    char magic[4] = { 0 };
    uint64_t n_tensors = 0, n_kv = 0;
    if (!rd(&r, magic, 4) || memcmp(magic, "GGUF", 4) != 0) {
        fail(&r, "gguf: not a GGUF file (bad magic)");
        goto bad;
    }
    if (!rd(&r, &f->version, 4) || !rd(&r, &n_tensors, 8) || !rd(&r, &n_kv, 8)) {
        goto bad;
    }
    if (f->version < 2 || f->version > 3) {
        fail(&r, "gguf: unsupported version %u", f->version);
        goto bad;
    }
    if (n_kv > size / 12 || n_tensors > size / 24) {
        fail(&r, "gguf: implausible counts (%llu keys, %llu tensors)", (unsigned long long) n_kv, (unsigned long long) n_tensors);
        goto bad;
    }
    f->kv = calloc(n_kv ? n_kv : 1, sizeof(struct gf_kv));
    f->tensors = calloc(n_tensors ? n_tensors : 1, sizeof(struct gf_tensor));
    if (!f->kv || !f->tensors) {
        fail(&r, "gguf: out of memory");
        goto bad;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        f->n_kv = (int64_t) i + 1;
        if (!read_kv(&r, &f->kv[i])) {
            goto bad;
        }
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct gf_tensor * t = &f->tensors[i];
        f->n_tensors = (int64_t) i + 1;
        if (!rd_str(&r, &t->name) || !rd(&r, &t->n_dims, 4)) {
            goto bad;
        }
        if (t->n_dims > 4) {
            fail(&r, "gguf: tensor '%.*s' has %u dims", (int) t->name.n, t->name.s, t->n_dims);
            goto bad;
        }
        for (int d = 0; d < 4; d++) {
            t->ne[d] = 1;
        }
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t ne = 0;
            if (!rd(&r, &ne, 8)) {
                goto bad;
            }
            if (ne > ((uint64_t) 1 << 40)) {
                fail(&r, "gguf: tensor '%.*s' dim %u = %llu", (int) t->name.n, t->name.s, d, (unsigned long long) ne);
                goto bad;
            }
            t->ne[d] = (int64_t) ne;
        }
        if (!rd(&r, &t->type, 4) || !rd(&r, &t->offset, 8)) {
            goto bad;
        }
    }
    uint32_t alignment = 32;
    gf_get_u32(f, "general.alignment", &alignment);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
        fail(&r, "gguf: bad general.alignment %u", alignment);
        goto bad;
    }
    f->data_offset = (r.pos + alignment - 1) / alignment * alignment;
    if (n_tensors > 0 && f->data_offset > size) {
        fail(&r, "gguf: data section missing");
        goto bad;
    }
    return f;
bad:
    gf_close(f);
    return NULL;
}

struct gf_file * gf_open_file(const char * path, char * err, size_t err_size) {
    FILE * fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, err_size, "cannot open '%s'", path);
        return NULL;
    }
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    if (sz < 0) {
        fclose(fp);
        snprintf(err, err_size, "cannot read '%s'", path);
        return NULL;
    }
    uint8_t * buf = malloc(sz > 0 ? (size_t) sz : 1);
    if (!buf || fread(buf, 1, (size_t) sz, fp) != (size_t) sz) {
        free(buf);
        fclose(fp);
        snprintf(err, err_size, "cannot read '%s' (%ld bytes)", path, sz);
        return NULL;
    }
    fclose(fp);
    return parse(buf, (size_t) sz, err, err_size);
}

struct gf_file * gf_open_buffer(const void * data, size_t size, char * err, size_t err_size) {
    uint8_t * buf = malloc(size ? size : 1);
    if (!buf) {
        snprintf(err, err_size, "gguf: out of memory (%zu bytes)", size);
        return NULL;
    }
    memcpy(buf, data, size);
    return parse(buf, size, err, err_size);
}

void gf_close(struct gf_file * f) {
    if (!f) {
        return;
    }
    for (int64_t i = 0; i < f->n_kv; i++) {
        free(f->kv[i].strs);
    }
    free(f->kv);
    free(f->tensors);
    free(f->buf);
    free(f);
}

int64_t gf_find(const struct gf_file * f, const char * key) {
    size_t n = strlen(key);
    for (int64_t i = 0; i < f->n_kv; i++) {
        if (f->kv[i].key.n == n && memcmp(f->kv[i].key.s, key, n) == 0) {
            return i;
        }
    }
    return -1;
}

bool gf_get_str(const struct gf_file * f, const char * key, char * out, size_t out_size) {
    int64_t i = gf_find(f, key);
    if (i < 0 || f->kv[i].type != GF_STRING || out_size == 0) {
        return false;
    }
    uint64_t n;
    memcpy(&n, f->kv[i].data, 8);
    size_t m = n < out_size - 1 ? (size_t) n : out_size - 1;
    memcpy(out, f->kv[i].data + 8, m);
    out[m] = 0;
    return true;
}

bool gf_get_u32(const struct gf_file * f, const char * key, uint32_t * out) {
    int64_t i = gf_find(f, key);
    if (i < 0) {
        return false;
    }
    const uint8_t * d = f->kv[i].data;
    switch (f->kv[i].type) {
        case GF_U8:  *out = d[0]; return true;
        case GF_I8:  *out = (uint32_t) (int8_t) d[0]; return true;
        case GF_U16: { uint16_t v; memcpy(&v, d, 2); *out = v; return true; }
        case GF_I16: { int16_t v; memcpy(&v, d, 2); *out = (uint32_t) v; return true; }
        case GF_U32: case GF_I32: memcpy(out, d, 4); return true;
        case GF_U64: case GF_I64: { uint64_t v; memcpy(&v, d, 8); *out = (uint32_t) v; return true; }
        default: return false;
    }
}

bool gf_get_f32(const struct gf_file * f, const char * key, float * out) {
    int64_t i = gf_find(f, key);
    if (i < 0) {
        return false;
    }
    if (f->kv[i].type == GF_F32) {
        memcpy(out, f->kv[i].data, 4);
        return true;
    }
    if (f->kv[i].type == GF_F64) {
        double v;
        memcpy(&v, f->kv[i].data, 8);
        *out = (float) v;
        return true;
    }
    return false;
}

bool gf_get_bool(const struct gf_file * f, const char * key, bool * out) {
    int64_t i = gf_find(f, key);
    if (i < 0 || f->kv[i].type != GF_BOOL) {
        return false;
    }
    *out = f->kv[i].data[0] != 0;
    return true;
}

const struct gf_kv * gf_get_arr(const struct gf_file * f, const char * key, enum gf_type elem_type) {
    int64_t i = gf_find(f, key);
    if (i < 0 || f->kv[i].type != GF_ARRAY) {
        return NULL;
    }
    /* i32/u32 are interchangeable for token types */
    enum gf_type at = f->kv[i].arr_type;
    if (at != elem_type && !((at == GF_I32 || at == GF_U32) && (elem_type == GF_I32 || elem_type == GF_U32))) {
        return NULL;
    }
    return &f->kv[i];
}
