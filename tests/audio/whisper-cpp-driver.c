/*
 * whisper-cpp-driver.c — runs whisper.cpp's whisper_full from the prebuilt
 * binding @fugood/node-whisper-linux-x64 (index.node, which exports
 * whisper.cpp's C API) with any whisper_full_params, for the oracle tests.
 * The binding's own JS API fixes the strategy to greedy and has no VAD or
 * token ids in its transcription; this driver calls whisper.cpp directly.
 *
 * Built by tests/audio/whisper-oracle.mjs against the whisper.h shipped in
 * @fugood/whisper.node (the same version as the binary):
 *   cc -I.../whisper.cpp/include -I.../whisper.cpp/ggml/include whisper-cpp-driver.c -ldl
 *
 *   driver INDEX.node MODEL.bin AUDIO.wav [--beam N] [--best-of N] [--temperature T]
 *          [--temperature-inc T] [--prompt TEXT] [--language L] [--translate]
 *          [--no-timestamps] [--threads N] [--vad VAD_MODEL] [--no-fallback] [--carry-initial-prompt]
 *          [--test-logits SEED]   (logits from whisper-test-logits.h instead of the model's)
 * Prints JSON: {"language", "segments": [{"t0","t1","text","tokens":[id...]}]}
 * (t0/t1 in centiseconds, after whisper.cpp's VAD time mapping when --vad).
 */
#include "whisper.h"
#include "whisper-test-logits.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SYM(name) static __typeof__(&name) p_##name;
SYM(whisper_init_from_file_with_params)
SYM(whisper_context_default_params)
SYM(whisper_full_default_params)
SYM(whisper_full)
SYM(whisper_full_n_segments)
SYM(whisper_full_get_segment_t0)
SYM(whisper_full_get_segment_t1)
SYM(whisper_full_get_segment_text)
SYM(whisper_full_n_tokens)
SYM(whisper_full_get_token_id)
SYM(whisper_full_lang_id)
SYM(whisper_lang_str)
SYM(whisper_free)
SYM(whisper_log_set)
SYM(whisper_token_eot)
SYM(whisper_n_vocab)
SYM(whisper_token_beg)

static void quiet(enum ggml_log_level level, const char * text, void * user) {
    (void) level; (void) user;
    if (getenv("WHISPER_DRIVER_LOG")) fputs(text, stderr);   /* whisper.cpp's log, for debugging a comparison */
}

/* 16-bit PCM mono WAV -> floats (x / 32768, as whisper.cpp's examples read it) */
static float * read_wav(const char * path, int * n) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char * b = malloc((size_t) size);
    if (!b || fread(b, 1, (size_t) size, f) != (size_t) size) { fclose(f); free(b); return NULL; }
    fclose(f);
    long p = 12;
    float * out = NULL;
    while (p + 8 <= size) {
        unsigned len = b[p + 4] | b[p + 5] << 8 | b[p + 6] << 16 | (unsigned) b[p + 7] << 24;
        if (!memcmp(b + p, "data", 4)) {
            if (p + 8 + (long) len > size) len = (unsigned) (size - p - 8);
            *n = (int) (len / 2);
            out = malloc((size_t) *n * sizeof(float) + 1);
            for (int i = 0; i < *n; i++) out[i] = (float) (int16_t) (b[p + 8 + 2 * i] | b[p + 9 + 2 * i] << 8) / 32768.0f;
            break;
        }
        p += 8 + len + (len & 1);
    }
    free(b);
    return out;
}

static uint64_t g_test_seed;
static void test_logits(struct whisper_context * ctx, struct whisper_state * state, const whisper_token_data * tokens, int n_tokens,
                        float * logits, void * user) {
    (void) state; (void) user;
    int32_t ids[1024];
    for (int i = 0; i < n_tokens && i < 1024; i++) ids[i] = tokens[i].id;
    wtl_fill(g_test_seed, ids, n_tokens < 1024 ? n_tokens : 1024, logits, p_whisper_n_vocab(ctx), p_whisper_token_eot(ctx), p_whisper_token_beg(ctx), 3.0f);
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
    if (argc < 4) { fprintf(stderr, "usage: %s INDEX.node MODEL AUDIO.wav [options]\n", argv[0]); return 2; }
    void * h = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 1; }
#define LOAD(name) if (!(p_##name = (__typeof__(p_##name)) dlsym(h, #name))) { fprintf(stderr, "missing %s\n", #name); return 1; }
    LOAD(whisper_init_from_file_with_params) LOAD(whisper_context_default_params) LOAD(whisper_full_default_params)
    LOAD(whisper_full) LOAD(whisper_full_n_segments) LOAD(whisper_full_get_segment_t0) LOAD(whisper_full_get_segment_t1)
    LOAD(whisper_full_get_segment_text) LOAD(whisper_full_n_tokens) LOAD(whisper_full_get_token_id)
    LOAD(whisper_full_lang_id) LOAD(whisper_lang_str) LOAD(whisper_free) LOAD(whisper_log_set)
    LOAD(whisper_token_eot) LOAD(whisper_n_vocab) LOAD(whisper_token_beg)
    p_whisper_log_set(quiet, NULL);

    int beam = 0, best_of = -1, threads = 2;
    float temperature = 0.0f, temperature_inc = 0.2f;
    const char * prompt = NULL, * language = "en", * vad = NULL;
    int translate = 0, no_ts = 0, carry = 0, test_logits_on = 0;
    for (int i = 4; i < argc; i++) {
        const char * a = argv[i], * v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--translate")) { translate = 1; continue; }
        if (!strcmp(a, "--no-timestamps")) { no_ts = 1; continue; }
        if (!strcmp(a, "--carry-initial-prompt")) { carry = 1; continue; }
        if (!strcmp(a, "--no-fallback")) { temperature_inc = 0.0f; continue; }
        if (!strcmp(a, "--beam")) beam = atoi(v);
        else if (!strcmp(a, "--best-of")) best_of = atoi(v);
        else if (!strcmp(a, "--temperature")) temperature = (float) atof(v);
        else if (!strcmp(a, "--temperature-inc")) temperature_inc = (float) atof(v);
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--language")) language = v;
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--vad")) vad = v;
        else if (!strcmp(a, "--test-logits")) { test_logits_on = 1; g_test_seed = strtoull(v, NULL, 10); }
        else { fprintf(stderr, "unknown option %s\n", a); return 2; }
        i++;
    }
    struct whisper_context_params cp = p_whisper_context_default_params();
    cp.use_gpu = false;
    cp.flash_attn = false;   /* as @fugood/whisper.node by default (useFlashAttn: false) */
    struct whisper_context * ctx = p_whisper_init_from_file_with_params(argv[2], cp);
    if (!ctx) { fprintf(stderr, "cannot load %s\n", argv[2]); return 1; }
    int n = 0;
    float * pcm = read_wav(argv[3], &n);
    if (!pcm) { fprintf(stderr, "cannot read %s\n", argv[3]); return 1; }

    struct whisper_full_params p = p_whisper_full_default_params(beam > 0 ? WHISPER_SAMPLING_BEAM_SEARCH : WHISPER_SAMPLING_GREEDY);
    if (beam > 0) p.beam_search.beam_size = beam;
    if (best_of > 0) p.greedy.best_of = best_of;
    p.n_threads = threads;
    p.temperature = temperature;
    p.temperature_inc = temperature_inc;
    p.initial_prompt = prompt;
    p.carry_initial_prompt = carry;
    p.language = language;
    p.translate = translate;
    p.no_timestamps = no_ts;
    p.print_progress = p.print_realtime = p.print_special = false;
    if (vad) { p.vad = true; p.vad_model_path = vad; }
    if (test_logits_on) p.logits_filter_callback = test_logits;
    if (p_whisper_full(ctx, p, pcm, n) != 0) { fprintf(stderr, "whisper_full failed\n"); return 1; }

    printf("{\"language\": ");
    json_str(p_whisper_lang_str(p_whisper_full_lang_id(ctx)));
    printf(", \"segments\": [");
    const int ns = p_whisper_full_n_segments(ctx);
    for (int i = 0; i < ns; i++) {
        printf("%s\n {\"t0\": %lld, \"t1\": %lld, \"text\": ", i ? "," : "", (long long) p_whisper_full_get_segment_t0(ctx, i),
               (long long) p_whisper_full_get_segment_t1(ctx, i));
        json_str(p_whisper_full_get_segment_text(ctx, i));
        printf(", \"tokens\": [");
        for (int k = 0; k < p_whisper_full_n_tokens(ctx, i); k++) printf("%s%d", k ? "," : "", p_whisper_full_get_token_id(ctx, i, k));
        printf("]}");
    }
    printf("]}\n");
    free(pcm);
    p_whisper_free(ctx);
    return 0;
}
