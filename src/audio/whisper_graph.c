/*
 * whisper_graph.c — Whisper's encoder and decoder as Kiln graphs, shaped as
 * whisper.cpp builds them without flash attention (its default in the
 * bindings), so the same roundings happen in the same places:
 *
 *  encoder: conv1d(k3, pad 1) + bias, GELU, conv1d(k3, stride 2, pad 1) +
 *    bias, GELU; + the positional embedding; per block: pre-norm attention
 *    (K cast to f16 for QK^T, V cast to f16 for softmax x V, scale
 *    1/sqrt(head dim)), pre-norm MLP (4x, GELU); a final norm. Then per
 *    decoder layer the cross-attention K (scaled by head_dim^-1/4) and V are
 *    written to f16 caches, V transposed.
 *  decoder: token + position embedding; per block: pre-norm self-attention
 *    (Q and K scaled by head_dim^-1/4, K/V appended to f16 caches, causal
 *    mask), pre-norm cross-attention over the cached encoder K/V (a second
 *    head_dim^-1/4 in the softmax), pre-norm MLP; final norm; logits against
 *    the token embedding.
 */
#include "whisper_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHK(x) do { if (!(x)) goto fail; } while (0)

bool whisper_state_init(struct kiln_whisper * w) {
    const struct kiln_whisper_hparams * hp = &w->hp;
    const int64_t S = hp->n_text_state;
    const size_t n_self = (size_t) S * hp->n_text_ctx * hp->n_text_layer;
    const size_t n_cross = (size_t) S * hp->n_audio_ctx * hp->n_text_layer;
    struct kiln_init_params ip = { 4 * kiln_tensor_overhead() + 2 * (n_self + n_cross) * sizeof(kiln_fp16_t) + 256, NULL, false };
    w->ctx_kv = kiln_init(ip);
    if (!w->ctx_kv) return false;
    w->k_self  = kiln_new_tensor_1d(w->ctx_kv, KILN_TYPE_F16, (int64_t) n_self);
    w->v_self  = kiln_new_tensor_1d(w->ctx_kv, KILN_TYPE_F16, (int64_t) n_self);
    w->k_cross = kiln_new_tensor_1d(w->ctx_kv, KILN_TYPE_F16, (int64_t) n_cross);
    w->v_cross = kiln_new_tensor_1d(w->ctx_kv, KILN_TYPE_F16, (int64_t) n_cross);
    if (!w->k_self || !w->v_self || !w->k_cross || !w->v_cross) return false;
    memset(w->k_self->data, 0, kiln_nbytes(w->k_self));
    memset(w->v_self->data, 0, kiln_nbytes(w->v_self));
    memset(w->k_cross->data, 0, kiln_nbytes(w->k_cross));
    memset(w->v_cross->data, 0, kiln_nbytes(w->v_cross));
    w->k_slot[0] = w->k_self;
    w->v_slot[0] = w->v_self;
    whisper_mt_seed(&w->rng[0], 0);
    w->enc_out = (float *) calloc((size_t) S * hp->n_audio_ctx, sizeof(float));
    w->galloc = kiln_gallocr_new();
    if (!w->enc_out || !w->galloc) { kiln_set_last_error("whisper: out of memory for the state"); return false; }
    return true;
}

void whisper_state_free(struct kiln_whisper * w) {
    kiln_gallocr_free(w->galloc);
    kiln_free(w->ctx_kv);
    for (int i = 1; i < WHISPER_MAX_DECODERS; i++) kiln_free(w->ctx_slot[i]);
    free(w->tok_hash);
    free(w->vad_map);
    free(w->enc_out);
    free(w->work);
    for (int i = 0; i < w->n_segs; i++) { free(w->segs[i].text); free(w->segs[i].tokens); }
    free(w->segs);
}

bool whisper_kv_slots(struct kiln_whisper * w, int n) {
    const size_t n_self = (size_t) w->hp.n_text_state * w->hp.n_text_ctx * w->hp.n_text_layer;
    for (int i = 1; i < n && i < WHISPER_MAX_DECODERS; i++) {
        if (w->ctx_slot[i]) continue;
        struct kiln_init_params ip = { 2 * kiln_tensor_overhead() + 2 * n_self * sizeof(kiln_fp16_t) + 256, NULL, false };
        w->ctx_slot[i] = kiln_init(ip);
        if (!w->ctx_slot[i]) return false;
        w->k_slot[i] = kiln_new_tensor_1d(w->ctx_slot[i], KILN_TYPE_F16, (int64_t) n_self);
        w->v_slot[i] = kiln_new_tensor_1d(w->ctx_slot[i], KILN_TYPE_F16, (int64_t) n_self);
        if (!w->k_slot[i] || !w->v_slot[i]) { kiln_set_last_error("whisper: out of memory for the decoders' caches"); return false; }
        memset(w->k_slot[i]->data, 0, kiln_nbytes(w->k_slot[i]));
        memset(w->v_slot[i]->data, 0, kiln_nbytes(w->v_slot[i]));
    }
    return true;
}

void whisper_kv_use(struct kiln_whisper * w, int i) {
    w->k_self = w->k_slot[i];
    w->v_self = w->v_slot[i];
}

/* K is [layer][position][state], V is [layer][state][position] */
void whisper_kv_copy(struct kiln_whisper * w, int dst, int src, int n_pos) {
    if (dst == src || n_pos <= 0) return;
    const size_t S = (size_t) w->hp.n_text_state, Tc = (size_t) w->hp.n_text_ctx, L = (size_t) w->hp.n_text_layer;
    kiln_fp16_t * kd = (kiln_fp16_t *) w->k_slot[dst]->data, * vd = (kiln_fp16_t *) w->v_slot[dst]->data;
    const kiln_fp16_t * ks = (const kiln_fp16_t *) w->k_slot[src]->data, * vs = (const kiln_fp16_t *) w->v_slot[src]->data;
    for (size_t il = 0; il < L; il++) {
        memcpy(kd + il * Tc * S, ks + il * Tc * S, (size_t) n_pos * S * sizeof(kiln_fp16_t));
        for (size_t s = 0; s < S; s++) memcpy(vd + (il * S + s) * Tc, vs + (il * S + s) * Tc, (size_t) n_pos * sizeof(kiln_fp16_t));
    }
}

static struct kiln_tensor * norm_affine(struct kiln_context * c, struct kiln_tensor * x, struct kiln_tensor * g, struct kiln_tensor * b) {
    return kiln_add(c, kiln_mul(c, kiln_norm(c, x, WHISPER_EPS), g), b);
}

static struct kiln_tensor * linear(struct kiln_context * c, struct kiln_tensor * wt, struct kiln_tensor * b, struct kiln_tensor * x) {
    struct kiln_tensor * y = kiln_mul_mat(c, wt, x);
    return b && y ? kiln_add(c, y, b) : y;
}

static struct kiln_tensor * mlp(struct kiln_context * c, const struct whisper_layer * L, struct kiln_tensor * x) {
    struct kiln_tensor * cur = norm_affine(c, x, L->mlp_ln_w, L->mlp_ln_b);
    cur = kiln_gelu(c, linear(c, L->mlp0_w, L->mlp0_b, cur));
    cur = linear(c, L->mlp1_w, L->mlp1_b, cur);
    return kiln_add(c, cur, x);
}

static bool run_graph(struct kiln_whisper * w, struct kiln_cgraph * gf) {
    struct kiln_cplan plan = kiln_graph_plan(gf, w->n_threads, w->tp);
    plan.abort_callback = w->abort_cb;
    plan.abort_callback_data = w->abort_data;
    if (plan.work_size > w->work_size) {
        uint8_t * p = (uint8_t *) realloc(w->work, plan.work_size);
        if (!p) { kiln_set_last_error("whisper: out of memory for the work buffer"); return false; }
        w->work = p;
        w->work_size = plan.work_size;
    }
    plan.work_data = w->work;
    return kiln_graph_compute(gf, &plan) == KILN_STATUS_SUCCESS;
}

/* a graph step that failed: the message names the step, the context goes */
static bool graph_failed(struct kiln_context * c, const char * step) {
    char msg[400];
    snprintf(msg, sizeof msg, "whisper: %s failed: %s", step, kiln_last_error());
    kiln_set_last_error("%s", msg);
    kiln_free(c);
    return false;
}

static struct kiln_context * graph_ctx(size_t n_nodes, struct kiln_cgraph ** gf) {
    struct kiln_init_params ip = { n_nodes * 2 * kiln_tensor_overhead() + kiln_graph_overhead_custom(n_nodes, false), NULL, true };
    struct kiln_context * c = kiln_init(ip);
    if (!c) return NULL;
    *gf = kiln_new_graph_custom(c, n_nodes, false);
    if (!*gf) { kiln_free(c); return NULL; }
    return c;
}

bool kiln_whisper_encode(struct kiln_whisper * w, const float * mel, int n_len, int offset) {
    if (!w || !mel || n_len <= 0 || offset < 0) { kiln_set_last_error("whisper: bad arguments to kiln_whisper_encode"); return false; }
    const struct kiln_whisper_hparams * hp = &w->hp;
    const int64_t S = hp->n_audio_state, nh = hp->n_audio_head, hd = S / nh, T = hp->n_audio_ctx;
    struct kiln_cgraph * gf = NULL;
    struct kiln_context * c = graph_ctx((size_t) 64 * (hp->n_audio_layer + hp->n_text_layer) + 256, &gf);
    if (!c) return false;
    struct kiln_tensor * in = kiln_new_tensor_2d(c, KILN_TYPE_F32, 2 * T, hp->n_mels);
    CHK(in);
    kiln_set_input(in);
    struct kiln_tensor * cur = kiln_gelu(c, kiln_add(c, kiln_conv_1d_ph(c, w->e_conv1_w, in, 1, 1), w->e_conv1_b));
    CHK(cur);
    cur = kiln_gelu(c, kiln_add(c, kiln_conv_1d_ph(c, w->e_conv2_w, cur, 2, 1), w->e_conv2_b));
    CHK(cur);
    cur = kiln_add(c, kiln_view_2d(c, w->e_pe, S, T, w->e_pe->nb[1], 0), kiln_cont(c, kiln_transpose(c, cur)));
    CHK(cur);
    const float kq_scale = 1.0f / sqrtf((float) hd);
    for (int il = 0; il < hp->n_audio_layer; il++) {
        const struct whisper_layer * L = &w->enc[il];
        struct kiln_tensor * x = norm_affine(c, cur, L->attn_ln_w, L->attn_ln_b);
        struct kiln_tensor * q = linear(c, L->q_w, L->q_b, x);
        struct kiln_tensor * k = linear(c, L->k_w, NULL, x);
        struct kiln_tensor * v = linear(c, L->v_w, L->v_b, x);
        CHK(q && k && v);
        struct kiln_tensor * Q = kiln_permute(c, kiln_reshape_3d(c, q, hd, nh, T), 0, 2, 1, 3);
        struct kiln_tensor * K = kiln_permute(c, kiln_cast(c, kiln_reshape_3d(c, k, hd, nh, T), KILN_TYPE_F16), 0, 2, 1, 3);
        CHK(Q && K);
        struct kiln_tensor * kq = kiln_soft_max_ext(c, kiln_mul_mat(c, K, Q), NULL, kq_scale, 0.0f);
        struct kiln_tensor * V = kiln_cast(c, kiln_permute(c, kiln_reshape_3d(c, v, hd, nh, T), 1, 2, 0, 3), KILN_TYPE_F16);
        CHK(kq && V);
        struct kiln_tensor * kqv = kiln_mul_mat(c, V, kq);
        CHK(kqv);
        x = kiln_cont_2d(c, kiln_permute(c, kqv, 0, 2, 1, 3), S, T);
        x = kiln_add(c, linear(c, L->o_w, L->o_b, x), cur);
        CHK(x);
        cur = mlp(c, L, x);
        CHK(cur);
    }
    struct kiln_tensor * enc = norm_affine(c, cur, w->e_ln_w, w->e_ln_b);
    CHK(enc);
    kiln_set_output(enc);
    CHK(kiln_build_forward_expand(gf, enc) == KILN_STATUS_SUCCESS);

    /* cross-attention K/V for every decoder layer */
    const int64_t Sd = hp->n_text_state, hdd = Sd / hp->n_text_head;
    const float k_scale = powf((float) hdd, -0.25f);
    const size_t es = sizeof(kiln_fp16_t);
    for (int il = 0; il < hp->n_text_layer; il++) {
        const struct whisper_layer * L = &w->dec[il];
        struct kiln_tensor * kc = kiln_scale(c, kiln_mul_mat(c, L->c_k_w, enc), k_scale);
        struct kiln_tensor * vc = linear(c, L->c_v_w, L->c_v_b, enc);
        CHK(kc && vc);
        vc = kiln_transpose(c, vc);
        struct kiln_tensor * kd = kiln_view_1d(c, w->k_cross, Sd * T, es * (size_t) Sd * T * il);
        struct kiln_tensor * vd = kiln_view_2d(c, w->v_cross, T, Sd, T * es, es * (size_t) Sd * T * il);
        CHK(vc && kd && vd);
        CHK(kiln_build_forward_expand(gf, kiln_cpy(c, kc, kd)) == KILN_STATUS_SUCCESS);
        CHK(kiln_build_forward_expand(gf, kiln_cpy(c, vc, vd)) == KILN_STATUS_SUCCESS);
    }
    CHK(kiln_gallocr_alloc_graph(w->galloc, gf));
    {
        float * dst = (float *) in->data;
        memset(dst, 0, kiln_nbytes(in));
        const int i0 = offset < n_len ? offset : n_len;
        const int i1 = offset + 2 * T < n_len ? offset + (int) (2 * T) : n_len;
        for (int j = 0; j < hp->n_mels; j++)
            for (int i = i0; i < i1; i++) dst[(size_t) j * 2 * T + (i - i0)] = mel[(size_t) j * n_len + i];
    }
    CHK(run_graph(w, gf));
    memcpy(w->enc_out, enc->data, (size_t) S * T * sizeof(float));
    kiln_free(c);
    return true;
fail:
    return graph_failed(c, "encoder");
}

const float * kiln_whisper_encoder_output(const struct kiln_whisper * w) { return w ? w->enc_out : NULL; }

/* The decoder over n tokens at positions n_past, n_past + 1, ...: with
 * slots == NULL, n consecutive tokens of one sequence in the cache in use
 * (a prompt, or one token), logits of the last token into out[0]; with
 * slots, n tokens of n sequences at the same position n_past, token b in
 * cache slot slots[b], its logits into out[b] — whisper.cpp's batch of one
 * token per live decoder. The weight products, norms and MLPs then run
 * once over all n rows; each row's self-attention reads its own slot, as
 * one query per op (the same ops and arithmetic as a one-token step in that
 * slot, so every row's logits equal that step's bit for bit). */
static bool decode_graph(struct kiln_whisper * w, const int32_t * tokens, int n, int n_past, const int * slots, float ** out) {
    if (!w || !tokens || !out || n <= 0 || n_past < 0) { kiln_set_last_error("whisper: bad arguments to kiln_whisper_decode"); return false; }
    const struct kiln_whisper_hparams * hp = &w->hp;
    const int n_seq = slots ? n : 1;   /* rows with their own cache */
    const int n_q = slots ? 1 : n;     /* positions per sequence */
    if (n_past + n_q > hp->n_text_ctx) { kiln_set_last_error("whisper: %d tokens exceed the text context %d", n_past + n_q, hp->n_text_ctx); return false; }
    for (int i = 0; i < n; i++) if (tokens[i] < 0 || tokens[i] >= hp->n_vocab) { kiln_set_last_error("whisper: token id %d out of range", tokens[i]); return false; }
    for (int b = 0; slots && b < n; b++)
        if (slots[b] < 0 || slots[b] >= WHISPER_MAX_DECODERS || !w->k_slot[slots[b]]) { kiln_set_last_error("whisper: no cache slot %d", slots[b]); return false; }
    const int64_t S = hp->n_text_state, nh = hp->n_text_head, hd = S / nh, Tc = hp->n_text_ctx, Ta = hp->n_audio_ctx;
    const int64_t n_kv = n_past + n_q;
    const size_t es = sizeof(kiln_fp16_t);
    const float kq_scale = powf((float) hd, -0.25f);
    struct kiln_cgraph * gf = NULL;
    struct kiln_context * c = graph_ctx((size_t) (80 + 24 * n_seq) * hp->n_text_layer + 128, &gf);
    if (!c) return false;
    struct kiln_tensor * emb = kiln_new_tensor_1d(c, KILN_TYPE_I32, n);
    struct kiln_tensor * pos = kiln_new_tensor_1d(c, KILN_TYPE_I32, n);
    struct kiln_tensor * mask = kiln_new_tensor_2d(c, KILN_TYPE_F32, n_kv, n_q);
    CHK(emb && pos && mask);
    kiln_set_input(emb); kiln_set_input(pos); kiln_set_input(mask);
    struct kiln_tensor * cur = kiln_add(c, kiln_get_rows(c, w->d_te, emb), kiln_get_rows(c, w->d_pe, pos));
    CHK(cur);
    for (int il = 0; il < hp->n_text_layer; il++) {
        const struct whisper_layer * L = &w->dec[il];
        /* self-attention */
        struct kiln_tensor * x = norm_affine(c, cur, L->attn_ln_w, L->attn_ln_b);
        struct kiln_tensor * q = kiln_scale(c, linear(c, L->q_w, L->q_b, x), kq_scale);
        struct kiln_tensor * k = kiln_scale(c, linear(c, L->k_w, NULL, x), kq_scale);
        struct kiln_tensor * v = linear(c, L->v_w, L->v_b, x);
        CHK(q && k && v);
        /* each sequence's new K/V into its cache first, then its attention over the cache */
        for (int b = 0; b < n_seq; b++) {
            struct kiln_tensor * ks = slots ? w->k_slot[slots[b]] : w->k_self, * vs = slots ? w->v_slot[slots[b]] : w->v_self;
            struct kiln_tensor * kb = slots ? kiln_view_1d(c, k, S, (size_t) b * k->nb[1]) : k;
            struct kiln_tensor * vb = slots ? kiln_view_2d(c, v, S, 1, v->nb[1], (size_t) b * v->nb[1]) : v;
            struct kiln_tensor * kd = kiln_view_1d(c, ks, n_q * S, es * (size_t) S * (il * Tc + n_past));
            struct kiln_tensor * vd = kiln_view_2d(c, vs, n_q, S, Tc * es, es * ((size_t) il * Tc * S + n_past));
            CHK(kb && vb && kd && vd);
            CHK(kiln_build_forward_expand(gf, kiln_cpy(c, kb, kd)) == KILN_STATUS_SUCCESS);
            CHK(kiln_build_forward_expand(gf, kiln_cpy(c, kiln_transpose(c, vb), vd)) == KILN_STATUS_SUCCESS);
        }
        struct kiln_tensor * att = NULL;
        for (int b = 0; b < n_seq; b++) {
            struct kiln_tensor * ks = slots ? w->k_slot[slots[b]] : w->k_self, * vs = slots ? w->v_slot[slots[b]] : w->v_self;
            struct kiln_tensor * qb = slots ? kiln_view_2d(c, q, S, 1, q->nb[1], (size_t) b * q->nb[1]) : q;
            CHK(qb);
            struct kiln_tensor * Q = kiln_permute(c, kiln_reshape_3d(c, qb, hd, nh, n_q), 0, 2, 1, 3);
            struct kiln_tensor * K = kiln_view_3d(c, ks, hd, n_kv, nh, es * S, es * hd, es * (size_t) S * Tc * il);
            struct kiln_tensor * V = kiln_view_3d(c, vs, n_kv, hd, nh, Tc * es, Tc * es * hd, es * (size_t) Tc * S * il);
            CHK(Q && K && V);
            struct kiln_tensor * kq = kiln_soft_max_ext(c, kiln_mul_mat(c, K, Q), mask, 1.0f, 0.0f);
            CHK(kq);
            struct kiln_tensor * ab = kiln_cont_2d(c, kiln_permute(c, kiln_mul_mat(c, V, kq), 0, 2, 1, 3), S, n_q);
            att = att ? kiln_concat(c, att, ab, 1) : ab;
            CHK(att);
        }
        struct kiln_tensor * inp_ca = kiln_add(c, linear(c, L->o_w, L->o_b, att), cur);
        CHK(inp_ca);
        /* cross-attention */
        x = norm_affine(c, inp_ca, L->c_ln_w, L->c_ln_b);
        q = linear(c, L->c_q_w, L->c_q_b, x);
        CHK(q);
        struct kiln_tensor * Q = kiln_permute(c, kiln_reshape_3d(c, q, hd, nh, n), 0, 2, 1, 3);
        struct kiln_tensor * K = kiln_view_3d(c, w->k_cross, hd, Ta, nh, es * S, es * hd, es * (size_t) S * Ta * il);
        struct kiln_tensor * V = kiln_view_3d(c, w->v_cross, Ta, hd, nh, Ta * es, Ta * es * hd, es * (size_t) Ta * S * il);
        CHK(Q && K && V);
        struct kiln_tensor * kq = kiln_soft_max_ext(c, kiln_mul_mat(c, K, Q), NULL, kq_scale, 0.0f);
        CHK(kq);
        x = kiln_cont_2d(c, kiln_permute(c, kiln_mul_mat(c, V, kq), 0, 2, 1, 3), S, n);
        x = kiln_add(c, linear(c, L->c_o_w, L->c_o_b, x), inp_ca);
        CHK(x);
        cur = mlp(c, L, x);
        CHK(cur);
    }
    /* logits: of every row (one per sequence), or of the sequence's last token */
    struct kiln_tensor * last = slots ? cur : kiln_view_2d(c, cur, S, 1, cur->nb[1], (size_t) (n - 1) * cur->nb[1]);
    CHK(last);
    struct kiln_tensor * lg = kiln_mul_mat(c, w->d_te, norm_affine(c, last, w->d_ln_w, w->d_ln_b));
    CHK(lg);
    kiln_set_output(lg);
    CHK(kiln_build_forward_expand(gf, lg) == KILN_STATUS_SUCCESS);
    CHK(kiln_gallocr_alloc_graph(w->galloc, gf));
    for (int i = 0; i < n; i++) { ((int32_t *) emb->data)[i] = tokens[i]; ((int32_t *) pos->data)[i] = n_past + (slots ? 0 : i); }
    {
        float * m = (float *) mask->data;
        for (int i = 0; i < n_q; i++)
            for (int64_t j = 0; j < n_kv; j++) m[i * n_kv + j] = j <= n_past + i ? 0.0f : -INFINITY;
    }
    CHK(run_graph(w, gf));
    for (int b = 0; b < n_seq; b++) memcpy(out[b], (const char *) lg->data + (size_t) b * lg->nb[1], (size_t) hp->n_vocab * sizeof(float));
    kiln_free(c);
    return true;
fail:
    return graph_failed(c, "decoder");
}

bool kiln_whisper_decode(struct kiln_whisper * w, const int32_t * tokens, int n, int n_past, float * logits) {
    return decode_graph(w, tokens, n, n_past, NULL, &logits);
}

/* F32 weights step slot by slot: over several rows their products take the
 * packed GEMM, which sums in another order than the one-row dot, and a
 * beam's logits would then depend on how many beams are live */
bool whisper_decode_slots(struct kiln_whisper * w, const int32_t * tokens, const int * slots, int n, int n_past, float ** logits) {
    if (!w || !slots || !tokens || !logits || n <= 0) { kiln_set_last_error("whisper: bad arguments to whisper_decode_slots"); return false; }
    if (w->wtype != KILN_TYPE_F32) return decode_graph(w, tokens, n, n_past, slots, logits);
    for (int b = 0; b < n; b++) if (!decode_graph(w, tokens + b, 1, n_past, slots + b, logits + b)) return false;
    return true;
}
