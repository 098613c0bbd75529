/*
 * kiln_wasm_whisper.c — Whisper for JS (kiln.loadWhisper, js/src/whisper.ts):
 * a whisper.cpp model file loaded from bytes, kiln_whisper_full on samples
 * at any rate (resampled to 16 kHz here), the segments read back by JS.
 *
 * The decoding options arrive as one array of doubles in the order of
 * enum kw_whisper_opt (js/src/whisper.ts writes the same order), plus the
 * language and initial prompt as strings and an optional VAD handle
 * (kiln_wasm_audio.c). While kw_whisper_full runs, every new segment and
 * every progress step calls into JS (library.js: kw_js_whisper_segment,
 * kw_js_whisper_progress), so the worker can stream them out; the graphs
 * run on the engine's pool and stop between nodes when the job is aborted.
 *
 * A token record (kw_whisper_segment_tokens) is struct
 * kiln_whisper_token_data: int32 id, tid; float p, plog, pt, ptsum, gap,
 * ts_margin (32 bytes). Nothing aborts: failures are KW_E_* codes with a
 * message in kw_last_error().
 */
#include "kiln_wasm_internal.h"
#include "kiln-whisper.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int kw_init(int n_threads);
int kw_n_threads(void);

#ifdef __EMSCRIPTEN__
extern void kw_js_whisper_segment(int i);
extern void kw_js_whisper_progress(int percent);
#else
static void kw_js_whisper_segment(int i) { (void) i; }
static void kw_js_whisper_progress(int percent) { (void) percent; }
#endif

_Static_assert(sizeof(struct kiln_whisper_token_data) == 32, "the JS side reads 32-byte token records");

/* the decoding options, in the order JS writes them */
enum kw_whisper_opt {
    KWO_BEAM_SIZE,        /* > 1: beam search with that many beams; 1: greedy */
    KWO_BEST_OF,          /* samples per fallback temperature above 0 */
    KWO_TEMPERATURE,      /* the first temperature */
    KWO_TEMPERATURE_INC,  /* the fallback step; 0: no fallback */
    KWO_TRANSLATE,
    KWO_NO_TIMESTAMPS,
    KWO_SINGLE_SEGMENT,
    KWO_MAX_TEXT_CTX,     /* tokens of earlier text carried as context */
    KWO_SUPPRESS_BLANK,
    KWO_SUPPRESS_NST,
    KWO_ENTROPY_THOLD,
    KWO_LOGPROB_THOLD,
    KWO_NO_SPEECH_THOLD,
    KWO_MAX_INITIAL_TS,
    KWO_LENGTH_PENALTY,
    KWO_CARRY_PROMPT,
    KWO_VAD_THRESHOLD,
    KWO_VAD_MIN_SPEECH_MS,
    KWO_VAD_MIN_SILENCE_MS,
    KWO_VAD_MAX_SPEECH_S, /* 0: no limit */
    KWO_VAD_SPEECH_PAD_MS,
    KWO_VAD_OVERLAP_S,
    KWO_COUNT
};

static void release(void * p) { kiln_whisper_free((struct kiln_whisper *) p); }

static struct kiln_whisper * get(int h, const char * fn) {
    return (struct kiln_whisper *) kw_object(h, KW_KIND_WHISPER, fn);
}

KW_EXPORT int kw_whisper_opt_count(void) { return KWO_COUNT; }

/* a whisper.cpp model file: size bytes at data, read during the call */
KW_EXPORT int kw_whisper_load(const void * data, double size) {
    if (!data || !(size > 0) || size > 4294967295.0) return kw_fail(KW_E_FORMAT, "whisper: %.0f bytes is not a model file", size);
    kiln_clear_error();
    struct kiln_whisper * w = kiln_whisper_load_mem(data, (size_t) size, 1);
    if (!w) return kw_fail_kiln(KW_E_FORMAT, NULL);
    return kw_object_new(KW_KIND_WHISPER, w, release);
}

KW_EXPORT int kw_whisper_free(int h) { return kw_object_free(h, KW_KIND_WHISPER, "whisper_free"); }

/* the header's 11 numbers (struct kiln_whisper_hparams), then multilingual (0/1) into out[0..12) */
KW_EXPORT int kw_whisper_info(int h, int32_t * out) {
    struct kiln_whisper * w = get(h, "whisper_info");
    if (!w) return KW_E_HANDLE;
    memcpy(out, kiln_whisper_get_hparams(w), sizeof(struct kiln_whisper_hparams));
    out[11] = kiln_whisper_is_multilingual(w) ? 1 : 0;
    return KW_OK;
}

struct kw_whisper_run { int job; };

static void on_segment(const struct kiln_whisper * w, int i, void * user) { (void) w; (void) user; kw_js_whisper_segment(i); }
static void on_progress(const struct kiln_whisper * w, int p, void * user) { (void) w; (void) user; kw_js_whisper_progress(p); }

static bool is_int_in(double v, double lo, double hi) { return v >= lo && v <= hi && v == (double) (int) v; }

/* n samples at rate (mono); opts: n_opts doubles (enum kw_whisper_opt); language: a code, "auto"
 * or NULL (detect); prompt: NULL or the initial prompt; vad: 0 or a VAD handle (only speech is
 * transcribed); job: the job id the abort word is compared with. Returns the segment count. */
KW_EXPORT int kw_whisper_full(int h, const float * samples, int n, int rate, const double * opts, int n_opts,
                              const char * language, const char * prompt, int vad, int job) {
    struct kiln_whisper * w = get(h, "whisper_full");
    if (!w) return KW_E_HANDLE;
    if (n_opts != KWO_COUNT || !opts) return kw_fail(KW_E_INVALID, "whisper: %d options, not %d", n_opts, KWO_COUNT);
    if (n <= 0 || !samples) return kw_fail(KW_E_INVALID, "whisper: no audio (%d samples)", n);
    if (rate < 1000 || rate > 1000000) return kw_fail(KW_E_INVALID, "whisper: sample rate %d Hz is out of range (1000..1000000)", rate);
    const double * o = opts;
    if (!is_int_in(o[KWO_BEAM_SIZE], 1, 8)) return kw_fail(KW_E_INVALID, "whisper: beamSize %g must be an integer in 1..8", o[KWO_BEAM_SIZE]);
    if (!is_int_in(o[KWO_BEST_OF], 1, 8)) return kw_fail(KW_E_INVALID, "whisper: bestOf %g must be an integer in 1..8", o[KWO_BEST_OF]);
    if (!(o[KWO_TEMPERATURE] >= 0 && o[KWO_TEMPERATURE] <= 1)) return kw_fail(KW_E_INVALID, "whisper: temperature %g must be in 0..1", o[KWO_TEMPERATURE]);
    if (!(o[KWO_TEMPERATURE_INC] >= 0 && o[KWO_TEMPERATURE_INC] <= 1)) return kw_fail(KW_E_INVALID, "whisper: temperatureInc %g must be in 0..1", o[KWO_TEMPERATURE_INC]);
    if (!is_int_in(o[KWO_MAX_TEXT_CTX], 0, 16384)) return kw_fail(KW_E_INVALID, "whisper: maxTextContext %g must be an integer in 0..16384", o[KWO_MAX_TEXT_CTX]);
    if (language && language[0] && strcmp(language, "auto") != 0 && kiln_whisper_lang_id(language) < 0)
        return kw_fail(KW_E_INVALID, "whisper: unknown language '%s'", language);
    if (!kw_threadpool() && kw_init(1) < 0) return KW_E_NOMEM;

    struct kiln_whisper_params p = kiln_whisper_default_params();
    const int beam = (int) o[KWO_BEAM_SIZE];
    p.strategy = beam > 1 ? KILN_WHISPER_BEAM_SEARCH : KILN_WHISPER_GREEDY;
    p.beam_size = beam;
    p.best_of = (int) o[KWO_BEST_OF];
    p.temperature = (float) o[KWO_TEMPERATURE];
    p.temperature_inc = (float) o[KWO_TEMPERATURE_INC];
    p.translate = o[KWO_TRANSLATE] != 0;
    p.no_timestamps = o[KWO_NO_TIMESTAMPS] != 0;
    p.single_segment = o[KWO_SINGLE_SEGMENT] != 0;
    p.n_max_text_ctx = (int) o[KWO_MAX_TEXT_CTX];
    p.suppress_blank = o[KWO_SUPPRESS_BLANK] != 0;
    p.suppress_nst = o[KWO_SUPPRESS_NST] != 0;
    p.entropy_thold = (float) o[KWO_ENTROPY_THOLD];
    p.logprob_thold = (float) o[KWO_LOGPROB_THOLD];
    p.no_speech_thold = (float) o[KWO_NO_SPEECH_THOLD];
    p.max_initial_ts = (float) o[KWO_MAX_INITIAL_TS];
    p.length_penalty = (float) o[KWO_LENGTH_PENALTY];
    p.carry_initial_prompt = o[KWO_CARRY_PROMPT] != 0;
    p.language = language && language[0] ? language : "auto";
    p.initial_prompt = prompt && prompt[0] ? prompt : NULL;
    if (vad) {
        p.vad_model = kw_vad_model(vad);
        if (!p.vad_model) return KW_E_HANDLE;
        p.vad = true;
        p.vad_params.threshold = (float) o[KWO_VAD_THRESHOLD];
        p.vad_params.min_speech_ms = (int) o[KWO_VAD_MIN_SPEECH_MS];
        p.vad_params.min_silence_ms = (int) o[KWO_VAD_MIN_SILENCE_MS];
        if (o[KWO_VAD_MAX_SPEECH_S] > 0) p.vad_params.max_speech_s = (float) o[KWO_VAD_MAX_SPEECH_S];
        p.vad_params.speech_pad_ms = (int) o[KWO_VAD_SPEECH_PAD_MS];
        p.vad_params.samples_overlap = (float) o[KWO_VAD_OVERLAP_S];
    }
    p.n_threads = kw_n_threads();
    p.threadpool = kw_threadpool();
    p.on_segment = on_segment;
    p.on_progress = on_progress;
    p.abort_callback = kw_job_aborted;
    p.abort_callback_data = (void *) (intptr_t) job;

    int64_t m = n;
    float * x = (float *) samples;
    if (rate != KILN_WHISPER_SAMPLE_RATE) {
        x = kiln_resample(samples, n, rate, KILN_WHISPER_SAMPLE_RATE, &m);
        if (!x) return kw_fail_kiln(KW_E_INVALID, "whisper");
    }
    kiln_clear_error();
    const int rc = kiln_whisper_full(w, &p, x, m);
    if (x != samples) free(x);
    if (rc != 0) {
        if (job != 0 && kw_job_aborted(p.abort_callback_data)) return kw_fail(KW_E_ABORTED, "transcription aborted");
        return kw_fail_kiln(KW_E_FAILED, NULL);
    }
    return kiln_whisper_n_segments(w);
}

static const struct kiln_whisper_segment * seg(int h, int i, const char * fn) {
    struct kiln_whisper * w = get(h, fn);
    if (!w) return NULL;
    const struct kiln_whisper_segment * s = i >= 0 && i < kiln_whisper_n_segments(w) ? kiln_whisper_get_segment(w, i) : NULL;
    if (!s) kw_fail(KW_E_INVALID, "%s: no segment %d", fn, i);
    return s;
}

/* segment i of the last kw_whisper_full: t0, t1 (centiseconds), no_speech_prob, token count into out[0..4) */
KW_EXPORT int kw_whisper_segment(int h, int i, double * out) {
    const struct kiln_whisper_segment * s = seg(h, i, "whisper_segment");
    if (!s) return KW_E_INVALID;
    out[0] = (double) s->t0; out[1] = (double) s->t1; out[2] = s->no_speech_prob; out[3] = s->n_tokens;
    return KW_OK;
}

KW_EXPORT const char * kw_whisper_segment_text(int h, int i) {
    const struct kiln_whisper_segment * s = seg(h, i, "whisper_segment_text");
    return s ? s->text : NULL;
}

KW_EXPORT const void * kw_whisper_segment_tokens(int h, int i) {
    const struct kiln_whisper_segment * s = seg(h, i, "whisper_segment_tokens");
    return s ? s->tokens : NULL;
}

/* a token's text: its bytes at the returned address, kw_whisper_token_len() of them */
KW_EXPORT const char * kw_whisper_token_text(int h, int id) {
    struct kiln_whisper * w = get(h, "whisper_token_text");
    size_t len;
    return w ? kiln_whisper_token_text(w, id, &len) : NULL;
}

KW_EXPORT int kw_whisper_token_len(int h, int id) {
    struct kiln_whisper * w = get(h, "whisper_token_len");
    if (!w) return KW_E_HANDLE;
    size_t len = 0;
    if (!kiln_whisper_token_text(w, id, &len)) return kw_fail(KW_E_INVALID, "whisper: token %d out of range", id);
    return (int) len;
}

/* the language of the last kw_whisper_full (its id; the code from kw_whisper_lang_str) */
KW_EXPORT int kw_whisper_lang(int h) {
    struct kiln_whisper * w = get(h, "whisper_lang");
    return w ? kiln_whisper_full_lang_id(w) : KW_E_HANDLE;
}

KW_EXPORT const char * kw_whisper_lang_str(int id) { return kiln_whisper_lang_str(id); }
KW_EXPORT int kw_whisper_lang_count(void) { return kiln_whisper_lang_max_id() + 1; }

/* the detection probabilities of the last kw_whisper_full (kw_whisper_lang_count() floats; zeros
 * when the language was given) */
KW_EXPORT const float * kw_whisper_lang_probs(int h) {
    struct kiln_whisper * w = get(h, "whisper_lang_probs");
    return w ? kiln_whisper_full_lang_probs(w) : NULL;
}
