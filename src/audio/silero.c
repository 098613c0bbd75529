/*
 * silero.c — Silero VAD (v5/v6 architecture) in whisper.cpp's model format,
 * on Kiln's graph ops (see kiln-audio.h).
 *
 * File layout (little-endian), as whisper.cpp's whisper_vad_init_with_params
 * reads it: u32 magic "ggml" (0x67676d6c); i32 length + model type string;
 * i32 version major, minor, patch; i32 n_window, n_context; i32 number of
 * encoder layers, then per layer (in channels, out channels, kernel size);
 * i32 lstm input size, lstm hidden size, final conv in, final conv out; then
 * tensors until the end: i32 n_dims, name length, type (0 f32, 1 f16),
 * n_dims x i32 ne, the name, the data.
 *
 * The per-window graph (512 samples -> one probability):
 *   reflect-pad 64 both sides (640) -> conv1d with the STFT basis
 *   [256, 1, 258], stride 128 -> 4 frames x 258 -> magnitude of
 *   (real, imag) halves: 4 x 129
 *   -> 4 conv1d layers, kernel 3, pad 1, strides 1,2,2,1, bias + ReLU
 *      (129 -> 128 -> 64 -> 64 -> 128 channels; 4 -> 4 -> 2 -> 1 -> 1 frames)
 *   -> LSTM cell (gates i, f, g, o) on frame 0 with the carried (h, c)
 *   -> ReLU -> conv1d 128 -> 1 -> sigmoid.
 * In whisper.cpp the convolutions go through im2col in the kernel's type
 * (f16), so the activations entering them are rounded to f16; here too
 * (round_f16), with the kernels widened to f32.
 *
 * The STFT basis and the convolution kernels may also be f32 in the file
 * (whisper.cpp's loader takes f16 only): those convolutions then run in
 * f32 throughout, inputs unrounded, which is Silero's own f32 arithmetic.
 */
#include "kiln-audio.h"
#include "audio_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VAD_MAGIC 0x67676d6cu
#define VAD_N_LAYERS 4

enum { T_BASIS, T_ENC_W0, T_ENC_B0 = T_ENC_W0 + VAD_N_LAYERS, T_IH_W = T_ENC_B0 + VAD_N_LAYERS, T_IH_B, T_HH_W, T_HH_B,
       T_FINAL_W, T_FINAL_B, T_COUNT };

struct kiln_vad {
    char type[64];
    int  version[3];
    int  n_window, n_context;
    int  enc_in[VAD_N_LAYERS], enc_out[VAD_N_LAYERS], enc_k[VAD_N_LAYERS];
    int  lstm_in, lstm_hidden, final_in, final_out;

    struct kiln_context * ctx_w;    /* weights */
    struct kiln_tensor  * t[T_COUNT];   /* as in the file */
    struct kiln_tensor  * w[T_COUNT];   /* what the graph uses: the f16 ones widened to f32 */
    struct kiln_context * ctx_c;    /* the graph, its tensors and the LSTM state */
    struct kiln_cgraph  * gf;
    struct kiln_tensor  * frame, * prob, * h_state, * c_state;
    struct kiln_cplan     plan;
    uint8_t             * work;
};

/* ---------------------------------------------------------------- reading */

struct rd { const uint8_t * p; size_t size, off; };

static bool rd_i32(struct rd * r, int32_t * v, const char * what) {
    if (r->size - r->off < 4) {
        kiln_set_last_error("vad: file truncated at byte %zu reading %s", r->off, what);
        return false;
    }
    uint32_t u = (uint32_t) r->p[r->off] | (uint32_t) r->p[r->off + 1] << 8 | (uint32_t) r->p[r->off + 2] << 16 | (uint32_t) r->p[r->off + 3] << 24;
    memcpy(v, &u, 4);
    r->off += 4;
    return true;
}

static const char * tensor_name(int i, char * buf, size_t n) {
    if (i == T_BASIS) return "_model.stft.forward_basis_buffer";
    if (i >= T_ENC_W0 && i < T_ENC_B0) { snprintf(buf, n, "_model.encoder.%d.reparam_conv.weight", i - T_ENC_W0); return buf; }
    if (i >= T_ENC_B0 && i < T_IH_W)   { snprintf(buf, n, "_model.encoder.%d.reparam_conv.bias", i - T_ENC_B0); return buf; }
    switch (i) {
        case T_IH_W:    return "_model.decoder.rnn.weight_ih";
        case T_IH_B:    return "_model.decoder.rnn.bias_ih";
        case T_HH_W:    return "_model.decoder.rnn.weight_hh";
        case T_HH_B:    return "_model.decoder.rnn.bias_hh";
        case T_FINAL_W: return "_model.decoder.decoder.2.weight";
        default:        return "_model.decoder.decoder.2.bias";
    }
}

/* the shape and type whisper.cpp gives each tensor */
static void tensor_desc(const struct kiln_vad * v, int i, int64_t ne[3], enum kiln_type * type) {
    ne[0] = ne[1] = ne[2] = 1;
    *type = KILN_TYPE_F32;
    if (i == T_BASIS) { ne[0] = 256; ne[1] = 1; ne[2] = 258; *type = KILN_TYPE_F16; }
    else if (i >= T_ENC_W0 && i < T_ENC_B0) {
        const int l = i - T_ENC_W0;
        ne[0] = v->enc_k[l]; ne[1] = v->enc_in[l]; ne[2] = v->enc_out[l]; *type = KILN_TYPE_F16;
    } else if (i >= T_ENC_B0 && i < T_IH_W) ne[0] = v->enc_out[i - T_ENC_B0];
    else if (i == T_IH_W || i == T_HH_W) { ne[0] = v->lstm_hidden; ne[1] = 4 * v->lstm_hidden; }
    else if (i == T_IH_B || i == T_HH_B) ne[0] = 4 * v->lstm_hidden;
    else if (i == T_FINAL_W) { ne[0] = v->final_in; *type = KILN_TYPE_F16; }
}

static bool read_header(struct kiln_vad * v, struct rd * r) {
    int32_t magic, len;
    if (!rd_i32(r, &magic, "the magic")) return false;
    if ((uint32_t) magic != VAD_MAGIC) { kiln_set_last_error("vad: bad magic 0x%08x (not a whisper.cpp ggml VAD model)", (unsigned) magic); return false; }
    if (!rd_i32(r, &len, "the model type")) return false;
    if (len <= 0 || len >= (int32_t) sizeof(v->type)) { kiln_set_last_error("vad: bad model type length %d", len); return false; }
    if (r->size - r->off < (size_t) len) { kiln_set_last_error("vad: file truncated in the model type"); return false; }
    memcpy(v->type, r->p + r->off, (size_t) len);
    v->type[len] = 0;
    r->off += (size_t) len;
    int32_t h[7];
    const char * hn[7] = { "version major", "version minor", "version patch", "n_window", "n_context", "the encoder layer count" };
    for (int i = 0; i < 6; i++) if (!rd_i32(r, &h[i], hn[i])) return false;
    v->version[0] = h[0]; v->version[1] = h[1]; v->version[2] = h[2];
    v->n_window = h[3]; v->n_context = h[4];
    if (h[5] != VAD_N_LAYERS) { kiln_set_last_error("vad: %d encoder layers (the Silero v5/v6 graph has %d)", h[5], VAD_N_LAYERS); return false; }
    for (int l = 0; l < VAD_N_LAYERS; l++) {
        if (!rd_i32(r, &v->enc_in[l], "encoder channels") || !rd_i32(r, &v->enc_out[l], "encoder channels") ||
            !rd_i32(r, &v->enc_k[l], "encoder kernel size")) return false;
    }
    if (!rd_i32(r, &v->lstm_in, "lstm_input_size") || !rd_i32(r, &v->lstm_hidden, "lstm_hidden_size") ||
        !rd_i32(r, &v->final_in, "final_conv_in") || !rd_i32(r, &v->final_out, "final_conv_out")) return false;
    /* the graph below is Silero's: check the numbers it relies on */
    static const int want_in[VAD_N_LAYERS] = { 129, 128, 64, 64 }, want_out[VAD_N_LAYERS] = { 128, 64, 64, 128 };
    bool ok = v->n_window == 512 && v->lstm_in == 128 && v->lstm_hidden == 128 && v->final_in == 128 && v->final_out == 1;
    for (int l = 0; l < VAD_N_LAYERS; l++) ok = ok && v->enc_in[l] == want_in[l] && v->enc_out[l] == want_out[l] && v->enc_k[l] == 3;
    if (!ok) { kiln_set_last_error("vad: hyperparameters are not Silero VAD 16 kHz's (n_window %d, lstm %d/%d)", v->n_window, v->lstm_in, v->lstm_hidden); return false; }
    return true;
}

static bool read_tensors(struct kiln_vad * v, struct rd * r) {
    size_t bytes = T_COUNT * (kiln_tensor_overhead() + 64);
    for (int i = 0; i < T_COUNT; i++) {
        int64_t ne[3]; enum kiln_type ty;
        tensor_desc(v, i, ne, &ty);
        bytes += (size_t)(ne[0] * ne[1] * ne[2]) * (ty == KILN_TYPE_F16 ? 2 + 4 : 4) + kiln_tensor_overhead() + 64;
    }
    struct kiln_init_params ip = { bytes, NULL, false };
    v->ctx_w = kiln_init(ip);
    if (!v->ctx_w) return false;
    char nb[64];
    for (int i = 0; i < T_COUNT; i++) {
        int64_t ne[3]; enum kiln_type ty;
        tensor_desc(v, i, ne, &ty);
        v->t[i] = i == T_FINAL_W ? kiln_new_tensor_2d(v->ctx_w, ty, ne[0], 1) : kiln_new_tensor_3d(v->ctx_w, ty, ne[0], ne[1], ne[2]);
        if (!v->t[i]) return false;
        kiln_set_name(v->t[i], tensor_name(i, nb, sizeof nb));
    }
    bool loaded[T_COUNT] = { false };
    int n_loaded = 0;
    while (r->off < r->size) {
        int32_t n_dims, len, ttype, fne[4] = { 1, 1, 1, 1 };
        if (!rd_i32(r, &n_dims, "a tensor header") || !rd_i32(r, &len, "a tensor header") || !rd_i32(r, &ttype, "a tensor header")) return false;
        if (n_dims < 0 || n_dims > 4) { kiln_set_last_error("vad: invalid n_dims %d at byte %zu", n_dims, r->off - 12); return false; }
        for (int d = 0; d < n_dims; d++) if (!rd_i32(r, &fne[d], "a tensor shape")) return false;
        if (len <= 0 || len >= 64 || r->size - r->off < (size_t) len) { kiln_set_last_error("vad: bad or truncated tensor name (length %d) at byte %zu", len, r->off); return false; }
        char name[64];
        memcpy(name, r->p + r->off, (size_t) len);
        name[len] = 0;
        r->off += (size_t) len;
        int idx = -1;
        for (int i = 0; i < T_COUNT; i++) if (strcmp(name, tensor_name(i, nb, sizeof nb)) == 0) { idx = i; break; }
        if (idx < 0) { kiln_set_last_error("vad: unknown tensor '%s' in the model file", name); return false; }
        if (loaded[idx]) { kiln_set_last_error("vad: tensor '%s' appears twice", name); return false; }
        struct kiln_tensor * t = v->t[idx];
        if (fne[0] != t->ne[0] || fne[1] != t->ne[1] || fne[2] != t->ne[2] || fne[3] != 1) {
            kiln_set_last_error("vad: tensor '%s' has shape [%d, %d, %d, %d], expected [%lld, %lld, %lld]", name,
                                fne[0], fne[1], fne[2], fne[3], (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2]);
            return false;
        }
        if (ttype != (int32_t) t->type) {
            /* an f32 kernel where whisper.cpp has f16: take it as is */
            if (t->type != KILN_TYPE_F16 || ttype != (int32_t) KILN_TYPE_F32) {
                kiln_set_last_error("vad: tensor '%s' has type %d, expected %d%s", name, ttype, (int) t->type, t->type == KILN_TYPE_F16 ? " (f16) or 0 (f32)" : "");
                return false;
            }
            t = v->t[idx] = kiln_new_tensor(v->ctx_w, KILN_TYPE_F32, kiln_n_dims(t), t->ne);
            if (!t) return false;
            kiln_set_name(t, name);
        }
        const size_t nbytes = kiln_nbytes(t);
        if (r->size - r->off < nbytes) { kiln_set_last_error("vad: file truncated in the data of tensor '%s'", name); return false; }
        memcpy(t->data, r->p + r->off, nbytes);
        r->off += nbytes;
        loaded[idx] = true;
        n_loaded++;
    }
    if (n_loaded != T_COUNT) {
        for (int i = 0; i < T_COUNT; i++) if (!loaded[i]) { kiln_set_last_error("vad: tensor '%s' is missing (file truncated?)", tensor_name(i, nb, sizeof nb)); break; }
        return false;
    }
    for (int i = 0; i < T_COUNT; i++) {
        struct kiln_tensor * t = v->t[i];
        if (t->type != KILN_TYPE_F16) { v->w[i] = t; continue; }
        v->w[i] = kiln_new_tensor(v->ctx_w, KILN_TYPE_F32, kiln_n_dims(t), t->ne);
        if (!v->w[i]) return false;
        kiln_fp16_to_fp32_row((const kiln_fp16_t *) t->data, (float *) v->w[i]->data, kiln_nelements(t));
    }
    return true;
}

/* ------------------------------------------------------------------ graph */

/* x rounded to f16 and back when the file's kernel k is f16: what ggml's
 * im2col does to the input of a convolution with an f16 kernel. The kernels
 * run as f32 (the f16 values widened exactly), so every product equals
 * whisper.cpp's f16 x f16 one and the f32 dot products run at f32 speed on
 * every ISA. An f32 kernel from the file leaves x as it is. */
static struct kiln_tensor * round_f16(struct kiln_context * c, struct kiln_tensor * x, const struct kiln_tensor * k) {
    if (!x || k->type != KILN_TYPE_F16) return x;
    struct kiln_tensor * h = kiln_new_tensor(c, KILN_TYPE_F16, kiln_n_dims(x), x->ne);
    struct kiln_tensor * f = kiln_new_tensor(c, KILN_TYPE_F32, kiln_n_dims(x), x->ne);
    if (!h || !f) return NULL;
    struct kiln_tensor * y = kiln_cpy(c, x, h);
    return y ? kiln_cpy(c, y, f) : NULL;
}

/* conv1d of x [L, IC] with kernel w [K, IC, OC] -> [OL, OC]: kiln_conv_1d's
 * im2col + mat-mul, with an f32 im2col (kiln_conv_1d, like ggml's, makes it
 * f16 and would convert the f32 kernel to f16 on every call) */
static struct kiln_tensor * conv1d(struct kiln_context * c, struct kiln_tensor * w, struct kiln_tensor * x, int s, int p) {
    struct kiln_tensor * cols = x ? kiln_im2col(c, w, x, s, 0, p, 0, 1, 0, false, KILN_TYPE_F32) : NULL;
    if (!cols) return NULL;
    const int64_t kic = w->ne[0] * w->ne[1];
    return kiln_mul_mat(c, kiln_reshape_2d(c, cols, kic, cols->ne[1]), kiln_reshape_2d(c, w, kic, w->ne[2]));
}

static struct kiln_tensor * conv_bias_relu(struct kiln_context * c, const struct kiln_tensor * file_w, struct kiln_tensor * w,
                                           struct kiln_tensor * b, struct kiln_tensor * x, int stride) {
    struct kiln_tensor * y = conv1d(c, w, round_f16(c, x, file_w), stride, 1);
    if (!y) return NULL;
    y = kiln_add(c, y, kiln_reshape_3d(c, b, 1, b->ne[0], 1));
    return y ? kiln_relu(c, y) : NULL;
}

static bool build_graph(struct kiln_vad * v) {
    struct kiln_init_params ip = { 8u << 20, NULL, false };
    struct kiln_context * c = v->ctx_c = kiln_init(ip);
    if (!c) return false;
    struct kiln_tensor ** t = v->w;
    const int H = v->lstm_hidden;
    v->frame = kiln_new_tensor_2d(c, KILN_TYPE_F32, v->n_window, 1);
    v->h_state = kiln_new_tensor_1d(c, KILN_TYPE_F32, H);
    v->c_state = kiln_new_tensor_1d(c, KILN_TYPE_F32, H);
    if (!v->frame || !v->h_state || !v->c_state) return false;

    /* STFT as a strided conv1d, then |X| */
    struct kiln_tensor * x = kiln_pad_reflect_1d(c, v->frame, 64, 64);
    struct kiln_tensor * stft = x ? conv1d(c, t[T_BASIS], round_f16(c, x, v->t[T_BASIS]), v->lstm_in, 0) : NULL;
    if (!stft) return false;
    const int64_t half = t[T_BASIS]->ne[2] / 2, nf = stft->ne[0];
    struct kiln_tensor * re = kiln_view_2d(c, stft, nf, half, stft->nb[1], 0);
    struct kiln_tensor * im = kiln_view_2d(c, stft, nf, half, stft->nb[1], (size_t) half * stft->nb[1]);
    x = kiln_sqrt(c, kiln_add(c, kiln_mul(c, re, re), kiln_mul(c, im, im)));
    if (!x) return false;

    static const int strides[VAD_N_LAYERS] = { 1, 2, 2, 1 };
    for (int l = 0; l < VAD_N_LAYERS && x; l++) x = conv_bias_relu(c, v->t[T_ENC_W0 + l], t[T_ENC_W0 + l], t[T_ENC_B0 + l], x, strides[l]);
    if (!x) return false;

    /* LSTM cell on the first frame */
    x = kiln_transpose(c, kiln_view_2d(c, x, 1, x->ne[1], x->nb[1], 0));
    struct kiln_tensor * gi = kiln_add(c, kiln_mul_mat(c, t[T_IH_W], x), t[T_IH_B]);
    struct kiln_tensor * gh = kiln_add(c, kiln_mul_mat(c, t[T_HH_W], v->h_state), t[T_HH_B]);
    struct kiln_tensor * g = gi && gh ? kiln_add(c, gi, gh) : NULL;
    if (!g) return false;
    const size_t rs = (size_t) H * sizeof(float);
    struct kiln_tensor * ig = kiln_sigmoid(c, kiln_view_1d(c, g, H, 0 * rs));
    struct kiln_tensor * fg = kiln_sigmoid(c, kiln_view_1d(c, g, H, 1 * rs));
    struct kiln_tensor * cg = kiln_tanh   (c, kiln_view_1d(c, g, H, 2 * rs));
    struct kiln_tensor * og = kiln_sigmoid(c, kiln_view_1d(c, g, H, 3 * rs));
    struct kiln_tensor * c_new = kiln_add(c, kiln_mul(c, fg, v->c_state), kiln_mul(c, ig, cg));
    struct kiln_tensor * h_new = c_new ? kiln_mul(c, og, kiln_tanh(c, c_new)) : NULL;
    if (!h_new) return false;

    /* decoder: ReLU -> 1x1 conv over the hidden vector -> sigmoid */
    struct kiln_tensor * y = conv1d(c, t[T_FINAL_W], round_f16(c, kiln_relu(c, h_new), v->t[T_FINAL_W]), 1, 0);
    y = y ? kiln_sigmoid(c, kiln_add(c, y, t[T_FINAL_B])) : NULL;
    if (!y) return false;
    v->prob = y;

    v->gf = kiln_new_graph(c);
    if (!v->gf) return false;
    /* the state updates run after everything that reads the old state */
    if (kiln_build_forward_expand(v->gf, y) != KILN_STATUS_SUCCESS ||
        kiln_build_forward_expand(v->gf, kiln_cpy(c, c_new, v->c_state)) != KILN_STATUS_SUCCESS ||
        kiln_build_forward_expand(v->gf, kiln_cpy(c, h_new, v->h_state)) != KILN_STATUS_SUCCESS) return false;
    return true;
}

/* ----------------------------------------------------------------- public */

struct kiln_vad * kiln_vad_load_mem(const void * data, size_t size, int n_threads) {
    if (!data) { kiln_set_last_error("vad: model data is NULL"); return NULL; }
    struct kiln_vad * v = (struct kiln_vad *) calloc(1, sizeof(*v));
    if (!v) { kiln_set_last_error("vad: out of memory"); return NULL; }
    struct rd r = { (const uint8_t *) data, size, 0 };
    if (!read_header(v, &r) || !read_tensors(v, &r) || !build_graph(v)) { kiln_vad_free(v); return NULL; }
    v->plan = kiln_graph_plan(v->gf, n_threads > 0 ? n_threads : 1, NULL);
    if (v->plan.work_size > 0) {
        v->work = (uint8_t *) malloc(v->plan.work_size);
        if (!v->work) { kiln_set_last_error("vad: out of memory for the work buffer"); kiln_vad_free(v); return NULL; }
        v->plan.work_data = v->work;
    }
    kiln_vad_reset(v);
    return v;
}

struct kiln_vad * kiln_vad_load_file(const char * path, int n_threads) {
    size_t size;
    uint8_t * buf = kiln_audio_read_file("vad", path, &size);
    if (!buf) return NULL;
    struct kiln_vad * v = kiln_vad_load_mem(buf, size, n_threads);
    free(buf);
    if (!v) kiln_audio_error_path(path);
    return v;
}

void kiln_vad_free(struct kiln_vad * v) {
    if (!v) return;
    free(v->work);
    kiln_free(v->ctx_c);
    kiln_free(v->ctx_w);
    free(v);
}

int kiln_vad_n_window(const struct kiln_vad * v) { return v ? v->n_window : 0; }
int kiln_vad_sample_rate(const struct kiln_vad * v) { return v ? 16000 : 0; }
const char * kiln_vad_model_type(const struct kiln_vad * v) { return v ? v->type : ""; }

void kiln_vad_reset(struct kiln_vad * v) {
    if (!v) return;
    memset(v->h_state->data, 0, kiln_nbytes(v->h_state));
    memset(v->c_state->data, 0, kiln_nbytes(v->c_state));
}

bool kiln_vad_process_window(struct kiln_vad * v, const float * window, float * prob) {
    if (!v || !window || !prob) { kiln_set_last_error("vad: NULL argument"); return false; }
    memcpy(v->frame->data, window, (size_t) v->n_window * sizeof(float));
    const enum kiln_status st = kiln_graph_compute(v->gf, &v->plan);
    if (st != KILN_STATUS_SUCCESS) return false;
    *prob = ((const float *) v->prob->data)[0];
    return true;
}

int64_t kiln_vad_probs(struct kiln_vad * v, const float * samples, int64_t n, float * probs) {
    if (!v || (!samples && n > 0) || (!probs && n > 0) || n < 0) { kiln_set_last_error("vad: bad arguments to kiln_vad_probs"); return -1; }
    kiln_vad_reset(v);
    const int w = v->n_window;
    const int64_t nw = (n + w - 1) / w;
    float * buf = (float *) malloc((size_t) w * sizeof(float));
    if (!buf) { kiln_set_last_error("vad: out of memory"); return -1; }
    for (int64_t i = 0; i < nw; i++) {
        const int64_t s0 = i * w;
        const int64_t len = n - s0 < w ? n - s0 : w;
        memcpy(buf, samples + s0, (size_t) len * sizeof(float));
        if (len < w) memset(buf + len, 0, (size_t)(w - len) * sizeof(float));
        if (!kiln_vad_process_window(v, buf, &probs[i])) { free(buf); return -1; }
    }
    free(buf);
    return nw;
}
