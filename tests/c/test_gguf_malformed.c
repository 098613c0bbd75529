/*
 * test_gguf_malformed.c — a corpus of malformed GGUF files, built here from
 * a small valid file: one or more cases per failure class (bad magic,
 * versions, absurd counts, over-long strings and arrays, unknown types,
 * bad shapes, data outside the file or overlapping, misalignment, bad
 * general.alignment, duplicates), truncation at every section boundary and
 * at every byte of the metadata. Each must be rejected — from a buffer and
 * from a stream, with and without loading data — with the expected message
 * and byte offset, without crashing or over-allocating (the sanitizer build
 * aborts on allocations larger than the machine).
 */
#include "util/test_util.h"
#include "kiln-gguf.h"

#include <stdlib.h>
#include <string.h>

static int n_cases = 0;

/* ---------------------------------------------------------- the builder */

struct bb {
    uint8_t * p;
    size_t n, cap;
};

static size_t bb_put(struct bb * b, const void * src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = (uint8_t *) realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return b->n - n;
}
static size_t bb_u32(struct bb * b, uint32_t v) { return bb_put(b, &v, 4); }
static size_t bb_u64(struct bb * b, uint64_t v) { return bb_put(b, &v, 8); }
static size_t bb_str(struct bb * b, const char * s) {
    const size_t at = bb_u64(b, strlen(s));
    bb_put(b, s, strlen(s));
    return at;
}

#define N_KV 5
#define N_TI 3

/* where each field of the base file lies */
struct offs {
    size_t key[N_KV], type[N_KV], val[N_KV];
    size_t str1_len;         /* length of the 2nd string of test.tokens */
    size_t arr_etype, arr_n; /* test.bbb's element type and count */
    size_t toks_n;           /* test.tokens' count */
    size_t align_val;
    size_t ti_name[N_TI], ti_ndims[N_TI], ti_ne[N_TI][4], ti_type[N_TI], ti_off[N_TI];
    size_t meta_end, data_offset, data[N_TI], end;
};

/* The base file (valid): 5 KV pairs (a string, general.alignment, a u32, a
 * string array, an f32 array), 3 tensors: w0 f32 [32, 2] at 0, w1 q4_0 [64]
 * at 256, w2 f16 [4, 2, 2] at 320; 352 bytes of data. */
static struct bb build_base(struct offs * o) {
    struct bb b = { NULL, 0, 0 };
    bb_put(&b, "GGUF", 4);
    bb_u32(&b, 3);
    bb_u64(&b, N_TI);
    bb_u64(&b, N_KV);
    o->key[0] = bb_str(&b, "general.architecture");
    o->type[0] = bb_u32(&b, KILN_GGUF_TYPE_STRING);
    o->val[0] = bb_str(&b, "test");
    o->key[1] = bb_str(&b, "general.alignment");
    o->type[1] = bb_u32(&b, KILN_GGUF_TYPE_UINT32);
    o->val[1] = o->align_val = bb_u32(&b, 32);
    o->key[2] = bb_str(&b, "test.aaa");
    o->type[2] = bb_u32(&b, KILN_GGUF_TYPE_UINT32);
    o->val[2] = bb_u32(&b, 7);
    o->key[3] = bb_str(&b, "test.tokens");
    o->type[3] = bb_u32(&b, KILN_GGUF_TYPE_ARRAY);
    o->val[3] = bb_u32(&b, KILN_GGUF_TYPE_STRING);
    o->toks_n = bb_u64(&b, 3);
    bb_str(&b, "a");
    o->str1_len = bb_str(&b, "bc");
    bb_str(&b, "def");
    o->key[4] = bb_str(&b, "test.bbb");
    o->type[4] = bb_u32(&b, KILN_GGUF_TYPE_ARRAY);
    o->val[4] = o->arr_etype = bb_u32(&b, KILN_GGUF_TYPE_FLOAT32);
    o->arr_n = bb_u64(&b, 4);
    const float f[4] = { 1, 2, 3, 4 };
    bb_put(&b, f, sizeof f);
    static const char * names[N_TI] = { "w0", "w1", "w2" };
    static const uint32_t nd[N_TI] = { 2, 1, 3 };
    static const int64_t ne[N_TI][3] = { { 32, 2, 0 }, { 64, 0, 0 }, { 4, 2, 2 } };
    static const uint32_t ty[N_TI] = { KILN_TYPE_F32, KILN_TYPE_Q4_0, KILN_TYPE_F16 };
    static const uint64_t off[N_TI] = { 0, 256, 320 };
    for (int i = 0; i < N_TI; i++) {
        o->ti_name[i] = bb_str(&b, names[i]);
        o->ti_ndims[i] = bb_u32(&b, nd[i]);
        for (uint32_t j = 0; j < nd[i]; j++) o->ti_ne[i][j] = bb_u64(&b, (uint64_t) ne[i][j]);
        o->ti_type[i] = bb_u32(&b, ty[i]);
        o->ti_off[i] = bb_u64(&b, off[i]);
    }
    o->meta_end = b.n;
    while (b.n % 32) bb_put(&b, "", 1);
    o->data_offset = b.n;
    uint8_t data[352];
    for (int i = 0; i < 352; i++) data[i] = (uint8_t)(i * 7 + 1);
    memset(data + 256 + 36, 0, 28); /* padding after w1 */
    bb_put(&b, data, sizeof data);
    for (int i = 0; i < N_TI; i++) o->data[i] = o->data_offset + off[i];
    o->end = b.n;
    return b;
}

static void patch(struct bb * b, size_t at, const void * v, size_t n) { memcpy(b->p + at, v, n); }
static void patch_u32(struct bb * b, size_t at, uint32_t v) { patch(b, at, &v, 4); }
static void patch_u64(struct bb * b, size_t at, uint64_t v) { patch(b, at, &v, 8); }

/* ------------------------------------------------------------- checking */

struct stream { const uint8_t * p; size_t n, pos, stop; };

static size_t stream_read(void * dst, size_t size, void * ud) {
    struct stream * s = (struct stream *) ud;
    size_t n = size < 5 ? size : 5; /* tiny chunks: every boundary is crossed mid-read */
    if (n > s->stop - s->pos) n = s->stop - s->pos;
    memcpy(dst, s->p + s->pos, n);
    s->pos += n;
    return n;
}

/* The bytes must be rejected with a message containing `want` and, when
 * at != SIZE_MAX, naming byte offset `at`: from a buffer (metadata only and
 * with data into a context) and from a stream, all with the same message. */
static void expect_reject(const uint8_t * p, size_t n, const char * what, const char * want, size_t at) {
    n_cases++;
    char msg[512];
    struct kiln_gguf_init_params meta = { true, NULL, false };
    kiln_clear_error();
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(p, n, meta);
    snprintf(msg, sizeof msg, "%s", kiln_last_error());
    CHECK(g == NULL, "%s: rejected", what);
    kiln_gguf_free(g);
    CHECK(strstr(msg, "gguf: ") == msg && strstr(msg, want) != NULL, "%s: message has '%s': %s", what, want, msg);
    if (at != SIZE_MAX) {
        char off[64];
        snprintf(off, sizeof off, "at byte offset %zu", at);
        CHECK(strstr(msg, off) != NULL, "%s: message has '%s': %s", what, off, msg);
    } else {
        CHECK(strstr(msg, "at byte offset ") != NULL, "%s: message names a byte offset: %s", what, msg);
    }
    /* with data into a context: same verdict, no context left behind */
    struct kiln_context * kctx = (struct kiln_context *) 1;
    struct kiln_gguf_init_params load = { false, &kctx, false };
    g = kiln_gguf_init_from_buffer(p, n, load);
    CHECK(g == NULL && kctx == NULL && strcmp(kiln_last_error(), msg) == 0, "%s: rejected when loading data: %s", what, kiln_last_error());
    kiln_gguf_free(g);
    /* streamed */
    struct stream s = { p, n, 0, n };
    kctx = NULL;
    g = kiln_gguf_init_from_callback(stream_read, &s, n, load);
    CHECK(g == NULL && kctx == NULL && strcmp(kiln_last_error(), msg) == 0, "%s: rejected when streamed: %s", what, kiln_last_error());
    kiln_gguf_free(g);
}

/* base file with one patch applied */
#define CASE_U32(field, value, want, at) do {                      \
        struct offs o_; struct bb b_ = build_base(&o_);            \
        patch_u32(&b_, (field), (value));                          \
        expect_reject(b_.p, b_.n, #field " = " #value, want, at);  \
        free(b_.p);                                                \
    } while (0)
#define CASE_U64(field, value, want, at) do {                      \
        struct offs o_; struct bb b_ = build_base(&o_);            \
        patch_u64(&b_, (field), (uint64_t)(value));                \
        expect_reject(b_.p, b_.n, #field " = " #value, want, at);  \
        free(b_.p);                                                \
    } while (0)

/* ----------------------------------------------------------------- cases */

static void test_base_is_valid(void) {
    tu_case = "base file";
    struct offs o;
    struct bb b = build_base(&o);
    struct kiln_context * kctx = NULL;
    struct kiln_gguf_init_params p = { false, &kctx, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(b.p, b.n, p);
    CHECK(g && kctx, "the base file is valid: %s", kiln_last_error());
    if (g) {
        CHECK(kiln_gguf_get_n_kv(g) == N_KV && kiln_gguf_get_n_tensors(g) == N_TI, "counts");
        CHECK(kiln_gguf_get_data_offset(g) == o.data_offset, "data offset");
        struct kiln_tensor * w1 = kiln_get_tensor(kctx, "w1");
        CHECK(w1 && w1->type == KILN_TYPE_Q4_0 && memcmp(w1->data, b.p + o.data[1], 36) == 0, "w1 data");
        size_t n = kiln_gguf_get_write_size(g, false);
        uint8_t * w = (uint8_t *) malloc(n);
        CHECK(kiln_gguf_write_to_buffer(g, w, n, false) == b.n && memcmp(w, b.p, b.n) == 0, "base file round trips");
        free(w);
    }
    kiln_gguf_free(g);
    kiln_free(kctx);
    /* version 2 files read the same and are written back as version 2 */
    patch_u32(&b, 4, 2);
    g = kiln_gguf_init_from_buffer(b.p, b.n, p);
    CHECK(g && kiln_gguf_get_version(g) == 2, "v2 file: %s", kiln_last_error());
    if (g) {
        size_t n = kiln_gguf_get_write_size(g, false);
        uint8_t * w = (uint8_t *) malloc(n);
        CHECK(kiln_gguf_write_to_buffer(g, w, n, false) == b.n && memcmp(w, b.p, b.n) == 0, "v2 file round trips as v2");
        free(w);
    }
    kiln_gguf_free(g);
    kiln_free(kctx);
    /* trailing bytes after the data are tolerated (and not copied) */
    bb_put(&b, "junk", 4);
    g = kiln_gguf_init_from_buffer(b.p, b.n, p);
    CHECK(g != NULL, "trailing bytes accepted");
    kiln_gguf_free(g);
    kiln_free(kctx);
    free(b.p);
}

static void test_header(void) {
    tu_case = "header";
    struct offs o;
    struct bb b0 = build_base(&o);
    free(b0.p);
    CASE_U32(0, 0x47554746u /* "FGUG" */, "bad magic 46 47 55 47 (not a GGUF file)", 0);
    CASE_U32(0, 0, "bad magic", 0);
    CASE_U32(0, 0x47475546u /* "FUGG" */, "bad magic 46 55 47 47", 0);
    CASE_U32(4, 1, "GGUF version 1 is not supported", 4);
    CASE_U32(4, 0, "unsupported GGUF version 0", 4);
    CASE_U32(4, 4, "unsupported GGUF version 4", 4);
    CASE_U32(4, 0xFFFFFFFFu, "unsupported GGUF version 4294967295", 4);
    CASE_U32(4, 0x03000000u, "big-endian GGUF files are not supported", 4);
    CASE_U32(4, 0x02000000u, "big-endian", 4);
    /* counts no file of this size could hold */
    CASE_U64(8, UINT64_MAX, "tensor count 18446744073709551615 cannot fit", 8);
    CASE_U64(8, 1ull << 40, "tensor count 1099511627776 cannot fit", 8);
    CASE_U64(8, (o.end - 24) / 32 + 1, "tensor count", 8);
    CASE_U64(16, UINT64_MAX, "key-value count 18446744073709551615 cannot fit", 16);
    CASE_U64(16, 1ull << 59, "key-value count", 16);
    CASE_U64(16, (o.end - 24) / 13 + 1, "key-value count", 16);
    {
        /* each fits alone, not together */
        struct bb b = build_base(&o);
        patch_u64(&b, 8, (o.end - 24) / 32);
        patch_u64(&b, 16, (o.end - 24) / 13);
        expect_reject(b.p, b.n, "joint counts", "cannot fit together", 8);
        free(b.p);
    }
}

static void test_kv(void) {
    tu_case = "key-value pairs";
    struct offs o;
    struct bb b0 = build_base(&o);
    free(b0.p);
    /* strings longer than the file */
    CASE_U64(o.key[0], 1ull << 40, "key: string of 1099511627776 bytes runs past the end of the file", o.key[0]);
    CASE_U64(o.key[2], UINT64_MAX, "runs past the end of the file", o.key[2]);
    CASE_U64(o.key[2], o.end - o.key[2] - 8 + 1, "runs past the end of the file", o.key[2]);
    CASE_U64(o.val[0], 1ull << 62, "string value of key 'general.architecture': 4611686018427387904 bytes run past", o.val[0]);
    CASE_U64(o.str1_len, 1ull << 33, "string 1 of key 'test.tokens'", o.str1_len);
    /* arrays longer than the file */
    CASE_U64(o.toks_n, 1ull << 61, "array of 2305843009213693952 strings for key 'test.tokens' runs past", o.toks_n);
    CASE_U64(o.toks_n, UINT64_MAX, "strings for key 'test.tokens' runs past", o.toks_n);
    CASE_U64(o.arr_n, 1ull << 60, "array of 1152921504606846976 f32 values for key 'test.bbb' runs past", o.arr_n);
    CASE_U64(o.arr_n, UINT64_MAX / 4 + 2, "runs past the end of the file", o.arr_n);
    /* unknown value types */
    /* a key must have a name (the spec; llama.cpp rejects it too) */
    CASE_U64(o.key[2], 0, "key-value 2: the key is the empty string", o.key[2]);
    CASE_U64(o.key[0], 0, "key-value 0: the key is the empty string", o.key[0]);
    CASE_U32(o.type[2], 13, "unknown value type 13 for key 'test.aaa'", o.type[2]);
    CASE_U32(o.type[2], 0xFFFFFFFFu, "unknown value type 4294967295", o.type[2]);
    CASE_U32(o.arr_etype, 13, "unknown value type 13 for the elements of array key 'test.bbb'", o.arr_etype);
    CASE_U32(o.arr_etype, KILN_GGUF_TYPE_ARRAY, "arrays of arrays are not supported (key 'test.bbb')", o.arr_etype);
    /* duplicate keys */
    {
        struct bb b = build_base(&o);
        patch(&b, o.key[4] + 8, "test.aaa", 8);
        expect_reject(b.p, b.n, "duplicate key", "duplicate key 'test.aaa'", o.key[4]);
        free(b.p);
    }
    /* general.alignment: 0, not a power of two, wrong types */
    CASE_U32(o.align_val, 0, "general.alignment = 0 is not a power of 2", o.align_val);
    CASE_U32(o.align_val, 48, "general.alignment = 48 is not a power of 2", o.align_val);
    CASE_U32(o.align_val, 0x80000001u, "is not a power of 2", o.align_val);
    CASE_U32(o.align_val, 0x80000000u, "general.alignment = 2147483648 is larger than 1048576", o.align_val);
    CASE_U32(o.align_val, 1u << 21, "general.alignment = 2097152 is larger than 1048576", o.align_val);
    CASE_U32(o.type[1], KILN_GGUF_TYPE_INT32, "general.alignment must be a u32, not i32", o.type[1]);
    CASE_U32(o.type[1], KILN_GGUF_TYPE_FLOAT32, "general.alignment must be a u32, not f32", o.type[1]);
    CASE_U32(o.type[1], KILN_GGUF_TYPE_UINT16, "general.alignment must be a u32, not u16", o.type[1]);
    CASE_U32(o.type[1], KILN_GGUF_TYPE_UINT8, "general.alignment must be a u32, not u8", o.type[1]);
    /* a larger valid alignment the offsets do not respect */
    CASE_U32(o.align_val, 512, "tensor 'w1': data offset 256 is not aligned to 512 bytes", o.ti_off[1]);
}

static void test_tensor_infos(void) {
    tu_case = "tensor infos";
    struct offs o;
    struct bb b0 = build_base(&o);
    free(b0.p);
    /* names */
    CASE_U64(o.ti_name[0], 1ull << 50, "tensor name of 1125899906842624 bytes runs past the end of the file", o.ti_name[0]);
    CASE_U64(o.ti_name[1], 64, "tensor name of 64 bytes is too long (at most 63)", o.ti_name[1]);
    {
        struct bb b = build_base(&o);
        patch(&b, o.ti_name[2] + 8, "w0", 2);
        expect_reject(b.p, b.n, "duplicate tensor", "duplicate tensor name 'w0'", o.ti_name[2]);
        free(b.p);
        b = build_base(&o);
        patch(&b, o.ti_name[1] + 9, "", 1);
        expect_reject(b.p, b.n, "NUL in name", "tensor name 'w?' contains a NUL byte", o.ti_name[1]);
        free(b.p);
    }
    /* dimensions */
    CASE_U32(o.ti_ndims[0], 0, "tensor 'w0': n_dims = 0 is outside 1..4", o.ti_ndims[0]);
    CASE_U32(o.ti_ndims[0], 5, "tensor 'w0': n_dims = 5 is outside 1..4", o.ti_ndims[0]);
    CASE_U32(o.ti_ndims[2], 0xFFFFFFFFu, "n_dims = 4294967295 is outside", o.ti_ndims[2]);
    CASE_U64(o.ti_ne[0][1], (uint64_t) -2, "tensor 'w0': ne[1] = -2 is negative", o.ti_ne[0][1]);
    CASE_U64(o.ti_ne[2][0], (uint64_t) INT64_MIN, "ne[0] = -9223372036854775808 is negative", o.ti_ne[2][0]);
    /* llama.cpp's reader divides by the dimensions (SIGFPE on a zero) */
    CASE_U64(o.ti_ne[0][1], 0, "tensor 'w0': ne[1] = 0 (a tensor holds at least one element)", o.ti_ne[0][1]);
    CASE_U64(o.ti_ne[1][0], 0, "tensor 'w1': ne[0] = 0 (a tensor holds at least one element)", o.ti_ne[1][0]);
    {
        struct bb b = build_base(&o);
        patch_u64(&b, o.ti_ne[0][0], 1ull << 32);
        patch_u64(&b, o.ti_ne[0][1], 1ull << 32);
        expect_reject(b.p, b.n, "element overflow", "tensor 'w0': element count overflows int64 at ne[1]", o.ti_ne[0][1]);
        free(b.p);
        b = build_base(&o);
        patch_u64(&b, o.ti_ne[2][0], 1ull << 31);
        patch_u64(&b, o.ti_ne[2][1], 1ull << 31);
        patch_u64(&b, o.ti_ne[2][2], 1ull << 2);
        expect_reject(b.p, b.n, "element overflow (3 dims)", "element count overflows int64 at ne[2]", o.ti_ne[2][2]);
        free(b.p);
        /* 2^62 f64 elements: a valid count whose byte size overflows */
        b = build_base(&o);
        patch_u32(&b, o.ti_type[0], KILN_TYPE_F64);
        patch_u64(&b, o.ti_ne[0][0], 1ull << 61);
        expect_reject(b.p, b.n, "byte size overflow", "tensor 'w0': byte size of 4611686018427387904 f64 elements overflows", o.ti_type[0]);
        free(b.p);
    }
    /* tensor types */
    CASE_U32(o.ti_type[1], 4, "tensor 'w1': invalid tensor type 4", o.ti_type[1]);
    CASE_U32(o.ti_type[1], 31, "invalid tensor type 31", o.ti_type[1]);
    CASE_U32(o.ti_type[1], KILN_TYPE_COUNT, "invalid tensor type 39", o.ti_type[1]);
    CASE_U32(o.ti_type[1], 0x80000000u, "invalid tensor type 2147483648", o.ti_type[1]);
    /* rows must be whole blocks */
    CASE_U64(o.ti_ne[1][0], 48, "tensor 'w1': ne[0] = 48 is not a multiple of the block size 32 of type q4_0", o.ti_type[1]);
    CASE_U32(o.ti_type[0], KILN_TYPE_Q4_K, "ne[0] = 32 is not a multiple of the block size 256 of type q4_K", o.ti_type[0]);
    /* offsets */
    CASE_U64(o.ti_off[1], 260, "tensor 'w1': data offset 260 is not aligned to 32 bytes", o.ti_off[1]);
    CASE_U64(o.ti_off[2], 1, "data offset 1 is not aligned", o.ti_off[2]);
}

static void test_data_layout(void) {
    tu_case = "data layout";
    struct offs o;
    struct bb b0 = build_base(&o);
    free(b0.p);
    CASE_U64(o.ti_off[2], 1 << 20, "tensor 'w2': 32 bytes of data at data offset 1048576 lie outside the file", o.data_offset + (1 << 20));
    CASE_U64(o.ti_off[2], 0xFFFFFFFFFFFFFFE0ull, "lie outside the file", SIZE_MAX);
    CASE_U64(o.ti_off[0], 352, "tensor 'w0': 256 bytes of data at data offset 352 lie outside the file", o.data_offset + 352);
    /* overlaps */
    CASE_U64(o.ti_off[2], 0, "tensor 'w2': data at data offset 0 (32 bytes) overlaps tensor 'w0'", o.data_offset);
    CASE_U64(o.ti_off[1], 224, "tensor 'w1': data at data offset 224 (36 bytes) overlaps tensor 'w0' (data offset 0, 256 bytes)", o.data_offset + 224);
    CASE_U64(o.ti_off[0], 32, "tensor 'w1': data at data offset 256 (36 bytes) overlaps tensor 'w0' (data offset 32, 256 bytes)", o.data[1]);
    /* packed layout (llama.cpp requires it): in file order each tensor
     * starts at the previous offset plus its size rounded up to the alignment */
    {
        /* a 32-byte gap before w2 */
        struct bb b = build_base(&o);
        uint8_t more[64] = { 0 };
        bb_put(&b, more, sizeof more);
        patch_u64(&b, o.ti_off[2], 352);
        expect_reject(b.p, b.n, "gap before w2",
                      "tensor 'w2': data offset 352, but the packed layout puts it at 320 (the previous tensor's offset plus its size rounded up to 32 bytes)",
                      o.data_offset + 352);
        free(b.p);
    }
    {
        /* w1 before w0 in the data, after it in the infos: no overlap, no gap, but not in file order */
        struct bb b = build_base(&o);
        patch_u64(&b, o.ti_off[0], 64);
        patch_u64(&b, o.ti_off[1], 0);
        expect_reject(b.p, b.n, "reordered data", "tensor 'w0': data offset 64, but the packed layout puts it at 0", o.data_offset + 64);
        free(b.p);
    }
    {
        /* the data section is cut short */
        struct bb b = build_base(&o);
        expect_reject(b.p, b.n - 1, "last byte missing", "tensor 'w2': 32 bytes of data at data offset 320 lie outside the file (735 bytes", o.data[2]);
        free(b.p);
    }
}

/* truncation at every section boundary, with the message each must give */
static void test_truncation_at_boundaries(void) {
    tu_case = "truncation at boundaries";
    struct offs o;
    struct bb b = build_base(&o);
    struct { size_t cut; const char * want; size_t at; } cuts[64];
    int n = 0;
    /* until the bytes after the header could hold 5 KVs and 3 tensor infos
     * (13 and 32 bytes at least), the counts are what is reported */
#define CUT(c, w, a) do {                                                                          \
        cuts[n].cut = (c); cuts[n].want = (w); cuts[n].at = (a);                                   \
        if ((c) >= 24 && (c) - 24 < 32 * N_TI) {                                                   \
            cuts[n].want = "tensor count 3 cannot fit"; cuts[n].at = 8;                            \
        } else if ((c) >= 24 && (c) - 24 < 32 * N_TI + 13 * N_KV) {                                \
            cuts[n].want = "tensor count 3 and key-value count 5 cannot fit together"; cuts[n].at = 8; \
        }                                                                                          \
        n++;                                                                                       \
    } while (0)
    CUT(0, "file truncated: magic needs 4 bytes, 0 left", 0);
    CUT(2, "file truncated: magic needs 4 bytes, 2 left", 0);
    CUT(4, "file truncated: version needs 4 bytes, 0 left", 4);
    CUT(8, "file truncated: tensor count needs 8 bytes", 8);
    CUT(16, "file truncated: key-value count needs 8 bytes", 16);
    CUT(24, "tensor count 3 cannot fit in the 0 bytes after the header", 8);
    /* from here the counts fit: the next field is what is missing */
    for (int i = 0; i < N_KV; i++) {
        CUT(o.key[i], "file truncated: key needs 8 bytes, 0 left", o.key[i]);
        CUT(o.type[i], "file truncated: value type needs 4 bytes, 0 left", o.type[i]);
    }
    CUT(o.val[0], "file truncated: string length needs 8 bytes, 0 left", o.val[0]);
    CUT(o.val[0] + 8, "string value of key 'general.architecture': 4 bytes run past the end of the file (0 bytes left)", o.val[0]);
    CUT(o.val[1], "file truncated: value needs 4 bytes, 0 left", o.val[1]);
    CUT(o.val[3], "file truncated: array element type needs 4 bytes, 0 left", o.val[3]);
    CUT(o.toks_n, "file truncated: array length needs 8 bytes, 0 left", o.toks_n);
    CUT(o.toks_n + 8, "array of 3 strings for key 'test.tokens' runs past the end of the file (0 bytes left)", o.toks_n);
    CUT(o.str1_len, "file truncated: string length needs 8 bytes, 0 left", o.str1_len);
    CUT(o.str1_len + 9, "string 1 of key 'test.tokens': 2 bytes run past the end of the file (1 bytes left)", o.str1_len);
    CUT(o.arr_n + 8, "array of 4 f32 values for key 'test.bbb' runs past the end of the file (0 bytes left)", o.arr_n);
    CUT(o.arr_n + 8 + 15, "array of 4 f32 values for key 'test.bbb' runs past the end of the file (15 bytes left)", o.arr_n);
    for (int i = 0; i < N_TI; i++) {
        CUT(o.ti_name[i], "file truncated: tensor name length needs 8 bytes, 0 left", o.ti_name[i]);
        CUT(o.ti_name[i] + 9, "tensor name of 2 bytes runs past the end of the file (1 bytes left)", o.ti_name[i]);
        CUT(o.ti_ndims[i], "file truncated: n_dims needs 4 bytes, 0 left", o.ti_ndims[i]);
        CUT(o.ti_ne[i][0], "file truncated: tensor dimension needs 8 bytes, 0 left", o.ti_ne[i][0]);
        CUT(o.ti_type[i], "file truncated: tensor type needs 4 bytes, 0 left", o.ti_type[i]);
        CUT(o.ti_off[i], "file truncated: tensor data offset needs 8 bytes, 0 left", o.ti_off[i]);
        CUT(o.ti_off[i] + 4, "file truncated: tensor data offset needs 8 bytes, 4 left", o.ti_off[i]);
    }
    /* the metadata is complete: now the data is what lies outside */
    CUT(o.meta_end, "tensor 'w0': 256 bytes of data at data offset 0 lie outside the file", o.data_offset);
    CUT(o.data_offset, "tensor 'w0': 256 bytes of data at data offset 0 lie outside the file", o.data_offset);
    CUT(o.data[1], "tensor 'w1': 36 bytes of data at data offset 256 lie outside the file", o.data[1]);
    CUT(o.data[1] + 36, "tensor 'w2': 32 bytes of data at data offset 320 lie outside the file", o.data[2]);
    CUT(o.data[2], "tensor 'w2': 32 bytes of data at data offset 320 lie outside the file", o.data[2]);
    CUT(o.end - 1, "tensor 'w2'", o.data[2]);
#undef CUT
    for (int i = 0; i < n; i++) {
        char what[64];
        snprintf(what, sizeof what, "cut at byte %zu", cuts[i].cut);
        expect_reject(b.p, cuts[i].cut, what, cuts[i].want, cuts[i].at);
    }
    free(b.p);
}

/* every prefix of the file is rejected, through every path; a stream that
 * ends before the size it announced is rejected too */
static void test_truncation_everywhere(void) {
    tu_case = "truncation at every byte";
    struct offs o;
    struct bb b = build_base(&o);
    for (size_t cut = 0; cut < b.n; cut++) {
        char what[64];
        snprintf(what, sizeof what, "prefix of %zu bytes", cut);
        expect_reject(b.p, cut, what, cut <= o.meta_end ? "" : "outside the file", SIZE_MAX);
    }
    for (size_t stop = 0; stop < b.n; stop += (stop < o.meta_end ? 1 : 17)) {
        struct stream s = { b.p, b.n, 0, stop };
        struct kiln_context * kctx = NULL;
        struct kiln_gguf_init_params p = { false, &kctx, false };
        struct kiln_gguf_context * g = kiln_gguf_init_from_callback(stream_read, &s, b.n, p);
        n_cases++;
        CHECK(g == NULL && kctx == NULL, "stream stopping at %zu of %zu rejected", stop, b.n);
        CHECK(strstr(kiln_last_error(), "the read callback ended early") != NULL, "stream stop %zu: %s", stop, kiln_last_error());
        kiln_gguf_free(g);
    }
    free(b.p);
}

/* a hostile file must not make the reader allocate what its size cannot
 * justify: under ASan, a multi-terabyte malloc aborts the test */
static void test_no_huge_allocations(void) {
    tu_case = "allocation bounds";
    /* 13 header-sized files claiming huge arrays / strings / tables */
    struct offs o;
    struct bb b = build_base(&o);
    const uint64_t huge[] = { 1ull << 30, 1ull << 40, 1ull << 50, (1ull << 61) - 1 };
    for (size_t i = 0; i < 4; i++) {
        patch_u64(&b, o.arr_n, huge[i]);
        expect_reject(b.p, b.n, "huge f32 array", "runs past the end of the file", o.arr_n);
    }
    free(b.p);
    /* many tiny KVs: exactly as many as the bytes allow parse fine */
    struct bb m = { NULL, 0, 0 };
    const int nkv = 2000;
    bb_put(&m, "GGUF", 4);
    bb_u32(&m, 2);
    bb_u64(&m, 0);
    bb_u64(&m, (uint64_t) nkv);
    for (int i = 0; i < nkv; i++) {
        char key[8];
        snprintf(key, sizeof key, "%04x", i);
        bb_u64(&m, 1);
        bb_put(&m, key + 3, 1); /* 1-byte keys repeat: caught as duplicates */
        bb_u32(&m, KILN_GGUF_TYPE_UINT8);
        bb_put(&m, "", 1);
    }
    expect_reject(m.p, m.n, "repeated 1-byte keys", "duplicate key '0'", 24 + 16 * 14);
    free(m.p);
    m.p = NULL; m.n = m.cap = 0;
    bb_put(&m, "GGUF", 4);
    bb_u32(&m, 2);
    bb_u64(&m, 0);
    bb_u64(&m, (uint64_t) nkv);
    for (int i = 0; i < nkv; i++) {
        uint16_t k = (uint16_t) i;
        bb_u64(&m, 2);
        bb_put(&m, &k, 2);
        bb_u32(&m, KILN_GGUF_TYPE_UINT8);
        bb_put(&m, "", 1);
    }
    struct kiln_gguf_init_params p = { true, NULL, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(m.p, m.n, p);
    CHECK(g && kiln_gguf_get_n_kv(g) == nkv && kiln_gguf_get_version(g) == 2, "2000 distinct 2-byte keys in a v2 file: %s", kiln_last_error());
    kiln_gguf_free(g);
    free(m.p);
    /* 3000 keys of 2000 bytes differing only in their last bytes, the last
     * one a repeat: duplicate detection sorts, so this stays fast */
    m.p = NULL; m.n = m.cap = 0;
    bb_put(&m, "GGUF", 4);
    bb_u32(&m, 3);
    bb_u64(&m, 0);
    bb_u64(&m, 3000);
    char * key = (char *) malloc(2000);
    memset(key, 'k', 2000);
    size_t last_at = 0;
    for (int i = 0; i < 3000; i++) {
        const int v = i < 2999 ? i : 1234;
        key[1998] = (char)('a' + v % 26);
        key[1999] = (char)('a' + v / 26);
        last_at = bb_u64(&m, 2000);
        bb_put(&m, key, 2000);
        bb_u32(&m, KILN_GGUF_TYPE_BOOL);
        bb_put(&m, "\x01", 1);
    }
    free(key);
    expect_reject(m.p, m.n, "3000 long keys, one repeated", "duplicate key 'kkkkkkkkkkkkkkk", last_at);
    free(m.p);
    /* a string array claiming more strings than it holds, whose strings are
     * longer than the count suggests: the string storage must still grow
     * geometrically (the fuzzer found it reallocating per string) */
    m.p = NULL; m.n = m.cap = 0;
    bb_put(&m, "GGUF", 4);
    bb_u32(&m, 3);
    bb_u64(&m, 0);
    bb_u64(&m, 1);
    bb_str(&m, "tokenizer.ggml.tokens");
    bb_u32(&m, KILN_GGUF_TYPE_ARRAY);
    bb_u32(&m, KILN_GGUF_TYPE_STRING);
    const size_t n_at = bb_u64(&m, 0);
    const int n_present = 60000;
    size_t end_at = 0;
    for (int i = 0; i < n_present; i++) end_at = bb_str(&m, "a token of 20 bytes.") + 28;
    patch_u64(&m, n_at, (uint64_t)(m.n - n_at - 8) / 8); /* as many as the bytes could hold */
    expect_reject(m.p, m.n, "string array longer than its strings", "file truncated: string length needs 8 bytes, 0 left", end_at);
    free(m.p);
}

int main(void) {
    static const struct { const char * name; void (*fn)(void); } sections[] = {
        { "valid base file (no malformed cases)", test_base_is_valid },
        { "header: magic, version, counts", test_header },
        { "key-value pairs: lengths, types, duplicates, alignment", test_kv },
        { "tensor infos: names, dims, types, blocks, offsets", test_tensor_infos },
        { "data layout: outside the file, overlaps", test_data_layout },
        { "truncation at every section boundary", test_truncation_at_boundaries },
        { "truncation at every byte, streams ending early", test_truncation_everywhere },
        { "allocation and time bounds", test_no_huge_allocations },
    };
    for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
        const int before = n_cases;
        sections[i].fn();
        printf("%5d  %s\n", n_cases - before, sections[i].name);
    }
    printf("%d malformed files rejected (each from a buffer, into a context, and streamed)\n", n_cases);
    return tu_finish();
}
