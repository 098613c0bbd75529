/* strmap.h — open-addressing hash map from byte strings to int32 (private).
 * Keys are copied into the map. */
#ifndef KILN_MODELS_STRMAP_H
#define KILN_MODELS_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct strmap_slot {
    char *   key;
    uint32_t len;
    int32_t  val;
};

struct strmap {
    struct strmap_slot * slots;
    size_t cap;   /* power of two */
    size_t count;
};

bool strmap_init(struct strmap * m, size_t expected);
void strmap_free(struct strmap * m);
/* overwrite: replace an existing value; returns false when out of memory */
bool strmap_put(struct strmap * m, const char * key, size_t len, int32_t val, bool overwrite);
/* -1 when absent */
int32_t strmap_get(const struct strmap * m, const char * key, size_t len);

#endif
