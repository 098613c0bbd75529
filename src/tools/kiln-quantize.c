/*
 * kiln-quantize — requantize the weights of a GGUF model.
 *
 *   kiln-quantize IN.gguf OUT.gguf TYPE
 *
 * TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs
 * tq1_0 tq2_0 f16 bf16 f32, or one of llama-quantize's mixes q4_K_M, q5_K_M
 * (below). Every tensor whose name ends in "weight", that
 * has at least 2 dimensions, is stored as F32/F16/BF16 and whose rows
 * (ne[0]) are a multiple of TYPE's block size is converted with the
 * reference quantizers (the bytes llama.cpp's quantizer writes for the same
 * type without an importance matrix). Everything else (1-D tensors such as
 * norms, rows that do not fit the block, already-quantized tensors) is
 * copied unchanged, as llama.cpp does. Metadata is copied, with
 * general.file_type and general.quantization_version set.
 *
 * The mixes choose a type per tensor by llama.cpp's recipe
 * (llama_tensor_get_type for LLAMA_FTYPE_MOSTLY_Q4_K_M / Q5_K_M, without an
 * importance matrix): the base type (q4_K / q5_K) for most weights; Q6_K for
 * the output (and a tied token embedding), and for attn_v / attn_qkv and
 * ffn_down in the first and last eighth of the layers and every third layer
 * between; with 8 experts attn_v and attn_k Q8_0 and (q4_K_M) attn_output
 * Q5_K; the routers (ffn_gate_inp) and norms stay as they are; a row length
 * that is no multiple of 256 falls back to Q5_0 / Q5_1 / Q8_0 (then F16), and
 * an output of such rows is Q8_0. tests/oracle/quant-mix.mjs compares the
 * choices and the bytes with llama.cpp's own llama_model_quantize.
 *
 * Exit status 0 on success, 1 on a bad file or write error, 2 on bad usage.
 */
#include "kiln.h"
#include "kiln-gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---- llama-quantize's _M mixes */

enum mix { MIX_NONE, MIX_Q4_K_M, MIX_Q5_K_M };

struct mix_state {
    enum kiln_type base;  /* q4_K or q5_K */
    int n_layer, n_expert, n_attn_v, i_attn_v, i_ffn_down;
    bool tied;            /* no output.weight: the token embedding is the output */
    bool llama_70b;       /* llama.cpp's LLM_TYPE_70B (llama with 80 layers) */
};

static int layer_of(const char * name) {
    int l = -1;
    return sscanf(name, "blk.%d.", &l) == 1 ? l : -1;
}

/* llama.cpp's order of the tensors it quantizes: by layer (the rest first), then by name */
static int cmp_layer_name(const void * a, const void * b) {
    const char * x = *(const char * const *) a, * y = *(const char * const *) b;
    const int lx = layer_of(x), ly = layer_of(y);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x, y);
}

/* the layers that get more bits: the first and last eighth, every third between */
static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

/* a type whose blocks do not fit the row length: the next smaller block, else F16 */
static enum kiln_type fit_rows(enum kiln_type t, int64_t ncols) {
    if (ncols % kiln_blck_size(t) == 0) return t;
    enum kiln_type r = t == KILN_TYPE_Q4_K ? KILN_TYPE_Q5_0 : t == KILN_TYPE_Q5_K ? KILN_TYPE_Q5_1
                     : t == KILN_TYPE_Q6_K ? KILN_TYPE_Q8_0 : t;
    return ncols % kiln_blck_size(r) == 0 ? r : KILN_TYPE_F16;
}

static bool has(const char * s, const char * part) { return strstr(s, part) != NULL; }

/* the type of one quantizable weight, tensors visited in cmp_layer_name order */
static enum kiln_type mix_type(struct mix_state * st, enum mix mix, const char * name, const struct kiln_tensor * t) {
    enum kiln_type ty = st->base;
    const bool output = strcmp(name, "output.weight") == 0;
    const bool embd = strcmp(name, "token_embd.weight") == 0;
    if (output || (embd && st->tied)) {
        ty = t->ne[0] % kiln_blck_size(ty) != 0 ? KILN_TYPE_Q8_0 : KILN_TYPE_Q6_K;
    } else if (embd) {
        /* the base type */
    } else if (has(name, "attn_qkv.weight") || has(name, "attn_v.weight")) {
        if (use_more_bits(st->i_attn_v, st->n_attn_v)) ty = KILN_TYPE_Q6_K;
        if (st->llama_70b && ty == KILN_TYPE_Q4_K) ty = KILN_TYPE_Q5_K;
        if (st->n_expert == 8) ty = KILN_TYPE_Q8_0;
        st->i_attn_v++;
    } else if (has(name, "attn_k.weight")) {
        if (st->n_expert == 8) ty = KILN_TYPE_Q8_0;
    } else if (has(name, "attn_q.weight")) {
        /* the base type */
    } else if (has(name, "attn_output.weight")) {
        if (st->n_expert == 8 && mix == MIX_Q4_K_M) ty = KILN_TYPE_Q5_K;
    } else if (has(name, "ffn_up") || has(name, "ffn_gate")) {
        /* the base type */
    } else if (has(name, "ffn_down")) {
        /* with experts the layer comes from the name, else from the count */
        const int il = st->n_expert > 1 ? layer_of(name) : st->i_ffn_down;
        if (use_more_bits(il, st->n_layer)) ty = KILN_TYPE_Q6_K;
        st->i_ffn_down++;
    }
    return fit_rows(ty, t->ne[0]);
}

/* what llama.cpp quantizes at all: 2-D+ "...weight" tensors but norms and MoE routers */
static bool quantizable(const char * name, int n_dims) {
    return ends_with(name, "weight") && n_dims >= 2 && !has(name, "_norm.weight") && !has(name, "ffn_gate_inp.weight");
}

/* the mix's type for every tensor of gin (its own type where nothing changes); false + message */
static bool plan_mix(const struct kiln_gguf_context * gin, struct kiln_context * kin, enum mix mix, enum kiln_type * types) {
    const int64_t n_t = kiln_gguf_get_n_tensors(gin);
    struct mix_state st = { mix == MIX_Q4_K_M ? KILN_TYPE_Q4_K : KILN_TYPE_Q5_K, 0, 0, 0, 0, 0, true, false };
    char arch[64] = "", key[96];
    const int64_t ka = kiln_gguf_find_key(gin, "general.architecture");
    if (ka >= 0 && kiln_gguf_get_kv_type(gin, ka) == KILN_GGUF_TYPE_STRING) snprintf(arch, sizeof arch, "%s", kiln_gguf_get_val_str(gin, ka));
    snprintf(key, sizeof key, "%s.block_count", arch);
    int64_t k = kiln_gguf_find_key(gin, key);
    if (k < 0 || kiln_gguf_get_kv_type(gin, k) != KILN_GGUF_TYPE_UINT32) {
        fprintf(stderr, "kiln-quantize: %s missing (the mixes choose types by layer)\n", key);
        return false;
    }
    st.n_layer = (int) kiln_gguf_get_val_u32(gin, k);
    snprintf(key, sizeof key, "%s.expert_count", arch);
    k = kiln_gguf_find_key(gin, key);
    if (k >= 0 && kiln_gguf_get_kv_type(gin, k) == KILN_GGUF_TYPE_UINT32) st.n_expert = (int) kiln_gguf_get_val_u32(gin, k);
    st.llama_70b = strcmp(arch, "llama") == 0 && st.n_layer == 80;
    const char ** names = malloc(sizeof(char *) * (size_t) (n_t + 1));
    if (!names) return false;
    for (int64_t i = 0; i < n_t; i++) {
        names[i] = kiln_gguf_get_tensor_name(gin, i);
        types[i] = kiln_get_tensor(kin, names[i])->type;
        if (strcmp(names[i], "output.weight") == 0) st.tied = false;
        if (has(names[i], "attn_qkv.weight") || has(names[i], "attn_v.weight")) st.n_attn_v++;
    }
    qsort(names, (size_t) n_t, sizeof(char *), cmp_layer_name);
    for (int64_t j = 0; j < n_t; j++) {
        const int64_t i = kiln_gguf_find_tensor(gin, names[j]);
        const struct kiln_tensor * t = kiln_get_tensor(kin, names[j]);
        if (quantizable(names[j], kiln_gguf_get_tensor_n_dims(gin, i)) && is_float_type(t->type)) types[i] = mix_type(&st, mix, names[j], t);
    }
    free(names);
    return true;
}

static int usage(void) {
    fprintf(stderr, "usage: kiln-quantize IN.gguf OUT.gguf TYPE\n"
                    "  TYPE: q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K iq4_nl iq4_xs tq1_0 tq2_0 f16 bf16 f32,\n"
                    "        or the mixes q4_K_M q5_K_M\n");
    return 2;
}

int main(int argc, char ** argv) {
    if (argc != 4) return usage();
    const char * in = argv[1], * out = argv[2], * tname = argv[3];

    enum kiln_type target = KILN_TYPE_COUNT;
    enum mix mix = MIX_NONE;
    if (strcasecmp(tname, "q4_K_M") == 0) mix = MIX_Q4_K_M, target = KILN_TYPE_Q4_K;
    if (strcasecmp(tname, "q5_K_M") == 0) mix = MIX_Q5_K_M, target = KILN_TYPE_Q5_K;
    for (int t = 0; t < KILN_TYPE_COUNT && mix == MIX_NONE; t++) {
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
    enum kiln_type * types = NULL;
    int rc = 0;
    if (!kout || !gout || !bufs || !kiln_gguf_set_kv(gout, gin)) {
        fprintf(stderr, "kiln-quantize: out of memory or bad metadata: %s\n", kiln_last_error());
        rc = 1;
        goto done;
    }
    /* llama_ftype: MOSTLY_Q4_K_M 15, MOSTLY_Q5_K_M 17 */
    kiln_gguf_set_val_u32(gout, "general.file_type", mix == MIX_Q4_K_M ? 15u : mix == MIX_Q5_K_M ? 17u : (uint32_t) ftype_of(target));
    types = calloc((size_t) n_t + 1, sizeof(enum kiln_type));
    if (!types || (mix != MIX_NONE && !plan_mix(gin, kin, mix, types))) {
        rc = 1;
        goto done;
    }
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
        const bool convert = mix != MIX_NONE ? types[i] != src->type
                                             : quantizable(name, nd) && is_float_type(src->type) &&
                                               src->ne[0] % ttr->blck_size == 0 && src->type != target;
        const enum kiln_type type = mix != MIX_NONE ? types[i] : convert ? target : src->type;
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
           mix != MIX_NONE ? tname : kiln_type_name(target), bytes_in / 1048576.0, bytes_out / 1048576.0);

done:
    if (bufs) for (int64_t i = 0; i < n_t; i++) free(bufs[i]);
    free(bufs);
    free(types);
    if (gout) kiln_gguf_free(gout);
    if (kout) kiln_free(kout);
    kiln_gguf_free(gin);
    kiln_free(kin);
    return rc;
}
