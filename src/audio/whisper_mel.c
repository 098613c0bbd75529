/*
 * whisper_mel.c — whisper.cpp's log-mel spectrogram: its steps, in double
 * precision up to the stored float (whisper.cpp runs its FFT in float, whose
 * rounding moves low-energy mel bins by up to ~1e-4; this is within ~1e-6 of
 * the exact spectrum):
 *
 *  - the samples get 200 reflected samples in front (the mirror of
 *    samples[1..200]), and 30 s + 200 zeros behind;
 *  - n_len = (padded length - 400) / 160 frames; frame i starts at 160 i;
 *    frames past the audio (i > (n + 200) / 160) are log10(1e-10) directly;
 *  - each frame: periodic Hann window, a mixed-radix FFT (radix-2 splits
 *    down to an odd size, then a direct DFT) with a 400-entry sin/cos
 *    table, power |X|^2 of bins 0..200, the filterbank dot product,
 *    log10(max(sum, 1e-10));
 *  - clamp to (max - 8), then (x + 4) / 4.
 */
#include "kiln-whisper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N_FFT KILN_WHISPER_N_FFT

struct mel_tables { double sin_v[N_FFT], cos_v[N_FFT], hann[N_FFT]; };

static void tables_init(struct mel_tables * t) {
    for (int i = 0; i < N_FFT; i++) {
        const double theta = (2 * M_PI * i) / N_FFT;
        t->sin_v[i] = sin(theta);
        t->cos_v[i] = cos(theta);
        t->hann[i] = 0.5 * (1.0 - cos(theta));
    }
}

static void dft(const struct mel_tables * t, const double * in, int N, double * out) {
    const int step = N_FFT / N;
    for (int k = 0; k < N; k++) {
        double re = 0, im = 0;
        for (int n = 0; n < N; n++) {
            const int idx = (k * n * step) % N_FFT;
            re += in[n] * t->cos_v[idx];
            im -= in[n] * t->sin_v[idx];
        }
        out[2 * k] = re;
        out[2 * k + 1] = im;
    }
}

/* in needs 2N floats of room (the upper half is scratch), out 8N */
static void fft(const struct mel_tables * t, double * in, int N, double * out) {
    if (N == 1) { out[0] = in[0]; out[1] = 0; return; }
    const int h = N / 2;
    if (N - h * 2 == 1) { dft(t, in, N, out); return; }
    double * even = in + N;
    for (int i = 0; i < h; i++) even[i] = in[2 * i];
    double * even_fft = out + 2 * N;
    fft(t, even, h, even_fft);
    double * odd = even;
    for (int i = 0; i < h; i++) odd[i] = in[2 * i + 1];
    double * odd_fft = even_fft + N;
    fft(t, odd, h, odd_fft);
    const int step = N_FFT / N;
    for (int k = 0; k < h; k++) {
        const double re = t->cos_v[k * step], im = -t->sin_v[k * step];
        const double ro = odd_fft[2 * k], io = odd_fft[2 * k + 1];
        out[2 * k]           = even_fft[2 * k] + re * ro - im * io;
        out[2 * k + 1]       = even_fft[2 * k + 1] + re * io + im * ro;
        out[2 * (k + h)]     = even_fft[2 * k] - re * ro + im * io;
        out[2 * (k + h) + 1] = even_fft[2 * k + 1] - re * io - im * ro;
    }
}

bool kiln_whisper_log_mel(const float * samples, int64_t n, const float * filters, int n_mel, int n_fft,
                          float ** mel_out, int * n_len_out, int * n_len_org) {
    if (!mel_out || !n_len_out || !filters || n < 0 || (n > 0 && !samples) || n_mel <= 0 || n_fft != 1 + N_FFT / 2 ||
        n > (int64_t) 1 << 30) {
        kiln_set_last_error("whisper: bad arguments to kiln_whisper_log_mel");
        return false;
    }
    const int64_t pad1 = (int64_t) KILN_WHISPER_SAMPLE_RATE * KILN_WHISPER_CHUNK_S, pad2 = N_FFT / 2;
    const int64_t np = n + pad1 + 2 * pad2;
    float * x = (float *) calloc((size_t) np, sizeof(float));
    const int n_len = (int) ((np - N_FFT) / KILN_WHISPER_HOP);
    float * mel = (float *) malloc((size_t) n_mel * (size_t) n_len * sizeof(float));
    struct mel_tables * t = (struct mel_tables *) malloc(sizeof *t);
    if (!x || !mel || !t) { free(x); free(mel); free(t); kiln_set_last_error("whisper: out of memory for the mel spectrogram"); return false; }
    tables_init(t);
    if (n > 0) memcpy(x + pad2, samples, (size_t) n * sizeof(float));
    int64_t n_reflect = n - 1 < pad2 ? n - 1 : pad2;
    if (n_reflect < 0) n_reflect = 0;
    for (int64_t i = 0; i < n_reflect; i++) x[pad2 - 1 - i] = samples[1 + i];

    const int64_t n_eff = n + pad2;    /* samples counted for the "frame has audio" bound, as whisper.cpp */
    double fin[2 * N_FFT], fout[8 * N_FFT];
    const int64_t n_audio_frames = n_eff / KILN_WHISPER_HOP + 1 < n_len ? n_eff / KILN_WHISPER_HOP + 1 : n_len;
    for (int64_t i = 0; i < n_audio_frames; i++) {
        const int64_t off = i * KILN_WHISPER_HOP;
        const int64_t m = n_eff - off < N_FFT ? n_eff - off : N_FFT;
        for (int64_t j = 0; j < m; j++) fin[j] = t->hann[j] * x[off + j];
        for (int64_t j = m > 0 ? m : 0; j < 2 * N_FFT; j++) fin[j] = 0.0f;
        fft(t, fin, N_FFT, fout);
        for (int j = 0; j < n_fft; j++) fout[j] = fout[2 * j] * fout[2 * j] + fout[2 * j + 1] * fout[2 * j + 1];
        for (int j = 0; j < n_mel; j++) {
            const float * fl = filters + (size_t) j * n_fft;
            double sum = 0.0;
            for (int k = 0; k < n_fft; k++) sum += fout[k] * fl[k];
            mel[(size_t) j * n_len + i] = (float) log10(sum > 1e-10 ? sum : 1e-10);
        }
    }
    const float silent = (float) log10(1e-10);
    for (int j = 0; j < n_mel; j++) for (int64_t i = n_audio_frames; i < n_len; i++) mel[(size_t) j * n_len + i] = silent;

    double mmax = -1e20;
    const size_t total = (size_t) n_mel * n_len;
    for (size_t i = 0; i < total; i++) if (mel[i] > mmax) mmax = mel[i];
    mmax -= 8.0;
    for (size_t i = 0; i < total; i++) {
        const float v = mel[i] < mmax ? (float) mmax : mel[i];
        mel[i] = (float) (((double) v + 4.0) / 4.0);
    }
    free(x); free(t);
    *mel_out = mel;
    *n_len_out = n_len;
    if (n_len_org) *n_len_org = (int) (1 + (n + pad2 - N_FFT) / KILN_WHISPER_HOP);
    return true;
}
