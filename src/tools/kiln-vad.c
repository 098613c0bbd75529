/*
 * kiln-vad — voice activity detection with Silero VAD (whisper.cpp's model
 * format) on a WAV file of any rate / channel count.
 *
 *   kiln-vad -m ggml-silero-v6.2.0.bin -f audio.wav [options]
 *
 * Prints one "start end" line per speech segment, in seconds, or with
 * --probs one speech probability per 512-sample window (32 ms at 16 kHz).
 */
#include "kiln-audio.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
        "usage: kiln-vad -m MODEL -f AUDIO.wav [options]\n"
        "  --threshold T        speech probability threshold (0.5)\n"
        "  --min-speech-ms N    shortest speech segment kept (250)\n"
        "  --min-silence-ms N   silence that ends a segment (100)\n"
        "  --max-speech-s S     split segments longer than this (no limit)\n"
        "  --speech-pad-ms N    padding around segments (30)\n"
        "  --probs              print one probability per window instead of segments\n"
        "  -t N                 threads (1)\n");
}

int main(int argc, char ** argv) {
    const char * model = NULL, * audio = NULL;
    struct kiln_vad_params p = kiln_vad_default_params();
    bool probs_only = false;
    int n_threads = 1;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--probs") == 0) { probs_only = true; continue; }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) { usage(); return 0; }
        if (!v) { fprintf(stderr, "kiln-vad: %s needs a value (or is unknown)\n", a); usage(); return 2; }
        char * end = NULL;
        if (strcmp(a, "-m") == 0) model = v;
        else if (strcmp(a, "-f") == 0) audio = v;
        else if (strcmp(a, "--threshold") == 0) p.threshold = strtof(v, &end);
        else if (strcmp(a, "--min-speech-ms") == 0) p.min_speech_ms = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--min-silence-ms") == 0) p.min_silence_ms = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--max-speech-s") == 0) p.max_speech_s = strtof(v, &end);
        else if (strcmp(a, "--speech-pad-ms") == 0) p.speech_pad_ms = (int) strtol(v, &end, 10);
        else if (strcmp(a, "-t") == 0) n_threads = (int) strtol(v, &end, 10);
        else { fprintf(stderr, "kiln-vad: unknown option %s\n", a); usage(); return 2; }
        if (end && *end) { fprintf(stderr, "kiln-vad: bad number '%s' for %s\n", v, a); return 2; }
        i++;
    }
    if (!model || !audio) { usage(); return 2; }

    struct kiln_vad * vad = kiln_vad_load_file(model, n_threads);
    if (!vad) { fprintf(stderr, "kiln-vad: %s\n", kiln_last_error()); return 1; }
    struct kiln_wav wav;
    if (!kiln_wav_read_file(audio, &wav)) { fprintf(stderr, "kiln-vad: %s\n", kiln_last_error()); kiln_vad_free(vad); return 1; }
    const int sr = kiln_vad_sample_rate(vad);
    float * x = wav.samples;
    int64_t n = wav.n_samples;
    if (wav.sample_rate != sr) {
        x = kiln_resample(wav.samples, wav.n_samples, wav.sample_rate, sr, &n);
        if (!x) { fprintf(stderr, "kiln-vad: %s\n", kiln_last_error()); kiln_wav_free(&wav); kiln_vad_free(vad); return 1; }
    }
    const int w = kiln_vad_n_window(vad);
    const int64_t nw = (n + w - 1) / w;
    float * probs = (float *) malloc((size_t)(nw > 0 ? nw : 1) * sizeof(float));
    int rc = 0;
    if (!probs || kiln_vad_probs(vad, x, n, probs) < 0) {
        fprintf(stderr, "kiln-vad: %s\n", probs ? kiln_last_error() : "out of memory");
        rc = 1;
    } else if (probs_only) {
        for (int64_t i = 0; i < nw; i++) printf("%.6f\n", probs[i]);
    } else {
        const int ns = kiln_vad_segments(probs, nw, w, sr, &p, NULL, 0);
        struct kiln_vad_segment * seg = ns > 0 ? (struct kiln_vad_segment *) malloc((size_t) ns * sizeof(*seg)) : NULL;
        if (ns < 0 || (ns > 0 && !seg)) { fprintf(stderr, "kiln-vad: %s\n", kiln_last_error()); rc = 1; }
        else {
            kiln_vad_segments(probs, nw, w, sr, &p, seg, ns);
            for (int i = 0; i < ns; i++) printf("%.2f %.2f\n", seg[i].start_cs / 100.0, seg[i].end_cs / 100.0);
        }
        free(seg);
    }
    free(probs);
    if (x != wav.samples) free(x);
    kiln_wav_free(&wav);
    kiln_vad_free(vad);
    return rc;
}
