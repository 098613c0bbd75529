/*
 * kiln-gguf.h — reading and writing GGUF files (versions 2 and 3).
 *
 * Mirrors ggml's gguf.h name for name with the prefix kiln_ / KILN_.
 *
 * File layout (all little-endian):
 *   "GGUF" magic, u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv × { string key, u32 value type, value },
 *   n_tensors × { string name, u32 n_dims, n_dims × i64 ne, u32 type, u64 offset },
 *   padding to the alignment (general.alignment, default 32),
 *   the tensor data blob (each tensor at its offset, offsets aligned).
 * A string is a u64 byte count followed by that many bytes (no terminator).
 * An array value is u32 element type, u64 count, then the elements.
 *
 * Deviations from ggml, on purpose:
 *  - A GGUF file is untrusted input. Every count, length, offset and size is
 *    checked against the bytes available (and for integer overflow) before it
 *    is used; a bad file gives NULL and kiln_last_error() names the problem
 *    and its byte offset ("gguf: ... at byte offset N"). Nothing aborts.
 *  - general.alignment must be a power of two no larger than
 *    KILN_GGUF_MAX_ALIGNMENT (1 MiB).
 *  - Getters given a wrong key id or the wrong type return 0 / NULL and set
 *    the last error (ggml aborts). Setters return false on bad input.
 *  - kiln_gguf_init_from_buffer() and kiln_gguf_init_from_callback() read from
 *    memory or from a read callback (JavaScript streams a file into wasm
 *    memory through it, with tensor data read straight into the context).
 *  - init params have a third field, no_copy: with ctx != NULL and
 *    no_alloc == false, tensor data is not copied but points into the file
 *    mapping (init_from_file, natively; the pages are private copy-on-write)
 *    or into the caller's buffer (init_from_buffer, which must then outlive
 *    the tensors). The mapping lives until kiln_gguf_free(). Falls back to a
 *    copy when the file cannot be mapped or the data is not 16-byte aligned.
 *  - Tensor shapes are readable without a context: kiln_gguf_get_tensor_n_dims
 *    and kiln_gguf_get_tensor_ne.
 *  - A file read and written back is byte for byte identical (same version,
 *    key order, tensor order and offsets, and the same choice of padding
 *    after the metadata and after the last tensor), provided its padding
 *    bytes are zeros.
 *  - kiln_gguf_write_to_buffer() writes to memory.
 */
#ifndef KILN_GGUF_H
#define KILN_GGUF_H

#include "kiln.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_GGUF_MAGIC   "GGUF"
#define KILN_GGUF_VERSION 3

#define KILN_GGUF_KEY_GENERAL_ALIGNMENT "general.alignment"

#define KILN_GGUF_DEFAULT_ALIGNMENT 32

/* largest general.alignment accepted (ggml accepts any u32 power of two; a
 * tiny file claiming 2^31 would make its metadata 2 GiB when written) */
#define KILN_GGUF_MAX_ALIGNMENT (1u << 20)

/* types that can be stored as GGUF KV data (numeric values are the file's) */
enum kiln_gguf_type {
    KILN_GGUF_TYPE_UINT8   = 0,
    KILN_GGUF_TYPE_INT8    = 1,
    KILN_GGUF_TYPE_UINT16  = 2,
    KILN_GGUF_TYPE_INT16   = 3,
    KILN_GGUF_TYPE_UINT32  = 4,
    KILN_GGUF_TYPE_INT32   = 5,
    KILN_GGUF_TYPE_FLOAT32 = 6,
    KILN_GGUF_TYPE_BOOL    = 7,
    KILN_GGUF_TYPE_STRING  = 8,
    KILN_GGUF_TYPE_ARRAY   = 9,
    KILN_GGUF_TYPE_UINT64  = 10,
    KILN_GGUF_TYPE_INT64   = 11,
    KILN_GGUF_TYPE_FLOAT64 = 12,
    KILN_GGUF_TYPE_COUNT,
};

struct kiln_gguf_context;

struct kiln_gguf_init_params {
    /* with ctx: create tensors without data (shapes and types only) */
    bool no_alloc;

    /* if not NULL, create a kiln_context holding the file's tensors (named,
     * typed, shaped) and, unless no_alloc, their data; *ctx receives it and
     * the caller frees it with kiln_free() */
    struct kiln_context ** ctx;

    /* see the header comment: map instead of copy when possible */
    bool no_copy;
};

/* Delivers up to `size` bytes of the stream into dst; returns how many it
 * delivered (0: end of stream or error). Called with sizes up to 64 KiB for
 * metadata, and with whole tensors' sizes for tensor data. */
typedef size_t (*kiln_gguf_read_callback)(void * dst, size_t size, void * user_data);

KILN_API struct kiln_gguf_context * kiln_gguf_init_empty(void);
KILN_API struct kiln_gguf_context * kiln_gguf_init_from_file(
        const char *                 fname,
        struct kiln_gguf_init_params params);
/* the buffer is only read during the call (unless params.no_copy) */
KILN_API struct kiln_gguf_context * kiln_gguf_init_from_buffer(
        const void *                 data,
        size_t                       size,
        struct kiln_gguf_init_params params);
/* size: the total length of the stream (all checks are made against it);
 * bytes are pulled in file order, each exactly once */
KILN_API struct kiln_gguf_context * kiln_gguf_init_from_callback(
        kiln_gguf_read_callback      read,
        void *                       user_data,
        uint64_t                     size,
        struct kiln_gguf_init_params params);

KILN_API void kiln_gguf_free(struct kiln_gguf_context * ctx);

KILN_API const char * kiln_gguf_type_name(enum kiln_gguf_type type);

KILN_API uint32_t kiln_gguf_get_version    (const struct kiln_gguf_context * ctx);
KILN_API size_t   kiln_gguf_get_alignment  (const struct kiln_gguf_context * ctx);
KILN_API size_t   kiln_gguf_get_data_offset(const struct kiln_gguf_context * ctx);

KILN_API int64_t      kiln_gguf_get_n_kv(const struct kiln_gguf_context * ctx);
KILN_API int64_t      kiln_gguf_find_key(const struct kiln_gguf_context * ctx, const char * key); /* -1 if absent */
KILN_API const char * kiln_gguf_get_key (const struct kiln_gguf_context * ctx, int64_t key_id);

/* KILN_GGUF_TYPE_COUNT for a bad key id / a non-array */
KILN_API enum kiln_gguf_type kiln_gguf_get_kv_type (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API enum kiln_gguf_type kiln_gguf_get_arr_type(const struct kiln_gguf_context * ctx, int64_t key_id);

/* the value must have exactly this type: otherwise 0 / NULL and an error */
KILN_API uint8_t      kiln_gguf_get_val_u8  (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API int8_t       kiln_gguf_get_val_i8  (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API uint16_t     kiln_gguf_get_val_u16 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API int16_t      kiln_gguf_get_val_i16 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API uint32_t     kiln_gguf_get_val_u32 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API int32_t      kiln_gguf_get_val_i32 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API float        kiln_gguf_get_val_f32 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API uint64_t     kiln_gguf_get_val_u64 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API int64_t      kiln_gguf_get_val_i64 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API double       kiln_gguf_get_val_f64 (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API bool         kiln_gguf_get_val_bool(const struct kiln_gguf_context * ctx, int64_t key_id);
/* NUL-terminated; the stored string may contain NULs: see _str_len */
KILN_API const char * kiln_gguf_get_val_str (const struct kiln_gguf_context * ctx, int64_t key_id);
KILN_API size_t       kiln_gguf_get_val_str_len(const struct kiln_gguf_context * ctx, int64_t key_id);
/* pointer to a scalar non-string value */
KILN_API const void * kiln_gguf_get_val_data(const struct kiln_gguf_context * ctx, int64_t key_id);
/* number of elements of an array value */
KILN_API size_t       kiln_gguf_get_arr_n   (const struct kiln_gguf_context * ctx, int64_t key_id);
/* first element of a non-string array (bools are stored as int8) */
KILN_API const void * kiln_gguf_get_arr_data(const struct kiln_gguf_context * ctx, int64_t key_id);
/* ith string of a string array (NUL-terminated) and its length */
KILN_API const char * kiln_gguf_get_arr_str (const struct kiln_gguf_context * ctx, int64_t key_id, size_t i);
KILN_API size_t       kiln_gguf_get_arr_str_len(const struct kiln_gguf_context * ctx, int64_t key_id, size_t i);

KILN_API int64_t        kiln_gguf_get_n_tensors    (const struct kiln_gguf_context * ctx);
KILN_API int64_t        kiln_gguf_find_tensor      (const struct kiln_gguf_context * ctx, const char * name); /* -1 if absent */
/* offset of the tensor's data from kiln_gguf_get_data_offset() */
KILN_API size_t         kiln_gguf_get_tensor_offset(const struct kiln_gguf_context * ctx, int64_t tensor_id);
KILN_API const char *   kiln_gguf_get_tensor_name  (const struct kiln_gguf_context * ctx, int64_t tensor_id);
KILN_API enum kiln_type kiln_gguf_get_tensor_type  (const struct kiln_gguf_context * ctx, int64_t tensor_id);
KILN_API size_t         kiln_gguf_get_tensor_size  (const struct kiln_gguf_context * ctx, int64_t tensor_id);
KILN_API int            kiln_gguf_get_tensor_n_dims(const struct kiln_gguf_context * ctx, int64_t tensor_id);
/* ne[0..3] (dims past n_dims are 1); NULL for a bad id */
KILN_API const int64_t * kiln_gguf_get_tensor_ne   (const struct kiln_gguf_context * ctx, int64_t tensor_id);

/* removes the key if present; returns the id it had (-1 if absent) */
KILN_API int64_t kiln_gguf_remove_key(struct kiln_gguf_context * ctx, const char * key);

/* replace an existing KV pair (removed, then appended at the back, like
 * ggml) or append a new one.
 * general.alignment accepts only a u32 power of two up to
 * KILN_GGUF_MAX_ALIGNMENT; changing it re-lays
 * the tensor data out contiguously. */
KILN_API bool kiln_gguf_set_val_u8  (struct kiln_gguf_context * ctx, const char * key, uint8_t      val);
KILN_API bool kiln_gguf_set_val_i8  (struct kiln_gguf_context * ctx, const char * key, int8_t       val);
KILN_API bool kiln_gguf_set_val_u16 (struct kiln_gguf_context * ctx, const char * key, uint16_t     val);
KILN_API bool kiln_gguf_set_val_i16 (struct kiln_gguf_context * ctx, const char * key, int16_t      val);
KILN_API bool kiln_gguf_set_val_u32 (struct kiln_gguf_context * ctx, const char * key, uint32_t     val);
KILN_API bool kiln_gguf_set_val_i32 (struct kiln_gguf_context * ctx, const char * key, int32_t      val);
KILN_API bool kiln_gguf_set_val_f32 (struct kiln_gguf_context * ctx, const char * key, float        val);
KILN_API bool kiln_gguf_set_val_u64 (struct kiln_gguf_context * ctx, const char * key, uint64_t     val);
KILN_API bool kiln_gguf_set_val_i64 (struct kiln_gguf_context * ctx, const char * key, int64_t      val);
KILN_API bool kiln_gguf_set_val_f64 (struct kiln_gguf_context * ctx, const char * key, double       val);
KILN_API bool kiln_gguf_set_val_bool(struct kiln_gguf_context * ctx, const char * key, bool         val);
KILN_API bool kiln_gguf_set_val_str (struct kiln_gguf_context * ctx, const char * key, const char * val);
/* a string of len bytes (may contain NULs) */
KILN_API bool kiln_gguf_set_val_str_n(struct kiln_gguf_context * ctx, const char * key, const char * val, size_t len);

/* a new array of n elements of `type` (not STRING/ARRAY), copied from data */
KILN_API bool kiln_gguf_set_arr_data(struct kiln_gguf_context * ctx, const char * key, enum kiln_gguf_type type, const void * data, size_t n);
/* a new array of n NUL-terminated strings, copied */
KILN_API bool kiln_gguf_set_arr_str (struct kiln_gguf_context * ctx, const char * key, const char ** data, size_t n);

/* set or add all KV pairs of src */
KILN_API bool kiln_gguf_set_kv(struct kiln_gguf_context * ctx, const struct kiln_gguf_context * src);

/* add a tensor (name unique, contiguous); its data is laid out after the
 * previous tensors; the data pointer is kept (not copied) for writing */
KILN_API bool kiln_gguf_add_tensor(struct kiln_gguf_context * ctx, const struct kiln_tensor * tensor);

/* changes the type; the offsets of the following tensors are recomputed so
 * the data stays one contiguous (padded) block; the data pointer is cleared */
KILN_API bool kiln_gguf_set_tensor_type(struct kiln_gguf_context * ctx, const char * name, enum kiln_type type);

/* data must hold kiln_gguf_get_tensor_size() bytes, until written */
KILN_API bool kiln_gguf_set_tensor_data(struct kiln_gguf_context * ctx, const char * name, const void * data);

/* write the whole context (or only the metadata, padding included) */
KILN_API bool kiln_gguf_write_to_file(const struct kiln_gguf_context * ctx, const char * fname, bool only_meta);

/* size in bytes of the metadata (header, KV pairs, tensor infos, padding) */
KILN_API size_t kiln_gguf_get_meta_size(const struct kiln_gguf_context * ctx);
/* writes the metadata to data (kiln_gguf_get_meta_size() bytes) */
KILN_API bool   kiln_gguf_get_meta_data(const struct kiln_gguf_context * ctx, void * data);

/* size in bytes of what kiln_gguf_write_to_buffer() writes (0 on error) */
KILN_API size_t kiln_gguf_get_write_size(const struct kiln_gguf_context * ctx, bool only_meta);
/* writes into buf (buf_size bytes); returns the bytes written, 0 on error
 * (buffer too small, a tensor without data) */
KILN_API size_t kiln_gguf_write_to_buffer(const struct kiln_gguf_context * ctx, void * buf, size_t buf_size, bool only_meta);

#ifdef __cplusplus
}
#endif

#endif /* KILN_GGUF_H */
