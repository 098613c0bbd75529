/*
 * test_audio.c — WAV reading, the resampler and Silero VAD (kiln-audio.h).
 *
 *  - WAV: PCM 16/24/32, float32, stereo and WAVE_FORMAT_EXTENSIBLE files
 *    written here decode to the written values; malformed files fail cleanly.
 *  - Resampler: the polyphase output equals a double-precision direct
 *    evaluation of the same kernel; resampled sines match the analytic sines
 *    at the new rate; a tone above the new Nyquist frequency is removed.
 *  - VAD: a double-precision forward of Silero (written here from the model
 *    description, with the f16 rounding of ggml's im2col) matches Kiln's
 *    probabilities window by window with the state carried; on jfk.wav the
 *    segments are whisper.cpp's (344 windows; 32-227, 327-441, 538-768,
 *    816-1062 cs); truncated and corrupted model files are refused.
 */
#include "kiln-audio.h"
#include "util/test_util.h"

#include <float.h>

#define MODEL "tests/data/audio/ggml-silero-v6.2.0.bin"
#define JFK   "tests/data/audio/jfk.wav"
/* the first tensor header in MODEL: magic, "silero-16k", version, window, context, 4 x 3 layer sizes, 4 sizes */
#define FIRST_TENSOR (4 + 4 + 10 + 12 + 8 + 4 + 48 + 16)

/* ------------------------------------------------------------------ WAV */

static void put16(uint8_t * p, uint32_t v) { p[0] = (uint8_t) v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t * p, uint32_t v) { put16(p, v & 0xffff); put16(p + 2, v >> 16); }

/* a WAV of n frames x ch channels; value(i, c) in [-1, 1) */
static uint8_t * make_wav(int n, int ch, int rate, int bits, bool is_float, bool extensible, size_t * size, double (*value)(int, int)) {
    const int bytes = bits / 8, fmt_len = extensible ? 40 : 16;
    const size_t data = (size_t) n * ch * bytes;
    *size = 12 + 8 + fmt_len + 8 + 4 /* a LIST chunk to skip */ + 8 + data;
    uint8_t * b = (uint8_t *) calloc(1, *size);
    memcpy(b, "RIFF", 4); put32(b + 4, (uint32_t)(*size - 8)); memcpy(b + 8, "WAVE", 4);
    uint8_t * f = b + 12;
    memcpy(f, "fmt ", 4); put32(f + 4, fmt_len);
    put16(f + 8, extensible ? 0xFFFE : (is_float ? 3 : 1)); put16(f + 10, ch); put32(f + 12, rate);
    put32(f + 16, rate * ch * bytes); put16(f + 20, ch * bytes); put16(f + 22, bits);
    if (extensible) { put16(f + 24, 22); put16(f + 26, bits); put16(f + 32, is_float ? 3 : 1); }
    uint8_t * l = f + 8 + fmt_len;
    memcpy(l, "LIST", 4); put32(l + 4, 4); memcpy(l + 8, "INFO", 4);
    uint8_t * d = l + 12;
    memcpy(d, "data", 4); put32(d + 4, (uint32_t) data);
    uint8_t * p = d + 8;
    for (int i = 0; i < n; i++) for (int c = 0; c < ch; c++, p += bytes) {
        const double v = value(i, c);
        if (is_float) { float fv = (float) v; uint32_t u; memcpy(&u, &fv, 4); put32(p, u); }
        else if (bits == 16) put16(p, (uint16_t)(int16_t) lrint(v * 32767));
        else if (bits == 24) { int32_t q = (int32_t) lrint(v * 8388607); p[0] = (uint8_t) q; p[1] = (uint8_t)(q >> 8); p[2] = (uint8_t)(q >> 16); }
        else put32(p, (uint32_t)(int32_t) llrint(v * 2147483647.0));
    }
    return b;
}

static double wav_value(int i, int c) { return 0.8 * sin(0.01 * i * (c + 1)) - (c ? 0.1 : 0.0); }

static void test_wav(void) {
    tu_case = "wav";
    const struct { int bits; bool fl; int ch; bool ext; double tol; } fm[] = {
        { 16, false, 1, false, 1.0 / 32768 }, { 24, false, 1, false, 1.0 / 8388608 }, { 32, false, 1, false, 1e-7 },
        { 32, true, 1, false, 1e-7 }, { 16, false, 2, false, 1.0 / 32768 }, { 24, false, 2, true, 1.0 / 8388608 },
        { 32, true, 2, true, 1e-7 },
    };
    for (size_t k = 0; k < sizeof fm / sizeof fm[0]; k++) {
        size_t size;
        uint8_t * b = make_wav(1000, fm[k].ch, 22050, fm[k].bits, fm[k].fl, fm[k].ext, &size, wav_value);
        struct kiln_wav w;
        const bool ok = kiln_wav_read_mem(b, size, &w);
        CHECK(ok, "format %zu: %s", k, ok ? "" : kiln_last_error());
        if (ok) {
            CHECK(w.n_samples == 1000 && w.sample_rate == 22050 && w.n_channels == fm[k].ch && w.bits == fm[k].bits, "format %zu header", k);
            double err = 0;
            for (int i = 0; i < 1000; i++) {
                double ref = 0;
                for (int c = 0; c < fm[k].ch; c++) ref += wav_value(i, c);
                ref /= fm[k].ch;
                err = fmax(err, fabs(w.samples[i] - ref));
            }
            CHECK(err <= 1.5 * fm[k].tol, "format %zu: max error %g > %g", k, err, 1.5 * fm[k].tol);
        }
        kiln_wav_free(&w);
        /* every truncation of the header fails cleanly; a truncated data chunk keeps whole frames */
        for (size_t cut = 0; cut < 12 + 8 + 16; cut++) {
            struct kiln_wav t;
            CHECK(!kiln_wav_read_mem(b, cut, &t) && strlen(kiln_last_error()) > 0, "format %zu cut at %zu accepted", k, cut);
        }
        struct kiln_wav t;
        if (kiln_wav_read_mem(b, size - 3, &t)) { CHECK(t.n_samples < 1000, "truncated data: %lld frames", (long long) t.n_samples); kiln_wav_free(&t); }
        /* an unknown format tag is refused */
        put16(b + 12 + 8, 2);
        CHECK(!kiln_wav_read_mem(b, size, &t), "ADPCM accepted");
        free(b);
    }
    struct kiln_wav w;
    CHECK(!kiln_wav_read_mem("RIFF\0\0\0\0WAVX", 12, &w), "not WAVE accepted");
    CHECK(!kiln_wav_read_file("tests/data/audio/no-such.wav", &w), "missing file accepted");
    CHECK(kiln_wav_read_file(JFK, &w) && w.sample_rate == 16000 && w.n_samples == 176000 && w.n_channels == 1, "jfk.wav header");
    kiln_wav_free(&w);
}

/* ------------------------------------------------------------ resampler */

static void test_resample(void) {
    tu_case = "resample";
    const int rates[][2] = { { 44100, 16000 }, { 48000, 16000 }, { 22050, 16000 }, { 8000, 16000 }, { 11025, 16000 }, { 32000, 16000 }, { 16000, 44100 }, { 16000, 16000 } };
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        const int ri = rates[r][0], ro = rates[r][1];
        const int n = ri / 2; /* 0.5 s */
        float * x = (float *) malloc((size_t) n * sizeof(float));
        tu_seed(7 + r);
        for (int i = 0; i < n; i++) x[i] = tu_rand_uniform(-1, 1);
        int64_t m;
        float * y = kiln_resample(x, n, ri, ro, &m);
        CHECK(y && m == kiln_resample_len(n, ri, ro), "%d -> %d: length", ri, ro);
        if (!y) { free(x); continue; }
        /* the same filter evaluated directly in double */
        const double hw = kiln_resample_kernel_halfwidth(ri, ro);
        double err = 0, scale = 0;
        if (ri == ro) CHECK(m == n && memcmp(x, y, (size_t) n * sizeof(float)) == 0, "same rate: not a copy");
        for (int64_t j = 0; j < m && ri != ro; j += 7) {
            const double t = (double) j * ri / ro;
            double acc = 0;
            for (int64_t k = (int64_t) floor(t - hw); k <= (int64_t) ceil(t + hw); k++)
                if (k >= 0 && k < n) acc += x[k] * kiln_resample_kernel(t - k, ri, ro);
            err = fmax(err, fabs(acc - y[j]));
            scale = fmax(scale, fabs(acc));
        }
        CHECK(err <= 2e-5 * scale, "%d -> %d: polyphase vs direct double max diff %g", ri, ro, err);
        /* fed in pieces of random sizes: the same samples */
        struct kiln_resampler * rs = kiln_resampler_new(ri, ro);
        float * ys = (float *) malloc((size_t) m * sizeof(float));
        int64_t got = 0;
        bool fits = rs != NULL;
        for (int64_t off = 0; fits && off < n;) {
            int64_t piece = 1 + (int64_t)(tu_rand_u64() % 3000);
            if (piece > n - off) piece = n - off;
            const float * o;
            const int64_t k = kiln_resampler_push(rs, x + off, piece, &o);
            fits = k >= 0 && got + k <= m;
            if (fits && k > 0) { memcpy(ys + got, o, (size_t) k * sizeof(float)); got += k; }
            off += piece;
        }
        const float * o;
        const int64_t k = fits ? kiln_resampler_flush(rs, &o) : -1;
        fits = fits && k >= 0 && got + k == m;
        if (fits && k > 0) memcpy(ys + got, o, (size_t) k * sizeof(float));
        CHECK(fits && memcmp(ys, y, (size_t) m * sizeof(float)) == 0, "%d -> %d: streamed resampling differs from one-shot", ri, ro);
        free(ys);
        kiln_resampler_free(rs);
        free(x); free(y);

        if (ri == ro) continue;
        /* sines below the passband edge come out as the analytic sines at the new rate */
        const double fr[3] = { 220.0, 1234.5, 0.85 * 0.5 * (ri < ro ? ri : ro) };
        x = (float *) malloc((size_t) n * sizeof(float));
        for (int i = 0; i < n; i++) { double s = 0; for (int q = 0; q < 3; q++) s += 0.3 * sin(2 * M_PI * fr[q] * i / ri + q); x[i] = (float) s; }
        y = kiln_resample(x, n, ri, ro, &m);
        double e = 0;
        const int64_t edge = (int64_t)(0.05 * ro);
        for (int64_t j = edge; j < m - edge; j++) {
            double s = 0; for (int q = 0; q < 3; q++) s += 0.3 * sin(2 * M_PI * fr[q] * j / ro + q);
            e = fmax(e, fabs(y[j] - s));
        }
        CHECK(e < 2e-3, "%d -> %d: sines max error %g (> -54 dB of full scale)", ri, ro, e);
        free(x); free(y);

        /* a tone above the output's Nyquist frequency is removed (downsampling) */
        if (ro < ri) {
            const double f = 0.5 * ro * 1.08;
            x = (float *) malloc((size_t) n * sizeof(float));
            for (int i = 0; i < n; i++) x[i] = (float) sin(2 * M_PI * f * i / ri);
            y = kiln_resample(x, n, ri, ro, &m);
            double rms = 0; int64_t cnt = 0;
            for (int64_t j = edge; j < m - edge; j++, cnt++) rms += (double) y[j] * y[j];
            rms = sqrt(rms / cnt);
            CHECK(rms < 1e-3, "%d -> %d: %.0f Hz tone leaks at rms %g (> -57 dB)", ri, ro, f, rms);
            free(x); free(y);
        }
    }
    int64_t m;
    CHECK(!kiln_resample(NULL, 10, 44100, 16000, &m), "NULL input accepted");
    CHECK(!kiln_resample((const float *) "", 0, 0, 16000, &m), "rate 0 accepted");
}

/* ------------------------------------------------------ VAD reference */

/* the model's tensors parsed here independently, as doubles */
struct ref_model { double * t[16]; int64_t ne[16][3]; char name[16][64]; int n; };

static const double * ref_get(const struct ref_model * m, const char * name) {
    for (int i = 0; i < m->n; i++) if (strcmp(m->name[i], name) == 0) return m->t[i];
    return NULL;
}

static bool ref_load(struct ref_model * m, const uint8_t * b, size_t size) {
    memset(m, 0, sizeof(*m));
    size_t off = 4;
    int32_t v;
#define RI32() (memcpy(&v, b + off, 4), off += 4, v)
    const int32_t len = RI32(); off += (size_t) len;
    off += 5 * 4;                     /* version, n_window, n_context */
    const int32_t nl = RI32(); off += (size_t) nl * 12 + 16;
    while (off < size && m->n < 16) {
        const int32_t nd = RI32(), nlen = RI32(), ty = RI32();
        int64_t ne[3] = { 1, 1, 1 }, cnt = 1;
        for (int d = 0; d < nd; d++) { ne[d < 3 ? d : 2] *= RI32(); }
        cnt = ne[0] * ne[1] * ne[2];
        memcpy(m->name[m->n], b + off, (size_t) nlen); off += (size_t) nlen;
        double * t = (double *) malloc((size_t) cnt * sizeof(double));
        for (int64_t i = 0; i < cnt; i++) {
            if (ty == 1) { kiln_fp16_t h; memcpy(&h, b + off + 2 * i, 2); t[i] = kiln_fp16_to_fp32(h); }
            else { float f; memcpy(&f, b + off + 4 * i, 4); t[i] = f; }
        }
        off += (size_t) cnt * (ty == 1 ? 2 : 4);
        memcpy(m->ne[m->n], ne, sizeof ne);
        m->t[m->n++] = t;
    }
#undef RI32
    return m->n == 15;
}

/* whether the convolution inputs are rounded to f16: yes for f16 kernels (ggml's
 * im2col), no for a file with f32 kernels */
static bool ref_round = true;
static double f16r(double x) { return ref_round ? kiln_fp16_to_fp32(kiln_fp32_to_fp16((float) x)) : x; }

/* conv1d, kernel 3, pad 1: in [ci][L] -> out [co][Lo] with bias and ReLU;
 * the input rounded to f16 as ggml's im2col does for an f16 kernel */
static int ref_conv(const double * w, const double * bias, int ci, int co, const double * in, int L, int s, double * out) {
    const int Lo = (L + 2 - 3) / s + 1;
    for (int o = 0; o < co; o++) for (int t = 0; t < Lo; t++) {
        double acc = bias[o];
        for (int i = 0; i < ci; i++) for (int k = 0; k < 3; k++) {
            const int p = t * s + k - 1;
            if (p >= 0 && p < L) acc += w[k + 3 * (i + ci * o)] * f16r(in[i * L + p]);
        }
        out[o * Lo + t] = acc > 0 ? acc : 0;
    }
    return Lo;
}

static double ref_window(const struct ref_model * m, const float * x, double * h, double * c) {
    double pad[640], mag[129 * 4], a[128 * 4], bb[128 * 4];
    for (int i = 0; i < 640; i++) { int j = i - 64; if (j < 0) j = -j; if (j > 511) j = 1022 - j; pad[i] = f16r(x[j]); }
    const double * basis = ref_get(m, "_model.stft.forward_basis_buffer");
    for (int f = 0; f < 4; f++) for (int o = 0; o < 129; o++) {
        double re = 0, im = 0;
        for (int k = 0; k < 256; k++) { re += basis[k + 256 * o] * pad[f * 128 + k]; im += basis[k + 256 * (o + 129)] * pad[f * 128 + k]; }
        mag[o * 4 + f] = sqrt(re * re + im * im);
    }
    int L = 4;
    L = ref_conv(ref_get(m, "_model.encoder.0.reparam_conv.weight"), ref_get(m, "_model.encoder.0.reparam_conv.bias"), 129, 128, mag, L, 1, a);
    L = ref_conv(ref_get(m, "_model.encoder.1.reparam_conv.weight"), ref_get(m, "_model.encoder.1.reparam_conv.bias"), 128, 64, a, L, 2, bb);
    L = ref_conv(ref_get(m, "_model.encoder.2.reparam_conv.weight"), ref_get(m, "_model.encoder.2.reparam_conv.bias"), 64, 64, bb, L, 2, a);
    L = ref_conv(ref_get(m, "_model.encoder.3.reparam_conv.weight"), ref_get(m, "_model.encoder.3.reparam_conv.bias"), 64, 128, a, L, 1, bb);
    const double * wih = ref_get(m, "_model.decoder.rnn.weight_ih"), * whh = ref_get(m, "_model.decoder.rnn.weight_hh");
    const double * bih = ref_get(m, "_model.decoder.rnn.bias_ih"), * bhh = ref_get(m, "_model.decoder.rnn.bias_hh");
    double g[512];
    for (int r = 0; r < 512; r++) {
        double acc = bih[r] + bhh[r];
        for (int j = 0; j < 128; j++) acc += wih[r * 128 + j] * bb[j * L] + whh[r * 128 + j] * h[j];
        g[r] = acc;
    }
    const double * wf = ref_get(m, "_model.decoder.decoder.2.weight"), * bf = ref_get(m, "_model.decoder.decoder.2.bias");
    double y = bf[0];
    for (int j = 0; j < 128; j++) {
        const double ig = 1 / (1 + exp(-g[j])), fg = 1 / (1 + exp(-g[128 + j])), cg = tanh(g[256 + j]), og = 1 / (1 + exp(-g[384 + j]));
        c[j] = fg * c[j] + ig * cg;
        h[j] = og * tanh(c[j]);
        y += wf[j] * f16r(h[j] > 0 ? h[j] : 0);
    }
    return 1 / (1 + exp(-y));
}

/* the reference over the windows of w (state carried, last window zero-padded)
 * against Kiln's probabilities: largest and summed absolute difference */
static void ref_compare(const struct ref_model * m, const struct kiln_wav * w, const float * probs, int64_t np, double * maxd, double * sumd) {
    double h[128] = { 0 }, c[128] = { 0 };
    float win[512];
    *maxd = *sumd = 0;
    for (int64_t i = 0; i < np; i++) {
        const int64_t s0 = i * 512, len = w->n_samples - s0 < 512 ? w->n_samples - s0 : 512;
        memset(win, 0, sizeof win);
        memcpy(win, w->samples + s0, (size_t) len * sizeof(float));
        const double d = fabs(ref_window(m, win, h, c) - probs[i]);
        *maxd = fmax(*maxd, d);
        *sumd += d;
    }
}

static void test_vad(void) {
    tu_case = "vad";
    size_t size;
    uint8_t * file = (uint8_t *) tu_read_file(MODEL, &size);
    CHECK(file != NULL, "cannot read %s", MODEL);
    if (!file) return;
    struct kiln_vad * vad = kiln_vad_load_mem(file, size, 1);
    CHECK(vad != NULL, "load: %s", vad ? "" : kiln_last_error());
    struct kiln_wav w;
    const bool wok = kiln_wav_read_file(JFK, &w);
    CHECK(wok, "jfk.wav");
    if (vad && wok) {
        CHECK(kiln_vad_n_window(vad) == 512 && strcmp(kiln_vad_model_type(vad), "silero-16k") == 0, "hparams");
        float * probs = (float *) malloc(400 * sizeof(float));
        const int64_t np = kiln_vad_probs(vad, w.samples, w.n_samples, probs);
        CHECK(np == 344, "jfk: %lld windows, whisper.cpp has 344", (long long) np);

        /* double-precision forward, state carried */
        struct ref_model rm;
        CHECK(ref_load(&rm, file, size), "reference parser");
        double maxd, sumd;
        ref_compare(&rm, &w, probs, np, &maxd, &sumd);
        /* the mean shows the arithmetic agrees; the max allows an activation that
         * rounds to the neighbouring f16 value when f32 and double sums straddle a tie */
        CHECK(maxd < 5e-4 && sumd / np < 2e-5, "jfk: probabilities vs double reference: max diff %g, mean %g", maxd, sumd / np);
        printf("vad: %lld windows, |kiln - double reference| max %.3g mean %.3g\n", (long long) np, maxd, sumd / np);
        for (int i = 0; i < rm.n; i++) free(rm.t[i]);

        /* whisper.cpp's segments (its tests/test-vad.cpp and CLI on jfk.wav) */
        struct kiln_vad_segment seg[8];
        struct kiln_vad_params p = kiln_vad_default_params();
        const int ns = kiln_vad_segments(probs, np, 512, 16000, &p, seg, 8);
        const int64_t want[4][2] = { { 32, 227 }, { 327, 441 }, { 538, 768 }, { 816, 1062 } };
        CHECK(ns == 4, "jfk: %d segments, whisper.cpp has 4", ns);
        for (int i = 0; i < ns && i < 4; i++)
            CHECK(seg[i].start_cs == want[i][0] && seg[i].end_cs == want[i][1], "segment %d: %lld-%lld cs, whisper.cpp %lld-%lld",
                  i, (long long) seg[i].start_cs, (long long) seg[i].end_cs, (long long) want[i][0], (long long) want[i][1]);

        /* window by window gives the same numbers; a second pass resets the state */
        kiln_vad_reset(vad);
        bool same = true;
        for (int64_t i = 0; i + 1 < np; i++) { float pr; same = same && kiln_vad_process_window(vad, w.samples + i * 512, &pr) && pr == probs[i]; }
        CHECK(same, "window-by-window probabilities differ from kiln_vad_probs");
        float * again = (float *) malloc(400 * sizeof(float));
        CHECK(kiln_vad_probs(vad, w.samples, w.n_samples, again) == np && memcmp(again, probs, (size_t) np * sizeof(float)) == 0, "second run differs");
        free(again);
        free(probs);
    }
    kiln_wav_free(&w);
    kiln_vad_free(vad);

    /* malformed files: every truncation, a bad magic, a wrong shape, an unknown tensor */
    int bad = 0;
    for (size_t cut = 0; cut < size; cut += cut < 200 ? 1 : 4099) {
        struct kiln_vad * t = kiln_vad_load_mem(file, cut, 1);
        if (t || strlen(kiln_last_error()) == 0) bad++;
        kiln_vad_free(t);
    }
    CHECK(bad == 0, "%d truncated files accepted", bad);
    uint8_t * cp = (uint8_t *) malloc(size);
    memcpy(cp, file, size); cp[0] ^= 1;
    CHECK(!kiln_vad_load_mem(cp, size, 1) && strstr(kiln_last_error(), "magic"), "bad magic: %s", kiln_last_error());
    memcpy(cp, file, size); cp[166 - 36 - 12 + 4 * 0] = 0;  /* ne[0] of the first tensor: 3 -> 0 */
    CHECK(!kiln_vad_load_mem(cp, size, 1) && strstr(kiln_last_error(), "shape"), "bad shape: %s", kiln_last_error());
    memcpy(cp, file, size); cp[166 - 36 + 7] = 'X';        /* a letter of the first tensor's name */
    CHECK(!kiln_vad_load_mem(cp, size, 1) && strstr(kiln_last_error(), "unknown tensor"), "bad name: %s", kiln_last_error());
    memcpy(cp, file, size); cp[FIRST_TENSOR + 8] = 2;     /* the first tensor's type: f16 -> 2 */
    CHECK(!kiln_vad_load_mem(cp, size, 1) && strstr(kiln_last_error(), "type 2"), "bad type: %s", kiln_last_error());
    const size_t bias0 = FIRST_TENSOR + 12 + 3 * 4 + 36 + 3 * 129 * 128 * 2;   /* encoder.0's bias follows its kernel */
    memcpy(cp, file, size); cp[bias0 + 8] = 1;            /* an f32 tensor given as f16 */
    CHECK(!kiln_vad_load_mem(cp, size, 1) && strstr(kiln_last_error(), "type 1, expected 0"), "bias as f16: %s", kiln_last_error());
    free(cp);
    free(file);
    CHECK(!kiln_vad_load_file("tests/data/audio/none.bin", 1), "missing file accepted");
}

/* the model file with every f16 tensor (STFT basis, convolution kernels)
 * rewritten as f32 holding the same values */
static uint8_t * widen_kernels(const uint8_t * b, size_t size, size_t * out_size) {
    uint8_t * out = (uint8_t *) malloc(2 * size);
    if (!out) return NULL;
    memcpy(out, b, FIRST_TENSOR);
    size_t off = FIRST_TENSOR, o = FIRST_TENSOR;
    while (off + 12 <= size) {
        int32_t nd, len, ty, ne;
        memcpy(&nd, b + off, 4); memcpy(&len, b + off + 4, 4); memcpy(&ty, b + off + 8, 4);
        int64_t cnt = 1;
        for (int d = 0; d < nd; d++) { memcpy(&ne, b + off + 12 + 4 * d, 4); cnt *= ne; }
        const size_t hdr = 12 + 4 * (size_t) nd + (size_t) len;
        memcpy(out + o, b + off, hdr);
        const int32_t f32 = 0;
        memcpy(out + o + 8, &f32, 4);
        off += hdr; o += hdr;
        for (int64_t i = 0; i < cnt; i++) {
            float f;
            if (ty == 1) { kiln_fp16_t h; memcpy(&h, b + off + 2 * i, 2); f = kiln_fp16_to_fp32(h); }
            else memcpy(&f, b + off + 4 * i, 4);
            memcpy(out + o + 4 * i, &f, 4);
        }
        off += (size_t) cnt * (ty == 1 ? 2 : 4); o += (size_t) cnt * 4;
    }
    *out_size = o;
    return out;
}

/* f32 kernels: Kiln rounds no convolution input; the double reference without
 * rounding agrees to f32 accumulation error */
static void test_vad_f32_kernels(void) {
    tu_case = "vad f32 kernels";
    size_t size, wsize;
    uint8_t * file = (uint8_t *) tu_read_file(MODEL, &size);
    uint8_t * wide = file ? widen_kernels(file, size, &wsize) : NULL;
    struct kiln_wav w;
    const bool wok = kiln_wav_read_file(JFK, &w);
    struct kiln_vad * vad = wide ? kiln_vad_load_mem(wide, wsize, 1) : NULL;
    CHECK(vad != NULL && wok, "load: %s", vad ? "" : kiln_last_error());
    struct ref_model rm;
    if (vad && wok && ref_load(&rm, wide, wsize)) {
        float probs[400];
        const int64_t np = kiln_vad_probs(vad, w.samples, w.n_samples, probs);
        CHECK(np == 344, "%lld windows", (long long) np);
        double maxd, sumd;
        ref_round = false;
        ref_compare(&rm, &w, probs, np, &maxd, &sumd);
        ref_round = true;
        CHECK(maxd < 1e-5, "jfk: probabilities vs unrounded double reference: max diff %g, mean %g", maxd, sumd / np);
        printf("vad f32 kernels: %lld windows, |kiln - double reference| max %.3g mean %.3g\n", (long long) np, maxd, sumd / np);
        for (int i = 0; i < rm.n; i++) free(rm.t[i]);
    }
    kiln_vad_free(vad);
    kiln_wav_free(&w);
    free(wide);
    free(file);
}

/* ------------------------------------------------------------- segments */

static void test_segments(void) {
    tu_case = "segments";
    /* whisper.cpp's rules on hand-made probabilities (windows of 512 at 16 kHz = 32 ms) */
    float pr[100];
    for (int i = 0; i < 100; i++) pr[i] = 0.1f;
    for (int i = 10; i < 30; i++) pr[i] = 0.9f;      /* 640 ms speech */
    for (int i = 32; i < 40; i++) pr[i] = 0.9f;      /* after a 64 ms dip: same segment */
    for (int i = 60; i < 64; i++) pr[i] = 0.9f;      /* 128 ms: under min speech */
    struct kiln_vad_params p = kiln_vad_default_params();
    struct kiln_vad_segment s[8];
    int n = kiln_vad_segments(pr, 100, 512, 16000, &p, s, 8);
    /* start 10*512 - 480 pad = 4640; end: silence from window 40 (20480) + 480 */
    CHECK(n == 1 && s[0].start == 4640 && s[0].end == 20960, "n=%d [%lld, %lld]", n, (long long) s[0].start, (long long) s[0].end);
    /* hysteresis: 0.4 is not silence (>= 0.35) once speech started */
    for (int i = 40; i < 50; i++) pr[i] = 0.4f;
    n = kiln_vad_segments(pr, 100, 512, 16000, &p, s, 8);
    CHECK(n == 1 && s[0].end == 50 * 512 + 480, "hysteresis: n=%d end %lld", n, (long long) s[0].end);
    /* a max speech duration splits at the last silence over 98 ms (whisper.cpp's prev_end) */
    for (int i = 0; i < 100; i++) pr[i] = i >= 40 && i < 48 ? 0.1f : 0.9f;
    p.min_silence_ms = 1000;
    n = kiln_vad_segments(pr, 100, 512, 16000, &p, s, 8);
    CHECK(n == 1 && s[0].start == 0 && s[0].end == 51200, "long silence limit: n=%d", n);
    p.max_speech_s = 2.0f;
    n = kiln_vad_segments(pr, 100, 512, 16000, &p, s, 8);
    CHECK(n == 2 && s[0].start == 0 && s[0].end == 20480 + 480 && s[1].start == 24576 - 480 && s[1].end == 51200,
          "max speech 2 s: n=%d [%lld %lld] [%lld %lld]", n, (long long) s[0].start, (long long) s[0].end, (long long) s[1].start, (long long) s[1].end);
    CHECK(kiln_vad_segments(NULL, 5, 512, 16000, &p, s, 8) == -1, "NULL probs accepted");
    CHECK(kiln_vad_segments(pr, 0, 512, 16000, &p, s, 8) == 0, "no windows");
}

int main(void) {
    test_wav();
    test_resample();
    test_vad();
    test_vad_f32_kernels();
    test_segments();
    return tu_finish();
}
