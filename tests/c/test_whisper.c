/*
 * test_whisper.c — Whisper in whisper.cpp's model format (kiln-whisper.h).
 *
 *  - Loader: files written by kiln_whisper_write_random from whisper.cpp's
 *    weight-less test files (the real hparams, filterbank and vocabularies of
 *    tiny and base.en) load in every weight type (F32, F16, Q4_0, Q4_1,
 *    Q5_0, Q5_1, Q8_0) with the hparams, special token ids and vocabulary
 *    whisper.cpp derives; the weight-less file itself, a bad magic, a bad
 *    ftype, a wrong tensor type / shape / name and truncation at every part
 *    of the file are refused with a message.
 *  - Log-mel: against a double-precision evaluation of the same definition
 *    (direct DFT, periodic Hann window, reflect + 30 s padding, the file's
 *    filterbank, log10 clamped at max - 8, (x + 4) / 4) on jfk.wav, on a
 *    chirp and on inputs shorter than the reflection; max |diff| <= 1e-5.
 *  - Decoding: the segments of jfk.wav are the same with 1 and 3 threads,
 *    every segment's text is its tokens' text, its times inside the
 *    30 s window; out-of-range ids and positions are refused; beam search
 *    with the fallback gives the same segments with 1 and 3 threads; one
 *    decoder batch over several cache slots (beams) gives each slot's
 *    one-token logits bit for bit.
 *  - Sampling pieces: std::mt19937 against the C++ standard's check value,
 *    the discrete distribution's table and draws, the prompt tokenizer.
 * Token-for-token agreement with whisper.cpp is tests/audio/whisper-oracle.mjs
 * and tests/audio/whisper-decode-oracle.mjs.
 */
#include "kiln-whisper.h"
#include "kiln-audio.h"
#include "util/test_util.h"
#include "../../src/audio/whisper_internal.h"

#include <unistd.h>

#define TINY "tests/data/audio/for-tests-ggml-tiny.bin"
#define BASE_EN "tests/data/audio/for-tests-ggml-base.en.bin"
#define JFK "tests/data/audio/jfk.wav"

static char g_tmp[256];

static uint8_t * write_model(const char * tmpl, int ftype, int n_state, int n_text_layer, size_t * size) {
    size_t ts;
    uint8_t * t = (uint8_t *) tu_read_file(tmpl, &ts);
    if (!t) return NULL;
    struct kiln_whisper_random_params p = { n_state, 2, 2, n_text_layer, ftype, 7, 3.0f };
    const bool ok = kiln_whisper_write_random(t, ts, &p, g_tmp);
    free(t);
    if (!ok) { printf("write: %s\n", kiln_last_error()); return NULL; }
    return (uint8_t *) tu_read_file(g_tmp, size);
}

static void test_loader(void) {
    tu_case = "loader";
    static const int ftypes[] = { 0, 1, 2, 3, 7, 8, 9 };
    static const enum kiln_type types[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q8_0, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1 };
    for (int i = 0; i < 7; i++) {
        size_t n;
        uint8_t * b = write_model(TINY, ftypes[i], 64, 3, &n);
        CHECK(b != NULL, "write ftype %d", ftypes[i]);
        if (!b) continue;
        struct kiln_whisper * w = kiln_whisper_load_mem(b, n, 1);
        CHECK(w != NULL, "load ftype %d: %s", ftypes[i], kiln_last_error());
        if (w) {
            const struct kiln_whisper_hparams * hp = kiln_whisper_get_hparams(w);
            CHECK(hp->n_vocab == 51865 && hp->n_audio_ctx == 1500 && hp->n_text_ctx == 448 && hp->n_mels == 80 &&
                  hp->n_audio_state == 64 && hp->n_text_layer == 3 && hp->ftype == ftypes[i], "hparams ftype %d", ftypes[i]);
            CHECK(kiln_whisper_wtype(w) == types[i], "wtype of ftype %d", ftypes[i]);
            const struct kiln_whisper_tokens * t = kiln_whisper_get_tokens(w);
            CHECK(kiln_whisper_is_multilingual(w) && t->eot == 50257 && t->sot == 50258 && t->translate == 50358 &&
                  t->transcribe == 50359 && t->not_ts == 50363 && t->beg == 50364, "tiny special tokens");
            size_t len;
            const char * s = kiln_whisper_token_text(w, 220, &len);
            CHECK(s && len == 1 && s[0] == ' ', "token 220 is a space");
            /* the file lists 50257 tokens; whisper.cpp names the rest */
            static const struct { int id; const char * text; } names[] = {
                { 0, "!" }, { 50256, "" }, { 50257, "[_EOT_]" }, { 50258, "[_SOT_]" }, { 50259, "[_LANG_en]" },
                { 50358, "[_TRANSLATE_]" }, { 50363, "[_NOT_]" }, { 50364, "[_BEG_]" }, { 51864, "[_TT_1500]" } };
            for (int k = 0; k < 9; k++) {
                s = kiln_whisper_token_text(w, names[k].id, &len);
                CHECK(s && len == strlen(names[k].text) && memcmp(s, names[k].text, len) == 0, "token %d is '%s'", names[k].id, names[k].text);
            }
            CHECK(kiln_whisper_token_text(w, 51865, &len) == NULL && kiln_whisper_token_text(w, -1, &len) == NULL, "ids out of range");
            int nm, nf;
            const float * fb = kiln_whisper_mel_filters(w, &nm, &nf);
            CHECK(fb && nm == 80 && nf == 201, "filterbank 80 x 201");
            kiln_whisper_free(w);
        }
        free(b);
    }
    /* English-only vocabulary */
    size_t n;
    uint8_t * b = write_model(BASE_EN, 1, 64, 3, &n);
    struct kiln_whisper * w = b ? kiln_whisper_load_mem(b, n, 1) : NULL;
    CHECK(w != NULL, "base.en loads: %s", kiln_last_error());
    if (w) {
        const struct kiln_whisper_tokens * t = kiln_whisper_get_tokens(w);
        CHECK(!kiln_whisper_is_multilingual(w) && t->eot == 50256 && t->sot == 50257 && t->not_ts == 50362 && t->beg == 50363,
              "base.en special tokens");
        kiln_whisper_free(w);
    }
    free(b);

    /* the weight-less test file: no tensors -> refused, naming a missing tensor */
    size_t tn;
    uint8_t * tb = (uint8_t *) tu_read_file(TINY, &tn);
    w = tb ? kiln_whisper_load_mem(tb, tn, 1) : NULL;
    CHECK(w == NULL && strstr(kiln_last_error(), "missing"), "weight-less file refused: %s", kiln_last_error());
    free(tb);

    /* malformed copies of a valid F16 file */
    b = write_model(TINY, 1, 64, 3, &n);
    if (!b) return;
    uint8_t * c = (uint8_t *) malloc(n);
    memcpy(c, b, n); c[0] ^= 0xff;
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "magic"), "bad magic: %s", kiln_last_error());
    memcpy(c, b, n); c[4 + 10 * 4] = 5;   /* ftype 5: not a whisper.cpp ftype */
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "ftype"), "bad ftype: %s", kiln_last_error());
    memcpy(c, b, n); c[4 + 2 * 4] = 65;   /* n_audio_state 65 != n_text_state */
    CHECK(!kiln_whisper_load_mem(c, n, 1), "state mismatch refused: %s", kiln_last_error());
    /* the first tensor's header sits right after the vocabulary: find it by its name */
    const char * first = "encoder.positional_embedding";
    size_t off = 0;
    for (size_t i = 0; i + strlen(first) < n; i++) if (memcmp(b + i, first, strlen(first)) == 0) { off = i; break; }
    CHECK(off > 0, "found the first tensor");
    const size_t hdr = off - 4 * 5;   /* n_dims, name length, type, ne0, ne1 */
    memcpy(c, b, n); c[hdr + 8] = 1;      /* type f16 where f32 is expected */
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "type"), "wrong type: %s", kiln_last_error());
    memcpy(c, b, n); c[hdr + 12] = 65;    /* ne0 */
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "shape"), "wrong shape: %s", kiln_last_error());
    memcpy(c, b, n); c[off] = 'X';
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "unknown tensor"), "unknown name: %s", kiln_last_error());
    memcpy(c, b, n); c[hdr] = 9;          /* n_dims 9 */
    CHECK(!kiln_whisper_load_mem(c, n, 1) && strstr(kiln_last_error(), "n_dims"), "bad n_dims: %s", kiln_last_error());
    /* truncation in the header, filterbank, vocabulary, a tensor header and data, the last tensor */
    const size_t cuts[] = { 0, 3, 10, 47, 52, 60, 1000, 64000, off - 100, hdr + 2, hdr + 30, off + 200, n / 2, n - 1 };
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        w = kiln_whisper_load_mem(b, cuts[i], 1);
        CHECK(w == NULL && (strstr(kiln_last_error(), "truncated") || strstr(kiln_last_error(), "missing")),
              "truncated at %zu: %s", cuts[i], kiln_last_error());
        kiln_whisper_free(w);
    }
    CHECK(!kiln_whisper_load_file("tests/data/audio/no-such-model.bin", 1), "missing file refused");
    free(c);
    free(b);
}

/* ----------------------------------------------------------------- mel */

/* the definition, in double: reflect-pad 200, zeros to 30 s + 200 behind, periodic
 * Hann, direct DFT, power, filterbank, log10(max(., 1e-10)), clamp max - 8, (x + 4) / 4 */
static double * mel_ref(const float * x, int64_t n, const float * fb, int n_mel, int * n_len_out) {
    const int64_t pad = 200, np = n + 480000 + 2 * pad;
    double * s = (double *) calloc((size_t) np, sizeof(double));
    for (int64_t i = 0; i < n; i++) s[pad + i] = x[i];
    const int64_t nr = n - 1 < pad ? (n - 1 > 0 ? n - 1 : 0) : pad;
    for (int64_t i = 0; i < nr; i++) s[pad - 1 - i] = x[1 + i];
    const int n_len = (int) ((np - 400) / 160);
    double * m = (double *) malloc((size_t) n_mel * n_len * sizeof(double));
    double hann[400], cs[400], sn[400], pw[201];
    for (int i = 0; i < 400; i++) { hann[i] = 0.5 * (1 - cos(2 * M_PI * i / 400)); cs[i] = cos(2 * M_PI * i / 400); sn[i] = sin(2 * M_PI * i / 400); }
    double mx = -1e30;
    for (int f = 0; f < n_len; f++) {
        /* whisper.cpp counts frames up to (n + 200) / 160 as audio; past that, input is zero */
        const bool audio = f <= (n + pad) / 160;
        for (int k = 0; k < 201; k++) {
            double re = 0, im = 0;
            if (audio) for (int j = 0; j < 400; j++) {
                const int64_t idx = (int64_t) f * 160 + j;
                const double v = idx < n + pad ? hann[j] * s[idx] : 0.0;   /* the frame stops at the audio's end */
                re += v * cs[(k * j) % 400];
                im -= v * sn[(k * j) % 400];
            }
            pw[k] = re * re + im * im;
        }
        for (int j = 0; j < n_mel; j++) {
            double sum = 0;
            for (int k = 0; k < 201; k++) sum += pw[k] * fb[j * 201 + k];
            const double v = log10(sum > 1e-10 ? sum : 1e-10);
            m[(size_t) j * n_len + f] = v;
            if (v > mx) mx = v;
        }
    }
    for (size_t i = 0; i < (size_t) n_mel * n_len; i++) m[i] = ((m[i] < mx - 8 ? mx - 8 : m[i]) + 4) / 4;
    free(s);
    *n_len_out = n_len;
    return m;
}

static void check_mel(const char * what, const float * x, int64_t n, const float * fb) {
    float * mel = NULL;
    int n_len = 0, n_org = 0, rn = 0;
    CHECK(kiln_whisper_log_mel(x, n, fb, 80, 201, &mel, &n_len, &n_org), "%s: mel", what);
    if (!mel) return;
    double * ref = mel_ref(x, n, fb, 80, &rn);
    CHECK(rn == n_len && n_len == (int) ((n + 480000) / 160) && n_org == (int) (1 + (n + 200 - 400) / 160), "%s: frame counts %d %d", what, n_len, n_org);
    double md = 0;
    for (size_t i = 0; i < (size_t) 80 * n_len; i++) { const double d = fabs(mel[i] - ref[i]); if (d > md) md = d; }
    printf("  mel %s: %d frames, max |kiln - double reference| = %.2e\n", what, n_len, md);
    CHECK(md <= 1e-5, "%s: max diff %.3e > 1e-5", what, md);
    free(mel);
    free(ref);
}

static void test_mel(void) {
    tu_case = "mel";
    size_t n;
    uint8_t * b = write_model(TINY, 1, 64, 3, &n);
    struct kiln_whisper * w = b ? kiln_whisper_load_mem(b, n, 1) : NULL;
    free(b);
    CHECK(w != NULL, "model for the filterbank");
    if (!w) return;
    const float * fb = kiln_whisper_mel_filters(w, NULL, NULL);
    struct kiln_wav wav;
    CHECK(kiln_wav_read_file(JFK, &wav), "jfk.wav");
    check_mel("jfk 4 s", wav.samples, 64000, fb);
    check_mel("jfk 11 s", wav.samples, wav.n_samples, fb);
    float * chirp = (float *) malloc(48000 * sizeof(float));
    for (int i = 0; i < 48000; i++) { const double t = i / 16000.0; chirp[i] = (float) (0.3 * sin(2 * M_PI * (100 * t + 1200 * t * t))); }
    check_mel("chirp 3 s", chirp, 48000, fb);
    check_mel("150 samples", chirp + 1000, 150, fb);
    check_mel("1 sample", chirp + 1000, 1, fb);
    float * mel = NULL;
    int nl, no;
    CHECK(kiln_whisper_log_mel(NULL, 0, fb, 80, 201, &mel, &nl, &no) && nl == 3000, "empty input: 3000 frames of padding");
    free(mel);
    CHECK(!kiln_whisper_log_mel(chirp, 100, fb, 80, 200, &mel, &nl, &no), "n_fft 200 refused");
    free(chirp);
    kiln_wav_free(&wav);
    kiln_whisper_free(w);
}

/* ------------------------------------------------------------- decoding */

static void test_decode(void) {
    tu_case = "decode";
    size_t n;
    uint8_t * b = write_model(TINY, 1, 64, 3, &n);
    struct kiln_whisper * w = b ? kiln_whisper_load_mem(b, n, 1) : NULL;
    free(b);
    struct kiln_wav wav;
    if (!w || !kiln_wav_read_file(JFK, &wav)) { CHECK(0, "model / audio"); kiln_whisper_free(w); return; }
    struct kiln_whisper_params p = kiln_whisper_default_params();
    p.n_threads = 1;
    p.temperature_inc = 0.0f;   /* greedy at temperature 0 only: no sampling */
    CHECK(kiln_whisper_full(w, &p, wav.samples, wav.n_samples) == 0, "full, 1 thread: %s", kiln_last_error());
    const int ns = kiln_whisper_n_segments(w);
    CHECK(ns > 0, "segments");
    char * texts[64] = { 0 };
    int64_t times[64][2];
    const struct kiln_whisper_tokens * tk = kiln_whisper_get_tokens(w);
    for (int i = 0; i < ns && i < 64; i++) {
        const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
        texts[i] = strdup(s->text);
        times[i][0] = s->t0; times[i][1] = s->t1;
        char buf[8192];
        size_t o = 0;
        for (int k = 0; k < s->n_tokens; k++) {
            if (s->tokens[k].id >= tk->eot) continue;
            size_t len;
            const char * t = kiln_whisper_token_text(w, s->tokens[k].id, &len);
            if (o + len < sizeof buf) { memcpy(buf + o, t, len); o += len; }
        }
        buf[o] = 0;
        CHECK(strcmp(buf, s->text) == 0, "segment %d text is its tokens' text", i);
        CHECK(s->t0 >= 0 && s->t1 >= 0 && s->t1 <= 3000, "segment %d times %lld-%lld within the 30 s window", i, (long long) s->t0, (long long) s->t1);
    }
    p.n_threads = 3;
    CHECK(kiln_whisper_full(w, &p, wav.samples, wav.n_samples) == 0, "full, 3 threads");
    CHECK(kiln_whisper_n_segments(w) == ns, "same segment count with 3 threads");
    for (int i = 0; i < ns && i < 64; i++) {
        const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
        CHECK(s && strcmp(s->text, texts[i]) == 0 && s->t0 == times[i][0] && s->t1 == times[i][1], "segment %d equal with 3 threads", i);
        free(texts[i]);
    }
    /* bad arguments are errors, not crashes */
    int32_t bad = 60000;
    float lg[4];
    CHECK(!kiln_whisper_decode(w, &bad, 1, 0, lg), "token id out of range refused");
    int32_t ok = tk->sot;
    CHECK(!kiln_whisper_decode(w, &ok, 1, 448, lg), "position past the text context refused");
    p.language = "xx";
    CHECK(kiln_whisper_full(w, &p, wav.samples, wav.n_samples) == -1 && strstr(kiln_last_error(), "language"), "unknown language refused");
    p.language = "en";
    p.vad = true;
    CHECK(kiln_whisper_full(w, &p, wav.samples, wav.n_samples) == -1 && strstr(kiln_last_error(), "VAD"), "vad without a model refused");
    p.vad = false;
    p.strategy = KILN_WHISPER_BEAM_SEARCH;
    p.beam_size = 9;
    CHECK(kiln_whisper_full(w, &p, wav.samples, wav.n_samples) == -1 && strstr(kiln_last_error(), "decoders"), "9 beams refused");
    kiln_whisper_free(w);

    /* beam search with the fallback: the same segments with 1 and 3 threads (fresh models: decoder 0's
     * generator carries over from one whisper_full to the next, as in whisper.cpp) */
    b = write_model(TINY, 1, 64, 3, &n);
    char * first[64] = { 0 };
    int n_first = -1;
    for (int run = 0; run < 2 && b; run++) {
        w = kiln_whisper_load_mem(b, n, 1);
        if (!w) { CHECK(0, "model"); break; }
        p = kiln_whisper_default_params();
        p.strategy = KILN_WHISPER_BEAM_SEARCH;
        p.n_threads = run ? 3 : 1;
        p.temperature_inc = 0.5f;   /* temperatures 0 (5 beams), 0.5 and 1.0 (5 samples each) */
        CHECK(kiln_whisper_full(w, &p, wav.samples, 16000 * 4) == 0, "beam search, %d threads: %s", p.n_threads, kiln_last_error());
        const int m = kiln_whisper_n_segments(w);
        if (run == 0) n_first = m;
        else CHECK(m == n_first, "beam: %d segments with 3 threads, %d with 1", m, n_first);
        for (int i = 0; i < m && i < 64; i++) {
            const char * t = kiln_whisper_get_segment(w, i)->text;
            if (run == 0) first[i] = strdup(t);
            else CHECK(first[i] && strcmp(first[i], t) == 0, "beam: segment %d equal with 3 threads", i);
        }
        kiln_whisper_free(w);
    }
    for (int i = 0; i < 64; i++) free(first[i]);
    free(b);
    kiln_wav_free(&wav);
}

/* One decoder batch of several cache slots (whisper_decode_slots, what every beam / best-of step
 * runs) against the same steps one slot at a time (kiln_whisper_decode in that slot) on a second
 * copy of the model: every row's logits equal bit for bit, for F32, F16, Q8_0 and Q5_0 weights,
 * 1 and 3 threads, slots in any order and with gaps; the caches the two leave are equal too. */
static void test_decode_batch(void) {
    tu_case = "decode batch";
    struct kiln_wav wav;
    if (!kiln_wav_read_file(JFK, &wav)) { CHECK(0, "audio"); return; }
    static const int ftypes[] = { 0, 1, 7, 8 };
    for (int fi = 0; fi < 4; fi++) {
        size_t n;
        uint8_t * b = write_model(TINY, ftypes[fi], 64, 3, &n);
        struct kiln_whisper * wb = b ? kiln_whisper_load_mem(b, n, fi % 2 ? 3 : 1) : NULL;
        struct kiln_whisper * ws = b ? kiln_whisper_load_mem(b, n, 1) : NULL;
        free(b);
        float * mel = NULL;
        int n_len = 0, n_len_org = 0;
        if (!wb || !ws || !kiln_whisper_log_mel(wav.samples, wav.n_samples, wb->filters, wb->n_mel_f, wb->n_fft_f, &mel, &n_len, &n_len_org)) {
            CHECK(0, "ftype %d: model / mel", ftypes[fi]);
            kiln_whisper_free(wb); kiln_whisper_free(ws);
            continue;
        }
        const int nv = wb->n_vocab, ns = 5;
        const struct kiln_whisper_tokens * tk = kiln_whisper_get_tokens(wb);
        float * lb = (float *) malloc((size_t) ns * nv * sizeof(float)), * ls = (float *) malloc((size_t) nv * sizeof(float));
        float * rows[5];
        for (int i = 0; i < ns; i++) rows[i] = lb + (size_t) i * nv;
        const int32_t prompt[3] = { tk->sot, tk->sot + 1, tk->transcribe };
        bool ok = lb && ls && whisper_kv_slots(wb, ns) && whisper_kv_slots(ws, ns);
        for (int m = 0; ok && m < 2; m++) {
            struct kiln_whisper * w = m ? ws : wb;
            ok = kiln_whisper_encode(w, mel, n_len, 0) && kiln_whisper_decode(w, prompt, 3, 0, ls);
            for (int j = 1; ok && j < ns; j++) whisper_kv_copy(w, j, 0, 3);
        }
        CHECK(ok, "ftype %d: prompt: %s", ftypes[fi], kiln_last_error());
        /* steps: all five slots, then slot 1 gone and the rest in another order, then two slots */
        static const int order[3][5] = { { 0, 1, 2, 3, 4 }, { 4, 0, 3, 2, -1 }, { 3, 0, -1, -1, -1 } };
        int n_equal = 0, n_rows = 0, n_distinct = 0;
        for (int step = 0; ok && step < 6; step++) {
            const int * sl = order[step / 2];
            int nb = 0;
            int32_t tok[5];
            while (nb < 5 && sl[nb] >= 0) { tok[nb] = 220 + 97 * sl[nb] + 13 * step; nb++; }
            ok = whisper_decode_slots(wb, tok, sl, nb, 3 + step, rows);
            CHECK(ok, "ftype %d step %d: batch of %d: %s", ftypes[fi], step, nb, kiln_last_error());
            for (int r = 0; ok && r < nb; r++) {
                whisper_kv_use(ws, sl[r]);
                ok = kiln_whisper_decode(ws, &tok[r], 1, 3 + step, ls);
                whisper_kv_use(ws, 0);
                CHECK(ok, "ftype %d step %d slot %d: %s", ftypes[fi], step, sl[r], kiln_last_error());
                n_rows++;
                if (ok && memcmp(ls, rows[r], (size_t) nv * sizeof(float)) == 0) n_equal++;
                if (r > 0 && memcmp(rows[r], rows[0], (size_t) nv * sizeof(float)) != 0) n_distinct++;
            }
        }
        printf("  decode batch ftype %d: %d of %d batched rows equal the one-slot steps bit for bit\n", ftypes[fi], n_equal, n_rows);
        CHECK(ok && n_equal == n_rows, "ftype %d: %d of %d batched rows equal the one-slot steps bit for bit", ftypes[fi], n_equal, n_rows);
        CHECK(n_distinct > 0, "ftype %d: the rows of a batch differ from one another", ftypes[fi]);
        for (int j = 0; ok && j < ns; j++)
            CHECK(memcmp(wb->k_slot[j]->data, ws->k_slot[j]->data, kiln_nbytes(wb->k_slot[j])) == 0 &&
                  memcmp(wb->v_slot[j]->data, ws->v_slot[j]->data, kiln_nbytes(wb->v_slot[j])) == 0, "ftype %d: cache slot %d equal", ftypes[fi], j);
        /* a slot without a cache, or a position past the text context, is refused */
        const int bad_slot[2] = { 0, 7 }, good[2] = { 0, 1 };
        const int32_t t2[2] = { 220, 221 };
        CHECK(!whisper_decode_slots(wb, t2, bad_slot, 2, 10, rows) && strstr(kiln_last_error(), "slot"), "slot without a cache refused");
        CHECK(!whisper_decode_slots(wb, t2, good, 2, wb->hp.n_text_ctx, rows), "position past the text context refused");
        free(lb); free(ls); free(mel);
        kiln_whisper_free(wb); kiln_whisper_free(ws);
    }
    kiln_wav_free(&wav);
}

/* the generator and tokenizer that whisper.cpp's decoding takes from the C++ library */
static void test_sampling_pieces(void) {
    tu_case = "sampling";
    struct whisper_mt19937 r;
    whisper_mt_seed(&r, 5489u);
    uint32_t x = 0;
    for (int i = 0; i < 10000; i++) x = whisper_mt_next(&r);
    CHECK(x == 4123659995u, "mt19937: the 10000th number of the default seed is the C++ standard's 4123659995 (got %u)", x);
    /* discrete_distribution: zero-probability entries are never drawn; the table's last entry is 1 */
    const float pr[5] = { 0.0f, 0.25f, 0.0f, 0.75f, 0.0f };
    double cp[5];
    CHECK(whisper_discrete_setup(pr, 5, cp) == 0 && cp[4] == 1.0 && cp[1] == 0.25, "cumulative table");
    int count[5] = { 0 };
    for (int i = 0; i < 4000; i++) { const int k = whisper_discrete_draw(&r, cp, 5, NULL); if (k >= 0 && k < 5) count[k]++; }
    CHECK(count[0] == 0 && count[2] == 0 && count[4] == 0 && count[1] > 850 && count[1] < 1150, "draws %d %d %d %d %d", count[0], count[1], count[2], count[3], count[4]);
    const float zero[3] = { 0 };
    CHECK(whisper_discrete_setup(zero, 3, cp) == -1, "all-zero probabilities refused");

    /* the prompt tokenizer: longest vocabulary prefixes of the GPT-2 words; the text comes back whole */
    size_t n;
    uint8_t * b = write_model(TINY, 1, 64, 3, &n);
    struct kiln_whisper * w = b ? kiln_whisper_load_mem(b, n, 1) : NULL;
    free(b);
    if (!w) { CHECK(0, "model"); return; }
    const char * text = "And so, my fellow Americans:  ask not what your country can do for you 1961's";
    int32_t ids[128];
    const int k = whisper_tokenize_prompt(w, text, ids, 128);
    CHECK(k > 10 && k < 40, "%d tokens", k);
    char back[512];
    size_t o = 0;
    for (int i = 0; i < k && i < 128; i++) {
        size_t len;
        const char * t = kiln_whisper_token_text(w, ids[i], &len);
        if (t && o + len < sizeof back) { memcpy(back + o, t, len); o += len; }
    }
    back[o] = 0;
    CHECK(strcmp(back, text) == 0, "tokens spell the prompt: '%s'", back);
    size_t len;
    const char * t1 = k > 1 ? kiln_whisper_token_text(w, ids[1], &len) : NULL;
    CHECK(t1 && len == 3 && memcmp(t1, " so", 3) == 0, "' so' is one token");
    kiln_whisper_free(w);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/kiln-test-whisper-%d.bin", (int) getpid());
    test_loader();
    test_mel();
    test_decode();
    test_decode_batch();
    test_sampling_pieces();
    remove(g_tmp);
    return tu_finish();
}
