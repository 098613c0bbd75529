/*
 * kiln-transcribe — speech to text with a whisper.cpp model file, with
 * whisper.cpp's (whisper-cli's) flag names where they exist.
 *
 *   kiln-transcribe -m MODEL.bin -f AUDIO.wav [options]
 *
 * Prints "[hh:mm:ss.mmm --> hh:mm:ss.mmm]  text" per segment (or the text
 * alone with -nt); -oj / -ojf (whisper-cli's JSON layout), -osrt, -ovtt
 * write OUT.json / OUT.srt / OUT.vtt (-of OUT; AUDIO.wav.ext without -of)
 * or to stdout (-of -). Any WAV rate / channel count is read and resampled
 * to 16 kHz mono. Defaults are whisper-cli's: beam search with 5 beams
 * (-bs 1: greedy), best of 5 samples per fallback temperature, fallback
 * steps of 0.2.
 */
#include "kiln-audio.h"
#include "kiln-whisper.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(void) {
    fprintf(stderr,
        "usage: kiln-transcribe -m MODEL -f AUDIO.wav [options]\n"
        "  -l LANG, --language LANG   spoken language ('auto' to detect) (en)\n"
        "  -tr, --translate           translate to English\n"
        "  -t N, --threads N          threads (4)\n"
        "  -nt, --no-timestamps       no timestamps (text only; decodes without timestamp tokens)\n"
        "  -mc N, --max-context N     tokens of previous text used as context (-1: all)\n"
        "  -bs N, --beam-size N       beam size (5); 1: greedy\n"
        "  -bo N, --best-of N         samples per fallback temperature (5)\n"
        "  -tp T, --temperature T     first temperature (0)\n"
        "  -tpi T, --temperature-inc T  fallback temperature step (0.2)\n"
        "  -nf, --no-fallback         no temperature fallback\n"
        "  -et N, --entropy-thold N   entropy threshold for a decoder's failure (2.4)\n"
        "  -lpt N, --logprob-thold N  average log-prob threshold for fallback (-1)\n"
        "  -nth N, --no-speech-thold N  no-speech threshold (0.6)\n"
        "  --prompt TEXT              initial prompt\n"
        "  --carry-initial-prompt     keep the initial prompt in front of every window\n"
        "  --vad                      transcribe only the speech found by Silero VAD\n"
        "  -vm F, --vad-model F       the VAD model (whisper.cpp's ggml-silero-*.bin)\n"
        "  -vt N, -vspd N, -vsd N, -vmsd N, -vp N, -vo N  VAD threshold, min speech ms, min silence ms,\n"
        "                             max speech s, speech pad ms, samples overlap s (whisper-cli's names)\n"
        "  -sns, --suppress-nst       suppress non-speech tokens\n"
        "  -oj, --output-json         write JSON (whisper-cli's layout)\n"
        "  -osrt, --output-srt        write SubRip subtitles\n"
        "  -ovtt, --output-vtt        write WebVTT subtitles\n"
        "  -ojf, --output-json-full   JSON with each segment's tokens\n"
        "  -of FNAME                  output file without extension ('-': stdout)\n"
        "  -np, --no-prints           print only the results (accepted; nothing else is printed)\n"
        "  -dl, --detect-language     print the detected language and exit\n"
        "  --print-timing             print the transcription time (ms, without loading) to stderr\n"
        "  --isa NAME                 kernel row (scalar, avx2, avx512, ...): compare kernels on a whole model\n");
}

static void ts(char * buf, size_t n, int64_t cs, bool comma) {
    int64_t msec = cs * 10;
    const int64_t hr = msec / 3600000; msec -= hr * 3600000;
    const int64_t mn = msec / 60000; msec -= mn * 60000;
    const int64_t sec = msec / 1000; msec -= sec * 1000;
    snprintf(buf, n, "%02d:%02d:%02d%s%03d", (int) hr, (int) mn, (int) sec, comma ? "," : ".", (int) msec);
}

static void json_str(FILE * f, const char * s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char) s[i];
        if (c == '"') fputs("\\\"", f);
        else if (c == '\\') fputs("\\\\", f);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static const char * model_type(int n_audio_layer) {
    switch (n_audio_layer) {
        case 4: return "tiny"; case 6: return "base"; case 12: return "small"; case 24: return "medium"; case 32: return "large";
        default: return "unknown";
    }
}

static void write_json(FILE * f, struct kiln_whisper * w, const char * model_path, const char * lang, bool translate, bool full) {
    const struct kiln_whisper_hparams * hp = kiln_whisper_get_hparams(w);
    fprintf(f, "{\n\t\"systeminfo\": \"kiln %s\",\n", KILN_VERSION_STRING);
    fprintf(f, "\t\"model\": {\n\t\t\"type\": \"%s\",\n\t\t\"multilingual\": %s,\n\t\t\"vocab\": %d,\n", model_type(hp->n_audio_layer),
            kiln_whisper_is_multilingual(w) ? "true" : "false", hp->n_vocab);
    fprintf(f, "\t\t\"audio\": {\n\t\t\t\"ctx\": %d,\n\t\t\t\"state\": %d,\n\t\t\t\"head\": %d,\n\t\t\t\"layer\": %d\n\t\t},\n",
            hp->n_audio_ctx, hp->n_audio_state, hp->n_audio_head, hp->n_audio_layer);
    fprintf(f, "\t\t\"text\": {\n\t\t\t\"ctx\": %d,\n\t\t\t\"state\": %d,\n\t\t\t\"head\": %d,\n\t\t\t\"layer\": %d\n\t\t},\n",
            hp->n_text_ctx, hp->n_text_state, hp->n_text_head, hp->n_text_layer);
    fprintf(f, "\t\t\"mels\": %d,\n\t\t\"ftype\": %d\n\t},\n", hp->n_mels, hp->ftype);
    fprintf(f, "\t\"params\": {\n\t\t\"model\": ");
    json_str(f, model_path, strlen(model_path));
    fprintf(f, ",\n\t\t\"language\": \"%s\",\n\t\t\"translate\": %s\n\t},\n", lang, translate ? "true" : "false");
    fprintf(f, "\t\"result\": {\n\t\t\"language\": \"%s\"", kiln_whisper_lang_str(kiln_whisper_full_lang_id(w)));
    if (full) {
        float g, d;
        kiln_whisper_full_margins(w, &g, &d);
        fprintf(f, ",\n\t\t\"min_gap\": %.6g,\n\t\t\"min_draw\": %.6g", isfinite(g) ? g : 1e30, isfinite(d) ? d : 1e30);
    }
    fprintf(f, "\n\t},\n\t\"transcription\": [\n");
    const int ns = kiln_whisper_n_segments(w);
    for (int i = 0; i < ns; i++) {
        const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
        char a[32], b[32];
        ts(a, sizeof a, s->t0, true); ts(b, sizeof b, s->t1, true);
        fprintf(f, "\t\t{\n\t\t\t\"timestamps\": {\n\t\t\t\t\"from\": \"%s\",\n\t\t\t\t\"to\": \"%s\"\n\t\t\t},\n", a, b);
        fprintf(f, "\t\t\t\"offsets\": {\n\t\t\t\t\"from\": %lld,\n\t\t\t\t\"to\": %lld\n\t\t\t},\n\t\t\t\"text\": ", (long long) s->t0 * 10, (long long) s->t1 * 10);
        json_str(f, s->text, strlen(s->text));
        if (full) {
            fprintf(f, ",\n\t\t\t\"tokens\": [\n");
            for (int k = 0; k < s->n_tokens; k++) {
                size_t len;
                const char * tx = kiln_whisper_token_text(w, s->tokens[k].id, &len);
                fprintf(f, "\t\t\t\t{\n\t\t\t\t\t\"text\": ");
                json_str(f, tx, len);
                const float tm = s->tokens[k].ts_margin;
                fprintf(f, ",\n\t\t\t\t\t\"id\": %d,\n\t\t\t\t\t\"p\": %.6f,\n\t\t\t\t\t\"plog\": %.6f,\n\t\t\t\t\t\"gap\": %.6f,\n\t\t\t\t\t\"ts_margin\": %.6f\n\t\t\t\t}%s\n",
                        s->tokens[k].id, s->tokens[k].p, s->tokens[k].plog, isfinite(s->tokens[k].gap) ? s->tokens[k].gap : 1e30,
                        isfinite(tm) ? tm : 1e30, k + 1 < s->n_tokens ? "," : "");
            }
            fprintf(f, "\t\t\t]");
        }
        fprintf(f, "\n\t\t}%s\n", i + 1 < ns ? "," : "");
    }
    fprintf(f, "\t]\n}\n");
}

static void write_srt(FILE * f, const struct kiln_whisper * w, bool vtt) {
    if (vtt) fprintf(f, "WEBVTT\n\n");
    for (int i = 0; i < kiln_whisper_n_segments(w); i++) {
        const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
        char a[32], b[32];
        ts(a, sizeof a, s->t0, !vtt); ts(b, sizeof b, s->t1, !vtt);
        if (!vtt) fprintf(f, "%d\n", i + 1);
        fprintf(f, "%s --> %s\n%s\n\n", a, b, s->text);
    }
}

/* opens OUT.ext (-of OUT), AUDIO.ext without -of, or stdout for -of - */
static FILE * open_out(const char * of, const char * audio, const char * ext, bool * is_stdout) {
    *is_stdout = of && strcmp(of, "-") == 0;
    if (*is_stdout) return stdout;
    char path[4096];
    snprintf(path, sizeof path, "%s%s", of ? of : audio, ext);
    FILE * f = fopen(path, "w");
    if (!f) fprintf(stderr, "kiln-transcribe: cannot write %s\n", path);
    return f;
}

int main(int argc, char ** argv) {
    const char * model = NULL, * audio = NULL, * of = NULL;
    struct kiln_whisper_params p = kiln_whisper_default_params();
    bool oj = false, ojf = false, osrt = false, ovtt = false, no_prints = false, detect_only = false, timing = false, no_fallback = false, stdout_used = false;
    int beam_size = 5;
    const char * vad_model = NULL;
    p.strategy = KILN_WHISPER_BEAM_SEARCH;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        if (!strcmp(a, "-tr") || !strcmp(a, "--translate")) { p.translate = true; continue; }
        if (!strcmp(a, "-nt") || !strcmp(a, "--no-timestamps")) { p.no_timestamps = true; continue; }
        if (!strcmp(a, "-sns") || !strcmp(a, "--suppress-nst")) { p.suppress_nst = true; continue; }
        if (!strcmp(a, "-oj") || !strcmp(a, "--output-json")) { oj = true; continue; }
        if (!strcmp(a, "-ojf") || !strcmp(a, "--output-json-full")) { oj = ojf = true; continue; }
        if (!strcmp(a, "-osrt") || !strcmp(a, "--output-srt")) { osrt = true; continue; }
        if (!strcmp(a, "-ovtt") || !strcmp(a, "--output-vtt")) { ovtt = true; continue; }
        if (!strcmp(a, "-nf") || !strcmp(a, "--no-fallback")) { no_fallback = true; continue; }
        if (!strcmp(a, "--vad")) { p.vad = true; continue; }
        if (!strcmp(a, "--carry-initial-prompt")) { p.carry_initial_prompt = true; continue; }
        if (!strcmp(a, "-np") || !strcmp(a, "--no-prints")) { no_prints = true; continue; }
        if (!strcmp(a, "-dl") || !strcmp(a, "--detect-language")) { detect_only = true; continue; }
        if (!strcmp(a, "--print-timing")) { timing = true; continue; }
        if (!v) { fprintf(stderr, "kiln-transcribe: %s needs a value (or is unknown)\n", a); usage(); return 2; }
        char * end = NULL;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) audio = v;
        else if (!strcmp(a, "-of") || !strcmp(a, "--output-file")) of = v;
        else if (!strcmp(a, "-l") || !strcmp(a, "--language")) p.language = v;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) p.n_threads = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-mc") || !strcmp(a, "--max-context")) { p.n_max_text_ctx = (int) strtol(v, &end, 10); if (p.n_max_text_ctx < 0) p.n_max_text_ctx = 16384; }
        else if (!strcmp(a, "-bs") || !strcmp(a, "--beam-size")) beam_size = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-bo") || !strcmp(a, "--best-of")) p.best_of = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-tp") || !strcmp(a, "--temperature")) p.temperature = strtof(v, &end);
        else if (!strcmp(a, "-tpi") || !strcmp(a, "--temperature-inc")) p.temperature_inc = strtof(v, &end);
        else if (!strcmp(a, "-et") || !strcmp(a, "--entropy-thold")) p.entropy_thold = strtof(v, &end);
        else if (!strcmp(a, "-lpt") || !strcmp(a, "--logprob-thold")) p.logprob_thold = strtof(v, &end);
        else if (!strcmp(a, "-nth") || !strcmp(a, "--no-speech-thold")) p.no_speech_thold = strtof(v, &end);
        else if (!strcmp(a, "--prompt")) p.initial_prompt = v;
        else if (!strcmp(a, "--isa")) {
            kiln_cpu_force_isa(v);
            if (strcmp(kiln_cpu_isa(), v) != 0) { fprintf(stderr, "kiln-transcribe: --isa %s: %s\n", v, kiln_last_error()); return 2; }
        }
        else if (!strcmp(a, "-vm") || !strcmp(a, "--vad-model")) vad_model = v;
        else if (!strcmp(a, "-vt") || !strcmp(a, "--vad-threshold")) p.vad_params.threshold = strtof(v, &end);
        else if (!strcmp(a, "-vspd") || !strcmp(a, "--vad-min-speech-duration-ms")) p.vad_params.min_speech_ms = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-vsd") || !strcmp(a, "--vad-min-silence-duration-ms")) p.vad_params.min_silence_ms = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-vmsd") || !strcmp(a, "--vad-max-speech-duration-s")) p.vad_params.max_speech_s = strtof(v, &end);
        else if (!strcmp(a, "-vp") || !strcmp(a, "--vad-speech-pad-ms")) p.vad_params.speech_pad_ms = (int) strtol(v, &end, 10);
        else if (!strcmp(a, "-vo") || !strcmp(a, "--vad-samples-overlap")) p.vad_params.samples_overlap = strtof(v, &end);
        else { fprintf(stderr, "kiln-transcribe: unknown option %s\n", a); usage(); return 2; }
        if (end && *end) { fprintf(stderr, "kiln-transcribe: bad number '%s' for %s\n", v, a); return 2; }
        i++;
    }
    if (!model || !audio) { usage(); return 2; }
    p.beam_size = beam_size;
    p.strategy = beam_size > 1 ? KILN_WHISPER_BEAM_SEARCH : KILN_WHISPER_GREEDY;
    if (no_fallback) p.temperature_inc = 0.0f;
    if (p.best_of > 8 || p.beam_size > 8) { fprintf(stderr, "kiln-transcribe: at most 8 decoders (-bs, -bo)\n"); return 2; }
    if (p.vad && !vad_model) { fprintf(stderr, "kiln-transcribe: --vad needs -vm VAD_MODEL\n"); return 2; }
    if (p.language && strcmp(p.language, "auto") != 0 && kiln_whisper_lang_id(p.language) < 0) {
        fprintf(stderr, "kiln-transcribe: unknown language '%s'\n", p.language);
        return 2;
    }
    struct kiln_whisper * w = kiln_whisper_load_file(model, p.n_threads);
    if (!w) { fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error()); return 1; }
    if (p.vad) {
        p.vad_model = kiln_vad_load_file(vad_model, 1);
        if (!p.vad_model) { fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error()); kiln_whisper_free(w); return 1; }
    }
    struct kiln_wav wav;
    if (!kiln_wav_read_file(audio, &wav)) { fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error()); kiln_vad_free(p.vad_model); kiln_whisper_free(w); return 1; }
    float * x = wav.samples;
    int64_t n = wav.n_samples;
    float * rs = NULL;
    if (wav.sample_rate != KILN_WHISPER_SAMPLE_RATE) {
        rs = kiln_resample(x, n, wav.sample_rate, KILN_WHISPER_SAMPLE_RATE, &n);
        if (!rs) { fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error()); kiln_wav_free(&wav); kiln_whisper_free(w); return 1; }
        x = rs;
    }
    int rc = 0;
    if (detect_only) {
        float * mel = NULL, probs[128];
        int n_len, n_org;
        int id = -1;
        if (kiln_whisper_log_mel(x, n, kiln_whisper_mel_filters(w, NULL, NULL), kiln_whisper_get_hparams(w)->n_mels, 201, &mel, &n_len, &n_org))
            id = kiln_whisper_detect_language(w, mel, n_len, 0, probs);
        free(mel);
        if (id < 0) { fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error()); rc = 1; }
        else printf("%s %.6f\n", kiln_whisper_lang_str(id), probs[id]);
    } else {
        const int64_t t0 = kiln_time_us();
        if (kiln_whisper_full(w, &p, x, n) != 0) {
            fprintf(stderr, "kiln-transcribe: %s\n", kiln_last_error());
            rc = 1;
        }
        if (timing) fprintf(stderr, "kiln-transcribe: full_ms %.3f\n", (kiln_time_us() - t0) / 1000.0);
    }
    if (rc != 0 || detect_only) {
        /* nothing more to write */
    } else {
        bool to_stdout = false, any_stdout = false;
        if (oj) {
            FILE * f = open_out(of, audio, ".json", &to_stdout);
            if (!f) rc = 1;
            else { write_json(f, w, model, p.language ? p.language : "auto", p.translate, ojf); if (!to_stdout) fclose(f); }
            any_stdout |= to_stdout;
        }
        if (osrt || ovtt) for (int k = 0; k < 2; k++) {
            if (!(k == 0 ? osrt : ovtt)) continue;
            FILE * f = open_out(of, audio, k == 0 ? ".srt" : ".vtt", &to_stdout);
            if (!f) rc = 1;
            else { write_srt(f, w, k == 1); if (!to_stdout) fclose(f); }
            any_stdout |= to_stdout;
        }
        stdout_used = any_stdout;   /* a file format went to stdout: no plain listing after it */
    }
    (void) no_prints;   /* Kiln prints nothing besides the results */
    if (rc == 0 && !detect_only && !stdout_used) {
        for (int i = 0; i < kiln_whisper_n_segments(w); i++) {
            const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
            if (p.no_timestamps) { printf("%s", s->text); continue; }
            char a[32], b[32];
            ts(a, sizeof a, s->t0, false); ts(b, sizeof b, s->t1, false);
            printf("[%s --> %s]  %s\n", a, b, s->text);
        }
        if (p.no_timestamps) printf("\n");
    }
    free(rs);
    kiln_vad_free(p.vad_model);
    kiln_wav_free(&wav);
    kiln_whisper_free(w);
    return rc;
}
