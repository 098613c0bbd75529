/*
 * kiln-audio.h — audio input and voice activity detection, built on the
 * public API (kiln.h).
 *
 *  - WAV reading: RIFF/WAVE with PCM 16/24/32-bit or IEEE float32 samples
 *    (WAVE_FORMAT_EXTENSIBLE too), any channel count (mixed down to mono),
 *    any sample rate.
 *  - Resampling: a windowed-sinc (Kaiser) polyphase resampler for rational
 *    rate ratios; the passband ends at 0.91 x the lower Nyquist frequency and
 *    the stopband (from that Nyquist frequency on) is attenuated > 80 dB.
 *  - Silero VAD v5/v6 in whisper.cpp's model format (the ggml-silero-*.bin
 *    files): one speech probability per 512-sample window at 16 kHz, the LSTM
 *    state carried from window to window, and whisper.cpp's rules for
 *    turning probabilities into speech segments.
 *
 * Errors: functions return NULL / false / -1 and set kiln_last_error().
 */
#ifndef KILN_AUDIO_H
#define KILN_AUDIO_H

#include "kiln.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ WAV */

struct kiln_wav {
    float * samples;     /* mono (channels averaged), in [-1, 1]; free with kiln_wav_free */
    int64_t n_samples;   /* per channel */
    int     sample_rate;
    int     n_channels;  /* in the file */
    int     bits;        /* bits per sample in the file */
    bool    is_float;    /* float samples in the file */
};

bool kiln_wav_read_mem (const void * data, size_t size, struct kiln_wav * out);
bool kiln_wav_read_file(const char * path, struct kiln_wav * out);
void kiln_wav_free(struct kiln_wav * wav);

/* ------------------------------------------------------------ resampler */

/* Number of output samples kiln_resample() produces for n input samples. */
int64_t kiln_resample_len(int64_t n, int rate_in, int rate_out);
/* Resamples x (n samples at rate_in) to rate_out; the output has
 * kiln_resample_len() samples (malloc'ed; free()). Output sample j sits at
 * input time j * rate_in / rate_out; outside the input the signal is zero. */
float * kiln_resample(const float * x, int64_t n, int rate_in, int rate_out, int64_t * n_out);

/* The same resampler fed in pieces (a stream): push() returns how many
 * output samples are ready (their filter support is complete) and points
 * *out at them (valid until the next call); flush() ends the stream (the
 * input beyond the end counts as zero). Pieces of any size give the same
 * samples as kiln_resample() on the whole. */
struct kiln_resampler;
struct kiln_resampler * kiln_resampler_new(int rate_in, int rate_out);
int64_t kiln_resampler_push (struct kiln_resampler * r, const float * x, int64_t n, const float ** out);
int64_t kiln_resampler_flush(struct kiln_resampler * r, const float ** out);
void    kiln_resampler_free (struct kiln_resampler * r);

/* The resampler's impulse response h(t), t in input samples, for the ratio
 * rate_in -> rate_out (what the polyphase table holds at t = phase offsets);
 * exposed so tests can compute the same filter in double precision. */
double kiln_resample_kernel(double t, int rate_in, int rate_out);
/* half-width of the kernel in input samples */
double kiln_resample_kernel_halfwidth(int rate_in, int rate_out);

/* ------------------------------------------------------------------ VAD */

struct kiln_vad;

/* The model from whisper.cpp's Silero VAD file (bytes or path); n_threads
 * for the graph (1 is fastest for this small model). The file's STFT basis
 * and convolution kernels may be f16 (whisper.cpp's files; computed as
 * whisper.cpp does) or f32 (computed in f32 throughout). */
struct kiln_vad * kiln_vad_load_mem (const void * data, size_t size, int n_threads);
struct kiln_vad * kiln_vad_load_file(const char * path, int n_threads);
void kiln_vad_free(struct kiln_vad * vad);

int         kiln_vad_n_window   (const struct kiln_vad * vad); /* samples per window (512) */
int         kiln_vad_sample_rate(const struct kiln_vad * vad); /* 16000 */
const char * kiln_vad_model_type(const struct kiln_vad * vad); /* "silero-16k" */

/* Zeroes the LSTM state (the start of a new stream). */
void kiln_vad_reset(struct kiln_vad * vad);
/* One window of n_window samples at 16 kHz -> speech probability; the state
 * carries over to the next call. false on a compute error. */
bool kiln_vad_process_window(struct kiln_vad * vad, const float * window, float * prob);
/* Resets the state, then one probability per window of samples (the last
 * window zero-padded), like whisper.cpp's whisper_vad_detect_speech.
 * probs must hold ceil(n / n_window) floats. Returns that count or -1. */
int64_t kiln_vad_probs(struct kiln_vad * vad, const float * samples, int64_t n, float * probs);

/* whisper.cpp's whisper_vad_params, with its defaults */
struct kiln_vad_params {
    float threshold;            /* 0.5 */
    int   min_speech_ms;        /* 250 */
    int   min_silence_ms;       /* 100 */
    float max_speech_s;         /* FLT_MAX: no limit */
    int   speech_pad_ms;        /* 30 */
    float samples_overlap;      /* 0.1 s; used when joining segments' audio, not by the segmenter */
};
struct kiln_vad_params kiln_vad_default_params(void);

struct kiln_vad_segment {
    int64_t start_cs, end_cs;   /* centiseconds, rounded like whisper.cpp */
    int64_t start, end;         /* sample indices at 16 kHz (after padding) */
};

/* whisper.cpp's segmentation of n_probs window probabilities (n_window
 * samples per window at sample_rate). Writes at most max_out segments and
 * returns the total count (may exceed max_out), or -1. */
int kiln_vad_segments(const float * probs, int64_t n_probs, int n_window, int sample_rate,
                      const struct kiln_vad_params * params, struct kiln_vad_segment * out, int max_out);

#ifdef __cplusplus
}
#endif

#endif
