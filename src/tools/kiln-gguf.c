/*
 * kiln-gguf — inspect and copy GGUF files.
 *
 *   kiln-gguf info FILE      version, metadata (long arrays summarized),
 *                            tensor table (name, type, shape, offset)
 *   kiln-gguf copy IN OUT    read IN with its tensor data and write it back
 *                            out (byte for byte identical for files whose
 *                            padding is zeros)
 *
 * Exit status 0 on success; on a bad file the error goes to stderr, exit 1.
 */
#include "kiln.h"
#include "kiln-gguf.h"

#include <stdio.h>
#include <string.h>

#define ARR_SHOWN 5   /* array elements printed before "..." */
#define STR_SHOWN 64  /* characters of a string printed */

static void print_str(const char * s, size_t len) {
    putchar('"');
    for (size_t i = 0; i < len && i < STR_SHOWN; i++) {
        const unsigned char c = (unsigned char) s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c < 0x20 || c == 0x7f) printf("\\x%02x", c);
        else putchar(c);
    }
    putchar('"');
    if (len > STR_SHOWN) printf("...(%zu bytes)", len);
}

static void print_num(enum kiln_gguf_type type, const void * p) {
    switch (type) {
        case KILN_GGUF_TYPE_UINT8:   printf("%u", *(const uint8_t *) p); break;
        case KILN_GGUF_TYPE_INT8:    printf("%d", *(const int8_t *) p); break;
        case KILN_GGUF_TYPE_UINT16:  { uint16_t v; memcpy(&v, p, 2); printf("%u", v); } break;
        case KILN_GGUF_TYPE_INT16:   { int16_t v;  memcpy(&v, p, 2); printf("%d", v); } break;
        case KILN_GGUF_TYPE_UINT32:  { uint32_t v; memcpy(&v, p, 4); printf("%u", v); } break;
        case KILN_GGUF_TYPE_INT32:   { int32_t v;  memcpy(&v, p, 4); printf("%d", v); } break;
        case KILN_GGUF_TYPE_FLOAT32: { float v;    memcpy(&v, p, 4); printf("%.9g", v); } break;
        case KILN_GGUF_TYPE_BOOL:    printf("%s", *(const int8_t *) p ? "true" : "false"); break;
        case KILN_GGUF_TYPE_UINT64:  { uint64_t v; memcpy(&v, p, 8); printf("%llu", (unsigned long long) v); } break;
        case KILN_GGUF_TYPE_INT64:   { int64_t v;  memcpy(&v, p, 8); printf("%lld", (long long) v); } break;
        case KILN_GGUF_TYPE_FLOAT64: { double v;   memcpy(&v, p, 8); printf("%.17g", v); } break;
        default: printf("?"); break;
    }
}

static size_t num_size(enum kiln_gguf_type type) {
    switch (type) {
        case KILN_GGUF_TYPE_UINT8: case KILN_GGUF_TYPE_INT8: case KILN_GGUF_TYPE_BOOL: return 1;
        case KILN_GGUF_TYPE_UINT16: case KILN_GGUF_TYPE_INT16: return 2;
        case KILN_GGUF_TYPE_UINT32: case KILN_GGUF_TYPE_INT32: case KILN_GGUF_TYPE_FLOAT32: return 4;
        default: return 8;
    }
}

static int cmd_info(const char * path) {
    struct kiln_gguf_init_params p = { true, NULL, false };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(path, p);
    if (!g) {
        fprintf(stderr, "kiln-gguf: %s: %s\n", path, kiln_last_error());
        return 1;
    }
    const int64_t n_kv = kiln_gguf_get_n_kv(g);
    const int64_t n_t = kiln_gguf_get_n_tensors(g);
    printf("file: %s\n", path);
    printf("version: %u\n", kiln_gguf_get_version(g));
    printf("alignment: %zu\n", kiln_gguf_get_alignment(g));
    printf("data offset: %zu\n", kiln_gguf_get_data_offset(g));
    printf("metadata: %lld keys\n", (long long) n_kv);
    for (int64_t i = 0; i < n_kv; i++) {
        const enum kiln_gguf_type t = kiln_gguf_get_kv_type(g, i);
        printf("  %-44s ", kiln_gguf_get_key(g, i));
        if (t == KILN_GGUF_TYPE_STRING) {
            printf("str = ");
            print_str(kiln_gguf_get_val_str(g, i), kiln_gguf_get_val_str_len(g, i));
        } else if (t == KILN_GGUF_TYPE_ARRAY) {
            const enum kiln_gguf_type at = kiln_gguf_get_arr_type(g, i);
            const size_t n = kiln_gguf_get_arr_n(g, i);
            printf("arr[%s,%zu] = [", kiln_gguf_type_name(at), n);
            for (size_t j = 0; j < n && j < ARR_SHOWN; j++) {
                if (j) printf(", ");
                if (at == KILN_GGUF_TYPE_STRING) {
                    print_str(kiln_gguf_get_arr_str(g, i, j), kiln_gguf_get_arr_str_len(g, i, j));
                } else {
                    print_num(at, (const char *) kiln_gguf_get_arr_data(g, i) + j * num_size(at));
                }
            }
            printf("%s]", n > ARR_SHOWN ? ", ..." : "");
        } else {
            printf("%s = ", kiln_gguf_type_name(t));
            print_num(t, kiln_gguf_get_val_data(g, i));
        }
        printf("\n");
    }
    printf("tensors: %lld\n", (long long) n_t);
    if (n_t > 0) printf("  %5s %-40s %-8s %-28s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
    for (int64_t i = 0; i < n_t; i++) {
        const int64_t * ne = kiln_gguf_get_tensor_ne(g, i);
        const int nd = kiln_gguf_get_tensor_n_dims(g, i);
        char shape[128];
        int o = snprintf(shape, sizeof(shape), "[");
        for (int d = 0; d < nd && o < (int) sizeof(shape); d++) {
            o += snprintf(shape + o, sizeof(shape) - (size_t) o, "%s%lld", d ? ", " : "", (long long) ne[d]);
        }
        if (o < (int) sizeof(shape)) snprintf(shape + o, sizeof(shape) - (size_t) o, "]");
        printf("  %5lld %-40s %-8s %-28s %12zu %12zu\n", (long long) i, kiln_gguf_get_tensor_name(g, i),
               kiln_type_name(kiln_gguf_get_tensor_type(g, i)), shape, kiln_gguf_get_tensor_offset(g, i),
               kiln_gguf_get_tensor_size(g, i));
    }
    kiln_gguf_free(g);
    return 0;
}

static int cmd_copy(const char * in, const char * out) {
    struct kiln_context * kctx = NULL;
    struct kiln_gguf_init_params p = { false, &kctx, true };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(in, p);
    if (!g) {
        fprintf(stderr, "kiln-gguf: %s: %s\n", in, kiln_last_error());
        return 1;
    }
    const bool ok = kiln_gguf_write_to_file(g, out, false);
    if (!ok) fprintf(stderr, "kiln-gguf: %s: %s\n", out, kiln_last_error());
    kiln_gguf_free(g);
    kiln_free(kctx);
    return ok ? 0 : 1;
}

static int usage(void) {
    fprintf(stderr,
            "usage: kiln-gguf info FILE       print version, metadata and tensor table\n"
            "       kiln-gguf copy IN OUT     write IN back out to OUT\n");
    return 2;
}

int main(int argc, char ** argv) {
    if (argc == 3 && strcmp(argv[1], "info") == 0) return cmd_info(argv[2]);
    if (argc == 4 && strcmp(argv[1], "copy") == 0) return cmd_copy(argv[2], argv[3]);
    return usage();
}
