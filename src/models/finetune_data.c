/*
 * finetune_data.c — training sequences from plain text and from chat JSONL.
 *
 * Plain text: every non-empty line is a document, tokenized as the model
 * asks (BOS when the vocabulary adds it) with EOS appended; the documents
 * are concatenated and cut into windows of n_ctx + 1 tokens with stride
 * n_ctx: a window's first n_ctx tokens are the input, its last n_ctx the
 * targets, all scored.
 *
 * Chat JSONL: one {"messages": [{"role": "...", "content": "..."}, ...]} per
 * line. Kiln has no Jinja engine for the GGUF's tokenizer.chat_template, so
 * conversations are rendered with one fixed ChatML template:
 *
 *     <bos><|im_start|>ROLE\nCONTENT<|im_end|>\n   (per message)
 *
 * where <|im_start|> / <|im_end|> are special tokens when the vocabulary has
 * them and plain text otherwise. Only the tokens of an assistant message's
 * CONTENT<|im_end|> are scored. Pieces are tokenized one by one (role
 * header, content, end marker). One conversation per sequence: shorter ones
 * are padded (unscored), longer ones cut at n_ctx + 1 tokens.
 */
#include "finetune_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct seqbuf {
    int32_t * tok;
    bool * scored;
    size_t n, cap;
};

static bool push(struct seqbuf * b, const int32_t * t, int32_t n, bool scored) {
    if (b->n + (size_t) n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + (size_t) n) cap *= 2;
        int32_t * nt = realloc(b->tok, cap * sizeof *nt);
        if (!nt) return false;
        b->tok = nt;
        bool * ns = realloc(b->scored, cap * sizeof *ns);
        if (!ns) return false;
        b->scored = ns;
        b->cap = cap;
    }
    memcpy(b->tok + b->n, t, sizeof(int32_t) * (size_t) n);
    for (int32_t i = 0; i < n; i++) b->scored[b->n + i] = scored;
    b->n += (size_t) n;
    return true;
}

/* tokenize text[0..len) and append; add_special: BOS as the vocabulary asks */
static bool push_text(struct seqbuf * b, const struct kiln_vocab * v, const char * text, size_t len, bool add_special,
                      bool parse_special, bool scored) {
    if (len > INT32_MAX / 2) { kiln_set_last_error("finetune data: a line of %zu bytes is too long", len); return false; }
    int32_t cap = (int32_t) len + 8;
    int32_t * t = malloc(sizeof(int32_t) * (size_t) cap);
    if (!t) { kiln_set_last_error("finetune data: out of memory"); return false; }
    int32_t n = kiln_tokenize(v, text, (int32_t) len, t, cap, add_special, parse_special);
    if (n < 0) {
        free(t);
        kiln_set_last_error("finetune data: tokenizing failed: %s", kiln_last_error());
        return false;
    }
    const bool ok = push(b, t, n, scored);
    free(t);
    if (!ok) kiln_set_last_error("finetune data: out of memory");
    return ok;
}

static struct kiln_finetune_data * alloc_data(int32_t n_seq, int32_t n_ctx) {
    struct kiln_finetune_data * d = calloc(1, sizeof *d);
    if (!d) return NULL;
    d->n_seq = n_seq;
    d->n_ctx = n_ctx;
    d->tokens = malloc(sizeof(int32_t) * (size_t) n_seq * (size_t) n_ctx);
    d->targets = malloc(sizeof(int32_t) * (size_t) n_seq * (size_t) n_ctx);
    if (!d->tokens || !d->targets) { kiln_finetune_data_free(d); return NULL; }
    return d;
}

void kiln_finetune_data_free(struct kiln_finetune_data * d) {
    if (!d) return;
    free(d->tokens);
    free(d->targets);
    free(d);
}

struct kiln_finetune_data * kiln_finetune_data_from_text(const struct kiln_model * model, const char * text, size_t len,
                                                         int32_t n_ctx) {
    if (!model || !text || n_ctx < 1) { kiln_set_last_error("finetune data: NULL model or text, or n_ctx < 1"); return NULL; }
    const struct kiln_vocab * v = kiln_model_vocab(model);
    const int32_t eos = kiln_vocab_eos(v);
    struct seqbuf b = { 0 };
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n') e++;
        size_t k = e;
        if (k > i && text[k - 1] == '\r') k--;
        bool blank = true;
        for (size_t j = i; j < k; j++) blank &= text[j] == ' ' || text[j] == '\t';
        if (!blank) {
            if (!push_text(&b, v, text + i, k - i, true, false, true)) goto fail;
            if (eos >= 0 && !push(&b, &eos, 1, true)) goto fail;
        }
        i = e + 1;
    }
    if (b.n < (size_t) n_ctx + 1) {
        kiln_set_last_error("finetune data: the text has %zu tokens, fewer than one window of %d + 1", b.n, n_ctx);
        goto fail;
    }
    const int32_t n_seq = (int32_t) ((b.n - 1) / (size_t) n_ctx);
    struct kiln_finetune_data * d = alloc_data(n_seq, n_ctx);
    if (!d) { kiln_set_last_error("finetune data: out of memory"); goto fail; }
    for (int32_t s = 0; s < n_seq; s++) {
        memcpy(d->tokens + (size_t) s * n_ctx, b.tok + (size_t) s * n_ctx, sizeof(int32_t) * (size_t) n_ctx);
        memcpy(d->targets + (size_t) s * n_ctx, b.tok + (size_t) s * n_ctx + 1, sizeof(int32_t) * (size_t) n_ctx);
    }
    free(b.tok);
    free(b.scored);
    return d;
fail:
    free(b.tok);
    free(b.scored);
    return NULL;
}

/* ---- a small JSON reader: just enough for {"messages": [{"role", "content"}]} */

struct jr { const char * s, * e; };

static void ws(struct jr * j) { while (j->s < j->e && (*j->s == ' ' || *j->s == '\t' || *j->s == '\r' || *j->s == '\n')) j->s++; }

static void put_utf8(char * o, size_t * n, uint32_t c) {
    if (c < 0x80) o[(*n)++] = (char) c;
    else if (c < 0x800) { o[(*n)++] = (char) (0xc0 | (c >> 6)); o[(*n)++] = (char) (0x80 | (c & 0x3f)); }
    else if (c < 0x10000) { o[(*n)++] = (char) (0xe0 | (c >> 12)); o[(*n)++] = (char) (0x80 | ((c >> 6) & 0x3f)); o[(*n)++] = (char) (0x80 | (c & 0x3f)); }
    else { o[(*n)++] = (char) (0xf0 | (c >> 18)); o[(*n)++] = (char) (0x80 | ((c >> 12) & 0x3f)); o[(*n)++] = (char) (0x80 | ((c >> 6) & 0x3f)); o[(*n)++] = (char) (0x80 | (c & 0x3f)); }
}

static bool hex4(const char * p, uint32_t * v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        *v <<= 4;
        if (c >= '0' && c <= '9') *v |= (uint32_t) (c - '0');
        else if (c >= 'a' && c <= 'f') *v |= (uint32_t) (c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *v |= (uint32_t) (c - 'A' + 10);
        else return false;
    }
    return true;
}

/* a string at j->s into a malloc'ed, NUL-terminated buffer (out may be NULL to skip) */
static bool jstring(struct jr * j, char ** out, size_t * out_len) {
    ws(j);
    if (j->s >= j->e || *j->s != '"') return false;
    j->s++;
    char * o = malloc((size_t) (j->e - j->s) + 1);
    if (!o) return false;
    size_t n = 0;
    while (j->s < j->e && *j->s != '"') {
        char c = *j->s++;
        if (c != '\\') { o[n++] = c; continue; }
        if (j->s >= j->e) break;
        c = *j->s++;
        switch (c) {
            case 'n': o[n++] = '\n'; break;
            case 't': o[n++] = '\t'; break;
            case 'r': o[n++] = '\r'; break;
            case 'b': o[n++] = '\b'; break;
            case 'f': o[n++] = '\f'; break;
            case 'u': {
                uint32_t cp, lo;
                if (j->e - j->s < 4 || !hex4(j->s, &cp)) { free(o); return false; }
                j->s += 4;
                if (cp >= 0xd800 && cp < 0xdc00 && j->e - j->s >= 6 && j->s[0] == '\\' && j->s[1] == 'u' && hex4(j->s + 2, &lo) &&
                    lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    j->s += 6;
                }
                put_utf8(o, &n, cp);
                break;
            }
            default: o[n++] = c;
        }
    }
    if (j->s >= j->e) { free(o); return false; }
    j->s++;
    o[n] = 0;
    if (out) { *out = o; *out_len = n; } else free(o);
    return true;
}

/* skip any value */
static bool jskip(struct jr * j, int depth) {
    ws(j);
    if (j->s >= j->e || depth > 64) return false;
    const char c = *j->s;
    if (c == '"') return jstring(j, NULL, NULL);
    if (c == '{' || c == '[') {
        const char close = c == '{' ? '}' : ']';
        j->s++;
        ws(j);
        if (j->s < j->e && *j->s == close) { j->s++; return true; }
        for (;;) {
            if (c == '{') {
                if (!jstring(j, NULL, NULL)) return false;
                ws(j);
                if (j->s >= j->e || *j->s != ':') return false;
                j->s++;
            }
            if (!jskip(j, depth + 1)) return false;
            ws(j);
            if (j->s < j->e && *j->s == ',') { j->s++; continue; }
            if (j->s < j->e && *j->s == close) { j->s++; return true; }
            return false;
        }
    }
    while (j->s < j->e && *j->s != ',' && *j->s != '}' && *j->s != ']' && *j->s != ' ' && *j->s != '\n') j->s++;
    return true;
}

/* one message object: role and content */
static bool jmessage(struct jr * j, char ** role, char ** content, size_t * clen) {
    size_t rl;
    *role = *content = NULL;
    ws(j);
    if (j->s >= j->e || *j->s != '{') return false;
    j->s++;
    for (;;) {
        char * key = NULL;
        size_t kl;
        if (!jstring(j, &key, &kl)) return false;
        ws(j);
        if (j->s >= j->e || *j->s != ':') { free(key); return false; }
        j->s++;
        bool ok;
        if (strcmp(key, "role") == 0 && !*role) ok = jstring(j, role, &rl);
        else if (strcmp(key, "content") == 0 && !*content) ok = jstring(j, content, clen);
        else ok = jskip(j, 1);
        free(key);
        if (!ok) return false;
        ws(j);
        if (j->s < j->e && *j->s == ',') { j->s++; continue; }
        if (j->s < j->e && *j->s == '}') { j->s++; return *role && *content; }
        return false;
    }
}

/* render one conversation line into b; false + error on malformed JSON */
static bool render_chat(struct seqbuf * b, const struct kiln_vocab * v, const char * line, size_t len, int lineno) {
    struct jr j = { line, line + len };
    ws(&j);
    if (j.s >= j.e || *j.s != '{') goto bad;
    j.s++;
    bool found = false;
    for (;;) {
        char * key = NULL;
        size_t kl;
        if (!jstring(&j, &key, &kl)) goto bad;
        ws(&j);
        if (j.s >= j.e || *j.s != ':') { free(key); goto bad; }
        j.s++;
        const bool is_msgs = strcmp(key, "messages") == 0;
        free(key);
        if (!is_msgs) {
            if (!jskip(&j, 1)) goto bad;
        } else {
            ws(&j);
            if (j.s >= j.e || *j.s != '[') goto bad;
            j.s++;
            found = true;
            if (!push_text(b, v, "", 0, true, false, false)) return false; /* BOS if the model uses one */
            ws(&j);
            if (j.s < j.e && *j.s == ']') j.s++;
            else for (;;) {
                char * role, * content;
                size_t cl;
                if (!jmessage(&j, &role, &content, &cl)) { free(role); free(content); goto bad; }
                const bool asst = strcmp(role, "assistant") == 0;
                char head[96];
                snprintf(head, sizeof head, "<|im_start|>%.64s\n", role);
                bool ok = push_text(b, v, head, strlen(head), false, true, false) &&
                          push_text(b, v, content, cl, false, false, asst) &&
                          push_text(b, v, "<|im_end|>", 10, false, true, asst) &&
                          push_text(b, v, "\n", 1, false, false, false);
                free(role);
                free(content);
                if (!ok) return false;
                ws(&j);
                if (j.s < j.e && *j.s == ',') { j.s++; continue; }
                if (j.s < j.e && *j.s == ']') { j.s++; break; }
                goto bad;
            }
        }
        ws(&j);
        if (j.s < j.e && *j.s == ',') { j.s++; continue; }
        if (j.s < j.e && *j.s == '}') break;
        goto bad;
    }
    if (!found) {
        kiln_set_last_error("finetune data: line %d has no \"messages\" array", lineno);
        return false;
    }
    return true;
bad:
    kiln_set_last_error("finetune data: line %d is not a {\"messages\": [{\"role\": ..., \"content\": ...}]} object", lineno);
    return false;
}

struct kiln_finetune_data * kiln_finetune_data_from_chat(const struct kiln_model * model, const char * jsonl, size_t len,
                                                         int32_t n_ctx) {
    if (!model || !jsonl || n_ctx < 1) { kiln_set_last_error("finetune data: NULL model or data, or n_ctx < 1"); return NULL; }
    const struct kiln_vocab * v = kiln_model_vocab(model);
    struct seqbuf all = { 0 };    /* every conversation, cut or padded to n_ctx + 1 */
    int32_t n_seq = 0, lineno = 0;
    for (size_t i = 0; i < len;) {
        size_t e = i;
        while (e < len && jsonl[e] != '\n') e++;
        lineno++;
        bool blank = true;
        for (size_t k = i; k < e; k++) blank &= jsonl[k] == ' ' || jsonl[k] == '\t' || jsonl[k] == '\r';
        if (!blank) {
            struct seqbuf c = { 0 };
            if (!render_chat(&c, v, jsonl + i, e - i, lineno)) { free(c.tok); free(c.scored); goto fail; }
            const size_t keep = c.n < (size_t) n_ctx + 1 ? c.n : (size_t) n_ctx + 1;
            bool ok = push(&all, c.tok, (int32_t) keep, false);
            if (ok) memcpy(all.scored + all.n - keep, c.scored, keep);
            const int32_t pad = 0;
            for (size_t k = keep; ok && k < (size_t) n_ctx + 1; k++) ok = push(&all, &pad, 1, false);
            free(c.tok);
            free(c.scored);
            if (!ok) { kiln_set_last_error("finetune data: out of memory"); goto fail; }
            n_seq++;
        }
        i = e + 1;
    }
    if (n_seq == 0) { kiln_set_last_error("finetune data: no conversations"); goto fail; }
    struct kiln_finetune_data * d = alloc_data(n_seq, n_ctx);
    if (!d) { kiln_set_last_error("finetune data: out of memory"); goto fail; }
    for (int32_t s = 0; s < n_seq; s++) {
        const int32_t * t = all.tok + (size_t) s * (n_ctx + 1);
        const bool * sc = all.scored + (size_t) s * (n_ctx + 1);
        for (int32_t p = 0; p < n_ctx; p++) {
            d->tokens[(size_t) s * n_ctx + p] = t[p];
            d->targets[(size_t) s * n_ctx + p] = sc[p + 1] ? t[p + 1] : -1;
        }
    }
    free(all.tok);
    free(all.scored);
    return d;
fail:
    free(all.tok);
    free(all.scored);
    return NULL;
}
