/*
 * kiln_wasm_audio.c — Silero VAD for JS (kiln.loadVad, js/src/vad.ts).
 *
 * A VAD handle owns the model, a streaming resampler to 16 kHz and the
 * samples of a window in progress, so JS may push chunks of any size at any
 * rate. Results are left in the handle's buffers and read by JS from wasm
 * memory: kw_vad_probs_ptr() (float per window), kw_vad_segments_ptr()
 * (int32 start_cs, end_cs, start_sample, end_sample per segment).
 *
 * Handles are this file's own table (kind 0x5 << 24, a generation above the
 * slot), separate from kiln_wasm.c's. Nothing aborts: failures are KW_E_*
 * codes with a message in kw_last_error().
 */
#include "kiln_wasm_internal.h"
#include "kiln-audio.h"

#include <stdlib.h>
#include <string.h>

#define KV_MAX 16
#define KV_KIND 5

struct kv_vad {
    struct kiln_vad * vad;
    struct kiln_resampler * rs;  /* the stream's, NULL outside a stream */
    float * win;                 /* the window being filled (n_window) */
    int     win_len;
    float * probs;  int64_t probs_cap;
    int32_t * segs; int     segs_cap;
};

struct kv_slot { int gen; struct kv_vad * v; };
static struct kv_slot g_vads[KV_MAX];

static struct kv_vad * kv_get(int h, const char * fn) {
    const int i = (h & 0xff) - 1;
    if (h <= 0 || (h >> 24) != KV_KIND || i < 0 || i >= KV_MAX || !g_vads[i].v || g_vads[i].gen != ((h >> 8) & 0xffff)) {
        kw_fail(KW_E_HANDLE, "%s: not a live VAD handle", fn);
        return NULL;
    }
    return g_vads[i].v;
}

static bool kv_reserve(struct kv_vad * v, int64_t n) {
    if (n <= v->probs_cap) return true;
    float * p = (float *) realloc(v->probs, (size_t) n * sizeof(float));
    if (!p) return false;
    v->probs = p; v->probs_cap = n;
    return true;
}

KW_EXPORT int kw_vad_load(const void * data, int size) {
    int slot = -1;
    for (int i = 0; i < KV_MAX; i++) if (!g_vads[i].v) { slot = i; break; }
    if (slot < 0) return kw_fail(KW_E_NOMEM, "vad: too many live VAD models (%d)", KV_MAX);
    struct kv_vad * v = (struct kv_vad *) calloc(1, sizeof(*v));
    if (!v) return kw_fail(KW_E_NOMEM, "vad: out of memory");
    v->vad = kiln_vad_load_mem(data, size > 0 ? (size_t) size : 0, 1);
    if (!v->vad) { free(v); return kw_fail_kiln(KW_E_FORMAT, "vad"); }
    v->win = (float *) calloc((size_t) kiln_vad_n_window(v->vad), sizeof(float));
    if (!v->win) { kiln_vad_free(v->vad); free(v); return kw_fail(KW_E_NOMEM, "vad: out of memory"); }
    g_vads[slot].gen = (g_vads[slot].gen + 1) & 0xffff;
    g_vads[slot].v = v;
    return (KV_KIND << 24) | (g_vads[slot].gen << 8) | (slot + 1);
}

KW_EXPORT int kw_vad_free(int h) {
    struct kv_vad * v = kv_get(h, "vad_free");
    if (!v) return KW_E_HANDLE;
    kiln_resampler_free(v->rs);
    kiln_vad_free(v->vad);
    free(v->win); free(v->probs); free(v->segs); free(v);
    g_vads[(h & 0xff) - 1].v = NULL;
    return KW_OK;
}

struct kiln_vad * kw_vad_model(int h) { struct kv_vad * v = kv_get(h, "whisper: vad"); return v ? v->vad : NULL; }

KW_EXPORT float *   kw_vad_probs_ptr(int h)    { struct kv_vad * v = kv_get(h, "vad_probs_ptr"); return v ? v->probs : NULL; }
KW_EXPORT int32_t * kw_vad_segments_ptr(int h) { struct kv_vad * v = kv_get(h, "vad_segments_ptr"); return v ? v->segs : NULL; }
KW_EXPORT int       kw_vad_n_window(int h)     { struct kv_vad * v = kv_get(h, "vad_n_window"); return v ? kiln_vad_n_window(v->vad) : KW_E_HANDLE; }

/* probabilities of a whole recording (n samples at rate, mono): the state
 * starts from zero and the last window is zero-padded, as whisper.cpp does.
 * Returns the window count. */
KW_EXPORT int kw_vad_detect(int h, const float * samples, int n, int rate) {
    struct kv_vad * v = kv_get(h, "vad_detect");
    if (!v) return KW_E_HANDLE;
    if (n < 0 || (!samples && n > 0)) return kw_fail(KW_E_INVALID, "vad_detect: bad samples");
    const int sr = kiln_vad_sample_rate(v->vad);
    int64_t m = n;
    float * x = (float *) samples;
    if (rate != sr) {
        x = kiln_resample(samples, n, rate, sr, &m);
        if (!x) return kw_fail_kiln(KW_E_INVALID, "vad_detect");
    }
    const int w = kiln_vad_n_window(v->vad);
    const int64_t nw = (m + w - 1) / w;
    int rc = (int) nw;
    if (!kv_reserve(v, nw > 0 ? nw : 1)) rc = kw_fail(KW_E_NOMEM, "vad_detect: out of memory");
    else if (kiln_vad_probs(v->vad, x, m, v->probs) < 0) rc = kw_fail_kiln(KW_E_FAILED, "vad_detect");
    if (x != samples) free(x);
    return rc;
}

/* whisper.cpp's segments of the first n_probs probabilities in the buffer */
KW_EXPORT int kw_vad_segments(int h, int n_probs, float threshold, int min_speech_ms, int min_silence_ms,
                              float max_speech_s, int speech_pad_ms) {
    struct kv_vad * v = kv_get(h, "vad_segments");
    if (!v) return KW_E_HANDLE;
    if (n_probs < 0 || n_probs > v->probs_cap) return kw_fail(KW_E_INVALID, "vad_segments: %d probabilities, %lld held", n_probs, (long long) v->probs_cap);
    struct kiln_vad_params p = kiln_vad_default_params();
    p.threshold = threshold; p.min_speech_ms = min_speech_ms; p.min_silence_ms = min_silence_ms;
    p.max_speech_s = max_speech_s > 0 ? max_speech_s : p.max_speech_s; p.speech_pad_ms = speech_pad_ms;
    const int w = kiln_vad_n_window(v->vad), sr = kiln_vad_sample_rate(v->vad);
    const int ns = kiln_vad_segments(v->probs, n_probs, w, sr, &p, NULL, 0);
    if (ns < 0) return kw_fail_kiln(KW_E_INVALID, "vad_segments");
    struct kiln_vad_segment * s = (struct kiln_vad_segment *) malloc((size_t)(ns > 0 ? ns : 1) * sizeof(*s));
    if (ns * 4 > v->segs_cap) {
        int32_t * q = (int32_t *) realloc(v->segs, (size_t)(ns * 4) * sizeof(int32_t));
        if (q) { v->segs = q; v->segs_cap = ns * 4; }
    }
    if (!s || ns * 4 > v->segs_cap) { free(s); return kw_fail(KW_E_NOMEM, "vad_segments: out of memory"); }
    kiln_vad_segments(v->probs, n_probs, w, sr, &p, s, ns);
    for (int i = 0; i < ns; i++) {
        v->segs[4 * i + 0] = (int32_t) s[i].start_cs; v->segs[4 * i + 1] = (int32_t) s[i].end_cs;
        v->segs[4 * i + 2] = (int32_t) s[i].start;    v->segs[4 * i + 3] = (int32_t) s[i].end;
    }
    free(s);
    return ns;
}

/* a stream of samples at rate: the LSTM state starts from zero */
KW_EXPORT int kw_vad_stream_begin(int h, int rate) {
    struct kv_vad * v = kv_get(h, "vad_stream_begin");
    if (!v) return KW_E_HANDLE;
    kiln_resampler_free(v->rs);
    v->rs = kiln_resampler_new(rate, kiln_vad_sample_rate(v->vad));
    if (!v->rs) return kw_fail_kiln(KW_E_INVALID, "vad_stream_begin");
    kiln_vad_reset(v->vad);
    v->win_len = 0;
    return KW_OK;
}

static int kv_feed(struct kv_vad * v, const float * y, int64_t m, bool last) {
    const int w = kiln_vad_n_window(v->vad);
    const int64_t most = (v->win_len + m + w - 1) / w + 1;
    if (!kv_reserve(v, most)) return kw_fail(KW_E_NOMEM, "vad: out of memory");
    int np = 0;
    for (int64_t i = 0; i < m;) {
        int64_t take = w - v->win_len;
        if (take > m - i) take = m - i;
        memcpy(v->win + v->win_len, y + i, (size_t) take * sizeof(float));
        v->win_len += (int) take;
        i += take;
        if (v->win_len == w) {
            if (!kiln_vad_process_window(v->vad, v->win, &v->probs[np++])) return kw_fail_kiln(KW_E_FAILED, "vad");
            v->win_len = 0;
        }
    }
    if (last && v->win_len > 0) {
        memset(v->win + v->win_len, 0, (size_t)(w - v->win_len) * sizeof(float));
        if (!kiln_vad_process_window(v->vad, v->win, &v->probs[np++])) return kw_fail_kiln(KW_E_FAILED, "vad");
        v->win_len = 0;
    }
    return np;
}

/* n more samples of the stream; returns how many windows completed (their
 * probabilities are at kw_vad_probs_ptr) */
KW_EXPORT int kw_vad_stream_push(int h, const float * samples, int n) {
    struct kv_vad * v = kv_get(h, "vad_stream_push");
    if (!v) return KW_E_HANDLE;
    if (!v->rs) return kw_fail(KW_E_INVALID, "vad_stream_push: no stream begun");
    if (n < 0 || (!samples && n > 0)) return kw_fail(KW_E_INVALID, "vad_stream_push: bad samples");
    const float * y;
    const int64_t m = kiln_resampler_push(v->rs, samples, n, &y);
    if (m < 0) return kw_fail_kiln(KW_E_NOMEM, "vad_stream_push");
    return kv_feed(v, y, m, false);
}

/* the end of the stream: the resampler's tail and the last partial window
 * (zero-padded, as in whisper.cpp) */
KW_EXPORT int kw_vad_stream_end(int h) {
    struct kv_vad * v = kv_get(h, "vad_stream_end");
    if (!v) return KW_E_HANDLE;
    if (!v->rs) return kw_fail(KW_E_INVALID, "vad_stream_end: no stream begun");
    const float * y;
    const int64_t m = kiln_resampler_flush(v->rs, &y);
    const int np = m < 0 ? kw_fail_kiln(KW_E_NOMEM, "vad_stream_end") : kv_feed(v, y, m, true);
    kiln_resampler_free(v->rs);
    v->rs = NULL;
    return np;
}
