/*
 * gguf_internal.h — the in-memory form of a GGUF context, shared by the
 * reader, the writer and the accessors.
 */
#ifndef KILN_GGUF_INTERNAL_H
#define KILN_GGUF_INTERNAL_H

#include "kiln-gguf.h"
#include "internal.h"

/* One key-value pair. Scalars are arrays of one element, so every value has
 * the same shape: n elements of elem_type. For strings, data holds n + 1
 * offsets into blob, each string followed by a NUL there (string i is
 * blob + offs[i], offs[i + 1] - offs[i] - 1 bytes long). */
struct kiln_gguf_kv {
    char *   key;       /* NUL-terminated; may contain NULs (key_len says) */
    size_t   key_len;
    uint32_t type;      /* KILN_GGUF_TYPE_*, ARRAY for arrays */
    uint32_t elem_type; /* the element type (== type for scalars) */
    uint64_t n;         /* element count (1 for scalars) */
    void *   data;      /* n * elem size bytes; strings: uint64_t offs[n + 1] */
    char *   blob;      /* string bytes (strings only) */
};

struct kiln_gguf_tensor_info {
    char           name[KILN_MAX_NAME];
    uint32_t       n_dims;
    int64_t        ne[KILN_MAX_DIMS];
    enum kiln_type type;
    uint64_t       offset; /* from the start of the data section */
    uint64_t       size;   /* bytes */
    const void *   data;   /* for writing; NULL when not available */
};

struct kiln_gguf_context {
    uint32_t version;
    size_t   alignment;
    uint64_t data_offset; /* as read (0 for contexts not read from a file) */

    struct kiln_gguf_kv * kv;
    int64_t n_kv;
    int64_t cap_kv;

    struct kiln_gguf_tensor_info * ti;
    int64_t n_tensors;
    int64_t cap_tensors;

    /* how the file read was padded, so that writing it back is identical:
     * pad_meta: the file has padding after the metadata even without tensor
     * data; pad_tail: the data section ends padded to the alignment */
    bool pad_meta;
    bool pad_tail;

    /* tensor data points into the input buffer (no_copy was honored) */
    bool data_in_input;

    /* a file mapping that tensor data points into (no_copy), or NULL */
    void * map;
    size_t map_size;
};

/* indices of the tensors sorted by data offset (ties: by index); malloc'd,
 * NULL (with an error) when out of memory; n_tensors == 0 gives non-NULL */
int64_t * kiln_gguf_sorted_by_offset(const struct kiln_gguf_context * ctx);

/* element size of a KV type (0 for STRING, ARRAY and invalid types) */
size_t kiln_gguf_type_size(uint32_t type);

/* bytes of a contiguous tensor; false on overflow or a bad shape */
bool kiln_gguf_tensor_bytes(enum kiln_type type, const int64_t ne[KILN_MAX_DIMS], uint64_t * bytes);

/* appends a kv (takes ownership of its allocations); false when out of memory */
bool kiln_gguf_append_kv(struct kiln_gguf_context * ctx, struct kiln_gguf_kv * kv);
void kiln_gguf_free_kv(struct kiln_gguf_kv * kv);
bool kiln_gguf_reserve_tensors(struct kiln_gguf_context * ctx, int64_t n);

/* a printable copy of (possibly hostile) bytes for messages */
const char * kiln_gguf_printable(const char * s, size_t len, char * buf, size_t size);

/* a tensor whose data overlaps an earlier one (by offset), -1 if none,
 * -2 when out of memory (error set) */
int64_t kiln_gguf_find_overlap(const struct kiln_gguf_context * ctx);

/* offset of the first byte after the data of all tensors (0 if none) */
uint64_t kiln_gguf_data_end(const struct kiln_gguf_context * ctx);

#endif /* KILN_GGUF_INTERNAL_H */
