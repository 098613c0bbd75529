/*
 * test_embed.c — WordPiece rules and the embedding API on small in-memory
 * GGUFs: BERT's normalization (lowercase, accents, punctuation, CJK,
 * control characters), greedy longest-match with whole-word [UNK], the
 * normalizer keys; pooling (mean / first / last against the per-token
 * states, in double) and L2 normalization; and bad input: missing or
 * misshapen tensors and keys, ids out of range, too many tokens, a small
 * output buffer, decoding calls on an encoder. (The values themselves are
 * compared with llama.cpp's in tests/oracle/embed.mjs.)
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"
#include "util/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define E    8
#define FF   16
#define CTX  16

/* ids: 0 [PAD] 1 [UNK] 2 [CLS] 3 [SEP], then the word pieces */
static const char * const k_tokens[] = {
    "[PAD]", "[UNK]", "[CLS]", "[SEP]",
    "\xe2\x96\x81hello", "\xe2\x96\x81world", "\xe2\x96\x81,", "\xe2\x96\x81!", "\xe2\x96\x81un", "aff", "able",
    "\xe2\x96\x81\xe4\xb8\xad", "\xe2\x96\x81\xe6\x96\x87", "\xe2\x96\x81Hello", "\xe2\x96\x81" "caf\xc3\xa9", "\xe2\x96\x81" "cafe",
    "\xe2\x96\x81" "a", "b",
};
#define NV ((int) (sizeof k_tokens / sizeof k_tokens[0]))

enum { OMIT_NONE = 0, OMIT_TYPES_KEY = 1, OMIT_POS = 2, BAD_SHAPE = 4, BAD_POOLING = 8, NO_LOWER = 16 };

static uint64_t rng = 7;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) ((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static void add_t(struct kiln_gguf_context * g, struct kiln_context * ctx, const char * name, int64_t ne0, int64_t ne1, float sc, float off) {
    struct kiln_tensor * t = ne1 == 1 ? kiln_new_tensor_1d(ctx, KILN_TYPE_F32, ne0) : kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne0, ne1);
    for (int64_t i = 0; i < ne0 * ne1; i++) ((float *) t->data)[i] = off + sc * frand();
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(g, t);
}

/* a one-layer bert GGUF in memory (malloc'd; *size its bytes) */
static void * make_model(int flags, size_t * size) {
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_val_str(g, "general.architecture", "bert");
    kiln_gguf_set_val_str(g, "tokenizer.ggml.model", "bert");
    kiln_gguf_set_arr_str(g, "tokenizer.ggml.tokens", (const char **) k_tokens, NV);
    int32_t types[NV];
    for (int i = 0; i < NV; i++) types[i] = i < 4 ? 3 : 1;
    kiln_gguf_set_arr_data(g, "tokenizer.ggml.token_type", KILN_GGUF_TYPE_INT32, types, NV);
    kiln_gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 2);
    kiln_gguf_set_val_u32(g, "tokenizer.ggml.seperator_token_id", 3);
    kiln_gguf_set_val_u32(g, "tokenizer.ggml.unknown_token_id", 1);
    kiln_gguf_set_val_u32(g, "tokenizer.ggml.padding_token_id", 0);
    if (flags & NO_LOWER) kiln_gguf_set_val_bool(g, "tokenizer.ggml.normalizer.lowercase", false);
    if (!(flags & OMIT_TYPES_KEY)) kiln_gguf_set_val_u32(g, "tokenizer.ggml.token_type_count", 2);
    kiln_gguf_set_val_u32(g, "bert.embedding_length", E);
    kiln_gguf_set_val_u32(g, "bert.block_count", 1);
    kiln_gguf_set_val_u32(g, "bert.attention.head_count", 2);
    kiln_gguf_set_val_u32(g, "bert.feed_forward_length", FF);
    kiln_gguf_set_val_u32(g, "bert.context_length", CTX);
    kiln_gguf_set_val_u32(g, "bert.pooling_type", (flags & BAD_POOLING) ? 7 : 1);
    kiln_gguf_set_val_f32(g, "bert.attention.layer_norm_epsilon", 1e-12f);
    struct kiln_init_params ip = { 1 << 20, NULL, false };
    struct kiln_context * ctx = kiln_init(ip);
    add_t(g, ctx, "token_embd.weight", E, NV, 1.0f, 0.0f);
    add_t(g, ctx, "token_types.weight", E, 2, 0.5f, 0.0f);
    if (!(flags & OMIT_POS)) add_t(g, ctx, "position_embd.weight", E, CTX, 0.5f, 0.0f);
    add_t(g, ctx, "token_embd_norm.weight", E, 1, 0.2f, 1.0f);
    add_t(g, ctx, "token_embd_norm.bias", E, 1, 0.1f, 0.0f);
    const char * const mats[][2] = { { "attn_q", "" }, { "attn_k", "" }, { "attn_v", "" }, { "attn_output", "" } };
    char nm[64];
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof nm, "blk.0.%s.weight", mats[i][0]);
        add_t(g, ctx, nm, E, (flags & BAD_SHAPE) && i == 1 ? E + 2 : E, 0.6f, 0.0f);
        snprintf(nm, sizeof nm, "blk.0.%s.bias", mats[i][0]);
        add_t(g, ctx, nm, E, 1, 0.1f, 0.0f);
    }
    add_t(g, ctx, "blk.0.attn_output_norm.weight", E, 1, 0.2f, 1.0f);
    add_t(g, ctx, "blk.0.attn_output_norm.bias", E, 1, 0.1f, 0.0f);
    add_t(g, ctx, "blk.0.ffn_up.weight", E, FF, 0.6f, 0.0f);
    add_t(g, ctx, "blk.0.ffn_up.bias", FF, 1, 0.2f, 0.0f);
    add_t(g, ctx, "blk.0.ffn_down.weight", FF, E, 0.4f, 0.0f);
    add_t(g, ctx, "blk.0.ffn_down.bias", E, 1, 0.1f, 0.0f);
    add_t(g, ctx, "blk.0.layer_output_norm.weight", E, 1, 0.2f, 1.0f);
    add_t(g, ctx, "blk.0.layer_output_norm.bias", E, 1, 0.1f, 0.0f);
    *size = kiln_gguf_get_write_size(g, false);
    void * buf = malloc(*size);
    kiln_gguf_write_to_buffer(g, buf, *size, false);
    kiln_gguf_free(g);
    kiln_free(ctx);
    return buf;
}

static void expect_ids(const struct kiln_vocab * v, const char * text, size_t len, bool special, const int * want, int n_want) {
    kiln_token got[64];
    const int32_t n = kiln_tokenize(v, text, (int32_t) len, got, 64, special, false);
    bool same = n == n_want;
    for (int i = 0; same && i < n; i++) same = got[i] == want[i];
    char g[256] = "", w[256] = "";
    for (int i = 0; i < n && i < 32; i++) snprintf(g + strlen(g), sizeof g - strlen(g), " %d", got[i]);
    for (int i = 0; i < n_want; i++) snprintf(w + strlen(w), sizeof w - strlen(w), " %d", want[i]);
    CHECK(same, "tokenize \"%.*s\": got [%s] want [%s]", (int) len, text, g, w);
}
#define IDS(v, text, special, ...) do { const int w_[] = { __VA_ARGS__ }; \
    expect_ids(v, text, sizeof(text) - 1, special, w_, (int) (sizeof w_ / sizeof w_[0])); } while (0)

static void test_wordpiece(void) {
    tu_case = "wordpiece";
    size_t size;
    void * buf = make_model(OMIT_NONE, &size);
    struct kiln_vocab * v = kiln_vocab_load_from_buffer(buf, size);
    if (!CHECK(v != NULL, "vocab: %s", kiln_last_error())) { free(buf); return; }
    CHECK(kiln_vocab_type(v) == KILN_VOCAB_TYPE_WPM, "tokenizer.ggml.model bert is WordPiece");
    /* lowercased, accent stripped (é -> e), punctuation split off */
    IDS(v, "H\xc3\xa9llo, World!", true, 2, 4, 6, 5, 7, 3);
    IDS(v, "H\xc3\xa9llo, World!", false, 4, 6, 5, 7);
    /* greedy longest pieces from the left */
    IDS(v, "unaffable", false, 8, 9, 10);
    /* a word with a piece that matches nothing is [UNK] as a whole */
    IDS(v, "unaffablex hello", false, 1, 4);
    /* CJK ideographs are words of their own */
    IDS(v, "\xe4\xb8\xad\xe6\x96\x87", false, 11, 12);
    /* control characters and NUL vanish inside a word; whitespace of any kind splits */
    IDS(v, "a\x01" "b", false, 16, 17);
    {
        const char t[] = { 'a', 0, 'b' };
        const int w[] = { 16, 17 };
        expect_ids(v, t, 3, false, w, 2);
    }
    IDS(v, " \t hello\n\xc2\xa0world  ", false, 4, 5);
    /* accents stripped: café -> cafe */
    IDS(v, "Caf\xc3\xa9", false, 15);
    /* nothing but the special tokens */
    IDS(v, "", true, 2, 3);
    /* pieces render with the word-start mark as a space */
    char piece[32];
    const int32_t pn = kiln_token_to_piece(v, 4, piece, sizeof piece, 0, false);
    CHECK(pn == 6 && memcmp(piece, " hello", 6) == 0, "piece of \xe2\x96\x81hello is \" hello\" (%d bytes)", pn);
    kiln_vocab_free(v);
    free(buf);

    /* tokenizer.ggml.normalizer.lowercase = false: case kept, and accents
     * (strip_accents defaults to lowercase) */
    buf = make_model(NO_LOWER, &size);
    v = kiln_vocab_load_from_buffer(buf, size);
    if (CHECK(v != NULL, "vocab without lowercasing: %s", kiln_last_error())) {
        IDS(v, "Hello caf\xc3\xa9", false, 13, 14);
        IDS(v, "hello", false, 4);
        kiln_vocab_free(v);
    }
    free(buf);
}

static double l2(const float * v, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += (double) v[i] * v[i];
    return sqrt(s);
}

static void test_pooling(void) {
    tu_case = "pooling";
    size_t size;
    void * buf = make_model(OMIT_NONE, &size);
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 2;
    struct kiln_model * m = kiln_model_load_from_buffer(buf, size, mp);
    if (!CHECK(m != NULL, "load: %s", kiln_last_error())) { free(buf); return; }
    CHECK(kiln_model_is_encoder(m) && kiln_model_n_embd(m) == E, "an encoder of width %d", E);
    CHECK(kiln_model_pooling_type(m) == KILN_POOLING_MEAN, "pooling_type 1 is mean");
    const char * text = "hello, world! unaffable";
    /* [CLS] hello , world ! un aff able [SEP]: 9 tokens */
    struct kiln_embed_params p = kiln_embed_params_default();
    p.pooling = KILN_POOLING_NONE;
    p.normalize = false;
    float all[16 * E], v[E];
    const int32_t na = kiln_model_embed(m, text, (int32_t) strlen(text), p, all, 16 * E);
    CHECK(na == 9 * E, "pooling none gives 9 tokens x %d (%d)", E, na);
    if (na == 9 * E) {
        const enum kiln_pooling_type pools[] = { KILN_POOLING_MEAN, KILN_POOLING_CLS, KILN_POOLING_LAST };
        for (int k = 0; k < 3; k++) {
            double ref[E] = { 0 };
            for (int j = 0; j < E; j++) {
                if (pools[k] == KILN_POOLING_MEAN) {
                    for (int i = 0; i < 9; i++) ref[j] += all[i * E + j] / 9.0;
                } else {
                    ref[j] = all[(pools[k] == KILN_POOLING_CLS ? 0 : 8) * E + j];
                }
            }
            p.pooling = pools[k];
            p.normalize = false;
            int32_t r = kiln_model_embed(m, text, (int32_t) strlen(text), p, v, E);
            double d = 0;
            for (int j = 0; j < E; j++) d = fmax(d, fabs(v[j] - ref[j]));
            CHECK(r == E && d < 1e-5, "pooling %d against the token states: max |diff| %.2e", (int) pools[k], d);
            /* normalized: the same direction, unit length */
            p.normalize = true;
            float u[E];
            r = kiln_model_embed(m, text, (int32_t) strlen(text), p, u, E);
            const double nv = l2(v, E);
            double dn = 0;
            for (int j = 0; j < E; j++) dn = fmax(dn, fabs(u[j] - v[j] / nv));
            CHECK(r == E && fabs(l2(u, E) - 1.0) < 1e-6 && dn < 1e-6, "pooling %d normalized: |u| = %.7f, max |diff| %.2e",
                  (int) pools[k], l2(u, E), dn);
        }
        /* the file's pooling by default, normalized */
        const int32_t r = kiln_model_embed(m, text, (int32_t) strlen(text), kiln_embed_params_default(), v, E);
        CHECK(r == E && fabs(l2(v, E) - 1.0) < 1e-6, "default: the file's mean pooling, unit length");
        /* attention sees the whole sequence: a later token changes the first token's state */
        float other[16 * E];
        p.pooling = KILN_POOLING_NONE;
        p.normalize = false;
        const char * text2 = "hello, world! unaffablex";
        const int32_t nb = kiln_model_embed(m, text2, (int32_t) strlen(text2), p, other, 16 * E);
        double d0 = 0;
        for (int j = 0; j < E; j++) d0 = fmax(d0, fabs(other[j] - all[j]));
        CHECK(nb == 7 * E && d0 > 1e-4, "bidirectional: the [CLS] state depends on later tokens (moved %.2e)", d0);
    }

    /* bad calls */
    const kiln_token bad[] = { 2, NV, 3 };
    CHECK(kiln_model_embed_tokens(m, bad, 3, kiln_embed_params_default(), v, E) == INT32_MIN &&
              strstr(kiln_last_error(), "out of range"), "id beyond the vocabulary: %s", kiln_last_error());
    kiln_token many[CTX + 1];
    for (int i = 0; i <= CTX; i++) many[i] = 4;
    CHECK(kiln_model_embed_tokens(m, many, CTX + 1, kiln_embed_params_default(), v, E) == INT32_MIN &&
              strstr(kiln_last_error(), "context"), "more tokens than positions: %s", kiln_last_error());
    const kiln_token ok[] = { 2, 4, 3 };
    CHECK(kiln_model_embed_tokens(m, ok, 3, kiln_embed_params_default(), v, E - 1) == -E, "small output: -(needed)");
    p.pooling = KILN_POOLING_NONE;
    CHECK(kiln_model_embed_tokens(m, ok, 3, p, v, E) == -3 * E, "pooling none needs n_tokens x n_embd");
    p.pooling = (enum kiln_pooling_type) 9;
    CHECK(kiln_model_embed_tokens(m, ok, 3, p, v, E) == INT32_MIN, "pooling 9: %s", kiln_last_error());
    CHECK(kiln_model_embed_tokens(m, NULL, 3, kiln_embed_params_default(), v, E) == INT32_MIN, "NULL ids");
    CHECK(kiln_model_embed_tokens(NULL, ok, 3, kiln_embed_params_default(), v, E) == INT32_MIN, "NULL model");
    CHECK(kiln_model_eval(m, ok, 3) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "encoder"),
          "decoding on an encoder: %s", kiln_last_error());
    kiln_model_free(m);
    free(buf);

    mp.vocab_only = true;
    buf = make_model(OMIT_NONE, &size);
    m = kiln_model_load_from_buffer(buf, size, mp);
    if (CHECK(m != NULL, "vocab-only load")) {
        CHECK(kiln_model_embed_tokens(m, ok, 3, kiln_embed_params_default(), v, E) == INT32_MIN &&
                  strstr(kiln_last_error(), "vocab-only"), "embedding with a vocab-only model: %s", kiln_last_error());
        kiln_model_free(m);
    }
    free(buf);
}

static void test_malformed(void) {
    tu_case = "malformed";
    const struct { int flags; const char * want; } cases[] = {
        { OMIT_TYPES_KEY, "token_type_count" },
        { OMIT_POS, "position_embd" },
        { BAD_SHAPE, "attn_k.weight" },
        { BAD_POOLING, "pooling_type" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size;
        void * buf = make_model(cases[i].flags, &size);
        struct kiln_model * m = kiln_model_load_from_buffer(buf, size, kiln_model_params_default());
        CHECK(m == NULL && strstr(kiln_last_error(), cases[i].want), "refused, naming %s: %s", cases[i].want, kiln_last_error());
        kiln_model_free(m);
        /* every truncation of the file is refused too, never a crash */
        int refused = 0, tried = 0;
        for (size_t cut = 0; cut < size; cut += size / 97 + 1) {
            struct kiln_model * t = kiln_model_load_from_buffer(buf, cut, kiln_model_params_default());
            refused += t == NULL;
            tried++;
            kiln_model_free(t);
        }
        CHECK(refused == tried, "%d of %d truncations refused", refused, tried);
        free(buf);
    }
}

int main(void) {
    test_wordpiece();
    test_pooling();
    test_malformed();
    return tu_finish();
}
