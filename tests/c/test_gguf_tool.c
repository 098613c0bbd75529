/*
 * test_gguf_tool.c — the kiln-gguf command-line tool: `info` output and exit
 * codes, `copy` byte-identical for every GGUF file in the repository, errors
 * on bad files. The tool is found next to this test: <build>/bin/kiln-gguf.
 */
#include "util/test_util.h"

#include <stdlib.h>
#include <string.h>

#if defined(__EMSCRIPTEN__)
int main(void) {
    printf("kiln-gguf is a native tool: not tested under wasm\n");
    CHECK(1, "skipped");
    return tu_finish();
}
#else

#include <sys/wait.h>
#include <unistd.h>

static char tool[1024];
static char bad[64], outf[64]; /* temporary files, named with the pid */

/* runs `kiln-gguf ARGS 2>&1`, returns its exit status and output (malloc'd) */
static int run(const char * args, char ** out) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1", tool, args);
    FILE * p = popen(cmd, "r");
    size_t cap = 1 << 16, n = 0;
    char * buf = (char *) malloc(cap);
    if (p) {
        size_t got;
        while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
            n += got;
            if (n + 1 == cap) buf = (char *) realloc(buf, cap *= 2);
        }
    }
    buf[n] = 0;
    *out = buf;
    const int st = p ? pclose(p) : -1;
    return (st >= 0 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

static unsigned char * slurp(const char * path, size_t * size) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char * p = (unsigned char *) malloc(n > 0 ? (size_t) n : 1);
    if (fread(p, 1, (size_t) n, f) != (size_t) n) { free(p); p = NULL; }
    fclose(f);
    *size = (size_t) n;
    return p;
}

int main(int argc, char ** argv) {
    (void) argc;
    const char * slash = strrchr(argv[0], '/');
    snprintf(tool, sizeof tool, "%.*s/../bin/kiln-gguf", slash ? (int)(slash - argv[0]) : 1, slash ? argv[0] : ".");
    FILE * t = fopen(tool, "rb");
    CHECK(t != NULL, "the tool is built at %s", tool);
    if (!t) return tu_finish();
    fclose(t);

    snprintf(bad, sizeof bad, "test_gguf_tool_bad_%d.gguf", (int) getpid());
    snprintf(outf, sizeof outf, "test_gguf_tool_out_%d.gguf", (int) getpid());
    char args[512];
    tu_case = "info";
    char * out = NULL;
    int rc = run("info models/stories260K.gguf", &out);
    CHECK(rc == 0, "info exits 0, got %d", rc);
    const char * want[] = {
        "version: 3", "alignment: 32", "data offset: 14176", "metadata: 19 keys", "tensors: 48",
        "llama.block_count", "u32 = 5", "llama.embedding_length", "u32 = 64",
        "arr[str,512] = [\"<unk>\", \"<s>\", \"</s>\", \"<0x00>\", \"<0x01>\", ...]",
        "arr[i32,512] = [2, 3, 3, 6, 6, ...]", "str = \"llama\"", "f32 = 9.99999975e-06",
        "token_embd.weight", "[64, 512]", "blk.4.ffn_norm.weight", "1170944",
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        CHECK(strstr(out, want[i]) != NULL, "info output has '%s'", want[i]);
    }
    free(out);
    rc = run("info tests/data/vocab/ggml-vocab-phi-3.gguf", &out);
    CHECK(rc == 0 && strstr(out, "arr[str,32064]") && strstr(out, "tokenizer.chat_template") && strstr(out, "(269 bytes)") &&
          strstr(out, "tensors: 0"), "vocab info (long string summarized)");
    free(out);

    tu_case = "bad files";
    FILE * f = fopen(bad, "wb");
    fwrite("GGUF\x01\x00\x00\x00", 1, 8, f);
    fclose(f);
    snprintf(args, sizeof args, "info %s", bad);
    rc = run(args, &out);
    CHECK(rc == 1 && strstr(out, "version 1 is not supported") && strstr(out, "at byte offset 4"), "v1 file: exit %d, %s", rc, out);
    free(out);
    f = fopen(bad, "wb");
    fwrite("GGML", 1, 4, f);
    fclose(f);
    snprintf(args, sizeof args, "info %s", bad);
    rc = run(args, &out);
    CHECK(rc == 1 && strstr(out, "bad magic"), "bad magic: exit %d, %s", rc, out);
    free(out);
    snprintf(args, sizeof args, "copy %s %s", bad, outf);
    rc = run(args, &out);
    CHECK(rc == 1 && strstr(out, "bad magic"), "copy of a bad file fails: exit %d", rc);
    free(out);
    rc = run("info no-such-file.gguf", &out);
    CHECK(rc == 1 && strstr(out, "cannot open"), "missing file");
    free(out);
    rc = run("", &out);
    CHECK(rc == 2 && strstr(out, "usage"), "usage: exit %d", rc);
    free(out);

    tu_case = "copy";
    const char * files[] = {
        "models/stories260K.gguf", "tests/data/vocab/ggml-vocab-falcon.gguf", "tests/data/vocab/ggml-vocab-gpt-2.gguf",
        "tests/data/vocab/ggml-vocab-llama-spm.gguf", "tests/data/vocab/ggml-vocab-phi-3.gguf",
        "tests/data/vocab/ggml-vocab-starcoder.gguf",
    };
    for (size_t i = 0; i < 6; i++) {
        snprintf(args, sizeof args, "copy %s %s", files[i], outf);
        rc = run(args, &out);
        CHECK(rc == 0, "copy %s: exit %d %s", files[i], rc, out);
        free(out);
        size_t na = 0, nb = 0;
        unsigned char * a = slurp(files[i], &na);
        unsigned char * b = slurp(outf, &nb);
        CHECK(a && b && na == nb && memcmp(a, b, na) == 0, "copy of %s is byte-identical (%zu vs %zu bytes)", files[i], na, nb);
        free(a);
        free(b);
    }
    remove(bad);
    remove(outf);
    return tu_finish();
}
#endif
