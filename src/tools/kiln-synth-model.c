/*
 * kiln-synth-model — writes a small random-weight GGUF of one decoder
 * architecture, for cross-checks against llama.cpp (tests/oracle/arch.mjs):
 * every trait of the architecture is exercised (sliding window shorter than
 * the test sequences, softcaps that clip, QK-norm, GQA, tied or untied
 * output, Llama 3 RoPE frequency factors, layers without RoPE, fused QKV and
 * gate/up projections with partial rotary and LongRoPE factors, mixtures of
 * experts with and without a shared expert, phi2's parallel layers with
 * LayerNorm, biases everywhere and fused q/k/v in every other layer). The tokenizer
 * is copied from a vocabulary GGUF (tests/data/vocab). Weights are uniform
 * random from a fixed seed, scaled so activations stay O(1) and greedy
 * decoding does not collapse into one token; matrices (the token embedding
 * included) are stored in TYPE, norms and RoPE factors in F32.
 *
 *   kiln-synth-model OUT.gguf --arch NAME [--type f32|f16|q8_0|q4_K|...] --vocab FILE
 *
 * Architectures: llama (Llama 3.x RoPE factors), qwen3, gemma, gemma2, gemma3,
 * granite, smollm3, olmo2, phi2, phi3, qwen2moe, qwen3moe. Widths are multiples of
 * 256 (K-quant blocks).
 */
#include "kiln-gguf.h"
#include "tools/synth_fill.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WIDTH   256
#define HEADS   4
#define KV      2
#define HD      64
#define FF      512
#define CTX     512
#define N_EXP   8     /* experts per MoE layer */
#define N_USED  3     /* experts per token */
#define FF_EXP  256   /* expert width */
#define PHI_ROT 48    /* phi3: partial rotary (48 of 64 head dims) */
#define PHI2_ROT 32   /* phi2: partial rotary (32 of 64 head dims) */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static float frand(void) { return synth_rand(&rng); } /* uniform in [-1, 1) */

struct out {
    struct kiln_context * ctx;
    struct kiln_gguf_context * g;
    enum kiln_type type;
};

/* a [ne0, ne1, ne2] tensor of offset + scale * U(-1, 1) in TYPE; vectors always F32 */
static void add3(struct out * o, const char * name, int64_t ne0, int64_t ne1, int64_t ne2, float scale, float offset, enum kiln_type type) {
    struct kiln_tensor * t = ne1 == 1 ? kiln_new_tensor_1d(o->ctx, KILN_TYPE_F32, ne0) : kiln_new_tensor_3d(o->ctx, type, ne0, ne1, ne2);
    if (!t || !synth_fill(t, scale, offset, frand)) { fprintf(stderr, "kiln-synth-model: out of memory at %s\n", name); exit(1); }
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(o->g, t);
}

static void add(struct out * o, const char * name, int64_t ne0, int64_t ne1, float scale, float offset) {
    add3(o, name, ne0, ne1, 1, scale, offset, o->type);
}

#define set_u32 synth_set_u32
#define set_f32 synth_set_f32

int main(int argc, char ** argv) {
    const char * out = NULL, * vocab = NULL, * arch = NULL;
    enum kiln_type type = KILN_TYPE_F32;
    int layers = 4;
    for (int i = 1; i < argc; i++) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--arch") && has) arch = argv[++i];
        else if (!strcmp(argv[i], "--vocab") && has) vocab = argv[++i];
        else if (!strcmp(argv[i], "--layers") && has) layers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--type") && has) {
            type = synth_type_by_name(argv[++i]);
        } else if (argv[i][0] != '-' && !out) out = argv[i];
        else { out = NULL; break; }
    }
    static const char * const archs[] = { "llama", "qwen3", "gemma", "gemma2", "gemma3", "granite", "smollm3", "olmo2",
                                          "phi2", "phi3", "qwen2moe", "qwen3moe" };
    bool known = false;
    for (size_t i = 0; arch && i < sizeof archs / sizeof archs[0]; i++) known |= !strcmp(arch, archs[i]);
    if (!out || !vocab || !known || type == KILN_TYPE_COUNT || layers <= 0 || layers > 64) {
        fprintf(stderr, "usage: kiln-synth-model OUT.gguf --arch llama|qwen3|gemma|gemma2|gemma3|granite|smollm3|olmo2|\n"
                        "                        phi2|phi3|qwen2moe|qwen3moe\n"
                        "                        --vocab FILE [--type f32|f16|q8_0|q4_K|...] [--layers N]\n");
        return 2;
    }
    const bool gemma = !strncmp(arch, "gemma", 5);
    if (!strcmp(arch, "gemma3")) layers = layers < 6 ? 6 : layers; /* 5 sliding-window layers, then a global one */

    int64_t nv = 0;
    struct kiln_gguf_context * g = synth_vocab_gguf(vocab, "kiln-synth-model", &nv);
    if (!g) return 1;
    /* the vocabulary file's own architecture keys are left out */
    for (int64_t i = kiln_gguf_get_n_kv(g) - 1; i >= 0; i--) {
        const char * k = kiln_gguf_get_key(g, i);
        if (strncmp(k, "tokenizer.", 10) != 0) kiln_gguf_remove_key(g, k);
    }
    kiln_gguf_set_val_str(g, "general.architecture", arch);
    kiln_gguf_set_val_str(g, "general.name", "kiln-synthetic");
    set_u32(g, arch, "embedding_length", WIDTH);
    set_u32(g, arch, "block_count", (uint32_t) layers);
    set_u32(g, arch, "attention.head_count", HEADS);
    set_u32(g, arch, "attention.head_count_kv", KV);
    set_u32(g, arch, "feed_forward_length", FF);
    set_u32(g, arch, "context_length", CTX);
    const bool phi2 = !strcmp(arch, "phi2");
    if (phi2) set_f32(g, arch, "attention.layer_norm_epsilon", 1e-5f);
    else set_f32(g, arch, "attention.layer_norm_rms_epsilon", 1e-6f);
    set_f32(g, arch, "rope.freq_base", !strcmp(arch, "gemma3") ? 1000000.0f : 10000.0f);
    if (gemma) set_u32(g, arch, "attention.key_length", HD), set_u32(g, arch, "attention.value_length", HD);
    if (!strcmp(arch, "gemma2") || !strcmp(arch, "gemma3")) set_u32(g, arch, "attention.sliding_window", 8);
    if (!strcmp(arch, "gemma2")) {
        set_f32(g, arch, "attn_logit_softcapping", 4.0f);  /* clips: attention logits reach ~10 */
        set_f32(g, arch, "final_logit_softcapping", 6.0f); /* clips: logits reach ~10 */
    }
    const bool phi3 = !strcmp(arch, "phi3"), moe = !strcmp(arch, "qwen2moe") || !strcmp(arch, "qwen3moe");
    if (phi3) {
        /* partial rotary; a context of 256 > the original 128 selects the long
         * LongRoPE factors, with their attention factor; the sliding window
         * is in the file but llama.cpp runs Phi-3 without one */
        set_u32(g, arch, "rope.dimension_count", PHI_ROT);
        set_u32(g, arch, "rope.scaling.original_context_length", 128);
        set_f32(g, arch, "rope.scaling.attn_factor", 1.1902f);
        set_u32(g, arch, "attention.sliding_window", 8);
    }
    if (phi2) set_u32(g, arch, "rope.dimension_count", PHI2_ROT);
    if (moe) {
        set_u32(g, arch, "expert_count", N_EXP);
        set_u32(g, arch, "expert_used_count", N_USED);
        set_u32(g, arch, "expert_feed_forward_length", FF_EXP);
        if (!strcmp(arch, "qwen2moe")) set_u32(g, arch, "expert_shared_feed_forward_length", FF_EXP);
    }
    if (!strcmp(arch, "granite")) {
        set_f32(g, arch, "embedding_scale", 3.0f);
        set_f32(g, arch, "residual_scale", 0.5f);
        set_f32(g, arch, "attention.scale", 0.2f);
        set_f32(g, arch, "logit_scale", 1.5f);
    }

    const size_t bytes = (size_t) layers * ((size_t) (4 * WIDTH + 3 * FF + 3 * (N_EXP + 1) * FF_EXP + N_EXP) * WIDTH * sizeof(float) +
                                            16 * WIDTH * sizeof(float)) +
                         2 * (size_t) nv * WIDTH * sizeof(float) + (size_t) (20 * layers + 8) * kiln_tensor_overhead() + (1u << 20);
    struct kiln_init_params cp = { bytes, NULL, false };
    struct out o = { kiln_init(cp), g, type };
    if (!o.ctx) { fprintf(stderr, "kiln-synth-model: cannot allocate %zu bytes\n", bytes); return 1; }

    /* untied output for llama, olmo2, qwen2moe and phi2 (which require one), tied (no output.weight) for the rest */
    const bool tied = strcmp(arch, "llama") != 0 && strcmp(arch, "olmo2") != 0 && strcmp(arch, "qwen2moe") != 0 && !phi2;
    const float in_s = sqrtf(3.0f / WIDTH), out_s = 0.5f / sqrtf((float) WIDTH) * 4.0f;
    /* tied: small embeddings (so a token's own row does not dominate its
     * logits and greedy decoding does not repeat the last token), logits
     * brought back to a useful spread by the output norm's gain */
    const float te = !strcmp(arch, "gemma") ? 0.0125f : 0.05f; /* gemma 1: pre-norm after a x16 embedding scale */
    add(&o, "token_embd.weight", WIDTH, nv, tied ? te : 1.0f, 0.0f);
    add(&o, "output_norm.weight", WIDTH, 1, tied ? 0.6f * 0.05f / te : 0.1f, tied ? 6.0f * 0.05f / te : 1.0f);
    if (phi2) add(&o, "output_norm.bias", WIDTH, 1, 0.2f, 0.0f);
    if (!tied) add(&o, "output.weight", WIDTH, nv, out_s, 0.0f);
    if (phi2) add(&o, "output.bias", nv, 1, 0.5f, 0.0f);
    if (!strcmp(arch, "llama")) {
        /* Llama 3.x frequency factors: 1 for high frequencies, up to 8 for low ones */
        struct kiln_tensor * f = kiln_new_tensor_1d(o.ctx, KILN_TYPE_F32, HD / 2);
        for (int i = 0; i < HD / 2; i++) ((float *) f->data)[i] = 1.0f + 7.0f * (float) i / (HD / 2 - 1);
        kiln_set_name(f, "rope_freqs.weight");
        kiln_gguf_add_tensor(g, f);
    }
    if (phi3) {
        /* LongRoPE: short factors near 1, long ones growing to 6 for low frequencies */
        struct kiln_tensor * fl = kiln_new_tensor_1d(o.ctx, KILN_TYPE_F32, PHI_ROT / 2);
        struct kiln_tensor * fs = kiln_new_tensor_1d(o.ctx, KILN_TYPE_F32, PHI_ROT / 2);
        for (int i = 0; i < PHI_ROT / 2; i++) {
            ((float *) fl->data)[i] = 1.0f + 5.0f * (float) i / (PHI_ROT / 2 - 1);
            ((float *) fs->data)[i] = 1.0f + 0.05f * (float) i / (PHI_ROT / 2 - 1);
        }
        kiln_set_name(fl, "rope_factors_long.weight");
        kiln_set_name(fs, "rope_factors_short.weight");
        kiln_gguf_add_tensor(g, fl);
        kiln_gguf_add_tensor(g, fs);
    }
    const bool pre = strcmp(arch, "olmo2") != 0, post = !strcmp(arch, "gemma2") || !strcmp(arch, "gemma3") || !strcmp(arch, "olmo2");
    const bool qk_head = !strcmp(arch, "qwen3") || !strcmp(arch, "qwen3moe") || !strcmp(arch, "gemma3"), qk_full = !strcmp(arch, "olmo2");
    char nm[64];
    for (int l = 0; l < layers; l++) {
#define A(s, a, b, sc, off) do { snprintf(nm, sizeof nm, "blk.%d." s, l); add(&o, nm, a, b, sc, off); } while (0)
        if (pre) A("attn_norm.weight", WIDTH, 1, 0.1f, 1.0f);
        if (phi2) A("attn_norm.bias", WIDTH, 1, 0.2f, 0.0f);
        /* phi2: fused q/k/v in even layers, separate in odd ones (llama.cpp takes either per layer) */
        const bool fused = phi3 || (phi2 && l % 2 == 0);
        if (fused) A("attn_qkv.weight", WIDTH, (HEADS + 2 * KV) * HD, 2.0f * in_s, 0.0f);
        if (fused && phi2) A("attn_qkv.bias", (HEADS + 2 * KV) * HD, 1, 0.2f, 0.0f);
        if (!fused) {
            A("attn_q.weight", WIDTH, HEADS * HD, 2.0f * in_s, 0.0f);
            A("attn_k.weight", WIDTH, KV * HD, 2.0f * in_s, 0.0f);
            A("attn_v.weight", WIDTH, KV * HD, in_s, 0.0f);
        }
        if (!strcmp(arch, "qwen2moe") || (phi2 && !fused)) {
            A("attn_q.bias", HEADS * HD, 1, 0.2f, 0.0f);
            A("attn_k.bias", KV * HD, 1, 0.2f, 0.0f);
            A("attn_v.bias", KV * HD, 1, 0.2f, 0.0f);
        }
        A("attn_output.weight", HEADS * HD, WIDTH, in_s, 0.0f);
        if (phi2) A("attn_output.bias", WIDTH, 1, 0.1f, 0.0f);
        if (qk_head) { A("attn_q_norm.weight", HD, 1, 0.2f, 1.0f); A("attn_k_norm.weight", HD, 1, 0.2f, 1.0f); }
        if (qk_full) { A("attn_q_norm.weight", HEADS * HD, 1, 0.2f, 1.0f); A("attn_k_norm.weight", KV * HD, 1, 0.2f, 1.0f); }
        if (post) { A("post_attention_norm.weight", WIDTH, 1, 0.5f, 3.0f); A("post_ffw_norm.weight", WIDTH, 1, 0.5f, 3.0f); }
        if (pre && !phi2) A("ffn_norm.weight", WIDTH, 1, 0.1f, 1.0f);
        if (moe) {
            /* the router stays F32 (llama-quantize never quantizes it) */
            snprintf(nm, sizeof nm, "blk.%d.ffn_gate_inp.weight", l);
            add3(&o, nm, WIDTH, N_EXP, 1, 4.0f * in_s, 0.0f, KILN_TYPE_F32);
#define X(s, a, b, sc) do { snprintf(nm, sizeof nm, "blk.%d." s, l); add3(&o, nm, a, b, N_EXP, sc, 0.0f, type); } while (0)
            X("ffn_gate_exps.weight", WIDTH, FF_EXP, 1.5f * in_s);
            X("ffn_up_exps.weight", WIDTH, FF_EXP, in_s);
            X("ffn_down_exps.weight", FF_EXP, WIDTH, 1.5f * sqrtf(3.0f / FF_EXP));
#undef X
            if (!strcmp(arch, "qwen2moe")) {
                A("ffn_gate_inp_shexp.weight", WIDTH, 1, 2.0f * in_s, 0.0f);
                A("ffn_gate_shexp.weight", WIDTH, FF_EXP, 1.5f * in_s, 0.0f);
                A("ffn_up_shexp.weight", WIDTH, FF_EXP, in_s, 0.0f);
                A("ffn_down_shexp.weight", FF_EXP, WIDTH, sqrtf(3.0f / FF_EXP), 0.0f);
            }
        } else if (phi2) {
            /* up -> GELU -> down, with biases */
            A("ffn_up.weight", WIDTH, FF, 1.5f * in_s, 0.0f);
            A("ffn_up.bias", FF, 1, 0.3f, 0.0f);
            A("ffn_down.weight", FF, WIDTH, sqrtf(3.0f / FF), 0.0f);
            A("ffn_down.bias", WIDTH, 1, 0.1f, 0.0f);
        } else if (phi3) {
            A("ffn_up.weight", WIDTH, 2 * FF, 1.5f * in_s, 0.0f); /* [gate; up] */
            A("ffn_down.weight", FF, WIDTH, sqrtf(3.0f / FF), 0.0f);
        } else {
            A("ffn_gate.weight", WIDTH, FF, 1.5f * in_s, 0.0f);
            A("ffn_up.weight", WIDTH, FF, in_s, 0.0f);
            A("ffn_down.weight", FF, WIDTH, sqrtf(3.0f / FF), 0.0f);
        }
#undef A
    }
    if (!kiln_gguf_write_to_file(g, out, false)) { fprintf(stderr, "kiln-synth-model: %s\n", kiln_last_error()); return 1; }
    printf("{\"what\":\"synthetic_model\",\"file\":\"%s\",\"arch\":\"%s\",\"type\":\"%s\",\"layers\":%d,\"vocab\":%lld,\"tied\":%s}\n",
           out, arch, kiln_type_name(type), layers, (long long) nv, tied ? "true" : "false");
    kiln_gguf_free(g);
    kiln_free(o.ctx);
    return 0;
}
