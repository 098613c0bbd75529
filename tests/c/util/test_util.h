/*
 * test_util.h — the small harness every C test uses: checks that count,
 * deterministic random data, tensor <-> double conversion for references,
 * NMSE, and running a graph on N threads.
 *
 * A test binary prints "N passed, N failed" as its last line and exits
 * non-zero when anything failed.
 */
#ifndef KILN_TEST_UTIL_H
#define KILN_TEST_UTIL_H

#include "kiln.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int tu_passed;
extern int tu_failed;
extern const char * tu_case; /* name of the case being run, for messages */

/* record one check; prints the failure with file:line */
int tu_check(int ok, const char * file, int line, const char * fmt, ...);
#define CHECK(cond, ...) tu_check(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
/* close the run: prints the summary line, returns the exit code */
int tu_finish(void);

/* deterministic PRNG (xorshift) */
void     tu_seed(uint64_t seed);
uint64_t tu_rand_u64(void);
float    tu_rand_uniform(float lo, float hi);

/* fill a tensor (any float/int type; contiguous or not) with uniform values */
void tu_fill_uniform(struct kiln_tensor * t, float lo, float hi);
/* read any float/int tensor (any strides) into a freshly malloc'd double
 * array in logical order (i0 fastest) */
double * tu_to_f64(const struct kiln_tensor * t);
/* a 2-d weight of any type (quantized ones dequantized row by row) as doubles, ne0 * ne1, row-major */
double * tu_weights_f64(const struct kiln_tensor * t);
/* write a logical-order double array into a tensor */
void tu_from_f64(struct kiln_tensor * t, const double * v);

/* a whole file, malloc'd with a NUL after its bytes (so text files are
 * strings); *size (may be NULL) gets the byte count; NULL if unreadable */
char * tu_read_file(const char * path, size_t * size);

/* normalized mean squared error: sum((a-b)^2) / sum(b^2) (b = reference) */
double tu_nmse(const double * out, const double * ref, int64_t n);
/* largest absolute difference */
double tu_max_abs_diff(const double * out, const double * ref, int64_t n);

/* build a graph for `out` and compute it with n_threads; returns the status */
enum kiln_status tu_compute(struct kiln_context * ctx, struct kiln_tensor * out, int n_threads);

/* new context of mem_size bytes (allocating tensors) */
struct kiln_context * tu_ctx(size_t mem_size);

#endif
