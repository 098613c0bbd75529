/*
 * test_generate.c — the llama runner end to end on stories260K: greedy
 * output equals llama.cpp's reference (models/README.md), F32 KV cache and
 * small prompt batches agree, stop strings, a prompt longer than the
 * context, abort mid-generation (the model stays usable), an unsupported
 * architecture, bad input; prompt caching against cold runs (F32 and q8_0),
 * context shift against re-evaluation, saved state against going on.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"
#include "util/test_util.h"
#include "models/textstream.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/stories260K.gguf"

struct sink {
    char text[8192];
    size_t n;
    int pieces;
    volatile int * abort_flag;
    int abort_after;
};

static void collect(const char * t, int32_t len, kiln_token tok, void * ud) {
    (void) tok;
    struct sink * s = ud;
    if (len > 0 && s->n + (size_t) len < sizeof s->text) {
        memcpy(s->text + s->n, t, (size_t) len);
        s->n += (size_t) len;
        s->text[s->n] = 0;
    }
    if (++s->pieces == s->abort_after && s->abort_flag) {
        *s->abort_flag = 1;
    }
}

/* the reference story after "<s> Once upon a time" */
static char * reference(void) {
    FILE * f = fopen("models/README.md", "rb");
    if (!f) return NULL;
    static char buf[16384];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char * a = strstr(buf, "```\n<s> Once upon a time");
    if (!a) return NULL;
    a += strlen("```\n<s> Once upon a time");
    char * e = strstr(a, "\n```");
    if (!e) return NULL;
    *e = 0;
    return a;
}

static enum kiln_status run(struct kiln_model * m, const char * prompt, int n, struct sink * s,
                            const char * const * stop, int n_stop, struct kiln_generate_stats * st) {
    struct kiln_sampler_params sp = kiln_sampler_params_default(); /* temperature 0: greedy */
    struct kiln_sampler * smpl = kiln_sampler_new(sp);
    struct kiln_generate_params gp = kiln_generate_params_default();
    gp.max_tokens = n;
    gp.stop = stop;
    gp.n_stop = n_stop;
    memset(s->text, 0, 8);
    s->n = 0;
    s->pieces = 0;
    enum kiln_status r = kiln_generate(m, smpl, prompt, gp, collect, s, st);
    kiln_sampler_free(smpl);
    return r;
}

/* what the stream lets out after adding s */
static size_t ready_after(struct textstream * ts, const char * s, bool final, bool * hit) {
    textstream_add(ts, s, strlen(s));
    return textstream_ready(ts, final, hit);
}

/* the logits hook bans one token; it records the best and the runner-up of
 * the logits it was given, so the test knows what greedy must pick instead */
struct ban {
    kiln_token token;
    int calls;
    kiln_token best, second;
    int accepted;
    kiln_token last;
};

static void accept_hook(kiln_token t, void * ud) {
    struct ban * b = ud;
    b->accepted++;
    b->last = t;
}

static void ban_hook(float * logits, int32_t n_vocab, void * ud) {
    struct ban * b = ud;
    b->calls++;
    b->best = b->second = 0;
    for (int32_t i = 1; i < n_vocab; i++) {
        if (logits[i] > logits[b->best]) { b->second = b->best; b->best = i; }
        else if (b->second == b->best || logits[i] > logits[b->second]) b->second = i;
    }
    if (b->token >= 0) logits[b->token] = -INFINITY;
}

/* kiln_gen driven by hand: the pieces, the ids it records, the hook, the
 * end of a generation and the checks of its options */
static void stepped_cases(const char * ref) {
    tu_case = "stepped generation";
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_ctx = 256;
    struct kiln_model * m = kiln_model_load(MODEL, mp);
    CHECK(m != NULL, "load: %s", kiln_last_error());
    if (!m) return;
    struct kiln_sampler * smpl = kiln_sampler_new(kiln_sampler_params_default());
    struct kiln_gen * g = kiln_gen_new(m);
    CHECK(g != NULL && smpl != NULL, "gen and sampler");
    const char * prompt = "Once upon a time";
    int32_t np = 0;
    const kiln_token * ids = kiln_gen_tokenize(g, prompt, (int32_t) strlen(prompt), true, false, &np);
    kiln_token want[8];
    CHECK(ids && np == 5 && kiln_tokenize(kiln_model_vocab(m), prompt, (int32_t) strlen(prompt), want, 8, true, false) == 5 &&
          memcmp(ids, want, sizeof(kiln_token) * 5) == 0, "kiln_gen_tokenize is kiln_tokenize (%d)", np);
    struct kiln_gen_token t;
    CHECK(kiln_gen_step(g, &t) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "not started"), "step before start refused");

    /* greedy, 200 steps: llama.cpp's reference, token by token */
    struct kiln_gen_params gp = kiln_gen_params_default();
    gp.max_tokens = 200;
    const int64_t wall0 = kiln_time_us();
    CHECK(kiln_gen_start(g, smpl, want, 5, gp) == KILN_STATUS_SUCCESS, "start: %s", kiln_last_error());
    static char text[8192];
    size_t n = 0;
    kiln_token gen_ids[256];
    int steps = 0;
    do {
        if (kiln_gen_step(g, &t) != KILN_STATUS_SUCCESS) break;
        if (t.len > 0 && n + (size_t) t.len < sizeof text) { memcpy(text + n, t.text, (size_t) t.len); n += (size_t) t.len; }
        if (steps < 256) gen_ids[steps] = t.token;
        steps++;
    } while (t.stop == KILN_GEN_RUNNING);
    const double wall = (double) (kiln_time_us() - wall0) * 1e-6;
    text[n] = 0;
    CHECK(steps == 200 && t.stop == KILN_GEN_MAX_TOKENS, "200 steps end by max_tokens (%d, stop %d)", steps, (int) t.stop);
    CHECK(strcmp(text, ref) == 0, "stepped greedy text equals llama.cpp's reference");
    int32_t nc = 0;
    const kiln_token * cache = kiln_gen_tokens(g, &nc);
    CHECK(nc == 5 + 199 && memcmp(cache, want, 5 * sizeof(kiln_token)) == 0 && memcmp(cache + 5, gen_ids, 199 * sizeof(kiln_token)) == 0 &&
          kiln_model_n_past(m) == nc, "the cache record: prompt + 199 evaluated tokens (%d, n_past %d)", nc, kiln_model_n_past(m));
    CHECK(kiln_gen_step(g, &t) == KILN_STATUS_SUCCESS && t.len == 0 && t.stop == KILN_GEN_MAX_TOKENS && t.token == KILN_TOKEN_NULL,
          "a step after the end: no token, no text, same stop");
    struct kiln_generate_stats st;
    kiln_gen_stats(g, &st);
    CHECK(st.prompt_tokens == 5 && st.generated_tokens == 200 && st.stop == KILN_GEN_MAX_TOKENS && st.gen_seconds > 0, "stats");
    CHECK(st.prompt_seconds + st.gen_seconds <= wall + 1e-3, "timed seconds %.4f + %.4f within the wall time %.4f (each counted once)",
          st.prompt_seconds, st.gen_seconds, wall);

    /* the hook sees the model's logits and its mask decides: ban the greedy
     * first token, and the runner-up comes instead */
    struct ban b = { gen_ids[0], 0, -1, -1, 0, -1 };
    gp.max_tokens = 1;
    gp.logits_hook = ban_hook;
    gp.accept_hook = accept_hook;
    gp.hook_data = &b;
    CHECK(kiln_gen_start(g, smpl, want, 5, gp) == KILN_STATUS_SUCCESS && kiln_gen_step(g, &t) == KILN_STATUS_SUCCESS, "hooked step");
    CHECK(b.calls == 1 && b.best == gen_ids[0] && t.token == b.second && t.token != gen_ids[0],
          "banned token %d (the hook saw it as best: %d) gives the runner-up %d, got %d", gen_ids[0], b.best, b.second, t.token);
    CHECK(b.accepted == 1 && b.last == t.token, "the accept hook sees the sampled token (%d calls, %d)", b.accepted, b.last);

    /* stop strings: the text ends right before one, over several steps */
    const char * stops[] = { "named Lily" };
    gp = kiln_gen_params_default();
    gp.max_tokens = 200;
    gp.stop = stops;
    gp.n_stop = 1;
    CHECK(kiln_gen_start(g, smpl, want, 5, gp) == KILN_STATUS_SUCCESS, "start with a stop string");
    n = 0;
    do {
        if (kiln_gen_step(g, &t) != KILN_STATUS_SUCCESS) break;
        char piece[256];
        snprintf(piece, sizeof piece, "%.*s", t.len, t.text);
        CHECK(strstr(piece, "named") == NULL, "no piece leaks the stop string's start: '%s'", piece);
        if (n + (size_t) t.len < sizeof text) { memcpy(text + n, t.text, (size_t) t.len); n += (size_t) t.len; }
    } while (t.stop == KILN_GEN_RUNNING);
    text[n] = 0;
    const char * at = strstr(ref, "named Lily");
    CHECK(t.stop == KILN_GEN_STOP_STRING && at && n == (size_t) (at - ref) && strncmp(text, ref, n) == 0,
          "text up to the stop string: '%s'", text);

    /* options are checked, and the message names the bad one */
    const char * empty[] = { "" };
    gp.stop = empty;
    CHECK(kiln_gen_start(g, smpl, want, 5, gp) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "stop string 0 is empty"), "empty stop: %s", kiln_last_error());
    gp.n_stop = 0;
    kiln_token bad[2] = { 1, 512 };
    CHECK(kiln_gen_start(g, smpl, bad, 2, gp) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "token 512 at 1 is outside the vocabulary"), "bad id: %s", kiln_last_error());
    CHECK(kiln_gen_start(g, smpl, want, 0, gp) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "no tokens"), "no prompt: %s", kiln_last_error());
    struct kiln_sampler_params sp = kiln_sampler_params_default();
    sp.top_p = 1.5f;
    CHECK(kiln_sampler_new(sp) == NULL && strstr(kiln_last_error(), "top_p must be in [0, 1]"), "top_p: %s", kiln_last_error());
    sp = kiln_sampler_params_default();
    sp.temperature = -1;
    CHECK(kiln_sampler_new(sp) == NULL && strstr(kiln_last_error(), "temperature"), "temperature: %s", kiln_last_error());
    sp = kiln_sampler_params_default();
    sp.penalty_last_n = -2;
    CHECK(kiln_sampler_new(sp) == NULL && strstr(kiln_last_error(), "penalty_last_n"), "penalty_last_n: %s", kiln_last_error());
    sp = kiln_sampler_params_default();
    sp.top_k = -1;
    CHECK(kiln_sampler_params_check(&sp) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "top_k"), "top_k: %s", kiln_last_error());

    kiln_gen_free(g);
    kiln_sampler_free(smpl);
    kiln_model_free(m);
}

static void textstream_cases(void) {
    tu_case = "textstream";
    bool hit;
    struct textstream ts = { 0 };
    /* a 4-byte character split over three tokens comes out whole */
    CHECK(ready_after(&ts, "ab\xf0\x9f", false, &hit) == 2 && !hit, "partial character held back");
    textstream_consume(&ts, 2);
    CHECK(ready_after(&ts, "\x98", false, &hit) == 0, "still partial");
    CHECK(ready_after(&ts, "\x80!", false, &hit) == 5, "complete character released");
    textstream_consume(&ts, 5);
    CHECK(ready_after(&ts, "\xe2\x82", true, &hit) == 2, "at the end everything goes");
    textstream_free(&ts);

    const char * stops[] = { "END", "\n\n" };
    struct textstream st = { NULL, 0, 0, stops, 2 };
    CHECK(ready_after(&st, "hello E", false, &hit) == 6 && !hit, "a possible stop prefix waits");
    textstream_consume(&st, 6);
    CHECK(ready_after(&st, "X", false, &hit) == 2 && !hit, "not a stop after all");
    textstream_consume(&st, 2);
    CHECK(ready_after(&st, "one\n", false, &hit) == 3 && !hit, "newline waits for a second one");
    CHECK(ready_after(&st, "\nmore", false, &hit) == 3 && hit, "stop string found: text before it only");
    textstream_free(&st);
    struct textstream s2 = { NULL, 0, 0, stops, 2 };
    CHECK(ready_after(&s2, "xxENDyyEND", false, &hit) == 2 && hit, "first occurrence wins");
    textstream_free(&s2);
}

/* stories260K cut to its first block: its keys and values depend only on
 * the token and its position, so a context shift of its cache is exactly a
 * re-evaluation of the kept ids (with more blocks the kept positions'
 * states also remember the dropped ones, as in llama.cpp's shift) */
static void * one_block_model(size_t * size) {
    struct kiln_context * sctx = NULL;
    struct kiln_gguf_init_params ip = { .no_alloc = false, .ctx = &sctx };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file(MODEL, ip);
    if (!src) return NULL;
    struct kiln_gguf_context * dst = kiln_gguf_init_empty();
    kiln_gguf_set_kv(dst, src);
    kiln_gguf_set_val_u32(dst, "llama.block_count", 1);
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(src); i++) {
        const char * name = kiln_gguf_get_tensor_name(src, i);
        if (strncmp(name, "blk.", 4) == 0 && strncmp(name, "blk.0.", 6) != 0) continue;
        kiln_gguf_add_tensor(dst, kiln_get_tensor(sctx, name));
    }
    *size = kiln_gguf_get_write_size(dst, false);
    void * buf = malloc(*size);
    kiln_gguf_write_to_buffer(dst, buf, *size, false);
    kiln_gguf_free(dst);
    kiln_gguf_free(src);
    kiln_free(sctx);
    return buf;
}

/* stories260K with the feed-forward padded with zeros from 172 to 192 (the
 * fixture that lets row-quantized types hold ffn_down): same function. With
 * wtype other than F32 the blocks' 2-D weights are quantized to it. */
static void * padded_model(size_t * size, enum kiln_type wtype) {
    struct kiln_context * sctx = NULL;
    struct kiln_gguf_init_params ip = { .no_alloc = false, .ctx = &sctx };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file(MODEL, ip);
    if (!src) return NULL;
    struct kiln_gguf_context * dst = kiln_gguf_init_empty();
    kiln_gguf_set_kv(dst, src);
    kiln_gguf_set_val_u32(dst, "llama.feed_forward_length", 192);
    struct kiln_context * ctx = tu_ctx(8u << 20);
    for (int64_t i = 0; i < kiln_gguf_get_n_tensors(src); i++) {
        const char * name = kiln_gguf_get_tensor_name(src, i);
        struct kiln_tensor * t = kiln_get_tensor(sctx, name), * o;
        if (strstr(name, "ffn_gate") || strstr(name, "ffn_up")) {
            o = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, t->ne[0], 192);
            memset(o->data, 0, kiln_nbytes(o));
            memcpy(o->data, t->data, kiln_nbytes(t));
        } else if (strstr(name, "ffn_down")) {
            o = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 192, t->ne[1]);
            memset(o->data, 0, kiln_nbytes(o));
            for (int64_t r = 0; r < t->ne[1]; r++) memcpy((char *) o->data + r * o->nb[1], (char *) t->data + r * t->nb[1], t->nb[1]);
        } else {
            o = kiln_dup_tensor(ctx, t);
            memcpy(o->data, t->data, kiln_nbytes(t));
        }
        if (wtype != KILN_TYPE_F32 && strncmp(name, "blk.", 4) == 0 && kiln_n_dims(o) == 2 && o->type == KILN_TYPE_F32) {
            struct kiln_tensor * q = kiln_new_tensor_2d(ctx, wtype, o->ne[0], o->ne[1]);
            kiln_quantize_chunk(wtype, o->data, q->data, 0, o->ne[1], o->ne[0], NULL);
            o = q;
        }
        kiln_set_name(o, name);
        kiln_gguf_add_tensor(dst, o);
    }
    *size = kiln_gguf_get_write_size(dst, false);
    void * buf = malloc(*size);
    kiln_gguf_write_to_buffer(dst, buf, *size, false);
    kiln_gguf_free(dst);
    kiln_gguf_free(src);
    kiln_free(ctx);
    kiln_free(sctx);
    return buf;
}

struct blob { void * data; size_t size; };

static struct kiln_model * load_blob(const struct blob * b) {
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_ctx = 256;
    return b ? kiln_model_load_from_buffer(b->data, b->size, mp) : kiln_model_load(MODEL, mp);
}

/* one greedy turn: start (the prompt maybe partly cached), step to the end;
 * the sampled ids go to out, the logits of the first sampled position to l0 */
static int turn(struct kiln_model * m, struct kiln_gen * g, struct kiln_sampler * smpl, const kiln_token * p, int32_t np, int max,
                kiln_token * out, float * l0, struct kiln_generate_stats * st) {
    struct kiln_gen_params gp = kiln_gen_params_default();
    gp.max_tokens = max;
    if (kiln_gen_start(g, smpl, p, np, gp) != KILN_STATUS_SUCCESS) return -1;
    /* the context the prompt's last position was evaluated in decides the first logits */
    memcpy(l0, kiln_model_logits(m), 512 * sizeof(float));
    struct kiln_gen_token t;
    int n = 0;
    do {
        if (kiln_gen_step(g, &t) != KILN_STATUS_SUCCESS) return -1;
        if (t.token >= 0 && t.stop != KILN_GEN_EOG) out[n++] = t.token;
    } while (t.stop == KILN_GEN_RUNNING);
    kiln_gen_stats(g, st);
    return n;
}

/* prompt caching: a 3-turn conversation on one kiln_gen evaluates only the
 * new ids of turns 2 and 3, and each reply equals a cold run (a fresh
 * kiln_gen on its own model given the whole conversation) token for token;
 * the first logits of each turn are compared too. An edit in the middle
 * re-evaluates from the first changed id. */
static void prompt_cache_cases(const struct blob * b, const char * what, bool exact) {
    tu_case = what;
    struct kiln_model * mw = load_blob(b), * mc = load_blob(b);
    if (!CHECK(mw && mc, "%s loads: %s", what, kiln_last_error())) { kiln_model_free(mw); kiln_model_free(mc); return; }
    struct kiln_sampler * smpl = kiln_sampler_new(kiln_sampler_params_default());
    struct kiln_gen * gw = kiln_gen_new(mw);
    const struct kiln_vocab * v = kiln_model_vocab(mw);
    static kiln_token conv[256], reply[256], cold[256];
    static float lw[512], lc[512];
    const char * user[3] = { "Once upon a time", " One day, Lily went to the park.", " She saw a big dog." };
    int32_t n = 0, prev_end = 0;
    struct kiln_generate_stats sw, sc;
    for (int k = 0; k < 3; k++) {
        n += kiln_tokenize(v, user[k], (int32_t) strlen(user[k]), conv + n, 256 - n, k == 0, false);
        const int nr = turn(mw, gw, smpl, conv, n, 24, reply, lw, &sw);
        struct kiln_gen * gc = kiln_gen_new(mc);
        const int ncold = turn(mc, gc, smpl, conv, n, 24, cold, lc, &sc);
        kiln_gen_free(gc);
        CHECK(nr > 0 && nr == ncold && memcmp(reply, cold, sizeof(kiln_token) * (size_t) nr) == 0,
              "turn %d: the reply equals a cold run's token for token (%d and %d tokens)", k + 1, nr, ncold);
        float dmax = 0;
        double num = 0, den = 0;
        for (int i = 0; i < 512; i++) {
            dmax = fmaxf(dmax, fabsf(lw[i] - lc[i]));
            num += (double) (lw[i] - lc[i]) * (lw[i] - lc[i]);
            den += (double) lc[i] * lc[i];
        }
        printf("  %s turn %d: prompt %d, cached %d, first logits max |warm - cold| = %.3g, nmse %.3g\n", what, k + 1, n,
               sw.cached_tokens, dmax, num / den);
        /* the warm run evaluated the last reply one id at a time, the cold
         * run in one batch: with q8_0 weights the batched kernels are the
         * mat-vec's sums bit for bit, with F32 weights the batched product
         * sums in another order (the same difference as a cold run in
         * batches of 1, measured below) */
        /* ...except from 64 prompt ids on, where the cold batch's attention
         * takes ggml's tiled prompt path (f32 scores and accumulators) and
         * the warm run's few-id batches the row path (Q and accumulators
         * in F16), as in llama.cpp: measured at 74 ids (one cold graph of
         * 74 rows), q8_0 nmse 9.4e-5 (the F16 roundings move q8 activation
         * roundings), F32 1.1e-6 */
        if (exact && n < 64) CHECK(dmax == 0, "turn %d: first logits equal the cold run's bit for bit (%.3g)", k + 1, dmax);
        else if (exact) CHECK(num / den < 2e-3, "turn %d: first logits agree with the cold run as attention's two paths do (nmse %.3g)", k + 1, num / den);
        else if (n < 64) CHECK(num / den < 1e-6, "turn %d: first logits agree with the cold run as batchings do (nmse %.3g)", k + 1, num / den);
        else CHECK(num / den < 2e-5, "turn %d: first logits agree with the cold run as batchings and attention's two paths do (nmse %.3g)",
                   k + 1, num / den);
        CHECK(sw.prompt_tokens == n && sc.cached_tokens == 0, "prompt_tokens is the prompt's length; a cold run caches nothing");
        if (k == 0) CHECK(sw.cached_tokens == 0, "turn 1: nothing cached");
        else CHECK(sw.cached_tokens == prev_end - 1, "turn %d: cached %d = previous prompt + reply - 1 (%d; the last sampled id was never evaluated)",
                   k + 1, sw.cached_tokens, prev_end - 1);
        if (n + nr > 200) break;
        memcpy(conv + n, reply, sizeof(kiln_token) * (size_t) nr);
        n += nr;
        prev_end = n;
    }
    /* an edit at position e: everything before it is reused, nothing after */
    const int32_t e = 9;
    conv[e] = conv[e] == 300 ? 301 : 300;
    struct kiln_gen * gc = kiln_gen_new(mc);
    const int nr = turn(mw, gw, smpl, conv, n, 16, reply, lw, &sw);
    const int ncold = turn(mc, gc, smpl, conv, n, 16, cold, lc, &sc);
    kiln_gen_free(gc);
    CHECK(sw.cached_tokens == e, "edit at %d: %d ids reused", e, sw.cached_tokens);
    CHECK(nr > 0 && nr == ncold && memcmp(reply, cold, sizeof(kiln_token) * (size_t) nr) == 0, "after the edit the reply equals a cold run's");
    /* the same prompt again: all but its last id come from the cache */
    turn(mw, gw, smpl, conv, n, 4, reply, lw, &sw);
    CHECK(sw.cached_tokens == n - 1, "the same prompt again: %d of %d cached (the last is evaluated for its logits)", sw.cached_tokens, n);
    /* someone else evaluating on the model invalidates the record */
    kiln_model_reset(mw);
    turn(mw, gw, smpl, conv, n, 4, reply, lw, &sw);
    CHECK(sw.cached_tokens == 0, "a reset model: nothing reused (%d)", sw.cached_tokens);
    struct kiln_gen_params gp = kiln_gen_params_default();
    gp.cache_prompt = false;
    CHECK(kiln_gen_start(gw, smpl, conv, n, gp) == KILN_STATUS_SUCCESS, "start without the cache");
    kiln_gen_stats(gw, &sw);
    CHECK(sw.cached_tokens == 0 && kiln_model_n_past(mw) == n, "cache_prompt false: the whole prompt evaluated");
    kiln_gen_free(gw);
    kiln_sampler_free(smpl);
    kiln_model_free(mw);
    kiln_model_free(mc);
}

/* context shift: a generation 3x longer than the context goes on; after a
 * shift the logits equal those of the kept ids evaluated afresh at their
 * new positions (F32 cache: within 1e-4; F16 cache: measured) */
static void context_shift_cases(void) {
    tu_case = "context shift";
    size_t osz = 0;
    void * one = one_block_model(&osz);
    CHECK(one != NULL, "one-block fixture");
    for (int f16 = 0; f16 < 2; f16++) {
        struct kiln_model_params mp = kiln_model_params_default();
        mp.n_threads = 1;
        mp.n_ctx = 64;
        mp.kv_type = f16 ? KILN_TYPE_F16 : KILN_TYPE_F32;
        struct kiln_model * a = kiln_model_load(MODEL, mp);
        struct kiln_model * o1 = one ? kiln_model_load_from_buffer(one, osz, mp) : NULL, * o2 = one ? kiln_model_load_from_buffer(one, osz, mp) : NULL;
        if (!CHECK(a && o1 && o2, "load: %s", kiln_last_error())) { kiln_model_free(a); kiln_model_free(o1); kiln_model_free(o2); break; }
        /* 60 ids of a greedy story, then drop 20 after BOS */
        struct kiln_sampler * smpl = kiln_sampler_new(kiln_sampler_params_default());
        struct kiln_gen * g = kiln_gen_new(a);
        kiln_token ids[64];
        int32_t np = kiln_tokenize(kiln_model_vocab(a), "Once upon a time", 16, ids, 64, true, false);
        static float l0[512];
        kiln_token story[64];
        const int ns = turn(a, g, smpl, ids, np, 60 - np, story, l0, &(struct kiln_generate_stats) { 0 });
        memcpy(ids + np, story, sizeof(kiln_token) * (size_t) ns);
        kiln_gen_free(g);
        CHECK(ns == 60 - np && kiln_model_eval(o1, ids, 60) == KILN_STATUS_SUCCESS, "60 ids evaluated");
        CHECK(kiln_model_shift(o1, 1, 20) == KILN_STATUS_SUCCESS && kiln_model_n_past(o1) == 40, "shift: 40 positions left");
        CHECK(kiln_model_shift(o1, 30, 20) == KILN_STATUS_INVALID_ARG, "shift past n_past refused: %s", kiln_last_error());
        const kiln_token next = 300;
        CHECK(kiln_model_eval(o1, &next, 1) == KILN_STATUS_SUCCESS, "eval after the shift");
        kiln_token kept[41];
        kept[0] = ids[0];
        memcpy(kept + 1, ids + 21, sizeof(kiln_token) * 39);
        kept[40] = next;
        CHECK(kiln_model_eval(o2, kept, 40) == KILN_STATUS_SUCCESS && kiln_model_eval(o2, kept + 40, 1) == KILN_STATUS_SUCCESS,
              "the kept ids afresh");
        float dmax = 0;
        for (int i = 0; i < 512; i++) dmax = fmaxf(dmax, fabsf(kiln_model_logits(o1)[i] - kiln_model_logits(o2)[i]));
        printf("  context shift, one block, %s cache: logits max |shifted - re-evaluated| = %.3g\n", f16 ? "F16" : "F32", dmax);
        if (!f16) CHECK(dmax <= 1e-4f, "F32 cache: shifted logits equal a re-evaluation within 1e-4 (%.3g)", dmax);
        else CHECK(dmax <= 1e-2f, "F16 cache: shifted logits near a re-evaluation (%.3g; turned keys rounded to F16 again)", dmax);
        kiln_model_free(o1);
        kiln_model_free(o2);

        /* a generation of 3x the context goes on; without the shift it stops */
        g = kiln_gen_new(a);
        struct kiln_gen_params gp = kiln_gen_params_default();
        gp.max_tokens = 192;
        gp.context_shift = true;
        CHECK(kiln_gen_start(g, smpl, ids, np, gp) == KILN_STATUS_SUCCESS, "start");
        struct kiln_gen_token t;
        int steps = 0;
        do { if (kiln_gen_step(g, &t) != KILN_STATUS_SUCCESS) break; steps++; } while (t.stop == KILN_GEN_RUNNING);
        struct kiln_generate_stats st;
        kiln_gen_stats(g, &st);
        int32_t nc = 0;
        const kiln_token * rec = kiln_gen_tokens(g, &nc);
        CHECK(t.stop == KILN_GEN_MAX_TOKENS && st.generated_tokens == 192 && st.shifted_tokens > 0 && nc == kiln_model_n_past(a) &&
              nc <= 64 && rec[0] == ids[0], "192 tokens in a context of 64 (%d steps, %d shifted, %d cached, BOS kept)", steps,
              st.shifted_tokens, nc);
        gp.context_shift = false;
        CHECK(kiln_gen_start(g, smpl, ids, np, gp) == KILN_STATUS_SUCCESS, "start without shift");
        do { if (kiln_gen_step(g, &t) != KILN_STATUS_SUCCESS) break; } while (t.stop == KILN_GEN_RUNNING);
        kiln_gen_stats(g, &st);
        CHECK(t.stop == KILN_GEN_CONTEXT && st.generated_tokens == 64 - np + 1, "without the shift: stops at the context (%d)", st.generated_tokens);
        kiln_gen_free(g);
        kiln_sampler_free(smpl);
        kiln_model_free(a);
    }
    free(one);
}

/* saved state: save after a turn, load into another model object, and the
 * next turn is the same tokens (and logits, bit for bit) as going on without
 * saving; bad, truncated and foreign states are refused, nothing changed */
static void state_cases(void) {
    tu_case = "saved state";
    struct kiln_model * a = load_blob(NULL), * b = load_blob(NULL);
    if (!CHECK(a && b, "load")) { kiln_model_free(a); kiln_model_free(b); return; }
    struct kiln_sampler * smpl = kiln_sampler_new(kiln_sampler_params_default());
    struct kiln_gen * ga = kiln_gen_new(a), * gb = kiln_gen_new(b);
    static kiln_token conv[256], r1[64], x[64], y[64];
    static float la[512], lb[512];
    struct kiln_generate_stats sa, sb;
    int32_t n = kiln_tokenize(kiln_model_vocab(a), "Once upon a time", 16, conv, 256, true, false);
    const int nr = turn(a, ga, smpl, conv, n, 20, r1, la, &sa);
    const size_t sz = kiln_gen_state_size(ga);
    uint8_t * st = malloc(sz + 1);
    CHECK(st && kiln_gen_state_save(ga, st, sz - 1) == KILN_STATUS_INVALID_ARG, "a short buffer refused");
    CHECK(kiln_gen_state_save(ga, st, sz) == KILN_STATUS_SUCCESS && sz == 40 + 4 * (size_t) (n + nr - 1) + kiln_model_kv_bytes(a, n + nr - 1),
          "saved %zu bytes: header, %d ids, K and V", sz, n + nr - 1);
    memcpy(conv + n, r1, sizeof(kiln_token) * (size_t) nr);
    n += nr;
    n += kiln_tokenize(kiln_model_vocab(a), " The next day", 13, conv + n, 256 - n, false, false);
    const int nx = turn(a, ga, smpl, conv, n, 20, x, la, &sa);

    /* refused: nothing of gb or b changes */
    CHECK(kiln_gen_state_load(gb, st, sz - 1) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "truncated"), "truncated: %s", kiln_last_error());
    st[4] = 2;
    CHECK(kiln_gen_state_load(gb, st, sz) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "version 2"), "version: %s", kiln_last_error());
    st[4] = 1;
    st[0] = 'X';
    CHECK(kiln_gen_state_load(gb, st, sz) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "not a saved state"), "magic: %s", kiln_last_error());
    st[0] = 'K';
    st[9] ^= 1;
    CHECK(kiln_gen_state_load(gb, st, sz) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "another model"), "fingerprint: %s", kiln_last_error());
    st[9] ^= 1;
    size_t osz = 0;
    void * one = one_block_model(&osz);
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_ctx = 256;
    struct kiln_model * o = one ? kiln_model_load_from_buffer(one, osz, mp) : NULL;
    struct kiln_gen * go = o ? kiln_gen_new(o) : NULL;
    CHECK(go && kiln_gen_state_load(go, st, sz) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "another model"), "other model: %s", kiln_last_error());
    kiln_gen_free(go);
    kiln_model_free(o);
    free(one);
    mp.kv_type = KILN_TYPE_F32;
    o = kiln_model_load(MODEL, mp);
    go = o ? kiln_gen_new(o) : NULL;
    CHECK(go && kiln_gen_state_load(go, st, sz) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "type"), "other KV type: %s", kiln_last_error());
    kiln_gen_free(go);
    kiln_model_free(o);
    int32_t nb = -1;
    kiln_gen_tokens(gb, &nb);
    CHECK(nb == 0 && kiln_model_n_past(b) == 0, "after the refusals nothing changed");

    CHECK(kiln_gen_state_load(gb, st, sz) == KILN_STATUS_SUCCESS, "load: %s", kiln_last_error());
    const int ny = turn(b, gb, smpl, conv, n, 20, y, lb, &sb);
    CHECK(sb.cached_tokens == sa.cached_tokens && sb.cached_tokens == (int32_t) ((sz - 40 - kiln_model_kv_bytes(a, sb.cached_tokens)) / 4),
          "the loaded cache serves the next prompt (%d cached)", sb.cached_tokens);
    CHECK(nx > 0 && nx == ny && memcmp(x, y, sizeof(kiln_token) * (size_t) nx) == 0 && memcmp(la, lb, sizeof la) == 0,
          "after save and load: the same %d tokens and bit-identical logits as going on without saving", nx);
    free(st);
    kiln_gen_free(ga);
    kiln_gen_free(gb);
    kiln_sampler_free(smpl);
    kiln_model_free(a);
    kiln_model_free(b);
}

int main(void) {
    textstream_cases();
    const char * ref = reference();
    if (!CHECK(ref != NULL, "reference text in models/README.md")) return tu_finish();

    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    struct kiln_model * m = kiln_model_load(MODEL, mp);
    if (!CHECK(m != NULL, "load: %s", kiln_last_error())) return tu_finish();
    CHECK(kiln_model_n_ctx(m) == 128 && kiln_model_n_ctx_train(m) == 128, "context from metadata: %d", kiln_model_n_ctx(m));
    CHECK(kiln_model_n_vocab(m) == 512 && kiln_model_n_embd(m) == 64, "vocab 512, embedding 64");
    char arch[32];
    CHECK(kiln_model_meta_val_str(m, "general.architecture", arch, sizeof arch) == 5 && !strcmp(arch, "llama"), "metadata read");
    CHECK(kiln_model_meta_val_str(m, "llama.block_count", arch, sizeof arch) == 1 && !strcmp(arch, "5"), "numbers rendered: %s", arch);
    CHECK(kiln_model_meta_val_str(m, "no.such.key", arch, sizeof arch) == -1, "absent key");
    CHECK(kiln_gguf_find_key(kiln_model_gguf(m), "tokenizer.ggml.tokens") >= 0, "GGUF metadata reachable");

    static struct sink s;
    struct kiln_generate_stats st;

    tu_case = "prompt too long";
    char * lp = malloc(4000);
    lp[0] = 0;
    for (int i = 0; i < 100; i++) strcat(lp, "Once upon a time ");
    CHECK(run(m, lp, 10, &s, NULL, 0, &st) == KILN_STATUS_INVALID_ARG, "prompt over the context is refused");
    CHECK(strstr(kiln_last_error(), "longer than the context") != NULL, "clear message: %s", kiln_last_error());
    free(lp);
    kiln_token many[200];
    for (int i = 0; i < 200; i++) many[i] = 300;
    CHECK(kiln_model_eval(m, many, 200) == KILN_STATUS_INVALID_ARG, "eval past the context refused");

    tu_case = "reference";
    CHECK(kiln_model_set_n_ctx(m, 256) == KILN_STATUS_SUCCESS, "context 256");
    enum kiln_status r = run(m, "Once upon a time", 200, &s, NULL, 0, &st);
    CHECK(r == KILN_STATUS_SUCCESS, "generate: %s", kiln_last_error());
    CHECK(st.prompt_tokens == 5 && st.generated_tokens == 200, "5 prompt tokens, 200 generated (%d, %d)", st.prompt_tokens, st.generated_tokens);
    CHECK(strcmp(s.text, ref) == 0, "greedy 200 tokens equal llama.cpp's reference");
    if (strcmp(s.text, ref) != 0) fprintf(stderr, "got:\n%s\nexpected:\n%s\n", s.text, ref);

    tu_case = "abort";
    volatile int flag = 0;
    kiln_model_set_abort_flag(m, &flag);
    s.abort_flag = &flag;
    s.abort_after = 5;
    r = run(m, "Once upon a time", 200, &s, NULL, 0, &st);
    CHECK(r == KILN_STATUS_ABORTED, "abort flag stops generation (%d)", (int) r);
    CHECK(st.generated_tokens == 5 && strncmp(s.text, ref, s.n) == 0, "the text so far is the reference's start (%d tokens)", st.generated_tokens);
    flag = 0;
    s.abort_flag = NULL;
    r = run(m, "Once upon a time", 200, &s, NULL, 0, &st);
    CHECK(r == KILN_STATUS_SUCCESS && strcmp(s.text, ref) == 0, "after an abort the model generates the reference again");
    kiln_model_set_abort_flag(m, NULL);

    tu_case = "stop strings";
    const char * stops[] = { "xyz", "Lily." };
    r = run(m, "Once upon a time", 200, &s, stops, 2, &st);
    CHECK(r == KILN_STATUS_SUCCESS && st.stopped_by_string, "stopped by a stop string");
    CHECK(strcmp(s.text, ", there was a little girl named ") == 0, "text ends before the stop string: '%s'", s.text);
    r = run(m, "Once upon a time", 20, &s, stops, 1, &st);
    CHECK(st.generated_tokens == 20 && !st.stopped_by_string && strncmp(s.text, ref, s.n) == 0 && s.n > 40,
          "max tokens: 20, an unseen stop string holds nothing back at the end");

    tu_case = "batches and kv types";
    float * logits_a = malloc(512 * sizeof(float));
    kiln_token prompt[16];
    const char * text = "Once upon a time, there was a little girl named Lily.";
    int32_t np = kiln_tokenize(kiln_model_vocab(m), text, (int32_t) strlen(text), prompt, 16, true, false);
    kiln_model_reset(m);
    CHECK(kiln_model_eval(m, prompt, np) == KILN_STATUS_SUCCESS, "eval prompt in one batch");
    memcpy(logits_a, kiln_model_logits(m), 512 * sizeof(float));
    kiln_model_free(m);

    mp.n_batch = 3;
    mp.kv_type = KILN_TYPE_F32;
    m = kiln_model_load(MODEL, mp);
    CHECK(m && kiln_model_eval(m, prompt, np) == KILN_STATUS_SUCCESS, "eval prompt in batches of 3, F32 cache");
    double num = 0, den = 0;
    for (int i = 0; i < 512 && m; i++) {
        double d = (double) kiln_model_logits(m)[i] - logits_a[i];
        num += d * d;
        den += (double) logits_a[i] * logits_a[i];
    }
    CHECK(m && num / den < 1e-6, "logits agree across batching and cache type (nmse %.3g)", num / den);
    CHECK(kiln_model_n_past(m) == np, "n_past counts the prompt");
    kiln_model_truncate(m, 4);
    CHECK(kiln_model_n_past(m) == 4, "truncate");
    kiln_model_free(m);

    tu_case = "threads";
    mp = kiln_model_params_default();
    mp.n_threads = 2;
    m = kiln_model_load(MODEL, mp);
    r = run(m, "Once upon a time", 8, &s, NULL, 0, &st);
    CHECK(r == KILN_STATUS_SUCCESS && strncmp(s.text, ref, s.n) == 0 && s.n > 20, "2 threads: same start");
    kiln_model_free(m);

    tu_case = "padded feed-forward";
    size_t psz = 0;
    void * pbuf = padded_model(&psz, KILN_TYPE_F32);
    mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_ctx = 256;
    mp.no_copy = true; /* weights used in place */
    m = pbuf ? kiln_model_load_from_buffer(pbuf, psz, mp) : NULL;
    CHECK(m != NULL, "padded model loads: %s", kiln_last_error());
    if (m) {
        r = run(m, "Once upon a time", 200, &s, NULL, 0, &st);
        CHECK(r == KILN_STATUS_SUCCESS && strcmp(s.text, ref) == 0, "zero-padded feed-forward gives the reference too");
        kiln_model_free(m);
    }
    free(pbuf);

    tu_case = "bad input";
    mp.vocab_only = true;
    m = kiln_model_load(MODEL, mp);
    CHECK(m != NULL && kiln_model_vocab(m) != NULL, "vocab-only load");
    CHECK(kiln_model_eval(m, prompt, 1) == KILN_STATUS_INVALID_ARG, "eval on a vocab-only model refused");
    kiln_model_free(m);
    mp.vocab_only = false;
    CHECK(kiln_model_load("models/none.gguf", mp) == NULL, "missing file: %s", kiln_last_error());
    m = kiln_model_load(MODEL, mp);
    kiln_token bad = 512;
    CHECK(kiln_model_eval(m, &bad, 1) == KILN_STATUS_INVALID_ARG, "token out of range refused");
    CHECK(kiln_model_eval(m, NULL, 1) == KILN_STATUS_INVALID_ARG, "NULL tokens refused");
    CHECK(run(m, "", 5, &s, NULL, 0, &st) == KILN_STATUS_SUCCESS && st.prompt_tokens == 1, "empty prompt: just BOS");
    kiln_model_free(m);

    /* an architecture the runner does not know: same file, other name */
    struct kiln_gguf_init_params gp = { .no_alloc = false, .ctx = NULL };
    struct kiln_gguf_context * g = kiln_gguf_init_from_file(MODEL, gp);
    CHECK(g != NULL, "read gguf");
    if (g) {
        struct kiln_gguf_context * g2 = kiln_gguf_init_empty();
        kiln_gguf_set_kv(g2, g);
        kiln_gguf_set_val_str(g2, "general.architecture", "mamba");
        size_t sz = kiln_gguf_get_write_size(g2, false);
        void * buf = malloc(sz);
        kiln_gguf_write_to_buffer(g2, buf, sz, false);
        kiln_gguf_free(g2);
        m = kiln_model_load_from_buffer(buf, sz, mp);
        CHECK(m == NULL && strstr(kiln_last_error(), "'mamba'") != NULL, "unsupported architecture named: %s", kiln_last_error());
        kiln_model_free(m);
        free(buf);
        kiln_gguf_free(g);
    }
    free(logits_a);
    stepped_cases(ref);
    prompt_cache_cases(NULL, "stories260K", false);
    size_t qsz = 0;
    void * qbuf = padded_model(&qsz, KILN_TYPE_Q8_0);
    if (CHECK(qbuf != NULL, "q8_0 fixture")) prompt_cache_cases(&(struct blob) { qbuf, qsz }, "stories260K q8_0", true);
    free(qbuf);
    context_shift_cases();
    state_cases();
    return tu_finish();
}
