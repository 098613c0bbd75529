/*
 * kiln-whisper-driver.c — the Kiln side of whisper-cpp-driver.c: the same
 * arguments (without INDEX.node) and the same JSON, from kiln_whisper_full,
 * so tests/audio/whisper-decode-oracle.mjs can run both engines with
 * --test-logits (whisper-test-logits.h installed as Kiln's logits_filter).
 * Built by that test against build/libkiln.a.
 *
 *   kiln-whisper-driver MODEL.bin AUDIO.wav [--beam N] [--best-of N] [--temperature T]
 *          [--temperature-inc T] [--prompt TEXT] [--language L] [--translate] [--no-timestamps]
 *          [--threads N] [--vad VAD_MODEL] [--no-fallback] [--carry-initial-prompt] [--test-logits SEED]
 */
#include "kiln-whisper.h"
#include "kiln-audio.h"
#include "whisper-test-logits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t g_test_seed;
static void test_logits(const struct kiln_whisper * w, const struct kiln_whisper_token_data * tokens, int n_tokens, float * logits, void * user) {
    (void) user;
    int32_t ids[1024];
    for (int i = 0; i < n_tokens && i < 1024; i++) ids[i] = tokens[i].id;
    wtl_fill(g_test_seed, ids, n_tokens < 1024 ? n_tokens : 1024, logits, kiln_whisper_n_vocab(w), kiln_whisper_get_tokens(w)->eot, kiln_whisper_get_tokens(w)->beg, 3.0f);
}

static void json_str(const char * s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char) *s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

int main(int argc, char ** argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s MODEL AUDIO.wav [options]\n", argv[0]); return 2; }
    struct kiln_whisper_params p = kiln_whisper_default_params();
    int beam = 0;
    const char * vad = NULL;
    bool test = false;
    p.n_threads = 2;
    for (int i = 3; i < argc; i++) {
        const char * a = argv[i], * v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--translate")) { p.translate = true; continue; }
        if (!strcmp(a, "--no-timestamps")) { p.no_timestamps = true; continue; }
        if (!strcmp(a, "--no-fallback")) { p.temperature_inc = 0.0f; continue; }
        if (!strcmp(a, "--carry-initial-prompt")) { p.carry_initial_prompt = true; continue; }
        if (!strcmp(a, "--beam")) beam = atoi(v);
        else if (!strcmp(a, "--best-of")) p.best_of = atoi(v);
        else if (!strcmp(a, "--temperature")) p.temperature = (float) atof(v);
        else if (!strcmp(a, "--temperature-inc")) p.temperature_inc = (float) atof(v);
        else if (!strcmp(a, "--prompt")) p.initial_prompt = v;
        else if (!strcmp(a, "--language")) p.language = v;
        else if (!strcmp(a, "--threads")) p.n_threads = atoi(v);
        else if (!strcmp(a, "--vad")) vad = v;
        else if (!strcmp(a, "--test-logits")) { test = true; g_test_seed = strtoull(v, NULL, 10); }
        else { fprintf(stderr, "unknown option %s\n", a); return 2; }
        i++;
    }
    if (beam > 0) { p.strategy = KILN_WHISPER_BEAM_SEARCH; p.beam_size = beam; }
    if (test) p.logits_filter = test_logits;
    struct kiln_whisper * w = kiln_whisper_load_file(argv[1], p.n_threads);
    if (!w) { fprintf(stderr, "%s\n", kiln_last_error()); return 1; }
    struct kiln_wav wav;
    if (!kiln_wav_read_file(argv[2], &wav)) { fprintf(stderr, "%s\n", kiln_last_error()); return 1; }
    if (vad) {
        p.vad = true;
        p.vad_model = kiln_vad_load_file(vad, 1);
        if (!p.vad_model) { fprintf(stderr, "%s\n", kiln_last_error()); return 1; }
    }
    if (kiln_whisper_full(w, &p, wav.samples, wav.n_samples) != 0) { fprintf(stderr, "%s\n", kiln_last_error()); return 1; }
    printf("{\"language\": ");
    json_str(kiln_whisper_lang_str(kiln_whisper_full_lang_id(w)));
    printf(", \"segments\": [");
    const int ns = kiln_whisper_n_segments(w);
    for (int i = 0; i < ns; i++) {
        const struct kiln_whisper_segment * s = kiln_whisper_get_segment(w, i);
        printf("%s\n {\"t0\": %lld, \"t1\": %lld, \"text\": ", i ? "," : "", (long long) s->t0, (long long) s->t1);
        json_str(s->text);
        printf(", \"tokens\": [");
        for (int k = 0; k < s->n_tokens; k++) printf("%s%d", k ? "," : "", s->tokens[k].id);
        printf("]}");
    }
    printf("]}\n");
    kiln_vad_free(p.vad_model);
    kiln_wav_free(&wav);
    kiln_whisper_free(w);
    return 0;
}
