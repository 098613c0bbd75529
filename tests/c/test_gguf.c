/*
 * test_gguf.c — GGUF reading and writing: round trips of every value type
 * and every tensor type, the real files in the repository (known metadata
 * and tensor tables, byte-identical copies through every reading path),
 * loading tensors into a context, and the API's handling of misuse.
 * Malformed files are test_gguf_malformed.c.
 *
 * `test_gguf --write-seeds DIR` writes the small synthetic files built here
 * into DIR (scripts/fuzz.sh uses them as fuzzing seeds) and exits.
 */
#include "util/test_util.h"
#include "kiln-gguf.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char * const REAL_FILES[] = {
    "models/stories260K.gguf",
    "tests/data/vocab/ggml-vocab-falcon.gguf",
    "tests/data/vocab/ggml-vocab-gpt-2.gguf",
    "tests/data/vocab/ggml-vocab-llama-spm.gguf",
    "tests/data/vocab/ggml-vocab-phi-3.gguf",
    "tests/data/vocab/ggml-vocab-starcoder.gguf",
};
#define N_REAL_FILES (sizeof(REAL_FILES) / sizeof(REAL_FILES[0]))

/* in the working directory; the pid keeps concurrent runs apart */
static char TMP_FILE[64];

/* ------------------------------------------------------------- helpers */

static uint8_t * slurp(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t * p = (uint8_t *) malloc(n > 0 ? (size_t) n : 1);
    if (p && fread(p, 1, (size_t) n, f) != (size_t) n) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *size = (size_t) n;
    return p;
}

static uint8_t * write_mem(const struct kiln_gguf_context * g, size_t * size) {
    *size = kiln_gguf_get_write_size(g, false);
    uint8_t * buf = (uint8_t *) malloc(*size ? *size : 1);
    const size_t w = kiln_gguf_write_to_buffer(g, buf, *size, false);
    if (w != *size) {
        fprintf(stderr, "write_to_buffer: %s\n", kiln_last_error());
        free(buf);
        return NULL;
    }
    return buf;
}

static bool same_bytes(const uint8_t * a, size_t na, const uint8_t * b, size_t nb) {
    return a && b && na == nb && memcmp(a, b, na) == 0;
}

struct chunked {
    const uint8_t * data;
    size_t size, pos, step;
};

static size_t chunked_read(void * dst, size_t size, void * ud) {
    struct chunked * c = (struct chunked *) ud;
    size_t n = size < c->step ? size : c->step;
    if (n > c->size - c->pos) n = c->size - c->pos;
    memcpy(dst, c->data + c->pos, n);
    c->pos += n;
    c->step = c->step * 31 % 100003 + 1; /* chunks of varying size */
    return n;
}

static struct kiln_gguf_context * read_cb(const uint8_t * data, size_t size, struct kiln_gguf_init_params p) {
    struct chunked c = { data, size, 0, 7 };
    return kiln_gguf_init_from_callback(chunked_read, &c, size, p);
}

static void fill_bytes(void * p, size_t n, uint32_t seed) {
    uint8_t * b = (uint8_t *) p;
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        b[i] = (uint8_t) x;
    }
}

/* ------------------------------------------- round trip of every value type */

static const char * LONG_STR =
    "a fairly long string value, long enough to be summarized by the info tool: "
    "0123456789012345678901234567890123456789012345678901234567890123456789";

static const enum kiln_gguf_type NUM_TYPES[] = {
    KILN_GGUF_TYPE_UINT8, KILN_GGUF_TYPE_INT8, KILN_GGUF_TYPE_UINT16, KILN_GGUF_TYPE_INT16,
    KILN_GGUF_TYPE_UINT32, KILN_GGUF_TYPE_INT32, KILN_GGUF_TYPE_FLOAT32, KILN_GGUF_TYPE_BOOL,
    KILN_GGUF_TYPE_UINT64, KILN_GGUF_TYPE_INT64, KILN_GGUF_TYPE_FLOAT64,
};
#define N_NUM_TYPES (sizeof(NUM_TYPES) / sizeof(NUM_TYPES[0]))
static const size_t NUM_SIZES[] = { 1, 1, 2, 2, 4, 4, 4, 1, 8, 8, 8 };

static void arr_values(enum kiln_gguf_type t, size_t es, uint8_t * out, size_t n) {
    fill_bytes(out, n * es, (uint32_t) t + 100);
    if (t == KILN_GGUF_TYPE_BOOL) for (size_t i = 0; i < n; i++) out[i] = (uint8_t)(i % 3 == 0);
    if (t == KILN_GGUF_TYPE_FLOAT32) for (size_t i = 0; i < n; i++) { float v = (float) i * -1.5f + 0.25f; memcpy(out + 4 * i, &v, 4); }
    if (t == KILN_GGUF_TYPE_FLOAT64) for (size_t i = 0; i < n; i++) { double v = (double) i * 1e-300 - 7.0; memcpy(out + 8 * i, &v, 8); }
}

static const char * ARR_STRS[] = { "", "x", "h\xc3\xa9llo", "<0x00>", "a much longer token \xe2\x96\x81 with unicode" };
#define N_ARR_STRS 5

static struct kiln_gguf_context * make_values_ctx(uint32_t alignment) {
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    bool ok = true;
    ok &= kiln_gguf_set_val_u8  (g, "v.u8", 0xAB);
    ok &= kiln_gguf_set_val_i8  (g, "v.i8", -5);
    ok &= kiln_gguf_set_val_u16 (g, "v.u16", 0xBEEF);
    ok &= kiln_gguf_set_val_i16 (g, "v.i16", -12345);
    ok &= kiln_gguf_set_val_u32 (g, "v.u32", 0xDEADBEEFu);
    ok &= kiln_gguf_set_val_i32 (g, "v.i32", -123456789);
    ok &= kiln_gguf_set_val_f32 (g, "v.f32", 3.25f);
    ok &= kiln_gguf_set_val_u64 (g, "v.u64", 0x0123456789ABCDEFull);
    ok &= kiln_gguf_set_val_i64 (g, "v.i64", INT64_MIN + 1);
    ok &= kiln_gguf_set_val_f64 (g, "v.f64", -2.5e300);
    ok &= kiln_gguf_set_val_bool(g, "v.bool.true", true);
    ok &= kiln_gguf_set_val_bool(g, "v.bool.false", false);
    ok &= kiln_gguf_set_val_str (g, "v.str", "hello");
    ok &= kiln_gguf_set_val_str (g, "v.str.empty", "");
    ok &= kiln_gguf_set_val_str (g, "v.str.long", LONG_STR);
    ok &= kiln_gguf_set_val_str_n(g, "v.str.nul", "a\0b", 3);
    for (size_t i = 0; i < N_NUM_TYPES; i++) {
        uint8_t vals[7 * 8];
        char key[64];
        arr_values(NUM_TYPES[i], NUM_SIZES[i], vals, 7);
        snprintf(key, sizeof key, "a.%s", kiln_gguf_type_name(NUM_TYPES[i]));
        ok &= kiln_gguf_set_arr_data(g, key, NUM_TYPES[i], vals, 7);
        snprintf(key, sizeof key, "a.empty.%s", kiln_gguf_type_name(NUM_TYPES[i]));
        ok &= kiln_gguf_set_arr_data(g, key, NUM_TYPES[i], NULL, 0);
    }
    ok &= kiln_gguf_set_arr_str(g, "a.str", ARR_STRS, N_ARR_STRS);
    ok &= kiln_gguf_set_arr_str(g, "a.str.empty", NULL, 0);
    if (alignment) ok &= kiln_gguf_set_val_u32(g, KILN_GGUF_KEY_GENERAL_ALIGNMENT, alignment);
    CHECK(ok, "setting every value type: %s", kiln_last_error());
    return g;
}

static void check_values_ctx(const struct kiln_gguf_context * g, uint32_t alignment) {
    CHECK(kiln_gguf_get_version(g) == 3, "version %u", kiln_gguf_get_version(g));
    CHECK(kiln_gguf_get_alignment(g) == (alignment ? alignment : 32), "alignment %zu", kiln_gguf_get_alignment(g));
#define KEY(k) kiln_gguf_find_key(g, k)
    CHECK(kiln_gguf_get_val_u8(g, KEY("v.u8")) == 0xAB, "u8");
    CHECK(kiln_gguf_get_val_i8(g, KEY("v.i8")) == -5, "i8");
    CHECK(kiln_gguf_get_val_u16(g, KEY("v.u16")) == 0xBEEF, "u16");
    CHECK(kiln_gguf_get_val_i16(g, KEY("v.i16")) == -12345, "i16");
    CHECK(kiln_gguf_get_val_u32(g, KEY("v.u32")) == 0xDEADBEEFu, "u32");
    CHECK(kiln_gguf_get_val_i32(g, KEY("v.i32")) == -123456789, "i32");
    CHECK(kiln_gguf_get_val_f32(g, KEY("v.f32")) == 3.25f, "f32");
    CHECK(kiln_gguf_get_val_u64(g, KEY("v.u64")) == 0x0123456789ABCDEFull, "u64");
    CHECK(kiln_gguf_get_val_i64(g, KEY("v.i64")) == INT64_MIN + 1, "i64");
    CHECK(kiln_gguf_get_val_f64(g, KEY("v.f64")) == -2.5e300, "f64");
    CHECK(kiln_gguf_get_val_bool(g, KEY("v.bool.true")) == true, "bool true");
    CHECK(kiln_gguf_get_val_bool(g, KEY("v.bool.false")) == false, "bool false");
    CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("v.str")), "hello") == 0, "str");
    CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("v.str.empty")), "") == 0, "empty str");
    CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("v.str.long")), LONG_STR) == 0, "long str");
    CHECK(kiln_gguf_get_val_str_len(g, KEY("v.str.nul")) == 3 &&
          memcmp(kiln_gguf_get_val_str(g, KEY("v.str.nul")), "a\0b", 4) == 0, "str with a NUL");
    for (size_t i = 0; i < N_NUM_TYPES; i++) {
        uint8_t vals[7 * 8];
        char key[64];
        arr_values(NUM_TYPES[i], NUM_SIZES[i], vals, 7);
        snprintf(key, sizeof key, "a.%s", kiln_gguf_type_name(NUM_TYPES[i]));
        const int64_t id = KEY(key);
        CHECK(kiln_gguf_get_kv_type(g, id) == KILN_GGUF_TYPE_ARRAY, "%s is an array", key);
        CHECK(kiln_gguf_get_arr_type(g, id) == NUM_TYPES[i], "%s element type", key);
        CHECK(kiln_gguf_get_arr_n(g, id) == 7, "%s length", key);
        CHECK(memcmp(kiln_gguf_get_arr_data(g, id), vals, 7 * NUM_SIZES[i]) == 0, "%s values", key);
        snprintf(key, sizeof key, "a.empty.%s", kiln_gguf_type_name(NUM_TYPES[i]));
        CHECK(kiln_gguf_get_arr_n(g, KEY(key)) == 0 && kiln_gguf_get_arr_type(g, KEY(key)) == NUM_TYPES[i], "%s", key);
    }
    const int64_t s = KEY("a.str");
    CHECK(kiln_gguf_get_arr_type(g, s) == KILN_GGUF_TYPE_STRING && kiln_gguf_get_arr_n(g, s) == N_ARR_STRS, "string array");
    for (size_t i = 0; i < N_ARR_STRS; i++) {
        CHECK(strcmp(kiln_gguf_get_arr_str(g, s, i), ARR_STRS[i]) == 0, "string %zu", i);
        CHECK(kiln_gguf_get_arr_str_len(g, s, i) == strlen(ARR_STRS[i]), "string %zu length", i);
    }
    CHECK(kiln_gguf_get_arr_n(g, KEY("a.str.empty")) == 0, "empty string array");
#undef KEY
    /* keys keep their order */
    CHECK(strcmp(kiln_gguf_get_key(g, 0), "v.u8") == 0 && strcmp(kiln_gguf_get_key(g, 15), "v.str.nul") == 0, "key order");
}

static void test_value_round_trip(void) {
    const uint32_t aligns[] = { 0, 1, 8, 64 };
    for (size_t a = 0; a < 4; a++) {
        tu_case = "value round trip";
        struct kiln_gguf_context * g = make_values_ctx(aligns[a]);
        check_values_ctx(g, aligns[a]);
        size_t n1, n2;
        uint8_t * out1 = write_mem(g, &n1);
        CHECK(out1 != NULL && n1 == kiln_gguf_get_meta_size(g), "written (%zu bytes, meta %zu)", n1, kiln_gguf_get_meta_size(g));
        struct kiln_gguf_init_params p = { true, NULL, false };
        struct kiln_gguf_context * r = kiln_gguf_init_from_buffer(out1, n1, p);
        CHECK(r != NULL, "read back: %s", kiln_last_error());
        if (!r) { free(out1); kiln_gguf_free(g); continue; }
        check_values_ctx(r, aligns[a]);
        CHECK(kiln_gguf_get_n_kv(r) == kiln_gguf_get_n_kv(g), "kv count");
        uint8_t * out2 = write_mem(r, &n2);
        CHECK(same_bytes(out1, n1, out2, n2), "write -> read -> write gives the same bytes (alignment %u)", aligns[a]);
        free(out2);
        /* streamed */
        struct kiln_gguf_context * c = read_cb(out1, n1, p);
        CHECK(c != NULL, "read back through the callback: %s", kiln_last_error());
        if (c) {
            check_values_ctx(c, aligns[a]);
            out2 = write_mem(c, &n2);
            CHECK(same_bytes(out1, n1, out2, n2), "callback read -> write gives the same bytes");
            free(out2);
            kiln_gguf_free(c);
        }
        /* to a file and back */
        CHECK(kiln_gguf_write_to_file(r, TMP_FILE, false), "write_to_file: %s", kiln_last_error());
        size_t nf;
        uint8_t * f = slurp(TMP_FILE, &nf);
        CHECK(same_bytes(out1, n1, f, nf), "file bytes equal buffer bytes");
        free(f);
        struct kiln_gguf_context * ff = kiln_gguf_init_from_file(TMP_FILE, p);
        CHECK(ff != NULL, "init_from_file: %s", kiln_last_error());
        if (ff) check_values_ctx(ff, aligns[a]);
        kiln_gguf_free(ff);
        free(out1);
        kiln_gguf_free(r);
        kiln_gguf_free(g);
    }
}

/* ------------------------------------------- round trip of every tensor type */

/* a kiln context holding one tensor of every valid type, with shapes of
 * 1 to 4 dimensions; data is random bytes */
static struct kiln_context * make_tensors(int * n_out) {
    struct kiln_context * k = tu_ctx(16u << 20);
    int n = 0;
    for (int t = 0; t < KILN_TYPE_COUNT; t++) {
        if (!kiln_type_is_valid(t)) continue;
        const int64_t b = kiln_blck_size((enum kiln_type) t);
        const int64_t ne[4] = { b * (1 + n % 3), 2 + n % 2, 3, 2 };
        const int nd = 1 + n % 4;
        struct kiln_tensor * x = kiln_new_tensor(k, (enum kiln_type) t, nd, ne);
        CHECK(x != NULL, "new tensor of type %s: %s", kiln_type_name((enum kiln_type) t), kiln_last_error());
        if (!x) continue;
        kiln_format_name(x, "t%02d.%s", t, kiln_type_name((enum kiln_type) t));
        fill_bytes(x->data, kiln_nbytes(x), (uint32_t) t);
        n++;
    }
    *n_out = n;
    return k;
}

static struct kiln_gguf_context * make_tensors_ctx(struct kiln_context * k, uint32_t alignment) {
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_val_str(g, "general.architecture", "test");
    if (alignment) kiln_gguf_set_val_u32(g, KILN_GGUF_KEY_GENERAL_ALIGNMENT, alignment);
    for (struct kiln_tensor * t = kiln_get_first_tensor(k); t; t = kiln_get_next_tensor(k, t)) {
        CHECK(kiln_gguf_add_tensor(g, t), "add_tensor %s: %s", t->name, kiln_last_error());
    }
    return g;
}

static void check_tensors(const struct kiln_gguf_context * g, struct kiln_context * loaded, struct kiln_context * ref, const char * how) {
    for (struct kiln_tensor * t = kiln_get_first_tensor(ref); t; t = kiln_get_next_tensor(ref, t)) {
        const int64_t id = kiln_gguf_find_tensor(g, t->name);
        CHECK(id >= 0, "%s: tensor %s listed", how, t->name);
        if (id < 0) continue;
        CHECK(kiln_gguf_get_tensor_type(g, id) == t->type, "%s: %s type", how, t->name);
        CHECK(kiln_gguf_get_tensor_size(g, id) == kiln_nbytes(t), "%s: %s size", how, t->name);
        CHECK(kiln_gguf_get_tensor_offset(g, id) % kiln_gguf_get_alignment(g) == 0, "%s: %s offset aligned", how, t->name);
        const int64_t * ne = kiln_gguf_get_tensor_ne(g, id);
        CHECK(ne && ne[0] == t->ne[0] && ne[1] == t->ne[1] && ne[2] == t->ne[2] && ne[3] == t->ne[3], "%s: %s shape", how, t->name);
        if (!loaded) continue;
        struct kiln_tensor * l = kiln_get_tensor(loaded, t->name);
        CHECK(l != NULL, "%s: %s loaded into the context", how, t->name);
        if (!l) continue;
        CHECK(l->type == t->type && kiln_are_same_shape(l, t), "%s: %s loaded type and shape", how, t->name);
        CHECK(kiln_nbytes(t) == 0 || (l->data && memcmp(l->data, t->data, kiln_nbytes(t)) == 0), "%s: %s data", how, t->name);
    }
}

static void test_tensor_round_trip(void) {
    tu_case = "tensor round trip";
    int n = 0;
    struct kiln_context * k = make_tensors(&n);
    CHECK(n == 31, "31 tensor types, got %d", n);
    {
        /* a tensor with no elements is refused: no GGUF reader takes it */
        struct kiln_context * ke = tu_ctx(1 << 16);
        struct kiln_tensor * e = kiln_new_tensor_2d(ke, KILN_TYPE_F32, 4, 0);
        kiln_set_name(e, "empty");
        struct kiln_gguf_context * ge = kiln_gguf_init_empty();
        CHECK(!kiln_gguf_add_tensor(ge, e) && strstr(kiln_last_error(), "tensor 'empty' has ne[1] = 0") != NULL,
              "empty tensor refused: %s", kiln_last_error());
        CHECK(kiln_gguf_get_n_tensors(ge) == 0, "nothing added");
        kiln_gguf_free(ge);
        kiln_free(ke);
    }
    const uint32_t aligns[] = { 0, 1, 64, 256 };
    for (size_t a = 0; a < 4; a++) {
        struct kiln_gguf_context * g = make_tensors_ctx(k, aligns[a]);
        CHECK(kiln_gguf_get_n_tensors(g) == n, "tensor count");
        check_tensors(g, NULL, k, "built");
        size_t n1, n2;
        uint8_t * out1 = write_mem(g, &n1);
        CHECK(out1 != NULL, "written");
        if (!out1) { kiln_gguf_free(g); continue; }
        /* every reading path, each loading data into a fresh context */
        for (int path = 0; path < 4; path++) {
            static const char * names[] = { "buffer", "buffer in place", "callback", "file" };
            struct kiln_context * kl = NULL;
            struct kiln_gguf_init_params p = { false, &kl, path == 1 };
            void * aligned = NULL;
            struct kiln_gguf_context * r = NULL;
            if (path == 0) r = kiln_gguf_init_from_buffer(out1, n1, p);
            if (path == 1) {
                if (posix_memalign(&aligned, 64, n1) != 0) aligned = NULL;
                memcpy(aligned, out1, n1);
                r = kiln_gguf_init_from_buffer(aligned, n1, p);
            }
            if (path == 2) r = read_cb(out1, n1, p);
            if (path == 3) {
                CHECK(kiln_gguf_write_to_file(g, TMP_FILE, false), "write_to_file");
                r = kiln_gguf_init_from_file(TMP_FILE, p);
            }
            CHECK(r != NULL && kl != NULL, "read back (%s, alignment %u): %s", names[path], aligns[a], kiln_last_error());
            if (!r) { free(aligned); continue; }
            check_tensors(r, kl, k, names[path]);
            if (path == 1 && aligns[a] >= 16) {
                /* in place: the tensor data is the input buffer */
                struct kiln_tensor * t0 = kiln_get_first_tensor(kl);
                CHECK(t0 && (uint8_t *) t0->data == (uint8_t *) aligned + kiln_gguf_get_data_offset(r), "no_copy points into the buffer");
            }
            uint8_t * out2 = write_mem(r, &n2);
            CHECK(same_bytes(out1, n1, out2, n2), "write -> read (%s) -> write gives the same bytes (alignment %u)", names[path], aligns[a]);
            free(out2);
            kiln_gguf_free(r);
            kiln_free(kl);
            free(aligned);
        }
        free(out1);
        kiln_gguf_free(g);
    }
    kiln_free(k);
}

/* ------------------------------------------------------------ real files */

static void test_stories260k(void) {
    tu_case = "stories260K";
    struct kiln_gguf_init_params p = { true, NULL, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file("models/stories260K.gguf", p);
    CHECK(g != NULL, "parse: %s", kiln_last_error());
    if (!g) return;
#define KEY(k) kiln_gguf_find_key(g, k)
    CHECK(kiln_gguf_get_version(g) == 3, "version");
    CHECK(kiln_gguf_get_n_kv(g) == 19, "19 keys, got %lld", (long long) kiln_gguf_get_n_kv(g));
    CHECK(kiln_gguf_get_n_tensors(g) == 48, "48 tensors");
    CHECK(kiln_gguf_get_alignment(g) == 32 && kiln_gguf_get_data_offset(g) == 14176, "data offset %zu", kiln_gguf_get_data_offset(g));
    CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("general.architecture")), "llama") == 0, "architecture");
    CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("tokenizer.ggml.model")), "llama") == 0, "tokenizer model");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.block_count")) == 5, "block_count");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.embedding_length")) == 64, "embedding_length");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.context_length")) == 128, "context_length");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.feed_forward_length")) == 172, "feed_forward_length");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.attention.head_count")) == 8, "head_count");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.attention.head_count_kv")) == 4, "head_count_kv");
    CHECK(kiln_gguf_get_val_u32(g, KEY("llama.rope.dimension_count")) == 8, "rope dims");
    CHECK(kiln_gguf_get_val_f32(g, KEY("llama.attention.layer_norm_rms_epsilon")) == 1e-5f, "rms eps");
    CHECK(kiln_gguf_get_val_u32(g, KEY("tokenizer.ggml.bos_token_id")) == 1, "bos");
    CHECK(kiln_gguf_get_val_u32(g, KEY("tokenizer.ggml.eos_token_id")) == 2, "eos");
    CHECK(kiln_gguf_get_val_u32(g, KEY("tokenizer.ggml.padding_token_id")) == 0xFFFFFFFFu, "padding id");
    const int64_t tok = KEY("tokenizer.ggml.tokens");
    CHECK(kiln_gguf_get_arr_type(g, tok) == KILN_GGUF_TYPE_STRING && kiln_gguf_get_arr_n(g, tok) == 512, "512 tokens");
    CHECK(strcmp(kiln_gguf_get_arr_str(g, tok, 0), "<unk>") == 0 && strcmp(kiln_gguf_get_arr_str(g, tok, 1), "<s>") == 0 &&
          strcmp(kiln_gguf_get_arr_str(g, tok, 3), "<0x00>") == 0, "first tokens");
    const int64_t sc = KEY("tokenizer.ggml.scores");
    CHECK(kiln_gguf_get_arr_type(g, sc) == KILN_GGUF_TYPE_FLOAT32 && kiln_gguf_get_arr_n(g, sc) == 512, "512 scores");
    const int64_t tt = KEY("tokenizer.ggml.token_type");
    const int32_t * types = (const int32_t *) kiln_gguf_get_arr_data(g, tt);
    CHECK(kiln_gguf_get_arr_type(g, tt) == KILN_GGUF_TYPE_INT32 && types && types[0] == 2 && types[1] == 3 && types[3] == 6,
          "token types");
#undef KEY
    /* the tensor table */
    CHECK(kiln_gguf_find_tensor(g, "token_embd.weight") == 0, "token_embd first");
    const int64_t * ne = kiln_gguf_get_tensor_ne(g, 0);
    CHECK(ne[0] == 64 && ne[1] == 512 && kiln_gguf_get_tensor_n_dims(g, 0) == 2 &&
          kiln_gguf_get_tensor_type(g, 0) == KILN_TYPE_F32 && kiln_gguf_get_tensor_offset(g, 0) == 0, "token_embd.weight");
    const int64_t on = kiln_gguf_find_tensor(g, "output_norm.weight");
    CHECK(on == 1 && kiln_gguf_get_tensor_n_dims(g, on) == 1 && kiln_gguf_get_tensor_ne(g, on)[0] == 64 &&
          kiln_gguf_get_tensor_offset(g, on) == 131072 && kiln_gguf_get_tensor_size(g, on) == 256, "output_norm.weight");
    const int64_t fd = kiln_gguf_find_tensor(g, "blk.2.ffn_down.weight");
    CHECK(fd >= 0 && kiln_gguf_get_tensor_ne(g, fd)[0] == 172 && kiln_gguf_get_tensor_ne(g, fd)[1] == 64 &&
          kiln_gguf_get_tensor_offset(g, fd) == 719360, "blk.2.ffn_down.weight");
    const int64_t last = kiln_gguf_find_tensor(g, "blk.4.ffn_norm.weight");
    CHECK(last == 47 && kiln_gguf_get_tensor_offset(g, last) == 1170944, "last tensor");
    CHECK(kiln_gguf_find_tensor(g, "blk.5.ffn_norm.weight") == -1, "no 6th block");
    uint64_t total = 0;
    for (int64_t i = 0; i < 48; i++) {
        total += kiln_gguf_get_tensor_size(g, i);
        CHECK(kiln_gguf_get_tensor_type(g, i) == KILN_TYPE_F32, "all f32");
    }
    CHECK(total == 1185376 - 14176, "tensor sizes add up to the data section (%llu)", (unsigned long long) total);
    kiln_gguf_free(g);
}

struct vocab_expect {
    const char * file, * arch, * model, * tok0;
    int64_t n_kv;
    size_t n_tokens, n_merges;
    uint32_t bos, eos;
};

static void test_vocab_files(void) {
    tu_case = "vocab files";
    static const struct vocab_expect ex[] = {
        { "tests/data/vocab/ggml-vocab-falcon.gguf", "falcon", "gpt2", ">>TITLE<<", 18, 65024, 64784, 11, 11 },
        { "tests/data/vocab/ggml-vocab-gpt-2.gguf", "gpt2", "gpt2", "!", 16, 50257, 50000, 50256, 50256 },
        { "tests/data/vocab/ggml-vocab-llama-spm.gguf", "llama", "llama", "<unk>", 22, 32000, 0, 1, 2 },
        { "tests/data/vocab/ggml-vocab-phi-3.gguf", "phi3", "llama", "<unk>", 26, 32064, 0, 1, 32000 },
        { "tests/data/vocab/ggml-vocab-starcoder.gguf", "starcoder2", "gpt2", "<|endoftext|>", 19, 49152, 48872, 0, 0 },
    };
    for (size_t i = 0; i < sizeof(ex) / sizeof(ex[0]); i++) {
        struct kiln_gguf_init_params p = { true, NULL, false };
        struct kiln_gguf_context * g = kiln_gguf_init_from_file(ex[i].file, p);
        CHECK(g != NULL, "%s: %s", ex[i].file, kiln_last_error());
        if (!g) continue;
#define KEY(k) kiln_gguf_find_key(g, k)
        CHECK(kiln_gguf_get_n_kv(g) == ex[i].n_kv && kiln_gguf_get_n_tensors(g) == 0, "%s: counts", ex[i].file);
        CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("general.architecture")), ex[i].arch) == 0, "%s: arch", ex[i].file);
        CHECK(strcmp(kiln_gguf_get_val_str(g, KEY("tokenizer.ggml.model")), ex[i].model) == 0, "%s: model", ex[i].file);
        const int64_t tok = KEY("tokenizer.ggml.tokens");
        CHECK(kiln_gguf_get_arr_n(g, tok) == ex[i].n_tokens, "%s: %zu tokens", ex[i].file, kiln_gguf_get_arr_n(g, tok));
        CHECK(strcmp(kiln_gguf_get_arr_str(g, tok, 0), ex[i].tok0) == 0, "%s: token 0", ex[i].file);
        const int64_t tt = KEY("tokenizer.ggml.token_type");
        CHECK(kiln_gguf_get_arr_n(g, tt) == ex[i].n_tokens && kiln_gguf_get_arr_type(g, tt) == KILN_GGUF_TYPE_INT32, "%s: token types", ex[i].file);
        if (ex[i].n_merges) {
            CHECK(kiln_gguf_get_arr_n(g, KEY("tokenizer.ggml.merges")) == ex[i].n_merges, "%s: merges", ex[i].file);
        } else {
            CHECK(KEY("tokenizer.ggml.merges") == -1 && kiln_gguf_get_arr_n(g, KEY("tokenizer.ggml.scores")) == ex[i].n_tokens,
                  "%s: scores, no merges", ex[i].file);
        }
        CHECK(kiln_gguf_get_val_u32(g, KEY("tokenizer.ggml.bos_token_id")) == ex[i].bos, "%s: bos", ex[i].file);
        CHECK(kiln_gguf_get_val_u32(g, KEY("tokenizer.ggml.eos_token_id")) == ex[i].eos, "%s: eos", ex[i].file);
#undef KEY
        kiln_gguf_free(g);
    }
    /* a few values particular to one file */
    struct kiln_gguf_init_params p = { true, NULL, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file("tests/data/vocab/ggml-vocab-llama-spm.gguf", p);
    if (g) {
        CHECK(kiln_gguf_get_val_bool(g, kiln_gguf_find_key(g, "tokenizer.ggml.add_bos_token")) == true, "add_bos");
        CHECK(kiln_gguf_get_val_bool(g, kiln_gguf_find_key(g, "tokenizer.ggml.add_eos_token")) == false, "add_eos");
        kiln_gguf_free(g);
    }
    g = kiln_gguf_init_from_file("tests/data/vocab/ggml-vocab-phi-3.gguf", p);
    if (g) {
        CHECK(kiln_gguf_get_val_f32(g, kiln_gguf_find_key(g, "phi3.rope.freq_base")) == 10000.0f, "phi3 freq_base");
        CHECK(kiln_gguf_get_val_str_len(g, kiln_gguf_find_key(g, "tokenizer.chat_template")) == 269, "chat template length");
        const int64_t sc = kiln_gguf_find_key(g, "tokenizer.ggml.scores");
        CHECK(((const float *) kiln_gguf_get_arr_data(g, sc))[0] == -1000.0f, "phi3 score 0");
        kiln_gguf_free(g);
    }
    g = kiln_gguf_init_from_file("tests/data/vocab/ggml-vocab-gpt-2.gguf", p);
    if (g) {
        const int64_t m = kiln_gguf_find_key(g, "tokenizer.ggml.merges");
        CHECK(strcmp(kiln_gguf_get_arr_str(g, m, 0), "\xc4\xa0 t") == 0, "gpt-2 first merge");
        kiln_gguf_free(g);
    }
}

/* every file comes back byte for byte through every reading path */
static void test_copies(void) {
    tu_case = "byte-identical copies";
    for (size_t i = 0; i < N_REAL_FILES; i++) {
        size_t n;
        uint8_t * orig = slurp(REAL_FILES[i], &n);
        CHECK(orig != NULL, "read %s", REAL_FILES[i]);
        if (!orig) continue;
        for (int path = 0; path < 5; path++) {
            static const char * names[] = { "file (mmap)", "file (mmap, no_copy)", "file (read fallback)", "callback", "buffer" };
            struct kiln_context * kl = NULL;
            struct kiln_gguf_init_params p = { false, &kl, path == 1 };
            struct kiln_gguf_context * g = NULL;
            if (path == 2) setenv("KILN_GGUF_NO_MMAP", "1", 1);
            if (path <= 2) g = kiln_gguf_init_from_file(REAL_FILES[i], p);
            if (path == 2) unsetenv("KILN_GGUF_NO_MMAP");
            if (path == 3) g = read_cb(orig, n, p);
            if (path == 4) g = kiln_gguf_init_from_buffer(orig, n, p);
            CHECK(g != NULL, "%s via %s: %s", REAL_FILES[i], names[path], kiln_last_error());
            if (!g) continue;
            size_t nw;
            uint8_t * w = write_mem(g, &nw);
            CHECK(same_bytes(orig, n, w, nw), "%s via %s: copy is byte-identical (%zu vs %zu bytes)", REAL_FILES[i], names[path], n, nw);
            free(w);
            if (path == 0) {
                CHECK(kiln_gguf_write_to_file(g, TMP_FILE, false), "write_to_file: %s", kiln_last_error());
                size_t nf;
                uint8_t * f = slurp(TMP_FILE, &nf);
                CHECK(same_bytes(orig, n, f, nf), "%s: written file is byte-identical", REAL_FILES[i]);
                free(f);
            }
            kiln_gguf_free(g);
            kiln_free(kl);
        }
        free(orig);
    }
}

/* ------------------------------------------------- loading into a context */

static void test_context_loading(void) {
    tu_case = "context loading";
    size_t n;
    uint8_t * orig = slurp("models/stories260K.gguf", &n);
    CHECK(orig != NULL, "read stories260K");
    if (!orig) return;
    /* shapes and types only */
    struct kiln_context * kl = NULL;
    struct kiln_gguf_init_params p = { true, &kl, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file("models/stories260K.gguf", p);
    CHECK(g && kl, "no_alloc load: %s", kiln_last_error());
    if (g && kl) {
        int count = 0;
        for (struct kiln_tensor * t = kiln_get_first_tensor(kl); t; t = kiln_get_next_tensor(kl, t)) {
            CHECK(t->data == NULL, "no_alloc: %s has no data", t->name);
            count++;
        }
        CHECK(count == 48, "48 tensors in the context, got %d", count);
        struct kiln_tensor * q = kiln_get_tensor(kl, "blk.0.attn_k.weight");
        CHECK(q && q->type == KILN_TYPE_F32 && q->ne[0] == 64 && q->ne[1] == 32 && q->ne[2] == 1, "attn_k shape");
        CHECK(kiln_get_mem_size(kl) < 48 * 1024, "no_alloc context is small (%zu bytes)", kiln_get_mem_size(kl));
    }
    kiln_gguf_free(g);
    kiln_free(kl);
    /* with data: every tensor's bytes are the file's */
    for (int path = 0; path < 4; path++) {
        kl = NULL;
        struct kiln_gguf_init_params pd = { false, &kl, path == 1 };
        if (path == 2) setenv("KILN_GGUF_NO_MMAP", "1", 1);
        g = path == 3 ? read_cb(orig, n, pd) : kiln_gguf_init_from_file("models/stories260K.gguf", pd);
        if (path == 2) unsetenv("KILN_GGUF_NO_MMAP");
        CHECK(g && kl, "load with data (path %d): %s", path, kiln_last_error());
        if (!g || !kl) { kiln_gguf_free(g); kiln_free(kl); continue; }
        const size_t doff = kiln_gguf_get_data_offset(g);
        for (int64_t i = 0; i < kiln_gguf_get_n_tensors(g); i++) {
            struct kiln_tensor * t = kiln_get_tensor(kl, kiln_gguf_get_tensor_name(g, i));
            CHECK(t && t->data && kiln_nbytes(t) == kiln_gguf_get_tensor_size(g, i) &&
                  memcmp(t->data, orig + doff + kiln_gguf_get_tensor_offset(g, i), kiln_nbytes(t)) == 0,
                  "tensor %s data (path %d)", kiln_gguf_get_tensor_name(g, i), path);
            CHECK(t && ((uintptr_t) t->data % KILN_MEM_ALIGN) == 0, "tensor data aligned");
        }
        struct kiln_tensor * norm = kiln_get_tensor(kl, "output_norm.weight");
        float v0 = 0;
        memcpy(&v0, orig + doff + 131072, 4);
        CHECK(norm && kiln_get_f32_1d(norm, 0) == v0 && v0 != 0.0f, "output_norm[0] = %g", v0);
        if (path == 1) {
            /* no_copy: the tensors are private pages of the mapping; writing one is allowed */
            kiln_set_f32_1d(norm, 0, 42.0f);
            CHECK(kiln_get_f32_1d(norm, 0) == 42.0f, "mapped tensor is writable (copy on write)");
        }
        kiln_gguf_free(g);
        kiln_free(kl);
    }
    /* the file is untouched by the copy-on-write above */
    size_t n2;
    uint8_t * again = slurp("models/stories260K.gguf", &n2);
    CHECK(same_bytes(orig, n, again, n2), "file unchanged");
    free(again);
    free(orig);
}

/* ------------------------------------------------------------- API misuse */

static void test_api(void) {
    tu_case = "api";
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    CHECK(kiln_gguf_get_n_kv(g) == 0 && kiln_gguf_get_n_tensors(g) == 0 && kiln_gguf_get_version(g) == 3, "empty");
    kiln_gguf_set_val_u32(g, "a", 7);
    kiln_gguf_set_val_str(g, "b", "x");
    /* wrong type / bad id: 0 and an error, no abort */
    kiln_clear_error();
    CHECK(kiln_gguf_get_val_i32(g, 0) == 0 && strstr(kiln_last_error(), "holds u32, not i32"), "wrong type: %s", kiln_last_error());
    CHECK(kiln_gguf_get_val_str(g, 0) == NULL, "str of a u32");
    CHECK(kiln_gguf_get_val_u32(g, 5) == 0 && strstr(kiln_last_error(), "out of range"), "bad key id");
    CHECK(kiln_gguf_get_val_u32(g, -1) == 0, "negative key id");
    CHECK(kiln_gguf_get_arr_n(g, 1) == 0 && strstr(kiln_last_error(), "not arr"), "arr_n of a string: %s", kiln_last_error());
    CHECK(kiln_gguf_get_arr_type(g, 0) == KILN_GGUF_TYPE_COUNT, "arr_type of a scalar");
    CHECK(kiln_gguf_get_val_data(g, 1) == NULL, "val_data of a string");
    CHECK(kiln_gguf_get_key(g, 9) == NULL && kiln_gguf_find_key(g, "zz") == -1 && kiln_gguf_find_key(g, NULL) == -1, "find");
    CHECK(kiln_gguf_get_tensor_name(g, 0) == NULL && kiln_gguf_get_tensor_ne(g, 0) == NULL, "no tensor 0");
    CHECK(kiln_gguf_get_val_u32(NULL, 0) == 0, "NULL context");
    /* replacing a key moves it to the back (like ggml) */
    CHECK(kiln_gguf_set_val_i64(g, "a", -1) && kiln_gguf_get_n_kv(g) == 2 && kiln_gguf_find_key(g, "a") == 1 &&
          kiln_gguf_get_val_i64(g, 1) == -1, "replace");
    CHECK(kiln_gguf_remove_key(g, "b") == 0 && kiln_gguf_get_n_kv(g) == 1 && kiln_gguf_remove_key(g, "b") == -1, "remove_key");
    /* general.alignment: a u32 power of two only */
    CHECK(!kiln_gguf_set_val_u32(g, "general.alignment", 0) && strstr(kiln_last_error(), "power of 2"), "alignment 0");
    CHECK(!kiln_gguf_set_val_u32(g, "general.alignment", 24), "alignment 24");
    CHECK(!kiln_gguf_set_val_u32(g, "general.alignment", 1u << 31) && strstr(kiln_last_error(), "larger than"), "alignment 2^31");
    CHECK(kiln_gguf_set_val_u32(g, "general.alignment", KILN_GGUF_MAX_ALIGNMENT) && kiln_gguf_get_alignment(g) == (1u << 20) &&
          kiln_gguf_remove_key(g, "general.alignment") >= 0, "alignment 1 MiB is the largest allowed");
    CHECK(!kiln_gguf_set_val_u64(g, "general.alignment", 64) && strstr(kiln_last_error(), "must be a u32"), "alignment u64");
    CHECK(!kiln_gguf_set_val_str(g, "general.alignment", "64"), "alignment str");
    CHECK(kiln_gguf_get_alignment(g) == 32, "alignment unchanged");
    CHECK(!kiln_gguf_set_arr_data(g, "x", KILN_GGUF_TYPE_STRING, "", 1), "set_arr_data of strings refused");
    CHECK(!kiln_gguf_set_arr_data(g, "x", KILN_GGUF_TYPE_ARRAY, "", 1), "set_arr_data of arrays refused");
    CHECK(!kiln_gguf_set_arr_data(g, "x", KILN_GGUF_TYPE_UINT8, NULL, 3), "NULL data refused");
    CHECK(!kiln_gguf_set_val_u8(g, NULL, 1), "NULL key refused");

    /* tensors */
    struct kiln_context * k = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(k, KILN_TYPE_F32, 8, 3);
    struct kiln_tensor * b = kiln_new_tensor_1d(k, KILN_TYPE_F16, 40);
    struct kiln_tensor * c = kiln_new_tensor_1d(k, KILN_TYPE_I8, 5);
    kiln_set_name(a, "a"); kiln_set_name(b, "b"); kiln_set_name(c, "c");
    fill_bytes(a->data, kiln_nbytes(a), 1); fill_bytes(b->data, kiln_nbytes(b), 2); fill_bytes(c->data, kiln_nbytes(c), 3);
    CHECK(kiln_gguf_add_tensor(g, a) && kiln_gguf_add_tensor(g, b) && kiln_gguf_add_tensor(g, c), "add 3 tensors");
    CHECK(!kiln_gguf_add_tensor(g, a) && strstr(kiln_last_error(), "duplicate tensor name"), "duplicate add");
    CHECK(kiln_gguf_get_tensor_offset(g, 0) == 0 && kiln_gguf_get_tensor_offset(g, 1) == 96 && kiln_gguf_get_tensor_offset(g, 2) == 192,
          "offsets 0, 96, 192");
    struct kiln_tensor * tr = kiln_transpose(k, a);
    if (tr) {
        kiln_set_name(tr, "tr");
        CHECK(!kiln_gguf_add_tensor(g, tr) && strstr(kiln_last_error(), "not contiguous"), "non-contiguous refused");
    }
    /* changing a type re-lays the following tensors out */
    CHECK(kiln_gguf_set_tensor_type(g, "a", KILN_TYPE_F16), "set_tensor_type");
    CHECK(kiln_gguf_get_tensor_size(g, 0) == 48 && kiln_gguf_get_tensor_offset(g, 1) == 64 && kiln_gguf_get_tensor_offset(g, 2) == 160,
          "re-laid out: %zu %zu", kiln_gguf_get_tensor_offset(g, 1), kiln_gguf_get_tensor_offset(g, 2));
    CHECK(!kiln_gguf_set_tensor_type(g, "a", KILN_TYPE_Q4_0) && strstr(kiln_last_error(), "block size"), "q4_0 needs 32 | ne[0]");
    CHECK(!kiln_gguf_set_tensor_type(g, "nope", KILN_TYPE_F32), "unknown tensor");
    /* a tensor without data cannot be written, metadata can */
    uint8_t small[16];
    CHECK(kiln_gguf_write_to_buffer(g, small, sizeof small, false) == 0 && strstr(kiln_last_error(), "no data"), "no data: %s", kiln_last_error());
    const size_t ms = kiln_gguf_get_meta_size(g);
    uint8_t * meta = (uint8_t *) malloc(ms);
    CHECK(kiln_gguf_get_meta_data(g, meta), "get_meta_data");
    uint16_t ah[24];
    for (int i = 0; i < 24; i++) ah[i] = kiln_fp32_to_fp16((float) i);
    CHECK(kiln_gguf_set_tensor_data(g, "a", ah), "set_tensor_data");
    size_t nw;
    uint8_t * w = write_mem(g, &nw);
    CHECK(w && nw == ms + 160 + 32, "written size %zu (meta %zu)", nw, ms);
    CHECK(w && memcmp(w, meta, ms) == 0, "metadata is the prefix of the file");
    CHECK(kiln_gguf_write_to_buffer(g, small, sizeof small, false) == 0 && strstr(kiln_last_error(), "need"), "buffer too small");
    CHECK(kiln_gguf_get_write_size(g, true) == ms, "only_meta size");
    /* the written file reads back with the new layout */
    struct kiln_gguf_init_params p = { true, NULL, false };
    struct kiln_gguf_context * r = w ? kiln_gguf_init_from_buffer(w, nw, p) : NULL;
    CHECK(r && kiln_gguf_get_tensor_type(r, 0) == KILN_TYPE_F16 && kiln_gguf_get_tensor_offset(r, 2) == 160 &&
          memcmp(w + kiln_gguf_get_data_offset(r), ah, 48) == 0, "re-read");
    /* set_kv copies everything, including strings and arrays */
    struct kiln_gguf_context * vals = make_values_ctx(64);
    struct kiln_gguf_context * dst = kiln_gguf_init_empty();
    CHECK(kiln_gguf_set_kv(dst, vals), "set_kv");
    check_values_ctx(dst, 64);
    /* changing the alignment re-lays tensors out */
    CHECK(kiln_gguf_set_val_u32(g, "general.alignment", 256) && kiln_gguf_get_tensor_offset(g, 1) == 256 &&
          kiln_gguf_get_tensor_offset(g, 2) == 512, "alignment 256 re-layout");
    CHECK(kiln_gguf_remove_key(g, "general.alignment") >= 0 && kiln_gguf_get_alignment(g) == 32 &&
          kiln_gguf_get_tensor_offset(g, 1) == 64, "alignment back to 32");
    /* files that do not exist */
    CHECK(kiln_gguf_init_from_file("no/such/file.gguf", p) == NULL && strstr(kiln_last_error(), "cannot open"), "missing file");
    CHECK(kiln_gguf_init_from_file("tests", p) == NULL, "a directory");
    CHECK(kiln_gguf_init_from_callback(NULL, NULL, 10, p) == NULL, "NULL callback");
    CHECK(kiln_gguf_init_from_buffer(NULL, 10, p) == NULL, "NULL buffer");
    CHECK(!kiln_gguf_write_to_file(g, "no/such/dir/x.gguf", true) && strstr(kiln_last_error(), "cannot create"), "unwritable path");
    kiln_gguf_free(r);
    kiln_gguf_free(vals);
    kiln_gguf_free(dst);
    free(w);
    free(meta);
    kiln_gguf_free(g);
    kiln_free(k);
}

/* ------------------------------------------------------------ fuzz seeds */

static int write_seeds(const char * dir) {
    char path[1024];
    int n = 0;
    for (uint32_t a = 0; a < 2; a++) {
        struct kiln_gguf_context * g = make_values_ctx(a ? 8 : 0);
        snprintf(path, sizeof path, "%s/seed-values-%u.gguf", dir, a);
        n += kiln_gguf_write_to_file(g, path, false);
        kiln_gguf_free(g);
    }
    int nt = 0;
    struct kiln_context * k = make_tensors(&nt);
    for (uint32_t a = 0; a < 3; a++) {
        static const uint32_t aligns[] = { 0, 1, 64 };
        struct kiln_gguf_context * g = make_tensors_ctx(k, aligns[a]);
        snprintf(path, sizeof path, "%s/seed-tensors-%u.gguf", dir, aligns[a]);
        n += kiln_gguf_write_to_file(g, path, false);
        kiln_gguf_free(g);
    }
    kiln_free(k);
    printf("wrote %d seeds to %s\n", n, dir);
    return n == 5 ? 0 : 1;
}

int main(int argc, char ** argv) {
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    snprintf(TMP_FILE, sizeof TMP_FILE, "test_gguf_tmp_%d.gguf", (int) getpid());
    test_value_round_trip();
    test_tensor_round_trip();
    test_stories260k();
    test_vocab_files();
    test_copies();
    test_context_loading();
    test_api();
    remove(TMP_FILE);
    return tu_finish();
}
