/*
 * decoder.c — one graph for every supported decoder architecture, shaped by
 * the model's arch_traits (model.h): per batch of tokens,
 *
 *   x = tok_embd[tokens] (* embedding scale)
 *   per layer: a = attn(norm? x)      q/k/v: separate or one fused projection; optional QK-norm,
 *                                      RoPE (per-layer base, or none, frequency factors),
 *                                      window mask on sliding-window layers, logit softcap
 *              h = x + post_norm?(a) (* residual scale)
 *              f = ffn(norm? h)      gated SiLU (gate/up separate or fused) or GELU, or a
 *                                      mixture of gated-SiLU experts
 *              x = h + post_norm?(f) (* residual scale)
 *              (phi2, parallel: x = x + (a + ffn(norm x)), FFN up -> GELU -> down with biases)
 *   logits = Wout · norm(x_last) (+ bias) (/ logit scale, then softcap)
 * norm: RMS norm times a weight, or (phi2) LayerNorm times a weight plus a bias.
 *
 * K and V of every layer go to a cache that attention reads with
 * flash_attn_ext; the order of operations follows llama.cpp's graphs so that
 * greedy output can be compared token for token.
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAD_TO(x, n) (((x) + (n) - 1) / (n) * (n))

struct batch_graph {
    struct kiln_context * ctx;
    struct kiln_cgraph  * gf;
    struct kiln_tensor  * tokens, * pos, * mask, * mask_swa, * logits, * embd;
};

#define CHK(x) do { if (!(x)) return false; } while (0)

/* ggml's CPU GELU: a 65536-entry table indexed by the f16 rounding of x, of
 * gelu's tanh form rounded to f16; x <= -10 gives 0 and x >= 10 gives x.
 * The table is computed as llama.cpp's x86 and arm64 builds compute it: GCC
 * contracts 1 + a*x*x there into one fused multiply-add (the plain form
 * rounds one entry of the 65536 differently, near gelu(x) = -0.0455) */
static kiln_fp16_t gelu_table[1 << 16];

void decoder_init_gelu_table(void) {
    static bool done = false;
    if (done) return;
    for (uint32_t i = 0; i < (1u << 16); i++) {
        kiln_fp16_t h;
        uint16_t b = (uint16_t) i;
        memcpy(&h, &b, sizeof h);
        const float x = kiln_fp16_to_fp32(h);
        const float g = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f)));
        gelu_table[i] = kiln_fp32_to_fp16(g);
    }
    done = true;
}

void decoder_gelu_f16_table(float * y, const float * x, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (x[i] <= -10.0f) y[i] = 0.0f;
        else if (x[i] >= 10.0f) y[i] = x[i];
        else {
            const kiln_fp16_t h = kiln_fp32_to_fp16(x[i]);
            uint16_t t;
            memcpy(&t, &h, sizeof t);
            y[i] = kiln_fp16_to_fp32(gelu_table[t]);
        }
    }
}

/* dst = gelu(a) * b, rows split over the threads */
static void geglu_rows(struct kiln_tensor * dst, const struct kiln_tensor * a, const struct kiln_tensor * b, int ith, int nth, void * ud) {
    (void) ud;
    const int64_t n = a->ne[0], rows = kiln_nrows(a);
    for (int64_t r = ith; r < rows; r += nth) {
        const float * x = (const float *) ((const char *) a->data + r * a->nb[1]);
        const float * y = (const float *) ((const char *) b->data + r * b->nb[1]);
        float * d = (float *) ((char *) dst->data + r * dst->nb[1]);
        for (int64_t i = 0; i < n; i++) {
            float v;
            if (x[i] <= -10.0f) v = 0.0f;
            else if (x[i] >= 10.0f) v = x[i] * y[i];
            else {
                const kiln_fp16_t h = kiln_fp32_to_fp16(x[i]);
                uint16_t t;
                memcpy(&t, &h, sizeof t);
                v = kiln_fp16_to_fp32(gelu_table[t]) * y[i];
            }
            d[i] = v;
        }
    }
}

static struct kiln_tensor * rms(struct kiln_context * ctx, struct kiln_tensor * x, struct kiln_tensor * w, float eps) {
    return kiln_mul(ctx, kiln_rms_norm(ctx, x, eps), w);
}

/* the layer norm of an architecture: RMS norm times w, or (NORM_PARALLEL)
 * LayerNorm times w plus b */
static struct kiln_tensor * norm(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * x,
                                 struct kiln_tensor * w, struct kiln_tensor * b) {
    if (m->tr->norm != NORM_PARALLEL) return rms(ctx, x, w, m->norm_eps);
    struct kiln_tensor * y = kiln_mul(ctx, kiln_norm(ctx, x, m->norm_eps), w);
    return b ? kiln_add(ctx, y, b) : y;
}

void decoder_gelu_rows(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * ud) {
    (void) ud;
    const int64_t n = a->ne[0], rows = kiln_nrows(a);
    for (int64_t r = ith; r < rows; r += nth) {
        decoder_gelu_f16_table((float *) ((char *) dst->data + r * dst->nb[1]), (const float *) ((const char *) a->data + r * a->nb[1]), n);
    }
}

/* t + b, or t when there is no bias */
static struct kiln_tensor * bias(struct kiln_context * ctx, struct kiln_tensor * t, struct kiln_tensor * b) {
    return t && b ? kiln_add(ctx, t, b) : t;
}

static struct kiln_tensor * rope(const struct kiln_model * m, const struct layer * L, struct kiln_context * ctx,
                                 struct kiln_tensor * t, struct kiln_tensor * pos) {
    return kiln_rope_ext(ctx, t, pos, m->rope_freqs, m->n_rot, m->rope_type, m->n_ctx_orig, L->freq_base, L->freq_scale,
                         m->ext_factor, m->attn_factor, m->beta_fast, m->beta_slow);
}

/* columns [off, off + n) of every row of a 2D tensor, made contiguous */
static struct kiln_tensor * cols(struct kiln_context * ctx, struct kiln_tensor * t, int64_t off, int64_t n) {
    struct kiln_tensor * v = kiln_view_2d(ctx, t, n, t->ne[1], t->nb[1], (size_t) off * t->nb[0]);
    return v ? kiln_cont(ctx, v) : NULL;
}

/* down(silu(gate x) * up x); gate and up fused in one [gate; up] matrix when ffn_gate is NULL (phi3) */
static struct kiln_tensor * ffn_silu(const struct kiln_model * m, struct kiln_context * ctx, struct kiln_tensor * x,
                                     struct kiln_tensor * wg, struct kiln_tensor * wu, struct kiln_tensor * wd) {
    struct kiln_tensor * gate, * up;
    if (wg) {
        gate = lora_mul_mat(m, ctx, wg, x);
        up = lora_mul_mat(m, ctx, wu, x);
    } else {
        struct kiln_tensor * gu = lora_mul_mat(m, ctx, wu, x); /* an adapter adapts the fused matrix, as llama.cpp's */
        if (!gu) return NULL;
        gate = cols(ctx, gu, 0, gu->ne[0] / 2);
        up = cols(ctx, gu, gu->ne[0] / 2, gu->ne[0] / 2);
    }
    if (!gate || !up) return NULL;
    struct kiln_tensor * act = kiln_mul(ctx, kiln_silu(ctx, gate), up);
    return act ? lora_mul_mat(m, ctx, wd, act) : NULL;
}

/* mixture of experts, in llama.cpp's order of operations: router softmax,
 * the n_used most probable experts (descending), their probabilities as
 * weights (renormalised for MOE_NORM_TOPK), each expert's gated-SiLU FFN by
 * mul_mat_id, weighted, summed slot by slot; plus a sigmoid-gated shared
 * expert for MOE_SHARED */
#define CHKN(x) do { if (!(x)) return NULL; } while (0)
static struct kiln_tensor * ffn_moe(const struct kiln_model * m, const struct layer * L, struct kiln_context * ctx,
                                    struct kiln_tensor * x, int32_t nb) {
    const int64_t E = m->n_embd, X = m->n_expert, U = m->n_expert_used;
    struct kiln_tensor * logits = lora_add(m, ctx, L->gate_inp, kiln_mul_mat(ctx, L->gate_inp, x), x); /* [X, nb] */
    CHKN(logits);
    struct kiln_tensor * probs = kiln_soft_max(ctx, logits); /* [X, nb] */
    CHKN(probs);
    struct kiln_tensor * sel = kiln_top_k(ctx, probs, (int) U); /* [U, nb] */
    CHKN(sel);
    struct kiln_tensor * w = kiln_get_rows(ctx, kiln_reshape_3d(ctx, probs, 1, X, nb), sel); /* [1, U, nb] */
    CHKN(w);
    if (m->tr->moe == MOE_NORM_TOPK) {
        struct kiln_tensor * w2 = kiln_reshape_2d(ctx, w, U, nb);
        struct kiln_tensor * sum = kiln_clamp(ctx, kiln_sum_rows(ctx, w2), 6.103515625e-5f, INFINITY);
        w = kiln_reshape_3d(ctx, kiln_div(ctx, w2, sum), 1, U, nb);
        CHKN(w);
    }
    struct kiln_tensor * x3 = kiln_reshape_3d(ctx, x, E, 1, nb);
    struct kiln_tensor * up = lora_mul_mat_id(m, ctx, L->up_exps, x3, sel);   /* [F, U, nb] */
    struct kiln_tensor * gate = lora_mul_mat_id(m, ctx, L->gate_exps, x3, sel);
    CHKN(up && gate);
    struct kiln_tensor * act = kiln_mul(ctx, kiln_silu(ctx, gate), up);
    struct kiln_tensor * ex = kiln_mul(ctx, lora_mul_mat_id(m, ctx, L->down_exps, act, sel), w); /* [E, U, nb] */
    CHKN(ex);
    struct kiln_tensor * out = NULL;
    for (int64_t i = 0; i < U; i++) {
        struct kiln_tensor * e = kiln_view_2d(ctx, ex, E, nb, ex->nb[2], (size_t) i * ex->nb[1]);
        out = out ? kiln_add(ctx, out, e) : e;
        CHKN(out);
    }
    if (U == 1) out = kiln_cont(ctx, out);
    if (m->tr->moe == MOE_SHARED) {
        struct kiln_tensor * g = lora_add(m, ctx, L->gate_inp_shexp, kiln_mul_mat(ctx, L->gate_inp_shexp, x), x); /* [1, nb] */
        CHKN(g);
        g = kiln_div(ctx, kiln_silu(ctx, g), g);
        struct kiln_tensor * sh = kiln_mul(ctx, ffn_silu(m, ctx, x, L->gate_shexp, L->up_shexp, L->down_shexp), g);
        out = kiln_add(ctx, out, sh);
    }
    return out;
}

static bool build_graph(struct kiln_model * m, struct batch_graph * bg, int32_t nb) {
    const struct arch_traits * tr = m->tr;
    const int64_t E = m->n_embd, Hd = m->head_dim, nh = m->n_head, nkv = m->n_head_kv;
    const int64_t kv_dim = Hd * nkv;
    const int64_t n_kv = kiln_kv_n_kv(m->n_ctx, m->n_past + nb);
    const size_t n_tensors = (size_t) m->n_layer * (80 + 3 * (size_t) m->n_expert_used + (m->n_expert ? 8 : 0)) + 64 + (size_t) lora_graph_nodes(m);
    struct kiln_init_params ip = { n_tensors * kiln_tensor_overhead() + kiln_graph_overhead_custom(n_tensors, false), NULL, true };
    struct kiln_context * ctx = kiln_init(ip);
    CHK(ctx);
    bg->ctx = ctx;
    bg->gf = kiln_new_graph_custom(ctx, n_tensors, false);
    CHK(bg->gf);

    bg->tokens = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, nb);
    bg->pos = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, nb);
    bg->mask = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, n_kv, PAD_TO(nb, KILN_KQ_MASK_PAD));
    CHK(bg->tokens && bg->pos && bg->mask);
    kiln_set_input(bg->tokens);
    kiln_set_input(bg->pos);
    kiln_set_input(bg->mask);
    bg->mask_swa = NULL;
    if (m->n_swa > 0 && tr->swa_pattern > 0) {
        bg->mask_swa = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, n_kv, PAD_TO(nb, KILN_KQ_MASK_PAD));
        CHK(bg->mask_swa);
        kiln_set_input(bg->mask_swa);
    }

    struct kiln_tensor * x = kiln_get_rows(ctx, m->tok_embd, bg->tokens);
    if (m->n_loras) x = lora_embed(m, ctx, x, bg->tokens);
    CHK(x);
    if (m->embd_scale != 1.0f) x = kiln_scale(ctx, x, m->embd_scale);
    for (int il = 0; il < m->n_layer; il++) {
        const struct layer * L = &m->layers[il];
        struct kiln_tensor * cur = tr->norm == NORM_POST ? x : norm(m, ctx, x, L->attn_norm, L->attn_norm_b);
        CHK(cur);
        struct kiln_tensor * normed = cur; /* NORM_PARALLEL: the FFN's input too */
        struct kiln_tensor * q, * k, * v;
        if (L->wqkv) {
            struct kiln_tensor * qkv = bias(ctx, lora_mul_mat(m, ctx, L->wqkv, cur), L->bqkv);
            CHK(qkv);
            q = cols(ctx, qkv, 0, Hd * nh);
            k = cols(ctx, qkv, Hd * nh, kv_dim);
            v = cols(ctx, qkv, Hd * nh + kv_dim, kv_dim);
        } else {
            q = lora_mul_mat(m, ctx, L->wq, cur);
            k = lora_mul_mat(m, ctx, L->wk, cur);
            v = lora_mul_mat(m, ctx, L->wv, cur);
        }
        if (L->bq) q = kiln_add(ctx, q, L->bq);
        if (L->bk) k = kiln_add(ctx, k, L->bk);
        if (L->bv) v = kiln_add(ctx, v, L->bv);
        CHK(q && k && v);
        if (tr->qk_norm == QK_NORM_FULL) {
            q = rms(ctx, q, L->q_norm, m->norm_eps);
            k = rms(ctx, k, L->k_norm, m->norm_eps);
        }
        q = kiln_reshape_3d(ctx, q, Hd, nh, nb);
        k = kiln_reshape_3d(ctx, k, Hd, nkv, nb);
        CHK(q && k);
        if (tr->qk_norm == QK_NORM_HEAD) {
            q = rms(ctx, q, L->q_norm, m->norm_eps);
            k = rms(ctx, k, L->k_norm, m->norm_eps);
        }
        if (L->rope) {
            q = rope(m, L, ctx, q, bg->pos);
            k = rope(m, L, ctx, k, bg->pos);
        }
        float kq_scale = m->attn_scale;
        if (tr->q_prescale) {
            q = kiln_scale(ctx, q, m->attn_scale);
            kq_scale = 1.0f;
        }
        CHK(q && k);

        /* append this batch's K and V to the cache, before attention reads it */
        const size_t row = kiln_row_size(m->kv_type, kv_dim);
        struct kiln_tensor * k_dst = kiln_view_1d(ctx, m->k_cache[il], nb * kv_dim, (size_t) m->n_past * row);
        struct kiln_tensor * v_dst = kiln_view_1d(ctx, m->v_cache[il], nb * kv_dim, (size_t) m->n_past * row);
        CHK(k_dst && v_dst);
        struct kiln_tensor * k_st = kiln_cpy(ctx, k, k_dst);
        struct kiln_tensor * v_st = kiln_cpy(ctx, v, v_dst);
        CHK(k_st && v_st);
        CHK(kiln_build_forward_expand(bg->gf, k_st) == KILN_STATUS_SUCCESS);
        CHK(kiln_build_forward_expand(bg->gf, v_st) == KILN_STATUS_SUCCESS);

        struct kiln_tensor * kc = kiln_view_3d(ctx, m->k_cache[il], Hd, n_kv, nkv, row, kiln_row_size(m->kv_type, Hd), 0);
        struct kiln_tensor * vc = kiln_view_3d(ctx, m->v_cache[il], Hd, n_kv, nkv, row, kiln_row_size(m->kv_type, Hd), 0);
        struct kiln_tensor * qp = kiln_permute(ctx, q, 0, 2, 1, 3); /* [Hd, nb, nh] */
        CHK(kc && vc && qp);
        struct kiln_tensor * mask = L->swa && bg->mask_swa ? bg->mask_swa : bg->mask;
        struct kiln_tensor * att = kiln_flash_attn_ext(ctx, qp, kc, vc, mask, kq_scale, 0.0f, m->attn_softcap);
        CHK(att);
        kiln_flash_attn_ext_set_prec(att, KILN_PREC_F32);
        att = kiln_reshape_2d(ctx, att, Hd * nh, nb);
        CHK(att);
        cur = lora_mul_mat(m, ctx, L->wo, att);
        if (L->bo) cur = kiln_add(ctx, cur, L->bo);
        if (tr->norm == NORM_SANDWICH || tr->norm == NORM_POST) cur = rms(ctx, cur, L->attn_post_norm, m->norm_eps);
        if (m->residual_scale != 1.0f) cur = kiln_scale(ctx, cur, m->residual_scale);
        if (tr->norm == NORM_PARALLEL) {
            /* x + (attn + ffn), both from the one norm, as llama.cpp adds them */
            CHK(cur);
            struct kiln_tensor * up = bias(ctx, lora_mul_mat(m, ctx, L->ffn_up, normed), L->ffn_up_b);
            CHK(up);
            struct kiln_tensor * f = bias(ctx, lora_mul_mat(m, ctx, L->ffn_down, kiln_map_custom1(ctx, up, decoder_gelu_rows, KILN_N_TASKS_MAX, NULL)),
                                          L->ffn_down_b);
            CHK(f);
            x = kiln_add(ctx, kiln_add(ctx, cur, f), x);
            CHK(x);
            continue;
        }
        struct kiln_tensor * h = kiln_add(ctx, cur, x);
        CHK(h);

        cur = tr->norm == NORM_POST ? h : rms(ctx, h, L->ffn_norm, m->norm_eps);
        CHK(cur);
        if (tr->moe != MOE_NONE) {
            cur = ffn_moe(m, L, ctx, cur, nb);
        } else if (tr->ffn == FFN_GELU_GATED) {
            struct kiln_tensor * gate = lora_mul_mat(m, ctx, L->ffn_gate, cur);
            struct kiln_tensor * up = lora_mul_mat(m, ctx, L->ffn_up, cur);
            CHK(gate && up);
            struct kiln_tensor * act = kiln_map_custom2(ctx, gate, up, geglu_rows, KILN_N_TASKS_MAX, NULL);
            CHK(act);
            cur = lora_mul_mat(m, ctx, L->ffn_down, act);
        } else {
            cur = ffn_silu(m, ctx, cur, L->ffn_gate, L->ffn_up, L->ffn_down);
        }
        CHK(cur);
        if (tr->norm != NORM_PRE) cur = rms(ctx, cur, L->ffn_post_norm, m->norm_eps);
        if (m->residual_scale != 1.0f) cur = kiln_scale(ctx, cur, m->residual_scale);
        x = kiln_add(ctx, cur, h);
        CHK(x);
    }
    /* embeddings: the final-norm hidden state of every position */
    bg->embd = NULL;
    if (m->embd_out) {
        bg->embd = norm(m, ctx, x, m->output_norm, m->output_norm_b);
        CHK(bg->embd);
        kiln_set_output(bg->embd);
        CHK(kiln_build_forward_expand(bg->gf, bg->embd) == KILN_STATUS_SUCCESS);
    }
    /* only the last position's logits are needed */
    struct kiln_tensor * last = kiln_view_2d(ctx, x, E, 1, x->nb[1], (size_t) (nb - 1) * x->nb[1]);
    CHK(last);
    struct kiln_tensor * cur = norm(m, ctx, last, m->output_norm, m->output_norm_b);
    CHK(cur);
    cur = bias(ctx, lora_mul_mat(m, ctx, m->output, cur), m->output_b);
    if (m->logit_scale != 1.0f) cur = kiln_scale(ctx, cur, 1.0f / m->logit_scale);
    if (m->final_softcap != 0.0f) {
        cur = kiln_scale(ctx, cur, 1.0f / m->final_softcap);
        cur = kiln_scale(ctx, kiln_tanh(ctx, cur), m->final_softcap);
    }
    bg->logits = cur;
    CHK(bg->logits);
    kiln_set_output(bg->logits);
    CHK(kiln_build_forward_expand(bg->gf, bg->logits) == KILN_STATUS_SUCCESS);
    return true;
}

/* causal mask, and the window on top of it: row i (position n_past + i)
 * sees cache position j when j <= n_past + i and, windowed, n_past + i - j < n_swa */
static void fill_mask(struct kiln_tensor * t, int32_t n_past, int32_t nb, int32_t window) {
    const int64_t n_kv = t->ne[0];
    kiln_fp16_t * mk = t->data;
    const kiln_fp16_t zero = kiln_fp32_to_fp16(0.0f), ninf = kiln_fp32_to_fp16(-INFINITY);
    for (int64_t i = 0; i < t->ne[1]; i++) {
        for (int64_t j = 0; j < n_kv; j++) {
            const int64_t p = n_past + i;
            const bool see = i < nb && j <= p && (window <= 0 || p - j < window);
            mk[i * n_kv + j] = see ? zero : ninf;
        }
    }
}

enum kiln_status model_compute(struct kiln_model * m, struct kiln_cgraph * gf) {
    struct kiln_cplan plan = kiln_graph_plan(gf, m->n_threads, m->threadpool);
    if (plan.work_size > m->work_size) {
        uint8_t * w = realloc(m->work, plan.work_size);
        if (!w) {
            kiln_set_last_error("model: cannot allocate %zu bytes of work buffer", plan.work_size);
            return KILN_STATUS_ALLOC_FAILED;
        }
        m->work = w;
        m->work_size = plan.work_size;
    }
    plan.work_data = m->work;
    plan.abort_flag = m->abort_flag;
    const enum kiln_status st = kiln_graph_compute(gf, &plan);
    if (st == KILN_STATUS_ABORTED) kiln_set_last_error("model: evaluation aborted");
    return st;
}

enum kiln_status decoder_eval_batch(struct kiln_model * m, const kiln_token * tokens, int32_t nb) {
    struct batch_graph bg = { 0 };
    if (!build_graph(m, &bg, nb)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model: building the graph failed: %s", kiln_last_error());
        kiln_free(bg.ctx);
        kiln_set_last_error("%s", msg);
        return KILN_STATUS_FAILED;
    }
    if (!kiln_gallocr_alloc_graph(m->galloc, bg.gf)) {
        char msg[512];
        snprintf(msg, sizeof msg, "model: allocating the graph failed: %s", kiln_last_error());
        kiln_free(bg.ctx);
        kiln_set_last_error("%s", msg);
        return KILN_STATUS_ALLOC_FAILED;
    }
    int32_t * tk = bg.tokens->data;
    int32_t * ps = bg.pos->data;
    for (int32_t i = 0; i < nb; i++) {
        tk[i] = tokens[i];
        ps[i] = m->n_past + i;
    }
    fill_mask(bg.mask, m->n_past, nb, 0);
    if (bg.mask_swa) fill_mask(bg.mask_swa, m->n_past, nb, m->n_swa);
    enum kiln_status st = model_compute(m, bg.gf);
    if (st == KILN_STATUS_SUCCESS) {
        memcpy(m->logits, bg.logits->data, sizeof(float) * (size_t) m->n_vocab);
        if (bg.embd) memcpy(m->embd_out, bg.embd->data, sizeof(float) * (size_t) m->n_embd * (size_t) nb);
        m->n_past += nb;
    }
    kiln_free(bg.ctx);
    return st;
}
