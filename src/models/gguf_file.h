/*
 * gguf_file.h — a small GGUF v2/v3 reader for the model runner and the
 * tokenizers: key/value metadata and tensor infos over a byte buffer the
 * reader owns (read from a file or copied from memory). Private to
 * src/models; bounds-checked, so a truncated or hostile file is an error
 * with a message, never a crash.
 */
#ifndef KILN_MODELS_GGUF_FILE_H
#define KILN_MODELS_GGUF_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gf_type {
    GF_U8 = 0, GF_I8 = 1, GF_U16 = 2, GF_I16 = 3, GF_U32 = 4, GF_I32 = 5,
    GF_F32 = 6, GF_BOOL = 7, GF_STRING = 8, GF_ARRAY = 9, GF_U64 = 10,
    GF_I64 = 11, GF_F64 = 12,
};

struct gf_str {
    const char * s; /* not NUL-terminated: points into the buffer */
    uint64_t     n;
};

struct gf_kv {
    struct gf_str key;
    enum gf_type  type;
    enum gf_type  arr_type; /* for GF_ARRAY */
    uint64_t      arr_n;
    const uint8_t * data;   /* the value (or the first array element) */
    struct gf_str * strs;   /* for string arrays: arr_n entries (malloc'd) */
};

struct gf_tensor {
    struct gf_str name;
    uint32_t n_dims;
    int64_t  ne[4];
    uint32_t type;
    uint64_t offset; /* from the start of the data section */
};

struct gf_file {
    uint8_t * buf;
    size_t    size;
    uint32_t  version;
    int64_t   n_kv;
    struct gf_kv * kv;
    int64_t   n_tensors;
    struct gf_tensor * tensors;
    size_t    data_offset; /* where the data section starts in buf */
};

/* NULL on error with the message in err (err_size bytes) */
struct gf_file * gf_open_file(const char * path, char * err, size_t err_size);
struct gf_file * gf_open_buffer(const void * data, size_t size, char * err, size_t err_size);
void gf_close(struct gf_file * f);

int64_t gf_find(const struct gf_file * f, const char * key);
/* typed getters: false if absent or of another type */
bool gf_get_str (const struct gf_file * f, const char * key, char * out, size_t out_size);
bool gf_get_u32 (const struct gf_file * f, const char * key, uint32_t * out); /* any integer type */
bool gf_get_f32 (const struct gf_file * f, const char * key, float * out);    /* f32 or f64 */
bool gf_get_bool(const struct gf_file * f, const char * key, bool * out);
/* array access: NULL if absent or not an array of that element type */
const struct gf_kv * gf_get_arr(const struct gf_file * f, const char * key, enum gf_type elem_type);

#endif
