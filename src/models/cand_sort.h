/*
 * cand_sort.h — the sampler's candidate list and its sort: logits
 * descending, ties by ascending token id (a total order, so every correct
 * sort gives the same list and the same draws).
 */
#ifndef KILN_CAND_SORT_H
#define KILN_CAND_SORT_H

#include "kiln-llama.h"

struct kiln_cand { kiln_token id; float logit; };

/* qsort's comparison for that order */
int kiln_cand_cmp(const void * a, const void * b);

/* sorts c[0..n) in kiln_cand_cmp's order: a radix sort over (logit, id)
 * keys for long lists (a 262,144-token vocabulary: ~15x faster than
 * qsort), qsort for short ones or when scratch memory cannot be had.
 * A NaN logit sorts by its bits (qsort gives it no defined place). */
void kiln_cand_sort(struct kiln_cand * c, int32_t n);

#endif
