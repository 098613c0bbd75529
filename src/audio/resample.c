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

float * kiln_resample(const float * x, int64_t n, int rate_in, int rate_out, int64_t * n_out) {
    if (n_out) *n_out = 0;
    if (!x && n > 0) { kiln_set_last_error("resample: input is NULL"); return NULL; }
    if (n < 0 || rate_in <= 0 || rate_out <= 0 || rate_in > 1000000 || rate_out > 1000000) {
        kiln_set_last_error("resample: bad arguments (n=%lld, %d Hz -> %d Hz)", (long long) n, rate_in, rate_out);
        return NULL;
    }
    const int64_t m = kiln_resample_len(n, rate_in, rate_out);
    float * y = (float *) malloc((size_t)(m > 0 ? m : 1) * sizeof(float));
    if (!y) { kiln_set_last_error("resample: out of memory"); return NULL; }
    if (rate_in == rate_out) {
        if (n > 0) memcpy(y, x, (size_t) n * sizeof(float));
        if (n_out) *n_out = n;
        return y;
    }
    const int64_t g = gcd64(rate_in, rate_out);
    const int64_t L = rate_out / g, M = rate_in / g;
    const int W = (int) ceil(kiln_resample_kernel_halfwidth(rate_in, rate_out));
    const int taps = 2 * W;
    /* table[p][i]: the weight of x[k0 + i], k0 = floor(t) - W + 1, for phase p = frac(t) * L */
    float * table = NULL;
    if ((int64_t) L * taps <= TABLE_MAX) {
        table = (float *) malloc((size_t) L * (size_t) taps * sizeof(float));
        if (!table) { free(y); kiln_set_last_error("resample: out of memory for the filter table"); return NULL; }
        for (int64_t p = 0; p < L; p++)
            for (int i = 0; i < taps; i++)
                table[p * taps + i] = (float) kiln_resample_kernel((double) p / (double) L + (W - 1 - i), rate_in, rate_out);
    }
    float * wrow = table ? NULL : (float *) malloc((size_t) taps * sizeof(float));
    if (!table && !wrow) { free(y); kiln_set_last_error("resample: out of memory"); return NULL; }
    for (int64_t j = 0; j < m; j++) {
        const int64_t num = j * M;
        const int64_t fl = num / L, p = num % L;
        const float * w;
        if (table) {
            w = table + p * taps;
        } else {
            for (int i = 0; i < taps; i++) wrow[i] = (float) kiln_resample_kernel((double) p / (double) L + (W - 1 - i), rate_in, rate_out);
            w = wrow;
        }
        const int64_t k0 = fl - W + 1;
        int i0 = 0, i1 = taps;
        if (k0 < 0) i0 = (int)(-k0);
        if (k0 + taps > n) i1 = (int)(n - k0);
        float acc0 = 0.0f, acc1 = 0.0f;
        int i = i0;
        for (; i + 1 < i1; i += 2) { acc0 += w[i] * x[k0 + i]; acc1 += w[i + 1] * x[k0 + i + 1]; }
        for (; i < i1; i++) acc0 += w[i] * x[k0 + i];
        y[j] = acc0 + acc1;
    }
    free(table);
    free(wrow);
    if (n_out) *n_out = m;
    return y;
}
