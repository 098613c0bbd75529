/*
 * kiln_wasm_model.c — models in wasm memory.
 *
 * JS learns the file size first (Content-Length, Blob.size, fstat), asks
 * kw_model_alloc() for one buffer of exactly that size, streams the bytes
 * into it (kw_model_buffer() + offsets) and then calls kw_model_parse().
 * The tensors point into that buffer (no second copy). A size that cannot
 * fit in wasm32 memory fails before anything is read.
 *
 * Parsing is kiln_gguf_init_from_buffer with no_copy: the tensors' data
 * stays in that buffer.
 */
#include "kiln_wasm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


double kw_mem_used(void);
double kw_mem_max(void);

KW_EXPORT int kw_model_alloc(double size) {
    if (!(size >= 0) || size != (double) (uint64_t) size) return kw_fail(KW_E_INVALID, "model: size %g is not a byte count", size);
    if (size < 24) return kw_fail(KW_E_FORMAT, "model: %.0f bytes is too small for a GGUF file", size);
    const double room = kw_mem_max() - kw_mem_used();
    if (size > room || size > 4294967295.0) {
        return kw_fail(KW_E_NOMEM, "model: %.0f MB does not fit in wasm32 memory (4 GB at most, %.0f MB free)",
                       size / 1048576.0, room / 1048576.0);
    }
    const int slot = kw_entry_new(KW_KIND_MODEL);
    if (slot < 0) return slot;
    struct kw_entry * e = kw_entry_slot(slot);
    if (posix_memalign(&e->mbuf, 64, (size_t) size) != 0 || !e->mbuf) {
        e->mbuf = NULL;
        kw_entry_discard(slot);
        return kw_fail(KW_E_NOMEM, "model: out of memory allocating %.0f MB", size / 1048576.0);
    }
    e->msize = size;
    return kw_handle_of(slot);
}

KW_EXPORT void * kw_model_buffer(int h) {
    const int s = kw_slot(h, KW_KIND_MODEL, "model_buffer");
    return s < 0 ? NULL : kw_entry_slot(s)->mbuf;
}

void kw_model_release(struct kw_entry * e) {
    if (e->gguf) kiln_gguf_free(e->gguf);
    if (e->mctx) kiln_free(e->mctx);
    free(e->mbuf);
    e->views = 0;
    e->gguf = NULL;
    e->mctx = NULL;
    e->mbuf = NULL;
}

KW_EXPORT int kw_model_parse(int h) {
    const int s = kw_slot(h, KW_KIND_MODEL, "model_parse");
    if (s < 0) return s;
    struct kw_entry * e = kw_entry_slot(s);
    if (e->mctx || e->gguf) return kw_fail(KW_E_INVALID, "model_parse: already parsed");
    int rc;
    struct kiln_context * mctx = NULL;
    struct kiln_gguf_init_params p = { .no_alloc = false, .ctx = &mctx, .no_copy = true };
    kiln_clear_error();
    struct kiln_gguf_context * g = kiln_gguf_init_from_buffer(e->mbuf, (size_t) e->msize, p);
    if (!g) {
        rc = kw_fail_kiln(KW_E_FORMAT, "model");
    } else {
        e->gguf = g;
        e->mctx = mctx;
        e->version = (int) kiln_gguf_get_version(g);
        e->n_tensors = (int) kiln_gguf_get_n_tensors(g);
        e->n_kv = (int) kiln_gguf_get_n_kv(g);
        rc = KW_OK;
    }
    if (rc < 0 && e->mctx) { kiln_free(e->mctx); e->mctx = NULL; }
    return rc;
}

static struct kw_entry * parsed(int h, const char * fn) {
    const int s = kw_slot(h, KW_KIND_MODEL, fn);
    if (s < 0) return NULL;
    struct kw_entry * e = kw_entry_slot(s);
    if (!e->mctx) { kw_fail(KW_E_INVALID, "%s: the model is not parsed", fn); return NULL; }
    return e;
}

KW_EXPORT int kw_model_n_tensors(int h) { struct kw_entry * e = parsed(h, "model_n_tensors"); return e ? e->n_tensors : KW_E_HANDLE; }
KW_EXPORT int kw_model_n_kv(int h) { struct kw_entry * e = parsed(h, "model_n_kv"); return e ? e->n_kv : KW_E_HANDLE; }
KW_EXPORT int kw_model_version(int h) { struct kw_entry * e = parsed(h, "model_version"); return e ? e->version : KW_E_HANDLE; }

KW_EXPORT const char * kw_model_tensor_name(int h, int i) {
    struct kw_entry * e = parsed(h, "model_tensor_name");
    if (!e) return "";
    int k = 0;
    for (struct kiln_tensor * t = kiln_get_first_tensor(e->mctx); t; t = kiln_get_next_tensor(e->mctx, t), k++) {
        if (k == i) return t->name;
    }
    kw_fail(KW_E_INVALID, "model_tensor_name: index %d", i);
    return "";
}

/* A tensor handle viewing a model tensor; it keeps the model's memory alive. */
KW_EXPORT int kw_model_tensor(int h, const char * name) {
    struct kw_entry * e = parsed(h, "model_tensor");
    if (!e) return KW_E_HANDLE;
    const int ms = h & ((1 << 20) - 1);
    struct kiln_tensor * mt = kiln_get_tensor(e->mctx, name);
    if (!mt) return kw_fail(KW_E_INVALID, "model_tensor: no tensor named '%s'", name);
    if (kiln_tensor_is_repacked(mt)) {
        return kw_fail(KW_E_INVALID, "model_tensor: '%s' was rearranged in memory for generation; "
                       "read weights before generating, or load the model again", name);
    }
    e->views++;
    const int slot = kw_entry_new(KW_KIND_TENSOR);
    if (slot < 0) return slot;
    struct kw_entry * te = kw_entry_slot(slot);
    te->ctx = kw_new_ctx(2, 0);
    te->t = te->ctx ? kiln_view_tensor(te->ctx, mt) : NULL;
    if (!te->t) { kw_entry_discard(slot); return kw_fail_kiln(KW_E_NOMEM, "model_tensor"); }
    kw_entry_add_dep(slot, ms);
    return kw_handle_of(slot);
}

/* ------------------------------------------------------------ metadata */

static const struct kiln_gguf_context * kv_ctx(int h, int i, const char * fn) {
    struct kw_entry * e = parsed(h, fn);
    if (!e) return NULL;
    if (i < 0 || i >= e->n_kv) { kw_fail(KW_E_INVALID, "%s: key %d of %d", fn, i, e->n_kv); return NULL; }
    return e->gguf;
}

KW_EXPORT const char * kw_model_kv_key(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_key");
    return g ? kiln_gguf_get_key(g, i) : "";
}
/* the GGUF value type (9 = array) or a KW_E_* code */
KW_EXPORT int kw_model_kv_type(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_type");
    return g ? (int) kiln_gguf_get_kv_type(g, i) : KW_E_INVALID;
}
KW_EXPORT int kw_model_kv_arr_type(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_arr_type");
    return g ? (int) kiln_gguf_get_arr_type(g, i) : KW_E_INVALID;
}
KW_EXPORT double kw_model_kv_arr_n(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_arr_n");
    return g ? (double) kiln_gguf_get_arr_n(g, i) : KW_E_INVALID;
}
KW_EXPORT const char * kw_model_kv_str(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_str");
    if (!g || kiln_gguf_get_kv_type(g, i) != KILN_GGUF_TYPE_STRING) return "";
    return kiln_gguf_get_val_str(g, i);
}
/* a numeric or bool scalar as a double (64-bit integers lose precision past 2^53) */
KW_EXPORT double kw_model_kv_num(int h, int i) {
    const struct kiln_gguf_context * g = kv_ctx(h, i, "model_kv_num");
    if (!g) return 0;
    switch (kiln_gguf_get_kv_type(g, i)) {
        case KILN_GGUF_TYPE_UINT8:   return kiln_gguf_get_val_u8(g, i);
        case KILN_GGUF_TYPE_INT8:    return kiln_gguf_get_val_i8(g, i);
        case KILN_GGUF_TYPE_UINT16:  return kiln_gguf_get_val_u16(g, i);
        case KILN_GGUF_TYPE_INT16:   return kiln_gguf_get_val_i16(g, i);
        case KILN_GGUF_TYPE_UINT32:  return kiln_gguf_get_val_u32(g, i);
        case KILN_GGUF_TYPE_INT32:   return kiln_gguf_get_val_i32(g, i);
        case KILN_GGUF_TYPE_FLOAT32: return kiln_gguf_get_val_f32(g, i);
        case KILN_GGUF_TYPE_BOOL:    return kiln_gguf_get_val_bool(g, i);
        case KILN_GGUF_TYPE_UINT64:  return (double) kiln_gguf_get_val_u64(g, i);
        case KILN_GGUF_TYPE_INT64:   return (double) kiln_gguf_get_val_i64(g, i);
        case KILN_GGUF_TYPE_FLOAT64: return kiln_gguf_get_val_f64(g, i);
        default: return 0;
    }
}
