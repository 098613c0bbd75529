/*
 * whisper_internal.h — the Whisper model and its state, shared by
 * whisper_load.c (file), whisper_graph.c (encoder/decoder graphs) and
 * whisper_full.c (decoding).
 */
#ifndef KILN_WHISPER_INTERNAL_H
#define KILN_WHISPER_INTERNAL_H

#include "kiln-whisper.h"

#define WHISPER_MAGIC 0x67676d6cu
#define WHISPER_EPS   1e-5f
#define WHISPER_N_LANGS 100
#define WHISPER_MAX_DECODERS 8   /* whisper.cpp's limit on beam_size / best_of */

/* std::mt19937 */
struct whisper_mt19937 { uint32_t mt[624]; int idx; };

struct whisper_layer {
    /* shared by encoder and decoder blocks */
    struct kiln_tensor * attn_ln_w, * attn_ln_b;
    struct kiln_tensor * q_w, * q_b, * k_w, * v_w, * v_b, * o_w, * o_b;
    struct kiln_tensor * mlp_ln_w, * mlp_ln_b, * mlp0_w, * mlp0_b, * mlp1_w, * mlp1_b;
    /* decoder only: cross-attention */
    struct kiln_tensor * c_ln_w, * c_ln_b;
    struct kiln_tensor * c_q_w, * c_q_b, * c_k_w, * c_v_w, * c_v_b, * c_o_w, * c_o_b;
};

struct kiln_whisper {
    struct kiln_whisper_hparams hp;
    struct kiln_whisper_tokens  tok;
    enum kiln_type wtype, vtype;
    bool multilingual;

    int     n_mel_f, n_fft_f;
    float * filters;

    /* vocabulary: n_vocab strings in one blob */
    int       n_vocab;
    char    * vocab_blob;
    uint32_t * vocab_off, * vocab_len;
    int32_t   space_id;           /* " " (suppressed at the start) */
    int32_t * nst_ids; int n_nst; /* non-speech tokens */

    /* weights */
    struct kiln_context * ctx_w;
    struct kiln_tensor * e_pe, * e_conv1_w, * e_conv1_b, * e_conv2_w, * e_conv2_b, * e_ln_w, * e_ln_b;
    struct kiln_tensor * d_pe, * d_te, * d_ln_w, * d_ln_b;
    struct whisper_layer * enc, * dec;

    /* state: caches (f16) and compute */
    struct kiln_context * ctx_kv;
    struct kiln_tensor * k_self, * v_self, * k_cross, * v_cross;
    /* one self-attention cache per decoder (slot 0 is ctx_kv's); k_self/v_self point at the one in use */
    struct kiln_context * ctx_slot[WHISPER_MAX_DECODERS];
    struct kiln_tensor * k_slot[WHISPER_MAX_DECODERS], * v_slot[WHISPER_MAX_DECODERS];
    /* the decoders' random generators: decoder 0's is seeded once (0) with the state, the others (j) by every whisper_full */
    struct whisper_mt19937 rng[WHISPER_MAX_DECODERS];
    /* VAD time map of the last whisper_full: vad_n_map (processed cs, original cs) pairs; segments < vad_mapped are mapped */
    int64_t * vad_map; int vad_n_map, vad_mapped;
    /* vocabulary hash for the prompt tokenizer (built on first use) */
    int32_t * tok_hash; int tok_hash_cap;
    float * enc_out;                 /* [n_audio_ctx][n_state] copy of the last encoder output */
    struct kiln_gallocr * galloc;
    uint8_t * work; size_t work_size;
    int n_threads;
    /* set by kiln_whisper_full for its duration (kiln_whisper_params' threadpool and abort_callback) */
    struct kiln_threadpool * tp;
    kiln_abort_callback abort_cb;
    void * abort_data;

    /* last whisper_full */
    struct kiln_whisper_segment * segs; int n_segs, cap_segs;
    int   lang_id;
    float lang_probs[WHISPER_N_LANGS];
    float min_gap, min_draw;
};

/* whisper_graph.c */
bool whisper_state_init(struct kiln_whisper * w);
void whisper_state_free(struct kiln_whisper * w);
/* makes sure self-attention cache slots 0 .. n - 1 exist */
bool whisper_kv_slots(struct kiln_whisper * w, int n);
/* later kiln_whisper_decode calls read and write slot i */
void whisper_kv_use(struct kiln_whisper * w, int i);
/* copies positions [0, n_pos) of slot src into slot dst */
void whisper_kv_copy(struct kiln_whisper * w, int dst, int src, int n_pos);
/* one decoder step of n sequences: token b at position n_past in cache slot slots[b], its logits
 * into logits[b] (n_vocab floats); each row equals kiln_whisper_decode's one-token step in its slot */
bool whisper_decode_slots(struct kiln_whisper * w, const int32_t * tokens, const int * slots, int n, int n_past, float ** logits);

/* whisper_full.c: whisper_full without VAD (segments replaced) */
int whisper_full_samples(struct kiln_whisper * w, const struct kiln_whisper_params * p, const float * samples, int64_t n);
/* whisper_vad.c: whisper_full with VAD in front */
int whisper_full_vad(struct kiln_whisper * w, const struct kiln_whisper_params * p, const float * samples, int64_t n);

/* whisper_sample.c */
void     whisper_mt_seed(struct whisper_mt19937 * r, uint32_t seed);
uint32_t whisper_mt_next(struct whisper_mt19937 * r);
/* libstdc++'s std::discrete_distribution over probs[0..n): cumulative table into cp (n doubles); -1 if all zero */
int whisper_discrete_setup(const float * probs, int n, double * cp);
/* one draw; *margin (if not NULL): the distance of the uniform number to the nearer edge of the drawn token's interval */
int whisper_discrete_draw(struct whisper_mt19937 * r, const double * cp, int n, double * margin);
/* whisper.cpp's whisper_tokenize: writes up to max_out ids, returns the count needed */
int whisper_tokenize_prompt(struct kiln_whisper * w, const char * text, int32_t * out, int max_out);

#endif
