/*
 * bench-make_synthetic — writes a random-weight llama GGUF for generation
 * benchmarks (bench-generate -m FILE, the peers benchmark), so memory
 * bandwidth matters as with real 1B-class models. The tokenizer is copied
 * from a vocabulary GGUF (default: the llama SPM vocabulary, 32000 tokens).
 * Weights are uniform random, scaled so activations stay finite; every
 * matrix (token embedding and output included) is stored in TYPE.
 *
 *   bench-make_synthetic OUT.gguf [--type q4_0] [--width 2048] [--layers 8]
 *        [--heads 16] [--kv-heads 4] [--ff 5632] [--vocab-file FILE] [--vocab-size N]
 *
 * --vocab-size grows a GPT-2-style vocabulary to N tokens (synth_fill.h's
 * synth_grow_vocab), e.g. 151936 for a Qwen-sized output layer
 * (bench/RESULTS-grammar-2026-12-02-152k.txt: grammar cost in wasm).
 *
 * Defaults give ~277 MB as q4_0, ~523 MB as q8_0. Do not commit the output.
 */
#include "kiln-gguf.h"
#include "tools/synth_fill.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void add(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name, enum kiln_type type,
                int64_t ne0, int64_t ne1, float scale, float offset) {
    struct kiln_tensor * t = ne1 == 1 ? kiln_new_tensor_1d(ctx, type, ne0) : kiln_new_tensor_2d(ctx, type, ne0, ne1);
    if (!t || !synth_fill(t, scale, offset, frand)) { fprintf(stderr, "make_synthetic: out of memory at %s\n", name); exit(1); }
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(g, t);
}

int main(int argc, char ** argv) {
    const char * out = NULL, * vocab = "/work/shared/vocab/ggml-vocab-llama-spm.gguf";
    int width = 2048, layers = 8, heads = 16, kv_heads = 4, ff = 5632;
    int64_t vocab_size = 0;
    enum kiln_type type = KILN_TYPE_Q4_0;
    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--width") && has) width = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--layers") && has) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--heads") && has) heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--kv-heads") && has) kv_heads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ff") && has) ff = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--vocab-file") && has) vocab = argv[++i];
        else if (!strcmp(argv[i], "--vocab-size") && has) vocab_size = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--type") && has) type = synth_type_by_name(argv[++i]);
        else if (argv[i][0] != '-' && !out) out = argv[i];
        else { out = NULL; break; }
    }
    if (!out || type == KILN_TYPE_COUNT || width <= 0 || heads <= 0 || kv_heads <= 0 || width % heads || heads % kv_heads ||
        layers <= 0 || ff <= 0 || width % 256 || ff % 256) {
        fprintf(stderr, "usage: bench-make_synthetic OUT.gguf [--type q4_0|q8_0|f16|...] [--width 2048] [--layers 8]\n"
                        "       [--heads 16] [--kv-heads 4] [--ff 5632] [--vocab-file FILE] [--vocab-size N]\n"
                        "       (width, ff: multiples of 256)\n");
        return 2;
    }
    int64_t nv = 0;
    struct kiln_gguf_context * g = synth_vocab_gguf(vocab, "make_synthetic", &nv);
    if (!g) return 1;
    if (vocab_size > 0 && !synth_grow_vocab(g, vocab_size, &nv, "make_synthetic")) return 1;
    const int head_dim = width / heads, kv_dim = head_dim * kv_heads;
    kiln_gguf_set_val_str(g, "general.architecture", "llama");
    kiln_gguf_set_val_str(g, "general.name", "kiln-synthetic");
    kiln_gguf_set_val_u32(g, "llama.embedding_length", (uint32_t) width);
    kiln_gguf_set_val_u32(g, "llama.block_count", (uint32_t) layers);
    kiln_gguf_set_val_u32(g, "llama.attention.head_count", (uint32_t) heads);
    kiln_gguf_set_val_u32(g, "llama.attention.head_count_kv", (uint32_t) kv_heads);
    kiln_gguf_set_val_u32(g, "llama.feed_forward_length", (uint32_t) ff);
    kiln_gguf_set_val_u32(g, "llama.context_length", 2048);
    kiln_gguf_set_val_u32(g, "llama.rope.dimension_count", (uint32_t) head_dim);
    kiln_gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    kiln_gguf_set_val_f32(g, "llama.rope.freq_base", 10000.0f);
    const size_t per_layer = kiln_row_size(type, width) * (size_t) (2 * width + 2 * kv_dim + 2 * ff) +
                             kiln_row_size(type, ff) * (size_t) width + 2 * sizeof(float) * (size_t) width;
    const size_t bytes = (size_t) layers * per_layer + 2 * kiln_row_size(type, width) * (size_t) nv +
                         sizeof(float) * (size_t) width + (size_t) (16 * layers + 8) * kiln_tensor_overhead() + (16u << 20);
    struct kiln_init_params cp = { bytes, NULL, false };
    struct kiln_context * ctx = kiln_init(cp);
    if (!ctx) { fprintf(stderr, "make_synthetic: cannot allocate %zu bytes\n", bytes); return 1; }
    const float ws = 1.7f / (float) width; /* keeps the residual stream O(1) */
    char nm[64];
    add(ctx, g, "token_embd.weight", type, width, nv, 1.0f, 0.0f);
    add(ctx, g, "output_norm.weight", KILN_TYPE_F32, width, 1, 0.1f, 1.0f);
    add(ctx, g, "output.weight", type, width, nv, 0.05f, 0.0f);
    for (int l = 0; l < layers; l++) {
#define A(s, t, a, b, sc, off) do { snprintf(nm, sizeof nm, "blk.%d." s, l); add(ctx, g, nm, t, a, b, sc, off); } while (0)
        A("attn_norm.weight", KILN_TYPE_F32, width, 1, 0.1f, 1.0f);
        A("attn_q.weight", type, width, width, 0.05f, 0.0f);
        A("attn_k.weight", type, width, kv_dim, 0.05f, 0.0f);
        A("attn_v.weight", type, width, kv_dim, 0.05f, 0.0f);
        A("attn_output.weight", type, width, width, ws * 8, 0.0f);
        A("ffn_norm.weight", KILN_TYPE_F32, width, 1, 0.1f, 1.0f);
        A("ffn_gate.weight", type, width, ff, 0.05f, 0.0f);
        A("ffn_up.weight", type, width, ff, 0.05f, 0.0f);
        A("ffn_down.weight", type, ff, width, ws * 8, 0.0f);
#undef A
    }
    if (!kiln_gguf_write_to_file(g, out, false)) { fprintf(stderr, "make_synthetic: %s\n", kiln_last_error()); return 1; }
    printf("{\"what\":\"synthetic_llama\",\"file\":\"%s\",\"type\":\"%s\",\"width\":%d,\"layers\":%d,\"heads\":%d,\"kv_heads\":%d,"
           "\"ff\":%d,\"vocab\":%lld,\"MB\":%.1f}\n",
           out, kiln_type_name(type), width, layers, heads, kv_heads, ff, (long long) nv, (double) bytes / 1e6);
    kiln_gguf_free(g);
    kiln_free(ctx);
    return 0;
}
