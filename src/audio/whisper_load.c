/*
 * whisper_load.c — whisper.cpp's Whisper model file: reader, vocabulary and
 * special tokens, and a writer of random-weight files for tests.
 *
 * Layout (little-endian), as whisper.cpp's whisper_model_load reads it:
 *   u32 magic "ggml" (0x67676d6c)
 *   i32 n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
 *       n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
 *       (ftype + 1000 x the quantization version)
 *   i32 n_mel, n_fft, then n_mel x n_fft f32: the mel filterbank
 *   i32 n, then n x (u32 length, bytes): the vocabulary
 *   tensors until the end of the file: i32 n_dims, name length, type,
 *       n_dims x i32 ne, the name, the data.
 * The big matrices have the file's type (ftype), the two convolutions f16
 * (f32 in an f32 file), biases, norms and positional embeddings f32.
 */
#include "whisper_internal.h"
#include "audio_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char * const g_lang[WHISPER_N_LANGS] = {
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi", "fi", "vi",
    "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la", "mi", "ml", "cy", "sk",
    "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy", "ne", "mn", "bs", "kk", "sq", "sw",
    "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be", "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo",
    "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl", "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su", "yue",
};

int kiln_whisper_lang_max_id(void) { return WHISPER_N_LANGS - 1; }
const char * kiln_whisper_lang_str(int id) { return id >= 0 && id < WHISPER_N_LANGS ? g_lang[id] : NULL; }
int kiln_whisper_lang_id(const char * code) {
    if (!code) return -1;
    for (int i = 0; i < WHISPER_N_LANGS; i++) if (strcmp(code, g_lang[i]) == 0) return i;
    return -1;
}

/* whisper.cpp's non-speech symbols (suppressed with suppress_nst, also with a leading space) */
static const char * const g_nst[] = {
    "\"", "#", "(", ")", "*", "+", "/", ":", ";", "<", "=", ">", "@", "[", "\\", "]", "^",
    "_", "`", "{", "|", "}", "~", "\xe3\x80\x8c", "\xe3\x80\x8d", "\xe3\x80\x8e", "\xe3\x80\x8f", "<<", ">>", "<<<", ">>>", "--",
    "---", "-(", "-[", "('", "(\"", "((", "))", "(((", ")))", "[[", "]]", "{{", "}}", "\xe2\x99\xaa\xe2\x99\xaa",
    "\xe2\x99\xaa\xe2\x99\xaa\xe2\x99\xaa", "\xe2\x99\xa9", "\xe2\x99\xaa", "\xe2\x99\xab", "\xe2\x99\xac", "\xe2\x99\xad", "\xe2\x99\xae", "\xe2\x99\xaf",
};

/* ---------------------------------------------------------------- reading */

struct rd { const uint8_t * p; size_t size, off; };

static bool rd_bytes(struct rd * r, void * dst, size_t n, const char * what) {
    if (r->size - r->off < n) {
        kiln_set_last_error("whisper: file truncated at byte %zu reading %s", r->off, what);
        return false;
    }
    if (dst) memcpy(dst, r->p + r->off, n);
    r->off += n;
    return true;
}
static bool rd_i32(struct rd * r, int32_t * v, const char * what) { return rd_bytes(r, v, 4, what); }

/* ftype -> the big matrices' type (ggml_ftype_to_ggml_type for the types built) */
static enum kiln_type ftype_to_type(int ftype) {
    switch (ftype) {
        case 0: return KILN_TYPE_F32;
        case 1: return KILN_TYPE_F16;
        case 2: return KILN_TYPE_Q4_0;
        case 3: return KILN_TYPE_Q4_1;
        case 7: return KILN_TYPE_Q8_0;
        case 8: return KILN_TYPE_Q5_0;
        case 9: return KILN_TYPE_Q5_1;
        default: return KILN_TYPE_COUNT;
    }
}

/* the header up to the end of the vocabulary; w receives hparams, filters, vocab */
static bool read_header(struct kiln_whisper * w, struct rd * r) {
    uint32_t magic;
    if (!rd_bytes(r, &magic, 4, "the magic")) return false;
    if (magic != WHISPER_MAGIC) { kiln_set_last_error("whisper: bad magic 0x%08x (not a whisper.cpp ggml model)", magic); return false; }
    static const char * const hn[11] = { "n_vocab", "n_audio_ctx", "n_audio_state", "n_audio_head", "n_audio_layer",
                                         "n_text_ctx", "n_text_state", "n_text_head", "n_text_layer", "n_mels", "ftype" };
    int32_t h[11];
    for (int i = 0; i < 11; i++) if (!rd_i32(r, &h[i], hn[i])) return false;
    struct kiln_whisper_hparams * hp = &w->hp;
    *hp = (struct kiln_whisper_hparams){ h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10] };
    hp->ftype %= 1000;
    w->wtype = ftype_to_type(hp->ftype);
    if (w->wtype == KILN_TYPE_COUNT) { kiln_set_last_error("whisper: unsupported ftype %d", hp->ftype); return false; }
    w->vtype = w->wtype == KILN_TYPE_F32 ? KILN_TYPE_F32 : KILN_TYPE_F16;
    for (int i = 0; i < 10; i++) {
        if (h[i] <= 0 || h[i] > (1 << 20)) { kiln_set_last_error("whisper: invalid %s = %d", hn[i], h[i]); return false; }
    }
    if (hp->n_audio_state != hp->n_text_state) {
        kiln_set_last_error("whisper: n_audio_state %d != n_text_state %d", hp->n_audio_state, hp->n_text_state);
        return false;
    }
    if (hp->n_audio_state % hp->n_audio_head || hp->n_text_state % hp->n_text_head) {
        kiln_set_last_error("whisper: width %d not divisible by the head count", hp->n_audio_state);
        return false;
    }
    if (hp->n_vocab < 51864) { kiln_set_last_error("whisper: n_vocab %d is smaller than Whisper's vocabularies", hp->n_vocab); return false; }

    /* mel filterbank */
    if (!rd_i32(r, &w->n_mel_f, "the filterbank size") || !rd_i32(r, &w->n_fft_f, "the filterbank size")) return false;
    if (w->n_mel_f != hp->n_mels || w->n_fft_f != 1 + KILN_WHISPER_N_FFT / 2) {
        kiln_set_last_error("whisper: mel filterbank %d x %d, expected %d x %d", w->n_mel_f, w->n_fft_f, hp->n_mels, 1 + KILN_WHISPER_N_FFT / 2);
        return false;
    }
    const size_t nf = (size_t) w->n_mel_f * (size_t) w->n_fft_f;
    w->filters = (float *) malloc(nf * sizeof(float));
    if (!w->filters) { kiln_set_last_error("whisper: out of memory"); return false; }
    if (!rd_bytes(r, w->filters, nf * sizeof(float), "the mel filterbank")) return false;

    /* vocabulary */
    int32_t n_file;
    if (!rd_i32(r, &n_file, "the vocabulary size")) return false;
    if (n_file < 0 || n_file > hp->n_vocab) { kiln_set_last_error("whisper: vocabulary of %d tokens for n_vocab %d", n_file, hp->n_vocab); return false; }
    w->n_vocab = hp->n_vocab;
    w->multilingual = hp->n_vocab >= 51865;
    struct kiln_whisper_tokens * t = &w->tok;
    *t = (struct kiln_whisper_tokens){ 50256, 50257, 50357, 50358, 50359, 50360, 50361, 50362, 50363 };
    if (w->multilingual) {
        const int dt = (hp->n_vocab - 51765 - 1) - 98;
        t->eot++; t->sot++;
        t->translate += dt; t->transcribe += dt; t->solm += dt; t->prev += dt; t->nosp += dt; t->not_ts += dt; t->beg += dt;
    }
    const size_t start = r->off;
    size_t blob = 0;
    for (int32_t i = 0; i < n_file; i++) {
        uint32_t len;
        if (!rd_bytes(r, &len, 4, "a token length")) return false;
        if (!rd_bytes(r, NULL, len, "a token")) return false;
        blob += len;
    }
    blob += (size_t)(hp->n_vocab - n_file) * 32;
    w->vocab_blob = (char *) malloc(blob + 1);
    w->vocab_off = (uint32_t *) malloc((size_t) hp->n_vocab * sizeof(uint32_t));
    w->vocab_len = (uint32_t *) malloc((size_t) hp->n_vocab * sizeof(uint32_t));
    if (!w->vocab_blob || !w->vocab_off || !w->vocab_len) { kiln_set_last_error("whisper: out of memory"); return false; }
    size_t o = 0, ro = start;
    for (int32_t i = 0; i < n_file; i++) {
        uint32_t len;
        memcpy(&len, r->p + ro, 4);
        memcpy(w->vocab_blob + o, r->p + ro + 4, len);
        w->vocab_off[i] = (uint32_t) o; w->vocab_len[i] = len;
        o += len; ro += 4 + len;
    }
    /* tokens the file does not list get whisper.cpp's placeholder names */
    for (int32_t i = n_file; i < hp->n_vocab; i++) {
        char nm[32];
        if (i > t->beg) snprintf(nm, sizeof nm, "[_TT_%d]", i - t->beg);
        else if (i == t->eot) snprintf(nm, sizeof nm, "[_EOT_]");
        else if (i == t->sot) snprintf(nm, sizeof nm, "[_SOT_]");
        else if (i == t->translate) snprintf(nm, sizeof nm, "[_TRANSLATE_]");
        else if (i == t->transcribe) snprintf(nm, sizeof nm, "[_TRANSCRIBE_]");
        else if (i == t->solm) snprintf(nm, sizeof nm, "[_SOLM_]");
        else if (i == t->prev) snprintf(nm, sizeof nm, "[_PREV_]");
        else if (i == t->nosp) snprintf(nm, sizeof nm, "[_NOSP_]");
        else if (i == t->not_ts) snprintf(nm, sizeof nm, "[_NOT_]");
        else if (i == t->beg) snprintf(nm, sizeof nm, "[_BEG_]");
        else if (i > t->sot && i <= t->sot + (hp->n_vocab - 51765 - (w->multilingual ? 1 : 0)) && i - t->sot - 1 < WHISPER_N_LANGS)
            snprintf(nm, sizeof nm, "[_LANG_%s]", g_lang[i - t->sot - 1]);
        else snprintf(nm, sizeof nm, "[_extra_token_%d]", i);
        const size_t len = strlen(nm);
        memcpy(w->vocab_blob + o, nm, len);
        w->vocab_off[i] = (uint32_t) o; w->vocab_len[i] = (uint32_t) len;
        o += len;
    }
    return true;
}

/* the id of a token text; as whisper.cpp's token_to_id map, a later duplicate wins */
static int32_t find_token(const struct kiln_whisper * w, const char * s) {
    const size_t n = strlen(s);
    int32_t id = -1;
    for (int32_t i = 0; i < w->n_vocab; i++) {
        if (w->vocab_len[i] == n && memcmp(w->vocab_blob + w->vocab_off[i], s, n) == 0) id = i;
    }
    return id;
}

static bool prepare_suppression(struct kiln_whisper * w) {
    w->space_id = find_token(w, " ");
    const int n = (int)(sizeof g_nst / sizeof g_nst[0]);
    w->nst_ids = (int32_t *) malloc((size_t)(2 * n + 2) * sizeof(int32_t));
    if (!w->nst_ids) { kiln_set_last_error("whisper: out of memory"); return false; }
    char buf[64];
    for (int i = 0; i < n; i++) {
        int32_t id = find_token(w, g_nst[i]);
        if (id >= 0) w->nst_ids[w->n_nst++] = id;
        snprintf(buf, sizeof buf, " %s", g_nst[i]);
        id = find_token(w, buf);
        if (id >= 0) w->nst_ids[w->n_nst++] = id;
    }
    int32_t id = find_token(w, " -");
    if (id >= 0) w->nst_ids[w->n_nst++] = id;
    id = find_token(w, " '");
    if (id >= 0) w->nst_ids[w->n_nst++] = id;
    return true;
}

/* ------------------------------------------------------------ tensor list */

enum tkind { TK_MAT, TK_BIAS, TK_LN_W, TK_LN_B, TK_CONV, TK_CONV_B, TK_EPE, TK_DPE, TK_TE };

struct tdesc {
    char name[64];
    int  n_dims;
    int64_t ne[3];
    enum kiln_type type;
    enum tkind kind;
    struct kiln_tensor ** slot;
};

/* every tensor whisper.cpp expects, with its shape and type; returns the count */
static int tensor_list(struct kiln_whisper * w, struct tdesc * d) {
    const struct kiln_whisper_hparams * hp = &w->hp;
    const int64_t S = hp->n_audio_state;
    int n = 0;
#define T(nm_fmt, idx, nd, a, b, c, ty, k, sl) do { \
        if (d) { snprintf(d[n].name, 64, nm_fmt, idx); d[n].n_dims = nd; d[n].ne[0] = a; d[n].ne[1] = b; d[n].ne[2] = c; \
                 d[n].type = ty; d[n].kind = k; d[n].slot = sl; } n++; } while (0)
    const enum kiln_type F = KILN_TYPE_F32, W = w->wtype, V = w->vtype;
    T("encoder.positional_embedding%.0d", 0, 2, S, hp->n_audio_ctx, 1, F, TK_EPE, &w->e_pe);
    T("encoder.conv1.weight%.0d", 0, 3, 3, hp->n_mels, S, V, TK_CONV, &w->e_conv1_w);
    T("encoder.conv1.bias%.0d", 0, 2, 1, S, 1, F, TK_CONV_B, &w->e_conv1_b);
    T("encoder.conv2.weight%.0d", 0, 3, 3, S, S, V, TK_CONV, &w->e_conv2_w);
    T("encoder.conv2.bias%.0d", 0, 2, 1, S, 1, F, TK_CONV_B, &w->e_conv2_b);
    T("encoder.ln_post.weight%.0d", 0, 1, S, 1, 1, F, TK_LN_W, &w->e_ln_w);
    T("encoder.ln_post.bias%.0d", 0, 1, S, 1, 1, F, TK_LN_B, &w->e_ln_b);
    for (int sys = 0; sys < 2; sys++) {
        const char * pre = sys == 0 ? "encoder" : "decoder";
        const int nl = sys == 0 ? hp->n_audio_layer : hp->n_text_layer;
        for (int i = 0; i < nl; i++) {
            struct whisper_layer * L = d ? (sys == 0 ? &w->enc[i] : &w->dec[i]) : NULL;
            char f[96];
#define LT(suffix, nd, a, b, ty, k, field) do { snprintf(f, sizeof f, "%s.blocks.%%d.%s", pre, suffix); \
                T(f, i, nd, a, b, 1, ty, k, L ? &L->field : NULL); } while (0)
            LT("mlp_ln.weight", 1, S, 1, F, TK_LN_W, mlp_ln_w);
            LT("mlp_ln.bias", 1, S, 1, F, TK_LN_B, mlp_ln_b);
            LT("mlp.0.weight", 2, S, 4 * S, W, TK_MAT, mlp0_w);
            LT("mlp.0.bias", 1, 4 * S, 1, F, TK_BIAS, mlp0_b);
            LT("mlp.2.weight", 2, 4 * S, S, W, TK_MAT, mlp1_w);
            LT("mlp.2.bias", 1, S, 1, F, TK_BIAS, mlp1_b);
            /* an attention: its norm, Q (bias), K (no bias), V (bias), output (bias) */
#define ATTN(pfx, lw, lb, qw, qb, kw, vw, vb, ow, ob) do { \
                LT(pfx "_ln.weight", 1, S, 1, F, TK_LN_W, lw);      LT(pfx "_ln.bias", 1, S, 1, F, TK_LN_B, lb); \
                LT(pfx ".query.weight", 2, S, S, W, TK_MAT, qw);    LT(pfx ".query.bias", 1, S, 1, F, TK_BIAS, qb); \
                LT(pfx ".key.weight", 2, S, S, W, TK_MAT, kw); \
                LT(pfx ".value.weight", 2, S, S, W, TK_MAT, vw);    LT(pfx ".value.bias", 1, S, 1, F, TK_BIAS, vb); \
                LT(pfx ".out.weight", 2, S, S, W, TK_MAT, ow);      LT(pfx ".out.bias", 1, S, 1, F, TK_BIAS, ob); } while (0)
            ATTN("attn", attn_ln_w, attn_ln_b, q_w, q_b, k_w, v_w, v_b, o_w, o_b);
            if (sys == 1) ATTN("cross_attn", c_ln_w, c_ln_b, c_q_w, c_q_b, c_k_w, c_v_w, c_v_b, c_o_w, c_o_b);
#undef ATTN
#undef LT
        }
        if (sys == 0) {
            T("decoder.positional_embedding%.0d", 0, 2, S, hp->n_text_ctx, 1, F, TK_DPE, &w->d_pe);
            T("decoder.token_embedding.weight%.0d", 0, 2, S, hp->n_vocab, 1, W, TK_TE, &w->d_te);
            T("decoder.ln.weight%.0d", 0, 1, S, 1, 1, F, TK_LN_W, &w->d_ln_w);
            T("decoder.ln.bias%.0d", 0, 1, S, 1, 1, F, TK_LN_B, &w->d_ln_b);
        }
    }
#undef T
    return n;
}

static bool read_tensors(struct kiln_whisper * w, struct rd * r) {
    const struct kiln_whisper_hparams * hp = &w->hp;
    if (w->wtype != KILN_TYPE_F32 && w->wtype != KILN_TYPE_F16 && hp->n_audio_state % kiln_blck_size(w->wtype) != 0) {
        kiln_set_last_error("whisper: width %d is not a multiple of the %s block", hp->n_audio_state, kiln_type_name(w->wtype));
        return false;
    }
    w->enc = (struct whisper_layer *) calloc((size_t) hp->n_audio_layer, sizeof(struct whisper_layer));
    w->dec = (struct whisper_layer *) calloc((size_t) hp->n_text_layer, sizeof(struct whisper_layer));
    const int nt = tensor_list(w, NULL);
    struct tdesc * d = (struct tdesc *) calloc((size_t) nt, sizeof(struct tdesc));
    if (!w->enc || !w->dec || !d) { free(d); kiln_set_last_error("whisper: out of memory"); return false; }
    tensor_list(w, d);
    size_t bytes = (size_t) nt * (kiln_tensor_overhead() + 64);
    for (int i = 0; i < nt; i++) bytes += kiln_row_size(d[i].type, d[i].ne[0]) * (size_t)(d[i].ne[1] * d[i].ne[2]);
    struct kiln_init_params ip = { bytes, NULL, false };
    w->ctx_w = kiln_init(ip);
    if (!w->ctx_w) { free(d); return false; }
    for (int i = 0; i < nt; i++) {
        struct kiln_tensor * t = d[i].n_dims == 1 ? kiln_new_tensor_1d(w->ctx_w, d[i].type, d[i].ne[0])
                               : d[i].n_dims == 2 ? kiln_new_tensor_2d(w->ctx_w, d[i].type, d[i].ne[0], d[i].ne[1])
                               : kiln_new_tensor_3d(w->ctx_w, d[i].type, d[i].ne[0], d[i].ne[1], d[i].ne[2]);
        if (!t) { free(d); return false; }
        kiln_set_name(t, d[i].name);
        *d[i].slot = t;
    }
    bool * loaded = (bool *) calloc((size_t) nt, 1);
    if (!loaded) { free(d); kiln_set_last_error("whisper: out of memory"); return false; }
    int n_loaded = 0;
    bool ok = true;
    while (ok && r->off < r->size) {
        int32_t n_dims, len, ttype, fne[4] = { 1, 1, 1, 1 };
        if (!rd_i32(r, &n_dims, "a tensor header") || !rd_i32(r, &len, "a tensor header") || !rd_i32(r, &ttype, "a tensor header")) { ok = false; break; }
        if (n_dims < 0 || n_dims > 4) { kiln_set_last_error("whisper: invalid n_dims %d at byte %zu", n_dims, r->off - 12); ok = false; break; }
        for (int k = 0; k < n_dims && ok; k++) ok = rd_i32(r, &fne[k], "a tensor shape");
        if (!ok) break;
        if (len <= 0 || len >= 64) { kiln_set_last_error("whisper: bad tensor name length %d at byte %zu", len, r->off); ok = false; break; }
        char name[64];
        if (!rd_bytes(r, name, (size_t) len, "a tensor name")) { ok = false; break; }
        name[len] = 0;
        int idx = -1;
        for (int k = 0; k < nt; k++) if (strcmp(name, d[k].name) == 0) { idx = k; break; }
        if (idx < 0) { kiln_set_last_error("whisper: unknown tensor '%s' in the model file", name); ok = false; break; }
        if (loaded[idx]) { kiln_set_last_error("whisper: tensor '%s' appears twice", name); ok = false; break; }
        struct kiln_tensor * t = *d[idx].slot;
        if (fne[0] != t->ne[0] || fne[1] != t->ne[1] || fne[2] != t->ne[2] || fne[3] != 1) {
            kiln_set_last_error("whisper: tensor '%s' has shape [%d, %d, %d, %d], expected [%lld, %lld, %lld]", name,
                                fne[0], fne[1], fne[2], fne[3], (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2]);
            ok = false; break;
        }
        if (ttype != (int32_t) t->type) {
            kiln_set_last_error("whisper: tensor '%s' has type %d, expected %d (%s)", name, ttype, (int) t->type, kiln_type_name(t->type));
            ok = false; break;
        }
        char what[96];
        snprintf(what, sizeof what, "the data of tensor '%s'", name);
        if (!rd_bytes(r, t->data, kiln_nbytes(t), what)) { ok = false; break; }
        loaded[idx] = true;
        n_loaded++;
    }
    if (ok && n_loaded != nt) {
        for (int k = 0; k < nt; k++) if (!loaded[k]) {
            kiln_set_last_error("whisper: tensor '%s' is missing (%d of %d loaded; truncated file or a weight-less test file?)", d[k].name, n_loaded, nt);
            break;
        }
        ok = false;
    }
    free(loaded);
    free(d);
    return ok;
}

/* ----------------------------------------------------------------- public */

struct kiln_whisper * kiln_whisper_load_mem(const void * data, size_t size, int n_threads) {
    if (!data) { kiln_set_last_error("whisper: model data is NULL"); return NULL; }
    struct kiln_whisper * w = (struct kiln_whisper *) calloc(1, sizeof(*w));
    if (!w) { kiln_set_last_error("whisper: out of memory"); return NULL; }
    w->n_threads = n_threads > 0 ? n_threads : 1;
    w->lang_id = -1;
    struct rd r = { (const uint8_t *) data, size, 0 };
    if (!read_header(w, &r) || !prepare_suppression(w) || !read_tensors(w, &r) || !whisper_state_init(w)) {
        kiln_whisper_free(w);
        return NULL;
    }
    return w;
}

struct kiln_whisper * kiln_whisper_load_file(const char * path, int n_threads) {
    size_t size;
    uint8_t * buf = kiln_audio_read_file("whisper", path, &size);
    if (!buf) return NULL;
    struct kiln_whisper * w = kiln_whisper_load_mem(buf, size, n_threads);
    free(buf);
    if (!w) kiln_audio_error_path(path);
    return w;
}

void kiln_whisper_free(struct kiln_whisper * w) {
    if (!w) return;
    whisper_state_free(w);
    kiln_free(w->ctx_w);
    free(w->enc); free(w->dec);
    free(w->filters);
    free(w->vocab_blob); free(w->vocab_off); free(w->vocab_len);
    free(w->nst_ids);
    free(w);
}

const struct kiln_whisper_hparams * kiln_whisper_get_hparams(const struct kiln_whisper * w) { return w ? &w->hp : NULL; }
const struct kiln_whisper_tokens * kiln_whisper_get_tokens(const struct kiln_whisper * w) { return w ? &w->tok : NULL; }
enum kiln_type kiln_whisper_wtype(const struct kiln_whisper * w) { return w ? w->wtype : KILN_TYPE_COUNT; }
bool kiln_whisper_is_multilingual(const struct kiln_whisper * w) { return w && w->multilingual; }
int kiln_whisper_n_vocab(const struct kiln_whisper * w) { return w ? w->n_vocab : 0; }
void kiln_whisper_set_n_threads(struct kiln_whisper * w, int n_threads) { if (w) w->n_threads = n_threads > 0 ? n_threads : 1; }

const char * kiln_whisper_token_text(const struct kiln_whisper * w, int32_t id, size_t * len) {
    if (!w || id < 0 || id >= w->n_vocab) { if (len) *len = 0; return NULL; }
    if (len) *len = w->vocab_len[id];
    return w->vocab_blob + w->vocab_off[id];
}

const float * kiln_whisper_mel_filters(const struct kiln_whisper * w, int * n_mel, int * n_fft) {
    if (!w) return NULL;
    if (n_mel) *n_mel = w->n_mel_f;
    if (n_fft) *n_fft = w->n_fft_f;
    return w->filters;
}

/* ------------------------------------------------------------------ writer */

static uint64_t rng_next(uint64_t * s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static double rng_normal(uint64_t * s) {
    const double u1 = ((rng_next(s) >> 11) + 1.0) / 9007199254740993.0;
    const double u2 = (rng_next(s) >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static bool put_i32(FILE * f, int32_t v) { return fwrite(&v, 4, 1, f) == 1; }

bool kiln_whisper_write_random(const void * template_data, size_t template_size,
                               const struct kiln_whisper_random_params * p, const char * out_path) {
    if (!template_data || !p || !out_path) { kiln_set_last_error("whisper: NULL argument to kiln_whisper_write_random"); return false; }
    struct kiln_whisper * w = (struct kiln_whisper *) calloc(1, sizeof(*w));
    if (!w) { kiln_set_last_error("whisper: out of memory"); return false; }
    struct rd r = { (const uint8_t *) template_data, template_size, 0 };
    bool ok = read_header(w, &r);
    const size_t vocab_start = 4 + 11 * 4;  /* the filterbank and vocabulary are copied verbatim */
    const size_t vocab_end = r.off;
    FILE * f = NULL;
    if (ok) {
        w->hp.n_audio_state = w->hp.n_text_state = p->n_state;
        w->hp.n_audio_head = w->hp.n_text_head = p->n_head;
        w->hp.n_audio_layer = p->n_audio_layer;
        w->hp.n_text_layer = p->n_text_layer;
        w->hp.ftype = p->ftype;
        w->wtype = ftype_to_type(p->ftype);
        if (w->wtype == KILN_TYPE_COUNT || p->n_state <= 0 || p->n_head <= 0 || p->n_state % p->n_head || p->n_audio_layer <= 0 ||
            p->n_text_layer <= 0 || (w->wtype != KILN_TYPE_F32 && w->wtype != KILN_TYPE_F16 && p->n_state % 32)) {
            kiln_set_last_error("whisper: bad random-model parameters (ftype %d, width %d, heads %d)", p->ftype, p->n_state, p->n_head);
            ok = false;
        }
        w->vtype = w->wtype == KILN_TYPE_F32 ? KILN_TYPE_F32 : KILN_TYPE_F16;
    }
    if (ok) {
        f = fopen(out_path, "wb");
        if (!f) { kiln_set_last_error("whisper: cannot create %s", out_path); ok = false; }
    }
    if (ok) {
        uint32_t magic = WHISPER_MAGIC;
        ok = fwrite(&magic, 4, 1, f) == 1;
        const struct kiln_whisper_hparams * hp = &w->hp;
        const int32_t h[11] = { hp->n_vocab, hp->n_audio_ctx, hp->n_audio_state, hp->n_audio_head, hp->n_audio_layer,
                                hp->n_text_ctx, hp->n_text_state, hp->n_text_head, hp->n_text_layer, hp->n_mels, hp->ftype };
        for (int i = 0; i < 11 && ok; i++) ok = put_i32(f, h[i]);
        ok = ok && fwrite((const uint8_t *) template_data + vocab_start, 1, vocab_end - vocab_start, f) == vocab_end - vocab_start;
    }
    struct tdesc * d = NULL;
    int nt = 0;
    if (ok) {
        w->enc = (struct whisper_layer *) calloc((size_t) p->n_audio_layer, sizeof(struct whisper_layer));
        w->dec = (struct whisper_layer *) calloc((size_t) p->n_text_layer, sizeof(struct whisper_layer));
        nt = tensor_list(w, NULL);
        d = (struct tdesc *) calloc((size_t) nt, sizeof(struct tdesc));
        ok = w->enc && w->dec && d;
        if (!ok) kiln_set_last_error("whisper: out of memory");
        else tensor_list(w, d);
    }
    uint64_t s = p->seed;
    const double S = p->n_state;
    for (int i = 0; ok && i < nt; i++) {
        const int64_t ne0 = d[i].ne[0], nrow = d[i].ne[1] * d[i].ne[2], n = ne0 * nrow;
        float * v = (float *) malloc((size_t) n * sizeof(float));
        const size_t nbytes = kiln_row_size(d[i].type, ne0) * (size_t) nrow;
        void * q = malloc(nbytes);
        if (!v || !q) { free(v); free(q); kiln_set_last_error("whisper: out of memory"); ok = false; break; }
        for (int64_t k = 0; k < n; k++) {
            double x;
            switch (d[i].kind) {
                case TK_MAT:    x = rng_normal(&s) / sqrt((double) ne0); break;
                case TK_CONV:   x = rng_normal(&s) / sqrt((double) (d[i].ne[0] * d[i].ne[1])); break;
                case TK_LN_W:   x = 1.0 + 0.1 * rng_normal(&s); break;
                case TK_LN_B:   x = 0.1 * rng_normal(&s); break;
                case TK_BIAS: case TK_CONV_B: x = 0.05 * rng_normal(&s); break;
                case TK_TE:     x = p->logit_std / sqrt(S) * rng_normal(&s); break;
                case TK_DPE:    x = rng_normal(&s); break;   /* positions move the decoder state step to step */
                default: { /* Whisper's sinusoids: sin for the first half of the channels, cos for the second */
                    const int64_t t = k / ne0, c = k % ne0, half = ne0 / 2;
                    const double inc = log(10000.0) / (double)(half - 1);
                    const double a = (double) t * exp(-inc * (double)(c % half));
                    x = c < half ? sin(a) : cos(a);
                }
            }
            v[k] = (float) x;
        }
        if (d[i].type == KILN_TYPE_F32) memcpy(q, v, nbytes);
        else if (d[i].type == KILN_TYPE_F16) kiln_fp32_to_fp16_row(v, (kiln_fp16_t *) q, n);
        else if (kiln_quantize_chunk(d[i].type, v, q, 0, nrow, ne0, NULL) != nbytes) ok = false;
        const int32_t len = (int32_t) strlen(d[i].name);
        ok = ok && put_i32(f, d[i].n_dims) && put_i32(f, len) && put_i32(f, (int32_t) d[i].type);
        for (int k = 0; ok && k < d[i].n_dims; k++) ok = put_i32(f, (int32_t) d[i].ne[k]);
        ok = ok && fwrite(d[i].name, 1, (size_t) len, f) == (size_t) len && fwrite(q, 1, nbytes, f) == nbytes;
        if (!ok && !kiln_last_error()[0]) kiln_set_last_error("whisper: writing %s failed", out_path);
        free(v); free(q);
    }
    if (f && fclose(f) != 0 && ok) { kiln_set_last_error("whisper: writing %s failed", out_path); ok = false; }
    free(d);
    free(w->enc); free(w->dec); free(w->filters); free(w->vocab_blob); free(w->vocab_off); free(w->vocab_len);
    free(w);
    return ok;
}
