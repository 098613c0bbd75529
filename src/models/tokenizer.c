/*
 * tokenizer.c — vocabulary loading from GGUF metadata, special-token
 * partitioning, and detokenization, following llama.cpp's llama-vocab
 * behaviour (the same token attributes, defaults and text fix-ups) so that
 * ids match it exactly. The two algorithms live in tokenizer_spm.c and
 * tokenizer_bpe.c.
 */
#include "vocab.h"
#include "tokenizer_impl.h"
#include "unicode.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF token types (tokenizer.ggml.token_type) */
enum { TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3, TT_USER_DEFINED = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static const struct { const char * name; enum pretok_type type; bool no_clean; bool ignore_merges; bool add_bos; } k_pre[] = {
    { "default",          PRETOK_DEFAULT,        false, false, false },
    { "llama3",           PRETOK_LLAMA3,         false, true,  true  },
    { "llama-v3",         PRETOK_LLAMA3,         false, true,  true  },
    { "llama-bpe",        PRETOK_LLAMA3,         false, true,  true  },
    { "falcon3",          PRETOK_LLAMA3,         false, true,  true  },
    { "falcon-h1",        PRETOK_LLAMA3,         false, true,  true  },
    { "pixtral",          PRETOK_LLAMA3,         false, true,  true  },
    { "midm-2.0",         PRETOK_LLAMA3,         false, true,  true  },
    { "lfm2",             PRETOK_LLAMA3,         false, true,  true  },
    { "deepseek-llm",     PRETOK_DEEPSEEK_LLM,   true,  false, false },
    { "deepseek-coder",   PRETOK_DEEPSEEK_CODER, true,  false, false },
    { "falcon",           PRETOK_FALCON,         false, false, false },
    { "mpt",              PRETOK_MPT,            false, false, false },
    { "starcoder",        PRETOK_STARCODER,      false, false, false },
    { "gpt-2",            PRETOK_GPT2,           false, false, false },
    { "phi-2",            PRETOK_GPT2,           false, false, false },
    { "olmo",             PRETOK_GPT2,           false, false, false },
    { "jais",             PRETOK_GPT2,           false, false, false },
    { "exaone4",          PRETOK_GPT2,           false, false, false },
    { "trillion",         PRETOK_GPT2,           true,  false, false },
    { "granite-docling",  PRETOK_GPT2,           true,  false, false },
    { "refact",           PRETOK_REFACT,         false, false, false },
    { "command-r",        PRETOK_STARCODER,      true,  false, false },
    { "smollm",           PRETOK_STARCODER,      true,  false, false },
    { "codeshell",        PRETOK_STARCODER,      false, false, false },
    { "exaone",           PRETOK_STARCODER,      false, false, false },
    { "minerva-7b",       PRETOK_STARCODER,      false, false, false },
    { "qwen2",            PRETOK_QWEN2,          true,  false, false },
    { "deepseek-r1-qwen", PRETOK_QWEN2,          true,  false, false },
    { "stablelm2",        PRETOK_QWEN2,          false, false, false },
    { "megrez",           PRETOK_QWEN2,          false, false, false },
    { "hunyuan",          PRETOK_QWEN2,          true,  false, false },
    { "solar-open",       PRETOK_QWEN2,          true,  false, false },
    { "grok-2",           PRETOK_QWEN2,          true,  false, false },
    { "dbrx",             PRETOK_LLAMA3,         false, false, false },
    { "smaug-bpe",        PRETOK_LLAMA3,         false, false, false },
    { "gpt-4o",           PRETOK_GPT4O,          true,  false, false },
    { "llama4",           PRETOK_GPT4O,          true,  false, false },
    { "minimax-m2",       PRETOK_GPT4O,          true,  false, false },
};

static bool vocab_fail(struct kiln_vocab * v, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
static bool vocab_fail(struct kiln_vocab * v, const char * fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kiln_set_last_error("%s", msg);
    kiln_vocab_free(v);
    return false;
}

static int32_t find_text(const struct kiln_vocab * v, const char * s) {
    return strmap_get(&v->token_to_id, s, strlen(s));
}

/* llama.cpp marks these tokens CONTROL whatever the file says, by text */
static const char * const k_eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>",
};
static const char * const k_eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "<\xef\xbd\234end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<end_of_utterance>",
};
static const char * const k_fim_texts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
    "<REPO>", "<reponame>", "<|file_sep|>", "<|eom_id|>",
};

static void mark_control(struct kiln_vocab * v, int32_t id) {
    if (id >= 0 && !(v->attr[id] & KILN_TOKEN_ATTR_CONTROL)) {
        v->attr[id] = KILN_TOKEN_ATTR_CONTROL;
    }
}

static int cmp_u64(const void * a, const void * b) {
    uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
    return x < y ? -1 : (x > y);
}

static bool build_piece(struct kiln_vocab * v, int32_t id) {
    const char * t = v->text[id];
    uint32_t n = v->text_len[id];
    uint32_t a = v->attr[id];
    char * out = NULL;
    size_t m = 0;
    if (a & (KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_USER_DEFINED)) {
        out = malloc(n + 1);
        if (out) {
            memcpy(out, t, n);
            m = n;
        }
    } else if (v->type != KILN_VOCAB_TYPE_BPE && (a & KILN_TOKEN_ATTR_NORMAL)) {
        out = malloc(n + 1);
        for (uint32_t i = 0; out && i < n;) { /* U+2581 -> ' ' */
            if (i + 2 < n && (uint8_t) t[i] == 0xE2 && (uint8_t) t[i + 1] == 0x96 && (uint8_t) t[i + 2] == 0x81) {
                out[m++] = ' ';
                i += 3;
            } else {
                out[m++] = t[i++];
            }
        }
    } else if (v->type == KILN_VOCAB_TYPE_SPM && (a & KILN_TOKEN_ATTR_BYTE)) {
        out = malloc(2);
        if (out) {
            out[0] = (char) strtol(n >= 5 ? t + 3 : "0", NULL, 16);
            m = 1;
        }
    } else if (v->type == KILN_VOCAB_TYPE_BPE && (a & KILN_TOKEN_ATTR_NORMAL)) {
        /* each code point stands for one byte; one that doesn't is shown as
         * llama.cpp does: [UNK_BYTE_0x<hex of its UTF-8><token text>] */
        size_t cap = (size_t) n * 4 + 64;
        out = malloc(cap + 1);
        for (size_t offs = 0; out && offs < n;) {
            uint32_t cpt = utf8_decode(t, n, &offs);
            int b = unicode_to_byte(cpt);
            if (b >= 0) {
                out[m++] = (char) b;
                continue;
            }
            char enc[4];
            int el = utf8_encode(cpt, enc);
            size_t need = m + 12 + el * 2 + n + 1;
            if (need > cap) {
                cap = need * 2;
                char * o2 = realloc(out, cap + 1);
                if (!o2) {
                    free(out);
                    out = NULL;
                    break;
                }
                out = o2;
            }
            memcpy(out + m, "[UNK_BYTE_0x", 12);
            m += 12;
            for (int k = 0; k < el; k++) {
                static const char hx[] = "0123456789abcdef";
                out[m++] = hx[(uint8_t) enc[k] >> 4];
                out[m++] = hx[(uint8_t) enc[k] & 15];
            }
            memcpy(out + m, t, n);
            m += n;
            out[m++] = ']';
        }
    } else {
        out = malloc(1);
    }
    if (!out) {
        return false;
    }
    out[m] = 0;
    v->piece[id] = out;
    v->piece_len[id] = (uint32_t) m;
    return true;
}

struct kiln_vocab * vocab_from_gguf(const struct kiln_gguf_context * f) {
    char model[64] = "", pre[64] = "", name[256] = "";
    if (!meta_str(f, "tokenizer.ggml.model", model, sizeof model)) {
        kiln_set_last_error("vocab: tokenizer.ggml.model missing");
        return NULL;
    }
    meta_str(f, "tokenizer.ggml.pre", pre, sizeof pre);
    meta_str(f, "general.name", name, sizeof name);

    struct kiln_vocab * v = calloc(1, sizeof(*v));
    if (!v) {
        kiln_set_last_error("vocab: out of memory");
        return NULL;
    }
    v->eot = v->eom = v->pad = v->sep = KILN_TOKEN_NULL;
    if (strcmp(model, "llama") == 0) {
        v->type = KILN_VOCAB_TYPE_SPM;
        v->bos = 1;
        v->eos = 2;
        v->unk = 0;
        v->add_space_prefix = true;
        v->add_bos = true;
        v->pre = PRETOK_DEFAULT;
    } else if (strcmp(model, "gpt2") == 0) {
        v->type = KILN_VOCAB_TYPE_BPE;
        v->bos = 11;
        v->eos = 11;
        v->unk = KILN_TOKEN_NULL;
        v->clean_spaces = true;
        v->pre = PRETOK_DEFAULT;
        bool known = pre[0] == 0; /* none given: llama.cpp's default */
        for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
            if (strcmp(pre, k_pre[i].name) == 0) {
                known = true;
                v->pre = k_pre[i].type;
                v->clean_spaces = !k_pre[i].no_clean;
                v->ignore_merges = k_pre[i].ignore_merges;
                v->add_bos = k_pre[i].add_bos;
                break;
            }
        }
        if (!known) {
            /* splitting text with another pre-tokenizer's rules would give wrong tokens */
            vocab_fail(v, "vocab: unsupported tokenizer.ggml.pre '%s' (a byte-level BPE pre-tokenizer Kiln does not implement)", pre);
            return NULL;
        }
    } else if (strcmp(model, "bert") == 0) {
        /* llama.cpp's WPM defaults: [CLS] text [SEP], lowercased, accents stripped */
        v->type = KILN_VOCAB_TYPE_WPM;
        v->bos = 101;
        v->eos = KILN_TOKEN_NULL;
        v->unk = 100;
        v->sep = 102;
        v->pad = 0;
        v->add_bos = true;
        v->clean_spaces = true;
        v->pre = PRETOK_DEFAULT;
        v->lowercase = true;
        meta_bool(f, "tokenizer.ggml.normalizer.lowercase", &v->lowercase);
        v->strip_accents = v->lowercase;
        meta_bool(f, "tokenizer.ggml.normalizer.strip_accents", &v->strip_accents);
    } else {
        vocab_fail(v, "vocab: unsupported tokenizer.ggml.model '%s' (supported: llama, gpt2, bert)", model);
        return NULL;
    }
    meta_bool(f, "tokenizer.ggml.add_space_prefix", &v->add_space_prefix);

    int64_t toks = meta_arr(f, "tokenizer.ggml.tokens", KILN_GGUF_TYPE_STRING);
    size_t n_toks = toks >= 0 ? kiln_gguf_get_arr_n(f, toks) : 0;
    if (n_toks == 0 || n_toks > (1u << 24)) {
        vocab_fail(v, "vocab: tokenizer.ggml.tokens missing or empty");
        return NULL;
    }
    int64_t scores_id = meta_arr(f, "tokenizer.ggml.scores", KILN_GGUF_TYPE_FLOAT32);
    int64_t types_id = meta_arr(f, "tokenizer.ggml.token_type", KILN_GGUF_TYPE_INT32);
    const uint8_t * scores = scores_id >= 0 ? kiln_gguf_get_arr_data(f, scores_id) : NULL;
    const uint8_t * types = types_id >= 0 ? kiln_gguf_get_arr_data(f, types_id) : NULL;
    if ((scores && kiln_gguf_get_arr_n(f, scores_id) != n_toks) || (types && kiln_gguf_get_arr_n(f, types_id) != n_toks)) {
        vocab_fail(v, "vocab: scores/token_type length differs from tokens");
        return NULL;
    }
    int32_t n = (int32_t) n_toks;
    v->n_tokens = n;
    v->text = calloc(n, sizeof(char *));
    v->text_len = calloc(n, sizeof(uint32_t));
    v->score = calloc(n, sizeof(float));
    v->attr = calloc(n, sizeof(uint32_t));
    v->piece = calloc(n, sizeof(char *));
    v->piece_len = calloc(n, sizeof(uint32_t));
    v->eog = calloc(n, sizeof(bool));
    if (!v->text || !v->text_len || !v->score || !v->attr || !v->piece || !v->piece_len || !v->eog ||
        !strmap_init(&v->token_to_id, (size_t) n)) {
        vocab_fail(v, "vocab: out of memory");
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        char buf[32];
        const char * src = kiln_gguf_get_arr_str(f, toks, (size_t) i);
        size_t len = kiln_gguf_get_arr_str_len(f, toks, (size_t) i);
        if (len == 0) { /* as llama.cpp: never an empty text */
            snprintf(buf, sizeof buf, "[EMPTY_%d]", i);
            src = buf;
            len = strlen(buf);
        }
        v->text[i] = malloc(len + 1);
        if (!v->text[i]) {
            vocab_fail(v, "vocab: out of memory");
            return NULL;
        }
        memcpy(v->text[i], src, len);
        v->text[i][len] = 0;
        v->text_len[i] = (uint32_t) len;
        if ((int32_t) len > v->max_token_len) v->max_token_len = (int32_t) len;
        if (scores) {
            memcpy(&v->score[i], scores + 4 * (size_t) i, 4);
        }
        v->attr[i] = KILN_TOKEN_ATTR_NORMAL;
        if (types) {
            int32_t tt;
            memcpy(&tt, types + 4 * (size_t) i, 4);
            switch (tt) {
                case TT_UNKNOWN:      v->attr[i] = KILN_TOKEN_ATTR_UNKNOWN; break;
                case TT_UNUSED:       v->attr[i] = KILN_TOKEN_ATTR_UNUSED; break;
                case TT_NORMAL:       v->attr[i] = KILN_TOKEN_ATTR_NORMAL; break;
                case TT_CONTROL:      v->attr[i] = KILN_TOKEN_ATTR_CONTROL; break;
                case TT_USER_DEFINED: v->attr[i] = KILN_TOKEN_ATTR_USER_DEFINED; break;
                case TT_BYTE:         v->attr[i] = KILN_TOKEN_ATTR_BYTE; break;
                default:              v->attr[i] = KILN_TOKEN_ATTR_UNDEFINED; break;
            }
        }
        if (!strmap_put(&v->token_to_id, v->text[i], len, i, true)) {
            vocab_fail(v, "vocab: out of memory");
            return NULL;
        }
    }

    if (v->type == KILN_VOCAB_TYPE_BPE) {
        int64_t merges = meta_arr(f, "tokenizer.ggml.merges", KILN_GGUF_TYPE_STRING);
        if (merges < 0) {
            vocab_fail(v, "vocab: tokenizer.ggml.merges missing for a gpt2 tokenizer");
            return NULL;
        }
        size_t n_merges = kiln_gguf_get_arr_n(f, merges);
        if (!strmap_init(&v->bpe_ranks, n_merges)) {
            vocab_fail(v, "vocab: out of memory");
            return NULL;
        }
        for (size_t i = 0; i < n_merges; i++) {
            const char * ms = kiln_gguf_get_arr_str(f, merges, i);
            size_t ml = kiln_gguf_get_arr_str_len(f, merges, i);
            /* split at the first space after position 0 */
            if (!ms || ml < 2 || !memchr(ms + 1, ' ', ml - 1)) {
                continue;
            }
            if (!strmap_put(&v->bpe_ranks, ms, ml, (int32_t) i, false)) {
                vocab_fail(v, "vocab: out of memory");
                return NULL;
            }
        }
    }

    /* special token ids from metadata (ignored when out of range) */
    static const char * const id_keys[] = {
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.seperator_token_id",
    };
    kiln_token * id_dst[] = { &v->bos, &v->eos, &v->eot, &v->eom, &v->unk, &v->pad, &v->sep };
    for (size_t k = 0; k < sizeof id_keys / sizeof id_keys[0]; k++) {
        uint32_t id;
        if (meta_u32(f, id_keys[k], &id) && id < (uint32_t) n) {
            *id_dst[k] = (kiln_token) id;
        }
    }
    /* defaults beyond a small vocabulary name no token */
    kiln_token * deflt[] = { &v->bos, &v->eos, &v->unk, &v->sep, &v->pad };
    for (size_t k = 0; k < sizeof deflt / sizeof deflt[0]; k++) {
        if (*deflt[k] >= n) *deflt[k] = KILN_TOKEN_NULL;
    }
    meta_bool(f, "tokenizer.ggml.add_bos_token", &v->add_bos);
    meta_bool(f, "tokenizer.ggml.add_eos_token", &v->add_eos);

    /* tokens llama.cpp recognizes by their text */
    if (v->eot == KILN_TOKEN_NULL) {
        for (size_t k = 0; k < sizeof k_eot_texts / sizeof k_eot_texts[0] && v->eot == KILN_TOKEN_NULL; k++) {
            v->eot = find_text(v, k_eot_texts[k]);
        }
    }
    mark_control(v, v->eot);
    for (size_t k = 0; k < sizeof k_fim_texts / sizeof k_fim_texts[0]; k++) {
        mark_control(v, find_text(v, k_fim_texts[k]));
    }
    for (size_t k = 0; k < sizeof k_eog_texts / sizeof k_eog_texts[0]; k++) {
        int32_t id = find_text(v, k_eog_texts[k]);
        if (id >= 0) {
            v->eog[id] = true;
            mark_control(v, id);
        }
    }
    if (v->eos >= 0) v->eog[v->eos] = true;
    if (v->eot >= 0) v->eog[v->eot] = true;
    if (v->eom >= 0) v->eog[v->eom] = true;

    /* special-token cache: longest text first (then lower id) */
    v->special = malloc(sizeof(kiln_token) * (size_t) n);
    uint64_t * keys = malloc(sizeof(uint64_t) * (size_t) n);
    if (!v->special || !keys) {
        free(keys);
        vocab_fail(v, "vocab: out of memory");
        return NULL;
    }
    for (int32_t i = 0; i < n; i++) {
        if (v->attr[i] & (KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_USER_DEFINED | KILN_TOKEN_ATTR_UNKNOWN)) {
            keys[v->n_special++] = ((uint64_t) (0xFFFFFFFFu - v->text_len[i]) << 32) | (uint32_t) i;
        }
    }
    qsort(keys, (size_t) v->n_special, sizeof(uint64_t), cmp_u64);
    for (int32_t k = 0; k < v->n_special; k++) {
        v->special[k] = (kiln_token) (keys[k] & 0xFFFFFFFFu);
    }
    free(keys);

    for (int32_t i = 0; i < n; i++) {
        if (!build_piece(v, i)) {
            vocab_fail(v, "vocab: out of memory");
            return NULL;
        }
    }

    /* per-model attributes llama.cpp applies by name (after the caches) */
    for (char * c = name; *c; c++) {
        *c = (char) tolower((unsigned char) *c);
    }
    if (strstr(name, "phi-3") || strstr(name, "phi3")) {
        for (int32_t k = 0; k < v->n_special; k++) {
            v->attr[v->special[k]] |= KILN_TOKEN_ATTR_RSTRIP;
        }
        int32_t id = find_text(v, "</s>");
        if (id >= 0) v->attr[id] |= KILN_TOKEN_ATTR_RSTRIP;
        const char * const off[] = { "<unk>", "<s>", "<|endoftext|>" };
        for (int k = 0; k < 3; k++) {
            id = find_text(v, off[k]);
            if (id >= 0) v->attr[id] &= ~(uint32_t) KILN_TOKEN_ATTR_RSTRIP;
        }
    }

    pretok_prepare(v->pre);

    /* newline token (informational) */
    v->linefeed = v->type == KILN_VOCAB_TYPE_SPM ? find_text(v, "<0x0A>") : find_text(v, "\xc4\x8a");
    return v;
}

void kiln_vocab_free(struct kiln_vocab * v) {
    if (!v) {
        return;
    }
    for (int32_t i = 0; i < v->n_tokens; i++) {
        if (v->text) free(v->text[i]);
        if (v->piece) free(v->piece[i]);
    }
    free(v->text);
    free(v->text_len);
    free(v->score);
    free(v->attr);
    free(v->piece);
    free(v->piece_len);
    free(v->eog);
    free(v->special);
    strmap_free(&v->token_to_id);
    strmap_free(&v->bpe_ranks);
    free(v);
}

static struct kiln_vocab * load_common(struct kiln_gguf_context * g) {
    if (!g) {
        return NULL; /* the reader set the error */
    }
    struct kiln_vocab * v = vocab_from_gguf(g);
    kiln_gguf_free(g);
    return v;
}

struct kiln_vocab * kiln_vocab_load(const char * path) {
    if (!path) {
        kiln_set_last_error("vocab: NULL path");
        return NULL;
    }
    struct kiln_gguf_init_params p = { .no_alloc = true, .ctx = NULL };
    return load_common(kiln_gguf_init_from_file(path, p));
}

struct kiln_vocab * kiln_vocab_load_from_buffer(const void * data, size_t size) {
    if (!data) {
        kiln_set_last_error("vocab: NULL buffer");
        return NULL;
    }
    struct kiln_gguf_init_params p = { .no_alloc = true, .ctx = NULL };
    return load_common(kiln_gguf_init_from_buffer(data, size, p));
}

enum kiln_vocab_type kiln_vocab_type(const struct kiln_vocab * v) { return v->type; }
int32_t kiln_vocab_n_tokens(const struct kiln_vocab * v) { return v->n_tokens; }
kiln_token kiln_vocab_bos(const struct kiln_vocab * v) { return v->bos; }
kiln_token kiln_vocab_eos(const struct kiln_vocab * v) { return v->eos; }
bool kiln_vocab_get_add_bos(const struct kiln_vocab * v) { return v->add_bos; }
bool kiln_vocab_get_add_eos(const struct kiln_vocab * v) { return v->add_eos; }

bool kiln_vocab_is_eog(const struct kiln_vocab * v, kiln_token t) {
    return v && t >= 0 && t < v->n_tokens && v->eog[t];
}

const char * kiln_vocab_get_text(const struct kiln_vocab * v, kiln_token t) {
    return (v && t >= 0 && t < v->n_tokens) ? v->text[t] : NULL;
}

float kiln_vocab_get_score(const struct kiln_vocab * v, kiln_token t) {
    return (v && t >= 0 && t < v->n_tokens) ? v->score[t] : 0.0f;
}

uint32_t kiln_vocab_get_attr(const struct kiln_vocab * v, kiln_token t) {
    return (v && t >= 0 && t < v->n_tokens) ? v->attr[t] : 0;
}

/* ---- tokenize: partition out special tokens, then run the algorithm on
 * each stretch of raw text */

struct fragment {
    kiln_token token; /* KILN_TOKEN_NULL: raw text */
    size_t off, len;
};

struct frag_list {
    struct fragment * v;
    size_t n, cap;
};

static bool frag_push(struct frag_list * l, struct fragment f) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct fragment * nv = realloc(l->v, cap * sizeof(*nv));
        if (!nv) {
            return false;
        }
        l->v = nv;
        l->cap = cap;
    }
    l->v[l->n++] = f;
    return true;
}

static const char * find_bytes(const char * hay, size_t hn, const char * needle, size_t nn) {
    if (nn == 0 || nn > hn) {
        return NULL;
    }
    for (size_t i = 0; i + nn <= hn; i++) {
        if (hay[i] == needle[0] && memcmp(hay + i, needle, nn) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

static bool partition(const struct kiln_vocab * v, const char * text, size_t len, bool parse_special, struct frag_list * out) {
    struct frag_list cur = { 0 };
    if (len > 0 && !frag_push(&cur, (struct fragment) { KILN_TOKEN_NULL, 0, len })) {
        return false;
    }
    for (int32_t k = 0; k < v->n_special; k++) {
        kiln_token id = v->special[k];
        uint32_t a = v->attr[id];
        if (!parse_special && (a & (KILN_TOKEN_ATTR_CONTROL | KILN_TOKEN_ATTR_UNKNOWN))) {
            continue;
        }
        const char * st = v->text[id];
        size_t sl = v->text_len[id];
        struct frag_list next = { 0 };
        for (size_t i = 0; i < cur.n; i++) {
            struct fragment fr = cur.v[i];
            if (fr.token != KILN_TOKEN_NULL) {
                if (!frag_push(&next, fr)) goto oom;
                continue;
            }
            size_t off = fr.off, rem = fr.len;
            for (;;) {
                const char * m = find_bytes(text + off, rem, st, sl);
                if (!m) {
                    if (rem > 0 && !frag_push(&next, (struct fragment) { KILN_TOKEN_NULL, off, rem })) goto oom;
                    break;
                }
                size_t mpos = (size_t) (m - text);
                size_t left = mpos - off;
                if (a & KILN_TOKEN_ATTR_LSTRIP) {
                    while (left > 0 && isspace((unsigned char) text[off + left - 1])) left--;
                }
                if (left > 0 && !frag_push(&next, (struct fragment) { KILN_TOKEN_NULL, off, left })) goto oom;
                if (!frag_push(&next, (struct fragment) { id, 0, 0 })) goto oom;
                size_t roff = mpos + sl;
                size_t rlen = off + rem - roff;
                if (a & KILN_TOKEN_ATTR_RSTRIP) {
                    while (rlen > 0 && isspace((unsigned char) text[roff])) {
                        roff++;
                        rlen--;
                    }
                }
                off = roff;
                rem = rlen;
                if (rem == 0) {
                    break;
                }
            }
        }
        free(cur.v);
        cur = next;
        continue;
oom:
        free(next.v);
        free(cur.v);
        return false;
    }
    *out = cur;
    return true;
}

int32_t kiln_tokenize(const struct kiln_vocab * v, const char * text, int32_t text_len, kiln_token * tokens,
                      int32_t n_tokens_max, bool add_special, bool parse_special) {
    if (!v || (!text && text_len > 0) || text_len < 0 || n_tokens_max < 0 || (!tokens && n_tokens_max > 0)) {
        kiln_set_last_error("kiln_tokenize: invalid arguments");
        return INT32_MIN;
    }
    struct frag_list frags = { 0 };
    if (!partition(v, text, (size_t) text_len, parse_special, &frags)) {
        kiln_set_last_error("kiln_tokenize: out of memory");
        return INT32_MIN;
    }
    struct tok_out out = { 0 };
    bool ok = true;
    if (v->type == KILN_VOCAB_TYPE_SPM) {
        bool prev_special = true; /* a space prefix before the first text */
        if (add_special && v->add_bos) {
            ok = ok && tok_out_push(&out, v->bos);
        }
        for (size_t i = 0; ok && i < frags.n; i++) {
            if (frags.v[i].token != KILN_TOKEN_NULL) {
                ok = tok_out_push(&out, frags.v[i].token);
                prev_special = true;
                continue;
            }
            ok = spm_tokenize(v, text + frags.v[i].off, frags.v[i].len, v->add_space_prefix && prev_special, &out);
            prev_special = false;
        }
        if (ok && add_special && v->add_eos) {
            ok = tok_out_push(&out, v->eos);
        }
    } else {
        const bool wpm = v->type == KILN_VOCAB_TYPE_WPM;
        if (add_special && (v->add_bos || wpm) && v->bos >= 0) {
            ok = ok && tok_out_push(&out, v->bos);
        }
        for (size_t i = 0; ok && i < frags.n; i++) {
            if (frags.v[i].token != KILN_TOKEN_NULL) {
                ok = tok_out_push(&out, frags.v[i].token);
            } else if (wpm) {
                ok = wpm_tokenize(v, text + frags.v[i].off, frags.v[i].len, &out);
            } else {
                ok = bpe_tokenize(v, text + frags.v[i].off, frags.v[i].len, &out);
            }
        }
        if (ok && add_special && v->add_eos && v->eos >= 0) {
            ok = tok_out_push(&out, v->eos);
        }
        if (ok && add_special && wpm && v->sep >= 0) {
            ok = tok_out_push(&out, v->sep);
        }
    }
    free(frags.v);
    if (!ok) {
        free(out.v);
        kiln_set_last_error("kiln_tokenize: out of memory");
        return INT32_MIN;
    }
    if (out.n > (size_t) INT32_MAX) {
        free(out.v);
        kiln_set_last_error("kiln_tokenize: too many tokens");
        return INT32_MIN;
    }
    int32_t n = (int32_t) out.n;
    if (n > n_tokens_max) {
        free(out.v);
        return -n;
    }
    if (n > 0) {
        memcpy(tokens, out.v, (size_t) n * sizeof(kiln_token));
    }
    free(out.v);
    return n;
}

/* ---- detokenize */

int32_t kiln_token_to_piece(const struct kiln_vocab * v, kiln_token token, char * buf, int32_t length, int32_t lstrip, bool special) {
    if (!v || token < 0 || token >= v->n_tokens || length < 0 || (!buf && length > 0)) {
        kiln_set_last_error("kiln_token_to_piece: invalid token %d", (int) token);
        return INT32_MIN;
    }
    uint32_t a = v->attr[token];
    if (!special && (a & (KILN_TOKEN_ATTR_UNKNOWN | KILN_TOKEN_ATTR_CONTROL))) {
        return 0;
    }
    const char * p = v->piece[token];
    int32_t n = (int32_t) v->piece_len[token];
    for (int32_t i = 0; i < lstrip && n > 0 && *p == ' '; i++) {
        p++;
        n--;
    }
    if (length < n) {
        return -n;
    }
    memcpy(buf, p, (size_t) n);
    return n;
}

int32_t kiln_detokenize(const struct kiln_vocab * v, const kiln_token * tokens, int32_t n_tokens, char * text,
                        int32_t text_len_max, bool remove_special, bool unparse_special) {
    if (!v || n_tokens < 0 || (!tokens && n_tokens > 0) || text_len_max < 0 || (!text && text_len_max > 0)) {
        kiln_set_last_error("kiln_detokenize: invalid arguments");
        return INT32_MIN;
    }
    for (int32_t i = 0; i < n_tokens; i++) {
        if (tokens[i] < 0 || tokens[i] >= v->n_tokens) {
            kiln_set_last_error("kiln_detokenize: token %d out of range (vocab %d)", (int) tokens[i], (int) v->n_tokens);
            return INT32_MIN;
        }
    }
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n_tokens > 0 && tokens[0] == v->bos) {
        remove_space = false;
        n_tokens--;
        tokens++;
    }
    if (remove_special && v->add_eos && n_tokens > 0 && tokens[n_tokens - 1] == v->eos) {
        n_tokens--;
    }
    /* assemble into a scratch buffer, then clean up and copy */
    size_t total = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        total += v->piece_len[tokens[i]];
    }
    char * s = malloc(total + 1);
    if (!s) {
        kiln_set_last_error("kiln_detokenize: out of memory");
        return INT32_MIN;
    }
    size_t m = 0;
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t k = kiln_token_to_piece(v, tokens[i], s + m, (int32_t) (total - m), remove_space, unparse_special);
        remove_space = false;
        if (k > 0) {
            m += (size_t) k;
        }
    }
    if (v->clean_spaces && m > 0) {
        /* " ?", " !", " .", " ," lose the space */
        size_t t = 1;
        for (size_t i = 1; i < m; i++) {
            char x = s[i];
            if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) {
                t--;
            }
            s[t++] = x;
        }
        m = t;
        /* " ' " -> "'" */
        t = 1;
        for (size_t i = 1; i < m; i++) {
            char x = s[i];
            if (x == '\'' && i + 1 < m && s[i - 1] == ' ' && s[i + 1] == ' ') {
                t--;
                s[++i] = 0;
            }
            s[t++] = x;
        }
        m = t;
        /* " 's", " 'm", " 're", " 've" lose the space */
        t = 1;
        for (size_t i = 1; i < m; i++) {
            char x = s[i];
            if (s[i - 1] == ' ' && x == '\'' && i + 1 < m) {
                char x1 = s[i + 1];
                if (x1 == 's' || x1 == 'm') {
                    t--;
                } else if (i + 2 < m) {
                    char x2 = s[i + 2];
                    if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) {
                        t--;
                    }
                }
            }
            s[t++] = x;
        }
        m = t;
    }
    if (m > (size_t) INT32_MAX) {
        free(s);
        kiln_set_last_error("kiln_detokenize: text too long");
        return INT32_MIN;
    }
    if ((int32_t) m > text_len_max) {
        free(s);
        return -(int32_t) m;
    }
    memcpy(text, s, m);
    free(s);
    return (int32_t) m;
}
