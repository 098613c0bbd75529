/*
 * vad_segments.c — speech segments from VAD probabilities, with the rules and
 * defaults of whisper.cpp's whisper_vad_segments_from_probs (which follow
 * silero-vad's get_speech_timestamps): hysteresis between threshold and
 * threshold - 0.15, a minimum silence to end speech, forced splits at
 * max_speech_s (at the last silence > 98 ms when there is one), merging of
 * gaps < 200 ms, dropping of segments < min_speech_ms, then padding by
 * speech_pad_ms (half the gap when two segments are closer than 2 pads).
 */
#include "kiln-audio.h"

#include <float.h>
#include <limits.h>
#include <stdlib.h>

struct kiln_vad_params kiln_vad_default_params(void) {
    struct kiln_vad_params p = { 0.5f, 250, 100, FLT_MAX, 30, 0.1f };
    return p;
}

struct span { int64_t start, end; };

static int64_t to_cs(int64_t samples, int sample_rate) {
    return (int64_t)((samples / (double) sample_rate) * 100.0 + 0.5);
}

int kiln_vad_segments(const float * probs, int64_t n_probs, int n_window, int sample_rate,
                      const struct kiln_vad_params * params, struct kiln_vad_segment * out, int max_out) {
    const struct kiln_vad_params p = params ? *params : kiln_vad_default_params();
    if ((!probs && n_probs > 0) || n_probs < 0 || n_window <= 0 || sample_rate <= 0 || (!out && max_out > 0)) {
        kiln_set_last_error("vad: bad arguments to kiln_vad_segments");
        return -1;
    }
    const int64_t sr = sample_rate;
    const int64_t min_silence = sr * p.min_silence_ms / 1000;
    const int64_t audio_len = n_probs * (int64_t) n_window;
    const int64_t min_speech = sr * p.min_speech_ms / 1000;
    const int64_t pad = sr * p.speech_pad_ms / 1000;
    int64_t max_speech;
    if (!(p.max_speech_s <= 100000.0f)) {
        max_speech = INT_MAX / 2;
    } else {
        max_speech = sr * (int64_t) p.max_speech_s - n_window - 2 * pad;
        if (max_speech < 0 || max_speech > INT_MAX) max_speech = INT_MAX / 2;
    }
    const int64_t silence_at_max = sr * 98 / 1000;
    float neg = p.threshold - 0.15f;
    if (neg < 0.01f) neg = 0.01f;

    /* at most one segment starts per window */
    struct span * sp = (struct span *) malloc((size_t)(n_probs + 1) * sizeof(struct span));
    if (!sp) { kiln_set_last_error("vad: out of memory"); return -1; }
    int n = 0;
    bool in_speech = false, has_cur = false;
    int64_t temp_end = 0, prev_end = 0, next_start = 0, cur_start = 0;
    for (int64_t i = 0; i < n_probs; i++) {
        const float pr = probs[i];
        const int64_t s = (int64_t) n_window * i;
        if (pr >= p.threshold && temp_end) {
            temp_end = 0;
            if (next_start < prev_end) next_start = s;
        }
        if (pr >= p.threshold && !in_speech) {
            in_speech = true; cur_start = s; has_cur = true;
            continue;
        }
        if (in_speech && s - cur_start > max_speech) {
            if (prev_end) {
                sp[n++] = (struct span){ cur_start, prev_end };
                has_cur = true;
                if (next_start < prev_end) { in_speech = false; has_cur = false; }
                else cur_start = next_start;
                prev_end = next_start = temp_end = 0;
            } else {
                sp[n++] = (struct span){ cur_start, s };
                prev_end = next_start = temp_end = 0;
                in_speech = false; has_cur = false;
                continue;
            }
        }
        if (pr < neg && in_speech) {
            if (!temp_end) temp_end = s;
            if (s - temp_end > silence_at_max) prev_end = temp_end;
            if (s - temp_end < min_silence) continue;
            if (temp_end - cur_start > min_speech) sp[n++] = (struct span){ cur_start, temp_end };
            prev_end = next_start = temp_end = 0;
            in_speech = false; has_cur = false;
            continue;
        }
    }
    if (has_cur && audio_len - cur_start > min_speech) sp[n++] = (struct span){ cur_start, audio_len };

    /* merge gaps under 200 ms */
    const int64_t merge_gap = sr * 200 / 1000;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && sp[i].start - sp[m - 1].end < merge_gap) sp[m - 1].end = sp[i].end;
        else sp[m++] = sp[i];
    }
    n = m;
    m = 0;
    for (int i = 0; i < n; i++) if (sp[i].end - sp[i].start >= min_speech) sp[m++] = sp[i];
    n = m;

    for (int i = 0; i < n; i++) {
        if (i == 0) sp[i].start = sp[i].start > pad ? sp[i].start - pad : 0;
        if (i < n - 1) {
            const int64_t gap = sp[i + 1].start - sp[i].end;
            if (gap < 2 * pad) {
                sp[i].end += gap / 2;
                sp[i + 1].start = sp[i + 1].start > gap / 2 ? sp[i + 1].start - gap / 2 : 0;
            } else {
                sp[i].end = sp[i].end + pad < audio_len ? sp[i].end + pad : audio_len;
                sp[i + 1].start = sp[i + 1].start > pad ? sp[i + 1].start - pad : 0;
            }
        } else {
            sp[i].end = sp[i].end + pad < audio_len ? sp[i].end + pad : audio_len;
        }
        if (i < max_out) {
            out[i].start = sp[i].start;
            out[i].end = sp[i].end;
            out[i].start_cs = to_cs(sp[i].start, sample_rate);
            out[i].end_cs = to_cs(sp[i].end, sample_rate);
        }
    }
    free(sp);
    return n;
}
