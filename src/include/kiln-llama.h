/*
 * kiln-llama.h — text generation on top of kiln.h: tokenizers, a llama-family
 * model runner with a KV cache, and a sampler. Mirrors llama.h where it can
 * (llama_tokenize, llama_token_to_piece, llama_detokenize, samplers), with
 * Kiln's error convention: functions return NULL / a negative value / a
 * kiln_status and set kiln_last_error(); nothing aborts on bad input.
 */
#ifndef KILN_LLAMA_H
#define KILN_LLAMA_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t kiln_token;
#define KILN_TOKEN_NULL (-1)

/* ------------------------------------------------------------ vocabulary */

enum kiln_vocab_type {
    KILN_VOCAB_TYPE_SPM = 1, /* tokenizer.ggml.model = "llama": SentencePiece BPE with byte fallback */
    KILN_VOCAB_TYPE_BPE = 2, /* tokenizer.ggml.model = "gpt2":  byte-level BPE */
    KILN_VOCAB_TYPE_WPM = 3, /* tokenizer.ggml.model = "bert":  WordPiece (BERT) */
};

/* token attributes (llama_token_attr) */
enum kiln_token_attr {
    KILN_TOKEN_ATTR_UNDEFINED    = 0,
    KILN_TOKEN_ATTR_UNKNOWN      = 1 << 0,
    KILN_TOKEN_ATTR_UNUSED       = 1 << 1,
    KILN_TOKEN_ATTR_NORMAL       = 1 << 2,
    KILN_TOKEN_ATTR_CONTROL      = 1 << 3,
    KILN_TOKEN_ATTR_USER_DEFINED = 1 << 4,
    KILN_TOKEN_ATTR_BYTE         = 1 << 5,
    KILN_TOKEN_ATTR_LSTRIP       = 1 << 7,
    KILN_TOKEN_ATTR_RSTRIP       = 1 << 8,
};

struct kiln_vocab;

/* Vocabulary from a GGUF file's tokenizer.ggml.* metadata (a vocab-only file
 * with no tensors is fine). NULL + kiln_last_error() on failure. */
KILN_API struct kiln_vocab * kiln_vocab_load(const char * path);
KILN_API struct kiln_vocab * kiln_vocab_load_from_buffer(const void * data, size_t size);
KILN_API void                kiln_vocab_free(struct kiln_vocab * vocab);

KILN_API enum kiln_vocab_type kiln_vocab_type(const struct kiln_vocab * vocab);
KILN_API int32_t     kiln_vocab_n_tokens(const struct kiln_vocab * vocab);
KILN_API kiln_token  kiln_vocab_bos(const struct kiln_vocab * vocab);
KILN_API kiln_token  kiln_vocab_eos(const struct kiln_vocab * vocab);
KILN_API bool        kiln_vocab_get_add_bos(const struct kiln_vocab * vocab);
KILN_API bool        kiln_vocab_get_add_eos(const struct kiln_vocab * vocab);
/* end of generation: EOS, EOT, and the tokens llama.cpp treats as such */
KILN_API bool        kiln_vocab_is_eog(const struct kiln_vocab * vocab, kiln_token token);
KILN_API const char * kiln_vocab_get_text(const struct kiln_vocab * vocab, kiln_token token);
KILN_API float       kiln_vocab_get_score(const struct kiln_vocab * vocab, kiln_token token);
KILN_API uint32_t    kiln_vocab_get_attr(const struct kiln_vocab * vocab, kiln_token token);

/* Text -> tokens, exactly as llama_tokenize: add_special adds BOS/EOS as the
 * vocabulary asks; parse_special matches control-token text in the input.
 * Returns the number of tokens; when n_tokens_max is too small, returns
 * -(number needed) and writes nothing beyond n_tokens_max. INT32_MIN on error. */
KILN_API int32_t kiln_tokenize(
        const struct kiln_vocab * vocab,
        const char              * text,
        int32_t                   text_len,
        kiln_token              * tokens,
        int32_t                   n_tokens_max,
        bool                      add_special,
        bool                      parse_special);

/* One token's text (no NUL written). special: render control tokens.
 * lstrip: skip up to that many leading spaces. Returns the byte count, or
 * -(needed) when length is too small. */
KILN_API int32_t kiln_token_to_piece(
        const struct kiln_vocab * vocab,
        kiln_token                token,
        char                    * buf,
        int32_t                   length,
        int32_t                   lstrip,
        bool                      special);

/* Tokens -> text as llama_detokenize (leading-space removal, clean-up of
 * spaces where the vocabulary asks). Returns bytes written (no NUL), or
 * -(needed) when text_len_max is too small. */
KILN_API int32_t kiln_detokenize(
        const struct kiln_vocab * vocab,
        const kiln_token        * tokens,
        int32_t                   n_tokens,
        char                    * text,
        int32_t                   text_len_max,
        bool                      remove_special,
        bool                      unparse_special);

/* --------------------------------------------------------------- sampler */

struct kiln_sampler_params {
    uint64_t seed;              /* RNG seed: same seed, same logits -> same tokens */
    float    temperature;       /* <= 0: greedy (argmax) */
    int32_t  top_k;             /* <= 0: off */
    float    top_p;             /* >= 1: off */
    float    min_p;             /* <= 0: off */
    float    repeat_penalty;    /* 1: off (llama.cpp's penalty_repeat) */
    float    frequency_penalty; /* 0: off */
    float    presence_penalty;  /* 0: off */
    int32_t  penalty_last_n;    /* how many recent tokens the penalties see; 0: off, -1: all */
};

KILN_API struct kiln_sampler_params kiln_sampler_params_default(void);

struct kiln_sampler;
KILN_API struct kiln_sampler * kiln_sampler_new(struct kiln_sampler_params params);
KILN_API void       kiln_sampler_free(struct kiln_sampler * smpl);
/* pick a token from n_vocab logits (the array is not modified) */
KILN_API kiln_token kiln_sampler_sample(struct kiln_sampler * smpl, const float * logits, int32_t n_vocab);
/* tell the sampler a token was emitted (or was part of the prompt), for the penalties */
KILN_API void       kiln_sampler_accept(struct kiln_sampler * smpl, kiln_token token);
/* forget accepted tokens and restart the RNG from the seed (and the grammar
 * from its start) */
KILN_API void       kiln_sampler_reset(struct kiln_sampler * smpl);

/* Constrain sampling to a GBNF grammar (llama.cpp's syntax; root: the start
 * rule, NULL for "root"). Tokens whose text cannot continue the grammar get
 * -inf before the other filters; end-of-generation tokens only once the
 * text is a complete sentence. The grammar advances on each accepted token
 * that this sampler itself just sampled (prompt tokens given to
 * kiln_sampler_accept do not move it). The vocabulary must outlive the
 * sampler. gbnf NULL removes the grammar. A bad grammar gives
 * KILN_STATUS_INVALID_ARG and a message naming line and column; the sampler
 * keeps its previous grammar. */
KILN_API enum kiln_status kiln_sampler_set_grammar(
        struct kiln_sampler     * smpl,
        const struct kiln_vocab * vocab,
        const char              * gbnf,
        const char              * root);

/* Added to a token's logit before everything else; -INFINITY bans it. */
struct kiln_logit_bias {
    kiln_token token;
    float      bias;
};
/* replaces the previous list (n = 0 clears it); ids must be >= 0 */
KILN_API enum kiln_status kiln_sampler_set_logit_bias(
        struct kiln_sampler          * smpl,
        const struct kiln_logit_bias * bias,
        int32_t                        n);

/* Log-probabilities per sampled token: log-softmax of the logits after the
 * bias, the grammar and the penalties (before top-k/top-p/min-p and
 * temperature), as OpenAI-style `logprobs` report them. n_top: how many of
 * the most likely tokens to keep (0 turns this off; at most 64). */
struct kiln_token_logprob {
    kiln_token token;
    float      logprob;
};
KILN_API enum kiln_status kiln_sampler_set_logprobs(struct kiln_sampler * smpl, int32_t n_top);
/* for the last kiln_sampler_sample: the sampled token's entry in *chosen and
 * up to n_max of the top alternatives (most likely first) in top; returns
 * how many were written, or -1 when logprobs are off or nothing was sampled */
KILN_API int32_t kiln_sampler_get_logprobs(
        const struct kiln_sampler * smpl,
        struct kiln_token_logprob * chosen,
        struct kiln_token_logprob * top,
        int32_t                     n_max);

/* --------------------------------------------------------------- grammar */

/* A GBNF grammar with its parse state, for matching text (the sampler builds
 * its own from text). vocab: needed only for token references (<[id]>,
 * <text>); may be NULL otherwise. NULL + kiln_last_error() ("grammar: line L,
 * column C: ...") on a bad grammar, an undefined rule, a missing root or
 * left recursion. */
struct kiln_grammar;
KILN_API struct kiln_grammar * kiln_grammar_init(const char * gbnf, const char * root, const struct kiln_vocab * vocab);
KILN_API void                  kiln_grammar_free(struct kiln_grammar * grammar);
/* back to the start rule */
KILN_API void                  kiln_grammar_reset(struct kiln_grammar * grammar);
/* advance over UTF-8 text (a character may be split across calls);
 * KILN_STATUS_INVALID_ARG, state unchanged, when the text leaves the grammar */
KILN_API enum kiln_status      kiln_grammar_accept_text(struct kiln_grammar * grammar, const char * text, int32_t len);
/* the text accepted so far is a complete sentence (no pending UTF-8 bytes) */
KILN_API bool                  kiln_grammar_is_complete(const struct kiln_grammar * grammar);

/* A JSON Schema (JSON text, len < 0: NUL-terminated) converted to GBNF as
 * llama.cpp's json-schema-to-grammar does. Returns a malloc'd NUL-terminated
 * string (free() it), or NULL + kiln_last_error() (bad JSON names the line
 * and column; an unsupported schema feature is named). */
KILN_API char * kiln_json_schema_to_grammar(const char * schema, int32_t len);

/* ----------------------------------------------------------------- model */

/* Prompt tokens per graph by default: llama.cpp's default micro-batch
 * (n_ubatch). A prompt is split into graphs of this many tokens, and
 * attention takes another summation order for a graph of fewer than 64
 * query rows than for a longer one (ggml's tiled path), so the same split
 * as llama.cpp's is what gives its results on prompts longer than 64
 * tokens. Each graph's activations take memory in proportion. */
#define KILN_DEFAULT_N_BATCH 512

struct kiln_model_params {
    int32_t        n_ctx;      /* context length; 0: from the GGUF metadata */
    enum kiln_type kv_type;    /* KILN_TYPE_F16 (default) or KILN_TYPE_F32 */
    int32_t        n_batch;    /* prompt tokens per graph; 0: KILN_DEFAULT_N_BATCH */
    int32_t        n_threads;  /* 0: KILN_DEFAULT_N_THREADS */
    bool           vocab_only; /* load only the tokenizer */
    bool           no_copy;    /* kiln_model_load_from_buffer: weights stay in the caller's
                                  buffer (it must outlive the model) instead of a copy */
    bool           repack_in_place; /* with no_copy: q4_0 / q8_0 / iq4_nl weights may be
                                  rearranged in the caller's buffer for faster generation
                                  (kiln_repack_tensor); the buffer then no longer holds the
                                  file's layout for those tensors (kiln_model_get_tensor
                                  tells which: kiln_tensor_is_repacked) */
    struct kiln_threadpool * threadpool; /* compute on this pool (not owned; it must outlive
                                  the model); NULL: the executor's shared pool */
};

KILN_API struct kiln_model_params kiln_model_params_default(void);

struct kiln_model;
struct kiln_gguf_context;
/* NULL + kiln_last_error() on failure (unsupported general.architecture is
 * named in the message) */
KILN_API struct kiln_model * kiln_model_load(const char * path, struct kiln_model_params params);
KILN_API struct kiln_model * kiln_model_load_from_buffer(const void * data, size_t size, struct kiln_model_params params);
/* A model over a GGUF file already parsed (kiln_gguf_init_from_* with
 * no_alloc = false; weights holds its tensors, NULL for vocab_only). Both
 * stay the caller's and must outlive the model. repack_in_place lets the
 * weights be rearranged where they are (kiln_tensor_is_repacked tells which). */
KILN_API struct kiln_model * kiln_model_load_from_gguf(struct kiln_gguf_context * gguf, struct kiln_context * weights,
                                                       struct kiln_model_params params);
KILN_API void kiln_model_free(struct kiln_model * model);

KILN_API const struct kiln_vocab * kiln_model_vocab(const struct kiln_model * model);
KILN_API int32_t kiln_model_n_ctx(const struct kiln_model * model);
KILN_API int32_t kiln_model_n_vocab(const struct kiln_model * model);
/* the number of positions now held in the KV cache */
KILN_API int32_t kiln_model_n_past(const struct kiln_model * model);
/* the parsed GGUF file (all metadata: kiln-gguf.h getters) */
KILN_API const struct kiln_gguf_context * kiln_model_gguf(const struct kiln_model * model);
/* a weight by its GGUF name, or NULL (vocab-only models have none) */
KILN_API struct kiln_tensor * kiln_model_get_tensor(const struct kiln_model * model, const char * name);
/* a metadata value rendered as text (strings as is, numbers printed, arrays
 * summarized); returns bytes needed excluding the NUL, or -1 if absent */
KILN_API int32_t kiln_model_meta_val_str(const struct kiln_model * model, const char * key, char * buf, size_t buf_size);

KILN_API int32_t kiln_model_n_embd(const struct kiln_model * model);
/* the context length the metadata gives ({arch}.context_length) */
KILN_API int32_t kiln_model_n_ctx_train(const struct kiln_model * model);
/* change the context length: reallocates (and empties) the KV cache */
KILN_API enum kiln_status kiln_model_set_n_ctx(struct kiln_model * model, int32_t n_ctx);

/* empty the KV cache (n_past = 0) */
KILN_API void kiln_model_reset(struct kiln_model * model);
/* keep only the first n positions of the KV cache */
KILN_API void kiln_model_truncate(struct kiln_model * model, int32_t n_past);
/* Context shift: drop the cached positions n_keep .. n_keep + n_discard - 1;
 * the later ones move down and their keys' RoPE turns by -n_discard, so they
 * need no re-evaluation. n_past becomes n_past - n_discard. A failed
 * rotation empties the cache (n_past 0). */
KILN_API enum kiln_status kiln_model_shift(struct kiln_model * model, int32_t n_keep, int32_t n_discard);

/* Abort flag checked between graph nodes: set it non-zero from another
 * thread to stop kiln_model_eval; the cache keeps only completed positions. */
KILN_API void kiln_model_set_abort_flag(struct kiln_model * model, volatile int * flag);

/* Run tokens at positions n_past.. (in batches), append them to the KV
 * cache and leave the logits of the last token in kiln_model_logits().
 * KILN_STATUS_INVALID_ARG when the context would overflow; ABORTED when the
 * abort flag was set (the cache then holds what completed before). */
KILN_API enum kiln_status kiln_model_eval(struct kiln_model * model, const kiln_token * tokens, int32_t n_tokens);
KILN_API const float *    kiln_model_logits(const struct kiln_model * model);

/* ------------------------------------------------------------ embeddings */

/* How the hidden states of a sequence become one vector (llama.cpp's
 * llama_pooling_type and the GGUF key {arch}.pooling_type). */
enum kiln_pooling_type {
    KILN_POOLING_UNSPECIFIED = -1, /* the file's pooling_type; none when it has none */
    KILN_POOLING_NONE        = 0,  /* one vector per token */
    KILN_POOLING_MEAN        = 1,  /* the mean over the tokens */
    KILN_POOLING_CLS         = 2,  /* the first token's ([CLS]) */
    KILN_POOLING_LAST        = 3,  /* the last token's */
};

struct kiln_embed_params {
    enum kiln_pooling_type pooling; /* KILN_POOLING_UNSPECIFIED: the file's */
    bool normalize;                 /* divide each vector by its L2 norm (llama.cpp's
                                       embd_normalize = 2), true by default */
};

KILN_API struct kiln_embed_params kiln_embed_params_default(void);

/* encoder architectures (bert, nomic-bert) embed only; decoders embed too */
KILN_API bool kiln_model_is_encoder(const struct kiln_model * model);
/* the pooling the file asks for ({arch}.pooling_type), KILN_POOLING_NONE when absent */
KILN_API enum kiln_pooling_type kiln_model_pooling_type(const struct kiln_model * model);

/* The embedding of one sequence of ids (none added), computed as llama.cpp
 * with embeddings on: an encoder's last layer output, a decoder's hidden
 * state after the final norm (evaluated from an empty cache, which it
 * leaves empty), pooled and optionally normalized. out receives n_embd
 * floats, or n_tokens x n_embd with KILN_POOLING_NONE (token by token).
 * Returns the number of floats written, -(needed) when n_out is too small
 * (nothing computed), INT32_MIN on error (kiln_last_error(): an id outside
 * the vocabulary, more ids than the context, an abort). */
KILN_API int32_t kiln_model_embed_tokens(
        struct kiln_model        * model,
        const kiln_token         * tokens,
        int32_t                    n_tokens,
        struct kiln_embed_params   params,
        float                    * out,
        int32_t                    n_out);

/* The same for text: tokenized with the vocabulary's special tokens added
 * (BOS / [CLS] ... [SEP]) and control-token text not parsed, as llama.cpp's
 * embedding tools and node-llama-cpp's getEmbeddingFor do. */
KILN_API int32_t kiln_model_embed(
        struct kiln_model        * model,
        const char               * text,
        int32_t                    text_len,
        struct kiln_embed_params   params,
        float                    * out,
        int32_t                    n_out);

/* ------------------------------------------------------------ generation */

/* Why a generation ended (KILN_GEN_RUNNING while it goes on). */
enum kiln_gen_stop {
    KILN_GEN_RUNNING     = 0,
    KILN_GEN_EOG         = 1, /* an end-of-generation token was sampled (it is not text) */
    KILN_GEN_MAX_TOKENS  = 2, /* max_tokens were generated */
    KILN_GEN_STOP_STRING = 3, /* a stop string appeared (neither it nor what follows is text) */
    KILN_GEN_CONTEXT     = 4, /* the context is full */
};

/* Called with the logits of the next position, in a scratch copy the hook
 * may change (mask tokens with -INFINITY, add a bias) before the sampler
 * sees them. Grammar-constrained sampling and logit bias plug in here. */
typedef void (*kiln_logits_hook)(float * logits, int32_t n_vocab, void * user_data);
/* Called with every sampled token (an end-of-generation token too), before
 * its text is released: a grammar advances its state here. */
typedef void (*kiln_accept_hook)(kiln_token token, void * user_data);

struct kiln_gen_params {
    int32_t max_tokens;          /* <= 0: until end of generation or a full context */
    const char * const * stop;   /* stop strings (copied at start; none may be empty) */
    int32_t n_stop;
    kiln_logits_hook logits_hook; /* NULL: sample from the model's logits as they are */
    kiln_accept_hook accept_hook; /* NULL: nobody follows the sampled tokens */
    void * hook_data;             /* user_data of both hooks */
    bool cache_prompt;            /* reuse the cached ids the prompt starts with (true) */
    bool context_shift;           /* a full context drops the older half after n_keep ids and
                                     goes on (kiln_model_shift) instead of stopping (false) */
    int32_t n_keep;               /* ids at the start that a shift keeps (1: BOS) */
};

KILN_API struct kiln_gen_params kiln_gen_params_default(void);

struct kiln_generate_stats {
    int32_t prompt_tokens;      /* the prompt's length, cached ids included */
    int32_t cached_tokens;      /* prompt ids taken from the KV cache, not evaluated */
    int32_t shifted_tokens;     /* ids dropped from the cache by context shifts */
    int32_t generated_tokens;
    double  prompt_tokens_per_second; /* evaluated prompt ids (prompt - cached) per second */
    double  tokens_per_second;
    bool    stopped_by_eog;     /* end-of-generation token */
    bool    stopped_by_string;  /* a stop string */
    enum kiln_gen_stop stop;    /* why it ended */
    double  prompt_seconds;     /* evaluating the prompt */
    double  gen_seconds;        /* the steps: sampling and evaluating generated tokens */
};

/* One generated token and the text it released. */
struct kiln_gen_token {
    kiln_token token;    /* the sampled token (an end-of-generation token too) */
    const char * text;   /* text that is now safe to show: whole UTF-8 characters, */
    int32_t len;         /* nothing that may still become a stop string; valid until the next call */
    enum kiln_gen_stop stop; /* KILN_GEN_RUNNING: call kiln_gen_step again */
};

/* A stepped generation over one model: kiln_gen_start evaluates the prompt,
 * then each kiln_gen_step evaluates the token the step before sampled,
 * samples one token and releases its text (text goes out before the
 * evaluation that follows it; an abort during that evaluation fails the next
 * step). The object records the tokens its model's KV cache holds
 * (kiln_gen_tokens) and is reused from one generation to the next. The
 * model and sampler must outlive it; it owns neither. */
struct kiln_gen;
KILN_API struct kiln_gen * kiln_gen_new(struct kiln_model * model);
KILN_API void kiln_gen_free(struct kiln_gen * gen);

/* Check the parameters (messages name the bad one), restart the sampler
 * (which then sees the whole prompt for its penalties) and evaluate the
 * prompt ids. With params.cache_prompt the ids the KV cache already holds at
 * the prompt's start are kept (the longest common prefix, at most all but
 * the last prompt id) and only the rest is evaluated; the record is trusted
 * only while the model's n_past equals it (this object is the only one
 * evaluating on the model). Without it the cache is emptied first. INVALID_ARG: no prompt, an id outside the
 * vocabulary, a prompt longer than the context, an empty stop string;
 * ABORTED: the abort flag was set (the generation is then not started). */
KILN_API enum kiln_status kiln_gen_start(struct kiln_gen * gen, struct kiln_sampler * sampler,
                                         const kiln_token * prompt, int32_t n_prompt,
                                         struct kiln_gen_params params);

/* One token. After the step that ends the generation (out->stop set), the
 * rest of the held text has been released and further steps give an empty
 * piece with the same stop. INVALID_ARG when not started. */
KILN_API enum kiln_status kiln_gen_step(struct kiln_gen * gen, struct kiln_gen_token * out);

KILN_API void kiln_gen_stats(const struct kiln_gen * gen, struct kiln_generate_stats * stats);
/* the tokens now in the model's KV cache: the prompt, then the generated
 * tokens evaluated so far (the last one handed out is evaluated by the next step) */
KILN_API const kiln_token * kiln_gen_tokens(const struct kiln_gen * gen, int32_t * n_tokens);

/* The generation's state (the ids its cache holds and the cache's K and V)
 * as bytes, to resume elsewhere without evaluating again. Version 1, little
 * endian:
 *   0  "KKVS"            4 bytes
 *   4  version (1)       u32
 *   8  model fingerprint u64 (kiln_model_fingerprint)
 *  16  n_ctx             u32 (the saving model's context; a loading model needs n_past <= its own)
 *  20  kv type           u32 (enum kiln_type of K and V)
 *  24  n_past            u32
 *  28  reserved (0)      u32
 *  32  kv bytes          u64 = 2 x layers x n_past x row bytes
 *  40  ids               i32 x n_past
 *  ..  per layer: K rows 0..n_past-1, then V rows (the cache's own layout)
 * kiln_gen_state_size gives the size; kiln_gen_state_save writes it (size too
 * small: INVALID_ARG). kiln_gen_state_load checks everything first and
 * changes nothing on a bad, truncated or foreign state (INVALID_ARG with a
 * message naming the mismatch). After a load, a start whose prompt begins
 * with the saved ids evaluates only the rest. */
KILN_API size_t kiln_gen_state_size(const struct kiln_gen * gen);
KILN_API enum kiln_status kiln_gen_state_save(const struct kiln_gen * gen, void * buf, size_t size);
KILN_API enum kiln_status kiln_gen_state_load(struct kiln_gen * gen, const void * buf, size_t size);
/* what a saved state names its model by: the architecture, the shapes and
 * the norm weights' bytes (the same for one file however it is loaded), and
 * the LoRA adapters applied (scales and bytes) */
KILN_API uint64_t kiln_model_fingerprint(const struct kiln_model * model);
KILN_API enum kiln_type kiln_model_kv_type(const struct kiln_model * model);
/* bytes of K and V for n_pos positions; read/write the first n_past */
KILN_API size_t kiln_model_kv_bytes(const struct kiln_model * model, int32_t n_pos);
KILN_API void kiln_model_kv_read(const struct kiln_model * model, void * dst);
KILN_API enum kiln_status kiln_model_kv_write(struct kiln_model * model, const void * src, int32_t n_past);

/* Prompt text -> ids with the vocabulary's rules, into a buffer kiln_gen
 * keeps (valid until the next call on gen); *n_tokens gets the count. */
KILN_API const kiln_token * kiln_gen_tokenize(struct kiln_gen * gen, const char * text, int32_t len,
                                              bool add_special, bool parse_special, int32_t * n_tokens);

/* Sampler parameters out of range give INVALID_ARG and a message that names
 * the parameter (kiln_sampler_new checks them too). */
KILN_API enum kiln_status kiln_sampler_params_check(const struct kiln_sampler_params * params);

/* The whole loop over kiln_gen for a text prompt. */
struct kiln_generate_params {
    int32_t max_tokens;          /* <= 0: until end of generation or a full context */
    bool    add_special;         /* add BOS/EOS around the prompt as the vocabulary asks (true) */
    bool    parse_special;       /* control-token text in the prompt becomes those tokens (false) */
    const char * const * stop;   /* stop strings: generation ends before the first one that appears */
    int32_t n_stop;
};

KILN_API struct kiln_generate_params kiln_generate_params_default(void);

/* Receives generated text in order: whole UTF-8 characters only (bytes of an
 * unfinished character wait for the next token), and text that might begin
 * a stop string waits until it is known not to. token: the token whose
 * acceptance released this text (len may be 0). */
typedef void (*kiln_piece_callback)(const char * text, int32_t len, kiln_token token, void * user_data);

/* Tokenize the prompt, then kiln_gen_start and kiln_gen_step until the
 * generation ends, handing each piece to callback. A prompt longer than the
 * context gives KILN_STATUS_INVALID_ARG; the abort flag gives
 * KILN_STATUS_ABORTED (the model stays usable). stats may be NULL. */
KILN_API enum kiln_status kiln_generate(
        struct kiln_model          * model,
        struct kiln_sampler        * sampler,
        const char                 * prompt,
        struct kiln_generate_params  params,
        kiln_piece_callback          callback,
        void                       * user_data,
        struct kiln_generate_stats * stats);

/* ---------------------------------------------------------- LoRA adapters */

/* A LoRA adapter in llama.cpp's GGUF format (general.type = "adapter",
 * adapter.type = "lora", adapter.lora.alpha, general.architecture equal to
 * the model's): per adapted weight W [n_in, n_out] a pair
 * "<W's name>.lora_a" [n_in, r] and "<W's name>.lora_b" [r, n_out]
 * (token_embd.weight: lora_a [r, n_vocab], lora_b [r, n_embd]), of type F32,
 * F16, BF16 or Q8_0. Adaptable weights: attention q/k/v/output, FFN
 * gate/up/down, output and (untied models) the token embedding; tensors
 * ending in "_norm.weight" are skipped as llama.cpp skips them. Every name,
 * shape and type is checked against the model at load: a problem gives NULL
 * and a message naming the tensor. As llama.cpp (llama_adapter_lora_init),
 * the model owns its adapters: kiln_model_free frees those not yet freed. */
struct kiln_adapter_lora;
KILN_API struct kiln_adapter_lora * kiln_adapter_lora_init(struct kiln_model * model, const char * path);
/* the buffer is only read during the call */
KILN_API struct kiln_adapter_lora * kiln_adapter_lora_init_from_buffer(struct kiln_model * model, const void * data, size_t size);
/* detaches it from its model first */
KILN_API void    kiln_adapter_lora_free(struct kiln_adapter_lora * adapter);
KILN_API float   kiln_adapter_lora_alpha(const struct kiln_adapter_lora * adapter);
/* how many weights it adapts */
KILN_API int32_t kiln_adapter_lora_n_weights(const struct kiln_adapter_lora * adapter);

/* Apply an adapter at every evaluation from now on: each adapted W x
 * becomes W x + s * B (A x) with s = scale * alpha / r (scale when alpha is
 * 0), in llama.cpp's order of operations; several adapters add up in the
 * order they were set. Setting one already set changes its scale. Changing
 * the set of adapters empties the KV cache (its keys and values were
 * computed with other weights). INVALID_ARG: an adapter of another model. */
KILN_API enum kiln_status kiln_model_set_adapter_lora(struct kiln_model * model, struct kiln_adapter_lora * adapter, float scale);
/* INVALID_ARG when it was not set */
KILN_API enum kiln_status kiln_model_rm_adapter_lora(struct kiln_model * model, struct kiln_adapter_lora * adapter);
KILN_API void             kiln_model_clear_adapter_lora(struct kiln_model * model);

/* ---- chat templates built in (src/models/chat_template.c): llama.cpp's
 * llama_chat_apply_template without a Jinja engine */

struct kiln_chat_message {
    const char * role;     /* "system", "user", "assistant", ... */
    const char * content;
};

/* The built-in template that tmpl names ("chatml", "llama3", "gemma",
 * "phi3", ...) or that a tokenizer.chat_template resembles, by the marker
 * strings llama.cpp looks for; NULL when none (tmpl NULL: "chatml"). */
KILN_API const char * kiln_chat_template_detect(const char * tmpl);

/* Render the messages with the built-in template of tmpl (as above), the
 * assistant's turn opened when add_ass. Returns the length of the whole
 * text (without its NUL) and writes at most length - 1 bytes of it plus a
 * NUL into buf (call again with a larger buffer when the result >= length);
 * -1 + kiln_last_error() for an unknown template or bad arguments. */
KILN_API int32_t kiln_chat_apply_template(
        const char                     * tmpl,
        const struct kiln_chat_message * msgs,
        size_t                           n_msg,
        bool                             add_ass,
        char                           * buf,
        int32_t                          length);

#ifdef __cplusplus
}
#endif

#endif /* KILN_LLAMA_H */
