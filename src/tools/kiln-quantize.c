/*
 * kiln-quantize — requantize the weights of a GGUF model.
 *
 *   kiln-quantize IN.gguf OUT.gguf TYPE [--imatrix-free]
 *
 * TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs
 * tq1_0 tq2_0 f16 bf16 f32. Every tensor whose name ends in "weight", that
 * has at least 2 dimensions, is stored as F32/F16/BF16 and whose rows
 * (ne[0]) are a multiple of TYPE's block size is converted with the
 * reference quantizers (the bytes llama.cpp's quantizer writes for the same
 * type without an importance matrix). Everything else (1-D tensors such as
 * norms, rows that do not fit the block, already-quantized tensors) is
 * copied unchanged, as llama.cpp does. Metadata is copied, with
 * general.file_type and general.quantization_version set.
 *
 * Exit status 0 on success, 1 on a bad file or write error, 2 on bad usage.
 */
#include "kiln.h"
#include "kiln-gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* llama.cpp's llama_ftype for a model whose weights are all of one type */
static int ftype_of(enum kiln_type t) {
    switch (t) {
        case KILN_TYPE_F32:    return 0;
        case KILN_TYPE_F16:    return 1;
        case KILN_TYPE_Q4_0:   return 2;
        case KILN_TYPE_Q4_1:   return 3;
        case KILN_TYPE_Q8_0:   return 7;
        case KILN_TYPE_Q5_0:   return 8;
        case KILN_TYPE_Q5_1:   return 9;
        case KILN_TYPE_Q2_K:   return 10;
        case KILN_TYPE_Q3_K:   return 11; /* Q3_K_S: every weight Q3_K */
        case KILN_TYPE_Q4_K:   return 14; /* Q4_K_S */
        case KILN_TYPE_Q5_K:   return 16; /* Q5_K_S */
        case KILN_TYPE_Q6_K:   return 18;
        case KILN_TYPE_IQ4_NL: return 25;
        case KILN_TYPE_IQ4_XS: return 30;
        case KILN_TYPE_BF16:   return 32;
        case KILN_TYPE_TQ1_0:  return 36;
        case KILN_TYPE_TQ2_0:  return 37;
        default:               return -1;
    }
}

static bool ends_with(const char * s, const char * suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool is_float_type(enum kiln_type t) {
    return t == KILN_TYPE_F32 || t == KILN_TYPE_F16 || t == KILN_TYPE_BF16;
}

static int usage(void) {
    fprintf(stderr, "usage: kiln-quantize IN.gguf OUT.gguf TYPE\n"
                    "  TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs tq1_0 tq2_0 f16 bf16 f32\n");
    return 2;
}

int main(int argc, char ** argv) {
    if (argc != 4) return usage();
    const char * in = argv[1], * out = argv[2], * tname = argv[3];

    enum kiln_type target = KILN_TYPE_COUNT;
    for (int t = 0; t < KILN_TYPE_COUNT; t++) {
        if (kiln_type_is_valid(t) && strcmp(kiln_type_name((enum kiln_type) t), tname) == 0) target = (enum kiln_type) t;
    }
    if (target == KILN_TYPE_COUNT || ftype_of(target) < 0) {
        fprintf(stderr, "kiln-quantize: unsupported type '%s'\n", tname);
        return usage();
    }
    const struct kiln_type_traits * ttr = kiln_get_type_traits(target);

    struct kiln_context * kin = NULL;
    struct kiln_gguf_init_params p = { false, &kin, true };
    struct kiln_gguf_context * gin = kiln_gguf_init_from_file(in, p);
    if (!gin) {
        fprintf(stderr, "kiln-quantize: %s: %s\n", in, kiln_last_error());
        return 1;
    }

    const int64_t n_t = kiln_gguf_get_n_tensors(gin);
    struct kiln_init_params ip = { kiln_tensor_overhead() * (size_t) (n_t + 1), NULL, true };
    struct kiln_context * kout = kiln_init(ip);
    struct kiln_gguf_context * gout = kiln_gguf_init_empty();
    void ** bufs = calloc((size_t) n_t + 1, sizeof(void *));
    int rc = 0;
    if (!kout || !gout || !bufs || !kiln_gguf_set_kv(gout, gin)) {
        fprintf(stderr, "kiln-quantize: out of memory or bad metadata: %s\n", kiln_last_error());
        rc = 1;
        goto done;
    }
    kiln_gguf_set_val_u32(gout, "general.file_type", (uint32_t) ftype_of(target));
    kiln_gguf_set_val_u32(gout, "general.quantization_version", 2);

    size_t bytes_in = 0, bytes_out = 0;
    int n_quantized = 0;
    for (int64_t i = 0; i < n_t; i++) {
        const char * name = kiln_gguf_get_tensor_name(gin, i);
        struct kiln_tensor * src = kiln_get_tensor(kin, name);
        if (!src) {
            fprintf(stderr, "kiln-quantize: tensor %s missing from the loaded context\n", name);
            rc = 1;
            goto done;
        }
        const int nd = kiln_gguf_get_tensor_n_dims(gin, i);
        const bool convert = ends_with(name, "weight") && nd >= 2 && is_float_type(src->type) &&
                             src->ne[0] % ttr->blck_size == 0 && src->type != target;
        const enum kiln_type type = convert ? target : src->type;
        struct kiln_tensor * dst = kiln_new_tensor(kout, type, nd, src->ne);
        if (!dst) {
            fprintf(stderr, "kiln-quantize: %s: %s\n", name, kiln_last_error());
            rc = 1;
            goto done;
        }
        kiln_set_name(dst, name);
        const size_t nbytes = kiln_nbytes(dst);
        bufs[i] = malloc(nbytes ? nbytes : 1);
        if (!bufs[i]) { fprintf(stderr, "kiln-quantize: out of memory\n"); rc = 1; goto done; }
        dst->data = bufs[i];
        bytes_in += kiln_nbytes(src);
        bytes_out += nbytes;
        if (!convert) {
            memcpy(dst->data, src->data, nbytes);
        } else {
            const int64_t n_per_row = src->ne[0];
            const int64_t nrows = kiln_nelements(src) / n_per_row;
            const struct kiln_type_traits * st = kiln_get_type_traits(src->type);
            float * row = malloc(sizeof(float) * (size_t) n_per_row);
            if (!row) { fprintf(stderr, "kiln-quantize: out of memory\n"); rc = 1; goto done; }
            const size_t src_rs = kiln_row_size(src->type, n_per_row), dst_rs = kiln_row_size(type, n_per_row);
            for (int64_t r = 0; r < nrows && rc == 0; r++) {
                st->to_float((const char *) src->data + (size_t) r * src_rs, row, n_per_row);
                if (kiln_quantize_chunk(type, row, (char *) dst->data + (size_t) r * dst_rs, 0, 1, n_per_row, NULL) != dst_rs) {
                    fprintf(stderr, "kiln-quantize: %s: %s\n", name, kiln_last_error());
                    rc = 1;
                }
            }
            free(row);
            if (rc) goto done;
            n_quantized++;
        }
        if (!kiln_gguf_add_tensor(gout, dst)) {
            fprintf(stderr, "kiln-quantize: %s: %s\n", name, kiln_last_error());
            rc = 1;
            goto done;
        }
        printf("  %-40s %-6s -> %-6s\n", name, kiln_type_name(src->type), kiln_type_name(type));
    }
    if (!kiln_gguf_write_to_file(gout, out, false)) {
        fprintf(stderr, "kiln-quantize: %s: %s\n", out, kiln_last_error());
        rc = 1;
        goto done;
    }
    printf("kiln-quantize: %d of %lld tensors to %s, %.2f MiB -> %.2f MiB\n", n_quantized, (long long) n_t,
           kiln_type_name(target), bytes_in / 1048576.0, bytes_out / 1048576.0);

done:
    if (bufs) for (int64_t i = 0; i < n_t; i++) free(bufs[i]);
    free(bufs);
    if (gout) kiln_gguf_free(gout);
    if (kout) kiln_free(kout);
    kiln_gguf_free(gin);
    kiln_free(kin);
    return rc;
}
