/* meta.h — typed GGUF metadata lookups over kiln-gguf.h that accept any
 * integer / float width (files in the wild vary), private to src/models. */
#ifndef KILN_MODELS_META_H
#define KILN_MODELS_META_H

#include "kiln-gguf.h"

bool    meta_str (const struct kiln_gguf_context * g, const char * key, char * out, size_t out_size);
bool    meta_u32 (const struct kiln_gguf_context * g, const char * key, uint32_t * out);
bool    meta_f32 (const struct kiln_gguf_context * g, const char * key, float * out);
bool    meta_bool(const struct kiln_gguf_context * g, const char * key, bool * out);
/* key id of an array whose elements have this type (i32/u32 interchangeable), or -1 */
int64_t meta_arr (const struct kiln_gguf_context * g, const char * key, enum kiln_gguf_type elem);

#endif
