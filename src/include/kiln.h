/*
 * kiln.h — the public C API of Kiln, a tensor engine for machine learning.
 *
 * The API mirrors ggml's public API (ggml.h + ggml-cpu.h, late 2024) name for
 * name with the prefix kiln_ / KILN_: a ggml program ports by changing the
 * prefix. enum kiln_type uses the GGUF type ids.
 *
 * Deviations from ggml, on purpose:
 *  - Nothing aborts on input from outside. A constructor given incompatible
 *    shapes or types returns NULL and records a message readable with
 *    kiln_last_error() (thread-local). Compute returns a kiln_status.
 *    Running out of context memory also returns NULL (ggml aborts).
 *  - Ops are declared once, in kiln-ops.h (an X-macro table).
 *  - kiln_graph_compute_with_ctx() reuses a persistent process-wide thread
 *    pool (workers spin briefly, then sleep), instead of spawning threads per
 *    call; kiln_threadpool_new() gives a private pool.
 *  - struct kiln_cgraph is opaque; use kiln_graph_n_nodes()/kiln_graph_node().
 *  - kiln_cplan carries an abort flag pointer (int, checked between nodes) in
 *    addition to ggml's abort callback, so another thread — or JavaScript
 *    through shared memory — can cancel a running graph.
 *  - The graph allocator (ggml-alloc's gallocr) is part of this header:
 *    kiln_gallocr_*.
 */
#ifndef KILN_H
#define KILN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln-ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0
#define KILN_VERSION_STRING "0.1.0"

#define KILN_API

#define KILN_MAX_DIMS        4
#define KILN_MAX_PARAMS      2048
#define KILN_MAX_SRC         10
#define KILN_MAX_N_THREADS   512
#define KILN_MAX_OP_PARAMS   64
#define KILN_MAX_NAME        64
#define KILN_DEFAULT_N_THREADS 4
#define KILN_DEFAULT_GRAPH_SIZE 2048
#define KILN_MEM_ALIGN       16
#define KILN_ROPE_TYPE_NEOX  2
#define KILN_ROPE_TYPE_MROPE 8
#define KILN_ROPE_TYPE_VISION 24
#define KILN_KQ_MASK_PAD     32

/* ---------------------------------------------------------------- status */

enum kiln_status {
    KILN_STATUS_ALLOC_FAILED = -2,
    KILN_STATUS_FAILED       = -1,
    KILN_STATUS_SUCCESS      =  0,
    KILN_STATUS_ABORTED      =  1,
    KILN_STATUS_INVALID_ARG  =  2, /* not in ggml: bad input from the caller */
    KILN_STATUS_UNSUPPORTED  =  3, /* not in ggml: op/type combination not implemented */
};

KILN_API const char * kiln_status_to_string(enum kiln_status status);

/* The message of the last error on this thread ("" when none). Constructors
 * that return NULL, and computes that return a non-success status, set it. */
KILN_API const char * kiln_last_error(void);
KILN_API void         kiln_clear_error(void);
/* For libraries built on Kiln (model runners, tools): record a message as
 * this thread's last error, the way the engine's own functions do. */
KILN_API void         kiln_set_last_error(const char * fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* ----------------------------------------------------------------- types */

typedef uint16_t kiln_fp16_t;
typedef struct { uint16_t bits; } kiln_bf16_t;

KILN_API float       kiln_fp16_to_fp32(kiln_fp16_t x);
KILN_API kiln_fp16_t kiln_fp32_to_fp16(float x);
KILN_API void        kiln_fp16_to_fp32_row(const kiln_fp16_t * x, float * y, int64_t n);
KILN_API void        kiln_fp32_to_fp16_row(const float * x, kiln_fp16_t * y, int64_t n);
KILN_API float       kiln_bf16_to_fp32(kiln_bf16_t x);
KILN_API kiln_bf16_t kiln_fp32_to_bf16(float x);
KILN_API void        kiln_bf16_to_fp32_row(const kiln_bf16_t * x, float * y, int64_t n);
KILN_API void        kiln_fp32_to_bf16_row(const float * x, kiln_bf16_t * y, int64_t n);
KILN_API void        kiln_fp32_to_bf16_row_ref(const float * x, kiln_bf16_t * y, int64_t n);

/* Numeric values are the GGUF tensor type ids: keep them. */
enum kiln_type {
    KILN_TYPE_F32     = 0,
    KILN_TYPE_F16     = 1,
    KILN_TYPE_Q4_0    = 2,
    KILN_TYPE_Q4_1    = 3,
    /* 4, 5: removed Q4_2, Q4_3 */
    KILN_TYPE_Q5_0    = 6,
    KILN_TYPE_Q5_1    = 7,
    KILN_TYPE_Q8_0    = 8,
    KILN_TYPE_Q8_1    = 9,
    KILN_TYPE_Q2_K    = 10,
    KILN_TYPE_Q3_K    = 11,
    KILN_TYPE_Q4_K    = 12,
    KILN_TYPE_Q5_K    = 13,
    KILN_TYPE_Q6_K    = 14,
    KILN_TYPE_Q8_K    = 15,
    KILN_TYPE_IQ2_XXS = 16,
    KILN_TYPE_IQ2_XS  = 17,
    KILN_TYPE_IQ3_XXS = 18,
    KILN_TYPE_IQ1_S   = 19,
    KILN_TYPE_IQ4_NL  = 20,
    KILN_TYPE_IQ3_S   = 21,
    KILN_TYPE_IQ2_S   = 22,
    KILN_TYPE_IQ4_XS  = 23,
    KILN_TYPE_I8      = 24,
    KILN_TYPE_I16     = 25,
    KILN_TYPE_I32     = 26,
    KILN_TYPE_I64     = 27,
    KILN_TYPE_F64     = 28,
    KILN_TYPE_IQ1_M   = 29,
    KILN_TYPE_BF16    = 30,
    /* 31..33: removed Q4_0_4_4, Q4_0_4_8, Q4_0_8_8 */
    KILN_TYPE_TQ1_0   = 34,
    KILN_TYPE_TQ2_0   = 35,
    /* 36..38: removed IQ4_NL_4_4, IQ4_NL_4_8, IQ4_NL_8_8 */
    KILN_TYPE_COUNT   = 39,
};

enum kiln_prec {
    KILN_PREC_DEFAULT,
    KILN_PREC_F32,
};

/* How mul_mat sums f32 x f32 products over a batch (src1 with 2+ rows):
 * GGML (the default) in the order of llama.cpp's x86 build (tinyBLAS's tiles
 * or ggml_vec_dot_f32), so model graphs give llama.cpp's values; FAST in
 * Kiln's packed GEMM, about twice as fast in wasm (SIMD128), with results
 * that are still the same for any thread count. Other types ignore it. */
enum kiln_mm_order {
    KILN_MM_ORDER_GGML,
    KILN_MM_ORDER_FAST,
};

/* Row conversion used by type traits: n is a multiple of the block size. */
typedef void (*kiln_to_float_t)  (const void * x, float * y, int64_t n);
typedef void (*kiln_from_float_t)(const float * x, void * y, int64_t n);

struct kiln_type_traits {
    const char *      type_name;
    int64_t           blck_size;
    int64_t           blck_size_interleave;
    size_t            type_size;
    bool              is_quantized;
    kiln_to_float_t   to_float;
    kiln_from_float_t from_float_ref;
};

/* NULL for ids that are not types (removed ids, out of range). */
KILN_API const struct kiln_type_traits * kiln_get_type_traits(enum kiln_type type);
KILN_API bool         kiln_type_is_valid(int type);
KILN_API const char * kiln_type_name(enum kiln_type type);
KILN_API int64_t      kiln_blck_size(enum kiln_type type);
KILN_API size_t       kiln_type_size(enum kiln_type type);  /* bytes per block */
KILN_API size_t       kiln_row_size(enum kiln_type type, int64_t ne); /* bytes per row of ne elements */
KILN_API bool         kiln_is_quantized(enum kiln_type type);

/* ------------------------------------------------------------ quantize */

/* Quantize rows [start/n_per_row, +nrows) of src (n_per_row floats each) into
 * the same rows of dst, as ggml_quantize_chunk: the reference quantizers, or
 * the importance-weighted ones when imatrix (n_per_row weights) is given.
 * Returns the bytes written; 0 with kiln_last_error() on bad input (invalid
 * type, n_per_row not a multiple of the block, no quantizer for the type). */
KILN_API size_t kiln_quantize_chunk(enum kiln_type type, const float * src, void * dst, int64_t start,
                                    int64_t nrows, int64_t n_per_row, const float * imatrix);
KILN_API bool   kiln_quantize_requires_imatrix(enum kiln_type type);

/* ------------------------------------------------------------------- ops */

#define KILN_OP_ENUM_(UPPER, lower, sym, n_src, tasks, work, grad) KILN_OP_##UPPER,
enum kiln_op {
    KILN_OP_LIST(KILN_OP_ENUM_)
    KILN_OP_COUNT,
};
#undef KILN_OP_ENUM_

#define KILN_UNARY_ENUM_(UPPER, lower, name) KILN_UNARY_OP_##UPPER,
enum kiln_unary_op {
    KILN_UNARY_OP_LIST(KILN_UNARY_ENUM_)
    KILN_UNARY_OP_COUNT,
};
#undef KILN_UNARY_ENUM_

enum kiln_task_class {
    KILN_TASKS_NONE = 0, /* no compute */
    KILN_TASKS_ONE  = 1, /* thread 0 only */
    KILN_TASKS_ALL  = 2, /* all threads; the kernel splits by ith/nth */
};

enum kiln_op_pool {
    KILN_OP_POOL_MAX,
    KILN_OP_POOL_AVG,
    KILN_OP_POOL_COUNT,
};

enum kiln_sort_order {
    KILN_SORT_ORDER_ASC,
    KILN_SORT_ORDER_DESC,
};

enum kiln_tensor_flag {
    KILN_TENSOR_FLAG_INPUT  = 1,
    KILN_TENSOR_FLAG_OUTPUT = 2,
    KILN_TENSOR_FLAG_PARAM  = 4,
    KILN_TENSOR_FLAG_LOSS   = 8,
};

KILN_API const char * kiln_op_name  (enum kiln_op op);
KILN_API const char * kiln_op_symbol(enum kiln_op op);
KILN_API const char * kiln_unary_op_name(enum kiln_unary_op op);
KILN_API int          kiln_op_n_src(enum kiln_op op);
KILN_API enum kiln_task_class kiln_op_tasks(enum kiln_op op);
KILN_API bool         kiln_op_has_backward(enum kiln_op op);

/* ---------------------------------------------------------------- tensor */

struct kiln_tensor {
    enum kiln_type type;

    int64_t ne[KILN_MAX_DIMS]; /* number of elements per dimension */
    size_t  nb[KILN_MAX_DIMS]; /* stride in bytes: nb[0] = type_size,
                                  nb[1] = nb[0]*(ne[0]/blck_size) + padding,
                                  nb[i] = nb[i-1]*ne[i-1] */

    enum kiln_op op;
    int32_t op_params[KILN_MAX_OP_PARAMS / sizeof(int32_t)];
    int32_t flags;

    struct kiln_tensor * src[KILN_MAX_SRC];

    struct kiln_tensor * view_src;
    size_t               view_offs;

    void * data;
    char   name[KILN_MAX_NAME];
    void * extra; /* backend-specific data (repacked weights, …) */
};

struct kiln_context;
struct kiln_cgraph;
struct kiln_threadpool;

struct kiln_init_params {
    size_t mem_size;   /* bytes */
    void * mem_buffer; /* if NULL, memory is allocated internally */
    bool   no_alloc;   /* don't allocate tensor data */
};

/* NULL (with kiln_last_error) when the buffer cannot be allocated. */
KILN_API struct kiln_context * kiln_init(struct kiln_init_params params);
KILN_API void   kiln_reset(struct kiln_context * ctx);
KILN_API void   kiln_free (struct kiln_context * ctx);
KILN_API size_t kiln_used_mem(const struct kiln_context * ctx);
KILN_API size_t kiln_get_mem_size(const struct kiln_context * ctx);
KILN_API void * kiln_get_mem_buffer(const struct kiln_context * ctx);
KILN_API size_t kiln_get_max_tensor_size(const struct kiln_context * ctx);
KILN_API bool   kiln_get_no_alloc(struct kiln_context * ctx);
KILN_API void   kiln_set_no_alloc(struct kiln_context * ctx, bool no_alloc);
KILN_API size_t kiln_tensor_overhead(void);
KILN_API size_t kiln_graph_overhead(void);
KILN_API size_t kiln_graph_overhead_custom(size_t size, bool grads);

KILN_API struct kiln_tensor * kiln_new_tensor(
        struct kiln_context * ctx,
        enum   kiln_type      type,
        int                   n_dims,
        const int64_t       * ne);
KILN_API struct kiln_tensor * kiln_new_tensor_1d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0);
KILN_API struct kiln_tensor * kiln_new_tensor_2d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1);
KILN_API struct kiln_tensor * kiln_new_tensor_3d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1, int64_t ne2);
KILN_API struct kiln_tensor * kiln_new_tensor_4d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
KILN_API struct kiln_tensor * kiln_new_i32(struct kiln_context * ctx, int32_t value);
KILN_API struct kiln_tensor * kiln_new_f32(struct kiln_context * ctx, float value);
KILN_API void *               kiln_new_buffer(struct kiln_context * ctx, size_t nbytes);

KILN_API struct kiln_tensor * kiln_dup_tensor (struct kiln_context * ctx, const struct kiln_tensor * src);
KILN_API struct kiln_tensor * kiln_view_tensor(struct kiln_context * ctx, struct kiln_tensor * src);

KILN_API struct kiln_tensor * kiln_get_first_tensor(const struct kiln_context * ctx);
KILN_API struct kiln_tensor * kiln_get_next_tensor (const struct kiln_context * ctx, struct kiln_tensor * tensor);
KILN_API struct kiln_tensor * kiln_get_tensor(struct kiln_context * ctx, const char * name);

KILN_API int64_t kiln_nelements(const struct kiln_tensor * tensor);
KILN_API int64_t kiln_nrows    (const struct kiln_tensor * tensor);
KILN_API size_t  kiln_nbytes   (const struct kiln_tensor * tensor);
KILN_API size_t  kiln_nbytes_pad(const struct kiln_tensor * tensor);
KILN_API size_t  kiln_element_size(const struct kiln_tensor * tensor);
KILN_API int     kiln_n_dims   (const struct kiln_tensor * tensor); /* 1 minimum */
KILN_API bool    kiln_is_empty (const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_scalar(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_vector(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_matrix(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_3d    (const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_transposed(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_permuted  (const struct kiln_tensor * tensor);
/* Rewrite q4_0 / q8_0 / iq4_nl (4 rows), q4_K / q5_K (8 rows) or q6_K (8
 * rows natively, 4 in wasm builds) weights in place into an interleaved
 * layout (the rows' blocks side by side) that makes mul_mat mat-vec
 * faster. Where llama.cpp repacks a type (x86: q4_0, iq4_nl, q4_K; arm64
 * with dotprod: those, q8_0, q5_K and q6_K) the kernels sum in its
 * repacked kernels' order, so results match llama.cpp bit for bit there;
 * elsewhere (q8_0 on x86 and wasm, q6_K in wasm) they give the
 * unrepacked results exactly (src/cpu/repack.h). Afterwards the tensor is
 * valid ONLY as src0 of mul_mat (not for get_rows, copies, views, saving).
 * false + kiln_last_error() when the tensor cannot be repacked (other
 * types, views, fewer rows than one group);
 * true when repacked (or already). */
KILN_API bool    kiln_repack_tensor(struct kiln_tensor * tensor);
KILN_API bool    kiln_tensor_is_repacked(const struct kiln_tensor * tensor);
/* true when the CPU kernels in use have an interleaved mat-vec kernel for
 * type (repacking a type without one still works, through a slower
 * unpacking path) */
KILN_API bool    kiln_repack_has_kernel(enum kiln_type type);
/* true when the kernels in use would repack this weight matrix where
 * llama.cpp's CPU build on this CPU repacks it (its type and row count:
 * x86 Q4_0 / IQ4_NL / Q4_K with ne[1] % 8 == 0; arm64 with dotprod Q4_0 /
 * IQ4_NL / Q8_0 with ne[1] % 4 == 0 and Q4_K / Q5_K / Q6_K with % 8; Q8_0
 * on the rest and Q6_K (% 4) in wasm with relaxed SIMD, where their
 * interleaved kernels keep the plain order), so that the results stay
 * llama.cpp's */
KILN_API bool    kiln_repack_wanted(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguous(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguous_0(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguous_1(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguous_2(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguously_allocated(const struct kiln_tensor * tensor);
KILN_API bool    kiln_is_contiguous_rows(const struct kiln_tensor * tensor);
KILN_API bool    kiln_are_same_shape (const struct kiln_tensor * t0, const struct kiln_tensor * t1);
KILN_API bool    kiln_are_same_stride(const struct kiln_tensor * t0, const struct kiln_tensor * t1);
KILN_API bool    kiln_can_repeat     (const struct kiln_tensor * t0, const struct kiln_tensor * t1);
KILN_API bool    kiln_is_view        (const struct kiln_tensor * t);

KILN_API const char *         kiln_get_name(const struct kiln_tensor * tensor);
KILN_API struct kiln_tensor * kiln_set_name(struct kiln_tensor * tensor, const char * name);
KILN_API struct kiln_tensor * kiln_format_name(struct kiln_tensor * tensor, const char * fmt, ...);

KILN_API void kiln_set_input (struct kiln_tensor * tensor);
KILN_API void kiln_set_output(struct kiln_tensor * tensor);
KILN_API void kiln_set_param (struct kiln_context * ctx, struct kiln_tensor * tensor);
KILN_API void kiln_set_loss  (struct kiln_tensor * tensor);

/* Element access. Out-of-range indices return 0 / do nothing and set the
 * last error (ggml asserts). */
KILN_API struct kiln_tensor * kiln_set_zero(struct kiln_tensor * tensor);
KILN_API struct kiln_tensor * kiln_set_i32 (struct kiln_tensor * tensor, int32_t value);
KILN_API struct kiln_tensor * kiln_set_f32 (struct kiln_tensor * tensor, float value);
KILN_API int32_t kiln_get_i32_1d(const struct kiln_tensor * tensor, int i);
KILN_API void    kiln_set_i32_1d(const struct kiln_tensor * tensor, int i, int32_t value);
KILN_API int32_t kiln_get_i32_nd(const struct kiln_tensor * tensor, int i0, int i1, int i2, int i3);
KILN_API void    kiln_set_i32_nd(const struct kiln_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value);
KILN_API float   kiln_get_f32_1d(const struct kiln_tensor * tensor, int i);
KILN_API void    kiln_set_f32_1d(const struct kiln_tensor * tensor, int i, float value);
KILN_API float   kiln_get_f32_nd(const struct kiln_tensor * tensor, int i0, int i1, int i2, int i3);
KILN_API void    kiln_set_f32_nd(const struct kiln_tensor * tensor, int i0, int i1, int i2, int i3, float value);
KILN_API void *  kiln_get_data(const struct kiln_tensor * tensor);
KILN_API float * kiln_get_data_f32(const struct kiln_tensor * tensor);
KILN_API void    kiln_unravel_index(const struct kiln_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3);

KILN_API enum kiln_unary_op kiln_get_unary_op(const struct kiln_tensor * tensor);

/* ------------------------------------------------------- op constructors
 * Constructors only record op, src[] and op_params and compute the result's
 * shape; they compute nothing. On a type/shape mismatch they return NULL and
 * set kiln_last_error(). Shapes are ggml's: ne[0] is the innermost (row)
 * dimension. "b broadcasts to a" means b->ne[i] divides a->ne[i] for all i. */

KILN_API struct kiln_tensor * kiln_dup(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_dup_inplace(struct kiln_context * ctx, struct kiln_tensor * a);

/* a + b; b broadcasts to a; result has a's shape and type */
KILN_API struct kiln_tensor * kiln_add(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_add_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_add_cast(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, enum kiln_type type);
/* a + b where b is a scalar (1 element) */
KILN_API struct kiln_tensor * kiln_add1(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_add1_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* dst = a; view(dst, nb1, nb2, nb3, offset) += b */
KILN_API struct kiln_tensor * kiln_acc(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
KILN_API struct kiln_tensor * kiln_acc_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
KILN_API struct kiln_tensor * kiln_sub(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_sub_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_mul(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_mul_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_div(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_div_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);

KILN_API struct kiln_tensor * kiln_sqr (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sqr_inplace (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sqrt(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sqrt_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_log (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_log_inplace (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sin (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sin_inplace (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_cos (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_cos_inplace (struct kiln_context * ctx, struct kiln_tensor * a);

/* sum of all elements -> [1] */
KILN_API struct kiln_tensor * kiln_sum(struct kiln_context * ctx, struct kiln_tensor * a);
/* [ne0, ne1, ne2, ne3] -> [1, ne1, ne2, ne3] */
KILN_API struct kiln_tensor * kiln_sum_rows(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_mean(struct kiln_context * ctx, struct kiln_tensor * a);
/* index of the max of each row of a matrix -> I32 [ne1] */
KILN_API struct kiln_tensor * kiln_argmax(struct kiln_context * ctx, struct kiln_tensor * a);
/* number of equal elements -> I64 [1] */
KILN_API struct kiln_tensor * kiln_count_equal(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* repeat a to the shape of b (a must divide b) */
KILN_API struct kiln_tensor * kiln_repeat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* sum repetitions of a into the shape of b */
KILN_API struct kiln_tensor * kiln_repeat_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* concat a and b along dim */
KILN_API struct kiln_tensor * kiln_concat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int dim);

KILN_API struct kiln_tensor * kiln_abs        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_abs_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sgn        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sgn_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_neg        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_neg_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_step       (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_step_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_tanh       (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_tanh_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_elu        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_elu_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_relu       (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_relu_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_leaky_relu (struct kiln_context * ctx, struct kiln_tensor * a, float negative_slope, bool inplace);
KILN_API struct kiln_tensor * kiln_sigmoid    (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_sigmoid_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_gelu       (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_gelu_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_gelu_quick (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_gelu_quick_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_silu       (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_silu_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
/* a = x, b = dy */
KILN_API struct kiln_tensor * kiln_silu_back  (struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_hardswish  (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_hardsigmoid(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_exp        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_exp_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_unary        (struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_unary_op op);
KILN_API struct kiln_tensor * kiln_unary_inplace(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_unary_op op);

/* normalize along rows */
KILN_API struct kiln_tensor * kiln_norm             (struct kiln_context * ctx, struct kiln_tensor * a, float eps);
KILN_API struct kiln_tensor * kiln_norm_inplace     (struct kiln_context * ctx, struct kiln_tensor * a, float eps);
KILN_API struct kiln_tensor * kiln_rms_norm         (struct kiln_context * ctx, struct kiln_tensor * a, float eps);
KILN_API struct kiln_tensor * kiln_rms_norm_inplace (struct kiln_context * ctx, struct kiln_tensor * a, float eps);
/* group normalize along ne0*ne1*n_groups */
KILN_API struct kiln_tensor * kiln_group_norm        (struct kiln_context * ctx, struct kiln_tensor * a, int n_groups, float eps);
KILN_API struct kiln_tensor * kiln_group_norm_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_groups, float eps);
/* a = x, b = dy */
KILN_API struct kiln_tensor * kiln_rms_norm_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float eps);

/* A: k columns, n rows => [ne03, ne02, n, k]
 * B: k columns, m rows  (i.e. we transpose it internally) => [ne03 * x, ne02 * y, m, k]
 * result is n columns, m rows => [ne03 * x, ne02 * y, m, n] */
KILN_API struct kiln_tensor * kiln_mul_mat(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API void kiln_mul_mat_set_prec(struct kiln_tensor * a, enum kiln_prec prec);
KILN_API void kiln_mul_mat_set_order(struct kiln_tensor * a, enum kiln_mm_order order);
/* indirect matrix multiplication (mixture of experts) */
KILN_API struct kiln_tensor * kiln_mul_mat_id(struct kiln_context * ctx, struct kiln_tensor * as, struct kiln_tensor * b, struct kiln_tensor * ids);
/* A: m columns, n rows; B: p columns, n rows; result is m columns, p rows */
KILN_API struct kiln_tensor * kiln_out_prod(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* mul_mat_id's backward products (as [K, N, n_as], ids [n_used, n_tok], g [N, n_used, n_tok] f32):
 * mul_mat_id_back -> [K, n_used, n_tok], dst[:, e, t] = as[:, :, ids[e, t]] g[:, e, t] (as may be quantized);
 * out_prod_id -> [a.ne0, g.ne0, n_as], dst[:, :, x] = sum over ids[e, t] == x of a[:, e % a.ne1, t] g[:, e, t]^T */
KILN_API struct kiln_tensor * kiln_mul_mat_id_back(struct kiln_context * ctx, struct kiln_tensor * as, struct kiln_tensor * g, struct kiln_tensor * ids);
KILN_API struct kiln_tensor * kiln_out_prod_id(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * g, struct kiln_tensor * ids, int64_t n_as);

KILN_API struct kiln_tensor * kiln_scale        (struct kiln_context * ctx, struct kiln_tensor * a, float s);
KILN_API struct kiln_tensor * kiln_scale_inplace(struct kiln_context * ctx, struct kiln_tensor * a, float s);

/* b -> view(a, offset, nb1, nb2, nb3), return modified a */
KILN_API struct kiln_tensor * kiln_set(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
KILN_API struct kiln_tensor * kiln_set_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
KILN_API struct kiln_tensor * kiln_set_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t offset);
KILN_API struct kiln_tensor * kiln_set_1d_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t offset);
KILN_API struct kiln_tensor * kiln_set_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t offset);
KILN_API struct kiln_tensor * kiln_set_2d_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, size_t nb1, size_t offset);

/* a -> b, return view(b) */
KILN_API struct kiln_tensor * kiln_cpy(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_cast(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_type type);
/* make contiguous */
KILN_API struct kiln_tensor * kiln_cont(struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_cont_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0);
KILN_API struct kiln_tensor * kiln_cont_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1);
KILN_API struct kiln_tensor * kiln_cont_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
KILN_API struct kiln_tensor * kiln_cont_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* return view(a), b specifies the new shape */
KILN_API struct kiln_tensor * kiln_reshape   (struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_reshape_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0);
KILN_API struct kiln_tensor * kiln_reshape_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1);
KILN_API struct kiln_tensor * kiln_reshape_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2);
KILN_API struct kiln_tensor * kiln_reshape_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

/* offset in bytes; the view must lie inside a's data */
KILN_API struct kiln_tensor * kiln_view_1d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, size_t offset);
KILN_API struct kiln_tensor * kiln_view_2d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
KILN_API struct kiln_tensor * kiln_view_3d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
KILN_API struct kiln_tensor * kiln_view_4d(struct kiln_context * ctx, struct kiln_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2, size_t nb3, size_t offset);

KILN_API struct kiln_tensor * kiln_permute(struct kiln_context * ctx, struct kiln_tensor * a, int axis0, int axis1, int axis2, int axis3);
/* alias for kiln_permute(ctx, a, 1, 0, 2, 3) */
KILN_API struct kiln_tensor * kiln_transpose(struct kiln_context * ctx, struct kiln_tensor * a);

/* supports 3D: a->ne[2] == b->ne[1]; b is I32 row indices */
KILN_API struct kiln_tensor * kiln_get_rows(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* a: gradient of get_rows result, b: row indices, c: data for the result's shape */
KILN_API struct kiln_tensor * kiln_get_rows_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c);

KILN_API struct kiln_tensor * kiln_diag(struct kiln_context * ctx, struct kiln_tensor * a);
/* set elements above the diagonal (col > n_past + row) to -INF */
KILN_API struct kiln_tensor * kiln_diag_mask_inf        (struct kiln_context * ctx, struct kiln_tensor * a, int n_past);
KILN_API struct kiln_tensor * kiln_diag_mask_inf_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_past);
KILN_API struct kiln_tensor * kiln_diag_mask_zero        (struct kiln_context * ctx, struct kiln_tensor * a, int n_past);
KILN_API struct kiln_tensor * kiln_diag_mask_zero_inplace(struct kiln_context * ctx, struct kiln_tensor * a, int n_past);

KILN_API struct kiln_tensor * kiln_soft_max        (struct kiln_context * ctx, struct kiln_tensor * a);
KILN_API struct kiln_tensor * kiln_soft_max_inplace(struct kiln_context * ctx, struct kiln_tensor * a);
/* fused soft_max(a*scale + mask*(ALiBi slope)); mask is optional (F16 or F32),
 * broadcast over rows; max_bias = 0.0f for no ALiBi */
KILN_API struct kiln_tensor * kiln_soft_max_ext(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * mask, float scale, float max_bias);
/* a = dy, b = y (the soft_max output) */
KILN_API struct kiln_tensor * kiln_soft_max_ext_back        (struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float scale, float max_bias);
KILN_API struct kiln_tensor * kiln_soft_max_ext_back_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, float scale, float max_bias);

/* rotary position embedding; b is an I32 vector of positions, size a->ne[2];
 * c is optional frequency factors (F32 [n_dims/2]). op_params layout as ggml:
 * [0]=n_past(unused) [1]=n_dims [2]=mode [3]=n_ctx(unused) [4]=n_ctx_orig,
 * floats at [5..10]: freq_base freq_scale ext_factor attn_factor beta_fast beta_slow,
 * [11..14] rope_multi sections */
KILN_API struct kiln_tensor * kiln_rope        (struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int n_dims, int mode);
KILN_API struct kiln_tensor * kiln_rope_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int n_dims, int mode);
KILN_API struct kiln_tensor * kiln_rope_ext(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow);
KILN_API struct kiln_tensor * kiln_rope_ext_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow);
/* multimodal rope: b holds 4 positions per token (I32 [4*ne2]) */
KILN_API struct kiln_tensor * kiln_rope_multi(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow);
/* YaRN: dimensions where the ramp starts/ends */
KILN_API void kiln_rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2]);
/* gradient of rope: a = dy */
KILN_API struct kiln_tensor * kiln_rope_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c,
        int n_dims, int mode, int n_ctx_orig, float freq_base, float freq_scale,
        float ext_factor, float attn_factor, float beta_fast, float beta_slow);

/* clamp in place-of-copy: result has a's shape */
KILN_API struct kiln_tensor * kiln_clamp(struct kiln_context * ctx, struct kiln_tensor * a, float min, float max);

/* a: kernel [OC, IC, KH, KW], b: data [N, IC, IH, IW] ->
 * [N, OH, OW, IC*KH*KW] (2D) or [N, OW, IC*KW] (1D) */
KILN_API struct kiln_tensor * kiln_im2col(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D, enum kiln_type dst_type);
/* a: gradient of im2col result, b: kernel; ne: shape of the image */
KILN_API struct kiln_tensor * kiln_im2col_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int64_t * ne, int s0, int s1, int p0, int p1, int d0, int d1, bool is_2D);
KILN_API struct kiln_tensor * kiln_conv_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s0, int p0, int d0);
/* conv_1d with padding = half: alias for kiln_conv_1d(a, b, s, a->ne[0]/2, d) */
KILN_API struct kiln_tensor * kiln_conv_1d_ph(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s, int d);
KILN_API struct kiln_tensor * kiln_conv_1d_dw(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s0, int p0, int d0);
KILN_API struct kiln_tensor * kiln_conv_transpose_1d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int s0, int p0, int d0);
KILN_API struct kiln_tensor * kiln_conv_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1);
KILN_API struct kiln_tensor * kiln_conv_2d_sk_p0(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
KILN_API struct kiln_tensor * kiln_conv_2d_s1_ph(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* a: [OC, 1, KH, KW] kernel, b: [N, IC(=OC), IH, IW] */
KILN_API struct kiln_tensor * kiln_conv_depthwise_2d(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b,
        int s0, int s1, int p0, int p1, int d0, int d1);
KILN_API struct kiln_tensor * kiln_conv_transpose_2d_p0(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, int stride);

KILN_API struct kiln_tensor * kiln_pool_1d(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_op_pool op, int k0, int s0, int p0);
/* the result has ne[0] = OW, ne[1] = OH, ne[2] = ne2, ne[3] = ne3 */
KILN_API struct kiln_tensor * kiln_pool_2d(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_op_pool op,
        int k0, int k1, int s0, int s1, float p0, float p1);
/* a = dy, af = the pool's input */
KILN_API struct kiln_tensor * kiln_pool_2d_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * af, enum kiln_op_pool op,
        int k0, int k1, int s0, int s1, float p0, float p1);

/* nearest interpolation: multiplies ne0 and ne1 by scale_factor */
KILN_API struct kiln_tensor * kiln_upscale(struct kiln_context * ctx, struct kiln_tensor * a, int scale_factor);
/* nearest interpolation to the given shape */
KILN_API struct kiln_tensor * kiln_upscale_ext(struct kiln_context * ctx, struct kiln_tensor * a, int ne0, int ne1, int ne2, int ne3);
/* pad each dimension with zeros at the end */
KILN_API struct kiln_tensor * kiln_pad(struct kiln_context * ctx, struct kiln_tensor * a, int p0, int p1, int p2, int p3);
/* reflection padding of dim 0: p0 left, p1 right (each < ne0) */
KILN_API struct kiln_tensor * kiln_pad_reflect_1d(struct kiln_context * ctx, struct kiln_tensor * a, int p0, int p1);

/* F32 [ceil((stop-start)/step)] */
KILN_API struct kiln_tensor * kiln_arange(struct kiln_context * ctx, float start, float stop, float step);
/* timesteps: F32 [N] -> F32 [dim, N] sinusoidal embedding */
KILN_API struct kiln_tensor * kiln_timestep_embedding(struct kiln_context * ctx, struct kiln_tensor * timesteps, int dim, int max_period);

/* I32 indices that sort each row */
KILN_API struct kiln_tensor * kiln_argsort(struct kiln_context * ctx, struct kiln_tensor * a, enum kiln_sort_order order);
/* top k elements per row: I32 indices [k, ne1, ne2, ne3] (a view of argsort desc) */
KILN_API struct kiln_tensor * kiln_top_k(struct kiln_context * ctx, struct kiln_tensor * a, int k);

/* q:    [n_embd_k, n_batch,     n_head,    ne3 ]
 * k:    [n_embd_k, n_kv,        n_head_kv, ne3 ]
 * v:    [n_embd_v, n_kv,        n_head_kv, ne3 ] !! not transposed !!
 * mask: [n_kv,     n_batch_pad, ne32,      ne33] (optional, F16 or F32)
 * res:  [n_embd_v, n_head,      n_batch,   ne3 ] !! permuted !! */
KILN_API struct kiln_tensor * kiln_flash_attn_ext(struct kiln_context * ctx, struct kiln_tensor * q, struct kiln_tensor * k, struct kiln_tensor * v,
        struct kiln_tensor * mask, float scale, float max_bias, float logit_softcap);
KILN_API void kiln_flash_attn_ext_set_prec(struct kiln_tensor * a, enum kiln_prec prec);

/* Mamba: sx: [d_conv - 1 + n_t, d_inner, n_s], c: [d_conv, d_inner] -> [d_inner, n_t, n_s] */
KILN_API struct kiln_tensor * kiln_ssm_conv(struct kiln_context * ctx, struct kiln_tensor * sx, struct kiln_tensor * c);
/* s: [d_state, d_inner, n_s], x: [d_inner, n_t, n_s], dt: [d_inner, n_t, n_s],
 * A: [d_state, d_inner], B, C: [d_state, n_t, n_s]
 * -> concatenated y [d_inner, n_t, n_s] and final states [d_state, d_inner, n_s] */
KILN_API struct kiln_tensor * kiln_ssm_scan(struct kiln_context * ctx, struct kiln_tensor * s, struct kiln_tensor * x, struct kiln_tensor * dt,
        struct kiln_tensor * A, struct kiln_tensor * B, struct kiln_tensor * C);

/* partition into non-overlapping windows with padding if needed */
KILN_API struct kiln_tensor * kiln_win_part(struct kiln_context * ctx, struct kiln_tensor * a, int w);
/* reverse of kiln_win_part */
KILN_API struct kiln_tensor * kiln_win_unpart(struct kiln_context * ctx, struct kiln_tensor * a, int w0, int h0, int w);
KILN_API struct kiln_tensor * kiln_get_rel_pos(struct kiln_context * ctx, struct kiln_tensor * a, int qh, int kh);
KILN_API struct kiln_tensor * kiln_add_rel_pos(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * pw, struct kiln_tensor * ph);
KILN_API struct kiln_tensor * kiln_add_rel_pos_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * pw, struct kiln_tensor * ph);

KILN_API struct kiln_tensor * kiln_rwkv_wkv6(struct kiln_context * ctx, struct kiln_tensor * k, struct kiln_tensor * v, struct kiln_tensor * r,
        struct kiln_tensor * tf, struct kiln_tensor * td, struct kiln_tensor * state);
KILN_API struct kiln_tensor * kiln_gated_linear_attn(struct kiln_context * ctx, struct kiln_tensor * k, struct kiln_tensor * v, struct kiln_tensor * q,
        struct kiln_tensor * g, struct kiln_tensor * state, float scale);

/* custom operators: called by every task with (ith, nth) */
typedef void (*kiln_custom1_op_t)(struct kiln_tensor * dst, const struct kiln_tensor * a, int ith, int nth, void * userdata);
typedef void (*kiln_custom2_op_t)(struct kiln_tensor * dst, const struct kiln_tensor * a, const struct kiln_tensor * b, int ith, int nth, void * userdata);
typedef void (*kiln_custom3_op_t)(struct kiln_tensor * dst, const struct kiln_tensor * a, const struct kiln_tensor * b, const struct kiln_tensor * c, int ith, int nth, void * userdata);
#define KILN_N_TASKS_MAX (-1) /* n_tasks: as many as threads */
KILN_API struct kiln_tensor * kiln_map_custom1(struct kiln_context * ctx, struct kiln_tensor * a, kiln_custom1_op_t fun, int n_tasks, void * userdata);
KILN_API struct kiln_tensor * kiln_map_custom1_inplace(struct kiln_context * ctx, struct kiln_tensor * a, kiln_custom1_op_t fun, int n_tasks, void * userdata);
KILN_API struct kiln_tensor * kiln_map_custom2(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, kiln_custom2_op_t fun, int n_tasks, void * userdata);
KILN_API struct kiln_tensor * kiln_map_custom2_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, kiln_custom2_op_t fun, int n_tasks, void * userdata);
KILN_API struct kiln_tensor * kiln_map_custom3(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c, kiln_custom3_op_t fun, int n_tasks, void * userdata);
KILN_API struct kiln_tensor * kiln_map_custom3_inplace(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c, kiln_custom3_op_t fun, int n_tasks, void * userdata);

/* a: logits [nc, nr], b: target probabilities [nc, nr] -> F32 [1]: mean over rows of -Σ b*log_softmax(a) */
KILN_API struct kiln_tensor * kiln_cross_entropy_loss(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b);
/* a: loss gradient [1], b: logits, c: labels */
KILN_API struct kiln_tensor * kiln_cross_entropy_loss_back(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * b, struct kiln_tensor * c);
/* AdamW step in place on a; adamw_params: F32 [7] = alpha, beta1, beta2, eps, wd, beta1h, beta2h
 * (beta1h = 1/(1 - beta1^iter), beta2h = 1/(1 - beta2^iter)) */
KILN_API struct kiln_tensor * kiln_opt_step_adamw(struct kiln_context * ctx, struct kiln_tensor * a, struct kiln_tensor * grad,
        struct kiln_tensor * m, struct kiln_tensor * v, struct kiln_tensor * adamw_params);

/* ----------------------------------------------------------------- graph */

KILN_API struct kiln_cgraph * kiln_new_graph(struct kiln_context * ctx); /* size = KILN_DEFAULT_GRAPH_SIZE, no grads */
KILN_API struct kiln_cgraph * kiln_new_graph_custom(struct kiln_context * ctx, size_t size, bool grads);
KILN_API struct kiln_cgraph * kiln_graph_dup(struct kiln_context * ctx, struct kiln_cgraph * cgraph);
KILN_API void                 kiln_graph_cpy(struct kiln_cgraph * src, struct kiln_cgraph * dst);
KILN_API void                 kiln_graph_clear(struct kiln_cgraph * cgraph);
/* Adds tensor and everything it depends on, in topological order. Returns a
 * status: a graph that is full or a NULL tensor is an error, not an abort. */
KILN_API enum kiln_status     kiln_build_forward_expand(struct kiln_cgraph * cgraph, struct kiln_tensor * tensor);
KILN_API int                  kiln_graph_size   (struct kiln_cgraph * cgraph);
KILN_API int                  kiln_graph_n_nodes(struct kiln_cgraph * cgraph);
KILN_API int                  kiln_graph_n_leafs(struct kiln_cgraph * cgraph);
/* i < 0: from the end */
KILN_API struct kiln_tensor * kiln_graph_node   (struct kiln_cgraph * cgraph, int i);
KILN_API struct kiln_tensor * kiln_graph_leaf   (struct kiln_cgraph * cgraph, int i);
KILN_API struct kiln_tensor ** kiln_graph_nodes (struct kiln_cgraph * cgraph);
KILN_API struct kiln_tensor * kiln_graph_get_tensor(struct kiln_cgraph * cgraph, const char * name);
KILN_API void                 kiln_graph_print(const struct kiln_cgraph * cgraph);

/* ------------------------------------------------------------- autodiff
 * ggml's semantics: mark trainable tensors with kiln_set_param and the loss
 * with kiln_set_loss, build the forward graph (with grads = true), then
 * kiln_build_backward_expand appends the gradient computation. grad_accs,
 * if not NULL, has one entry per forward node (n_nodes at the time of the
 * call): a non-NULL entry for a PARAM node is a tensor its gradient is
 * accumulated into (micro-batching). Sources that cannot carry gradients
 * (positions, indices, piecewise-constant ops) are skipped; an op without a
 * backward rule on a path that needs a gradient is an error naming it. */
KILN_API enum kiln_status     kiln_build_backward_expand(struct kiln_context * ctx, struct kiln_cgraph * cgraph, struct kiln_tensor ** grad_accs);
KILN_API struct kiln_tensor * kiln_graph_get_grad    (const struct kiln_cgraph * cgraph, const struct kiln_tensor * node);
KILN_API struct kiln_tensor * kiln_graph_get_grad_acc(const struct kiln_cgraph * cgraph, const struct kiln_tensor * node);
/* loss gradients to 1, all other gradients and accumulators to 0, and the
 * AdamW moments of every opt_step_adamw node to 0 */
KILN_API void                 kiln_graph_reset(struct kiln_cgraph * cgraph);

/* ---------------------------------------------------- CPU: plan + compute */

typedef bool (*kiln_abort_callback)(void * data);

struct kiln_threadpool_params {
    int  n_threads;
    int  poll;        /* spin iterations before sleeping at the barrier (0 = default) */
};
KILN_API struct kiln_threadpool_params kiln_threadpool_params_default(int n_threads);
KILN_API struct kiln_threadpool * kiln_threadpool_new(struct kiln_threadpool_params params);
KILN_API void                     kiln_threadpool_free(struct kiln_threadpool * threadpool);
KILN_API int                      kiln_threadpool_get_n_threads(struct kiln_threadpool * threadpool);

struct kiln_cplan {
    size_t    work_size; /* size of work buffer, calculated by kiln_graph_plan() */
    uint8_t * work_data; /* work buffer, to be allocated by the caller before kiln_graph_compute() */

    int n_threads;
    struct kiln_threadpool * threadpool; /* NULL: the shared default pool */

    kiln_abort_callback abort_callback;
    void *              abort_callback_data;
    volatile int *      abort_flag; /* non-zero = abort; checked between nodes */
};

KILN_API struct kiln_cplan kiln_graph_plan(const struct kiln_cgraph * cgraph, int n_threads, struct kiln_threadpool * threadpool);
KILN_API enum kiln_status  kiln_graph_compute(struct kiln_cgraph * cgraph, struct kiln_cplan * cplan);
/* same as above, allocating the work buffer in ctx */
KILN_API enum kiln_status  kiln_graph_compute_with_ctx(struct kiln_context * ctx, struct kiln_cgraph * cgraph, int n_threads);

/* Runtime CPU feature detection (natively: cpuid / hwcaps; wasm: build flags) */
KILN_API int kiln_cpu_has_sse3       (void);
KILN_API int kiln_cpu_has_ssse3      (void);
KILN_API int kiln_cpu_has_avx        (void);
KILN_API int kiln_cpu_has_avx2       (void);
KILN_API int kiln_cpu_has_f16c       (void);
KILN_API int kiln_cpu_has_fma        (void);
KILN_API int kiln_cpu_has_avx512     (void);
/* AVX-512 F + BW + VL + VNNI (Ice Lake / Zen 4 and later): Kiln's avx512 row */
KILN_API int kiln_cpu_has_avx512_vnni(void);
/* AVX-VNNI (VEX 256-bit vpdpbusd; Alder Lake and later clients, Zen 5) with
 * AVX2 + FMA + F16C: Kiln's avxvnni row */
KILN_API int kiln_cpu_has_avxvnni    (void);
KILN_API int kiln_cpu_has_neon       (void);
KILN_API int kiln_cpu_has_arm_fma    (void);
KILN_API int kiln_cpu_has_fp16_va    (void);
KILN_API int kiln_cpu_has_dotprod    (void);
KILN_API int kiln_cpu_has_i8mm       (void); /* arm64 FEAT_I8MM (SMMLA) */
KILN_API int kiln_cpu_has_wasm_simd  (void);
KILN_API int kiln_cpu_has_wasm_relaxed_simd(void);
/* The ISA the kernel table selected: "avx512", "avx2", "neon", "wasm_simd128",
 * "wasm_relaxed" (a relaxed-SIMD build), "scalar" … */
KILN_API const char * kiln_cpu_isa(void);
/* Select the kernel table by ISA name ("scalar", "avx2", "avx512", "avxvnni", "neon",
 * "wasm_simd128", "wasm_relaxed"; NULL or "auto" = the detected best), for tests and
 * benchmarks that compare ISAs. An unavailable ISA changes nothing and sets
 * kiln_last_error(); check kiln_cpu_isa() afterwards. */
KILN_API void kiln_cpu_force_isa(const char * isa);

/* --------------------------------------------------- graph allocator
 * Plans intermediate buffers with reuse (like ggml-alloc's gallocr): tensors
 * without data get offsets into one buffer; a tensor's memory is reused once
 * its last consumer has run. Inputs (leafs without data and tensors flagged
 * INPUT) and outputs (flag OUTPUT, and the graph's last node) are never
 * overwritten. */
struct kiln_gallocr;
KILN_API struct kiln_gallocr * kiln_gallocr_new(void);
KILN_API void   kiln_gallocr_free(struct kiln_gallocr * galloc);
/* plan (and grow the buffer if needed); returns false on error */
KILN_API bool   kiln_gallocr_reserve(struct kiln_gallocr * galloc, struct kiln_cgraph * graph);
KILN_API bool   kiln_gallocr_alloc_graph(struct kiln_gallocr * galloc, struct kiln_cgraph * graph);
KILN_API size_t kiln_gallocr_get_buffer_size(struct kiln_gallocr * galloc);

/* ---------------------------------------------------------------- logging */

enum kiln_log_level {
    KILN_LOG_LEVEL_NONE  = 0,
    KILN_LOG_LEVEL_DEBUG = 1,
    KILN_LOG_LEVEL_INFO  = 2,
    KILN_LOG_LEVEL_WARN  = 3,
    KILN_LOG_LEVEL_ERROR = 4,
    KILN_LOG_LEVEL_CONT  = 5,
};
typedef void (*kiln_log_callback)(enum kiln_log_level level, const char * text, void * user_data);
/* NULL callback: log to stderr (the default) */
KILN_API void kiln_log_set(kiln_log_callback log_callback, void * user_data);

KILN_API int64_t kiln_time_us(void);
KILN_API int64_t kiln_time_ms(void);

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
