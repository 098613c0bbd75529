/*
 * fuzz_gguf.c — libFuzzer target for the GGUF reader (and, on what it
 * accepts, the writer).
 *
 * Each input is parsed from a buffer (metadata only), into a kiln context
 * (data copied), from a read callback delivering odd-sized chunks (data
 * streamed into the context), and in place (no_copy). Beyond "no crash, no
 * leak, no UB" the target traps when the paths disagree, or when a file it
 * accepted does not survive write -> read -> write unchanged.
 *
 * Run: scripts/fuzz.sh [SECONDS]
 */
#include "kiln.h"
#include "kiln-gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_ASSERT(x) do { if (!(x)) __builtin_trap(); } while (0)

struct chunked {
    const uint8_t * data;
    size_t size;
    size_t pos;
    size_t step;
};

static size_t chunked_read(void * dst, size_t size, void * ud) {
    struct chunked * c = (struct chunked *) ud;
    size_t n = size < c->step ? size : c->step;
    if (n > c->size - c->pos) n = c->size - c->pos;
    memcpy(dst, c->data + c->pos, n);
    c->pos += n;
    c->step = c->step * 7 % 1021 + 1; /* vary the chunk sizes */
    return n;
}

static volatile uint64_t sink;

static void touch_everything(const struct kiln_gguf_context * g) {
    uint64_t acc = kiln_gguf_get_version(g) + kiln_gguf_get_alignment(g) + kiln_gguf_get_data_offset(g);
    for (int64_t i = 0; i < kiln_gguf_get_n_kv(g); i++) {
        const char * key = kiln_gguf_get_key(g, i);
        FUZZ_ASSERT(key != NULL);
        if (i < 64) acc += (uint64_t) kiln_gguf_find_key(g, key); /* linear: keep the harness linear */
        const enum kiln_gguf_type t = kiln_gguf_get_kv_type(g, i);
        if (t == KILN_GGUF_TYPE_ARRAY) {
            const size_t n = kiln_gguf_get_arr_n(g, i);
            if (kiln_gguf_get_arr_type(g, i) == KILN_GGUF_TYPE_STRING) {
                for (size_t j = 0; j < n && j < 64; j++) {
                    const char * s = kiln_gguf_get_arr_str(g, i, j);
                    const size_t len = kiln_gguf_get_arr_str_len(g, i, j);
                    FUZZ_ASSERT(s != NULL && s[len] == 0);
                    acc += len ? (unsigned char) s[len - 1] : 0;
                }
            } else if (n > 0) {
                acc += *(const uint8_t *) kiln_gguf_get_arr_data(g, i);
            }
        } else if (t == KILN_GGUF_TYPE_STRING) {
            const char * s = kiln_gguf_get_val_str(g, i);
            FUZZ_ASSERT(s != NULL && s[kiln_gguf_get_val_str_len(g, i)] == 0);
        } else {
            FUZZ_ASSERT(kiln_gguf_get_val_data(g, i) != NULL);
            acc += kiln_gguf_get_val_u32(g, i); /* wrong type for most: must just fail */
        }
    }
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(g); i++) {
        const char * name = kiln_gguf_get_tensor_name(g, i);
        if (i < 64) FUZZ_ASSERT(kiln_gguf_find_tensor(g, name) == i);
        const int64_t * ne = kiln_gguf_get_tensor_ne(g, i);
        acc += (uint64_t) ne[0] + kiln_gguf_get_tensor_offset(g, i) + kiln_gguf_get_tensor_size(g, i);
    }
    sink = acc;
}

/* the full file as written; NULL when the context cannot be written */
static uint8_t * write_all(const struct kiln_gguf_context * g, size_t * size) {
    *size = kiln_gguf_get_write_size(g, false);
    uint8_t * buf = (uint8_t *) malloc(*size ? *size : 1);
    FUZZ_ASSERT(buf != NULL);
    FUZZ_ASSERT(kiln_gguf_write_to_buffer(g, buf, *size, false) == *size);
    return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    kiln_log_set(NULL, NULL);

    /* 1. metadata only */
    struct kiln_gguf_init_params meta_only = { true, NULL, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(data, size, meta_only);
    const bool ok_meta = g != NULL;
    if (g) {
        touch_everything(g);
        const size_t ms = kiln_gguf_get_meta_size(g);
        uint8_t * meta = (uint8_t *) malloc(ms ? ms : 1);
        FUZZ_ASSERT(meta && kiln_gguf_get_meta_data(g, meta));
        free(meta);
        kiln_gguf_free(g);
    } else {
        FUZZ_ASSERT(strstr(kiln_last_error(), "gguf") != NULL);
    }

    /* 2. into a context, data copied; accepted exactly when 1 was */
    struct kiln_context * kctx = NULL;
    struct kiln_gguf_init_params load = { false, &kctx, false };
    g = kiln_gguf_init_from_buffer(data, size, load);
    FUZZ_ASSERT((g != NULL) == ok_meta);
    if (!g) {
        FUZZ_ASSERT(kctx == NULL);
        return 0;
    }
    size_t n1 = 0;
    uint8_t * out1 = write_all(g, &n1);
    kiln_gguf_free(g);
    kiln_free(kctx);

    /* 3. write -> read -> write is the identity */
    kctx = NULL;
    g = kiln_gguf_init_from_buffer(out1, n1, load);
    FUZZ_ASSERT(g != NULL);
    size_t n2 = 0;
    uint8_t * out2 = write_all(g, &n2);
    FUZZ_ASSERT(n1 == n2 && memcmp(out1, out2, n1) == 0);
    free(out2);
    kiln_gguf_free(g);
    kiln_free(kctx);

    /* 4. the streaming reader agrees with the buffer reader */
    struct chunked c = { data, size, 0, 1 + (size % 13) };
    kctx = NULL;
    g = kiln_gguf_init_from_callback(chunked_read, &c, size, load);
    FUZZ_ASSERT(g != NULL);
    out2 = write_all(g, &n2);
    FUZZ_ASSERT(n1 == n2 && memcmp(out1, out2, n1) == 0);
    free(out2);
    kiln_gguf_free(g);
    kiln_free(kctx);

    /* 5. in place (no_copy) from an aligned copy */
    uint8_t * aligned = NULL;
    FUZZ_ASSERT(posix_memalign((void **) &aligned, 64, size ? size : 1) == 0);
    if (size) memcpy(aligned, data, size);
    struct kiln_gguf_init_params in_place = { false, &kctx, true };
    kctx = NULL;
    g = kiln_gguf_init_from_buffer(aligned, size, in_place);
    FUZZ_ASSERT(g != NULL);
    out2 = write_all(g, &n2);
    FUZZ_ASSERT(n1 == n2 && memcmp(out1, out2, n1) == 0);
    free(out2);
    kiln_gguf_free(g);
    kiln_free(kctx);
    free(aligned);

    free(out1);
    return 0;
}
