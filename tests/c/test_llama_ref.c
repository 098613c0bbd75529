/*
 * test_llama_ref.c — the llama runner against a plain double-precision
 * forward pass written here, on small random models built in memory:
 *  A) qwen2: NeoX RoPE (base 1e6), QKV and output biases, GQA 4/2, separate
 *     output matrix, F32 weights, F32 KV cache, prompt batches of 3;
 *  B) llama: RoPE on part of the head (8 of 16), YaRN scaling (factor 4),
 *     tied output, F16 projections and embeddings, F16 KV cache.
 *  C) as B with Q8_0 projections (activations are quantized too, as in
 *     ggml, hence the looser bound); skipped, with a note, while mul_mat
 *     has no Q8_0 dot product.
 * Logits after the prompt and after one more token must match by NMSE.
 */
#include "kiln-gguf.h"
#include "kiln-llama.h"
#include "util/test_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define E 64
#define NV 512

struct cfg {
    const char * arch;
    int n_head, n_head_kv, hd, n_rot, n_ff, n_layer;
    bool neox, bias, tied, yarn;
    enum kiln_type wtype, etype, kv_type;
    float base;
    int n_batch;
    double tol;
};

struct w { double * d; int64_t ne0, ne1; };

static struct w deq(struct kiln_tensor * t) {
    struct w r = { malloc(sizeof(double) * (size_t) kiln_nelements(t)), t->ne[0], t->ne[1] };
    float * row = malloc(sizeof(float) * (size_t) t->ne[0]);
    const struct kiln_type_traits * tr = kiln_get_type_traits(t->type);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        const char * src = (const char *) t->data + i * t->nb[1];
        if (t->type == KILN_TYPE_F32) memcpy(row, src, sizeof(float) * (size_t) t->ne[0]);
        else tr->to_float(src, row, t->ne[0]);
        for (int64_t j = 0; j < t->ne[0]; j++) r.d[i * t->ne[0] + j] = row[j];
    }
    free(row);
    return r;
}

/* y[ne1] = W x[ne0] (+ b) */
static void matvec(const struct w * W, const double * x, const struct w * b, double * y) {
    for (int64_t o = 0; o < W->ne1; o++) {
        double s = b ? b->d[o] : 0.0;
        for (int64_t i = 0; i < W->ne0; i++) s += W->d[o * W->ne0 + i] * x[i];
        y[o] = s;
    }
}

static void rmsnorm(const double * x, const struct w * g, double * y, int n) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; i++) y[i] = x[i] * sc * g->d[i];
}

/* ggml's rope with YaRN, in double */
static void rope(double * v, int hd, int n_rot, int pos, const struct cfg * c) {
    double freq_scale = c->yarn ? 0.25 : 1.0, ext = c->yarn ? 1.0 : 0.0, mscale = 1.0;
    double low = 0, high = 0;
    if (c->yarn) {
        double n_orig = 64;
        double cd_fast = n_rot * log(n_orig / (32.0 * 2 * M_PI)) / (2 * log(c->base));
        double cd_slow = n_rot * log(n_orig / (1.0 * 2 * M_PI)) / (2 * log(c->base));
        low = fmax(0, floor(cd_fast));
        high = fmin(n_rot - 1, ceil(cd_slow));
    }
    for (int i0 = 0; i0 < n_rot; i0 += 2) {
        double extrap = pos * pow(c->base, -(double) i0 / n_rot);
        double theta = freq_scale * extrap, ms = mscale;
        if (ext != 0) {
            double y = (i0 / 2 - low) / fmax(0.001, high - low);
            double mix = (1 - fmin(1, fmax(0, y))) * ext;
            theta = theta * (1 - mix) + extrap * mix;
            ms *= 1.0 + 0.1 * log(1.0 / freq_scale);
        }
        double cs = cos(theta) * ms, sn = sin(theta) * ms;
        int a = c->neox ? i0 / 2 : i0, b = c->neox ? i0 / 2 + n_rot / 2 : i0 + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * cs - x1 * sn;
        v[b] = x0 * sn + x1 * cs;
    }
}

struct lw { struct w an, wq, wk, wv, wo, bq, bk, bv, bo, fn, fg, fu, fd; };

static void reference(const struct cfg * c, struct lw * L, struct w * emb, struct w * onorm, struct w * out,
                      const int * toks, int T, double * logits) {
    int qd = c->n_head * c->hd, kvd = c->n_head_kv * c->hd;
    double * K = calloc((size_t) c->n_layer * T * kvd, sizeof(double));
    double * V = calloc((size_t) c->n_layer * T * kvd, sizeof(double));
    double x[E], n[E], h[E], q[256], k[256], v[256], att[256], o[E], g[512], u[512], f[E], sc[64];
    for (int p = 0; p < T; p++) {
        for (int i = 0; i < E; i++) x[i] = emb->d[(int64_t) toks[p] * E + i];
        for (int l = 0; l < c->n_layer; l++) {
            struct lw * W = &L[l];
            rmsnorm(x, &W->an, n, E);
            matvec(&W->wq, n, c->bias ? &W->bq : NULL, q);
            matvec(&W->wk, n, c->bias ? &W->bk : NULL, k);
            matvec(&W->wv, n, c->bias ? &W->bv : NULL, v);
            for (int hh = 0; hh < c->n_head; hh++) rope(q + hh * c->hd, c->hd, c->n_rot, p, c);
            for (int hh = 0; hh < c->n_head_kv; hh++) rope(k + hh * c->hd, c->hd, c->n_rot, p, c);
            memcpy(K + ((size_t) l * T + p) * kvd, k, sizeof(double) * kvd);
            memcpy(V + ((size_t) l * T + p) * kvd, v, sizeof(double) * kvd);
            for (int hh = 0; hh < c->n_head; hh++) {
                int kh = hh / (c->n_head / c->n_head_kv);
                double mx = -1e300, sum = 0;
                for (int j = 0; j <= p; j++) {
                    const double * kj = K + ((size_t) l * T + j) * kvd + kh * c->hd;
                    double s = 0;
                    for (int d = 0; d < c->hd; d++) s += q[hh * c->hd + d] * kj[d];
                    sc[j] = s / sqrt((double) c->hd);
                    mx = fmax(mx, sc[j]);
                }
                for (int j = 0; j <= p; j++) sum += (sc[j] = exp(sc[j] - mx));
                for (int d = 0; d < c->hd; d++) {
                    double a = 0;
                    for (int j = 0; j <= p; j++) a += sc[j] / sum * V[((size_t) l * T + j) * kvd + kh * c->hd + d];
                    att[hh * c->hd + d] = a;
                }
            }
            matvec(&W->wo, att, c->bias ? &W->bo : NULL, o);
            for (int i = 0; i < E; i++) h[i] = x[i] + o[i];
            rmsnorm(h, &W->fn, n, E);
            matvec(&W->fg, n, NULL, g);
            matvec(&W->fu, n, NULL, u);
            for (int i = 0; i < c->n_ff; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(&W->fd, g, NULL, f);
            for (int i = 0; i < E; i++) x[i] = h[i] + f[i];
        }
        (void) qd;
    }
    rmsnorm(x, onorm, n, E);
    matvec(out, n, NULL, logits);
    free(K);
    free(V);
}

static struct kiln_tensor * mk(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name,
                               enum kiln_type type, int64_t ne0, int64_t ne1, float range) {
    struct kiln_tensor * f = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, ne0, ne1);
    tu_fill_uniform(f, -range, range);
    struct kiln_tensor * t = f;
    if (type != KILN_TYPE_F32) {
        t = kiln_new_tensor_2d(ctx, type, ne0, ne1);
        const struct kiln_type_traits * tr = kiln_get_type_traits(type);
        for (int64_t i = 0; i < ne1; i++) {
            tr->from_float_ref((const float *) f->data + i * ne0, (char *) t->data + i * t->nb[1], ne0);
        }
    }
    if (ne1 == 1) { /* 1-d in the file, like real models */
        t = kiln_view_1d(ctx, t, ne0, 0);
        struct kiln_tensor * c1 = kiln_new_tensor_1d(ctx, type, ne0);
        memcpy(c1->data, t->data, kiln_nbytes(c1));
        t = c1;
    }
    kiln_set_name(t, name);
    kiln_gguf_add_tensor(g, t);
    return t;
}

static void run_cfg(const struct cfg * c) {
    tu_case = c->arch;
    tu_seed(c->yarn ? 7 : 3);
    struct kiln_gguf_init_params ip = { .no_alloc = true, .ctx = NULL };
    struct kiln_gguf_context * src = kiln_gguf_init_from_file("models/stories260K.gguf", ip);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_kv(g, src); /* the tokenizer (512 tokens) */
    kiln_gguf_free(src);
    char k[96];
#define SETU(suffix, v) do { snprintf(k, sizeof k, "%s.%s", c->arch, suffix); kiln_gguf_set_val_u32(g, k, (uint32_t) (v)); } while (0)
    kiln_gguf_set_val_str(g, "general.architecture", c->arch);
    SETU("embedding_length", E);
    SETU("block_count", c->n_layer);
    SETU("attention.head_count", c->n_head);
    SETU("attention.head_count_kv", c->n_head_kv);
    SETU("feed_forward_length", c->n_ff);
    SETU("context_length", 64);
    SETU("rope.dimension_count", c->n_rot);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", c->arch);
    kiln_gguf_set_val_f32(g, k, 1e-5f);
    snprintf(k, sizeof k, "%s.rope.freq_base", c->arch);
    kiln_gguf_set_val_f32(g, k, c->base);
    if (c->yarn) {
        snprintf(k, sizeof k, "%s.rope.scaling.type", c->arch);
        kiln_gguf_set_val_str(g, k, "yarn");
        snprintf(k, sizeof k, "%s.rope.scaling.factor", c->arch);
        kiln_gguf_set_val_f32(g, k, 4.0f);
        SETU("rope.scaling.original_context_length", 64);
    }
#undef SETU
    struct kiln_context * ctx = tu_ctx(64u << 20);
    int qd = c->n_head * c->hd, kvd = c->n_head_kv * c->hd;
    struct kiln_tensor * temb = mk(ctx, g, "token_embd.weight", c->etype, E, NV, 1.0f);
    struct kiln_tensor * tnorm = mk(ctx, g, "output_norm.weight", KILN_TYPE_F32, E, 1, 1.0f);
    struct kiln_tensor * tout = c->tied ? temb : mk(ctx, g, "output.weight", c->wtype, E, NV, 0.3f);
    struct lw L[4];
    char nm[64];
    for (int l = 0; l < c->n_layer; l++) {
#define T(field, suffix, type, a, b, r) do { snprintf(nm, sizeof nm, "blk.%d." suffix, l); L[l].field = deq(mk(ctx, g, nm, type, a, b, r)); } while (0)
        T(an, "attn_norm.weight", KILN_TYPE_F32, E, 1, 1.0f);
        T(wq, "attn_q.weight", c->wtype, E, qd, 0.3f);
        T(wk, "attn_k.weight", c->wtype, E, kvd, 0.3f);
        T(wv, "attn_v.weight", c->wtype, E, kvd, 0.3f);
        T(wo, "attn_output.weight", c->wtype, qd, E, 0.2f);
        if (c->bias) {
            T(bq, "attn_q.bias", KILN_TYPE_F32, qd, 1, 0.5f);
            T(bk, "attn_k.bias", KILN_TYPE_F32, kvd, 1, 0.5f);
            T(bv, "attn_v.bias", KILN_TYPE_F32, kvd, 1, 0.5f);
            T(bo, "attn_output.bias", KILN_TYPE_F32, E, 1, 0.5f);
        }
        T(fn, "ffn_norm.weight", KILN_TYPE_F32, E, 1, 1.0f);
        T(fg, "ffn_gate.weight", c->wtype, E, c->n_ff, 0.3f);
        T(fu, "ffn_up.weight", c->wtype, E, c->n_ff, 0.3f);
        T(fd, "ffn_down.weight", c->wtype, c->n_ff, E, 0.2f);
#undef T
    }
    struct w emb = deq(temb), onorm = deq(tnorm), out = deq(tout);
    size_t sz = kiln_gguf_get_write_size(g, false);
    void * buf = malloc(sz);
    CHECK(kiln_gguf_write_to_buffer(g, buf, sz, false) == sz, "model written");

    struct kiln_model_params mp = kiln_model_params_default();
    mp.n_threads = 1;
    mp.n_batch = c->n_batch;
    mp.kv_type = c->kv_type;
    struct kiln_model * m = kiln_model_load_from_buffer(buf, sz, mp);
    if (CHECK(m != NULL, "load: %s", kiln_last_error())) {
        const int toks[9] = { 1, 403, 407, 261, 378, 432, 383, 286, 261 };
        double ref[NV], mo[NV];
        for (int T = 8; T <= 9; T++) {
            enum kiln_status s = T == 8 ? kiln_model_eval(m, toks, 8) : kiln_model_eval(m, toks + 8, 1);
            if (s != KILN_STATUS_SUCCESS && kiln_is_quantized(c->wtype) && strstr(kiln_last_error(), "not supported")) {
                fprintf(stderr, "SKIP %s %s: %s\n", c->arch, kiln_type_name(c->wtype), kiln_last_error());
                break;
            }
            CHECK(s == KILN_STATUS_SUCCESS, "eval %d: %s", T, kiln_last_error());
            reference(c, L, &emb, &onorm, &out, toks, T, ref);
            for (int i = 0; i < NV; i++) mo[i] = kiln_model_logits(m)[i];
            double e = tu_nmse(mo, ref, NV);
            CHECK(e < c->tol, "%s logits after %d tokens: nmse %.3g (tol %.1g)", c->arch, T, e, c->tol);
        }
        kiln_model_free(m);
    }
    free(buf);
    free(emb.d);
    free(onorm.d);
    free(out.d);
    for (int l = 0; l < c->n_layer; l++) {
        struct w * ws = &L[l].an;
        for (int j = 0; j < 13; j++) {
            if (c->bias || (j < 5 || j > 8)) free(ws[j].d);
        }
    }
    kiln_gguf_free(g);
    kiln_free(ctx);
}

int main(void) {
    const struct cfg a = { "qwen2", 4, 2, 16, 16, 96, 2, true, true, false, false,
                           KILN_TYPE_F32, KILN_TYPE_F32, KILN_TYPE_F32, 1e6f, 3, 1e-9 };
    const struct cfg b = { "llama", 4, 4, 16, 8, 64, 2, false, false, true, true,
                           KILN_TYPE_F16, KILN_TYPE_F16, KILN_TYPE_F16, 10000.0f, 4, 1e-4 };
    const struct cfg q = { "llama", 4, 4, 16, 8, 64, 2, false, false, true, true,
                           KILN_TYPE_Q8_0, KILN_TYPE_F16, KILN_TYPE_F16, 10000.0f, 4, 1e-3 };
    run_cfg(&a);
    run_cfg(&b);
    run_cfg(&q);
    return tu_finish();
}
