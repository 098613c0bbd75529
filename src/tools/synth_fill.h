/* synth_fill.h — shared by kiln-synth-model and bench-make_synthetic, which
 * write random-weight models: a new GGUF holding a vocabulary file's
 * metadata, and the filling of a weight tensor row by row with
 * offset + scale * rnd(), converted to the tensor's type. */
#ifndef KILN_TOOLS_SYNTH_FILL_H
#define KILN_TOOLS_SYNTH_FILL_H

#include "kiln.h"
#include "kiln-gguf.h"

#include <stdio.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* an empty GGUF with the metadata of the vocabulary file at path and its token count, or NULL (message on stderr) */
static inline struct kiln_gguf_context * synth_vocab_gguf(const char * path, const char * who, int64_t * n_vocab) {
    struct kiln_gguf_init_params ip = { .no_alloc = true, .ctx = NULL };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file(path, ip);
    if (!src) { fprintf(stderr, "%s: %s: %s\n", who, path, kiln_last_error()); return NULL; }
    const int64_t tk = kiln_gguf_find_key(src, "tokenizer.ggml.tokens");
    if (tk < 0) { fprintf(stderr, "%s: %s has no tokenizer.ggml.tokens\n", who, path); kiln_gguf_free(src); return NULL; }
    *n_vocab = (int64_t) kiln_gguf_get_arr_n(src, tk);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_kv(g, src);
    kiln_gguf_free(src);
    return g;
}

/* Grows the vocabulary in g (a byte-level BPE one, GPT-2's: ids past 256
 * are multi-byte merges) to n tokens, so a synthetic model can have a
 * Qwen-sized output layer (151936): each added token is two of the
 * vocabulary's merged tokens joined (pseudo-random, distinct from each
 * other in practice), of normal type; the merges stay those of the file,
 * so the tokenizer never produces the added ids but sampling and grammar
 * filtering see them as any other. *n_vocab becomes n. false (message on
 * stderr) when g has no token list or too few tokens to draw from. */
static inline bool synth_grow_vocab(struct kiln_gguf_context * g, int64_t n, int64_t * n_vocab, const char * who) {
    const int64_t tk = kiln_gguf_find_key(g, "tokenizer.ggml.tokens");
    const int64_t n0 = tk >= 0 ? (int64_t) kiln_gguf_get_arr_n(g, tk) : 0;
    if (n <= n0) return true;
    if (n0 < 1024) { fprintf(stderr, "%s: cannot grow a vocabulary of %lld tokens\n", who, (long long) n0); return false; }
    const int64_t tt = kiln_gguf_find_key(g, "tokenizer.ggml.token_type");
    char ** toks = calloc((size_t) n, sizeof(char *));
    int32_t * types = malloc(sizeof(int32_t) * (size_t) n);
    if (!toks || !types) { fprintf(stderr, "%s: out of memory\n", who); free(toks); free(types); return false; }
    const int32_t * t0 = tt >= 0 && (int64_t) kiln_gguf_get_arr_n(g, tt) == n0 ? kiln_gguf_get_arr_data(g, tt) : NULL;
    bool ok = true;
    for (int64_t i = 0; i < n && ok; i++) {
        if (i < n0) {
            const char * a = kiln_gguf_get_arr_str(g, tk, (size_t) i);
            const size_t la = strlen(a);
            toks[i] = malloc(la + 1);
            if (toks[i]) memcpy(toks[i], a, la + 1);
            types[i] = t0 ? t0[i] : 1;
        } else {
            const char * a = kiln_gguf_get_arr_str(g, tk, 256 + (size_t) (i * 7919) % (size_t) (n0 - 512));
            const char * b = kiln_gguf_get_arr_str(g, tk, 256 + (size_t) (i * 104729) % (size_t) (n0 - 512));
            const size_t la = strlen(a), lb = strlen(b);
            toks[i] = malloc(la + lb + 1);
            if (toks[i]) { memcpy(toks[i], a, la); memcpy(toks[i] + la, b, lb + 1); }
            types[i] = 1;
        }
        ok = toks[i] != NULL;
    }
    ok = ok && kiln_gguf_set_arr_str(g, "tokenizer.ggml.tokens", (const char **) toks, (size_t) n) &&
         kiln_gguf_set_arr_data(g, "tokenizer.ggml.token_type", KILN_GGUF_TYPE_INT32, types, (size_t) n);
    for (int64_t i = 0; i < n; i++) free(toks[i]);
    free(toks);
    free(types);
    if (!ok) { fprintf(stderr, "%s: growing the vocabulary to %lld tokens failed\n", who, (long long) n); return false; }
    *n_vocab = n;
    return true;
}

static inline bool synth_fill(struct kiln_tensor * t, float scale, float offset, float (*rnd)(void)) {
    const int64_t ne0 = t->ne[0], rows = kiln_nrows(t);
    float * row = malloc(sizeof(float) * (size_t) ne0);
    if (!row) return false;
    const struct kiln_type_traits * tr = kiln_get_type_traits(t->type);
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < ne0; j++) row[j] = offset + scale * rnd();
        char * dst = (char *) t->data + i * kiln_row_size(t->type, ne0);
        if (t->type == KILN_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) ne0);
        else tr->from_float_ref(row, dst, ne0);
    }
    free(row);
    return true;
}

/* uniform in [-1, 1) from a xorshift state */
static inline float synth_rand(uint64_t * s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float) ((*s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* the type named as kiln_type_name() names it, or KILN_TYPE_COUNT */
static inline enum kiln_type synth_type_by_name(const char * name) {
    for (int t = 0; t < KILN_TYPE_COUNT; t++) {
        if (kiln_type_is_valid(t) && !strcmp(kiln_type_name((enum kiln_type) t), name)) return (enum kiln_type) t;
    }
    return KILN_TYPE_COUNT;
}

/* "<arch>.<key>" = v */
static inline void synth_set_u32(struct kiln_gguf_context * g, const char * arch, const char * key, uint32_t v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    kiln_gguf_set_val_u32(g, k, v);
}

static inline void synth_set_f32(struct kiln_gguf_context * g, const char * arch, const char * key, float v) {
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    kiln_gguf_set_val_f32(g, k, v);
}

/* a [ne0, ne1] tensor (ne1 = 1: a vector) of offset + scale * rnd() in type,
 * named and added to g; exits with a message when out of memory */
static inline void synth_add(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * who, const char * name,
                             enum kiln_type type, int64_t ne0, int64_t ne1, float scale, float offset, float (*rnd)(void)) {
    struct kiln_tensor * t = ne1 == 1 ? kiln_new_tensor_1d(ctx, type, ne0) : kiln_new_tensor_2d(ctx, type, ne0, ne1);
    if (!t || !synth_fill(t, scale, offset, rnd)) { fprintf(stderr, "%s: out of memory at %s\n", who, name); exit(1); }
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(g, t);
}

#endif
