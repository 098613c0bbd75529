#include "meta.h"

#include <string.h>

bool meta_str(const struct kiln_gguf_context * g, const char * key, char * out, size_t out_size) {
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0 || kiln_gguf_get_kv_type(g, id) != KILN_GGUF_TYPE_STRING || out_size == 0) {
        return false;
    }
    const char * s = kiln_gguf_get_val_str(g, id);
    size_t n = kiln_gguf_get_val_str_len(g, id);
    if (!s) {
        return false;
    }
    if (n > out_size - 1) {
        n = out_size - 1;
    }
    memcpy(out, s, n);
    out[n] = 0;
    return true;
}

bool meta_u32(const struct kiln_gguf_context * g, const char * key, uint32_t * out) {
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0) {
        return false;
    }
    switch (kiln_gguf_get_kv_type(g, id)) {
        case KILN_GGUF_TYPE_UINT8:  *out = kiln_gguf_get_val_u8(g, id); return true;
        case KILN_GGUF_TYPE_INT8:   *out = (uint32_t) kiln_gguf_get_val_i8(g, id); return true;
        case KILN_GGUF_TYPE_UINT16: *out = kiln_gguf_get_val_u16(g, id); return true;
        case KILN_GGUF_TYPE_INT16:  *out = (uint32_t) kiln_gguf_get_val_i16(g, id); return true;
        case KILN_GGUF_TYPE_UINT32: *out = kiln_gguf_get_val_u32(g, id); return true;
        case KILN_GGUF_TYPE_INT32:  *out = (uint32_t) kiln_gguf_get_val_i32(g, id); return true;
        case KILN_GGUF_TYPE_UINT64: *out = (uint32_t) kiln_gguf_get_val_u64(g, id); return true;
        case KILN_GGUF_TYPE_INT64:  *out = (uint32_t) kiln_gguf_get_val_i64(g, id); return true;
        default: return false;
    }
}

bool meta_f32(const struct kiln_gguf_context * g, const char * key, float * out) {
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0) {
        return false;
    }
    switch (kiln_gguf_get_kv_type(g, id)) {
        case KILN_GGUF_TYPE_FLOAT32: *out = kiln_gguf_get_val_f32(g, id); return true;
        case KILN_GGUF_TYPE_FLOAT64: *out = (float) kiln_gguf_get_val_f64(g, id); return true;
        default: {
            uint32_t u;
            if (meta_u32(g, key, &u)) {
                *out = (float) u;
                return true;
            }
            return false;
        }
    }
}

bool meta_bool(const struct kiln_gguf_context * g, const char * key, bool * out) {
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0 || kiln_gguf_get_kv_type(g, id) != KILN_GGUF_TYPE_BOOL) {
        return false;
    }
    *out = kiln_gguf_get_val_bool(g, id);
    return true;
}

int64_t meta_arr(const struct kiln_gguf_context * g, const char * key, enum kiln_gguf_type elem) {
    int64_t id = kiln_gguf_find_key(g, key);
    if (id < 0 || kiln_gguf_get_kv_type(g, id) != KILN_GGUF_TYPE_ARRAY) {
        return -1;
    }
    enum kiln_gguf_type at = kiln_gguf_get_arr_type(g, id);
    bool int32ish = (at == KILN_GGUF_TYPE_INT32 || at == KILN_GGUF_TYPE_UINT32) &&
                    (elem == KILN_GGUF_TYPE_INT32 || elem == KILN_GGUF_TYPE_UINT32);
    return (at == elem || int32ish) ? id : -1;
}
