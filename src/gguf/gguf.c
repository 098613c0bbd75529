/*
 * gguf.c — the GGUF context in memory: empty contexts, getters, setters,
 * tensor bookkeeping. Reading is gguf_read.c, writing gguf_write.c.
 */
#include "gguf_internal.h"

#include <stdlib.h>

/* ------------------------------------------------------------- helpers */

static const char * const type_names[KILN_GGUF_TYPE_COUNT] = {
    [KILN_GGUF_TYPE_UINT8]   = "u8",
    [KILN_GGUF_TYPE_INT8]    = "i8",
    [KILN_GGUF_TYPE_UINT16]  = "u16",
    [KILN_GGUF_TYPE_INT16]   = "i16",
    [KILN_GGUF_TYPE_UINT32]  = "u32",
    [KILN_GGUF_TYPE_INT32]   = "i32",
    [KILN_GGUF_TYPE_FLOAT32] = "f32",
    [KILN_GGUF_TYPE_BOOL]    = "bool",
    [KILN_GGUF_TYPE_STRING]  = "str",
    [KILN_GGUF_TYPE_ARRAY]   = "arr",
    [KILN_GGUF_TYPE_UINT64]  = "u64",
    [KILN_GGUF_TYPE_INT64]   = "i64",
    [KILN_GGUF_TYPE_FLOAT64] = "f64",
};

static const uint8_t type_sizes[KILN_GGUF_TYPE_COUNT] = {
    [KILN_GGUF_TYPE_UINT8]   = 1,
    [KILN_GGUF_TYPE_INT8]    = 1,
    [KILN_GGUF_TYPE_UINT16]  = 2,
    [KILN_GGUF_TYPE_INT16]   = 2,
    [KILN_GGUF_TYPE_UINT32]  = 4,
    [KILN_GGUF_TYPE_INT32]   = 4,
    [KILN_GGUF_TYPE_FLOAT32] = 4,
    [KILN_GGUF_TYPE_BOOL]    = 1,
    [KILN_GGUF_TYPE_STRING]  = 0,
    [KILN_GGUF_TYPE_ARRAY]   = 0,
    [KILN_GGUF_TYPE_UINT64]  = 8,
    [KILN_GGUF_TYPE_INT64]   = 8,
    [KILN_GGUF_TYPE_FLOAT64] = 8,
};

const char * kiln_gguf_type_name(enum kiln_gguf_type type) {
    return (unsigned) type < KILN_GGUF_TYPE_COUNT ? type_names[type] : "invalid";
}

size_t kiln_gguf_type_size(uint32_t type) {
    return type < KILN_GGUF_TYPE_COUNT ? type_sizes[type] : 0;
}

const char * kiln_gguf_printable(const char * s, size_t len, char * buf, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len && o + 4 < size; i++) {
        const unsigned char c = (unsigned char) s[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }
    if (o + 4 >= size && o < len) { buf[o++] = '.'; buf[o++] = '.'; buf[o++] = '.'; }
    buf[o] = 0;
    return buf;
}

bool kiln_gguf_tensor_bytes(enum kiln_type type, const int64_t ne[KILN_MAX_DIMS], uint64_t * bytes) {
    if (!kiln_type_is_valid((int) type)) return false;
    const int64_t blck = kiln_blck_size(type);
    const uint64_t ts = kiln_type_size(type);
    if (ne[0] < 0 || ne[0] % blck != 0) return false;
    const uint64_t blocks = (uint64_t)(ne[0] / blck);
    if (blocks != 0 && ts > UINT64_MAX / blocks) return false;
    uint64_t b = blocks * ts;
    for (int i = 1; i < KILN_MAX_DIMS; i++) {
        if (ne[i] < 0) return false;
        if (ne[i] != 0 && b > UINT64_MAX / (uint64_t) ne[i]) return false;
        b *= (uint64_t) ne[i];
    }
    *bytes = b;
    return true;
}

static uint64_t pad_u64(uint64_t x, uint64_t align) {
    const uint64_t r = x % align;
    return r ? x + (align - r) : x;
}

uint64_t kiln_gguf_data_end(const struct kiln_gguf_context * ctx) {
    uint64_t end = 0;
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[i];
        if (t->size > 0 && t->offset + t->size > end) end = t->offset + t->size;
    }
    return end;
}

struct offset_idx { uint64_t offset; int64_t i; };

static int cmp_offset_idx(const void * a, const void * b) {
    const struct offset_idx * x = (const struct offset_idx *) a;
    const struct offset_idx * y = (const struct offset_idx *) b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

int64_t * kiln_gguf_sorted_by_offset(const struct kiln_gguf_context * ctx) {
    const int64_t n = ctx->n_tensors;
    if ((uint64_t) n > SIZE_MAX / sizeof(struct offset_idx)) {
        kiln_set_error("gguf: too many tensors to sort");
        return NULL;
    }
    struct offset_idx * tmp = (struct offset_idx *) malloc(n ? (size_t) n * sizeof(*tmp) : 1);
    int64_t * out = (int64_t *) malloc(n ? (size_t) n * sizeof(int64_t) : 1);
    if (!tmp || !out) {
        free(tmp);
        free(out);
        kiln_set_error("gguf: out of memory sorting %lld tensors", (long long) n);
        return NULL;
    }
    bool sorted = true;
    for (int64_t i = 0; i < n; i++) {
        tmp[i].offset = ctx->ti[i].offset;
        tmp[i].i = i;
        if (i > 0 && tmp[i].offset < tmp[i - 1].offset) sorted = false;
    }
    if (!sorted) qsort(tmp, (size_t) n, sizeof(*tmp), cmp_offset_idx);
    for (int64_t i = 0; i < n; i++) out[i] = tmp[i].i;
    free(tmp);
    return out;
}

int64_t kiln_gguf_find_overlap(const struct kiln_gguf_context * ctx) {
    int64_t * order = kiln_gguf_sorted_by_offset(ctx);
    if (!order) return -2;
    uint64_t max_end = 0;
    int64_t found = -1;
    for (int64_t k = 0; k < ctx->n_tensors && found < 0; k++) {
        const struct kiln_gguf_tensor_info * t = &ctx->ti[order[k]];
        if (t->size == 0) continue;
        if (t->offset < max_end) found = order[k];
        if (t->offset + t->size > max_end) max_end = t->offset + t->size;
    }
    free(order);
    return found;
}

/* re-lays the data of tensors [from, n) out contiguously after tensor from-1 */
static void relayout(struct kiln_gguf_context * ctx, int64_t from) {
    for (int64_t i = from; i < ctx->n_tensors; i++) {
        if (i == 0) {
            ctx->ti[i].offset = 0;
        } else {
            const struct kiln_gguf_tensor_info * p = &ctx->ti[i - 1];
            ctx->ti[i].offset = pad_u64(p->offset + p->size, ctx->alignment);
        }
    }
}

/* ------------------------------------------------------------ contexts */

struct kiln_gguf_context * kiln_gguf_init_empty(void) {
    struct kiln_gguf_context * ctx = (struct kiln_gguf_context *) calloc(1, sizeof(*ctx));
    if (!ctx) {
        kiln_set_error("gguf: out of memory for a context");
        return NULL;
    }
    ctx->version = KILN_GGUF_VERSION;
    ctx->alignment = KILN_GGUF_DEFAULT_ALIGNMENT;
    ctx->pad_meta = true;
    ctx->pad_tail = true;
    return ctx;
}

void kiln_gguf_free_kv(struct kiln_gguf_kv * kv) {
    free(kv->key);
    free(kv->data);
    free(kv->blob);
    memset(kv, 0, sizeof(*kv));
}

bool kiln_gguf_append_kv(struct kiln_gguf_context * ctx, struct kiln_gguf_kv * kv) {
    if (ctx->n_kv == ctx->cap_kv) {
        const int64_t cap = ctx->cap_kv ? ctx->cap_kv * 2 : 16;
        if ((uint64_t) cap > SIZE_MAX / sizeof(struct kiln_gguf_kv)) return false;
        void * p = realloc(ctx->kv, (size_t) cap * sizeof(struct kiln_gguf_kv));
        if (!p) return false;
        ctx->kv = (struct kiln_gguf_kv *) p;
        ctx->cap_kv = cap;
    }
    ctx->kv[ctx->n_kv++] = *kv;
    memset(kv, 0, sizeof(*kv));
    return true;
}

bool kiln_gguf_reserve_tensors(struct kiln_gguf_context * ctx, int64_t n) {
    if (n <= ctx->cap_tensors) return true;
    int64_t cap = ctx->cap_tensors ? ctx->cap_tensors : 16;
    while (cap < n) cap *= 2;
    if ((uint64_t) cap > SIZE_MAX / sizeof(struct kiln_gguf_tensor_info)) return false;
    void * p = realloc(ctx->ti, (size_t) cap * sizeof(struct kiln_gguf_tensor_info));
    if (!p) return false;
    ctx->ti = (struct kiln_gguf_tensor_info *) p;
    ctx->cap_tensors = cap;
    return true;
}

uint32_t kiln_gguf_get_version(const struct kiln_gguf_context * ctx) { return ctx ? ctx->version : 0; }
size_t kiln_gguf_get_alignment(const struct kiln_gguf_context * ctx) { return ctx ? ctx->alignment : 0; }
size_t kiln_gguf_get_data_offset(const struct kiln_gguf_context * ctx) {
    return ctx && ctx->data_offset <= SIZE_MAX ? (size_t) ctx->data_offset : 0;
}

/* -------------------------------------------------------------- getters */

int64_t kiln_gguf_get_n_kv(const struct kiln_gguf_context * ctx) { return ctx ? ctx->n_kv : 0; }

static bool key_is(const struct kiln_gguf_kv * kv, const char * key, size_t len) {
    return kv->key_len == len && memcmp(kv->key, key, len) == 0;
}

static int64_t find_key_n(const struct kiln_gguf_context * ctx, const char * key, size_t len) {
    for (int64_t i = 0; i < ctx->n_kv; i++) {
        if (key_is(&ctx->kv[i], key, len)) return i;
    }
    return -1;
}

int64_t kiln_gguf_find_key(const struct kiln_gguf_context * ctx, const char * key) {
    if (!ctx || !key) return -1;
    return find_key_n(ctx, key, strlen(key));
}

static const struct kiln_gguf_kv * get_kv(const struct kiln_gguf_context * ctx, int64_t key_id, const char * fn) {
    if (!ctx) {
        kiln_set_error("%s: context is NULL", fn);
        return NULL;
    }
    if (key_id < 0 || key_id >= ctx->n_kv) {
        kiln_set_error("%s: key id %lld out of range (%lld keys)", fn, (long long) key_id, (long long) ctx->n_kv);
        return NULL;
    }
    return &ctx->kv[key_id];
}

static const struct kiln_gguf_kv * get_typed(const struct kiln_gguf_context * ctx, int64_t key_id,
                                             uint32_t type, uint32_t elem_type, const char * fn) {
    const struct kiln_gguf_kv * kv = get_kv(ctx, key_id, fn);
    if (!kv) return NULL;
    if (kv->type != type || (elem_type != KILN_GGUF_TYPE_COUNT && kv->elem_type != elem_type)) {
        char k[80];
        kiln_set_error("%s: key '%s' holds %s%s%s, not %s%s%s", fn, kiln_gguf_printable(kv->key, kv->key_len, k, sizeof k),
                       kiln_gguf_type_name((enum kiln_gguf_type) kv->type),
                       kv->type == KILN_GGUF_TYPE_ARRAY ? " of " : "",
                       kv->type == KILN_GGUF_TYPE_ARRAY ? kiln_gguf_type_name((enum kiln_gguf_type) kv->elem_type) : "",
                       kiln_gguf_type_name((enum kiln_gguf_type) type),
                       type == KILN_GGUF_TYPE_ARRAY && elem_type != KILN_GGUF_TYPE_COUNT ? " of " : "",
                       type == KILN_GGUF_TYPE_ARRAY && elem_type != KILN_GGUF_TYPE_COUNT
                           ? kiln_gguf_type_name((enum kiln_gguf_type) elem_type) : "");
        return NULL;
    }
    return kv;
}

const char * kiln_gguf_get_key(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_kv(ctx, key_id, "gguf_get_key");
    return kv ? kv->key : NULL;
}

enum kiln_gguf_type kiln_gguf_get_kv_type(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_kv(ctx, key_id, "gguf_get_kv_type");
    return kv ? (enum kiln_gguf_type) kv->type : KILN_GGUF_TYPE_COUNT;
}

enum kiln_gguf_type kiln_gguf_get_arr_type(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_ARRAY, KILN_GGUF_TYPE_COUNT, "gguf_get_arr_type");
    return kv ? (enum kiln_gguf_type) kv->elem_type : KILN_GGUF_TYPE_COUNT;
}

#define KILN_GGUF_GETTER(suffix, ctype, TYPE)                                                           \
    ctype kiln_gguf_get_val_##suffix(const struct kiln_gguf_context * ctx, int64_t key_id) {            \
        const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_##TYPE,                 \
                                                   KILN_GGUF_TYPE_##TYPE, "gguf_get_val_" #suffix);    \
        ctype v;                                                                                      \
        if (!kv) return (ctype) 0;                                                                    \
        memcpy(&v, kv->data, sizeof(v));                                                              \
        return v;                                                                                     \
    }
KILN_GGUF_GETTER(u8,  uint8_t,  UINT8)
KILN_GGUF_GETTER(i8,  int8_t,   INT8)
KILN_GGUF_GETTER(u16, uint16_t, UINT16)
KILN_GGUF_GETTER(i16, int16_t,  INT16)
KILN_GGUF_GETTER(u32, uint32_t, UINT32)
KILN_GGUF_GETTER(i32, int32_t,  INT32)
KILN_GGUF_GETTER(f32, float,    FLOAT32)
KILN_GGUF_GETTER(u64, uint64_t, UINT64)
KILN_GGUF_GETTER(i64, int64_t,  INT64)
KILN_GGUF_GETTER(f64, double,   FLOAT64)
#undef KILN_GGUF_GETTER

bool kiln_gguf_get_val_bool(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_BOOL, KILN_GGUF_TYPE_BOOL, "gguf_get_val_bool");
    return kv ? *(const int8_t *) kv->data != 0 : false;
}

const char * kiln_gguf_get_val_str(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_STRING, KILN_GGUF_TYPE_STRING, "gguf_get_val_str");
    return kv ? kv->blob : NULL;
}

size_t kiln_gguf_get_val_str_len(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_STRING, KILN_GGUF_TYPE_STRING, "gguf_get_val_str_len");
    if (!kv) return 0;
    const uint64_t * offs = (const uint64_t *) kv->data;
    return (size_t)(offs[1] - offs[0] - 1);
}

const void * kiln_gguf_get_val_data(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_kv(ctx, key_id, "gguf_get_val_data");
    if (!kv) return NULL;
    if (kv->type == KILN_GGUF_TYPE_STRING || kv->type == KILN_GGUF_TYPE_ARRAY) {
        kiln_set_error("gguf_get_val_data: key '%s' is a %s, not a scalar number", kv->key,
                       kiln_gguf_type_name((enum kiln_gguf_type) kv->type));
        return NULL;
    }
    return kv->data;
}

size_t kiln_gguf_get_arr_n(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_ARRAY, KILN_GGUF_TYPE_COUNT, "gguf_get_arr_n");
    return kv ? (size_t) kv->n : 0;
}

const void * kiln_gguf_get_arr_data(const struct kiln_gguf_context * ctx, int64_t key_id) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_ARRAY, KILN_GGUF_TYPE_COUNT, "gguf_get_arr_data");
    if (!kv) return NULL;
    if (kv->elem_type == KILN_GGUF_TYPE_STRING) {
        kiln_set_error("gguf_get_arr_data: key '%s' is an array of strings: use gguf_get_arr_str", kv->key);
        return NULL;
    }
    return kv->data;
}

static const struct kiln_gguf_kv * get_arr_str_kv(const struct kiln_gguf_context * ctx, int64_t key_id, size_t i, const char * fn) {
    const struct kiln_gguf_kv * kv = get_typed(ctx, key_id, KILN_GGUF_TYPE_ARRAY, KILN_GGUF_TYPE_STRING, fn);
    if (!kv) return NULL;
    if ((uint64_t) i >= kv->n) {
        kiln_set_error("%s: index %zu out of range (%llu strings)", fn, i, (unsigned long long) kv->n);
        return NULL;
    }
    return kv;
}

const char * kiln_gguf_get_arr_str(const struct kiln_gguf_context * ctx, int64_t key_id, size_t i) {
    const struct kiln_gguf_kv * kv = get_arr_str_kv(ctx, key_id, i, "gguf_get_arr_str");
    return kv ? kv->blob + ((const uint64_t *) kv->data)[i] : NULL;
}

size_t kiln_gguf_get_arr_str_len(const struct kiln_gguf_context * ctx, int64_t key_id, size_t i) {
    const struct kiln_gguf_kv * kv = get_arr_str_kv(ctx, key_id, i, "gguf_get_arr_str_len");
    if (!kv) return 0;
    const uint64_t * offs = (const uint64_t *) kv->data;
    return (size_t)(offs[i + 1] - offs[i] - 1);
}

/* -------------------------------------------------------------- tensors */

int64_t kiln_gguf_get_n_tensors(const struct kiln_gguf_context * ctx) { return ctx ? ctx->n_tensors : 0; }

int64_t kiln_gguf_find_tensor(const struct kiln_gguf_context * ctx, const char * name) {
    if (!ctx || !name) return -1;
    for (int64_t i = 0; i < ctx->n_tensors; i++) {
        if (strcmp(ctx->ti[i].name, name) == 0) return i;
    }
    return -1;
}

static const struct kiln_gguf_tensor_info * get_ti(const struct kiln_gguf_context * ctx, int64_t id, const char * fn) {
    if (!ctx) {
        kiln_set_error("%s: context is NULL", fn);
        return NULL;
    }
    if (id < 0 || id >= ctx->n_tensors) {
        kiln_set_error("%s: tensor id %lld out of range (%lld tensors)", fn, (long long) id, (long long) ctx->n_tensors);
        return NULL;
    }
    return &ctx->ti[id];
}

size_t kiln_gguf_get_tensor_offset(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_offset");
    return t ? (size_t) t->offset : 0;
}
const char * kiln_gguf_get_tensor_name(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_name");
    return t ? t->name : NULL;
}
enum kiln_type kiln_gguf_get_tensor_type(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_type");
    return t ? t->type : KILN_TYPE_COUNT;
}
size_t kiln_gguf_get_tensor_size(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_size");
    return t ? (size_t) t->size : 0;
}
int kiln_gguf_get_tensor_n_dims(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_n_dims");
    return t ? (int) t->n_dims : 0;
}
const int64_t * kiln_gguf_get_tensor_ne(const struct kiln_gguf_context * ctx, int64_t id) {
    const struct kiln_gguf_tensor_info * t = get_ti(ctx, id, "gguf_get_tensor_ne");
    return t ? t->ne : NULL;
}

/* -------------------------------------------------------------- setters */

static bool is_alignment_key(const char * key, size_t len) {
    return len == sizeof(KILN_GGUF_KEY_GENERAL_ALIGNMENT) - 1 &&
           memcmp(key, KILN_GGUF_KEY_GENERAL_ALIGNMENT, len) == 0;
}

static void remove_at(struct kiln_gguf_context * ctx, int64_t i) {
    kiln_gguf_free_kv(&ctx->kv[i]);
    memmove(&ctx->kv[i], &ctx->kv[i + 1], (size_t)(ctx->n_kv - i - 1) * sizeof(struct kiln_gguf_kv));
    ctx->n_kv--;
}

static void set_alignment(struct kiln_gguf_context * ctx, size_t alignment) {
    if (ctx->alignment == alignment) return;
    ctx->alignment = alignment;
    relayout(ctx, 0);
}

int64_t kiln_gguf_remove_key(struct kiln_gguf_context * ctx, const char * key) {
    if (!ctx || !key) return -1;
    const size_t len = strlen(key);
    const int64_t i = find_key_n(ctx, key, len);
    if (i < 0) return -1;
    remove_at(ctx, i);
    if (is_alignment_key(key, len)) set_alignment(ctx, KILN_GGUF_DEFAULT_ALIGNMENT);
    return i;
}

static bool set_check(struct kiln_gguf_context * ctx, const char * key, const char * fn) {
    if (!ctx || !key) {
        kiln_set_error("%s: %s is NULL", fn, ctx ? "key" : "context");
        return false;
    }
    return true;
}

/* replaces or appends kv (owning its allocations, freed on failure) */
static bool commit_kv(struct kiln_gguf_context * ctx, struct kiln_gguf_kv * kv, const char * fn) {
    if (is_alignment_key(kv->key, kv->key_len)) {
        uint32_t a = 0;
        if (kv->type != KILN_GGUF_TYPE_UINT32) {
            kiln_set_error("%s: %s must be a u32, not %s", fn, KILN_GGUF_KEY_GENERAL_ALIGNMENT,
                           kiln_gguf_type_name((enum kiln_gguf_type) kv->type));
            kiln_gguf_free_kv(kv);
            return false;
        }
        memcpy(&a, kv->data, sizeof(a));
        if (a == 0 || (a & (a - 1)) != 0) {
            kiln_set_error("%s: %s = %u is not a power of 2", fn, KILN_GGUF_KEY_GENERAL_ALIGNMENT, a);
            kiln_gguf_free_kv(kv);
            return false;
        }
        if (a > KILN_GGUF_MAX_ALIGNMENT) {
            kiln_set_error("%s: %s = %u is larger than %u", fn, KILN_GGUF_KEY_GENERAL_ALIGNMENT, a, KILN_GGUF_MAX_ALIGNMENT);
            kiln_gguf_free_kv(kv);
            return false;
        }
    }
    const int64_t old = find_key_n(ctx, kv->key, kv->key_len);
    if (old >= 0) remove_at(ctx, old);
    const bool align = is_alignment_key(kv->key, kv->key_len);
    uint32_t a = 0;
    if (align) memcpy(&a, kv->data, sizeof(a));
    if (!kiln_gguf_append_kv(ctx, kv)) {
        kiln_set_error("%s: out of memory", fn);
        kiln_gguf_free_kv(kv);
        return false;
    }
    if (align) set_alignment(ctx, a);
    return true;
}

static char * dup_bytes(const char * s, size_t len) {
    if (len == SIZE_MAX) return NULL;
    char * p = (char *) malloc(len + 1);
    if (!p) return NULL;
    if (len) memcpy(p, s, len);
    p[len] = 0;
    return p;
}

static bool set_values(struct kiln_gguf_context * ctx, const char * key, uint32_t type, uint32_t elem_type,
                       const void * data, size_t n, const char * fn) {
    if (!set_check(ctx, key, fn)) return false;
    const size_t es = kiln_gguf_type_size(elem_type);
    if (es == 0) {
        kiln_set_error("%s: %s is not a numeric value type", fn, kiln_gguf_type_name((enum kiln_gguf_type) elem_type));
        return false;
    }
    if (n > SIZE_MAX / es || (n > 0 && !data)) {
        kiln_set_error("%s: %s", fn, n > 0 && !data ? "data is NULL" : "array too large");
        return false;
    }
    struct kiln_gguf_kv kv = { 0 };
    kv.key_len = strlen(key);
    kv.key = dup_bytes(key, kv.key_len);
    kv.type = type;
    kv.elem_type = elem_type;
    kv.n = n;
    kv.data = malloc(n > 0 ? n * es : 1);
    if (!kv.key || !kv.data) {
        kiln_gguf_free_kv(&kv);
        kiln_set_error("%s: out of memory", fn);
        return false;
    }
    if (n) memcpy(kv.data, data, n * es);
    return commit_kv(ctx, &kv, fn);
}

#define KILN_GGUF_SETTER(suffix, ctype, TYPE)                                                            \
    bool kiln_gguf_set_val_##suffix(struct kiln_gguf_context * ctx, const char * key, ctype val) {      \
        return set_values(ctx, key, KILN_GGUF_TYPE_##TYPE, KILN_GGUF_TYPE_##TYPE, &val, 1,              \
                          "gguf_set_val_" #suffix);                                                    \
    }
KILN_GGUF_SETTER(u8,  uint8_t,  UINT8)
KILN_GGUF_SETTER(i8,  int8_t,   INT8)
KILN_GGUF_SETTER(u16, uint16_t, UINT16)
KILN_GGUF_SETTER(i16, int16_t,  INT16)
KILN_GGUF_SETTER(u32, uint32_t, UINT32)
KILN_GGUF_SETTER(i32, int32_t,  INT32)
KILN_GGUF_SETTER(f32, float,    FLOAT32)
KILN_GGUF_SETTER(u64, uint64_t, UINT64)
KILN_GGUF_SETTER(i64, int64_t,  INT64)
KILN_GGUF_SETTER(f64, double,   FLOAT64)
#undef KILN_GGUF_SETTER

bool kiln_gguf_set_val_bool(struct kiln_gguf_context * ctx, const char * key, bool val) {
    const int8_t v = val ? 1 : 0;
    return set_values(ctx, key, KILN_GGUF_TYPE_BOOL, KILN_GGUF_TYPE_BOOL, &v, 1, "gguf_set_val_bool");
}

/* n strings (strs[i], lens[i] bytes) as one kv */
static bool set_strings(struct kiln_gguf_context * ctx, const char * key, uint32_t type,
                        const char * const * strs, const size_t * lens, size_t n, const char * fn) {
    if (!set_check(ctx, key, fn)) return false;
    if (n > 0 && !strs) {
        kiln_set_error("%s: data is NULL", fn);
        return false;
    }
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strs[i]) {
            kiln_set_error("%s: string %zu is NULL", fn, i);
            return false;
        }
        const size_t len = lens ? lens[i] : strlen(strs[i]);
        if (len >= SIZE_MAX - total) {
            kiln_set_error("%s: strings too large", fn);
            return false;
        }
        total += len + 1;
    }
    if (n >= SIZE_MAX / sizeof(uint64_t)) {
        kiln_set_error("%s: array too large", fn);
        return false;
    }
    struct kiln_gguf_kv kv = { 0 };
    kv.key_len = strlen(key);
    kv.key = dup_bytes(key, kv.key_len);
    kv.type = type;
    kv.elem_type = KILN_GGUF_TYPE_STRING;
    kv.n = n;
    kv.data = malloc((n + 1) * sizeof(uint64_t));
    kv.blob = (char *) malloc(total ? total : 1);
    if (!kv.key || !kv.data || !kv.blob) {
        kiln_gguf_free_kv(&kv);
        kiln_set_error("%s: out of memory", fn);
        return false;
    }
    uint64_t * offs = (uint64_t *) kv.data;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t len = lens ? lens[i] : strlen(strs[i]);
        offs[i] = o;
        if (len) memcpy(kv.blob + o, strs[i], len);
        kv.blob[o + len] = 0;
        o += len + 1;
    }
    offs[n] = o;
    if (n == 0) kv.blob[0] = 0;
    return commit_kv(ctx, &kv, fn);
}

bool kiln_gguf_set_val_str_n(struct kiln_gguf_context * ctx, const char * key, const char * val, size_t len) {
    return set_strings(ctx, key, KILN_GGUF_TYPE_STRING, &val, &len, 1, "gguf_set_val_str");
}

bool kiln_gguf_set_val_str(struct kiln_gguf_context * ctx, const char * key, const char * val) {
    const size_t len = val ? strlen(val) : 0;
    return set_strings(ctx, key, KILN_GGUF_TYPE_STRING, &val, &len, 1, "gguf_set_val_str");
}

bool kiln_gguf_set_arr_data(struct kiln_gguf_context * ctx, const char * key, enum kiln_gguf_type type,
                            const void * data, size_t n) {
    if ((unsigned) type >= KILN_GGUF_TYPE_COUNT || type == KILN_GGUF_TYPE_STRING || type == KILN_GGUF_TYPE_ARRAY) {
        kiln_set_error("gguf_set_arr_data: element type %d is not a numeric type (strings: gguf_set_arr_str)", (int) type);
        return false;
    }
    return set_values(ctx, key, KILN_GGUF_TYPE_ARRAY, (uint32_t) type, data, n, "gguf_set_arr_data");
}

bool kiln_gguf_set_arr_str(struct kiln_gguf_context * ctx, const char * key, const char ** data, size_t n) {
    return set_strings(ctx, key, KILN_GGUF_TYPE_ARRAY, data, NULL, n, "gguf_set_arr_str");
}

static bool clone_kv(struct kiln_gguf_kv * dst, const struct kiln_gguf_kv * src) {
    memset(dst, 0, sizeof(*dst));
    *dst = *src;
    dst->key = dup_bytes(src->key, src->key_len);
    dst->data = NULL;
    dst->blob = NULL;
    size_t data_bytes, blob_bytes = 0;
    if (src->elem_type == KILN_GGUF_TYPE_STRING) {
        data_bytes = (size_t)(src->n + 1) * sizeof(uint64_t);
        blob_bytes = (size_t) ((const uint64_t *) src->data)[src->n];
    } else {
        data_bytes = (size_t) src->n * kiln_gguf_type_size(src->elem_type);
    }
    dst->data = malloc(data_bytes ? data_bytes : 1);
    if (src->blob) dst->blob = (char *) malloc(blob_bytes ? blob_bytes : 1);
    if (!dst->key || !dst->data || (src->blob && !dst->blob)) {
        kiln_gguf_free_kv(dst);
        return false;
    }
    if (data_bytes) memcpy(dst->data, src->data, data_bytes);
    if (blob_bytes) memcpy(dst->blob, src->blob, blob_bytes);
    return true;
}

bool kiln_gguf_set_kv(struct kiln_gguf_context * ctx, const struct kiln_gguf_context * src) {
    if (!ctx || !src) {
        kiln_set_error("gguf_set_kv: context is NULL");
        return false;
    }
    if (ctx == src) return true;
    for (int64_t i = 0; i < src->n_kv; i++) {
        struct kiln_gguf_kv kv;
        if (!clone_kv(&kv, &src->kv[i])) {
            kiln_set_error("gguf_set_kv: out of memory");
            return false;
        }
        if (!commit_kv(ctx, &kv, "gguf_set_kv")) return false;
    }
    return true;
}

bool kiln_gguf_add_tensor(struct kiln_gguf_context * ctx, const struct kiln_tensor * tensor) {
    if (!ctx || !tensor) {
        kiln_set_error("gguf_add_tensor: %s is NULL", ctx ? "tensor" : "context");
        return false;
    }
    if (!kiln_type_is_valid((int) tensor->type)) {
        kiln_set_error("gguf_add_tensor: tensor '%s' has invalid type id %d", tensor->name, (int) tensor->type);
        return false;
    }
    if (memchr(tensor->name, 0, sizeof(tensor->name)) == NULL) {
        kiln_set_error("gguf_add_tensor: tensor name is not terminated");
        return false;
    }
    if (kiln_gguf_find_tensor(ctx, tensor->name) >= 0) {
        kiln_set_error("gguf_add_tensor: duplicate tensor name '%s'", tensor->name);
        return false;
    }
    if (!kiln_is_contiguous(tensor)) {
        kiln_set_error("gguf_add_tensor: tensor '%s' is not contiguous", tensor->name);
        return false;
    }
    for (int i = 0; i < KILN_MAX_DIMS; i++) {
        if (tensor->ne[i] == 0) {
            /* readers refuse it (llama.cpp's divides by the extents) */
            kiln_set_error("gguf_add_tensor: tensor '%s' has ne[%d] = 0; a GGUF tensor holds at least one element", tensor->name, i);
            return false;
        }
    }
    uint64_t bytes;
    if (!kiln_gguf_tensor_bytes(tensor->type, tensor->ne, &bytes)) {
        kiln_set_error("gguf_add_tensor: tensor '%s' has an invalid shape", tensor->name);
        return false;
    }
    if (!kiln_gguf_reserve_tensors(ctx, ctx->n_tensors + 1)) {
        kiln_set_error("gguf_add_tensor: out of memory");
        return false;
    }
    struct kiln_gguf_tensor_info * t = &ctx->ti[ctx->n_tensors];
    memset(t, 0, sizeof(*t));
    memcpy(t->name, tensor->name, sizeof(t->name));
    t->n_dims = 1;
    for (int i = KILN_MAX_DIMS - 1; i >= 1; i--) {
        if (tensor->ne[i] != 1) { t->n_dims = (uint32_t) i + 1; break; }
    }
    for (int i = 0; i < KILN_MAX_DIMS; i++) t->ne[i] = tensor->ne[i];
    t->type = tensor->type;
    t->offset = pad_u64(kiln_gguf_data_end(ctx), ctx->alignment);
    t->size = bytes;
    t->data = tensor->data;
    ctx->n_tensors++;
    return true;
}

static int64_t find_tensor_or_fail(struct kiln_gguf_context * ctx, const char * name, const char * fn) {
    if (!ctx || !name) {
        kiln_set_error("%s: %s is NULL", fn, ctx ? "name" : "context");
        return -1;
    }
    const int64_t i = kiln_gguf_find_tensor(ctx, name);
    if (i < 0) kiln_set_error("%s: no tensor named '%s'", fn, name);
    return i;
}

bool kiln_gguf_set_tensor_type(struct kiln_gguf_context * ctx, const char * name, enum kiln_type type) {
    const int64_t i = find_tensor_or_fail(ctx, name, "gguf_set_tensor_type");
    if (i < 0) return false;
    struct kiln_gguf_tensor_info * t = &ctx->ti[i];
    uint64_t bytes;
    if (!kiln_type_is_valid((int) type) || !kiln_gguf_tensor_bytes(type, t->ne, &bytes)) {
        kiln_set_error("gguf_set_tensor_type: tensor '%s' [%lld, ...] cannot have type %s (ne[0] must be a multiple of the block size)",
                       name, (long long) t->ne[0], kiln_type_name(type));
        return false;
    }
    t->type = type;
    t->size = bytes;
    t->data = NULL;
    relayout(ctx, i + 1);
    /* tensors stored out of index order may now collide: lay all out anew */
    if (kiln_gguf_find_overlap(ctx) != -1) relayout(ctx, 0);
    return true;
}

bool kiln_gguf_set_tensor_data(struct kiln_gguf_context * ctx, const char * name, const void * data) {
    const int64_t i = find_tensor_or_fail(ctx, name, "gguf_set_tensor_data");
    if (i < 0) return false;
    ctx->ti[i].data = data;
    return true;
}
