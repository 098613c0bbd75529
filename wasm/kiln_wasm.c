/*
 * kiln_wasm.c — handles, memory stats, compute and data in/out for the JS
 * package (see kiln_wasm.h). Op builders are in kiln_wasm_ops.c, models in
 * kiln_wasm_model.c.
 */
#include "kiln_wasm_internal.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __EMSCRIPTEN__
#include <emscripten.h>
#include <emscripten/heap.h>
#endif

/* ------------------------------------------------------------ errors */

static char g_err[1024];

int kw_fail(int code, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_err, sizeof g_err, fmt, ap);
    va_end(ap);
    return code;
}

int kw_fail_kiln(int code, const char * what) {
    const char * e = kiln_last_error();
    return kw_fail(code, "%s%s%s", what ? what : "", what && e[0] ? ": " : "", e[0] ? e : (what ? "" : "failed"));
}

/* the one kiln_status -> KW_E_* mapping (message: what + kiln_last_error()) */
int kw_fail_status(enum kiln_status st, const char * what) {
    switch (st) {
        case KILN_STATUS_SUCCESS:      return KW_OK;
        case KILN_STATUS_ABORTED:      return kw_fail(KW_E_ABORTED, "%s aborted", what);
        case KILN_STATUS_ALLOC_FAILED: return kw_fail_kiln(KW_E_NOMEM, what);
        case KILN_STATUS_UNSUPPORTED:  return kw_fail_kiln(KW_E_UNSUPPORTED, what);
        case KILN_STATUS_INVALID_ARG:  return kw_fail_kiln(KW_E_INVALID, what);
        default:                       return kw_fail_kiln(KW_E_FAILED, what);
    }
}

/* the KilnError code (js/src/errors.ts) of a KW_E_* code: the JS package
 * reads it from here instead of keeping its own copy */
KW_EXPORT const char * kw_code_name(int code) {
    switch (code) {
        case KW_E_INVALID:     return "INVALID_ARGUMENT";
        case KW_E_NOMEM:       return "OUT_OF_MEMORY";
        case KW_E_HANDLE:      return "INVALID_HANDLE";
        case KW_E_UNSUPPORTED: return "UNSUPPORTED";
        case KW_E_ABORTED:     return "ABORTED";
        case KW_E_FORMAT:      return "BAD_MODEL";
        default:               return "COMPUTE_FAILED";
    }
}

KW_EXPORT const char * kw_last_error(void) { return g_err; }
KW_EXPORT void kw_clear_error(void) { g_err[0] = 0; kiln_clear_error(); }

/* ------------------------------------------------------------ engine */

static int g_n_threads = 1;
static struct kiln_threadpool * g_tp = NULL;

KW_EXPORT int kw_init(int n_threads) {
    if (n_threads < 1 || n_threads > 64) return kw_fail(KW_E_INVALID, "init: threads %d outside 1..64", n_threads);
#if !KW_THREADS
    n_threads = 1;
#endif
    if (g_tp && kiln_threadpool_get_n_threads(g_tp) == n_threads) { g_n_threads = n_threads; return KW_OK; }
    if (g_tp) { kiln_threadpool_free(g_tp); g_tp = NULL; }
    /* a private pool made now: its workers come from the pthread pool that
     * the loader started before main, so nothing waits on the event loop */
    g_tp = kiln_threadpool_new(kiln_threadpool_params_default(n_threads));
    if (!g_tp) return kw_fail_kiln(KW_E_NOMEM, "init");
    g_n_threads = kiln_threadpool_get_n_threads(g_tp);
    return KW_OK;
}

KW_EXPORT int kw_n_threads(void) { return g_n_threads; }
/* the engine's pool, shared with training (kiln_wasm_train.c) */
struct kiln_threadpool * kw_threadpool(void) { return g_tp; }
KW_EXPORT int kw_is_mt(void) { return KW_THREADS; }
KW_EXPORT int kw_simd(void) { return kiln_cpu_has_wasm_simd(); }
KW_EXPORT const char * kw_version(void) { return KILN_VERSION_STRING; }
KW_EXPORT const char * kw_isa(void) { return kiln_cpu_isa(); }

/* heap bytes in use by malloc (dlmalloc's count) */
KW_EXPORT double kw_mem_used(void) {
    struct mallinfo mi = mallinfo();
    return (double) (size_t) mi.uordblks;
}
/* bytes of wasm memory reserved now (it grows on demand) */
KW_EXPORT double kw_mem_total(void) {
#ifdef __EMSCRIPTEN__
    return (double) emscripten_get_heap_size();
#else
    return 0;
#endif
}
KW_EXPORT double kw_mem_max(void) {
#ifdef __EMSCRIPTEN__
    return (double) emscripten_get_heap_max();
#else
    return 0;
#endif
}

/* raw allocations for JS staging (shape arrays, ...) */
KW_EXPORT void * kw_malloc(double size) {
    if (!(size >= 0) || size > 4294967295.0) { kw_fail(KW_E_NOMEM, "malloc: %.0f bytes", size); return NULL; }
    void * p = malloc((size_t) size ? (size_t) size : 1);
    if (!p) kw_fail(KW_E_NOMEM, "out of memory allocating %.0f bytes", size);
    return p;
}
KW_EXPORT void kw_free_ptr(void * p) { free(p); }

/* ------------------------------------------------------------ handles */

#define SLOT_BITS 20
#define SLOT_MASK ((1 << SLOT_BITS) - 1)
#define GEN_MAX   2047

static struct kw_entry * g_ent = NULL;
static int g_n_ent = 0;   /* slots in use (1-based; slot 0 unused) */
static int g_cap_ent = 0;
static int g_free_head = 0; /* free-list of slots */
static int g_live = 0;

struct kw_entry * kw_entry_slot(int slot) { return &g_ent[slot]; }

int kw_entry_new(int kind) {
    int slot;
    if (g_free_head) {
        slot = g_free_head;
        g_free_head = g_ent[slot].next_free;
    } else {
        if (g_n_ent + 1 >= g_cap_ent) {
            int cap = g_cap_ent ? g_cap_ent * 2 : 256;
            if (cap > SLOT_MASK) return kw_fail(KW_E_NOMEM, "too many live handles");
            struct kw_entry * e = (struct kw_entry *) realloc(g_ent, (size_t) cap * sizeof *e);
            if (!e) return kw_fail(KW_E_NOMEM, "out of memory for handles");
            memset(e + g_cap_ent, 0, (size_t) (cap - g_cap_ent) * sizeof *e);
            g_ent = e;
            g_cap_ent = cap;
        }
        slot = ++g_n_ent;
    }
    struct kw_entry * e = &g_ent[slot];
    const int gen = e->gen;
    memset(e, 0, sizeof *e);
    e->gen = gen % GEN_MAX + 1;
    e->kind = kind;
    e->user = 1;
    e->refs = 1;
    g_live++;
    return slot;
}

int kw_handle_of(int slot) { return (g_ent[slot].gen << SLOT_BITS) | slot; }

static const char * kind_name(int kind) {
    switch (kind) {
        case KW_KIND_TENSOR:    return "tensor";
        case KW_KIND_MODEL:     return "model";
        case KW_KIND_LLM:       return "generator";
        case KW_KIND_TRAINER:   return "training session";
        case KW_KIND_DATASET:   return "dataset";
        case KW_KIND_OPTIMIZER: return "optimizer";
        case KW_KIND_FINETUNE: return "finetune";
        default:                return "handle";
    }
}

/* slot of a live handle of the given kind, or a KW_E_HANDLE failure */
int kw_slot(int h, int kind, const char * fn) {
    const int slot = h & SLOT_MASK;
    const int gen = (h >> SLOT_BITS) & 0x7ff;
    if (h <= 0 || slot < 1 || slot > g_n_ent || g_ent[slot].gen != gen || !g_ent[slot].user) {
        return kw_fail(KW_E_HANDLE, "%s: %d is not a live handle (freed, or never created)", fn, h);
    }
    if (g_ent[slot].kind != kind) {
        return kw_fail(KW_E_HANDLE, "%s: handle %d is a %s, not a %s", fn, h, kind_name(g_ent[slot].kind), kind_name(kind));
    }
    return slot;
}

void kw_model_release(struct kw_entry * e); /* kiln_wasm_model.c */
void kw_param_release(struct kw_entry * e); /* kiln_wasm_autograd.c */

static void entry_unref(int slot) {
    /* iterative: chains of ops can be long */
    int stack_small[64];
    int * stack = stack_small;
    int cap = 64, n = 0;
    stack[n++] = slot;
    while (n > 0) {
        struct kw_entry * e = &g_ent[stack[--n]];
        const int s = (int) (e - g_ent);
        if (--e->refs > 0) continue;
        if (e->kind == KW_KIND_MODEL) kw_model_release(e);
        if (e->release) e->release(e->payload);
        if (e->grad) kw_param_release(e);
        if (e->ctx) kiln_free(e->ctx);
        free(e->buf);
        for (int i = 0; i < e->n_deps; i++) {
            if (n == cap) {
                int * ns = (int *) malloc((size_t) cap * 2 * sizeof *ns);
                if (!ns) break; /* leak rather than crash */
                memcpy(ns, stack, (size_t) n * sizeof *ns);
                if (stack != stack_small) free(stack);
                stack = ns;
                cap *= 2;
            }
            stack[n++] = e->deps[i];
        }
        const int gen = e->gen;
        memset(e, 0, sizeof *e);
        e->gen = gen;
        e->next_free = g_free_head;
        g_free_head = s;
        g_live--;
    }
    if (stack != stack_small) free(stack);
}

void kw_entry_discard(int slot) { entry_unref(slot); }

void kw_entry_add_dep(int slot, int dep) {
    struct kw_entry * e = &g_ent[slot];
    if (e->n_deps < KW_MAX_DEPS) {
        e->deps[e->n_deps++] = dep;
        g_ent[dep].refs++;
    }
}

static int free_kind(int h, int kind, const char * fn) {
    const int slot = kw_slot(h, kind, fn);
    if (slot < 0) return slot;
    g_ent[slot].user = 0;
    entry_unref(slot);
    return KW_OK;
}

int kw_object_new(int kind, void * payload, void (*release)(void * payload)) {
    const int slot = kw_entry_new(kind);
    if (slot < 0) {
        release(payload);
        return slot;
    }
    g_ent[slot].payload = payload;
    g_ent[slot].release = release;
    return kw_handle_of(slot);
}

void * kw_object(int h, int kind, const char * fn) {
    const int slot = kw_slot(h, kind, fn);
    return slot < 0 ? NULL : g_ent[slot].payload;
}

int kw_object_free(int h, int kind, const char * fn) { return free_kind(h, kind, fn); }

KW_EXPORT int kw_tensor_free(int h) { return free_kind(h, KW_KIND_TENSOR, "tensor_free"); }
KW_EXPORT int kw_model_free(int h) { return free_kind(h, KW_KIND_MODEL, "model_free"); }
KW_EXPORT int kw_llm_free(int h) { return free_kind(h, KW_KIND_LLM, "llm_free"); }
KW_EXPORT int kw_live_handles(void) { return g_live; }

/* ------------------------------------------------------------ tensors */

struct kiln_tensor * kw_tensor(int h, const char * fn) {
    const int slot = kw_slot(h, KW_KIND_TENSOR, fn);
    return slot < 0 ? NULL : g_ent[slot].t;
}

/* Gives every tensor of ctx without data memory (one block, owned by the
 * entry) and points views at their sources. */
int kw_alloc_ctx(struct kw_entry * e) {
    size_t total = 0;
    for (struct kiln_tensor * t = kiln_get_first_tensor(e->ctx); t; t = kiln_get_next_tensor(e->ctx, t)) {
        if (!t->data && !t->view_src) {
            const size_t nb = kiln_nbytes(t);
            if (nb > SIZE_MAX - total - 64) return kw_fail(KW_E_NOMEM, "tensor of %zu bytes does not fit in wasm32 memory", nb);
            total += (nb + 63) & ~(size_t) 63;
        }
    }
    if (total > 0) {
        void * buf = NULL;
        if (posix_memalign(&buf, 64, total) != 0 || !buf) {
            return kw_fail(KW_E_NOMEM, "out of memory allocating %zu bytes for a tensor (wasm heap now %.0f bytes, at most %.0f)",
                           total, kw_mem_total(), kw_mem_max());
        }
        e->buf = buf;
        size_t off = 0;
        for (struct kiln_tensor * t = kiln_get_first_tensor(e->ctx); t; t = kiln_get_next_tensor(e->ctx, t)) {
            if (!t->data && !t->view_src) {
                t->data = (char *) buf + off;
                off += (kiln_nbytes(t) + 63) & ~(size_t) 63;
            }
        }
    }
    for (struct kiln_tensor * t = kiln_get_first_tensor(e->ctx); t; t = kiln_get_next_tensor(e->ctx, t)) {
        if (!t->data && t->view_src && t->view_src->data) t->data = (char *) t->view_src->data + t->view_offs;
    }
    return KW_OK;
}

struct kiln_context * kw_new_ctx(size_t n_tensors, size_t extra) {
    struct kiln_init_params p = { n_tensors * kiln_tensor_overhead() + extra, NULL, true };
    return kiln_init(p);
}

static int64_t dim_arg(double v, bool * ok) {
    if (!(v >= 1) || v > 9007199254740991.0 || v != (double) (int64_t) v) { *ok = false; return 0; }
    return (int64_t) v;
}

static int tensor_shape(int type, int n_dims, double ne0, double ne1, double ne2, double ne3, int64_t ne[4]);

/* Bytes a tensor of this type and shape needs, or a KW_E_* code: lets JS
 * check the data it holds before anything is allocated. */
KW_EXPORT double kw_tensor_bytes_for(int type, int n_dims, double ne0, double ne1, double ne2, double ne3) {
    int64_t ne[4];
    const int rc = tensor_shape(type, n_dims, ne0, ne1, ne2, ne3, ne);
    if (rc < 0) return rc;
    return (double) kiln_row_size((enum kiln_type) type, ne[0]) * (double) ne[1] * (double) ne[2] * (double) ne[3];
}

static int tensor_shape(int type, int n_dims, double ne0, double ne1, double ne2, double ne3, int64_t ne[4]) {
    if (!kiln_type_is_valid(type)) return kw_fail(KW_E_INVALID, "tensor: %d is not a tensor type", type);
    if (n_dims < 1 || n_dims > 4) return kw_fail(KW_E_INVALID, "tensor: %d dimensions (1..4)", n_dims);
    bool ok = true;
    const double d[4] = { ne0, ne1, ne2, ne3 };
    ne[0] = ne[1] = ne[2] = ne[3] = 1;
    for (int i = 0; i < n_dims; i++) ne[i] = dim_arg(d[i], &ok);
    if (!ok) return kw_fail(KW_E_INVALID, "tensor: shape [%g, %g, %g, %g] has a dimension that is not a positive integer",
                            ne0, n_dims > 1 ? ne1 : 1, n_dims > 2 ? ne2 : 1, n_dims > 3 ? ne3 : 1);
    double n = 1;
    for (int i = 0; i < 4; i++) n *= (double) ne[i];
    if (n > 1099511627776.0) return kw_fail(KW_E_NOMEM, "tensor: %.0f elements do not fit in wasm32 memory (4 GB)", n);
    if (ne[0] % kiln_blck_size((enum kiln_type) type) != 0) {
        return kw_fail(KW_E_INVALID, "tensor: ne0 = %lld is not a multiple of %s's block size %lld",
                       (long long) ne[0], kiln_type_name((enum kiln_type) type), (long long) kiln_blck_size((enum kiln_type) type));
    }
    const double bytes = (double) kiln_row_size((enum kiln_type) type, ne[0]) * (double) ne[1] * (double) ne[2] * (double) ne[3];
    if (bytes > 4294967295.0) return kw_fail(KW_E_NOMEM, "tensor: %.0f bytes do not fit in wasm32 memory (4 GB)", bytes);
    return KW_OK;
}

/* A new tensor with its own memory; JS copies the data in at kw_tensor_data. */
KW_EXPORT int kw_tensor_new(int type, int n_dims, double ne0, double ne1, double ne2, double ne3) {
    int64_t ne[4];
    const int rc0 = tensor_shape(type, n_dims, ne0, ne1, ne2, ne3, ne);
    if (rc0 < 0) return rc0;
    const int slot = kw_entry_new(KW_KIND_TENSOR);
    if (slot < 0) return slot;
    struct kw_entry * e = kw_entry_slot(slot);
    e->ctx = kw_new_ctx(2, 0);
    if (!e->ctx) { kw_entry_discard(slot); return kw_fail_kiln(KW_E_NOMEM, "tensor"); }
    e->t = kiln_new_tensor(e->ctx, (enum kiln_type) type, n_dims, ne);
    if (!e->t) { kw_entry_discard(slot); return kw_fail_kiln(KW_E_INVALID, "tensor"); }
    const int rc = kw_alloc_ctx(e);
    if (rc < 0) { kw_entry_discard(slot); return rc; }
    return kw_handle_of(slot);
}

KW_EXPORT void * kw_tensor_data(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_data");
    return t ? t->data : NULL;
}
KW_EXPORT double kw_tensor_nbytes(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_nbytes");
    return t ? (double) kiln_nbytes(t) : KW_E_HANDLE;
}
KW_EXPORT int kw_tensor_type(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_type");
    return t ? (int) t->type : KW_E_HANDLE;
}
KW_EXPORT double kw_tensor_ne(int h, int i) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_ne");
    if (!t) return KW_E_HANDLE;
    if (i < 0 || i > 3) return kw_fail(KW_E_INVALID, "tensor_ne: dimension %d", i);
    return (double) t->ne[i];
}
KW_EXPORT int kw_tensor_n_dims(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_n_dims");
    return t ? kiln_n_dims(t) : KW_E_HANDLE;
}
KW_EXPORT int kw_tensor_is_contiguous(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_is_contiguous");
    return t ? (int) kiln_is_contiguous(t) : KW_E_HANDLE;
}
KW_EXPORT const char * kw_tensor_name(int h) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_name");
    return t ? t->name : "";
}

/* Copies the tensor in logical order (i0 fastest) into dst (size bytes,
 * exactly nelements * element size). Any strides for non-block types;
 * block (quantized) types must have contiguous rows. */
KW_EXPORT int kw_tensor_read(int h, void * dst, double size) {
    struct kiln_tensor * t = kw_tensor(h, "tensor_read");
    if (!t) return KW_E_HANDLE;
    if (!t->data) return kw_fail(KW_E_FAILED, "tensor_read: tensor has no data");
    const size_t ts = kiln_type_size(t->type);
    const int64_t bs = kiln_blck_size(t->type);
    const size_t row = kiln_row_size(t->type, t->ne[0]);
    const size_t want = row * (size_t) (t->ne[1] * t->ne[2] * t->ne[3]);
    if ((double) want != size) return kw_fail(KW_E_INVALID, "tensor_read: destination has %.0f bytes, the tensor %zu", size, want);
    char * out = (char *) dst;
    const bool rows_contig = t->nb[0] == ts;
    if (bs != 1 && !rows_contig) return kw_fail(KW_E_UNSUPPORTED, "tensor_read: %s tensor with non-contiguous rows", kiln_type_name(t->type));
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
        const char * src = (const char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
        if (rows_contig) {
            memcpy(out, src, row);
            out += row;
        } else {
            for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
                memcpy(out, src + i0 * t->nb[0], ts);
                out += ts;
            }
        }
    }
    return KW_OK;
}

/* ------------------------------------------------------------ compute */

static volatile int g_abort_word = 0; /* JS stores a job id here to cancel it */
static int g_job = 0;

KW_EXPORT volatile int * kw_abort_flag(void) { return &g_abort_word; }

#ifdef __EMSCRIPTEN__
/* st builds: memory is not shared, so the flag lives in a separate
 * SharedArrayBuffer the worker can read while it is busy (when one exists).
 * Defined in library.js (a JS library, not EM_JS: the relaxed-SIMD builds
 * link without wasm-emscripten-finalize, which EM_JS needs under clang 16). */
extern int kw_js_abort_word(void);
#else
static int kw_js_abort_word(void) { return 0; }
#endif

static bool abort_cb(void * data) {
    (void) data;
    if (g_job == 0) return false;
    return __atomic_load_n(&g_abort_word, __ATOMIC_SEQ_CST) == g_job || kw_js_abort_word() == g_job;
}

bool kw_job_aborted(void * job_id) {
    const int j = (int) (intptr_t) job_id;
    return j != 0 && (__atomic_load_n(&g_abort_word, __ATOMIC_SEQ_CST) == j || kw_js_abort_word() == j);
}

/* Plans and runs a built graph on the engine's pool; job_id is what the
 * abort word is compared with. Shared with the autograd ABI. */
int kw_run_graph(struct kiln_cgraph * g, int job_id, const char * what) {
    if (!g_tp && kw_init(1) < 0) return KW_E_NOMEM;
    struct kiln_cplan plan = kiln_graph_plan(g, g_n_threads, g_tp);
    void * work = NULL;
    if (plan.work_size > 0) {
        if (posix_memalign(&work, 64, plan.work_size) != 0 || !work) {
            return kw_fail(KW_E_NOMEM, "%s: out of memory for a %zu byte work buffer", what, plan.work_size);
        }
        plan.work_data = (uint8_t *) work;
    }
    g_job = job_id;
    plan.abort_callback = abort_cb;
    plan.abort_callback_data = NULL;
    kiln_clear_error();
    const enum kiln_status st = kiln_graph_compute(g, &plan);
    g_job = 0;
    free(work);
    return kw_fail_status(st, what);
}

KW_EXPORT int kw_compute(int h, int job_id) {
    struct kiln_tensor * t = kw_tensor(h, "compute");
    if (!t) return KW_E_HANDLE;
    if (!g_tp && kw_init(1) < 0) return KW_E_NOMEM;
    for (size_t size = 1024;; size *= 4) {
        struct kiln_init_params p = { kiln_graph_overhead_custom(size, false) + 1024, NULL, true };
        struct kiln_context * gctx = kiln_init(p);
        if (!gctx) return kw_fail_kiln(KW_E_NOMEM, "compute");
        struct kiln_cgraph * g = kiln_new_graph_custom(gctx, size, false);
        if (!g) { kiln_free(gctx); return kw_fail_kiln(KW_E_NOMEM, "compute"); }
        if (kiln_build_forward_expand(g, t) != KILN_STATUS_SUCCESS) {
            kiln_free(gctx);
            if (size < (1u << 20)) continue; /* graph full: retry bigger */
            return kw_fail_kiln(KW_E_NOMEM, "compute: graph");
        }
        const int rc = kw_run_graph(g, job_id, "compute");
        kiln_free(gctx);
        return rc;
    }
}

/* number of nodes kw_compute would run for h (for progress/tests) */
KW_EXPORT int kw_graph_nodes(int h) {
    struct kiln_tensor * t = kw_tensor(h, "graph_nodes");
    if (!t) return KW_E_HANDLE;
    for (size_t size = 1024; size <= (1u << 20); size *= 4) {
        struct kiln_init_params p = { kiln_graph_overhead_custom(size, false) + 1024, NULL, true };
        struct kiln_context * gctx = kiln_init(p);
        if (!gctx) return kw_fail_kiln(KW_E_NOMEM, "graph_nodes");
        struct kiln_cgraph * g = kiln_new_graph_custom(gctx, size, false);
        if (g && kiln_build_forward_expand(g, t) == KILN_STATUS_SUCCESS) {
            const int n = kiln_graph_n_nodes(g);
            kiln_free(gctx);
            return n;
        }
        kiln_free(gctx);
    }
    return kw_fail(KW_E_NOMEM, "graph_nodes: graph too large");
}
