/*
 * ops_matmul.c — forward kernel of mul_mat (and the activation handling
 * mul_mat_id shares, see ops_matmul.h).
 *
 * dst[i, j, i2, i3] = dot(src0 row i of matrix (i2/r2, i3/r3), src1 row j of
 * (i2, i3)). Work is cut into fixed blocks (src0 rows x src1 rows of one
 * batch) handed out by the atomic chunk counter. Block sizes do not depend
 * on the thread count, and every output element is computed by the same
 * kernel in the same order whichever thread takes its block, so results
 * are bit-identical for any number of threads.
 */
#include "ops_matmul.h"
#include "repack.h"

#include <limits.h>
#include <math.h>

bool kiln_mm_act_plan(const struct kiln_kernels * k, const char * op, const struct kiln_tensor * src0,
                      const struct kiln_tensor * src1, struct kiln_mm_act * p) {
    memset(p, 0, sizeof(*p));
    const enum kiln_type t0 = src0->type;
    if (!k->vec_dot[t0] || k->vec_dot_type[t0] >= KILN_TYPE_COUNT) {
        kiln_set_error("%s: weights of type %s are not supported yet (no %s dot product kernel)", op, kiln_type_name(t0), k->isa);
        return false;
    }
    p->vdt = k->vec_dot_type[t0];
    p->nrows = src1->ne[1] * src1->ne[2] * src1->ne[3];
    const int64_t blck = kiln_blck_size(p->vdt);
    if (src1->ne[0] % blck != 0) {
        kiln_set_error("%s: row length %lld is not a multiple of the %s block size %lld", op,
                       (long long) src1->ne[0], kiln_type_name(p->vdt), (long long) blck);
        return false;
    }
    if (src1->type == p->vdt && src1->nb[0] == kiln_type_size(src1->type)) return true; /* used in place */
    if (!k->from_float[p->vdt]) {
        kiln_set_error("%s: no conversion of activations to %s (needed by %s weights)", op, kiln_type_name(p->vdt), kiln_type_name(t0));
        return false;
    }
    p->convert = true;
    p->x4_rule = k->q8_K_x4_rule && t0 == KILN_TYPE_Q4_K && kiln_repacked_rows(src0) > 0;
    p->stage = !(src1->type == KILN_TYPE_F32 && src1->nb[0] == sizeof(float));
    p->row_size = kiln_row_size(p->vdt, src1->ne[0]);
    p->act_bytes = KILN_PAD(p->row_size * (size_t) p->nrows, KILN_MM_ALIGN);
    p->stage_bytes = p->stage ? KILN_PAD((size_t) src1->ne[0] * sizeof(float), KILN_MM_ALIGN) : 0;
    return true;
}

void kiln_mm_act_want_aux(const struct kiln_kernels * k, const struct kiln_tensor * src0, struct kiln_mm_act * p) {
    if (!p->convert || p->vdt != KILN_TYPE_Q8_0 || (src0->type != KILN_TYPE_Q4_0 && src0->type != KILN_TYPE_Q8_0) ||
        !k->gemm_x16[src0->type] || kiln_repacked_rows(src0) == 0 || p->nrows < 2) return;
    p->aux8 = src0->type == KILN_TYPE_Q8_0;
    p->aux_off = p->act_bytes;
    p->aux_row = (p->aux8 ? sizeof(kiln_q8_0_aux8) : sizeof(kiln_q8_0_aux)) * (size_t) (p->row_size / sizeof(block_q8_0));
    p->act_bytes += KILN_PAD(p->aux_row * (size_t) p->nrows, KILN_MM_ALIGN);
}

void kiln_mm_act_want_private(struct kiln_mm_act * p) {
    if (p->convert && p->nrows == 1 && !p->aux_off) p->priv = true;
}

/* converted rows: one copy, or one per thread (priv) */
static size_t act_rows_bytes(const struct kiln_mm_act * p, int n_threads) {
    return p->act_bytes * (p->priv ? (size_t) n_threads : 1);
}

size_t kiln_mm_act_work(const struct kiln_mm_act * p, int n_threads) {
    return p->convert ? act_rows_bytes(p, n_threads) + p->stage_bytes * (size_t) n_threads : 0;
}

void kiln_mm_act_convert(const struct kiln_compute_params * params, const struct kiln_kernels * k,
                         const struct kiln_tensor * src1, const struct kiln_mm_act * p) {
    if (!p->convert) return;
    const int64_t ne10 = src1->ne[0], ne11 = src1->ne[1], ne12 = src1->ne[2];
    float * stage = p->stage ? (float *) ((char *) params->wdata + act_rows_bytes(p, params->nth) + p->stage_bytes * (size_t) params->ith) : NULL;
    const size_t ts = kiln_type_size(src1->type);
    int64_t r0 = 0, r1 = 1;
    if (!p->priv) kiln_split_rows(p->nrows, params->ith, params->nth, &r0, &r1);
    const int64_t ng4 = p->x4_rule && ne11 > 3 ? ne11 - ne11 % 4 : 0; /* rows of full groups of 4 */
    for (int64_t r = r0; r < r1; r++) {
        const int64_t i11 = r % ne11, i12 = (r / ne11) % ne12, i13 = r / (ne11 * ne12);
        const char * src = (const char *) src1->data + i11 * src1->nb[1] + i12 * src1->nb[2] + i13 * src1->nb[3];
        const float * x = (const float *) src;
        if (p->stage) {
            if (src1->nb[0] == ts) {
                kiln_row_to_f32(src1->type, src, stage, ne10);
            } else {
                for (int64_t i = 0; i < ne10; i++) stage[i] = (float) kiln_elem_get_f64(src1->type, src + i * src1->nb[0]);
            }
            x = stage;
        }
        char * out = (char *) params->wdata + (p->priv ? (size_t) params->ith * p->act_bytes : (size_t) r * p->row_size);
        if (i11 < ng4) {
            kiln_quantize_row_q8_K_x4(x, out, ne10);
        } else {
            k->from_float[p->vdt](x, out, ne10);
        }
        char * aux = p->aux_off ? (char *) params->wdata + p->aux_off + (size_t) r * p->aux_row : NULL;
        if (aux && p->aux8) kiln_q8_0_aux8_row(out, ne10, (kiln_q8_0_aux8 *) aux);
        else if (aux) kiln_q8_0_aux_row(out, ne10, (kiln_q8_0_aux *) aux);
    }
}

/* block sizes of the dot-tile path: multiples of every tile's MR / NR (1, 3, 4) */
#define MM_BLOCK0      48   /* src0 rows per chunk, batched */
#define MM_BLOCK1      24   /* src1 rows per chunk, batched */
/* src0 rows per chunk when src1 has one row (a generated token's mat-vec
 * products) outside gemv_guided_bounds' case: the rows split into
 * MM_GEMV_CHUNKS_PER_THREAD chunks per thread, of at least MM_BLOCK0_GEMV
 * rows. Each thread then streams long contiguous runs of weights; 32-row
 * chunks taken in turn by 2 threads made 2-thread generation 25-40 %
 * slower, natively and in wasm (the weights come from DRAM; one thread
 * alone was not affected). A few chunks per thread still let a thread that
 * runs ahead take another's share. */
#define MM_BLOCK0_GEMV 32
#define MM_GEMV_CHUNKS_PER_THREAD 4
#define MM_X16_BLOCK1  64   /* src1 rows per chunk, repacked Q4_0 / Q8_0 (with their aux) / Q4_K 16-row kernels, vec_dot_rows */
/* the F16 widening path (wants_f16_widen): each chunk widens its src1 rows
 * and then each of its src0 rows once, so a row's conversion (no hardware
 * fp16 in wasm: ~13 vector operations per 4 values, several times a
 * product's cost) is shared by the other side's block. At 48 x 24 the
 * conversions took ~1/3 of a Whisper encoder's F16 matmul time in wasm;
 * 128 x 128 makes them ~1/64 of the products (the widened src1 block,
 * 128 rows, stays in L2: 0.8 MB at 1536 wide) */
#define MM_WIDEN_BLOCK0 128
#define MM_WIDEN_BLOCK1 128

static int64_t gemv_block0(int64_t ne01, int nth) {
    const int64_t n = (int64_t) nth * MM_GEMV_CHUNKS_PER_THREAD;
    return KILN_MAX(MM_BLOCK0_GEMV, KILN_PAD((ne01 + n - 1) / n, 8));
}

/* The mat-vec split when 2 to MM_GEMV_GUIDED_THREADS threads share one (a
 * generated token's products, one batch): chunk k takes 1/(2 nth) of the
 * rows chunk k - 1 left, in multiples of 8 rows and at least
 * MM_BLOCK0_GEMV, the last one the rest ("guided" scheduling). The first
 * chunks are long contiguous runs of weights, as with the fixed split; the
 * short ones at the end leave a thread that finishes first little to wait
 * for. With 4 equal chunks per thread, a Q4_K_M token at 2 threads in wasm
 * (Node) spent ~10 % of thread 0's time in the barriers after its
 * mat-vecs, ~2.5 % with this split. Chromium, kiln-mt at 2 threads,
 * 10 alternating rounds (bench/peers/RESULTS-2026-12-03-s18.txt): synth-
 * q4_K_M 74.4 -> 82.0 tok/s, q8_0 63.4 -> 69.1 (10 of 10 rounds higher
 * each), q4_0 71.1 -> 73.8 (7 of 10). Which thread computes a row does not
 * change its result. Writes the chunk starts and ne01 to b; returns the
 * count (<= MM_GEMV_GUIDED_MAX). Up to 8 threads the sizes fall to the
 * floor within the bound even for a 262,144-row output matrix (111
 * chunks); with more threads each step shrinks less, the bound would leave
 * a long last chunk, and the fixed split stays. */
#define MM_GEMV_GUIDED_MAX 128
#define MM_GEMV_GUIDED_THREADS 8
static int64_t gemv_guided_bounds(int64_t ne01, int nth, int64_t * b) {
    int64_t start = 0, k = 0;
    while (start < ne01) {
        const int64_t left = ne01 - start;
        int64_t sz = KILN_MAX(MM_BLOCK0_GEMV, KILN_PAD((left + 2 * nth - 1) / (2 * nth), 8));
        if (sz > left || k == MM_GEMV_GUIDED_MAX - 1) sz = left;
        b[k++] = start;
        start += sz;
    }
    b[k] = ne01;
    return k;
}

static bool check_common(const struct kiln_tensor * dst, const struct kiln_tensor * src0, const char * op) {
    if (dst->type != KILN_TYPE_F32 || dst->nb[0] != sizeof(float)) {
        kiln_set_error("%s: dst must be contiguous f32", op);
        return false;
    }
    if (src0->nb[0] != kiln_type_size(src0->type)) {
        kiln_set_error("%s: the rows of src0 (%s) must be contiguous (kiln_cont it first)", op, kiln_type_name(src0->type));
        return false;
    }
    return true;
}

/* Packed path (batch > 1, f32): per K block of MM_KC, a chunk's src0 rows
 * are packed k-major into panels of the kernel's NR rows, then every group
 * of MR src1 rows runs the microkernel over each panel, accumulating into
 * dst block after block (a fixed order: the same sums for any thread
 * count). Sizes are ISA-independent maxima, so a plan made under one ISA
 * fits any other. */
#define MM_KC          256
#define MM_PACK_BLOCK0 48   /* multiple of every pack_nr (4, 8, 16) */
#define MM_PACK_BLOCK1 240  /* multiple of every pack_mr (2, 4, 6); large, to amortize packing */

static size_t pack_scratch_bytes(void) {
    return KILN_PAD(sizeof(float) * (size_t) (MM_PACK_BLOCK0 * MM_KC + KILN_GEMM_MAX_MR * MM_KC + KILN_GEMM_MAX_MR * KILN_GEMM_MAX_NR),
                    KILN_MM_ALIGN);
}

/* Packing pays only when src0 fills at least one panel of pack_nr rows:
 * with fewer (a convolution's few output frames as src0, Silero VAD's 1 to
 * 4 against 16-row panels on wasm) most of every panel would be zeros,
 * multiplied all the same. Those products take the register tiles, which
 * read both operands in place. */
static bool wants_packing(const struct kiln_kernels * k, const struct kiln_tensor * src0, const struct kiln_tensor * src1) {
    return src0->type == KILN_TYPE_F32 && src1->ne[1] > 1 && src0->ne[0] > 0 && src0->ne[1] >= k->pack_nr;
}

/* repacked src0 on a table without x4 kernels: one unpacked row per thread */
static size_t unpack_scratch_bytes(const struct kiln_tensor * src0) {
    return kiln_repacked_rows(src0) ? KILN_PAD(src0->nb[1], KILN_MM_ALIGN) : 0;
}

/* F16 weights on a table without hardware fp16 conversion (wasm): a
 * chunk's src1 rows and then each src0 row are widened to floats once, and
 * every product takes f16val_dot, bit-identical to f16_dot on those values.
 * f16_dot per pair converts both rows again for every product: a Whisper
 * encoder's F16 matmuls spent ~85 % of their time converting. */
static bool wants_f16_widen(const struct kiln_kernels * k, const struct kiln_tensor * src0) {
    return src0->type == KILN_TYPE_F16 && k->f16val_dot != NULL && k->vec_dot_type[KILN_TYPE_F16] == KILN_TYPE_F16 &&
           k->vec_dot_1[KILN_TYPE_F16] == NULL;
}

/* per thread: MM_WIDEN_BLOCK1 widened src1 rows and one src0 row */
static size_t widen_scratch_bytes(const struct kiln_tensor * src0) {
    return KILN_PAD(sizeof(float) * (size_t) (MM_WIDEN_BLOCK1 + 1) * (size_t) src0->ne[0], KILN_MM_ALIGN);
}

size_t kiln_cpu_work_mul_mat(const struct kiln_tensor * dst, int n_threads) {
    struct kiln_mm_act p;
    if (!kiln_mm_act_plan(kiln_kernels(), "mul_mat", dst->src[0], dst->src[1], &p)) return 0;
    kiln_mm_act_want_aux(kiln_kernels(), dst->src[0], &p);
    kiln_mm_act_want_private(&p);
    size_t w = kiln_mm_act_work(&p, n_threads);
    if (kiln_repacked_rows(dst->src[0])) w = KILN_PAD(w, KILN_MM_ALIGN) + unpack_scratch_bytes(dst->src[0]) * (size_t) n_threads;
    if (wants_packing(kiln_kernels(), dst->src[0], dst->src[1])) w = KILN_PAD(w, KILN_MM_ALIGN) + pack_scratch_bytes() * (size_t) n_threads;
    if (wants_f16_widen(kiln_kernels(), dst->src[0])) w = KILN_PAD(w, KILN_MM_ALIGN) + widen_scratch_bytes(dst->src[0]) * (size_t) n_threads;
    return w;
}

static void block_packed(const struct kiln_kernels * k, int64_t K,
                         const float * a, int64_t lda, int64_t i0, int64_t i1,
                         const float * b, int64_t ldb, int64_t j0, int64_t j1,
                         float * c, int64_t ldc, float * scratch) {
    const int MR = k->pack_mr, NR = k->pack_nr;
    float * panel = scratch;
    float * atmp = panel + MM_PACK_BLOCK0 * MM_KC;
    float * ctmp = atmp + KILN_GEMM_MAX_MR * MM_KC;
    const int64_t npan = (i1 - i0 + NR - 1) / NR;
    for (int64_t kb = 0; kb < K; kb += MM_KC) {
        const int64_t kc = KILN_MIN((int64_t) MM_KC, K - kb);
        for (int64_t pn = 0; pn < npan; pn++) {
            float * pp = panel + pn * NR * kc;
            if (k->f32_gemm_pack) {
                const int64_t ib = i0 + pn * NR;
                k->f32_gemm_pack(kc, a + ib * lda + kb, lda, (int) KILN_MIN((int64_t) NR, i1 - ib), pp);
                continue;
            }
            for (int r = 0; r < NR; r++) {
                const int64_t i = i0 + pn * NR + r;
                if (i < i1) {
                    const float * src = a + i * lda + kb;
                    for (int64_t q = 0; q < kc; q++) pp[q * NR + r] = src[q];
                } else {
                    for (int64_t q = 0; q < kc; q++) pp[q * NR + r] = 0.0f;
                }
            }
        }
        const int acc = kb > 0;
        /* panel outer: its NR x kc floats stay in L1 while the src1 rows stream by */
        for (int64_t pn = 0; pn < npan; pn++) {
            const int64_t ib = i0 + pn * NR, ni = KILN_MIN((int64_t) NR, i1 - ib);
            const float * pp = panel + pn * NR * kc;
            for (int64_t j = j0; j < j1; j += MR) {
                const int64_t nj = KILN_MIN((int64_t) MR, j1 - j);
                const float * arows = b + j * ldb + kb;
                int64_t la = ldb;
                if (nj < MR) {
                    /* the last rows: a zero-padded copy, so the kernel reads only what exists */
                    for (int64_t jj = 0; jj < MR; jj++) {
                        for (int64_t q = 0; q < kc; q++) atmp[jj * kc + q] = jj < nj ? b[(j + jj) * ldb + kb + q] : 0.0f;
                    }
                    arows = atmp;
                    la = kc;
                }
                if (nj == MR && ni == NR) {
                    k->f32_gemm_packed(kc, arows, la, pp, c + j * ldc + ib, ldc, acc);
                } else {
                    k->f32_gemm_packed(kc, arows, la, pp, ctmp, NR, 0);
                    for (int64_t jj = 0; jj < nj; jj++) {
                        float * cr = c + (j + jj) * ldc + ib;
                        for (int64_t ii = 0; ii < ni; ii++) cr[ii] = acc ? cr[ii] + ctmp[jj * NR + ii] : ctmp[jj * NR + ii];
                    }
                }
            }
        }
    }
}

/* one block of f32 x f32: register tiles (tile, MR src0 x NR src1 rows),
 * then single dots (edge) for the edges: the table's f32_gemm_tile with
 * its f32_dot, or f32_gemm_tile8 with f32_dot8 for tinyBLAS's order */
static void block_f32(kiln_gemm_tile_t tile, int MR, int NR, float (*edge)(int64_t, const float *, const float *), int64_t K,
                      const float * a, int64_t lda, int64_t i0, int64_t i1,
                      const float * b, int64_t ldb, int64_t j0, int64_t j1,
                      float * c, int64_t ldc) {
    int64_t j = j0;
    for (; j + NR <= j1; j += NR) {
        int64_t i = i0;
        for (; i + MR <= i1; i += MR) tile(K, a + i * lda, lda, b + j * ldb, ldb, c + j * ldc + i, ldc);
        for (; i < i1; i++) {
            for (int jj = 0; jj < NR; jj++) c[(j + jj) * ldc + i] = edge(K, a + i * lda, b + (j + jj) * ldb);
        }
    }
    for (; j < j1; j++) {
        for (int64_t i = i0; i < i1; i++) c[j * ldc + i] = edge(K, a + i * lda, b + j * ldb);
    }
}

/* f32 x f32 products with a batch sum as ggml's CPU mul_mat does in
 * llama.cpp's x86 build (the table's f32_gemm_tile8 / f32_dot8 /
 * f32_dot_ggml, kernels.h): tinyBLAS's order when src1 is contiguous, K % 8
 * == 0, src0 has a multiple of 4 rows and src1 at least 2 (the cases where
 * llamafile's sgemm takes the product), else ggml_vec_dot_f32's. Downstream,
 * a value on the other side of a rounding step moves by a whole step (a Q8_0
 * quantization step: a Q8_0 encoder drifted 3e-4 in cosine from llama.cpp;
 * an fp16 step of a decoder's F16 KV cache or of flash attention's fp16 V
 * accumulator). Every batched f32 product takes it, F32 weights as well as
 * computed operands (attention's K^T Q and V^T softmax, MoE routers): F32
 * encoders and stories260K's embedding then agree with llama.cpp's x86
 * build to ~2e-7 (1e-4 with a packed GEMM of Kiln's own order), at the
 * packed GEMM's speed on the models measured. With relaxed SIMD's fused
 * multiply-add wasm gets llama.cpp's sums bit for bit; SIMD128 has no FMA
 * and only gets the order; the scalar row has no tile8 kernel and keeps
 * its own. On arm64 (NEON: f32_dot4, no tile8) llama.cpp's sgemm is
 * tinyBLAS<4>, taken for 4+ src1 rows and K % 4 == 0.
 * kiln_mul_mat_set_order(FAST) opts a product out (the packed
 * GEMM: generic tensor programs, e.g. the JS API's matmul). 0: not such a
 * product; 1: tinyBLAS's order; 2: ggml_vec_dot_f32's; 3: tinyBLAS<4>'s. */
static int ggml_order(const struct kiln_kernels * k, const struct kiln_tensor * dst, const struct kiln_tensor * src0,
                      const struct kiln_tensor * src1) {
    if ((!k->f32_gemm_tile8 && !k->f32_dot4) || kiln_get_op_params_i32(dst, 1) == KILN_MM_ORDER_FAST || src0->type != KILN_TYPE_F32 ||
        src1->type != KILN_TYPE_F32 || src1->ne[1] < 2) return 0;
    if (!k->f32_gemm_tile8) {
        /* arm64: llamafile's tinyBLAS<4> takes 4+ src1 rows (f32_dot4) */
        const bool sgemm4 = kiln_is_contiguous(src1) && src0->ne[0] % 4 == 0 && src0->ne[1] % 4 == 0 && src1->ne[1] >= 4;
        return sgemm4 ? 3 : 2;
    }
    const bool sgemm = kiln_is_contiguous(src1) && src0->ne[0] % 8 == 0 && src0->ne[1] % 4 == 0;
    return sgemm ? 1 : 2;
}

/* One block of repacked src0 (repack.h): each group of rep rows against
 * the block's src1 rows (j0..j1) — in one batched call where the table has
 * one, else per row through the group kernel, else through unpacked rows —
 * with the groups' 2^shift scale factor taken off (exact); then the tail
 * rows past the last group, plain. Every element gets the same kernel
 * arithmetic whichever way its group went, except the K-quants, whose
 * batched order (and activation quantizer, on x86) may differ from the
 * mat-vec one (llama.cpp's: Q4_K on x86, Q6_K on arm64): there, as in
 * ggml's repacked forward_mul_mat, the src1 rows below jg (those in full
 * groups of 4) go batched, the others mat-vec. */
static void block_repacked(const struct kiln_kernels * k, const struct kiln_tensor * src0, kiln_vec_dot_t dot, int rep,
                           int64_t nfull, const char * a, int64_t i0, int64_t i1, const char * b, size_t bs,
                           int64_t j0, int64_t j1, int64_t jg, char * d, size_t ds, char * unpacked, const char * aux, size_t auxs) {
    const int64_t ne00 = src0->ne[0];
    const size_t as = src0->nb[1], ldd = ds / sizeof(float);
    const kiln_vec_dot_t dot4 = k->vec_dot_x4[src0->type];
    const bool kq = kiln_repack_is_kquant(src0->type);
    const int64_t jb = kq ? KILN_MIN(j1, KILN_MAX(j0, jg)) : j1; /* batched: j0..jb */
    const kiln_gemm_x4_t gemm4 = dot4 && (kq || jb - j0 > 1) && jb > j0 && ds % sizeof(float) == 0 ? k->gemm_x4[src0->type] : NULL;
    const int shift = kiln_repack_scale_shift(src0);
    const float unshift = ldexpf(1.0f, -shift);
    /* 16 rows (16 / rep groups) per call where the table has it: the
     * batched src1 rows (j0..jb) in one call, the others (Q4_K's) mat-vec */
    const kiln_gemm_x16_t gemm16 = gemm4 && (aux || src0->type != KILN_TYPE_Q4_0) ? k->gemm_x16[src0->type] : NULL;
    int64_t i = i0;
    for (int step = rep; i + rep <= i1 && i + rep <= nfull; i += step) {
        const char * group = a + i * as;
        step = rep;
        if (gemm16 && i + 16 <= i1 && i + 16 <= nfull) {
            gemm16(ne00, (int) (jb - j0), (float *) (d + j0 * ds) + i, ldd, group, (size_t) rep * as, b + j0 * bs, bs,
                   aux ? aux + j0 * auxs : NULL, auxs);
            for (int64_t j = jb; j < j1; j++) {
                for (int g = 0; g < 16 / rep; g++) dot4(ne00, (float *) (d + j * ds) + i + g * rep, group + (size_t) (g * rep) * as, b + j * bs);
            }
            step = 16;
            if (shift) {
                for (int64_t j = j0; j < j1; j++) {
                    for (int r = 0; r < step; r++) ((float *) (d + j * ds) + i)[r] *= unshift;
                }
            }
            continue;
        }
        if (gemm4) gemm4(ne00, (int) (jb - j0), (float *) (d + j0 * ds) + i, ldd, group, b + j0 * bs, bs);
        for (int64_t j = j0; j < j1; j++) {
            float * dr = (float *) (d + j * ds) + i;
            if (!dot4) {
                for (int r = 0; r < rep; r++) {
                    kiln_repack_unpack_row(src0->type, shift, group, r, ne00, unpacked);
                    dot(ne00, &dr[r], unpacked, b + j * bs);
                }
                continue;
            }
            if (!gemm4 || j >= jb) dot4(ne00, dr, group, b + j * bs);
            if (shift) {
                for (int r = 0; r < rep; r++) dr[r] *= unshift;
            }
        }
    }
    for (int64_t j = j0; j < j1; j++) {
        for (int64_t ii = i; ii < i1; ii++) dot(ne00, (float *) (d + j * ds) + ii, a + ii * as, b + j * bs);
    }
}

enum kiln_status kiln_cpu_fwd_mul_mat(const struct kiln_compute_params * params, struct kiln_tensor * dst) {
    const struct kiln_tensor * src0 = dst->src[0];
    const struct kiln_tensor * src1 = dst->src[1];
    const struct kiln_kernels * k = kiln_kernels();
    struct kiln_mm_act act;
    if (!check_common(dst, src0, "mul_mat")) return KILN_STATUS_UNSUPPORTED;
    if (!kiln_mm_act_plan(k, "mul_mat", src0, src1, &act)) return KILN_STATUS_UNSUPPORTED;
    kiln_mm_act_want_aux(k, src0, &act);
    kiln_mm_act_want_private(&act);
    const size_t act_work = kiln_mm_act_work(&act, params->nth);
    const int ggml_ord = ggml_order(k, dst, src0, src1);
    const bool pack = wants_packing(k, src0, src1) && k->f32_gemm_packed != NULL && !ggml_ord;
    const int rep = kiln_repacked_rows(src0);
    if (rep && src0->type != KILN_TYPE_Q4_0 && src0->type != KILN_TYPE_Q8_0 && src0->type != KILN_TYPE_IQ4_NL &&
        !kiln_repack_is_kquant(src0->type)) {
        kiln_set_error("mul_mat: repacked tensor '%s' of unexpected type %s", src0->name, kiln_type_name(src0->type));
        return KILN_STATUS_FAILED;
    }
    size_t need = pack ? KILN_PAD(act_work, KILN_MM_ALIGN) + pack_scratch_bytes() * (size_t) params->nth : act_work;
    if (rep) need = KILN_PAD(act_work, KILN_MM_ALIGN) + unpack_scratch_bytes(src0) * (size_t) params->nth;
    const bool widen = wants_f16_widen(k, src0);
    if (widen) need = KILN_PAD(act_work, KILN_MM_ALIGN) + widen_scratch_bytes(src0) * (size_t) params->nth;
    if (need > params->wsize) {
        kiln_set_error("mul_mat: work buffer of %zu bytes is too small (%zu needed)", params->wsize, need);
        return KILN_STATUS_FAILED;
    }

    const int64_t ne00 = src0->ne[0], ne01 = src0->ne[1];
    const int64_t ne11 = src1->ne[1], ne12 = src1->ne[2], ne13 = src1->ne[3];
    const int64_t r2 = ne12 / src0->ne[2], r3 = ne13 / src0->ne[3];

    kiln_mm_act_convert(params, k, src1, &act);
    /* the threads share the converted rows, unless each made its own or
     * none were converted */
    const bool shared_rows = act.convert && !act.priv;
    if (shared_rows || !kiln_chunk_fresh(params)) {
        if (params->ith == 0) kiln_chunk_reset(params, 0);
        kiln_barrier(params);
    }

    const bool gemv = ne11 == 1;
    int64_t bs0 = gemv ? gemv_block0(ne01, params->nth) : (pack ? MM_PACK_BLOCK0 : widen ? MM_WIDEN_BLOCK0 : MM_BLOCK0);
    /* the 16-row kernels of repacked Q4_0 / Q8_0 / Q4_K, a gemm_wide
     * gemm_x4 and vec_dot_rows prepare each weight block once per call:
     * more src1 rows per chunk */
    const bool big1 = (rep && (act.aux_off || (src0->type == KILN_TYPE_Q4_K && k->gemm_x16[KILN_TYPE_Q4_K]) || k->gemm_wide[src0->type])) ||
                      (!rep && !gemv && k->vec_dot_rows[src0->type]);
    const int64_t bs1 = gemv ? 1 : (pack ? MM_PACK_BLOCK1 : widen ? MM_WIDEN_BLOCK1 : big1 ? MM_X16_BLOCK1 : MM_BLOCK1);
    const int64_t nbat = ne12 * ne13;
    int64_t nbl1 = (ne11 + bs1 - 1) / bs1;
    int64_t nbl0 = (ne01 + bs0 - 1) / bs0;
    while (nbl0 * nbl1 * nbat > INT_MAX / 2) { bs0 *= 2; nbl0 = (ne01 + bs0 - 1) / bs0; }
    /* a token's mat-vec on several threads: chunks of decreasing size,
     * chunk ib0 from gb[ib0] to gb[ib0 + 1] (nbl1 and nbat are 1 there) */
    int64_t gb[MM_GEMV_GUIDED_MAX + 1];
    const bool guided = gemv && nbat == 1 && params->nth > 1 && params->nth <= MM_GEMV_GUIDED_THREADS;
    if (guided) nbl0 = gemv_guided_bounds(ne01, params->nth, gb);
    const int64_t nchunks = nbl0 * nbl1 * nbat;

    const size_t act_stride = act.convert ? act.row_size : src1->nb[1];
    const bool f32_rows = src0->type == KILN_TYPE_F32 && act.vdt == KILN_TYPE_F32 && !gemv &&
                          src0->nb[1] % sizeof(float) == 0 && act_stride % sizeof(float) == 0;
    const bool packed = f32_rows && pack;
    const bool tiles = f32_rows && !packed && k->gemm_mr * k->gemm_nr > 1 && !ggml_ord;
    const bool lanes8 = f32_rows && ggml_ord == 1;
    const bool dots_ggml = f32_rows && ggml_ord >= 2;
    /* ggml_vec_dot_f32's order (f32_dot_ggml, or f32_dot where the table's
     * own is it: NEON), or arm64's tinyBLAS<4> */
    float (*const dot_ggml)(int64_t, const float *, const float *) =
        ggml_ord == 3 ? k->f32_dot4 : k->f32_dot_ggml ? k->f32_dot_ggml : k->f32_dot;
    float * scratch = packed ? (float *) ((char *) params->wdata + KILN_PAD(act_work, KILN_MM_ALIGN) + pack_scratch_bytes() * (size_t) params->ith) : NULL;
    /* a single src1 row may sum in llama.cpp's mat-vec order, several in
     * its batched order (kernels.h) */
    const kiln_vec_dot_t dot = ne11 == 1 && k->vec_dot_1[src0->type] ? k->vec_dot_1[src0->type] :
                               ne11 > 1 && !rep && k->vec_dot_n[src0->type] ? k->vec_dot_n[src0->type] : k->vec_dot[src0->type];
    const kiln_vec_dot_y4_t dot_y4 = gemv ? NULL : k->vec_dot_y4[src0->type];
    const kiln_vec_dot_rows_t dot_rows = gemv || rep || dst->nb[1] % sizeof(float) ? NULL : k->vec_dot_rows[src0->type];
    /* rows below nfull are in groups of rep (4 or 8); blocks start at multiples of 8 */
    const int64_t nfull = rep ? ne01 - ne01 % rep : 0;
    char * unpacked = rep ? (char *) params->wdata + KILN_PAD(act_work, KILN_MM_ALIGN) + unpack_scratch_bytes(src0) * (size_t) params->ith : NULL;

    int64_t c;
    while ((c = kiln_chunk_next(params)) < nchunks) {
        const int64_t ib0 = c % nbl0, rest = c / nbl0;
        const int64_t ib1 = rest % nbl1, bat = rest / nbl1;
        const int64_t i12 = bat % ne12, i13 = bat / ne12;
        const int64_t i0 = guided ? gb[ib0] : ib0 * bs0, i1 = guided ? gb[ib0 + 1] : KILN_MIN(ne01, i0 + bs0);
        const int64_t j0 = ib1 * bs1, j1 = KILN_MIN(ne11, j0 + bs1);
        const char * a = (const char *) src0->data + (i12 / r2) * src0->nb[2] + (i13 / r3) * src0->nb[3];
        const char * b = kiln_mm_act_row(params, src1, &act, 0, i12, i13);
        char * d = (char *) dst->data + i12 * dst->nb[2] + i13 * dst->nb[3];
        if (packed) {
            block_packed(k, ne00, (const float *) a, (int64_t)(src0->nb[1] / sizeof(float)), i0, i1,
                         (const float *) b, (int64_t)(act_stride / sizeof(float)), j0, j1,
                         (float *) d, (int64_t)(dst->nb[1] / sizeof(float)), scratch);
            continue;
        }
        if (tiles || lanes8) {
            block_f32(lanes8 ? k->f32_gemm_tile8 : k->f32_gemm_tile, lanes8 ? k->tile8_mr : k->gemm_mr, lanes8 ? k->tile8_nr : k->gemm_nr,
                      lanes8 ? k->f32_dot8 : k->f32_dot, ne00, (const float *) a, (int64_t)(src0->nb[1] / sizeof(float)), i0, i1,
                      (const float *) b, (int64_t)(act_stride / sizeof(float)), j0, j1,
                      (float *) d, (int64_t)(dst->nb[1] / sizeof(float)));
            continue;
        }
        if (dots_ggml) {
            /* ggml's order, one product at a time */
            const int64_t lda = (int64_t)(src0->nb[1] / sizeof(float)), ldb = (int64_t)(act_stride / sizeof(float));
            for (int64_t j = j0; j < j1; j++) {
                float * drow = (float *) (d + j * dst->nb[1]);
                for (int64_t i = i0; i < i1; i++) drow[i] = dot_ggml(ne00, (const float *) a + i * lda, (const float *) b + j * ldb);
            }
            continue;
        }
        if (widen) {
            /* src1 rows of the chunk once, then src0 row by row (i outer) */
            float * bw = (float *) ((char *) params->wdata + KILN_PAD(act_work, KILN_MM_ALIGN) + widen_scratch_bytes(src0) * (size_t) params->ith);
            float * aw = bw + (size_t) MM_WIDEN_BLOCK1 * (size_t) ne00;
            for (int64_t j = j0; j < j1; j++) k->f16_to_f32(ne00, (const kiln_fp16_t *) (b + j * act_stride), bw + (j - j0) * ne00);
            for (int64_t i = i0; i < i1; i++) {
                k->f16_to_f32(ne00, (const kiln_fp16_t *) (a + i * src0->nb[1]), aw);
                for (int64_t j = j0; j < j1; j++) {
                    ((float *) (d + j * dst->nb[1]))[i] = k->f16val_dot(ne00, aw, bw + (j - j0) * ne00);
                }
            }
            continue;
        }
        if (rep) {
            block_repacked(k, src0, dot, rep, nfull, a, i0, i1, b, act_stride, j0, j1, ne11 > 3 ? ne11 - ne11 % 4 : 0, d,
                           dst->nb[1], unpacked, kiln_mm_act_aux(params, src1, &act, 0, i12, i13), act.aux_row);
            continue;
        }
        if (dot_rows) {
            /* the whole block in one call (same sums as dot) */
            dot_rows(ne00, (int) (i1 - i0), (int) (j1 - j0), (float *) (d + j0 * dst->nb[1]) + i0, dst->nb[1] / sizeof(float),
                     a + i0 * src0->nb[1], src0->nb[1], b + j0 * act_stride, act_stride);
            continue;
        }
        int64_t j = j0;
        if (dot_y4 && dst->nb[1] % sizeof(float) == 0) {
            /* 4 src1 rows per weight row read (same sums as dot) */
            const size_t ldd = dst->nb[1] / sizeof(float);
            for (; j + 4 <= j1; j += 4) {
                float * drow = (float *) (d + j * dst->nb[1]);
                for (int64_t i = i0; i < i1; i++) dot_y4(ne00, &drow[i], ldd, a + i * src0->nb[1], b + j * act_stride, act_stride);
            }
        }
        for (; j < j1; j++) {
            const char * brow = b + j * act_stride;
            float * drow = (float *) (d + j * dst->nb[1]);
            for (int64_t i = i0; i < i1; i++) dot(ne00, &drow[i], a + i * src0->nb[1], brow);
        }
    }
    return KILN_STATUS_SUCCESS;
}
