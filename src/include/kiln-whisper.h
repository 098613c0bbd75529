/*
 * kiln-whisper.h — speech to text with OpenAI's Whisper models in
 * whisper.cpp's model files (ggml-tiny.en.bin, ggml-base.bin, ... and their
 * quantized variants), built on the public API (kiln.h).
 *
 *  - Loader: the "ggml" magic, the hyperparameters (n_mels 80 or 128, ftype),
 *    the mel filterbank, the vocabulary, then the tensors; F32, F16, Q4_0,
 *    Q4_1, Q5_0, Q5_1 and Q8_0 weights. A wrong or truncated file fails with
 *    a message naming the problem.
 *  - Front end: whisper.cpp's log-mel spectrogram (400-point FFT, hop 160,
 *    periodic Hann window, the file's filterbank, log10 clamped at max - 8,
 *    (x + 4) / 4, 30 s of zero padding).
 *  - Model: the encoder (two conv1d + GELU, the file's positional embedding,
 *    transformer blocks), the cross-attention K/V computed once per 30 s
 *    window, the decoder with a self-attention K/V cache; the attention
 *    caches are f16 as in whisper.cpp.
 *  - Decoding: whisper.cpp's whisper_full: greedy and beam search, the
 *    temperature fallback with best-of sampling (the same std::mt19937 and
 *    std::discrete_distribution draws as whisper.cpp built with libstdc++),
 *    initial prompt, translate, language detection, VAD (see struct
 *    kiln_whisper_params).
 *
 * Errors: functions return NULL / false / -1 and set kiln_last_error().
 */
#ifndef KILN_WHISPER_H
#define KILN_WHISPER_H

#include "kiln.h"
#include "kiln-audio.h"

#ifdef __cplusplus
extern "C" {
#endif

/* the file's header, in file order */
struct kiln_whisper_hparams {
    int32_t n_vocab;
    int32_t n_audio_ctx;
    int32_t n_audio_state;
    int32_t n_audio_head;
    int32_t n_audio_layer;
    int32_t n_text_ctx;
    int32_t n_text_state;
    int32_t n_text_head;
    int32_t n_text_layer;
    int32_t n_mels;
    int32_t ftype;          /* after removing the quantization version (ftype % 1000) */
};

/* special token ids (they depend on the vocabulary: English-only or multilingual) */
struct kiln_whisper_tokens {
    int32_t eot, sot, translate, transcribe, solm, prev, nosp, not_ts, beg;
};

struct kiln_whisper;
struct kiln_whisper_token_data;

struct kiln_whisper * kiln_whisper_load_mem (const void * data, size_t size, int n_threads);
struct kiln_whisper * kiln_whisper_load_file(const char * path, int n_threads);
void kiln_whisper_free(struct kiln_whisper * w);

const struct kiln_whisper_hparams * kiln_whisper_get_hparams(const struct kiln_whisper * w);
const struct kiln_whisper_tokens  * kiln_whisper_get_tokens (const struct kiln_whisper * w);
enum kiln_type kiln_whisper_wtype(const struct kiln_whisper * w);     /* the big matrices' type */
bool         kiln_whisper_is_multilingual(const struct kiln_whisper * w);
int          kiln_whisper_n_vocab(const struct kiln_whisper * w);
/* token text (bytes, not NUL-terminated in general: *len is set); NULL for an id out of range */
const char * kiln_whisper_token_text(const struct kiln_whisper * w, int32_t id, size_t * len);
/* the mel filterbank [n_mel][n_fft] from the file */
const float * kiln_whisper_mel_filters(const struct kiln_whisper * w, int * n_mel, int * n_fft);
/* set the thread count of later computations */
void kiln_whisper_set_n_threads(struct kiln_whisper * w, int n_threads);

/* languages: whisper.cpp's table (id 0 "en" .. 99 "yue"); -1 / NULL if unknown */
int          kiln_whisper_lang_id(const char * code);
const char * kiln_whisper_lang_str(int id);
int          kiln_whisper_lang_max_id(void);

/* ------------------------------------------------------------ front end */

#define KILN_WHISPER_SAMPLE_RATE 16000
#define KILN_WHISPER_N_FFT       400
#define KILN_WHISPER_HOP         160
#define KILN_WHISPER_CHUNK_S     30

/* whisper.cpp's log-mel spectrogram of n samples at 16 kHz with the
 * filterbank filters [n_mel][n_fft] (n_fft must be 201). Writes a malloc'ed
 * [n_mel][*n_len] array to *mel (free()) and the frame count of the audio
 * alone (whisper.cpp's n_len_org) to *n_len_org. false on bad arguments. */
bool kiln_whisper_log_mel(const float * samples, int64_t n, const float * filters, int n_mel, int n_fft,
                          float ** mel, int * n_len, int * n_len_org);

/* ------------------------------------------------------- model steps */

/* Runs the encoder on mel frames [offset, offset + 2 n_audio_ctx) of mel
 * [n_mel][n_len] (zeros beyond n_len) and fills the cross-attention cache. */
bool kiln_whisper_encode(struct kiln_whisper * w, const float * mel, int n_len, int offset);
/* The encoder output of the last kiln_whisper_encode, [n_audio_ctx][n_audio_state]. */
const float * kiln_whisper_encoder_output(const struct kiln_whisper * w);
/* Feeds n tokens at positions n_past .. n_past + n - 1 (the self-attention
 * cache keeps positions < n_past) and writes the last token's logits
 * (n_vocab floats). */
bool kiln_whisper_decode(struct kiln_whisper * w, const int32_t * tokens, int n, int n_past, float * logits);

/* --------------------------------------------------------------- decoding */

/* whisper.cpp's whisper_full_params, the part that is built, with its
 * defaults (kiln_whisper_default_params(): whisper.cpp's
 * whisper_full_default_params(WHISPER_SAMPLING_GREEDY)): greedy or beam
 * search, the temperature fallback (best_of samples per temperature above
 * 0, entropy / log-prob / no-speech thresholds), timestamps or not, context
 * carried across 30 s windows (n_max_text_ctx), an initial prompt,
 * blank / non-speech suppression, max_initial_ts, language by code or
 * "auto" (detected on the first window), translate, and Silero VAD in front
 * (only speech is transcribed; times are mapped back to the input). */
enum kiln_whisper_strategy { KILN_WHISPER_GREEDY = 0, KILN_WHISPER_BEAM_SEARCH = 1 };

struct kiln_whisper_params {
    enum kiln_whisper_strategy strategy;   /* greedy */
    int         n_threads;        /* 4 */
    int         n_max_text_ctx;   /* 16384 */
    bool        translate;        /* false */
    bool        no_timestamps;    /* false */
    bool        single_segment;   /* false */
    bool        suppress_blank;   /* true */
    bool        suppress_nst;     /* false */
    float       temperature;      /* 0.0: the first temperature */
    float       max_initial_ts;   /* 1.0 s */
    float       length_penalty;   /* -1: score = sum of log-probs / length */
    float       temperature_inc;  /* 0.2; 0: no fallback */
    float       entropy_thold;    /* 2.4 */
    float       logprob_thold;    /* -1.0 */
    float       no_speech_thold;  /* 0.6 */
    int         best_of;          /* 5: samples per temperature above 0 */
    int         beam_size;        /* 5: beams at temperature 0 (strategy beam search) */
    const char * initial_prompt;  /* NULL: text whose tokens precede the first window */
    bool        carry_initial_prompt; /* false: true keeps it in front of every window */
    const char * language;        /* "en"; "auto" or NULL: detect */
    /* VAD: when vad is true, vad_model (a loaded Silero model) finds speech with vad_params;
     * whisper.cpp's layout of the speech (segments joined with 0.1 s of silence, samples_overlap
     * of audio after each but the last) is transcribed and times map back to the input */
    bool        vad;
    struct kiln_vad * vad_model;
    struct kiln_vad_params vad_params;
    /* whisper.cpp's logits_filter_callback: called for every decoder step with the decoder's tokens
     * so far and its logits (divided by the temperature, the always-suppressed tokens at -INFINITY),
     * before the timestamp rules; it may change the logits */
    void (*logits_filter)(const struct kiln_whisper * w, const struct kiln_whisper_token_data * tokens, int n_tokens,
                          float * logits, void * user);
    void * logits_filter_user;
    /* called with each new segment (its index) as soon as it is decoded */
    void (*on_segment)(const struct kiln_whisper * w, int i_segment, void * user);
    void * user;
    /* whisper.cpp's progress_callback: the percentage of the (speech) audio decoded, called before
     * each 30 s window and with 100 at the end; user as on_segment */
    void (*on_progress)(const struct kiln_whisper * w, int progress, void * user);
    /* whisper.cpp's abort_callback: checked between graph nodes; true stops the transcription,
     * which then fails with "whisper: aborted" */
    kiln_abort_callback abort_callback;
    void * abort_callback_data;
    /* the pool the graphs run on (NULL: the shared default pool); n_threads still says how many */
    struct kiln_threadpool * threadpool;
};
struct kiln_whisper_params kiln_whisper_default_params(void);

struct kiln_whisper_token_data {
    int32_t id, tid;   /* tid: the most probable timestamp token */
    float   p, plog, pt, ptsum;
    float   gap;       /* the margin of the choice: an argmax's log-prob minus the runner-up's; a sampled
                          token's distance (probability) from the uniform draw to its interval's nearer edge */
    float   ts_margin; /* log of the timestamps' total probability minus the best text token's log-prob
                          at this step (above 0 a timestamp was forced); NAN when not decided */
};

struct kiln_whisper_segment {
    int64_t t0, t1;    /* centiseconds */
    char *  text;
    float   no_speech_prob;
    struct kiln_whisper_token_data * tokens;
    int     n_tokens;
};

/* Transcribes n samples (16 kHz mono); the segments replace earlier ones.
 * Returns 0, or -1 with kiln_last_error(). */
int kiln_whisper_full(struct kiln_whisper * w, const struct kiln_whisper_params * params, const float * samples, int64_t n);
int kiln_whisper_n_segments(const struct kiln_whisper * w);
const struct kiln_whisper_segment * kiln_whisper_get_segment(const struct kiln_whisper * w, int i);
/* the language used by the last kiln_whisper_full (detected or given); its detection probabilities
 * (kiln_whisper_lang_max_id() + 1 floats, zeros when it was not detected) */
int          kiln_whisper_full_lang_id(const struct kiln_whisper * w);
const float * kiln_whisper_full_lang_probs(const struct kiln_whisper * w);

/* The closest decisions of the last kiln_whisper_full, for comparing with another engine whose
 * logits differ by rounding: *min_gap the smallest log-prob margin of an argmax choice or of the
 * forced-timestamp rule; *min_draw the smallest distance (probability) of a sampled draw from the
 * edge of its token's interval (beam search and temperatures above 0). INFINITY when none. */
void kiln_whisper_full_margins(const struct kiln_whisper * w, float * min_gap, float * min_draw);

/* Language detection on the window at mel frame offset (encodes it): writes
 * kiln_whisper_lang_max_id() + 1 probabilities and returns the best id, or -1. */
int kiln_whisper_detect_language(struct kiln_whisper * w, const float * mel, int n_len, int offset, float * probs);

/* ----------------------------------------------------- test model writer */

/* Writes a whisper.cpp model file with random weights: the vocabulary, mel
 * filterbank and n_vocab / n_audio_ctx / n_text_ctx / n_mels of a template
 * whisper.cpp file (e.g. whisper.cpp's weight-less for-tests-ggml-*.bin),
 * the widths and layer counts given here, weights of type ftype (0 f32,
 * 1 f16, 2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1). Scales: matrices
 * N(0, 1/fan_in), the encoder's sinusoidal positions as Whisper's, the token
 * embedding such that logits have standard deviation logit_std (about 2
 * makes greedy decoding mix text and timestamp tokens). */
struct kiln_whisper_random_params {
    int      n_state, n_head, n_audio_layer, n_text_layer;
    int      ftype;
    uint64_t seed;
    float    logit_std;
};
bool kiln_whisper_write_random(const void * template_data, size_t template_size,
                               const struct kiln_whisper_random_params * params, const char * out_path);

#ifdef __cplusplus
}
#endif

#endif
