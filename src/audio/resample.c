/*
 * resample.c — windowed-sinc resampler (see kiln-audio.h).
 *
 * Output sample j sits at input time t = j * M / L (L/M = rate_out/rate_in
 * in lowest terms), so only L distinct fractional offsets occur: the kernel
 * is tabulated once per phase (polyphase) and each output is one dot
 * product of 2W taps. The kernel is a sinc low-pass at fc cycles per input
 * sample under a Kaiser window (beta 8: ~80 dB stopband), cut off midway
 * through a transition band from 0.91 to 1.0 of the lower Nyquist frequency.
 */
#include "kiln-audio.h"

#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#define KAISER_BETA 8.0
#define PASS_EDGE   0.91   /* passband end, fraction of the lower Nyquist frequency */
/* Kaiser's length estimate for 80 dB: N = (80 - 8) / (2.285 * 2 pi * dF) taps,
 * dF the transition width in cycles per sample */
#define ATTEN_DB    80.0
#define TABLE_MAX   (1 << 24) /* floats; beyond this the kernel is evaluated per tap */

static double bessel_i0(double x) {
    double sum = 1.0, term = 1.0;
    const double q = x * x / 4.0;
    for (int k = 1; k < 64; k++) {
        term *= q / ((double) k * k);
        sum += term;
        if (term < sum * 1e-17) break;
    }
    return sum;
}

static double ratio_of(int rate_in, int rate_out) {
    return rate_out < rate_in ? (double) rate_out / rate_in : 1.0;
}

double kiln_resample_kernel_halfwidth(int rate_in, int rate_out) {
    const double r = ratio_of(rate_in, rate_out);
    const double dF = (1.0 - PASS_EDGE) * 0.5 * r;
    const double n = (ATTEN_DB - 8.0) / (2.285 * 2.0 * M_PI * dF);
    return 0.5 * n;
}

double kiln_resample_kernel(double t, int rate_in, int rate_out) {
    const double r = ratio_of(rate_in, rate_out);
    const double fc = 0.5 * r * (1.0 + PASS_EDGE) / 2.0; /* cycles per input sample */
    const double hw = kiln_resample_kernel_halfwidth(rate_in, rate_out);
    const double u = t / hw;
    if (u <= -1.0 || u >= 1.0) return 0.0;
    const double x = 2.0 * fc * t;
    const double sinc = fabs(x) < 1e-12 ? 1.0 : sin(M_PI * x) / (M_PI * x);
    return 2.0 * fc * sinc * bessel_i0(KAISER_BETA * sqrt(1.0 - u * u)) / bessel_i0(KAISER_BETA);
}

static int64_t gcd64(int64_t a, int64_t b) { while (b) { int64_t t = a % b; a = b; b = t; } return a; }

int64_t kiln_resample_len(int64_t n, int rate_in, int rate_out) {
    if (n <= 0 || rate_in <= 0 || rate_out <= 0) return 0;
    /* outputs at t = j * rate_in / rate_out < n */
    return (n * (int64_t) rate_out + rate_in - 1) / rate_in;
}

struct kiln_resampler {
    int rate_in, rate_out;
    int64_t L, M;          /* rate_out / rate_in = L / M in lowest terms */
    int W, taps;
    float * table;         /* [L][taps], or NULL: the kernel evaluated per output */
    float * wrow;
    float * hist;          /* input samples from absolute index base on */
    int64_t base, hist_len, hist_cap;
    int64_t n_in;          /* samples pushed so far */
    int64_t j;             /* next output */
    float * out;           /* the outputs of the last call */
    int64_t out_cap;
};

struct kiln_resampler * kiln_resampler_new(int rate_in, int rate_out) {
    if (rate_in <= 0 || rate_out <= 0 || rate_in > 1000000 || rate_out > 1000000) {
        kiln_set_last_error("resample: bad rates %d Hz -> %d Hz", rate_in, rate_out);
        return NULL;
    }
    struct kiln_resampler * r = (struct kiln_resampler *) calloc(1, sizeof(*r));
    if (!r) { kiln_set_last_error("resample: out of memory"); return NULL; }
    r->rate_in = rate_in; r->rate_out = rate_out;
    const int64_t g = gcd64(rate_in, rate_out);
    r->L = rate_out / g; r->M = rate_in / g;
    r->W = rate_in == rate_out ? 1 : (int) ceil(kiln_resample_kernel_halfwidth(rate_in, rate_out));
    r->taps = 2 * r->W;
    if (rate_in != rate_out) {
        if (r->L * r->taps <= TABLE_MAX) {
            r->table = (float *) malloc((size_t) r->L * (size_t) r->taps * sizeof(float));
            if (r->table)
                for (int64_t p = 0; p < r->L; p++)
                    for (int i = 0; i < r->taps; i++)
                        r->table[p * r->taps + i] = (float) kiln_resample_kernel((double) p / (double) r->L + (r->W - 1 - i), rate_in, rate_out);
        } else {
            r->wrow = (float *) malloc((size_t) r->taps * sizeof(float));
        }
        if (!r->table && !r->wrow) { kiln_resampler_free(r); kiln_set_last_error("resample: out of memory for the filter"); return NULL; }
    }
    return r;
}

void kiln_resampler_free(struct kiln_resampler * r) {
    if (!r) return;
    free(r->table); free(r->wrow); free(r->hist); free(r->out);
    free(r);
}

static bool grow(float ** p, int64_t * cap, int64_t need) {
    if (need <= *cap) return true;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    float * q = (float *) realloc(*p, (size_t) c * sizeof(float));
    if (!q) { kiln_set_last_error("resample: out of memory"); return false; }
    *p = q; *cap = c;
    return true;
}

/* outputs j while their support ends before `limit` (absolute input index);
 * samples at or beyond n_in count as zero */
static int64_t produce(struct kiln_resampler * r, int64_t j_end, bool need_support) {
    int64_t m = 0;
    for (;; r->j++) {
        const int64_t num = r->j * r->M, fl = num / r->L, p = num % r->L;
        if (r->j >= j_end || (need_support && fl + r->W >= r->n_in)) break;
        if (!grow(&r->out, &r->out_cap, m + 1)) return -1;
        if (r->rate_in == r->rate_out) { r->out[m++] = r->hist[fl - r->base]; continue; }
        const float * w = r->table ? r->table + p * r->taps : r->wrow;
        if (!r->table)
            for (int i = 0; i < r->taps; i++) r->wrow[i] = (float) kiln_resample_kernel((double) p / (double) r->L + (r->W - 1 - i), r->rate_in, r->rate_out);
        const int64_t k0 = fl - r->W + 1;
        int i0 = 0, i1 = r->taps;
        if (k0 < 0) i0 = (int)(-k0);
        if (k0 + r->taps > r->n_in) i1 = (int)(r->n_in - k0);
        const float * x = r->hist + (k0 + i0 - r->base); /* x[i - i0] is input k0 + i */
        float acc0 = 0.0f, acc1 = 0.0f;
        int i = i0;
        for (; i + 1 < i1; i += 2) { acc0 += w[i] * x[i - i0]; acc1 += w[i + 1] * x[i + 1 - i0]; }
        for (; i < i1; i++) acc0 += w[i] * x[i - i0];
        r->out[m++] = acc0 + acc1;
    }
    /* drop the input no later output reaches */
    const int64_t keep_from = (r->j * r->M) / r->L - r->W + 1;
    if (keep_from > r->base) {
        const int64_t drop = keep_from - r->base < r->hist_len ? keep_from - r->base : r->hist_len;
        memmove(r->hist, r->hist + drop, (size_t)(r->hist_len - drop) * sizeof(float));
        r->hist_len -= drop;
        r->base += drop;
    }
    return m;
}

int64_t kiln_resampler_push(struct kiln_resampler * r, const float * x, int64_t n, const float ** out) {
    if (out) *out = NULL;
    if (!r || (!x && n > 0) || n < 0) { kiln_set_last_error("resample: bad arguments to kiln_resampler_push"); return -1; }
    if (!grow(&r->hist, &r->hist_cap, r->hist_len + n)) return -1;
    if (n > 0) memcpy(r->hist + r->hist_len, x, (size_t) n * sizeof(float));
    r->hist_len += n;
    r->n_in += n;
    const int64_t m = produce(r, INT64_MAX, true);
    if (out) *out = r->out;
    return m;
}

int64_t kiln_resampler_flush(struct kiln_resampler * r, const float ** out) {
    if (out) *out = NULL;
    if (!r) { kiln_set_last_error("resample: NULL resampler"); return -1; }
    const int64_t m = produce(r, kiln_resample_len(r->n_in, r->rate_in, r->rate_out), false);
    if (out) *out = r->out;
    return m;
}

float * kiln_resample(const float * x, int64_t n, int rate_in, int rate_out, int64_t * n_out) {
    if (n_out) *n_out = 0;
    if (!x && n > 0) { kiln_set_last_error("resample: input is NULL"); return NULL; }
    if (n < 0) { kiln_set_last_error("resample: negative length"); return NULL; }
    struct kiln_resampler * r = kiln_resampler_new(rate_in, rate_out);
    if (!r) return NULL;
    const int64_t m = kiln_resample_len(n, rate_in, rate_out);
    float * y = (float *) malloc((size_t)(m > 0 ? m : 1) * sizeof(float));
    if (!y) { kiln_resampler_free(r); kiln_set_last_error("resample: out of memory"); return NULL; }
    const float * o;
    const int64_t a = kiln_resampler_push(r, x, n, &o);
    if (a > 0) memcpy(y, o, (size_t) a * sizeof(float));
    const int64_t b = a >= 0 ? kiln_resampler_flush(r, &o) : -1;
    if (b > 0) memcpy(y + a, o, (size_t) b * sizeof(float));
    kiln_resampler_free(r);
    if (a < 0 || b < 0 || a + b != m) { free(y); if (a >= 0 && b >= 0) kiln_set_last_error("resample: internal length mismatch"); return NULL; }
    if (n_out) *n_out = m;
    return y;
}
