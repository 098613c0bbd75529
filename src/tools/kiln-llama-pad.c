/*
 * kiln-llama-pad — copy a llama GGUF with its feed-forward width padded with
 * zeros to a multiple of N (default 32), so that row-quantized types can hold
 * ffn_down (stories260K's 172 becomes 192). The padded model computes the
 * same function: the extra gate/up rows are zero, so silu(0) * 0 = 0 enters
 * the extra ffn_down columns, which are zero too.
 *
 *   kiln-llama-pad IN.gguf OUT.gguf [--multiple N]
 *
 * Only F32 and F16 feed-forward tensors are padded (quantize afterwards).
 */
#include "kiln-gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char * msg) {
    fprintf(stderr, "kiln-llama-pad: %s (%s)\n", msg, kiln_last_error());
    return 1;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: kiln-llama-pad IN.gguf OUT.gguf [--multiple N]\n");
        return 2;
    }
    int mult = 32;
    if (argc >= 5 && !strcmp(argv[3], "--multiple")) mult = atoi(argv[4]);
    if (mult <= 0) {
        fprintf(stderr, "kiln-llama-pad: bad --multiple\n");
        return 2;
    }
    struct kiln_context * src_ctx = NULL;
    struct kiln_gguf_init_params ip = { .no_alloc = false, .ctx = &src_ctx };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file(argv[1], ip);
    if (!src) return fail("cannot read the input");
    char arch[64] = "llama";
    int64_t ka = kiln_gguf_find_key(src, "general.architecture");
    if (ka >= 0) snprintf(arch, sizeof arch, "%s", kiln_gguf_get_val_str(src, ka));
    char key[128];
    snprintf(key, sizeof key, "%s.feed_forward_length", arch);
    int64_t kf = kiln_gguf_find_key(src, key);
    if (kf < 0) return fail("no feed_forward_length in the metadata");
    const int64_t n_ff = kiln_gguf_get_val_u32(src, kf);
    const int64_t n_pad = (n_ff + mult - 1) / mult * mult;

    struct kiln_gguf_context * dst = kiln_gguf_init_empty();
    kiln_gguf_set_kv(dst, src);
    kiln_gguf_set_val_u32(dst, key, (uint32_t) n_pad);
    struct kiln_init_params cp = { 0, NULL, false };
    const int64_t n_t = kiln_gguf_get_n_tensors(src);
    for (int64_t i = 0; i < n_t; i++) {
        const struct kiln_tensor * t = kiln_get_tensor(src_ctx, kiln_gguf_get_tensor_name(src, i));
        cp.mem_size += kiln_nbytes(t) * 2 + kiln_tensor_overhead() + 64;
    }
    struct kiln_context * ctx = kiln_init(cp);
    if (!ctx) return fail("out of memory");
    for (int64_t i = 0; i < n_t; i++) {
        const char * name = kiln_gguf_get_tensor_name(src, i);
        struct kiln_tensor * t = kiln_get_tensor(src_ctx, name);
        bool gate_up = strstr(name, "ffn_gate.weight") || strstr(name, "ffn_up.weight");
        bool down = strstr(name, "ffn_down.weight") != NULL;
        if ((gate_up || down) && t->type != KILN_TYPE_F32 && t->type != KILN_TYPE_F16) {
            fprintf(stderr, "kiln-llama-pad: %s is %s; pad before quantizing\n", name, kiln_type_name(t->type));
            return 1;
        }
        struct kiln_tensor * o;
        if (gate_up && t->ne[1] == n_ff) {
            o = kiln_new_tensor_2d(ctx, t->type, t->ne[0], n_pad);
            memset(o->data, 0, kiln_nbytes(o));
            memcpy(o->data, t->data, kiln_nbytes(t));
        } else if (down && t->ne[0] == n_ff) {
            o = kiln_new_tensor_2d(ctx, t->type, n_pad, t->ne[1]);
            memset(o->data, 0, kiln_nbytes(o));
            for (int64_t r = 0; r < t->ne[1]; r++) {
                memcpy((char *) o->data + r * o->nb[1], (const char *) t->data + r * t->nb[1], t->nb[1]);
            }
        } else {
            o = kiln_dup_tensor(ctx, t);
            memcpy(o->data, t->data, kiln_nbytes(t));
        }
        kiln_set_name(o, name);
        if (!kiln_gguf_add_tensor(dst, o)) return fail("cannot add a tensor");
    }
    if (!kiln_gguf_write_to_file(dst, argv[2], false)) return fail("cannot write the output");
    fprintf(stderr, "kiln-llama-pad: %s -> %s, feed-forward %lld -> %lld\n", argv[1], argv[2], (long long) n_ff, (long long) n_pad);
    kiln_gguf_free(dst);
    kiln_gguf_free(src);
    kiln_free(ctx);
    kiln_free(src_ctx);
    return 0;
}
