/*
 * kiln_wasm_internal.h — shared between the wasm ABI files.
 */
#ifndef KILN_WASM_INTERNAL_H
#define KILN_WASM_INTERNAL_H

#include "kiln.h"
#include "kiln-gguf.h"
#include "kiln_wasm.h"

#include <stdbool.h>
#include <stddef.h>

#ifdef __EMSCRIPTEN__
#include <emscripten/emscripten.h>
#define KW_EXPORT EMSCRIPTEN_KEEPALIVE
#else
#define KW_EXPORT
#endif

#if defined(__EMSCRIPTEN_PTHREADS__)
#define KW_THREADS 1
#else
#define KW_THREADS 0
#endif

/* what a handle stands for; the entry table below is the one handle scheme
 * (slot + generation counter: a stale handle is refused for every kind) */
enum { KW_KIND_TENSOR = 1, KW_KIND_MODEL = 2, KW_KIND_LLM = 3, KW_KIND_TRAINER = 4, KW_KIND_DATASET = 5, KW_KIND_OPTIMIZER = 6,
       KW_KIND_FINETUNE = 7, KW_KIND_WHISPER = 8 };
#define KW_MAX_DEPS (KILN_MAX_SRC + 2)

struct kw_entry {
    int kind;
    int gen;
    int user;       /* 1 while the caller holds the handle */
    int refs;       /* user + entries depending on this one */
    int next_free;
    struct kiln_context * ctx; /* tensors of this entry (metadata) */
    void * buf;                /* their data */
    struct kiln_tensor * t;    /* the tensor a tensor handle stands for */
    int deps[KW_MAX_DEPS];     /* slots kept alive by this one */
    int n_deps;
    /* models */
    void *  mbuf;   /* the file bytes, written by JS */
    double  msize;
    double  mloaded;
    struct kiln_gguf_context * gguf;
    struct kiln_context * mctx;
    int     n_tensors;
    int     n_kv;
    int     version;
    int     views;  /* model tensor handles ever handed out: then generators do not
                       rearrange the weights in place (kiln_repack_tensor) */
    /* tensors with requiresGrad (kiln_wasm_autograd.c): the gradient
     * accumulated by backward passes, in memory of its own */
    struct kiln_context * gctx;
    void *  gbuf;
    struct kiln_tensor * grad;
    int     has_grad; /* a backward pass has reached this tensor */
    /* kinds with an object of their own (generators): released with the entry */
    void *  payload;
    void  (*release)(void * payload);
};

int  kw_fail(int code, const char * fmt, ...);
int  kw_fail_kiln(int code, const char * what);
int  kw_fail_status(enum kiln_status st, const char * what);
int  kw_entry_new(int kind);
void kw_entry_discard(int slot);
void kw_entry_add_dep(int slot, int dep);
struct kw_entry * kw_entry_slot(int slot);
int  kw_handle_of(int slot);
int  kw_slot(int h, int kind, const char * fn);
struct kiln_tensor * kw_tensor(int h, const char * fn);
int  kw_alloc_ctx(struct kw_entry * e);
/* a handle for an object of its own (kinds other than tensors and models):
 * release(payload) runs when the handle is freed; on failure it runs now */
int  kw_object_new(int kind, void * payload, void (*release)(void * payload));
/* the payload of a live handle of this kind, or NULL and a KW_E_HANDLE failure */
void * kw_object(int h, int kind, const char * fn);
int  kw_object_free(int h, int kind, const char * fn);
struct kiln_context * kw_new_ctx(size_t n_tensors, size_t extra);
int  kw_run_graph(struct kiln_cgraph * g, int job_id, const char * what);
/* a kiln_abort_callback for graphs planned elsewhere (whisper): data is the job id, cast to a pointer */
bool kw_job_aborted(void * job_id);
/* the engine's thread pool (kw_init) and the model behind a live VAD handle (kiln_wasm_audio.c) */
struct kiln_threadpool * kw_threadpool(void);
struct kiln_vad * kw_vad_model(int h);

#endif
