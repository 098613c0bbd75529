/* model.h — the decoder model shared by the loader (llama.c), the per-
 * architecture traits and hyperparameters (arch.c) and the graph builder
 * (decoder.c). Private to src/models.
 *
 * Every supported architecture is the same pre-/post-norm transformer
 * decoder; what differs is captured by struct arch_traits (one table row per
 * general.architecture) plus the hyperparameters read from the file. */
#ifndef KILN_MODELS_MODEL_H
#define KILN_MODELS_MODEL_H

#include "kiln-llama.h"
#include "kiln-gguf.h"

/* The KV cache holds positions in multiples of KILN_KV_CELLS_PAD, and a
 * graph attends to the first n_kv = min(cells, max(256, n_used rounded up
 * to 256)) of them, the rest masked: llama.cpp's cache size and n_kv
 * (llama_kv_cache::get_n_kv). Flash attention's decode path splits n_kv
 * among the threads once it reaches 512, so the same n_kv gives the same
 * chunks and results as llama.cpp. */
#define KILN_KV_CELLS_PAD 256
static inline int64_t kiln_kv_cells(int32_t n_ctx) {
    return ((int64_t) n_ctx + KILN_KV_CELLS_PAD - 1) / KILN_KV_CELLS_PAD * KILN_KV_CELLS_PAD;
}
static inline int64_t kiln_kv_n_kv(int32_t n_ctx, int64_t n_used) {
    const int64_t padded = (n_used + KILN_KV_CELLS_PAD - 1) / KILN_KV_CELLS_PAD * KILN_KV_CELLS_PAD;
    const int64_t n = padded > KILN_KV_CELLS_PAD ? padded : KILN_KV_CELLS_PAD;
    const int64_t cells = kiln_kv_cells(n_ctx);
    return n < cells ? n : cells;
}

#define MODEL_MAX_LAYERS 512

enum norm_place {
    NORM_PRE,       /* x + f(norm(x))                       llama, qwen, gemma 1, granite */
    NORM_SANDWICH,  /* x + norm_post(f(norm_pre(x)))        gemma 2/3 */
    NORM_POST,      /* x + norm_post(f(x))                  olmo2 */
    NORM_PARALLEL,  /* x + attn(ln(x)) + ffn(ln(x)), one LayerNorm with bias   phi2 */
};

enum qk_norm {
    QK_NORM_NONE,
    QK_NORM_HEAD,   /* RMS norm of each head's q / k (weight [head_dim])   qwen3, gemma3 */
    QK_NORM_FULL,   /* RMS norm over all heads' q / k (weight [n_head*hd]) olmo2 */
};

enum ffn_kind {
    FFN_SILU_GATED, /* down(silu(gate x) * up x) */
    FFN_GELU_GATED, /* down(gelu(gate x) * up x), gelu as ggml's f16 table */
    FFN_GELU,       /* down(gelu(up x + b)) + b, the same table           phi2 */
};

/* the feed-forward of a mixture-of-experts layer: a softmax router picks
 * n_expert_used of n_expert gated-SiLU experts per token */
enum moe_kind {
    MOE_NONE,
    MOE_NORM_TOPK,  /* the chosen experts' weights renormalised to sum 1      qwen3moe */
    MOE_SHARED,     /* raw weights, plus a shared expert gated by sigmoid     qwen2moe */
};

struct arch_traits {
    const char * name;
    int          rope_type;        /* 0 (pairs) or KILN_ROPE_TYPE_NEOX */
    enum norm_place norm;
    enum qk_norm qk_norm;
    enum ffn_kind ffn;
    bool         embd_scale_sqrt;  /* x = tok_embd[t] * sqrt(n_embd) */
    bool         q_prescale;       /* q *= attention scale after RoPE; attention itself unscaled */
    int          swa_pattern;      /* layer il uses the sliding window when il % n < n - 1 (0: none) */
    uint32_t     swa_default;      /* window when the file has none (0: no window then) */
    float        rope_base_swa;    /* RoPE base of sliding-window layers (0: the global one) */
    float        attn_softcap;     /* defaults when the file has no *_logit_softcapping key */
    float        final_softcap;
    bool         granite_scales;   /* embedding, residual, attention, logit multipliers */
    int          no_rope_step;     /* layer il skips RoPE when (il + 1) % n == 0 (0: all rotate) */
    enum moe_kind moe;             /* mixture-of-experts feed-forward (MOE_NONE: dense) */
};

struct layer {
    struct kiln_tensor * attn_norm, * attn_norm_b, * bqkv, * ffn_up_b, * ffn_down_b; /* biases: phi2 */
    struct kiln_tensor * wq, * wk, * wv, * wo, * bq, * bk, * bv, * bo;
    struct kiln_tensor * q_norm, * k_norm, * attn_post_norm;
    struct kiln_tensor * ffn_norm, * ffn_gate, * ffn_up, * ffn_down, * ffn_post_norm;
    struct kiln_tensor * wqkv;        /* fused [q; k; v] projection (phi3); wq/wk/wv NULL then */
    struct kiln_tensor * gate_inp, * gate_exps, * up_exps, * down_exps;             /* MoE */
    struct kiln_tensor * gate_inp_shexp, * gate_shexp, * up_shexp, * down_shexp;    /* shared expert */
    bool  swa;          /* sliding-window layer */
    bool  rope;         /* RoPE applied */
    float freq_base, freq_scale;
};

struct encoder; /* bert.c */

struct kiln_model {
    struct kiln_gguf_context * gguf;
    struct kiln_context      * wctx;  /* weights */
    bool borrowed;                    /* gguf and wctx are the caller's (kiln_model_load_from_gguf) */
    struct kiln_vocab        * vocab;
    char arch[64];
    const struct arch_traits * tr;

    /* hyperparameters */
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, n_ff, head_dim, n_rot, n_ctx_train;
    float   norm_eps, freq_base, freq_scale, ext_factor, attn_factor, beta_fast, beta_slow;
    int32_t rope_type, n_ctx_orig;
    int32_t n_swa;                   /* sliding window (positions a query sees, itself included) */
    float   freq_base_swa;           /* RoPE base of sliding-window layers (their scale is 1) */
    float   attn_scale;              /* q scale (q_prescale) or attention scale */
    float   attn_softcap, final_softcap;
    float   embd_scale, residual_scale, logit_scale;

    int32_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;

    struct kiln_tensor * tok_embd, * output_norm, * output, * rope_freqs;
    struct kiln_tensor * output_norm_b, * output_b; /* phi2: LayerNorm bias, output bias */
    struct kiln_tensor * rope_long, * rope_short; /* LongRoPE factors (phi3): long when n_ctx > n_ctx_orig */
    struct layer * layers;

    /* state */
    int32_t n_ctx, n_past, n_batch, n_threads;
    enum kiln_type kv_type;
    struct kiln_context * kv_ctx;
    struct kiln_tensor ** k_cache, ** v_cache;
    float * logits;
    struct kiln_gallocr * galloc;
    uint8_t * work;
    size_t work_size;
    struct encoder * enc;            /* encoder architectures (bert.c); NULL for decoders */
    float * embd_out;                /* when set, decoder_eval_batch also writes the final-norm
                                        hidden state of every position of the batch here */
    volatile int * abort_flag;
    struct kiln_threadpool * threadpool;

    /* LoRA adapters (lora.c): those loaded for this model (owned), and those
     * applied at evaluation with their scales, in order */
    struct kiln_adapter_lora ** adapters;
    int32_t n_adapters;
    struct lora_use { struct kiln_adapter_lora * lora; float scale; } * loras;
    int32_t n_loras;
};

/* arch.c: the traits row of an architecture name, or NULL */
const struct arch_traits * arch_find(const char * name);
/* "llama, mistral, ..." for messages */
const char * arch_supported_list(void);
/* hyperparameters from the GGUF keys (llama.cpp's defaults for optional ones); false + error */
bool arch_load_hparams(struct kiln_model * m);

/* llama.c: the weight of that name and shape [ne0, ne1] (ne1 = 1: a vector),
 * NULL when absent; a missing required one or a wrong shape sets the error
 * and *ok = false */
struct kiln_tensor * model_weight(struct kiln_model * m, const char * name, int64_t ne0, int64_t ne1, bool required, bool * ok);
/* llama.c: m->n_vocab from token_embd.weight's rows, checked against the vocabulary */
bool model_vocab_rows(struct kiln_model * m);
/* arch.c: the RoPE frequency factors for the current n_ctx (rope_freqs, else
 * LongRoPE's long or short set as llama.cpp picks them) */
void arch_pick_rope_factors(struct kiln_model * m);

/* decoder.c: ggml's GELU table, built once before a GELU model runs */
void decoder_init_gelu_table(void);
/* decoder.c: y = gelu(x) through ggml's f16 table (init first) */
void decoder_gelu_f16_table(float * y, const float * x, int64_t n);
/* decoder.c: a kiln_map_custom1 op, dst = gelu(a) through the table, rows split over the threads */
void decoder_gelu_rows(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * ud);
/* decoder.c: run an allocated graph on the model's threads and work buffer
 * (abort flag honoured; "model: evaluation aborted" then) */
enum kiln_status model_compute(struct kiln_model * m, struct kiln_cgraph * gf);
/* decoder.c: evaluate one batch of at most n_batch tokens */
enum kiln_status decoder_eval_batch(struct kiln_model * m, const kiln_token * tokens, int32_t nb);

/* lora.c: W cur plus every applied adapter's scaled B (A cur) for W */
struct kiln_tensor * lora_mul_mat(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * w,
                                  struct kiln_tensor * cur);
/* lora.c: y = W x (computed by the caller) plus every applied adapter's scaled B (A x) for W */
struct kiln_tensor * lora_add(const struct kiln_model * m, struct kiln_context * ctx, const struct kiln_tensor * w,
                              struct kiln_tensor * y, struct kiln_tensor * x);
/* lora.c: mul_mat_id(W, x, ids) plus every applied adapter's scaled
 * mul_mat_id(B, mul_mat_id(A, x, ids), ids) for the experts' weights W */
struct kiln_tensor * lora_mul_mat_id(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * w,
                                     struct kiln_tensor * x, struct kiln_tensor * ids);
/* lora.c: the token embeddings x of tokens plus the adapters' embedding deltas */
struct kiln_tensor * lora_embed(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * x,
                                struct kiln_tensor * tokens);
/* lora.c: graph nodes the applied adapters add */
int32_t lora_graph_nodes(const struct kiln_model * m);
/* lora.c: h extended by the applied adapters' scales and bytes (kiln_model_fingerprint) */
uint64_t lora_fingerprint(const struct kiln_model * m, uint64_t h);
/* llama.c: FNV-1a of n bytes, continuing from h */
uint64_t model_fnv(uint64_t h, const void * p, size_t n);
/* lora.c: frees the model's adapters */
void lora_model_free(struct kiln_model * m);
/* bert.c: encoder architectures (bert, nomic-bert) */
bool encoder_is_arch(const char * arch);
/* hyperparameters and weights; false + error */
bool encoder_load(struct kiln_model * m, struct kiln_model_params params);
void encoder_free(struct encoder * e);
/* {arch}.pooling_type (enum kiln_pooling_type), -1 when the file has none */
int32_t encoder_pooling(const struct kiln_model * m);
/* the last layer's output of every position of one sequence: out[n * n_embd] */
enum kiln_status encoder_eval(struct kiln_model * m, const kiln_token * tokens, int32_t n, float * out);

#endif
