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
    float * enc_out;                 /* [n_audio_ctx][n_state] copy of the last encoder output */
    struct kiln_gallocr * galloc;
    uint8_t * work; size_t work_size;
    int n_threads;

    /* last whisper_full */
    struct kiln_whisper_segment * segs; int n_segs, cap_segs;
    int   lang_id;
    float lang_probs[WHISPER_N_LANGS];
};

/* whisper_graph.c */
bool whisper_state_init(struct kiln_whisper * w);
void whisper_state_free(struct kiln_whisper * w);

#endif
