/*
 * bench/vad.c — Silero VAD speed: the time to compute the speech
 * probabilities of a recording (all 512-sample windows, state carried) on
 * one thread, as a real-time factor (compute time / audio duration; smaller
 * is faster). Prints one JSON line per run set.
 *
 *   bench-vad MODEL AUDIO.wav [SECONDS=60] [REPEATS=5]
 *
 * The audio is tiled (or cut) to SECONDS at 16 kHz. Natively and as wasm
 * (node build-wasm-st/bin/bench-vad.js ...).
 */
#include "kiln-audio.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char ** argv) {
    if (argc < 3) { fprintf(stderr, "usage: bench-vad MODEL AUDIO.wav [SECONDS] [REPEATS]\n"); return 2; }
    const double seconds = argc > 3 ? atof(argv[3]) : 60.0;
    const int repeats = argc > 4 ? atoi(argv[4]) : 5;
    double t0 = now_s();
    struct kiln_vad * vad = kiln_vad_load_file(argv[1], 1);
    const double load_ms = (now_s() - t0) * 1e3;
    if (!vad) { fprintf(stderr, "bench-vad: %s\n", kiln_last_error()); return 1; }
    struct kiln_wav w;
    if (!kiln_wav_read_file(argv[2], &w)) { fprintf(stderr, "bench-vad: %s\n", kiln_last_error()); return 1; }
    int64_t n16 = w.n_samples;
    float * x16 = w.sample_rate == 16000 ? w.samples : kiln_resample(w.samples, w.n_samples, w.sample_rate, 16000, &n16);
    if (!x16 || n16 <= 0) { fprintf(stderr, "bench-vad: no audio\n"); return 1; }
    const int64_t n = (int64_t)(seconds * 16000);
    float * x = (float *) malloc((size_t) n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = x16[i % n16];
    const int64_t nw = (n + 511) / 512;
    float * probs = (float *) malloc((size_t) nw * sizeof(float));
    kiln_vad_probs(vad, x, n < 16000 ? n : 16000, probs); /* warm-up */
    double best = 1e30, sum = 0;
    for (int r = 0; r < repeats; r++) {
        t0 = now_s();
        if (kiln_vad_probs(vad, x, n, probs) != nw) { fprintf(stderr, "bench-vad: %s\n", kiln_last_error()); return 1; }
        const double dt = now_s() - t0;
        best = dt < best ? dt : best;
        sum += dt;
    }
    int nspeech = 0;
    for (int64_t i = 0; i < nw; i++) nspeech += probs[i] >= 0.5f;
#ifdef __EMSCRIPTEN__
    const char * impl = "kiln-wasm";
#else
    const char * impl = "kiln-native";
#endif
    printf("{\"bench\":\"vad\",\"impl\":\"%s\",\"isa\":\"%s\",\"threads\":1,\"audio_s\":%.1f,\"windows\":%lld,\"load_ms\":%.2f,"
           "\"best_ms\":%.2f,\"mean_ms\":%.2f,\"rtf\":%.5f,\"x_realtime\":%.1f,\"us_per_window\":%.2f,\"speech_windows\":%d}\n",
           impl, kiln_cpu_isa(), seconds, (long long) nw, load_ms, best * 1e3, sum / repeats * 1e3, best / seconds, seconds / best,
           best * 1e6 / nw, nspeech);
    free(probs); free(x);
    if (x16 != w.samples) free(x16);
    kiln_wav_free(&w);
    kiln_vad_free(vad);
    return 0;
}
