#include "strmap.h"

#include <stdlib.h>
#include <string.h>

static uint64_t hash_bytes(const char * s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t) s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

bool strmap_init(struct strmap * m, size_t expected) {
    size_t cap = 16;
    while (cap < expected * 2) {
        cap *= 2;
    }
    m->slots = calloc(cap, sizeof(struct strmap_slot));
    m->cap = m->slots ? cap : 0;
    m->count = 0;
    return m->slots != NULL;
}

void strmap_free(struct strmap * m) {
    for (size_t i = 0; i < m->cap; i++) {
        free(m->slots[i].key);
    }
    free(m->slots);
    m->slots = NULL;
    m->cap = m->count = 0;
}

static struct strmap_slot * find_slot(const struct strmap * m, const char * key, size_t len) {
    size_t i = (size_t) hash_bytes(key, len) & (m->cap - 1);
    for (;;) {
        struct strmap_slot * s = &m->slots[i];
        if (!s->key || (s->len == len && memcmp(s->key, key, len) == 0)) {
            return s;
        }
        i = (i + 1) & (m->cap - 1);
    }
}

static bool grow(struct strmap * m) {
    struct strmap old = *m;
    if (!strmap_init(m, old.cap)) {
        *m = old;
        return false;
    }
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].key) {
            *find_slot(m, old.slots[i].key, old.slots[i].len) = old.slots[i];
            m->count++;
        }
    }
    free(old.slots);
    return true;
}

bool strmap_put(struct strmap * m, const char * key, size_t len, int32_t val, bool overwrite) {
    if ((m->count + 1) * 2 > m->cap && !grow(m)) {
        return false;
    }
    struct strmap_slot * s = find_slot(m, key, len);
    if (s->key) {
        if (overwrite) {
            s->val = val;
        }
        return true;
    }
    s->key = malloc(len + 1);
    if (!s->key) {
        return false;
    }
    memcpy(s->key, key, len);
    s->key[len] = 0;
    s->len = (uint32_t) len;
    s->val = val;
    m->count++;
    return true;
}

int32_t strmap_get(const struct strmap * m, const char * key, size_t len) {
    if (!m->cap) {
        return -1;
    }
    const struct strmap_slot * s = find_slot(m, key, len);
    return s->key ? s->val : -1;
}
