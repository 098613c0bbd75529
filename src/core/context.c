/*
 * context.c — arenas, tensors and their metadata; errors and logging.
 *
 * A context is one arena: objects (tensors, graphs, raw buffers) are bump
 * allocated from it, each with a small header, and freed all at once.
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

/* ------------------------------------------------------------- errors */

#if defined(_MSC_VER)
#define KILN_TLS __declspec(thread)
#else
#define KILN_TLS _Thread_local
#endif

static KILN_TLS char g_last_error[512];

static void set_error_v(const char * fmt, va_list ap) {
    vsnprintf(g_last_error, sizeof(g_last_error), fmt, ap);
}

void kiln_set_error(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(fmt, ap);
    va_end(ap);
    kiln_log_internal(KILN_LOG_LEVEL_DEBUG, "error: %s\n", g_last_error);
}

void kiln_set_last_error(const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_error_v(fmt, ap);
    va_end(ap);
}

const char * kiln_last_error(void) { return g_last_error; }
void kiln_clear_error(void) { g_last_error[0] = 0; }

const char * kiln_status_to_string(enum kiln_status status) {
    switch (status) {
        case KILN_STATUS_ALLOC_FAILED: return "alloc failed";
        case KILN_STATUS_FAILED:       return "failed";
        case KILN_STATUS_SUCCESS:      return "success";
        case KILN_STATUS_ABORTED:      return "aborted";
        case KILN_STATUS_INVALID_ARG:  return "invalid argument";
        case KILN_STATUS_UNSUPPORTED:  return "unsupported";
    }
    return "unknown status";
}

/* ------------------------------------------------------------ logging */

static kiln_log_callback g_log_cb = NULL;
static void *            g_log_ud = NULL;
static int               g_log_min = -1; /* resolved from KILN_LOG on first use */

void kiln_log_set(kiln_log_callback cb, void * user_data) {
    g_log_cb = cb;
    g_log_ud = user_data;
}

void kiln_log_internal(enum kiln_log_level level, const char * fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (g_log_cb) {
        g_log_cb(level, buf, g_log_ud);
        return;
    }
    if (g_log_min < 0) {
        /* KILN_LOG=debug shows debug messages on stderr; default: info and up */
        const char * env = getenv("KILN_LOG");
        g_log_min = (env && strcmp(env, "debug") == 0) ? KILN_LOG_LEVEL_DEBUG : KILN_LOG_LEVEL_INFO;
    }
    if (level != KILN_LOG_LEVEL_CONT && (int) level < g_log_min) return;
    fputs(buf, stderr);
}

int64_t kiln_time_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}
int64_t kiln_time_ms(void) { return kiln_time_us() / 1000; }

/* ------------------------------------------------------------ op names */

#define OP_NAME_(UPPER, lower, sym, n_src, tasks, work, grad) #UPPER,
static const char * const op_names[KILN_OP_COUNT] = { KILN_OP_LIST(OP_NAME_) };
#undef OP_NAME_
#define OP_SYM_(UPPER, lower, sym, n_src, tasks, work, grad) sym,
static const char * const op_symbols[KILN_OP_COUNT] = { KILN_OP_LIST(OP_SYM_) };
#undef OP_SYM_
#define OP_NSRC_(UPPER, lower, sym, n_src, tasks, work, grad) n_src,
static const int op_n_src[KILN_OP_COUNT] = { KILN_OP_LIST(OP_NSRC_) };
#undef OP_NSRC_
#define OP_TASKS_(UPPER, lower, sym, n_src, tasks, work, grad) KILN_TASKS_##tasks,
static const enum kiln_task_class op_tasks[KILN_OP_COUNT] = { KILN_OP_LIST(OP_TASKS_) };
#undef OP_TASKS_
#define OP_GRAD_(UPPER, lower, sym, n_src, tasks, work, grad) grad,
static const bool op_grad[KILN_OP_COUNT] = { KILN_OP_LIST(OP_GRAD_) };
#undef OP_GRAD_
#define UNARY_NAME_(UPPER, lower, name) name,
static const char * const unary_names[KILN_UNARY_OP_COUNT] = { KILN_UNARY_OP_LIST(UNARY_NAME_) };
#undef UNARY_NAME_

const char * kiln_op_name(enum kiln_op op) { return (unsigned) op < KILN_OP_COUNT ? op_names[op] : "INVALID"; }
const char * kiln_op_symbol(enum kiln_op op) { return (unsigned) op < KILN_OP_COUNT ? op_symbols[op] : "?"; }
int kiln_op_n_src(enum kiln_op op) { return (unsigned) op < KILN_OP_COUNT ? op_n_src[op] : 0; }
enum kiln_task_class kiln_op_tasks(enum kiln_op op) { return (unsigned) op < KILN_OP_COUNT ? op_tasks[op] : KILN_TASKS_NONE; }
bool kiln_op_has_backward(enum kiln_op op) { return (unsigned) op < KILN_OP_COUNT ? op_grad[op] : false; }
const char * kiln_unary_op_name(enum kiln_unary_op op) {
    return (unsigned) op < KILN_UNARY_OP_COUNT ? unary_names[op] : "INVALID";
}

/* ------------------------------------------------------------ context */

static const size_t OBJECT_SIZE = sizeof(struct kiln_object);

size_t kiln_tensor_overhead(void) {
    return OBJECT_SIZE + KILN_PAD(sizeof(struct kiln_tensor), KILN_MEM_ALIGN) + KILN_MEM_ALIGN;
}

struct kiln_context * kiln_init(struct kiln_init_params params) {
    struct kiln_context * ctx = (struct kiln_context *) calloc(1, sizeof(*ctx));
    if (!ctx) { kiln_set_error("kiln_init: out of memory for the context"); return NULL; }
    size_t size = params.mem_size ? KILN_PAD(params.mem_size, KILN_MEM_ALIGN) : KILN_MEM_ALIGN;
    ctx->mem_size = size;
    ctx->no_alloc = params.no_alloc;
    if (params.mem_buffer) {
        ctx->mem_buffer = params.mem_buffer;
        ctx->mem_buffer_owned = false;
    } else {
        /* aligned so that tensor data can be read with aligned SIMD loads */
        void * p = NULL;
        if (posix_memalign(&p, 64, size) != 0 || !p) {
            free(ctx);
            kiln_set_error("kiln_init: cannot allocate %zu bytes for the context", size);
            return NULL;
        }
        ctx->mem_buffer = p;
        ctx->mem_buffer_owned = true;
    }
    return ctx;
}

void kiln_reset(struct kiln_context * ctx) {
    if (!ctx) return;
    ctx->n_objects = 0;
    ctx->objects_begin = NULL;
    ctx->objects_end = NULL;
}

void kiln_free(struct kiln_context * ctx) {
    if (!ctx) return;
    if (ctx->mem_buffer_owned) free(ctx->mem_buffer);
    free(ctx);
}

size_t kiln_used_mem(const struct kiln_context * ctx) {
    return ctx->objects_end ? ctx->objects_end->offs + ctx->objects_end->size : 0;
}
size_t kiln_get_mem_size(const struct kiln_context * ctx) { return ctx->mem_size; }
void * kiln_get_mem_buffer(const struct kiln_context * ctx) { return ctx->mem_buffer; }
bool kiln_get_no_alloc(struct kiln_context * ctx) { return ctx->no_alloc; }
void kiln_set_no_alloc(struct kiln_context * ctx, bool no_alloc) { ctx->no_alloc = no_alloc; }

size_t kiln_get_max_tensor_size(const struct kiln_context * ctx) {
    size_t max = 0;
    for (struct kiln_tensor * t = kiln_get_first_tensor(ctx); t; t = kiln_get_next_tensor(ctx, t)) {
        size_t b = kiln_nbytes(t);
        if (b > max) max = b;
    }
    return max;
}

struct kiln_object * kiln_new_object(struct kiln_context * ctx, int type, size_t size) {
    const size_t cur_end = kiln_used_mem(ctx);
    const size_t size_needed = KILN_PAD(size, KILN_MEM_ALIGN);
    if (size_needed < size || cur_end + OBJECT_SIZE + size_needed < cur_end ||
        cur_end + OBJECT_SIZE + size_needed > ctx->mem_size) {
        kiln_set_error("context is out of memory: need %zu bytes, %zu of %zu used",
                       size_needed + OBJECT_SIZE, cur_end, ctx->mem_size);
        return NULL;
    }
    struct kiln_object * obj = (struct kiln_object *)((char *) ctx->mem_buffer + cur_end);
    obj->offs = cur_end + OBJECT_SIZE;
    obj->size = size_needed;
    obj->next = NULL;
    obj->type = type;
    if (ctx->objects_end) ctx->objects_end->next = obj;
    else ctx->objects_begin = obj;
    ctx->objects_end = obj;
    ctx->n_objects++;
    return obj;
}

void * kiln_new_buffer(struct kiln_context * ctx, size_t nbytes) {
    struct kiln_object * obj = kiln_new_object(ctx, KILN_OBJECT_BUFFER, nbytes);
    return obj ? (char *) ctx->mem_buffer + obj->offs : NULL;
}

/* ------------------------------------------------------------ tensors */

const char * kiln_shape_str(const struct kiln_tensor * t, char * buf, size_t size) {
    if (!t) { snprintf(buf, size, "(null)"); return buf; }
    snprintf(buf, size, "[%lld, %lld, %lld, %lld] %s",
             (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3],
             kiln_type_name(t->type));
    return buf;
}

struct kiln_tensor * kiln_new_tensor_impl(
        struct kiln_context * ctx, enum kiln_type type, int n_dims, const int64_t * ne,
        struct kiln_tensor * view_src, size_t view_offs) {
    if (!ctx) return KILN_FAIL("new_tensor: context is NULL");
    if (!kiln_type_is_valid((int) type)) return KILN_FAIL("new_tensor: invalid type id %d", (int) type);
    if (n_dims < 1 || n_dims > KILN_MAX_DIMS) return KILN_FAIL("new_tensor: n_dims %d outside 1..4", n_dims);
    const int64_t blck = kiln_blck_size(type);
    int64_t nel = 1;
    for (int i = 0; i < n_dims; i++) {
        if (ne[i] < 0) return KILN_FAIL("new_tensor: ne[%d] = %lld is negative", i, (long long) ne[i]);
        if (ne[i] != 0 && nel > INT64_MAX / ne[i]) return KILN_FAIL("new_tensor: element count overflows");
        nel *= ne[i];
    }
    if (ne[0] % blck != 0) {
        return KILN_FAIL("new_tensor: ne[0] = %lld is not a multiple of the %s block size %lld",
                         (long long) ne[0], kiln_type_name(type), (long long) blck);
    }
    if (view_src && view_src->view_src) {
        /* views of views point at the original storage */
        view_offs += view_src->view_offs;
        view_src = view_src->view_src;
    }
    /* data size, with overflow checks (element counts come from files too) */
    size_t data_size = 0;
    {
        size_t row = kiln_row_size(type, ne[0]);
        data_size = row;
        for (int i = 1; i < n_dims; i++) {
            if (ne[i] != 0 && data_size > SIZE_MAX / (size_t) ne[i]) return KILN_FAIL("new_tensor: byte size overflows");
            data_size *= (size_t) ne[i];
        }
    }
    if (view_src && view_offs + data_size > kiln_nbytes(view_src)) {
        char b[96];
        return KILN_FAIL("view: %zu bytes at offset %zu lie outside the source tensor %s (%zu bytes)",
                         data_size, view_offs, kiln_shape_str(view_src, b, sizeof b), kiln_nbytes(view_src));
    }
    void * data = view_src ? (view_src->data ? (char *) view_src->data + view_offs : NULL) : NULL;
    size_t obj_alloc = 0;
    if (!view_src && !ctx->no_alloc) obj_alloc = data_size;
    if (obj_alloc > SIZE_MAX - 4096) return KILN_FAIL("new_tensor: byte size overflows");
    /* data follows the header, padded so it stays KILN_MEM_ALIGN-aligned */
    const size_t hdr = KILN_PAD(sizeof(struct kiln_tensor), KILN_MEM_ALIGN);
    struct kiln_object * obj = kiln_new_object(ctx, KILN_OBJECT_TENSOR, hdr + obj_alloc);
    if (!obj) return NULL;
    struct kiln_tensor * t = (struct kiln_tensor *)((char *) ctx->mem_buffer + obj->offs);
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->op = KILN_OP_NONE;
    t->view_src = view_src;
    t->view_offs = view_offs;
    t->data = (!view_src && !ctx->no_alloc) ? (void *)((char *) t + hdr) : data;
    for (int i = 0; i < KILN_MAX_DIMS; i++) t->ne[i] = i < n_dims ? ne[i] : 1;
    t->nb[0] = kiln_type_size(type);
    t->nb[1] = t->nb[0] * (size_t)(t->ne[0] / blck);
    for (int i = 2; i < KILN_MAX_DIMS; i++) t->nb[i] = t->nb[i - 1] * (size_t) t->ne[i - 1];
    return t;
}

struct kiln_tensor * kiln_new_tensor(struct kiln_context * ctx, enum kiln_type type, int n_dims, const int64_t * ne) {
    if (!ne) return KILN_FAIL("new_tensor: ne is NULL");
    return kiln_new_tensor_impl(ctx, type, n_dims, ne, NULL, 0);
}
struct kiln_tensor * kiln_new_tensor_1d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0) {
    return kiln_new_tensor(ctx, type, 1, &ne0);
}
struct kiln_tensor * kiln_new_tensor_2d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    return kiln_new_tensor(ctx, type, 2, ne);
}
struct kiln_tensor * kiln_new_tensor_3d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = { ne0, ne1, ne2 };
    return kiln_new_tensor(ctx, type, 3, ne);
}
struct kiln_tensor * kiln_new_tensor_4d(struct kiln_context * ctx, enum kiln_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
    const int64_t ne[4] = { ne0, ne1, ne2, ne3 };
    return kiln_new_tensor(ctx, type, 4, ne);
}

struct kiln_tensor * kiln_new_i32(struct kiln_context * ctx, int32_t value) {
    bool na = ctx ? ctx->no_alloc : false;
    if (ctx) ctx->no_alloc = false;
    struct kiln_tensor * t = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 1);
    if (ctx) ctx->no_alloc = na;
    if (t) kiln_set_i32(t, value);
    return t;
}
struct kiln_tensor * kiln_new_f32(struct kiln_context * ctx, float value) {
    bool na = ctx ? ctx->no_alloc : false;
    if (ctx) ctx->no_alloc = false;
    struct kiln_tensor * t = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 1);
    if (ctx) ctx->no_alloc = na;
    if (t) kiln_set_f32(t, value);
    return t;
}

struct kiln_tensor * kiln_dup_tensor(struct kiln_context * ctx, const struct kiln_tensor * src) {
    if (!src) return KILN_FAIL("dup_tensor: source is NULL");
    return kiln_new_tensor(ctx, src->type, KILN_MAX_DIMS, src->ne);
}

struct kiln_tensor * kiln_view_tensor(struct kiln_context * ctx, struct kiln_tensor * src) {
    if (!src) return KILN_FAIL("view_tensor: source is NULL");
    struct kiln_tensor * t = kiln_new_tensor_impl(ctx, src->type, KILN_MAX_DIMS, src->ne, src, 0);
    if (!t) return NULL;
    kiln_format_name(t, "%s (view)", src->name);
    for (int i = 0; i < KILN_MAX_DIMS; i++) t->nb[i] = src->nb[i];
    return t;
}

struct kiln_tensor * kiln_get_first_tensor(const struct kiln_context * ctx) {
    for (struct kiln_object * o = ctx->objects_begin; o; o = o->next) {
        if (o->type == KILN_OBJECT_TENSOR) return (struct kiln_tensor *)((char *) ctx->mem_buffer + o->offs);
    }
    return NULL;
}

struct kiln_tensor * kiln_get_next_tensor(const struct kiln_context * ctx, struct kiln_tensor * tensor) {
    struct kiln_object * o = (struct kiln_object *)((char *) tensor - OBJECT_SIZE);
    for (o = o->next; o; o = o->next) {
        if (o->type == KILN_OBJECT_TENSOR) return (struct kiln_tensor *)((char *) ctx->mem_buffer + o->offs);
    }
    return NULL;
}

struct kiln_tensor * kiln_get_tensor(struct kiln_context * ctx, const char * name) {
    if (!ctx || !name) return NULL;
    for (struct kiln_tensor * t = kiln_get_first_tensor(ctx); t; t = kiln_get_next_tensor(ctx, t)) {
        if (strcmp(t->name, name) == 0) return t;
    }
    return NULL;
}

/* ---------------------------------------------------------- predicates */

int64_t kiln_nelements(const struct kiln_tensor * t) { return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]; }
int64_t kiln_nrows(const struct kiln_tensor * t) { return t->ne[1] * t->ne[2] * t->ne[3]; }

size_t kiln_nbytes(const struct kiln_tensor * t) {
    for (int i = 0; i < KILN_MAX_DIMS; i++) if (t->ne[i] <= 0) return 0;
    const int64_t blck = kiln_blck_size(t->type);
    size_t nbytes;
    if (blck == 1) {
        nbytes = kiln_type_size(t->type);
        for (int i = 0; i < KILN_MAX_DIMS; i++) nbytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    } else {
        nbytes = (size_t)(t->ne[0] * t->nb[0] / blck);
        for (int i = 1; i < KILN_MAX_DIMS; i++) nbytes += (size_t)(t->ne[i] - 1) * t->nb[i];
    }
    return nbytes;
}
size_t kiln_nbytes_pad(const struct kiln_tensor * t) { return KILN_PAD(kiln_nbytes(t), KILN_MEM_ALIGN); }
size_t kiln_element_size(const struct kiln_tensor * t) { return kiln_type_size(t->type); }

int kiln_n_dims(const struct kiln_tensor * t) {
    for (int i = KILN_MAX_DIMS - 1; i >= 1; --i) if (t->ne[i] > 1) return i + 1;
    return 1;
}
bool kiln_is_empty (const struct kiln_tensor * t) { for (int i = 0; i < KILN_MAX_DIMS; i++) if (t->ne[i] == 0) return true; return false; }
bool kiln_is_scalar(const struct kiln_tensor * t) { return t->ne[0] == 1 && t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool kiln_is_vector(const struct kiln_tensor * t) { return t->ne[1] == 1 && t->ne[2] == 1 && t->ne[3] == 1; }
bool kiln_is_matrix(const struct kiln_tensor * t) { return t->ne[2] == 1 && t->ne[3] == 1; }
bool kiln_is_3d    (const struct kiln_tensor * t) { return t->ne[3] == 1; }
bool kiln_is_transposed(const struct kiln_tensor * t) { return t->nb[0] > t->nb[1]; }
bool kiln_is_permuted(const struct kiln_tensor * t) {
    return t->nb[0] > t->nb[1] || t->nb[1] > t->nb[2] || t->nb[2] > t->nb[3];
}
bool kiln_is_view(const struct kiln_tensor * t) { return t->view_src != NULL; }

/* contiguous in dims >= n (dims < n may have gaps) */
static bool is_contiguous_n(const struct kiln_tensor * t, int n) {
    size_t next_nb = kiln_type_size(t->type);
    if (t->ne[0] != kiln_blck_size(t->type) && t->nb[0] != next_nb) return false;
    next_nb *= (size_t)(t->ne[0] / kiln_blck_size(t->type));
    for (int i = 1; i < KILN_MAX_DIMS; i++) {
        if (t->ne[i] != 1) {
            if (i > n) {
                if (t->nb[i] != next_nb) return false;
                next_nb *= (size_t) t->ne[i];
            } else {
                next_nb = (size_t) t->ne[i] * t->nb[i];
            }
        }
    }
    return true;
}
bool kiln_is_contiguous  (const struct kiln_tensor * t) { return is_contiguous_n(t, 0); }
bool kiln_is_contiguous_0(const struct kiln_tensor * t) { return is_contiguous_n(t, 0); }
bool kiln_is_contiguous_1(const struct kiln_tensor * t) { return is_contiguous_n(t, 1); }
bool kiln_is_contiguous_2(const struct kiln_tensor * t) { return is_contiguous_n(t, 2); }
bool kiln_is_contiguously_allocated(const struct kiln_tensor * t) {
    return kiln_nbytes(t) == (size_t) kiln_nelements(t) * kiln_type_size(t->type) / (size_t) kiln_blck_size(t->type);
}
bool kiln_is_contiguous_rows(const struct kiln_tensor * t) {
    return t->ne[0] == kiln_blck_size(t->type) || t->nb[0] == kiln_type_size(t->type);
}
bool kiln_are_same_shape(const struct kiln_tensor * a, const struct kiln_tensor * b) {
    return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}
bool kiln_are_same_stride(const struct kiln_tensor * a, const struct kiln_tensor * b) {
    return a->nb[0] == b->nb[0] && a->nb[1] == b->nb[1] && a->nb[2] == b->nb[2] && a->nb[3] == b->nb[3];
}
/* can t0 be repeated to t1's shape? */
bool kiln_can_repeat(const struct kiln_tensor * t0, const struct kiln_tensor * t1) {
    if (kiln_is_empty(t0)) return kiln_is_empty(t1);
    for (int i = 0; i < KILN_MAX_DIMS; i++) if (t1->ne[i] % t0->ne[i] != 0) return false;
    return true;
}

/* ------------------------------------------------ shared argument checks */

bool kiln_check_tensor(const struct kiln_tensor * t, const char * op, const char * arg) {
    if (!t) { kiln_set_error("%s: argument %s is NULL", op, arg); return false; }
    if (!kiln_type_is_valid((int) t->type)) { kiln_set_error("%s: argument %s has invalid type id %d", op, arg, (int) t->type); return false; }
    return true;
}
bool kiln_check_type(const struct kiln_tensor * t, enum kiln_type type, const char * op, const char * arg) {
    if (!kiln_check_tensor(t, op, arg)) return false;
    if (t->type != type) {
        kiln_set_error("%s: argument %s must be %s, got %s", op, arg, kiln_type_name(type), kiln_type_name(t->type));
        return false;
    }
    return true;
}
bool kiln_check_same_shape(const struct kiln_tensor * a, const struct kiln_tensor * b, const char * op) {
    if (!kiln_are_same_shape(a, b)) {
        char sa[96], sb[96];
        kiln_set_error("%s: shapes differ: %s vs %s", op, kiln_shape_str(a, sa, sizeof sa), kiln_shape_str(b, sb, sizeof sb));
        return false;
    }
    return true;
}
bool kiln_check_can_repeat(const struct kiln_tensor * b, const struct kiln_tensor * a, const char * op) {
    if (!kiln_can_repeat(b, a)) {
        char sa[96], sb[96];
        kiln_set_error("%s: %s does not broadcast to %s", op, kiln_shape_str(b, sb, sizeof sb), kiln_shape_str(a, sa, sizeof sa));
        return false;
    }
    return true;
}

/* --------------------------------------------------------- names, flags */

const char * kiln_get_name(const struct kiln_tensor * t) { return t->name; }
struct kiln_tensor * kiln_set_name(struct kiln_tensor * t, const char * name) {
    if (!t) return NULL;
    snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
    return t;
}
struct kiln_tensor * kiln_format_name(struct kiln_tensor * t, const char * fmt, ...) {
    if (!t) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof(t->name), fmt, ap);
    va_end(ap);
    return t;
}
void kiln_set_input (struct kiln_tensor * t) { if (t) t->flags |= KILN_TENSOR_FLAG_INPUT; }
void kiln_set_output(struct kiln_tensor * t) { if (t) t->flags |= KILN_TENSOR_FLAG_OUTPUT; }
void kiln_set_param (struct kiln_context * ctx, struct kiln_tensor * t) { (void) ctx; if (t) t->flags |= KILN_TENSOR_FLAG_PARAM; }
void kiln_set_loss  (struct kiln_tensor * t) { if (t) t->flags |= KILN_TENSOR_FLAG_LOSS; }

enum kiln_unary_op kiln_get_unary_op(const struct kiln_tensor * t) {
    return (enum kiln_unary_op) t->op_params[0];
}

/* ------------------------------------------------------ element access */

double kiln_elem_get_f64(enum kiln_type type, const void * p) {
    switch (type) {
        case KILN_TYPE_F32:  return *(const float *) p;
        case KILN_TYPE_F16:  return kiln_fp16_to_fp32(*(const kiln_fp16_t *) p);
        case KILN_TYPE_BF16: return kiln_bf16_to_fp32(*(const kiln_bf16_t *) p);
        case KILN_TYPE_F64:  return *(const double *) p;
        case KILN_TYPE_I8:   return *(const int8_t *) p;
        case KILN_TYPE_I16:  return *(const int16_t *) p;
        case KILN_TYPE_I32:  return *(const int32_t *) p;
        case KILN_TYPE_I64:  return (double) *(const int64_t *) p;
        default: return 0.0;
    }
}

static int64_t sat_i64(double v, double lo, double hi) {
    if (v != v) return 0;
    if (v < lo) v = lo;
    if (v > hi) v = hi;
    return (int64_t) v;
}

void kiln_elem_set_f64(enum kiln_type type, void * p, double v) {
    switch (type) {
        case KILN_TYPE_F32:  *(float *) p = (float) v; break;
        case KILN_TYPE_F16:  *(kiln_fp16_t *) p = kiln_fp32_to_fp16((float) v); break;
        case KILN_TYPE_BF16: *(kiln_bf16_t *) p = kiln_fp32_to_bf16((float) v); break;
        case KILN_TYPE_F64:  *(double *) p = v; break;
        /* float -> int conversions saturate instead of being undefined */
        case KILN_TYPE_I8:   *(int8_t *)  p = (int8_t)  sat_i64(v, INT8_MIN, INT8_MAX); break;
        case KILN_TYPE_I16:  *(int16_t *) p = (int16_t) sat_i64(v, INT16_MIN, INT16_MAX); break;
        case KILN_TYPE_I32:  *(int32_t *) p = (int32_t) sat_i64(v, INT32_MIN, INT32_MAX); break;
        case KILN_TYPE_I64:  *(int64_t *) p = sat_i64(v, -9.2233720368547758e18, 9.2233720368547748e18); break;
        default: break;
    }
}

static bool elem_access_ok(const struct kiln_tensor * t, const char * fn) {
    if (!t || !t->data) { kiln_set_error("%s: tensor %s", fn, t ? "has no data" : "is NULL"); return false; }
    if (kiln_is_quantized(t->type)) { kiln_set_error("%s: element access on quantized type %s", fn, kiln_type_name(t->type)); return false; }
    return true;
}

static bool index_ok(const struct kiln_tensor * t, int i0, int i1, int i2, int i3, const char * fn) {
    if (i0 < 0 || i1 < 0 || i2 < 0 || i3 < 0 || i0 >= t->ne[0] || i1 >= t->ne[1] || i2 >= t->ne[2] || i3 >= t->ne[3]) {
        kiln_set_error("%s: index (%d, %d, %d, %d) out of range for [%lld, %lld, %lld, %lld]", fn, i0, i1, i2, i3,
                       (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3]);
        return false;
    }
    return true;
}

void kiln_unravel_index(const struct kiln_tensor * t, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3) {
    const int64_t ne2 = t->ne[2], ne1 = t->ne[1], ne0 = t->ne[0];
    const int64_t j3 = i / (ne2 * ne1 * ne0);
    const int64_t j2 = (i - j3 * ne2 * ne1 * ne0) / (ne1 * ne0);
    const int64_t j1 = (i - j3 * ne2 * ne1 * ne0 - j2 * ne1 * ne0) / ne0;
    const int64_t j0 = i - j3 * ne2 * ne1 * ne0 - j2 * ne1 * ne0 - j1 * ne0;
    if (i0) *i0 = j0;
    if (i1) *i1 = j1;
    if (i2) *i2 = j2;
    if (i3) *i3 = j3;
}

float kiln_get_f32_nd(const struct kiln_tensor * t, int i0, int i1, int i2, int i3) {
    if (!elem_access_ok(t, "get_f32_nd") || !index_ok(t, i0, i1, i2, i3, "get_f32_nd")) return 0.0f;
    return (float) kiln_elem_get_f64(t->type, kiln_elem_ptr(t, i0, i1, i2, i3));
}
void kiln_set_f32_nd(const struct kiln_tensor * t, int i0, int i1, int i2, int i3, float v) {
    if (!elem_access_ok(t, "set_f32_nd") || !index_ok(t, i0, i1, i2, i3, "set_f32_nd")) return;
    kiln_elem_set_f64(t->type, kiln_elem_ptr(t, i0, i1, i2, i3), v);
}
int32_t kiln_get_i32_nd(const struct kiln_tensor * t, int i0, int i1, int i2, int i3) {
    if (!elem_access_ok(t, "get_i32_nd") || !index_ok(t, i0, i1, i2, i3, "get_i32_nd")) return 0;
    return (int32_t) sat_i64(kiln_elem_get_f64(t->type, kiln_elem_ptr(t, i0, i1, i2, i3)), INT32_MIN, INT32_MAX);
}
void kiln_set_i32_nd(const struct kiln_tensor * t, int i0, int i1, int i2, int i3, int32_t v) {
    if (!elem_access_ok(t, "set_i32_nd") || !index_ok(t, i0, i1, i2, i3, "set_i32_nd")) return;
    kiln_elem_set_f64(t->type, kiln_elem_ptr(t, i0, i1, i2, i3), v);
}

static bool flat_index(const struct kiln_tensor * t, int i, int64_t id[4], const char * fn) {
    if (i < 0 || i >= kiln_nelements(t)) {
        kiln_set_error("%s: index %d out of range (%lld elements)", fn, i, (long long) kiln_nelements(t));
        return false;
    }
    kiln_unravel_index(t, i, &id[0], &id[1], &id[2], &id[3]);
    return true;
}
float kiln_get_f32_1d(const struct kiln_tensor * t, int i) {
    int64_t id[4];
    if (!elem_access_ok(t, "get_f32_1d") || !flat_index(t, i, id, "get_f32_1d")) return 0.0f;
    return (float) kiln_elem_get_f64(t->type, kiln_elem_ptr(t, id[0], id[1], id[2], id[3]));
}
void kiln_set_f32_1d(const struct kiln_tensor * t, int i, float v) {
    int64_t id[4];
    if (!elem_access_ok(t, "set_f32_1d") || !flat_index(t, i, id, "set_f32_1d")) return;
    kiln_elem_set_f64(t->type, kiln_elem_ptr(t, id[0], id[1], id[2], id[3]), v);
}
int32_t kiln_get_i32_1d(const struct kiln_tensor * t, int i) {
    int64_t id[4];
    if (!elem_access_ok(t, "get_i32_1d") || !flat_index(t, i, id, "get_i32_1d")) return 0;
    return (int32_t) sat_i64(kiln_elem_get_f64(t->type, kiln_elem_ptr(t, id[0], id[1], id[2], id[3])), INT32_MIN, INT32_MAX);
}
void kiln_set_i32_1d(const struct kiln_tensor * t, int i, int32_t v) {
    int64_t id[4];
    if (!elem_access_ok(t, "set_i32_1d") || !flat_index(t, i, id, "set_i32_1d")) return;
    kiln_elem_set_f64(t->type, kiln_elem_ptr(t, id[0], id[1], id[2], id[3]), v);
}

static struct kiln_tensor * fill(struct kiln_tensor * t, double v, const char * fn) {
    if (!elem_access_ok(t, fn)) return t;
    const int64_t n = kiln_nelements(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t i0, i1, i2, i3;
        kiln_unravel_index(t, i, &i0, &i1, &i2, &i3);
        kiln_elem_set_f64(t->type, kiln_elem_ptr(t, i0, i1, i2, i3), v);
    }
    return t;
}
struct kiln_tensor * kiln_set_i32(struct kiln_tensor * t, int32_t v) { return fill(t, v, "set_i32"); }
struct kiln_tensor * kiln_set_f32(struct kiln_tensor * t, float v) { return fill(t, v, "set_f32"); }
struct kiln_tensor * kiln_set_zero(struct kiln_tensor * t) {
    if (t && t->data) memset(t->data, 0, kiln_nbytes(t));
    return t;
}
void * kiln_get_data(const struct kiln_tensor * t) { return t ? t->data : NULL; }
float * kiln_get_data_f32(const struct kiln_tensor * t) {
    return (t && t->type == KILN_TYPE_F32) ? (float *) t->data : NULL;
}
