/*
 * kiln_wasm_model.c — models in wasm memory.
 *
 * JS learns the file size first (Content-Length, Blob.size, fstat), asks
 * kw_model_alloc() for one buffer of exactly that size, streams the bytes
 * into it (kw_model_buffer() + offsets) and then calls kw_model_parse().
 * The tensors point into that buffer (no second copy). A size that cannot
 * fit in wasm32 memory fails before anything is read.
 *
 * With the GGUF reader built in (kiln-gguf.h) parsing uses it; until then a
 * small bounds-checked walker here reads the header and maps the tensors.
 */
#include "kiln_wasm_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if __has_include("kiln-gguf.h")
#include "kiln-gguf.h"
#define KW_HAVE_GGUF 1
#else
#define KW_HAVE_GGUF 0
#endif

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
#if KW_HAVE_GGUF
    if (e->gguf) kiln_gguf_free((struct kiln_gguf_context *) e->gguf);
#endif
    if (e->mctx) kiln_free(e->mctx);
    free(e->mbuf);
    e->gguf = NULL;
    e->mctx = NULL;
    e->mbuf = NULL;
}

#if !KW_HAVE_GGUF
/* ---------------------------------------------------- header walker */

struct rd { const uint8_t * p; uint64_t n, off; bool bad; };

static bool rd_take(struct rd * r, void * dst, uint64_t n) {
    if (r->bad || n > r->n - r->off) { r->bad = true; return false; }
    if (dst) memcpy(dst, r->p + r->off, n);
    r->off += n;
    return true;
}
static uint64_t rd_u64(struct rd * r) { uint64_t v = 0; rd_take(r, &v, 8); return v; }
static uint32_t rd_u32(struct rd * r) { uint32_t v = 0; rd_take(r, &v, 4); return v; }

static const uint64_t SCALAR_SIZE[13] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

static bool skip_value(struct rd * r, uint32_t type, uint32_t * out_u32) {
    if (type >= 13) { r->bad = true; return false; }
    if (type == 8) { const uint64_t n = rd_u64(r); return rd_take(r, NULL, n); }
    if (type == 9) {
        const uint32_t at = rd_u32(r);
        const uint64_t n = rd_u64(r);
        if (r->bad || at >= 13 || at == 9) { r->bad = true; return false; }
        if (at == 8) { for (uint64_t i = 0; i < n && !r->bad; i++) skip_value(r, 8, NULL); return !r->bad; }
        if (n > (r->n - r->off) / SCALAR_SIZE[at]) { r->bad = true; return false; }
        return rd_take(r, NULL, n * SCALAR_SIZE[at]);
    }
    if (out_u32 && type == 4) { *out_u32 = rd_u32(r); return !r->bad; }
    return rd_take(r, NULL, SCALAR_SIZE[type]);
}

static int walk(struct kw_entry * e) {
    struct rd r = { (const uint8_t *) e->mbuf, (uint64_t) e->msize, 0, false };
    char magic[4];
    rd_take(&r, magic, 4);
    if (memcmp(magic, "GGUF", 4) != 0) return kw_fail(KW_E_FORMAT, "model: not a GGUF file (bad magic)");
    const uint32_t version = rd_u32(&r);
    if (version != 2 && version != 3) return kw_fail(KW_E_FORMAT, "model: GGUF version %u is not supported (2, 3)", version);
    const uint64_t n_tensors = rd_u64(&r), n_kv = rd_u64(&r);
    if (n_tensors > e->msize / 24 || n_kv > e->msize / 12) return kw_fail(KW_E_FORMAT, "model: header counts (%llu tensors, %llu keys) exceed the file", (unsigned long long) n_tensors, (unsigned long long) n_kv);
    uint32_t alignment = 32;
    for (uint64_t i = 0; i < n_kv && !r.bad; i++) {
        const uint64_t kl = rd_u64(&r);
        const uint64_t koff = r.off;
        if (!rd_take(&r, NULL, kl)) break;
        const uint32_t type = rd_u32(&r);
        uint32_t v = 0;
        const bool is_align = kl == 17 && memcmp(r.p + koff, "general.alignment", 17) == 0;
        if (!skip_value(&r, type, is_align ? &v : NULL)) break;
        if (is_align) {
            if (type != 4 || v == 0 || (v & (v - 1))) return kw_fail(KW_E_FORMAT, "model: bad general.alignment");
            alignment = v;
        }
    }
    if (r.bad) return kw_fail(KW_E_FORMAT, "model: truncated or malformed key/value section");
    struct kiln_init_params ip = { (size_t) n_tensors * kiln_tensor_overhead() + 64, NULL, true };
    e->mctx = kiln_init(ip);
    if (!e->mctx) return kw_fail_kiln(KW_E_NOMEM, "model");
    uint64_t * offs = (uint64_t *) malloc((size_t) (n_tensors ? n_tensors : 1) * sizeof *offs);
    if (!offs) return kw_fail(KW_E_NOMEM, "model: out of memory");
    for (uint64_t i = 0; i < n_tensors && !r.bad; i++) {
        const uint64_t nl = rd_u64(&r);
        char name[KILN_MAX_NAME];
        if (nl >= KILN_MAX_NAME) { free(offs); return kw_fail(KW_E_FORMAT, "model: tensor %llu has a name of %llu bytes", (unsigned long long) i, (unsigned long long) nl); }
        if (!rd_take(&r, name, nl)) break;
        name[nl] = 0;
        const uint32_t nd = rd_u32(&r);
        if (nd < 1 || nd > 4) { free(offs); return kw_fail(KW_E_FORMAT, "model: tensor '%s' has %u dimensions", name, nd); }
        int64_t ne[4] = { 1, 1, 1, 1 };
        for (uint32_t d = 0; d < nd; d++) {
            const uint64_t v = rd_u64(&r);
            if (v == 0 || v > (1ull << 32)) { free(offs); return kw_fail(KW_E_FORMAT, "model: tensor '%s' has dimension %llu", name, (unsigned long long) v); }
            ne[d] = (int64_t) v;
        }
        const uint32_t type = rd_u32(&r);
        offs[i] = rd_u64(&r);
        if (r.bad) break;
        if (!kiln_type_is_valid((int) type)) { free(offs); return kw_fail(KW_E_FORMAT, "model: tensor '%s' has type %u", name, type); }
        if (ne[0] % kiln_blck_size((enum kiln_type) type)) { free(offs); return kw_fail(KW_E_FORMAT, "model: tensor '%s': ne0 not a multiple of the block size", name); }
        struct kiln_tensor * t = kiln_new_tensor(e->mctx, (enum kiln_type) type, (int) nd, ne);
        if (!t) { free(offs); return kw_fail_kiln(KW_E_FORMAT, "model"); }
        kiln_set_name(t, name);
    }
    if (r.bad) { free(offs); return kw_fail(KW_E_FORMAT, "model: truncated or malformed tensor section"); }
    const uint64_t data_off = (r.off + alignment - 1) / alignment * alignment;
    uint64_t i = 0;
    for (struct kiln_tensor * t = kiln_get_first_tensor(e->mctx); t; t = kiln_get_next_tensor(e->mctx, t), i++) {
        const uint64_t nb = kiln_nbytes(t);
        if (offs[i] % alignment || data_off > e->msize || offs[i] > (uint64_t) e->msize - data_off || nb > (uint64_t) e->msize - data_off - offs[i]) {
            free(offs);
            return kw_fail(KW_E_FORMAT, "model: tensor '%s' (%llu bytes at %llu) lies outside the file", t->name,
                           (unsigned long long) nb, (unsigned long long) offs[i]);
        }
        t->data = (uint8_t *) e->mbuf + data_off + offs[i];
    }
    free(offs);
    e->version = (int) version;
    e->n_tensors = (int) n_tensors;
    e->n_kv = (int) n_kv;
    return KW_OK;
}
#endif

KW_EXPORT int kw_model_parse(int h) {
    const int s = kw_slot(h, KW_KIND_MODEL, "model_parse");
    if (s < 0) return s;
    struct kw_entry * e = kw_entry_slot(s);
    if (e->mctx || e->gguf) return kw_fail(KW_E_INVALID, "model_parse: already parsed");
    int rc;
#if KW_HAVE_GGUF
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
#else
    rc = walk(e);
#endif
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
    const int slot = kw_entry_new(KW_KIND_TENSOR);
    if (slot < 0) return slot;
    struct kw_entry * te = kw_entry_slot(slot);
    te->ctx = kw_new_ctx(2, 0);
    te->t = te->ctx ? kiln_view_tensor(te->ctx, mt) : NULL;
    if (!te->t) { kw_entry_discard(slot); return kw_fail_kiln(KW_E_NOMEM, "model_tensor"); }
    kw_entry_add_dep(slot, ms);
    return kw_handle_of(slot);
}
