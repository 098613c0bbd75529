/*
 * cand_sort.c — sorting sampler candidates (cand_sort.h). The radix sort
 * works on one 64-bit key per candidate: the logit's bits mapped so that
 * unsigned order is descending logit order (high 32 bits), then the id
 * (low 32 bits); sorting the keys ascending is kiln_cand_cmp's order, and
 * each candidate is rebuilt from its key. -0.0 is keyed as +0.0, as the
 * comparison treats them as equal.
 */
#include "cand_sort.h"

#include <stdlib.h>
#include <string.h>

int kiln_cand_cmp(const void * a, const void * b) {
    const struct kiln_cand * x = a, * y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* below this, qsort's constant factors win */
#define RADIX_MIN 2048

static inline uint32_t desc_bits(float f) {
    uint32_t u;
    if (f == 0.0f) f = 0.0f;
    memcpy(&u, &f, 4);
    /* ascending order of floats as unsigned, then complemented */
    const uint32_t asc = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return ~asc;
}

static inline float from_desc_bits(uint32_t d) {
    const uint32_t asc = ~d;
    const uint32_t u = (asc & 0x80000000u) ? (asc & 0x7fffffffu) : ~asc;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

void kiln_cand_sort(struct kiln_cand * c, int32_t n) {
    if (n < 2) return;
    uint64_t * key = n >= RADIX_MIN ? malloc(sizeof(uint64_t) * 2 * (size_t) n) : NULL;
    if (!key) {
        qsort(c, (size_t) n, sizeof(struct kiln_cand), kiln_cand_cmp);
        return;
    }
    uint64_t * tmp = key + n;
    uint64_t all_or = 0, all_and = ~(uint64_t) 0;
    for (int32_t i = 0; i < n; i++) {
        key[i] = (uint64_t) desc_bits(c[i].logit) << 32 | (uint32_t) c[i].id;
        all_or |= key[i];
        all_and &= key[i];
    }
    /* LSD, 8 bits a pass; a byte that is the same in every key is skipped */
    for (int shift = 0; shift < 64; shift += 8) {
        if ((((all_or ^ all_and) >> shift) & 0xff) == 0) continue;
        size_t count[257] = { 0 };
        for (int32_t i = 0; i < n; i++) count[((key[i] >> shift) & 0xff) + 1]++;
        for (int b = 0; b < 256; b++) count[b + 1] += count[b];
        for (int32_t i = 0; i < n; i++) tmp[count[(key[i] >> shift) & 0xff]++] = key[i];
        uint64_t * t = key;
        key = tmp;
        tmp = t;
    }
    for (int32_t i = 0; i < n; i++) {
        c[i].id = (kiln_token) (uint32_t) key[i];
        c[i].logit = from_desc_bits((uint32_t) (key[i] >> 32));
    }
    free(key < tmp ? key : tmp);
}
