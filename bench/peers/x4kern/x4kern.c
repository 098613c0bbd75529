/*
 * x4kern.c — a wasm kernel A/B, not a test: one weight type's three ways
 * through a mat-vec and a prompt batch on the current kernel table, same
 * inputs, outputs hashed (bit patterns). Built standalone against a
 * relaxed build's libkiln.a (build.sh) and driven from JS (run.mjs: Node;
 * page.mjs: Chromium), which times each call.
 *
 * Weights: N rows of K values, random quant bytes, normal block scales
 * (fp16 0x2000 + i % 100; Q4_K: d and dmin, Q6_K: d), kept plain and
 * repacked (kiln_repack_tensor; a type the table does not repack has no
 * repacked copy, and variants 1, 3, 4 then do nothing: has_x4() == 0).
 * Activations: NC rows of random floats quantized by the table's from_float.
 *   variant 0  mat-vec, plain:   vec_dot per row (the path of a type the
 *                                table does not repack), activation row 0
 *   variant 1  mat-vec, x4:      vec_dot_x4 per group (of rep rows: 4, Q4_K 8)
 *   variant 2  batch, plain:     NC activation rows, mul_mat's chunks (48
 *                                weight rows x 24 activation rows, 64 where
 *                                the table has vec_dot_rows for the type),
 *                                vec_dot per (row, activation row), or
 *                                vec_dot_rows per chunk where there is one
 *                                (mul_mat's path for plain Q5_K / Q6_K)
 *   variant 3  batch, x4:        the same chunks, vec_dot_x4 per group and
 *                                activation row
 *   variant 4  batch, batched:   the same chunks (64 activation rows where
 *                                the table marks gemm_wide), gemm_x4 per
 *                                group over the chunk's activation rows
 * hash(v): FNV-1a over the bits of variant v's outputs (the batch ones:
 * all NC x N; the mat-vec ones: N).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kiln.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"

#define EXPORT(name) __attribute__((export_name(name)))
#define CH0 48 /* ops_matmul.c MM_BLOCK0 */
#define CH1 24 /* ops_matmul.c MM_BLOCK1 */

static const struct kiln_kernels * k;
static enum kiln_type type;
static int64_t K, N, NC;
static size_t rs, ys;
static char * plain, * packed, * act;
static float * out[5];

static uint32_t rnd_state = 1;
static uint32_t rnd(void) { rnd_state = rnd_state * 1664525u + 1013904223u; return rnd_state; }

/* the fp16 block scales of one block of t at b (offsets), set to normal values */
static void set_scales(enum kiln_type t, unsigned char * b, size_t i) {
    const kiln_fp16_t h = (kiln_fp16_t) (0x2000 + i % 100);
    switch (t) {
        case KILN_TYPE_Q4_K: memcpy(b, &h, 2); memcpy(b + 2, &h, 2); break;       /* d, dmin */
        case KILN_TYPE_Q6_K: memcpy(b + 208, &h, 2); break;                       /* d after ql, qh, scales */
        default: memcpy(b, &h, 2); break;
    }
}

static int rep, wide;

EXPORT("setup") int setup(int t, int k_, int n_, int nc) {
    k = kiln_kernels();
    type = (enum kiln_type) t; K = k_; N = n_; NC = nc;
    const int64_t blk = kiln_blck_size(type);
    if (!k->vec_dot[type] || N % 8 || K % blk) return -1;
    rs = kiln_row_size(type, K);
    const enum kiln_type vt = k->vec_dot_type[type];
    ys = kiln_row_size(vt, K);
    struct kiln_init_params p = { (size_t) N * rs + (1 << 20), NULL, false };
    struct kiln_context * ctx = kiln_init(p);
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, type, K, N);
    if (!w) return -2;
    const size_t bs = kiln_type_size(type);
    unsigned char * b = w->data;
    for (size_t i = 0; i < (size_t) N * rs; i++) b[i] = (unsigned char) (rnd() >> 24);
    for (size_t i = 0; i < (size_t) N * rs; i += bs) {
        set_scales(type, b + i, i / bs);
        if (type == KILN_TYPE_Q8_0) {
            for (size_t j = 2; j < bs; j++) if (b[i + j] == 0x80) b[i + j] = 0x81; /* ggml's quantizers: -127..127 */
        }
    }
    plain = malloc((size_t) N * rs);
    memcpy(plain, w->data, (size_t) N * rs);
    packed = NULL;
    rep = 0;
    if (k->vec_dot_x4[type] && kiln_repack_tensor(w)) {
        if (kiln_repack_scale_shift(w) != 0) return -3;
        packed = w->data;
        rep = kiln_repacked_rows(w);
    }
    wide = k->gemm_wide[type];
    act = malloc((size_t) NC * ys);
    float * f = malloc(sizeof(float) * (size_t) K);
    for (int64_t c = 0; c < NC; c++) {
        for (int64_t i = 0; i < K; i++) f[i] = (float) ((int32_t) rnd()) * 0x1p-31f;
        k->from_float[vt](f, act + c * ys, K);
    }
    free(f);
    for (int v = 0; v < 5; v++) out[v] = calloc((size_t) (v < 2 ? 1 : NC) * (size_t) N, sizeof(float));
    return 0;
}

/* bytes of the weights (one pass of a mat-vec variant reads them all) */
EXPORT("weight_bytes") double weight_bytes(void) { return (double) N * (double) rs; }

/* whether the table repacks the type (variants 1, 3, 4 run) */
EXPORT("has_x4") int has_x4(void) { return packed != NULL; }

EXPORT("isa") const char * isa(void) { return k->isa; }

/* before setup: the SIMD128 table instead of the best one */
EXPORT("use_simd128") void use_simd128(void) { kiln_cpu_force_isa("wasm_simd128"); }

EXPORT("run") void run(int v) {
    float * o = out[v];
    if (!packed && (v == 1 || v >= 3)) return;
    const kiln_vec_dot_rows_t rows = k->vec_dot_rows[type];
    switch (v) {
        case 0:
            for (int64_t i = 0; i < N; i++) k->vec_dot[type](K, &o[i], plain + i * rs, act);
            break;
        case 1:
            for (int64_t i = 0; i < N; i += rep) k->vec_dot_x4[type](K, &o[i], packed + i * rs, act);
            break;
        default: {
            /* mul_mat's src1 block: 64 rows for vec_dot_rows (plain) and gemm_wide (batched) */
            const int64_t ch1 = (v == 2 && rows) || (v == 4 && wide) ? 64 : CH1;
            for (int64_t i0 = 0; i0 < N; i0 += CH0) {
                const int64_t i1 = i0 + CH0 < N ? i0 + CH0 : N;
                for (int64_t j0 = 0; j0 < NC; j0 += ch1) {
                    const int64_t j1 = j0 + ch1 < NC ? j0 + ch1 : NC;
                    if (v == 2 && rows) {
                        rows(K, (int) (i1 - i0), (int) (j1 - j0), &o[j0 * N + i0], (size_t) N, plain + i0 * rs, rs, act + j0 * ys, ys);
                    } else if (v == 2) {
                        for (int64_t j = j0; j < j1; j++) {
                            for (int64_t i = i0; i < i1; i++) k->vec_dot[type](K, &o[j * N + i], plain + i * rs, act + j * ys);
                        }
                    } else if (v == 3) {
                        for (int64_t i = i0; i < i1; i += rep) {
                            for (int64_t j = j0; j < j1; j++) k->vec_dot_x4[type](K, &o[j * N + i], packed + i * rs, act + j * ys);
                        }
                    } else {
                        for (int64_t i = i0; i < i1; i += rep) {
                            if (k->gemm_x4[type]) k->gemm_x4[type](K, (int) (j1 - j0), &o[j0 * N + i], (size_t) N, packed + i * rs, act + j0 * ys, ys);
                            else for (int64_t j = j0; j < j1; j++) k->vec_dot_x4[type](K, &o[j * N + i], packed + i * rs, act + j * ys);
                        }
                    }
                }
            }
        }
    }
}

EXPORT("hash") uint32_t hash(int v) {
    uint32_t h = 2166136261u;
    const unsigned char * p = (const unsigned char *) out[v];
    for (size_t i = 0; i < (size_t) (v < 2 ? 1 : NC) * (size_t) N * sizeof(float); i++) h = (h ^ p[i]) * 16777619u;
    return h;
}

/* whether the table has a batched kernel for the type (else variant 4 is variant 3) */
EXPORT("has_gemm") int has_gemm(void) { return k->gemm_x4[type] != NULL; }
