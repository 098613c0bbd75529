/*
 * kiln-whisper-random — writes a whisper.cpp model file with random weights
 * (see kiln_whisper_write_random in kiln-whisper.h): the vocabulary, mel
 * filterbank and context sizes of a template file, the widths given here.
 *
 *   kiln-whisper-random TEMPLATE.bin OUT.bin [--state N] [--head N]
 *        [--audio-layer N] [--text-layer N] [--ftype N] [--seed N] [--logit-std X]
 */
#include "kiln-whisper.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: kiln-whisper-random TEMPLATE.bin OUT.bin [--state 64] [--head 2] [--audio-layer 2] [--text-layer 2]\n"
                        "       [--ftype 1 (0 f32, 1 f16, 2 q4_0, 3 q4_1, 7 q8_0, 8 q5_0, 9 q5_1)] [--seed 1] [--logit-std 2]\n");
        return 2;
    }
    struct kiln_whisper_random_params p = { 64, 2, 2, 2, 1, 1, 2.0f };
    for (int i = 3; i < argc; i++) {
        const char * a = argv[i], * v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "kiln-whisper-random: %s needs a value\n", a); return 2; }
        char * end = NULL;
        if (strcmp(a, "--state") == 0) p.n_state = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--head") == 0) p.n_head = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--audio-layer") == 0) p.n_audio_layer = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--text-layer") == 0) p.n_text_layer = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--ftype") == 0) p.ftype = (int) strtol(v, &end, 10);
        else if (strcmp(a, "--seed") == 0) p.seed = strtoull(v, &end, 10);
        else if (strcmp(a, "--logit-std") == 0) p.logit_std = strtof(v, &end);
        else { fprintf(stderr, "kiln-whisper-random: unknown option %s\n", a); return 2; }
        if (end && *end) { fprintf(stderr, "kiln-whisper-random: bad number '%s' for %s\n", v, a); return 2; }
        i++;
    }
    FILE * f = fopen(argv[1], "rb");
    if (!f) { fprintf(stderr, "kiln-whisper-random: cannot open %s\n", argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void * buf = n > 0 ? malloc((size_t) n) : NULL;
    if (!buf || fread(buf, 1, (size_t) n, f) != (size_t) n) { fclose(f); free(buf); fprintf(stderr, "kiln-whisper-random: cannot read %s\n", argv[1]); return 1; }
    fclose(f);
    const bool ok = kiln_whisper_write_random(buf, (size_t) n, &p, argv[2]);
    free(buf);
    if (!ok) { fprintf(stderr, "kiln-whisper-random: %s\n", kiln_last_error()); return 1; }
    return 0;
}
