/*
 * internal.h — what the library's own files share and users don't see:
 * the context layout, the error helpers, op-param accessors, and the
 * contract between the executor and the forward kernels.
 */
#ifndef KILN_INTERNAL_H
#define KILN_INTERNAL_H

#include "kiln.h"

#include <stdarg.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_PAD(x, n) (((x) + (n) - 1) & ~((n) - 1))
#define KILN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KILN_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KILN_UNUSED(x) (void)(x)

/* Debug-only invariant check. Never use for input from outside the library:
 * those return an error instead. */
#ifdef NDEBUG
#define KILN_ASSERT(x) ((void)0)
#else
#include <assert.h>
#define KILN_ASSERT(x) assert(x)
#endif

/* wasm built without -pthread (kiln-st): no threads at all */
#if defined(__EMSCRIPTEN__) && !defined(__EMSCRIPTEN_PTHREADS__)
#define KILN_NO_THREADS 1
#endif

#define KILN_CACHE_LINE 64

/* ---- errors: thread-local last error */

/* Records a formatted message as the last error (and logs it at DEBUG). */
void   kiln_set_error(const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* kiln_set_error, then return NULL — for constructors: return KILN_FAIL("…"); */
#define KILN_FAIL(...) (kiln_set_error(__VA_ARGS__), (struct kiln_tensor *) NULL)

void kiln_log_internal(enum kiln_log_level level, const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
#define KILN_LOG_DEBUG(...) kiln_log_internal(KILN_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define KILN_LOG_INFO(...)  kiln_log_internal(KILN_LOG_LEVEL_INFO,  __VA_ARGS__)
#define KILN_LOG_WARN(...)  kiln_log_internal(KILN_LOG_LEVEL_WARN,  __VA_ARGS__)
#define KILN_LOG_ERROR(...) kiln_log_internal(KILN_LOG_LEVEL_ERROR, __VA_ARGS__)

/* "[4, 3, 1, 1] f32" — for error messages; buf of at least 96 bytes */
const char * kiln_shape_str(const struct kiln_tensor * t, char * buf, size_t size);

/* ---- context */

struct kiln_object {
    size_t offs;
    size_t size;
    struct kiln_object * next;
    int type; /* KILN_OBJECT_* */
};
enum { KILN_OBJECT_TENSOR, KILN_OBJECT_GRAPH, KILN_OBJECT_BUFFER };

struct kiln_context {
    size_t mem_size;
    void * mem_buffer;
    bool   mem_buffer_owned;
    bool   no_alloc;
    int    n_objects;
    struct kiln_object * objects_begin;
    struct kiln_object * objects_end;
};

/* Allocates an object of `size` bytes in the arena; NULL + error when full. */
struct kiln_object * kiln_new_object(struct kiln_context * ctx, int type, size_t size);

/* The one tensor constructor everything goes through. view_src != NULL makes
 * a view of view_src's data at view_offs (checked to lie inside it). */
struct kiln_tensor * kiln_new_tensor_impl(
        struct kiln_context * ctx,
        enum kiln_type        type,
        int                   n_dims,
        const int64_t       * ne,
        struct kiln_tensor  * view_src,
        size_t                view_offs);

/* ---- argument checks shared by the constructors (each sets an error) */

bool kiln_check_tensor(const struct kiln_tensor * t, const char * op, const char * arg);
bool kiln_check_type(const struct kiln_tensor * t, enum kiln_type type, const char * op, const char * arg);
bool kiln_check_same_shape(const struct kiln_tensor * a, const struct kiln_tensor * b, const char * op);
bool kiln_check_can_repeat(const struct kiln_tensor * b, const struct kiln_tensor * a, const char * op);

/* ---- op params */

static inline void kiln_set_op_params(struct kiln_tensor * t, const void * params, size_t size) {
    KILN_ASSERT(size <= KILN_MAX_OP_PARAMS);
    memcpy(t->op_params, params, size);
}
static inline int32_t kiln_get_op_params_i32(const struct kiln_tensor * t, int i) {
    return t->op_params[i];
}
static inline float kiln_get_op_params_f32(const struct kiln_tensor * t, int i) {
    float v; memcpy(&v, &t->op_params[i], sizeof(v)); return v;
}
static inline void kiln_set_op_params_i32(struct kiln_tensor * t, int i, int32_t v) {
    t->op_params[i] = v;
}
static inline void kiln_set_op_params_f32(struct kiln_tensor * t, int i, float v) {
    memcpy(&t->op_params[i], &v, sizeof(v));
}

/* ---- element addressing */

static inline void * kiln_elem_ptr(const struct kiln_tensor * t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    return (char *) t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

/* ---- executor <-> kernel contract
 *
 * Every node is run by all threads of the pool (or thread 0 only, for
 * KILN_TASKS_ONE ops). A kernel splits its own work by (ith, nth), may use
 * `wdata` (the plan's work buffer, `wsize` bytes, shared by all threads), may
 * call kiln_barrier() to wait for the other threads of this node, and hands
 * out work dynamically with kiln_chunk_next(). */
struct kiln_compute_params {
    int    ith;
    int    nth;
    size_t wsize;
    void * wdata;
    struct kiln_threadpool * tp;
    /* which of the pool's two chunk counters this node uses: they
     * alternate between the executor's barrier-separated steps, and the
     * executor zeroes the next step's counter before its barrier, so a
     * node on several threads starts with a counter at 0 (see
     * kiln_chunk_fresh) */
    int chunk_slot;
};

/* Runs one graph on the pool with n_active threads; the caller is thread 0
 * (src/cpu/threadpool.c, called by the executor). */
enum kiln_status kiln_threadpool_run(struct kiln_threadpool * tp, struct kiln_cgraph * g, struct kiln_cplan * cplan, int n_active);

/* All nth threads of this compute meet here. */
void kiln_barrier(const struct kiln_compute_params * params);
/* Shared atomic chunk counter: kiln_chunk_reset() by one thread, then a
 * barrier, then each thread loops `while ((c = kiln_chunk_next(p)) < n)`. */
void kiln_chunk_reset(const struct kiln_compute_params * params, int value);
int  kiln_chunk_next (const struct kiln_compute_params * params);
/* true where the node runs on several threads of a pool as one executor
 * step: its counter is already 0 on entry, and a node that needs no other
 * shared preparation can take chunks without the reset and barrier */
static inline bool kiln_chunk_fresh(const struct kiln_compute_params * params) { return params->tp && params->nth > 1; }

/* rows [*ir0, *ir1) of nr for thread ith of nth */
static inline void kiln_split_rows(int64_t nr, int ith, int nth, int64_t * ir0, int64_t * ir1) {
    const int64_t dr = (nr + nth - 1) / nth;
    *ir0 = KILN_MIN(nr, dr * ith);
    *ir1 = KILN_MIN(nr, *ir0 + dr);
}

/* Whether flash_attn_ext node dst takes ggml's split-KV decode path (one
 * query row, F32 or F16 K = V type, >= 512 cached positions), whose result
 * depends on the thread count: the executor then never runs it solo. */
bool kiln_flash_attn_split_kv(const struct kiln_tensor * dst);

/* Forward kernels and work-size functions, declared from the op table.
 * A forward kernel returns a status: anything but SUCCESS aborts the graph
 * (an unsupported type combination reaching compute, for instance). */
#define KILN_OP_DECL_(UPPER, lower, sym, n_src, tasks, work, grad) \
    enum kiln_status kiln_cpu_fwd_##lower(const struct kiln_compute_params * params, struct kiln_tensor * dst);
KILN_OP_LIST(KILN_OP_DECL_)
#undef KILN_OP_DECL_

size_t kiln_cpu_work_mul_mat(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_mul_mat_id(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_out_prod(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_mul_mat_id_back(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_out_prod_id(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_soft_max(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_rope(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_rope_back(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_conv_transpose_1d(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_conv_transpose_2d(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_flash_attn_ext(const struct kiln_tensor * dst, int n_threads);
size_t kiln_cpu_work_cross_entropy_loss(const struct kiln_tensor * dst, int n_threads);

/* ---- conversions every op family uses (src/cpu/convert.c) */

/* Converts n elements of a row of `type` (contiguous) to f32. Works for every
 * type with a to_float (all float/int types and quantized types with traits). */
bool kiln_row_to_f32(enum kiln_type type, const void * src, float * dst, int64_t n);
/* Converts n f32 values into a contiguous row of `type` (float/int types, and
 * quantized types with a from_float). */
bool kiln_row_from_f32(enum kiln_type type, const float * src, void * dst, int64_t n);
/* Single element read/write as double, for float and integer types. */
double kiln_elem_get_f64(enum kiln_type type, const void * p);
void   kiln_elem_set_f64(enum kiln_type type, void * p, double v);

#ifdef __cplusplus
}
#endif

#endif /* KILN_INTERNAL_H */
