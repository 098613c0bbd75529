/*
 * gguf_read.c — parsing GGUF from a buffer, a file (mapped, or read) or a
 * read callback, and loading the tensors into a kiln context.
 *
 * A GGUF file is untrusted input. The rule here: every count, length, offset
 * and size read from the file is compared with the bytes still available (and
 * checked for overflow) before it is used to allocate, index or loop, so the
 * memory used is bounded by a small multiple of the input size, every loop by
 * the input size, and a bad file ends in an error that names the byte offset.
 */
#include "gguf_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>

#if !defined(_WIN32) && !defined(__EMSCRIPTEN__)
#define KILN_GGUF_HAVE_MMAP 1
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

/* smallest encodings: a KV is a key length, a type and a 1-byte value; a
 * tensor info is a name length, n_dims, one dimension, a type and an offset */
#define MIN_KV_BYTES 13u
#define MIN_TI_BYTES 32u
#define HEADER_BYTES 24u

#define RD_WINDOW ((size_t) 64 * 1024)

/* ---------------------------------------------------------------- reader */

struct rd {
    const uint8_t * buf;  /* buffer mode: the whole input */
    uint64_t        size; /* total bytes of input */
    uint64_t        pos;  /* offset of the next byte the parser consumes */

    /* callback mode: bytes arrive through cb and pass through a window */
    kiln_gguf_read_callback cb;
    void *    ud;
    uint8_t * win;
    size_t    win_cap;
    size_t    win_len;
    size_t    win_pos;

    bool failed;
};

static uint64_t rd_left(const struct rd * r) { return r->size - r->pos; }

static bool rd_fail(struct rd * r, uint64_t off, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static bool rd_fail(struct rd * r, uint64_t off, const char * fmt, ...) {
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    kiln_set_error("gguf: %s at byte offset %llu", msg, (unsigned long long) off);
    r->failed = true;
    return false;
}

/* exactly n bytes from the callback (at is the stream offset, for messages) */
static bool cb_pull(struct rd * r, uint8_t * dst, size_t n, uint64_t at) {
    while (n > 0) {
        const size_t got = r->cb(dst, n, r->ud);
        if (got == 0 || got > n) {
            return rd_fail(r, at, "the read callback %s (%zu of %zu bytes)",
                           got == 0 ? "ended early" : "returned more than asked", got, n);
        }
        dst += got;
        n -= got;
        at += got;
    }
    return true;
}

/* consumes n bytes into dst (dst NULL: skip them) */
static bool rd_read(struct rd * r, void * dst, uint64_t n, const char * what) {
    if (r->failed) return false;
    if (n > rd_left(r)) {
        return rd_fail(r, r->pos, "file truncated: %s needs %llu bytes, %llu left", what,
                       (unsigned long long) n, (unsigned long long) rd_left(r));
    }
    if (r->buf) {
        if (dst) memcpy(dst, r->buf + r->pos, (size_t) n);
        r->pos += n;
        return true;
    }
    uint8_t * d = (uint8_t *) dst;
    while (n > 0) {
        if (r->win_pos == r->win_len) {
            if (d && n >= r->win_cap) {
                /* large reads (tensor data) go straight to their destination */
                if (n > SIZE_MAX) return rd_fail(r, r->pos, "%s is too large for this platform", what);
                if (!cb_pull(r, d, (size_t) n, r->pos)) return false;
                r->pos += n;
                return true;
            }
            const uint64_t left = rd_left(r);
            const size_t chunk = left < r->win_cap ? (size_t) left : r->win_cap;
            if (!cb_pull(r, r->win, chunk, r->pos)) return false;
            r->win_len = chunk;
            r->win_pos = 0;
        }
        const size_t avail = r->win_len - r->win_pos;
        const size_t take = n < avail ? (size_t) n : avail;
        if (d) {
            memcpy(d, r->win + r->win_pos, take);
            d += take;
        }
        r->win_pos += take;
        r->pos += take;
        n -= take;
    }
    return true;
}

static void * rd_alloc(struct rd * r, uint64_t n, uint64_t elem, uint64_t at, const char * what) {
    if (elem != 0 && n > SIZE_MAX / elem) {
        rd_fail(r, at, "%s: %llu x %llu bytes do not fit in memory", what, (unsigned long long) n, (unsigned long long) elem);
        return NULL;
    }
    const size_t bytes = (size_t)(n * elem);
    void * p = malloc(bytes ? bytes : 1);
    if (!p) rd_fail(r, at, "%s: out of memory for %zu bytes", what, bytes);
    return p;
}

/* a GGUF string: u64 length, bytes; *out gets a NUL-terminated copy */
static bool rd_str(struct rd * r, char ** out, uint64_t * out_len, const char * what) {
    const uint64_t at = r->pos;
    uint64_t len;
    if (!rd_read(r, &len, sizeof(len), what)) return false;
    if (len > rd_left(r)) {
        return rd_fail(r, at, "%s: string of %llu bytes runs past the end of the file (%llu bytes left)", what,
                       (unsigned long long) len, (unsigned long long) rd_left(r));
    }
    char * s = (char *) rd_alloc(r, len + 1, 1, at, what);
    if (!s) return false;
    if (!rd_read(r, s, len, what)) {
        free(s);
        return false;
    }
    s[len] = 0;
    *out = s;
    *out_len = len;
    return true;
}

/* ------------------------------------------------- duplicate name check */

/* Duplicates are found by sorting (name, index) pairs: O(bytes * log n) for
 * any input, where a hash set could be driven quadratic by crafted keys. */
struct name_ref {
    const char * s;
    size_t       len;
    uint64_t     i;
};

static int cmp_name_ref(const void * a, const void * b) {
    const struct name_ref * x = (const struct name_ref *) a;
    const struct name_ref * y = (const struct name_ref *) b;
    const int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    if (c != 0) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

/* the first name (in file order) equal to an earlier one: its index, or n
 * when all are distinct */
static uint64_t first_duplicate(struct name_ref * refs, uint64_t n) {
    uint64_t dup = n;
    if (n < 2) return dup;
    qsort(refs, (size_t) n, sizeof(*refs), cmp_name_ref);
    for (uint64_t k = 1; k < n; k++) {
        const struct name_ref * p = &refs[k - 1];
        const struct name_ref * q = &refs[k];
        /* sorted by index within equal names: q comes later in the file */
        if (p->len == q->len && memcmp(p->s, q->s, p->len) == 0 && q->i < dup) dup = q->i;
    }
    return dup;
}

/* ---------------------------------------------------------------- values */

static bool rd_values(struct rd * r, struct kiln_gguf_kv * kv, uint64_t at, const char * key) {
    const bool is_arr = kv->type == KILN_GGUF_TYPE_ARRAY;
    const char * what = is_arr ? "array" : "value";
    const uint64_t n = kv->n;
    if (kv->elem_type != KILN_GGUF_TYPE_STRING) {
        const uint64_t es = kiln_gguf_type_size(kv->elem_type);
        if (n > rd_left(r) / es) {
            return rd_fail(r, at, "%s of %llu %s values for key '%s' runs past the end of the file (%llu bytes left)",
                           what, (unsigned long long) n, kiln_gguf_type_name((enum kiln_gguf_type) kv->elem_type), key,
                           (unsigned long long) rd_left(r));
        }
        kv->data = rd_alloc(r, n, es, at, key);
        return kv->data && rd_read(r, kv->data, n * es, what);
    }
    /* strings: each takes at least its 8-byte length */
    if (n > rd_left(r) / 8) {
        return rd_fail(r, at, "%s of %llu strings for key '%s' runs past the end of the file (%llu bytes left)",
                       what, (unsigned long long) n, key, (unsigned long long) rd_left(r));
    }
    uint64_t * offs = (uint64_t *) rd_alloc(r, n + 1, sizeof(uint64_t), at, key);
    if (!offs) return false;
    kv->data = offs;
    /* every string byte comes from the input: the blob never needs more than
     * what is left plus one NUL per string, so doubling up to that bound
     * reallocates O(log) times */
    const uint64_t bound = rd_left(r) > UINT64_MAX - n ? UINT64_MAX : rd_left(r) + n;
    /* grows by doubling from the first string's size, capped by the bound */
    uint64_t cap = 0;
    uint64_t used = 0;
    kv->blob = (char *) rd_alloc(r, 1, 1, at, key);
    if (!kv->blob) return false;
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t s_at = r->pos;
        uint64_t len;
        if (!rd_read(r, &len, sizeof(len), "string length")) return false;
        if (len > rd_left(r)) {
            if (is_arr) {
                return rd_fail(r, s_at, "string %llu of key '%s': %llu bytes run past the end of the file (%llu bytes left)",
                               (unsigned long long) i, key, (unsigned long long) len, (unsigned long long) rd_left(r));
            }
            return rd_fail(r, s_at, "string value of key '%s': %llu bytes run past the end of the file (%llu bytes left)",
                           key, (unsigned long long) len, (unsigned long long) rd_left(r));
        }
        const uint64_t need = used + len + 1;
        if (need > cap) {
            uint64_t ncap = cap * 2 < bound ? cap * 2 : bound;
            if (ncap < need) ncap = need;
            if (ncap > SIZE_MAX) return rd_fail(r, s_at, "strings of key '%s' do not fit in memory", key);
            char * p = (char *) realloc(kv->blob, (size_t) ncap);
            if (!p) return rd_fail(r, s_at, "out of memory for the strings of key '%s'", key);
            kv->blob = p;
            cap = ncap;
        }
        if (!rd_read(r, kv->blob + used, len, "string")) return false;
        kv->blob[used + len] = 0;
        offs[i] = used;
        used = need;
    }
    offs[n] = used;
    if (used < cap && used > 0) {
        char * p = (char *) realloc(kv->blob, (size_t) used);
        if (p) kv->blob = p;
    }
    return true;
}

static bool rd_kv(struct rd * r, struct kiln_gguf_context * ctx, uint64_t * key_at_out) {
    struct kiln_gguf_kv kv = { 0 };
    char key[80];
    const uint64_t key_at = r->pos;
    uint64_t key_len = 0;
    if (!rd_str(r, &kv.key, &key_len, "key")) return false;
    if (key_len == 0) {
        free(kv.key);
        return rd_fail(r, key_at, "key-value %lld: the key is the empty string", (long long) ctx->n_kv);
    }
    kv.key_len = (size_t) key_len;
    kiln_gguf_printable(kv.key, kv.key_len, key, sizeof(key));
    *key_at_out = key_at;
    const uint64_t type_at = r->pos;
    uint32_t type;
    if (!rd_read(r, &type, sizeof(type), "value type")) goto fail;
    if (type >= KILN_GGUF_TYPE_COUNT) {
        rd_fail(r, type_at, "unknown value type %u for key '%s'", type, key);
        goto fail;
    }
    kv.type = type;
    kv.elem_type = type;
    kv.n = 1;
    uint64_t values_at = r->pos;
    if (type == KILN_GGUF_TYPE_ARRAY) {
        uint32_t et;
        if (!rd_read(r, &et, sizeof(et), "array element type")) goto fail;
        if (et == KILN_GGUF_TYPE_ARRAY) {
            rd_fail(r, values_at, "arrays of arrays are not supported (key '%s')", key);
            goto fail;
        }
        if (et >= KILN_GGUF_TYPE_COUNT) {
            rd_fail(r, values_at, "unknown value type %u for the elements of array key '%s'", et, key);
            goto fail;
        }
        kv.elem_type = et;
        values_at = r->pos;
        if (!rd_read(r, &kv.n, sizeof(kv.n), "array length")) goto fail;
    }
    if (!rd_values(r, &kv, values_at, key)) goto fail;
    if (kv.key_len == sizeof(KILN_GGUF_KEY_GENERAL_ALIGNMENT) - 1 &&
        memcmp(kv.key, KILN_GGUF_KEY_GENERAL_ALIGNMENT, kv.key_len) == 0) {
        if (kv.type != KILN_GGUF_TYPE_UINT32) {
            rd_fail(r, type_at, "general.alignment must be a u32, not %s", kiln_gguf_type_name((enum kiln_gguf_type) kv.type));
            goto fail;
        }
        uint32_t a;
        memcpy(&a, kv.data, sizeof(a));
        if (a == 0 || (a & (a - 1)) != 0) {
            rd_fail(r, type_at + 4, "general.alignment = %u is not a power of 2", a);
            goto fail;
        }
        if (a > KILN_GGUF_MAX_ALIGNMENT) {
            rd_fail(r, type_at + 4, "general.alignment = %u is larger than %u", a, KILN_GGUF_MAX_ALIGNMENT);
            goto fail;
        }
        ctx->alignment = a;
    }
    ctx->kv[ctx->n_kv++] = kv; /* capacity reserved for n_kv up front */
    return true;
fail:
    kiln_gguf_free_kv(&kv);
    return false;
}

static bool rd_tensor_info(struct rd * r, struct kiln_gguf_context * ctx, uint64_t * name_at_out) {
    struct kiln_gguf_tensor_info * t = &ctx->ti[ctx->n_tensors];
    memset(t, 0, sizeof(*t));
    const uint64_t name_at = r->pos;
    uint64_t len;
    if (!rd_read(r, &len, sizeof(len), "tensor name length")) return false;
    if (len > rd_left(r)) {
        return rd_fail(r, name_at, "tensor name of %llu bytes runs past the end of the file (%llu bytes left)",
                       (unsigned long long) len, (unsigned long long) rd_left(r));
    }
    if (len >= KILN_MAX_NAME) {
        return rd_fail(r, name_at, "tensor name of %llu bytes is too long (at most %d)", (unsigned long long) len, KILN_MAX_NAME - 1);
    }
    if (!rd_read(r, t->name, len, "tensor name")) return false;
    t->name[len] = 0;
    char name[80];
    kiln_gguf_printable(t->name, (size_t) len, name, sizeof(name));
    if (memchr(t->name, 0, (size_t) len) != NULL) return rd_fail(r, name_at, "tensor name '%s' contains a NUL byte", name);
    *name_at_out = name_at;
    const uint64_t nd_at = r->pos;
    if (!rd_read(r, &t->n_dims, sizeof(t->n_dims), "n_dims")) return false;
    if (t->n_dims < 1 || t->n_dims > KILN_MAX_DIMS) {
        return rd_fail(r, nd_at, "tensor '%s': n_dims = %u is outside 1..%d", name, t->n_dims, KILN_MAX_DIMS);
    }
    int64_t nel = 1;
    for (uint32_t j = 0; j < KILN_MAX_DIMS; j++) t->ne[j] = 1;
    for (uint32_t j = 0; j < t->n_dims; j++) {
        const uint64_t ne_at = r->pos;
        if (!rd_read(r, &t->ne[j], sizeof(int64_t), "tensor dimension")) return false;
        if (t->ne[j] < 0) {
            return rd_fail(r, ne_at, "tensor '%s': ne[%u] = %lld is negative", name, j, (long long) t->ne[j]);
        }
        if (t->ne[j] == 0) {
            return rd_fail(r, ne_at, "tensor '%s': ne[%u] = 0 (a tensor holds at least one element)", name, j);
        }
        if (t->ne[j] != 0 && nel > INT64_MAX / t->ne[j]) {
            return rd_fail(r, ne_at, "tensor '%s': element count overflows int64 at ne[%u] = %lld", name, j, (long long) t->ne[j]);
        }
        nel *= t->ne[j];
    }
    const uint64_t type_at = r->pos;
    uint32_t type;
    if (!rd_read(r, &type, sizeof(type), "tensor type")) return false;
    if (type > INT32_MAX || !kiln_type_is_valid((int) type)) {
        return rd_fail(r, type_at, "tensor '%s': invalid tensor type %u", name, type);
    }
    t->type = (enum kiln_type) type;
    const int64_t blck = kiln_blck_size(t->type);
    if (t->ne[0] % blck != 0) {
        return rd_fail(r, type_at, "tensor '%s': ne[0] = %lld is not a multiple of the block size %lld of type %s", name,
                       (long long) t->ne[0], (long long) blck, kiln_type_name(t->type));
    }
    if (!kiln_gguf_tensor_bytes(t->type, t->ne, &t->size)) {
        return rd_fail(r, type_at, "tensor '%s': byte size of %lld %s elements overflows", name, (long long) nel,
                       kiln_type_name(t->type));
    }
    const uint64_t off_at = r->pos;
    if (!rd_read(r, &t->offset, sizeof(t->offset), "tensor data offset")) return false;
    if (t->offset % ctx->alignment != 0) {
        return rd_fail(r, off_at, "tensor '%s': data offset %llu is not aligned to %zu bytes", name,
                       (unsigned long long) t->offset, ctx->alignment);
    }
    ctx->n_tensors++;
    return true;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

/* every tensor's data lies inside the file and no two overlap */
static bool check_data_layout(struct rd * r, struct kiln_gguf_context * ctx) {
    const uint64_t doff = ctx->data_offset;
    char name[80], other[80];
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        if (t->size == 0) continue;
        if (doff > r->size || t->offset > r->size - doff || t->size > r->size - doff - t->offset) {
            return rd_fail(r, sat_add(doff, t->offset),
                           "tensor '%s': %llu bytes of data at data offset %llu lie outside the file (%llu bytes, data from byte %llu)",
                           kiln_gguf_printable(t->name, strlen(t->name), name, sizeof(name)), (unsigned long long) t->size, (unsigned long long) t->offset,
                           (unsigned long long) r->size, (unsigned long long) doff);
        }
    }
    int64_t * order = kiln_gguf_sorted_by_offset(ctx);
    if (!order) {
        r->failed = true;
        return false;
    }
    uint64_t max_end = 0;
    int64_t max_i = -1;
    for (int64_t k = 0; k < ctx->n_tensors; k++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[order[k]];
        if (t->size == 0) continue;
        if (max_i >= 0 && t->offset < max_end) {
            const struct kiln_gguf_tensor_info * o = &ctx->ti[max_i];
            rd_fail(r, doff + t->offset,
                    "tensor '%s': data at data offset %llu (%llu bytes) overlaps tensor '%s' (data offset %llu, %llu bytes)",
                    kiln_gguf_printable(t->name, strlen(t->name), name, sizeof(name)), (unsigned long long) t->offset,
                    (unsigned long long) t->size, kiln_gguf_printable(o->name, strlen(o->name), other, sizeof(other)),
                    (unsigned long long) o->offset, (unsigned long long) o->size);
            free(order);
            return false;
        }
        max_end = t->offset + t->size;
        max_i = order[k];
    }
    free(order);
    /* packed, as llama.cpp requires: in file order, each tensor starts where
     * the previous one ends, rounded up to the alignment */
    uint64_t expect = 0;
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        if (t->offset != expect) {
            return rd_fail(r, sat_add(doff, t->offset),
                           "tensor '%s': data offset %llu, but the packed layout puts it at %llu (the previous tensor's "
                           "offset plus its size rounded up to %zu bytes): the file leaves a gap or reorders tensors",
                           kiln_gguf_printable(t->name, strlen(t->name), name, sizeof(name)), (unsigned long long) t->offset,
                           (unsigned long long) expect, ctx->alignment);
        }
        expect = sat_add(expect, t->size + (ctx->alignment - t->size % ctx->alignment) % ctx->alignment);
    }
    return true;
}

/* ------------------------------------------------ loading into a context */

static bool load_tensors(struct rd * r, struct kiln_gguf_context * ctx, struct kiln_gguf_init_params params) {
    const uint64_t doff = ctx->data_offset;
    bool in_place = params.no_copy && !params.no_alloc && r->buf != NULL;
    if (in_place) {
        /* kernels load tensor data with aligned SIMD loads */
        for (int64_t i = 0; i < ctx->n_tensors; i++) {
            const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
            if (t->size > 0 && ((uintptr_t)(r->buf + doff + t->offset)) % KILN_MEM_ALIGN != 0) in_place = false;
        }
    }
    const bool alloc = !params.no_alloc && !in_place;
    uint64_t mem = 0;
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        uint64_t need = kiln_tensor_overhead();
        if (alloc) need += ctx->ti[i].size + KILN_MEM_ALIGN; /* sizes are bounded by the input */
        mem += need;
    }
    if (mem > SIZE_MAX || ctx->n_tensors > INT32_MAX) {
        return rd_fail(r, doff, "%llu bytes of tensors do not fit in memory", (unsigned long long) mem);
    }
    struct kiln_init_params ip = { (size_t) mem, NULL, !alloc };
    struct kiln_context * kctx = kiln_init(ip);
    if (!kctx) return rd_fail(r, doff, "cannot allocate a context of %llu bytes for the tensors", (unsigned long long) mem);
    struct kiln_tensor ** tensors = NULL;
    if (alloc && !r->buf) {
        tensors = (struct kiln_tensor **) rd_alloc(r, (uint64_t) ctx->n_tensors, sizeof(*tensors), doff, "tensor list");
        if (!tensors) goto fail;
    }
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        struct kiln_tensor * kt = kiln_new_tensor(kctx, t->type, (int) t->n_dims, t->ne);
        if (!kt) {
            char msg[300];
            snprintf(msg, sizeof(msg), "%s", kiln_last_error());
            char name[80];
            rd_fail(r, sat_add(doff, t->offset), "cannot create tensor '%s': %s",
                    kiln_gguf_printable(t->name, strlen(t->name), name, sizeof(name)), msg);
            goto fail;
        }
        kiln_set_name(kt, t->name);
        if (in_place) {
            kt->data = t->size > 0 ? (void *)(uintptr_t)(r->buf + doff + t->offset) : NULL;
        } else if (alloc && r->buf && t->size > 0) {
            memcpy(kt->data, r->buf + doff + t->offset, (size_t) t->size);
        }
        if (tensors) tensors[i] = kt;
        t->data = kt->data;
    }
    if (tensors) {
        /* streaming: pull the data in file order, straight into the tensors */
        int64_t * order = kiln_gguf_sorted_by_offset(ctx);
        if (!order) {
            r->failed = true;
            goto fail;
        }
        for (int64_t k = 0; k < ctx->n_tensors; k++) {
            const struct kiln_gguf_tensor_info * t = &ctx->ti[order[k]];
            if (t->size == 0) continue;
            const uint64_t at = doff + t->offset;
            if (!rd_read(r, NULL, at - r->pos, "padding") || !rd_read(r, tensors[order[k]]->data, t->size, t->name)) {
                free(order);
                goto fail;
            }
        }
        free(order);
    }
    free(tensors);
    ctx->data_in_input = in_place;
    *params.ctx = kctx;
    return true;
fail:
    free(tensors);
    kiln_free(kctx);
    for (int64_t i = 0; i < ctx->n_tensors; i++) ctx->ti[i].data = NULL;
    return false;
}

/* ------------------------------------------------------------------ parse */

static struct kiln_gguf_context * parse(struct rd * r, struct kiln_gguf_init_params params) {
    if (params.ctx) *params.ctx = NULL;
    struct kiln_gguf_context * ctx = kiln_gguf_init_empty();
    if (!ctx) return NULL;
    uint64_t * name_at = NULL;
    struct name_ref * refs = NULL;

    char magic[4];
    if (!rd_read(r, magic, sizeof(magic), "magic")) goto fail;
    if (memcmp(magic, KILN_GGUF_MAGIC, 4) != 0) {
        rd_fail(r, 0, "bad magic %02x %02x %02x %02x (not a GGUF file)", (unsigned char) magic[0],
                (unsigned char) magic[1], (unsigned char) magic[2], (unsigned char) magic[3]);
        goto fail;
    }
    uint32_t version;
    if (!rd_read(r, &version, sizeof(version), "version")) goto fail;
    if (version != 2 && version != 3) {
        const uint32_t sw = ((version & 0xffu) << 24) | ((version & 0xff00u) << 8) | ((version >> 8) & 0xff00u) | (version >> 24);
        if (version == 1) {
            rd_fail(r, 4, "GGUF version 1 is not supported (only versions 2 and 3)");
        } else if (sw >= 1 && sw <= 3) {
            rd_fail(r, 4, "big-endian GGUF files are not supported (version field 0x%08x)", version);
        } else {
            rd_fail(r, 4, "unsupported GGUF version %u (only versions 2 and 3)", version);
        }
        goto fail;
    }
    ctx->version = version;
    uint64_t n_tensors, n_kv;
    if (!rd_read(r, &n_tensors, sizeof(n_tensors), "tensor count")) goto fail;
    if (!rd_read(r, &n_kv, sizeof(n_kv), "key-value count")) goto fail;
    const uint64_t left = rd_left(r);
    if (n_tensors > left / MIN_TI_BYTES) {
        rd_fail(r, 8, "tensor count %llu cannot fit in the %llu bytes after the header", (unsigned long long) n_tensors,
                (unsigned long long) left);
        goto fail;
    }
    if (n_kv > left / MIN_KV_BYTES) {
        rd_fail(r, 16, "key-value count %llu cannot fit in the %llu bytes after the header", (unsigned long long) n_kv,
                (unsigned long long) left);
        goto fail;
    }
    if (n_tensors * MIN_TI_BYTES > left - n_kv * MIN_KV_BYTES) {
        rd_fail(r, 8, "tensor count %llu and key-value count %llu cannot fit together in the %llu bytes after the header",
                (unsigned long long) n_tensors, (unsigned long long) n_kv, (unsigned long long) left);
        goto fail;
    }

    ctx->kv = (struct kiln_gguf_kv *) rd_alloc(r, n_kv, sizeof(struct kiln_gguf_kv), 16, "key-value table");
    if (!ctx->kv) goto fail;
    ctx->cap_kv = (int64_t) n_kv;
    /* where each name starts, for messages, and the names to sort */
    const uint64_t n_names = n_kv > n_tensors ? n_kv : n_tensors;
    name_at = (uint64_t *) rd_alloc(r, n_names, sizeof(uint64_t), 16, "name offsets");
    refs = (struct name_ref *) rd_alloc(r, n_names, sizeof(struct name_ref), 16, "name list");
    if (!name_at || !refs) goto fail;
    for (uint64_t i = 0; i < n_kv; i++) {
        if (!rd_kv(r, ctx, &name_at[i])) goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        refs[i].s = ctx->kv[i].key;
        refs[i].len = ctx->kv[i].key_len;
        refs[i].i = i;
    }
    uint64_t dup = first_duplicate(refs, n_kv);
    if (dup < n_kv) {
        char key[80];
        rd_fail(r, name_at[dup], "duplicate key '%s'", kiln_gguf_printable(ctx->kv[dup].key, ctx->kv[dup].key_len, key, sizeof(key)));
        goto fail;
    }

    ctx->ti = (struct kiln_gguf_tensor_info *) rd_alloc(r, n_tensors, sizeof(struct kiln_gguf_tensor_info), 8, "tensor table");
    if (!ctx->ti) goto fail;
    ctx->cap_tensors = (int64_t) n_tensors;
    for (uint64_t i = 0; i < n_tensors; i++) {
        if (!rd_tensor_info(r, ctx, &name_at[i])) goto fail;
    }
    for (uint64_t i = 0; i < n_tensors; i++) {
        refs[i].s = ctx->ti[i].name;
        refs[i].len = strlen(ctx->ti[i].name);
        refs[i].i = i;
    }
    dup = first_duplicate(refs, n_tensors);
    if (dup < n_tensors) {
        char name[80];
        rd_fail(r, name_at[dup], "duplicate tensor name '%s'",
                kiln_gguf_printable(ctx->ti[dup].name, strlen(ctx->ti[dup].name), name, sizeof(name)));
        goto fail;
    }
    free(refs);
    free(name_at);
    refs = NULL;
    name_at = NULL;

    const uint64_t meta_end = r->pos;
    if (meta_end > UINT64_MAX - ctx->alignment) {
        rd_fail(r, meta_end, "metadata too large");
        goto fail;
    }
    ctx->data_offset = meta_end + (ctx->alignment - meta_end % ctx->alignment) % ctx->alignment;
    if (!check_data_layout(r, ctx)) goto fail;

    /* remember the padding choices of this file, to write it back unchanged */
    const uint64_t data_end = kiln_gguf_data_end(ctx);
    ctx->pad_meta = r->size >= ctx->data_offset;
    ctx->pad_tail = true;
    if (data_end > 0) {
        const uint64_t rem = data_end % ctx->alignment;
        const uint64_t pad = rem ? ctx->alignment - rem : 0;
        ctx->pad_tail = r->size - ctx->data_offset - data_end >= pad;
    }

    if (params.ctx && !load_tensors(r, ctx, params)) goto fail;
    return ctx;
fail:
    free(refs);
    free(name_at);
    kiln_gguf_free(ctx);
    return NULL;
}

/* ------------------------------------------------------------ entry points */

struct kiln_gguf_context * kiln_gguf_init_from_buffer(const void * data, size_t size, struct kiln_gguf_init_params params) {
    if (params.ctx) *params.ctx = NULL;
    if (!data && size > 0) {
        kiln_set_error("gguf_init_from_buffer: data is NULL");
        return NULL;
    }
    struct rd r;
    memset(&r, 0, sizeof(r));
    r.buf = data ? (const uint8_t *) data : (const uint8_t *) "";
    r.size = size;
    return parse(&r, params);
}

struct kiln_gguf_context * kiln_gguf_init_from_callback(kiln_gguf_read_callback read, void * user_data, uint64_t size,
                                                        struct kiln_gguf_init_params params) {
    if (params.ctx) *params.ctx = NULL;
    if (!read) {
        kiln_set_error("gguf_init_from_callback: read callback is NULL");
        return NULL;
    }
    struct rd r;
    memset(&r, 0, sizeof(r));
    r.size = size;
    r.cb = read;
    r.ud = user_data;
    r.win_cap = size < RD_WINDOW ? (size_t) (size ? size : 1) : RD_WINDOW;
    r.win = (uint8_t *) malloc(r.win_cap);
    if (!r.win) {
        kiln_set_error("gguf_init_from_callback: out of memory");
        return NULL;
    }
    struct kiln_gguf_context * ctx = parse(&r, params);
    free(r.win);
    return ctx;
}

static size_t file_read(void * dst, size_t size, void * user_data) {
    return fread(dst, 1, size, (FILE *) user_data);
}

struct kiln_gguf_context * kiln_gguf_init_from_file(const char * fname, struct kiln_gguf_init_params params) {
    if (params.ctx) *params.ctx = NULL;
    if (!fname) {
        kiln_set_error("gguf_init_from_file: file name is NULL");
        return NULL;
    }
    FILE * f = fopen(fname, "rb");
    if (!f) {
        kiln_set_error("gguf: cannot open '%s': %s", fname, strerror(errno));
        return NULL;
    }
    uint64_t size = 0;
#if KILN_GGUF_HAVE_MMAP
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        kiln_set_error("gguf: '%s' is not a regular file", fname);
        fclose(f);
        return NULL;
    }
    size = (uint64_t) st.st_size;
    const char * no_mmap = getenv("KILN_GGUF_NO_MMAP");
    if (size > 0 && size <= SIZE_MAX && !(no_mmap && no_mmap[0] && strcmp(no_mmap, "0") != 0)) {
        /* private writable pages: tensors that point into the mapping can be
         * modified without touching the file */
        void * m = mmap(NULL, (size_t) size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
        if (m != MAP_FAILED) {
            fclose(f);
            struct kiln_gguf_context * ctx = kiln_gguf_init_from_buffer(m, (size_t) size, params);
            if (ctx && ctx->data_in_input) {
                ctx->map = m;
                ctx->map_size = (size_t) size;
            } else {
                munmap(m, (size_t) size);
            }
            return ctx;
        }
    }
#else
    if (fseeko(f, 0, SEEK_END) != 0) {
        kiln_set_error("gguf: cannot seek in '%s'", fname);
        fclose(f);
        return NULL;
    }
    const off_t end = ftello(f);
    if (end < 0 || fseeko(f, 0, SEEK_SET) != 0) {
        kiln_set_error("gguf: cannot get the size of '%s'", fname);
        fclose(f);
        return NULL;
    }
    size = (uint64_t) end;
#endif
    /* read fallback: the stream reader, tensor data read straight into place */
    struct kiln_gguf_context * ctx = kiln_gguf_init_from_callback(file_read, f, size, params);
    fclose(f);
    return ctx;
}

void kiln_gguf_free(struct kiln_gguf_context * ctx) {
    if (!ctx) return;
    for (int64_t i = 0; i < ctx->n_kv; i++) kiln_gguf_free_kv(&ctx->kv[i]);
    free(ctx->kv);
    free(ctx->ti);
#if KILN_GGUF_HAVE_MMAP
    if (ctx->map) munmap(ctx->map, ctx->map_size);
#endif
    free(ctx);
}
