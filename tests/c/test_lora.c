/*
 * test_lora.c — LoRA adapters (kiln_adapter_lora_*, src/models/lora.c) on
 * the stories260K model (F32 llama, untied output):
 *
 *  - base + adapters against the same model with the adapters merged into
 *    its weights by this test in double precision (W + s B A, token
 *    embedding rows + s A B): logits agree to float rounding; the adapters
 *    do change them; scale 0 and removing the adapters give the base logits
 *    bit for bit; two adapters add up;
 *  - malformed adapters (wrong general.type / adapter.type / architecture,
 *    unknown suffix, missing base weight, non-adaptable weight, missing half
 *    of a pair, transposed or mismatched shapes, unsupported type, 3-D
 *    tensor, non-finite alpha, no tensors, every truncation of a valid file)
 *    give NULL and a message naming the problem; an adapter of another
 *    model is refused.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"
#include "util/test_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL "models/stories260K.gguf"

struct tdef {
    const char * name;
    enum kiln_type type;
    int64_t ne0, ne1, ne2;
};

/* build() sets the first value of tensor g_poison_at (-1: none) to g_poison */
static int g_poison_at = -1;
static float g_poison;

struct meta {
    const char * gtype, * atype, * arch;
    float alpha;
};
static const struct meta k_ok = { "adapter", "lora", "llama", 8.0f };

/* an adapter file in memory with these tensors (uniform random values) */
static void * build(struct meta mt, const struct tdef * t, int n, size_t * size) {
    struct kiln_context * ctx = tu_ctx(8u << 20);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    if (mt.gtype) kiln_gguf_set_val_str(g, "general.type", mt.gtype);
    if (mt.atype) kiln_gguf_set_val_str(g, "adapter.type", mt.atype);
    if (mt.arch) kiln_gguf_set_val_str(g, "general.architecture", mt.arch);
    kiln_gguf_set_val_f32(g, "adapter.lora.alpha", mt.alpha);
    float * row = malloc(sizeof(float) * 4096);
    for (int i = 0; i < n; i++) {
        struct kiln_tensor * x = kiln_new_tensor_3d(ctx, t[i].type, t[i].ne0, t[i].ne1, t[i].ne2 ? t[i].ne2 : 1);
        const int64_t rows = t[i].ne1 * (t[i].ne2 ? t[i].ne2 : 1);
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < t[i].ne0; j++) row[j] = tu_rand_uniform(-0.3f, 0.3f);
            if (r == 0 && i == g_poison_at) row[0] = g_poison;
            char * dst = (char *) x->data + r * kiln_row_size(t[i].type, t[i].ne0);
            if (t[i].type == KILN_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) t[i].ne0);
            else kiln_get_type_traits(t[i].type)->from_float_ref(row, dst, t[i].ne0);
        }
        kiln_set_name(x, t[i].name);
        kiln_gguf_add_tensor(g, x);
    }
    free(row);
    *size = kiln_gguf_get_write_size(g, false);
    void * buf = malloc(*size);
    if (kiln_gguf_write_to_buffer(g, buf, *size, false) != *size) { free(buf); buf = NULL; }
    kiln_gguf_free(g);
    kiln_free(ctx);
    return buf;
}

/* loading it for model m fails with a message containing want */
static void expect_bad(struct kiln_model * m, const char * what, struct meta mt, const struct tdef * t, int n, const char * want) {
    size_t size = 0;
    void * buf = build(mt, t, n, &size);
    struct kiln_adapter_lora * ad = buf ? kiln_adapter_lora_init_from_buffer(m, buf, size) : NULL;
    CHECK(buf && !ad && strstr(kiln_last_error(), want), "%s refused: '%s' (want '%s')", what, kiln_last_error(), want);
    kiln_adapter_lora_free(ad);
    free(buf);
}

static const kiln_token k_prompt[] = { 1, 403, 407, 261, 378, 291, 302, 300 };
#define N_PROMPT ((int32_t) (sizeof k_prompt / sizeof k_prompt[0]))

/* logits after the whole prompt, one token at a time */
static float * run(struct kiln_model * m) {
    kiln_model_reset(m);
    for (int32_t i = 0; i < N_PROMPT; i++) {
        if (kiln_model_eval(m, &k_prompt[i], 1) != KILN_STATUS_SUCCESS) return NULL;
    }
    const int32_t n = kiln_model_n_vocab(m);
    float * out = malloc(sizeof(float) * (size_t) n);
    memcpy(out, kiln_model_logits(m), sizeof(float) * (size_t) n);
    return out;
}

static double max_diff(const float * a, const float * b, int32_t n) {
    double d = 0;
    for (int32_t i = 0; i < n; i++) d = fmax(d, fabs((double) a[i] - b[i]));
    return d;
}

/* value j of row r of a 2-D tensor as double */
static double at(const struct kiln_tensor * t, int64_t r, int64_t j) {
    const char * row = (const char *) t->data + r * t->nb[1];
    if (t->type == KILN_TYPE_F32) return ((const float *) row)[j];
    return kiln_fp16_to_fp32(((const kiln_fp16_t *) row)[j]);
}

/* W (F32, in the model's context) += s * delta of one adapter pair, in double */
static void merge_pair(struct kiln_context * wctx, struct kiln_context * actx, const char * base, double s) {
    char na[128], nb[128];
    snprintf(na, sizeof na, "%s.lora_a", base);
    snprintf(nb, sizeof nb, "%s.lora_b", base);
    struct kiln_tensor * w = kiln_get_tensor(wctx, base), * a = kiln_get_tensor(actx, na), * b = kiln_get_tensor(actx, nb);
    const bool embd = !strcmp(base, "token_embd.weight");
    const int64_t r = b->ne[0];
    for (int64_t o = 0; o < w->ne[1]; o++) {
        float * row = (float *) ((char *) w->data + o * w->nb[1]);
        for (int64_t i = 0; i < w->ne[0]; i++) {
            double d = 0;
            for (int64_t k = 0; k < r; k++) d += embd ? at(a, o, k) * at(b, i, k) : at(b, o, k) * at(a, k, i);
            row[i] = (float) ((double) row[i] + s * d);
        }
    }
}

static bool write_file(const char * dir, const char * name, const void * data, size_t size) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE * f = fopen(path, "wb");
    const bool ok = f && fwrite(data, 1, size, f) == size;
    if (f) fclose(f);
    return ok;
}

/* `test_lora --write-seeds DIR` writes the adapters built here, for
 * scripts/fuzz.sh's fuzz_lora corpus */
int main(int argc, char ** argv) {
    const char * seeds = argc == 3 && !strcmp(argv[1], "--write-seeds") ? argv[2] : NULL;
    tu_seed(22);
    size_t msize = 0;
    char * mbytes = tu_read_file(MODEL, &msize);
    if (!CHECK(mbytes != NULL, "read %s", MODEL)) return tu_finish();
    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_ctx = 64;
    /* an F32 cache: with F16 K/V two equal sums can round to neighbouring F16
     * values (measured up to 5.5e-3 in the logits in wasm), which would hide the
     * adapter arithmetic this test compares with a double-precision merge */
    mp.kv_type = KILN_TYPE_F32;
    struct kiln_model * m = kiln_model_load_from_buffer(mbytes, msize, mp);
    if (!CHECK(m != NULL, "load: %s", kiln_last_error())) return tu_finish();
    const int32_t nv = kiln_model_n_vocab(m);

    /* adapter 1: F32, rank 4, alpha 8 on q, v of every layer, the output and the token embedding */
    struct tdef t1[64];
    int n1 = 0;
    static char names[64][64];
    for (int il = 0; il < 5; il++) {
        const char * w[] = { "attn_q", "attn_v" };
        const int64_t out[] = { 64, 32 };
        for (int k = 0; k < 2; k++) {
            snprintf(names[n1], sizeof names[0], "blk.%d.%s.weight.lora_a", il, w[k]);
            t1[n1] = (struct tdef) { names[n1], KILN_TYPE_F32, 64, 4, 0 }; n1++;
            snprintf(names[n1], sizeof names[0], "blk.%d.%s.weight.lora_b", il, w[k]);
            t1[n1] = (struct tdef) { names[n1], KILN_TYPE_F32, 4, out[k], 0 }; n1++;
        }
    }
    t1[n1++] = (struct tdef) { "output.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 };
    t1[n1++] = (struct tdef) { "output.weight.lora_b", KILN_TYPE_F32, 4, 512, 0 };
    t1[n1++] = (struct tdef) { "token_embd.weight.lora_a", KILN_TYPE_F32, 4, 512, 0 };
    t1[n1++] = (struct tdef) { "token_embd.weight.lora_b", KILN_TYPE_F32, 4, 64, 0 };
    t1[n1++] = (struct tdef) { "blk.0.attn_norm.weight", KILN_TYPE_F32, 64, 1, 0 }; /* skipped, as llama.cpp does */
    /* adapter 2: F16, rank 2, on the FFN down projections of layers 1 and 3, and layer 0's q (shared with adapter 1) */
    const struct tdef t2[] = {
        { "blk.1.ffn_down.weight.lora_a", KILN_TYPE_F16, 172, 2, 0 }, { "blk.1.ffn_down.weight.lora_b", KILN_TYPE_F16, 2, 64, 0 },
        { "blk.3.ffn_down.weight.lora_a", KILN_TYPE_F16, 172, 2, 0 }, { "blk.3.ffn_down.weight.lora_b", KILN_TYPE_F16, 2, 64, 0 },
        { "blk.0.attn_q.weight.lora_a", KILN_TYPE_F16, 64, 2, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_F16, 2, 64, 0 },
    };
    size_t s1 = 0, s2 = 0;
    void * b1 = build(k_ok, t1, n1, &s1);
    struct meta m2 = k_ok;
    m2.alpha = 0.0f; /* no alpha: the scale is the user's */
    void * b2 = build(m2, t2, 6, &s2);
    if (seeds) {
        const struct tdef q_seed[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_Q8_0, 64, 32, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_Q8_0, 32, 64, 0 } };
        size_t s3 = 0;
        void * b3 = build(k_ok, q_seed, 2, &s3);
        const bool ok = b1 && b2 && b3 && write_file(seeds, "lora-f32.gguf", b1, s1) && write_file(seeds, "lora-f16.gguf", b2, s2) &&
                        write_file(seeds, "lora-q8_0.gguf", b3, s3);
        free(b1); free(b2); free(b3); free(mbytes);
        kiln_model_free(m);
        fprintf(ok ? stdout : stderr, "test_lora: %s seeds in %s\n", ok ? "wrote" : "could not write", seeds);
        return ok ? 0 : 1;
    }
    struct kiln_adapter_lora * a1 = b1 ? kiln_adapter_lora_init_from_buffer(m, b1, s1) : NULL;
    struct kiln_adapter_lora * a2 = b2 ? kiln_adapter_lora_init_from_buffer(m, b2, s2) : NULL;
    CHECK(a1 && a2, "valid adapters load: %s", kiln_last_error());
    if (!a1 || !a2) return tu_finish();
    CHECK(kiln_adapter_lora_n_weights(a1) == 12 && kiln_adapter_lora_alpha(a1) == 8.0f, "adapter 1: %d weights, alpha %g",
          kiln_adapter_lora_n_weights(a1), (double) kiln_adapter_lora_alpha(a1));
    CHECK(kiln_adapter_lora_n_weights(a2) == 3 && kiln_adapter_lora_alpha(a2) == 0.0f, "adapter 2: 3 weights, no alpha");

    float * base = run(m);
    const uint64_t fp0 = kiln_model_fingerprint(m);
    CHECK(kiln_model_set_adapter_lora(m, a1, 0.7f) == KILN_STATUS_SUCCESS, "set adapter 1");
    const uint64_t fp1 = kiln_model_fingerprint(m);
    CHECK(kiln_model_set_adapter_lora(m, a1, 0.5f) == KILN_STATUS_SUCCESS && kiln_model_fingerprint(m) != fp1 && fp1 != fp0,
          "saved states tell adapters and scales apart (the fingerprint changes)");
    CHECK(kiln_model_set_adapter_lora(m, a1, 0.7f) == KILN_STATUS_SUCCESS && kiln_model_fingerprint(m) == fp1, "and back");
    CHECK(kiln_model_set_adapter_lora(m, a2, 1.5f) == KILN_STATUS_SUCCESS, "set adapter 2");
    float * both = run(m);
    CHECK(kiln_model_rm_adapter_lora(m, a2) == KILN_STATUS_SUCCESS, "remove adapter 2");
    float * one = run(m);
    CHECK(kiln_model_set_adapter_lora(m, a1, 0.0f) == KILN_STATUS_SUCCESS, "scale 0");
    float * zero = run(m);
    kiln_model_clear_adapter_lora(m);
    float * cleared = run(m);
    CHECK(kiln_model_fingerprint(m) == fp0, "no adapters: the base fingerprint");
    CHECK(kiln_model_rm_adapter_lora(m, a2) == KILN_STATUS_INVALID_ARG, "removing an adapter that is not set: %s", kiln_last_error());

    /* the reference: the same weights with the deltas merged in double */
    struct kiln_context * actx1 = NULL, * actx2 = NULL, * wctx = NULL;
    struct kiln_gguf_init_params ap = { .no_alloc = false, .ctx = &actx1 };
    struct kiln_gguf_context * ag1 = kiln_gguf_init_from_buffer(b1, s1, ap);
    ap.ctx = &actx2;
    struct kiln_gguf_context * ag2 = kiln_gguf_init_from_buffer(b2, s2, ap);
    struct kiln_gguf_init_params wp = { .no_alloc = false, .ctx = &wctx };
    struct kiln_gguf_context * wg = kiln_gguf_init_from_buffer(mbytes, msize, wp);
    struct kiln_gguf_context * wg2 = NULL;
    struct kiln_context * wctx2 = NULL;
    wp.ctx = &wctx2;
    wg2 = kiln_gguf_init_from_buffer(mbytes, msize, wp);
    const double s_1 = 0.7 * 8.0 / 4.0;
    for (int i = 0; i + 1 < n1 - 1; i += 2) {
        char base_name[64];
        snprintf(base_name, sizeof base_name, "%.*s", (int) (strlen(t1[i].name) - 7), t1[i].name);
        merge_pair(wctx, actx1, base_name, s_1);
        merge_pair(wctx2, actx1, base_name, s_1);
    }
    const char * b2names[] = { "blk.1.ffn_down.weight", "blk.3.ffn_down.weight", "blk.0.attn_q.weight" };
    for (int i = 0; i < 3; i++) merge_pair(wctx2, actx2, b2names[i], 1.5);
    struct kiln_model * ref1 = kiln_model_load_from_gguf(wg, wctx, mp);
    struct kiln_model * ref2 = kiln_model_load_from_gguf(wg2, wctx2, mp);
    float * r1 = ref1 ? run(ref1) : NULL, * r2 = ref2 ? run(ref2) : NULL;
    if (CHECK(base && both && one && zero && cleared && r1 && r2, "all runs evaluate: %s", kiln_last_error())) {
        const double d1 = max_diff(one, r1, nv), d2 = max_diff(both, r2, nv), dchg = max_diff(one, base, nv), dchg2 = max_diff(both, one, nv);
        printf("test_lora: max |dlogit| against the double-precision merge: adapter 1 %.2e (it moves logits by %.2f), "
               "adapters 1 + 2 %.2e (adapter 2 moves them by %.2f)\n", d1, dchg, d2, dchg2);
        CHECK(d1 < 1e-4 * (1 + dchg), "adapter 1 = merged in double: max |dlogit| %.2e (the adapter moves logits by %.2e)", d1, dchg);
        /* adapter 2 is F16: its A x rounds x to F16 first (as ggml does), 2^-11
         * relative per element, so its part of the logits is good to ~1e-3 */
        CHECK(d2 < 1e-4 * (1 + dchg) + 5e-3 * dchg2, "adapters 1 + 2 = merged in double: max |dlogit| %.2e (adapter 2 moves them by %.2e)", d2, dchg2);
        CHECK(dchg > 0.1 && dchg2 > 0.01, "the adapters change the logits (%.3f, %.3f)", dchg, dchg2);
        CHECK(max_diff(zero, base, nv) == 0.0 && max_diff(cleared, base, nv) == 0.0, "scale 0 and cleared adapters give the base logits exactly");
    }
    free(base); free(both); free(one); free(zero); free(cleared); free(r1); free(r2);
    kiln_model_free(ref1);
    kiln_model_free(ref2);
    kiln_gguf_free(wg); kiln_gguf_free(wg2); kiln_free(wctx); kiln_free(wctx2);
    kiln_gguf_free(ag1); kiln_gguf_free(ag2); kiln_free(actx1); kiln_free(actx2);

    /* malformed adapters */
    const struct tdef q_ok[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_F32, 4, 64, 0 } };
    struct meta bad = k_ok;
    bad.gtype = "model";
    expect_bad(m, "general.type model", bad, q_ok, 2, "general.type is 'model'");
    bad = k_ok; bad.gtype = NULL;
    expect_bad(m, "no general.type", bad, q_ok, 2, "general.type is '(missing)'");
    bad = k_ok; bad.atype = "ia3";
    expect_bad(m, "adapter.type ia3", bad, q_ok, 2, "adapter.type");
    bad = k_ok; bad.arch = "qwen3";
    expect_bad(m, "another architecture", bad, q_ok, 2, "'qwen3' differs from the model's 'llama'");
    bad = k_ok; bad.alpha = NAN;
    expect_bad(m, "alpha NaN", bad, q_ok, 2, "alpha is not a finite");
    expect_bad(m, "no tensors", k_ok, q_ok, 0, "no lora_a");
    const struct tdef suffix[] = { { "blk.0.attn_q.weight.lora_c", KILN_TYPE_F32, 64, 4, 0 } };
    expect_bad(m, "unknown suffix", k_ok, suffix, 1, "neither");
    const struct tdef nobase[] = { { "blk.9.attn_q.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "blk.9.attn_q.weight.lora_b", KILN_TYPE_F32, 4, 64, 0 } };
    expect_bad(m, "missing base weight", k_ok, nobase, 2, "'blk.9.attn_q.weight', which the model does not have");
    const struct tdef norm[] = { { "blk.0.ffn_norm.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "blk.0.ffn_norm.weight.lora_b", KILN_TYPE_F32, 4, 1, 0 } };
    expect_bad(m, "non-adaptable weight", k_ok, norm, 2, "LoRA applies to");
    expect_bad(m, "lora_a alone", k_ok, q_ok, 1, "has lora_a but no lora_b");
    const struct tdef trans[] = { { "blk.0.attn_v.weight.lora_a", KILN_TYPE_F32, 4, 64, 0 }, { "blk.0.attn_v.weight.lora_b", KILN_TYPE_F32, 32, 4, 0 } };
    expect_bad(m, "transposed pair", k_ok, trans, 2, "do not fit the weight [64, 32]");
    const struct tdef rank[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_F32, 8, 64, 0 } };
    expect_bad(m, "rank mismatch", k_ok, rank, 2, "rank 4 but lora_b 8");
    const struct tdef q4[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_Q4_0, 64, 32, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_Q4_0, 32, 64, 0 } };
    expect_bad(m, "Q4_0 adapter", k_ok, q4, 2, "type q4_0");
    const struct tdef d3[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_F32, 64, 4, 2 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_F32, 4, 64, 0 } };
    expect_bad(m, "3-D lora_a", k_ok, d3, 2, "not 2-dimensional");
    const struct tdef embd[] = { { "token_embd.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "token_embd.weight.lora_b", KILN_TYPE_F32, 4, 512, 0 } };
    expect_bad(m, "embedding pair in the matrix orientation", k_ok, embd, 2, "do not fit the embedding");
    const struct tdef fin[] = { { "blk.0.attn_q.weight.lora_a", KILN_TYPE_F32, 64, 4, 0 }, { "blk.0.attn_q.weight.lora_b", KILN_TYPE_F16, 4, 64, 0 } };
    g_poison_at = 1; g_poison = INFINITY;
    expect_bad(m, "an infinite F16 lora_b value", k_ok, fin, 2, "'blk.0.attn_q.weight.lora_b' holds an infinite or NaN value");
    g_poison_at = 0; g_poison = NAN;
    expect_bad(m, "a NaN lora_a value", k_ok, fin, 2, "'blk.0.attn_q.weight.lora_a' holds an infinite or NaN value");
    g_poison_at = -1;

    /* every truncation of a valid adapter: refused, nothing crashes */
    int refused = 0, cuts = 0;
    for (size_t cut = 0; cut < s2; cut += 1 + cut / 16, cuts++) {
        struct kiln_adapter_lora * ad = kiln_adapter_lora_init_from_buffer(m, b2, cut);
        refused += ad == NULL && kiln_last_error()[0] != 0;
        kiln_adapter_lora_free(ad);
    }
    CHECK(refused == cuts, "%d of %d truncations refused", refused, cuts);

    /* an adapter of another model */
    struct kiln_model * other = kiln_model_load_from_buffer(mbytes, msize, mp);
    CHECK(other && kiln_model_set_adapter_lora(other, a1, 1.0f) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "another model"),
          "an adapter of another model is refused: %s", kiln_last_error());
    CHECK(kiln_adapter_lora_init(m, "no/such/adapter.gguf") == NULL && kiln_last_error()[0], "missing file: %s", kiln_last_error());
    kiln_model_free(other);

    /* freeing an adapter that is set detaches it; the model frees the rest */
    CHECK(kiln_model_set_adapter_lora(m, a2, 1.0f) == KILN_STATUS_SUCCESS, "set again");
    kiln_adapter_lora_free(a2);
    float * after = run(m);
    float * base2 = NULL;
    kiln_model_clear_adapter_lora(m);
    base2 = run(m);
    CHECK(after && base2 && max_diff(after, base2, nv) == 0.0, "a freed adapter is no longer applied");
    free(after); free(base2);
    free(b1); free(b2);
    kiln_model_free(m); /* frees a1 */
    free(mbytes);
    return tu_finish();
}
