/*
 * gguf_write.c — writing a GGUF context to a file or to memory.
 *
 * The output keeps the context's version, key order, tensor order and tensor
 * offsets, and the padding choices recorded when it was read, so that a file
 * read and written back comes out byte for byte the same.
 */
#include "gguf_internal.h"

#include <errno.h>
#include <stdlib.h>

struct layout {
    uint64_t meta_end;    /* header + KV pairs + tensor infos */
    uint64_t data_offset; /* meta_end padded to the alignment */
    uint64_t total;       /* bytes written */
};

static uint64_t pad_to(uint64_t x, uint64_t align) {
    const uint64_t r = x % align;
    return r ? x + (align - r) : x;
}

static uint64_t kv_bytes(const struct kiln_gguf_kv * kv) {
    uint64_t b = 8 + kv->key_len + 4;
    if (kv->type == KILN_GGUF_TYPE_ARRAY) b += 4 + 8;
    if (kv->elem_type == KILN_GGUF_TYPE_STRING) {
        /* each string: its length, its bytes (offs counts a NUL per string) */
        b += 8 * kv->n + ((const uint64_t *) kv->data)[kv->n] - kv->n;
    } else {
        b += kv->n * kiln_gguf_type_size(kv->elem_type);
    }
    return b;
}

static void compute_layout(const struct kiln_gguf_context * ctx, bool only_meta, struct layout * L) {
    uint64_t b = 4 + 4 + 8 + 8;
    for (int64_t i = 0; i < ctx->n_kv; i++) b += kv_bytes(&ctx->kv[i]);
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        b += 8 + strlen(t->name) + 4 + 8 * (uint64_t) t->n_dims + 4 + 8;
    }
    L->meta_end = b;
    L->data_offset = pad_to(b, ctx->alignment);
    const uint64_t data_end = kiln_gguf_data_end(ctx);
    if (only_meta) {
        L->total = L->data_offset;
    } else if (data_end == 0) {
        L->total = ctx->pad_meta ? L->data_offset : L->meta_end;
    } else {
        L->total = L->data_offset + (ctx->pad_tail ? pad_to(data_end, ctx->alignment) : data_end);
    }
}

/* ------------------------------------------------------------------ sink */

struct sink {
    uint8_t * buf; /* memory: capacity checked before writing */
    FILE *    f;
    uint64_t  pos;
    bool      ok;
};

static void put(struct sink * s, const void * p, uint64_t n) {
    if (!s->ok || n == 0) return;
    if (s->f) {
        if (fwrite(p, 1, (size_t) n, s->f) != (size_t) n) s->ok = false;
    } else {
        memcpy(s->buf + s->pos, p, (size_t) n);
    }
    s->pos += n;
}

static void put_zeros(struct sink * s, uint64_t n) {
    static const uint8_t zeros[4096];
    while (n > 0 && s->ok) {
        const uint64_t c = n < sizeof(zeros) ? n : sizeof(zeros);
        put(s, zeros, c);
        n -= c;
    }
}

static void put_u32(struct sink * s, uint32_t v) { put(s, &v, sizeof(v)); }
static void put_u64(struct sink * s, uint64_t v) { put(s, &v, sizeof(v)); }

static void put_meta(struct sink * s, const struct kiln_gguf_context * ctx) {
    put(s, KILN_GGUF_MAGIC, 4);
    put_u32(s, ctx->version);
    put_u64(s, (uint64_t) ctx->n_tensors);
    put_u64(s, (uint64_t) ctx->n_kv);
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        const struct kiln_gguf_kv * kv = &ctx->kv[i];
        put_u64(s, kv->key_len);
        put(s, kv->key, kv->key_len);
        put_u32(s, kv->type);
        if (kv->type == KILN_GGUF_TYPE_ARRAY) {
            put_u32(s, kv->elem_type);
            put_u64(s, kv->n);
        }
        if (kv->elem_type == KILN_GGUF_TYPE_STRING) {
            const uint64_t * offs = (const uint64_t *) kv->data;
            for (uint64_t j = 0; j < kv->n; j++) {
                const uint64_t len = offs[j + 1] - offs[j] - 1;
                put_u64(s, len);
                put(s, kv->blob + offs[j], len);
            }
        } else {
            put(s, kv->data, kv->n * kiln_gguf_type_size(kv->elem_type));
        }
    }
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        const uint64_t len = strlen(t->name);
        put_u64(s, len);
        put(s, t->name, len);
        put_u32(s, t->n_dims);
        for (uint32_t j = 0; j < t->n_dims; j++) put_u64(s, (uint64_t) t->ne[j]);
        put_u32(s, (uint32_t) t->type);
        put_u64(s, t->offset);
    }
}

/* checks before anything is written, so a failed write leaves no half file */
static bool check_writable(const struct kiln_gguf_context * ctx, bool only_meta, const struct layout * L, const char * fn) {
    if (L->total > SIZE_MAX) {
        kiln_set_error("%s: %llu bytes do not fit in memory", fn, (unsigned long long) L->total);
        return false;
    }
    if (only_meta) return true;
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        if (ctx->ti[i].size > 0 && !ctx->ti[i].data) {
            kiln_set_error("%s: tensor '%s' has no data to write", fn, ctx->ti[i].name);
            return false;
        }
    }
    const int64_t o = kiln_gguf_find_overlap(ctx);
    if (o >= 0) {
        kiln_set_error("%s: the data of tensor '%s' overlaps another tensor", fn, ctx->ti[o].name);
        return false;
    }
    return o == -1;
}

static bool write_all(struct sink * s, const struct kiln_gguf_context * ctx, bool only_meta, const struct layout * L) {
    put_meta(s, ctx);
    if (only_meta || L->total > L->meta_end) put_zeros(s, L->data_offset - L->meta_end);
    if (!only_meta && ctx->n_tensors > 0) {
        int64_t * order = kiln_gguf_sorted_by_offset(ctx);
        if (!order) return false;
        for (int64_t k = 0; k < ctx->n_tensors && s->ok; k++) {
            const struct kiln_gguf_tensor_info * t = &ctx->ti[order[k]];
            if (t->size == 0) continue;
            put_zeros(s, L->data_offset + t->offset - s->pos);
            put(s, t->data, t->size);
        }
        free(order);
    }
    if (s->pos < L->total) put_zeros(s, L->total - s->pos);
    return s->ok;
}

size_t kiln_gguf_get_meta_size(const struct kiln_gguf_context * ctx) {
    if (!ctx) return 0;
    struct layout L;
    compute_layout(ctx, true, &L);
    return L.data_offset <= SIZE_MAX ? (size_t) L.data_offset : 0;
}

bool kiln_gguf_get_meta_data(const struct kiln_gguf_context * ctx, void * data) {
    if (!ctx || !data) {
        kiln_set_error("gguf_get_meta_data: %s is NULL", ctx ? "data" : "context");
        return false;
    }
    struct layout L;
    compute_layout(ctx, true, &L);
    if (!check_writable(ctx, true, &L, "gguf_get_meta_data")) return false;
    struct sink s = { (uint8_t *) data, NULL, 0, true };
    return write_all(&s, ctx, true, &L);
}

size_t kiln_gguf_get_write_size(const struct kiln_gguf_context * ctx, bool only_meta) {
    if (!ctx) return 0;
    struct layout L;
    compute_layout(ctx, only_meta, &L);
    return L.total <= SIZE_MAX ? (size_t) L.total : 0;
}

size_t kiln_gguf_write_to_buffer(const struct kiln_gguf_context * ctx, void * buf, size_t buf_size, bool only_meta) {
    if (!ctx || !buf) {
        kiln_set_error("gguf_write_to_buffer: %s is NULL", ctx ? "buffer" : "context");
        return 0;
    }
    struct layout L;
    compute_layout(ctx, only_meta, &L);
    if (!check_writable(ctx, only_meta, &L, "gguf_write_to_buffer")) return 0;
    if (L.total > buf_size) {
        kiln_set_error("gguf_write_to_buffer: need %llu bytes, the buffer has %zu", (unsigned long long) L.total, buf_size);
        return 0;
    }
    struct sink s = { (uint8_t *) buf, NULL, 0, true };
    return write_all(&s, ctx, only_meta, &L) ? (size_t) L.total : 0;
}

bool kiln_gguf_write_to_file(const struct kiln_gguf_context * ctx, const char * fname, bool only_meta) {
    if (!ctx || !fname) {
        kiln_set_error("gguf_write_to_file: %s is NULL", ctx ? "file name" : "context");
        return false;
    }
    struct layout L;
    compute_layout(ctx, only_meta, &L);
    if (!check_writable(ctx, only_meta, &L, "gguf_write_to_file")) return false;
    FILE * f = fopen(fname, "wb");
    if (!f) {
        kiln_set_error("gguf_write_to_file: cannot create '%s': %s", fname, strerror(errno));
        return false;
    }
    struct sink s = { NULL, f, 0, true };
    const bool ok = write_all(&s, ctx, only_meta, &L);
    const int err = ok ? 0 : errno;
    if (fclose(f) != 0 || !ok) {
        kiln_set_error("gguf_write_to_file: writing '%s' failed: %s", fname, strerror(err ? err : errno));
        return false;
    }
    return true;
}
