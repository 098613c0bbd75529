/*
 * kiln-synth-encoder — writes a random-weight GGUF of an embedding encoder
 * (bert or nomic-bert) as llama.cpp's converter lays them out, for
 * cross-checks against llama.cpp's embeddings (tests/oracle/embed.mjs):
 *
 *   bert:       token, token-type and absolute position embeddings, an
 *               embedding LayerNorm, separate Q/K/V with biases, post-
 *               LayerNorms, a GELU FFN with biases (all-MiniLM / bge);
 *   nomic-bert: token and token-type embeddings, fused QKV, RoPE, a SwiGLU
 *               FFN, no biases (nomic-embed-text).
 *
 * The tokenizer is copied from a WordPiece vocabulary GGUF. Matrices (the
 * token and position embeddings included) are stored in TYPE; vectors and
 * the token-type table in F32. Defaults are small shapes; all-MiniLM-L6's
 * are --width 384 --layers 6 --heads 12 --ff 1536 --ctx 512.
 *
 *   kiln-synth-encoder OUT.gguf --arch bert|nomic-bert --vocab FILE [--type f32|f16|q8_0|...]
 *       [--width N] [--layers N] [--heads N] [--ff N] [--ctx N]
 *       [--pooling none|mean|cls|last] [--causal] [--seed N] [--keep-f32 NAME_PART]...
 *
 * --keep-f32 leaves the matrices whose name contains NAME_PART in F32 (to
 * find which weights a difference comes from).
 */
#include "kiln-gguf.h"
#include "tools/synth_fill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static float frand(void) { return synth_rand(&rng); } /* uniform in [-1, 1) */

struct out {
    struct kiln_context * ctx;
    struct kiln_gguf_context * g;
    enum kiln_type type;
    const char * keep_f32[16]; /* --keep-f32: matrices whose name contains one of these stay F32 */
    int n_keep;
};

/* a [ne0, ne1] tensor of offset + scale * U(-1, 1); vectors (and f32 = true) in F32 */
static void add(struct out * o, const char * name, int64_t ne0, int64_t ne1, float scale, float offset, bool f32) {
    for (int i = 0; i < o->n_keep; i++) f32 = f32 || strstr(name, o->keep_f32[i]) != NULL;
    synth_add(o->ctx, o->g, "kiln-synth-encoder", name, ne1 == 1 || f32 ? KILN_TYPE_F32 : o->type, ne0, ne1, scale, offset, frand);
}

int main(int argc, char ** argv) {
    const char * out = NULL, * vocab = NULL, * arch = NULL, * pooling = "mean";
    enum kiln_type type = KILN_TYPE_F32;
    int width = 128, layers = 2, heads = 4, ff = 256, ctx = 128;
    bool causal = false, bad = false;
    const char * keep[16];
    int n_keep = 0;
    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--arch") && has) arch = argv[++i];
        else if (!strcmp(argv[i], "--vocab") && has) vocab = argv[++i];
        else if (!strcmp(argv[i], "--width") && has) width = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && has) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && has) heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ff") && has) ff = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ctx") && has) ctx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--pooling") && has) pooling = argv[++i];
        else if (!strcmp(argv[i], "--seed") && has) rng ^= strtoull(argv[++i], NULL, 10) * 0x9e3779b97f4a7c15ULL;
        else if (!strcmp(argv[i], "--causal")) causal = true;
        else if (!strcmp(argv[i], "--keep-f32") && has && n_keep < 16) keep[n_keep++] = argv[++i];
        else if (!strcmp(argv[i], "--type") && has) {
            type = synth_type_by_name(argv[++i]);
        } else if (argv[i][0] != '-' && !out) out = argv[i];
        else bad = true;
    }
    static const char * const pools[] = { "none", "mean", "cls", "last" };
    int pool = -1;
    for (int p = 0; p < 4; p++) if (!strcmp(pooling, pools[p])) pool = p;
    const bool known = arch && (!strcmp(arch, "bert") || !strcmp(arch, "nomic-bert"));
    if (bad || !out || !vocab || !known || type == KILN_TYPE_COUNT || pool < 0 || layers <= 0 || layers > 64 || heads <= 0 ||
        width <= 0 || width % heads != 0 || (width / heads) % 2 || ff <= 0 || ctx <= 0 || width > 8192 || ff > 32768 || ctx > 8192) {
        fprintf(stderr, "usage: kiln-synth-encoder OUT.gguf --arch bert|nomic-bert --vocab FILE [--type f32|f16|q8_0|...]\n"
                        "           [--width N] [--layers N] [--heads N] [--ff N] [--ctx N]\n"
                        "           [--pooling none|mean|cls|last] [--causal] [--seed N] [--keep-f32 NAME_PART]...\n");
        return 2;
    }
    const bool nomic = !strcmp(arch, "nomic-bert");

    int64_t nv = 0;
    struct kiln_gguf_context * g = synth_vocab_gguf(vocab, "kiln-synth-encoder", &nv);
    if (!g) return 1;
    for (int64_t i = kiln_gguf_get_n_kv(g) - 1; i >= 0; i--) {
        const char * k = kiln_gguf_get_key(g, i);
        if (strncmp(k, "tokenizer.", 10) != 0) kiln_gguf_remove_key(g, k);
    }
    kiln_gguf_set_val_str(g, "general.architecture", arch);
    kiln_gguf_set_val_str(g, "general.name", "kiln-synthetic-encoder");
    kiln_gguf_set_val_u32(g, "tokenizer.ggml.token_type_count", 2);
    synth_set_u32(g, arch, "embedding_length", (uint32_t) width);
    synth_set_u32(g, arch, "block_count", (uint32_t) layers);
    synth_set_u32(g, arch, "attention.head_count", (uint32_t) heads);
    synth_set_u32(g, arch, "feed_forward_length", (uint32_t) ff);
    synth_set_u32(g, arch, "context_length", (uint32_t) ctx);
    synth_set_u32(g, arch, "pooling_type", (uint32_t) pool);
    char k[128];
    snprintf(k, sizeof k, "%s.attention.layer_norm_epsilon", arch);
    kiln_gguf_set_val_f32(g, k, 1e-12f);
    snprintf(k, sizeof k, "%s.attention.causal", arch);
    kiln_gguf_set_val_bool(g, k, causal);
    if (nomic) {
        snprintf(k, sizeof k, "%s.rope.freq_base", arch);
        kiln_gguf_set_val_f32(g, k, 1000.0f);
    }

    const size_t E = (size_t) width, F = (size_t) ff;
    const size_t bytes = (size_t) layers * ((4 * E + 3 * F) * E * sizeof(float) + 16 * (E + F) * sizeof(float)) +
                         ((size_t) nv + (size_t) ctx + 8) * E * sizeof(float) + (size_t) (20 * layers + 8) * kiln_tensor_overhead() +
                         (1u << 20);
    struct kiln_init_params cp = { bytes, NULL, false };
    struct out o = { kiln_init(cp), g, type, { 0 }, n_keep };
    memcpy(o.keep_f32, keep, sizeof(keep[0]) * (size_t) n_keep);
    if (!o.ctx) { fprintf(stderr, "kiln-synth-encoder: cannot allocate %zu bytes\n", bytes); return 1; }

    const float in_s = sqrtf(3.0f / (float) E), ff_s = sqrtf(3.0f / (float) F);
    add(&o, "token_embd.weight", width, nv, 1.0f, 0.0f, false);
    add(&o, "token_types.weight", width, 2, 0.5f, 0.0f, true);
    if (!nomic) add(&o, "position_embd.weight", width, ctx, 0.5f, 0.0f, false);
    add(&o, "token_embd_norm.weight", width, 1, 0.2f, 1.0f, true);
    add(&o, "token_embd_norm.bias", width, 1, 0.1f, 0.0f, true);
    char nm[64];
    for (int l = 0; l < layers; l++) {
#define A(s, a, b, sc, off) do { snprintf(nm, sizeof nm, "blk.%d." s, l); add(&o, nm, a, b, sc, off, false); } while (0)
        if (nomic) {
            A("attn_qkv.weight", width, 3 * width, 2.0f * in_s, 0.0f);
        } else {
            A("attn_q.weight", width, width, 2.0f * in_s, 0.0f);
            A("attn_q.bias", width, 1, 0.2f, 0.0f);
            A("attn_k.weight", width, width, 2.0f * in_s, 0.0f);
            A("attn_k.bias", width, 1, 0.2f, 0.0f);
            A("attn_v.weight", width, width, in_s, 0.0f);
            A("attn_v.bias", width, 1, 0.2f, 0.0f);
        }
        A("attn_output.weight", width, width, in_s, 0.0f);
        if (!nomic) A("attn_output.bias", width, 1, 0.1f, 0.0f);
        A("attn_output_norm.weight", width, 1, 0.2f, 1.0f);
        A("attn_output_norm.bias", width, 1, 0.1f, 0.0f);
        A("ffn_up.weight", width, ff, 1.5f * in_s, 0.0f);
        if (!nomic) A("ffn_up.bias", ff, 1, 0.3f, 0.0f);
        if (nomic) A("ffn_gate.weight", width, ff, 1.5f * in_s, 0.0f);
        A("ffn_down.weight", ff, width, ff_s, 0.0f);
        if (!nomic) A("ffn_down.bias", width, 1, 0.1f, 0.0f);
        A("layer_output_norm.weight", width, 1, 0.2f, 1.0f);
        A("layer_output_norm.bias", width, 1, 0.1f, 0.0f);
#undef A
    }
    if (!kiln_gguf_write_to_file(g, out, false)) { fprintf(stderr, "kiln-synth-encoder: %s\n", kiln_last_error()); return 1; }
    printf("{\"what\":\"synthetic_encoder\",\"file\":\"%s\",\"arch\":\"%s\",\"type\":\"%s\",\"width\":%d,\"layers\":%d,\"heads\":%d,"
           "\"ff\":%d,\"ctx\":%d,\"vocab\":%lld,\"pooling\":\"%s\",\"causal\":%s}\n",
           out, arch, kiln_type_name(type), width, layers, heads, ff, ctx, (long long) nv, pooling, causal ? "true" : "false");
    kiln_gguf_free(g);
    kiln_free(o.ctx);
    return 0;
}
