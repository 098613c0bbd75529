/*
 * test_repack.c — kiln_repack_tensor and the x4 mat-vec kernels. Two
 * contracts (src/cpu/repack.h):
 *  - order-preserving x4 kernels (q8_0 but on NEON with dotprod, q4_0 and
 *    iq4_nl on wasm): bit-identical to the ISA's own plain vec_dot;
 *  - llama.cpp's repacked order (q4_0 and iq4_nl on scalar, x86, NEON; q8_0
 *    on NEON with dotprod): bit-identical to blocksum_ref below — the whole
 *    block's integer dot, then
 *    acc = fmaf(isum, d_x * d_y, acc) — written here from the block layout.
 * Misaligned pointers, 1..9 and 130 blocks; mul_mat on repacked weights for
 * every ISA, odd row counts (tail rows stay plain), batch 1 and 3, broadcast
 * batches, 1/2/4 threads, element by element against the contract and by
 * NMSE against a double-precision reference; the unpacking fallback of
 * tables without x4 kernels; bad inputs.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "cpu/kernels.h"
#include "cpu/repack.h"

static const enum kiln_type types[] = { KILN_TYPE_Q4_0, KILN_TYPE_Q8_0, KILN_TYPE_IQ4_NL };
#define NTYPES 3

/* IQ4_NL's 16 levels (GGUF spec) */
static const int iq4nl_levels[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

static bool blocksum_contract(enum kiln_type t, enum kiln_isa isa) {
    /* q8_0: llama.cpp repacks it on arm64 with dotprod (and sums as q4_0) */
    if (t == KILN_TYPE_Q8_0) return isa == KILN_ISA_NEON && kiln_cpu_has_dotprod();
    return isa == KILN_ISA_SCALAR || isa == KILN_ISA_AVX2 || isa == KILN_ISA_AVX512 || isa == KILN_ISA_AVXVNNI || isa == KILN_ISA_NEON;
}

static float h2f(const void * p) {
    kiln_fp16_t h;
    memcpy(&h, p, sizeof h);
    return kiln_fp16_to_fp32(h);
}

/* llama.cpp's repacked order for one plain q4_0 / iq4_nl / q8_0 row against q8_0 y */
static float blocksum_ref(enum kiln_type t, int64_t n, const char * row, const char * y) {
    float acc = 0;
    const size_t bs = t == KILN_TYPE_Q8_0 ? 34 : 18;
    for (int64_t b = 0; b < n / 32; b++) {
        const char * xb = row + b * bs, * yb = y + b * 34;
        const uint8_t * q = (const uint8_t *) xb + 2;
        const int8_t * yq = (const int8_t *) yb + 2;
        int isum = 0;
        for (int j = 0; j < 32 && t == KILN_TYPE_Q8_0; j++) isum += ((const int8_t *) q)[j] * yq[j];
        for (int j = 0; j < 16 && t != KILN_TYPE_Q8_0; j++) {
            const int lo = q[j] & 15, hi = q[j] >> 4;
            isum += (t == KILN_TYPE_Q4_0 ? lo - 8 : iq4nl_levels[lo]) * yq[j];
            isum += (t == KILN_TYPE_Q4_0 ? hi - 8 : iq4nl_levels[hi]) * yq[j + 16];
        }
        const float d = h2f(xb) * h2f(yb);
        acc = fmaf((float) isum, d, acc);
    }
    return acc;
}

/* weights uniform in +-amp; spike != 0: the first value of the first row
 * (a large block scale that limits the subnormal shift, repack.h) */
static float amp = 1.0f, spike = 0.0f;

static void fill_rows(enum kiln_type t, int64_t n, int nrows, void * out) {
    float * x = malloc(sizeof(float) * (size_t) n);
    for (int r = 0; r < nrows; r++) {
        for (int64_t i = 0; i < n; i++) x[i] = amp * tu_rand_uniform(-1, 1);
        if (r == 0 && spike != 0) x[0] = spike;
        kiln_get_type_traits(t)->from_float_ref(x, (char *) out + (size_t) r * kiln_row_size(t, n), n);
    }
    free(x);
}

static unsigned scale_bits(const char * blk) {
    kiln_fp16_t h;
    memcpy(&h, blk, sizeof h);
    return h & 0x7fffu;
}

/* The shift repack chose for rows plain[0..nrows) (scales first in each
 * block, 32 values per block): none when no scale is subnormal; else the
 * least that makes the smallest one normal, unless the largest would then
 * pass fp16's top exponent (30). The x4 blocks hold the scales times
 * 2^shift, bit for bit. */
static void check_shift(enum kiln_type t, const char * plain, int nrows, int64_t n, const struct kiln_tensor * w, int shift) {
    const size_t bs = t == KILN_TYPE_Q8_0 ? 34 : 18, rs = kiln_row_size(t, n);
    unsigned min_sub = 0x400, max_mag = 0;
    for (int r = 0; r < nrows; r++) {
        for (int64_t b = 0; b < n / 32; b++) {
            const unsigned m = scale_bits(plain + r * rs + b * bs);
            if (m && m < min_sub) min_sub = m;
            if (m > max_mag) max_mag = m;
        }
    }
    int want = 0;
    if (min_sub < 0x400) {
        while (min_sub * (1u << want) < 0x400u && (int) (max_mag >> 10) + want < 30) want++;
    }
    CHECK(shift == want, "%s: scale shift %d, expected %d (smallest subnormal 0x%x, largest 0x%x)",
          kiln_type_name(t), shift, want, min_sub, max_mag);
    for (int r = 0; r < 4 && r < nrows; r++) {
        for (int64_t b = 0; b < n / 32; b++) {
            const float d0 = h2f(plain + r * rs + b * bs);
            const float d1 = h2f((const char *) w->data + b * 4 * bs + r * sizeof(kiln_fp16_t));
            if (d1 != ldexpf(d0, shift)) {
                CHECK(0, "%s row %d block %lld: x4 scale %g is not %g * 2^%d", kiln_type_name(t), r, (long long) b, d1, d0, shift);
                return;
            }
        }
    }
}


/* the batched kernel against vec_dot_x4 of the same table, bit for bit:
 * 1..7 activation rows at a misaligned stride, results at a stride */
static void test_gemm_x4(const struct kiln_kernels * k, enum kiln_type t, int64_t n, const void * group) {
    const enum kiln_type vt = k->vec_dot_type[t];
    const size_t rs = kiln_row_size(t, n), ys = kiln_row_size(vt, n) + 6, ss = 9;
    char * xb = malloc(4 * rs + 2 + 64), * yb = malloc(7 * ys + 2 + 64);
    char * xp = xb + 2, * yp = yb + 2; /* misaligned, keeping the blocks' 2-byte alignment */
    memcpy(xp, group, 4 * rs);
    float * yf = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < 7; c++) {
        for (int64_t i = 0; i < n; i++) yf[i] = tu_rand_uniform(-3, 3);
        k->from_float[vt](yf, yp + c * ys, n);
    }
    for (int ncols = 1; ncols <= 7; ncols++) {
        float s[7 * 9];
        for (int i = 0; i < 7 * 9; i++) s[i] = -1234.5f;
        k->gemm_x4[t](n, ncols, s, ss, xp, yp, ys);
        for (int c = 0; c < 7; c++) {
            float e[4];
            k->vec_dot_x4[t](n, e, xp, yp + c * ys);
            for (int r = 0; r < 9; r++) {
                const float got = s[c * ss + r];
                if (c >= ncols || r >= 4) {
                    CHECK(got == -1234.5f, "%s gemm_x4 %s ncols %d wrote outside its results (col %d row %d)", k->isa, kiln_type_name(t), ncols, c, r);
                } else {
                    CHECK(memcmp(&got, &e[r], sizeof got) == 0, "%s gemm_x4 %s n=%lld ncols %d col %d row %d: %.9g vs x4 %.9g",
                          k->isa, kiln_type_name(t), (long long) n, ncols, c, r, got, e[r]);
                }
            }
        }
    }
    free(yf); free(xb); free(yb);
}

/* the 16-row batched kernel (4 groups) against vec_dot_x4 per group, bit
 * for bit: 1..X16_NC activation rows at a misaligned stride (every pass width
 * and column chunk the kernels have: Q8_0's chunks of 33 (avx512) twice
 * and a part, of 64 (avx2) and a part),
 * groups apart by their own bytes plus 6, results at a stride; for Q8_0
 * activations the rows' aux blocks (Q4_0 weights: kiln_q8_0_aux; Q8_0:
 * kiln_q8_0_aux8, or none: no_aux, the kernel forms them) at a misaligned
 * stride too. Activation rows 0 and 1 are constant (every quant +127 /
 * -127: the largest block sums); for Q8_0 two weight rows are extreme
 * too (-128s; +-127). */
#define X16_NC 70
static int n_x16, n_x16_isa[KILN_ISA_COUNT]; /* gemm_x16 comparisons run (all, per row) */
static void test_gemm_x16(const struct kiln_kernels * k, enum kiln_type t, int64_t n, bool no_aux) {
    const enum kiln_type vt = k->vec_dot_type[t];
    const size_t rs = kiln_row_size(t, n), gs = 4 * rs + 6, ys = kiln_row_size(vt, n) + 6, ss = 21;
    const bool aux8 = t == KILN_TYPE_Q8_0;
    const size_t ab_size = aux8 ? sizeof(kiln_q8_0_aux8) : sizeof(kiln_q8_0_aux);
    const size_t as = vt == KILN_TYPE_Q8_0 && !no_aux ? ab_size * (size_t) (n / QK8_0) + 4 : 0;
    struct kiln_context * ctx = tu_ctx(16 * rs + (1 << 20));
    struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 16);
    fill_rows(t, n, 16, w->data);
    CHECK(kiln_repack_tensor(w), "repack 16 rows: %s", kiln_last_error());
    char * xb = malloc(4 * gs + 2 + 64), * yb = malloc(X16_NC * ys + 2 + 64), * ab = malloc(X16_NC * as + 4 + 64);
    char * xp = xb + 2, * yp = yb + 2, * ap = as ? ab + 4 : NULL;
    for (int g = 0; g < 4; g++) memcpy(xp + g * gs, (const char *) w->data + g * 4 * rs, 4 * rs);
    if (t == KILN_TYPE_Q8_0) {
        /* extreme weights: row 5 (group 1, row 1) all -128 (|x| = 128 as
         * an unsigned byte), row 14 (group 3, row 2) alternating +127/-127 */
        for (int64_t b = 0; b < n / QK8_0; b++) {
            memset(((block_q8_0x4 *) (xp + gs) + b)->qs + 32, -128, 32);
            for (int i = 0; i < 32; i++) ((block_q8_0x4 *) (xp + 3 * gs) + b)->qs[64 + i] = (int8_t) (i % 2 ? 127 : -127);
        }
    }
    float * yf = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < X16_NC; c++) {
        for (int64_t i = 0; i < n; i++) yf[i] = c == 0 ? 2.5f : c == 1 ? -2.5f : tu_rand_uniform(-3, 3);
        k->from_float[vt](yf, yp + c * ys, n);
        if (ap) {
            void * a = malloc(ab_size * (size_t) (n / QK8_0));
            if (aux8) kiln_q8_0_aux8_row(yp + c * ys, n, a);
            else kiln_q8_0_aux_row(yp + c * ys, n, a);
            memcpy(ap + c * as, a, ab_size * (size_t) (n / QK8_0)); /* misaligned: copied */
            free(a);
        }
    }
    float ex[X16_NC][16]; /* the x4 kernel's results */
    for (int c = 0; c < X16_NC; c++) {
        for (int g = 0; g < 4; g++) k->vec_dot_x4[t](n, ex[c] + 4 * g, xp + g * gs, yp + c * ys);
    }
    for (int ncols = 1; ncols <= X16_NC; ncols++) {
        float s[X16_NC * 21];
        for (int i = 0; i < X16_NC * 21; i++) s[i] = -1234.5f;
        k->gemm_x16[t](n, ncols, s, ss, xp, gs, yp, ys, ap, as);
        for (int c = 0; c < X16_NC; c++) {
            const float * e = ex[c];
            for (int r = 0; r < 21; r++) {
                const float got = s[c * ss + r];
                if (c >= ncols || r >= 16) {
                    CHECK(got == -1234.5f, "%s gemm_x16 %s ncols %d wrote outside its results (col %d row %d)", k->isa, kiln_type_name(t), ncols, c, r);
                } else {
                    CHECK(memcmp(&got, &e[r], sizeof got) == 0, "%s gemm_x16 %s%s n=%lld ncols %d col %d row %d: %.9g vs x4 %.9g",
                          k->isa, kiln_type_name(t), no_aux ? " (no aux)" : "", (long long) n, ncols, c, r, got, e[r]);
                }
            }
        }
    }
    n_x16++;
    for (int i = 0; i < KILN_ISA_COUNT; i++) n_x16_isa[i] += kiln_kernels_for_isa((enum kiln_isa) i) == k;
    free(yf); free(xb); free(yb); free(ab);
    kiln_free(ctx);
}

static int n_avx512; /* avx512 x4 comparisons run */

#if defined(__wasm_relaxed_simd__)
#include "cpu/arch/quant_dot.h"
#include "quants.h"
/* The relaxed table's q4_0, q8_0 and iq4_nl kernels come in two versions,
 * by how the engine lowers i32x4.relaxed_dot_i8x16_i7x16_add_s
 * (kernels_wasm_relaxed.c); the table holds one, chosen at load. Both must
 * give the same bits, whichever this engine would choose: plain (iq4_nl:
 * the SIMD128 kernel, per row of the x4 ones), x4 and batched (1..5
 * activation rows). */
static int n_dotadd[2]; /* check_relaxed_dotadd runs: q4_0 / q8_0, iq4_nl */
static void check_relaxed_dotadd(enum kiln_type t, int64_t n, const char * plain, const void * group, int shift, const float * yf) {
    const bool q4 = t == KILN_TYPE_Q4_0, iq4 = t == KILN_TYPE_IQ4_NL;
    const size_t rs = kiln_row_size(t, n), ys = kiln_row_size(KILN_TYPE_Q8_0, n);
    const kiln_vec_dot_t x4a = iq4 ? iq4_nlx4_q8_0_vec_dot__wasm_relaxed : q4 ? q4_0x4_q8_0_vec_dot__wasm_relaxed : q8_0x4_q8_0_vec_dot__wasm_relaxed;
    const kiln_vec_dot_t x4b = iq4 ? iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd
                               : q4 ? q4_0x4_q8_0_vec_dot__wasm_relaxed_dotadd : q8_0x4_q8_0_vec_dot__wasm_relaxed_dotadd;
    const kiln_gemm_x4_t ga = iq4 ? iq4_nlx4_q8_0_gemm__wasm_relaxed : q4 ? q4_0x4_q8_0_gemm__wasm_relaxed : q8_0x4_q8_0_gemm__wasm_relaxed;
    const kiln_gemm_x4_t gb = iq4 ? iq4_nlx4_q8_0_gemm__wasm_relaxed_dotadd
                              : q4 ? q4_0x4_q8_0_gemm__wasm_relaxed_dotadd : q8_0x4_q8_0_gemm__wasm_relaxed_dotadd;
    char * y = malloc(5 * ys);
    float * yc = malloc(sizeof(float) * (size_t) n);
    for (int c = 0; c < 5; c++) {
        for (int64_t i = 0; i < n; i++) yc[i] = c ? tu_rand_uniform(-3, 3) : yf[i];
        kiln_quantize_row_q8_0_act(yc, y + c * ys, n);
    }
    int bad = 0;
    float a4[4], b4[4];
    x4a(n, a4, group, y);
    x4b(n, b4, group, y);
    bad += memcmp(a4, b4, sizeof a4) != 0;
    for (int r = 0; r < 4; r++) {
        float a, b;
        if (iq4) {
            /* the i16 x4 kernel against the plain one: the dot-add table's
             * test_kernels checks only its own */
            iq4_nl_q8_0_vec_dot__wasm_simd128(n, &a, plain + r * rs, y);
            b = ldexpf(a4[r], -shift);
        } else {
            (q4 ? q4_0_q8_0_vec_dot__wasm_relaxed : q8_0_q8_0_vec_dot__wasm_relaxed)(n, &a, plain + r * rs, y);
            (q4 ? q4_0_q8_0_vec_dot__wasm_relaxed_dotadd : q8_0_q8_0_vec_dot__wasm_relaxed_dotadd)(n, &b, plain + r * rs, y);
        }
        bad += memcmp(&a, &b, sizeof a) != 0;
    }
    for (int ncols = 1; ncols <= 5; ncols++) {
        float sa[5 * 4], sb[5 * 4];
        ga(n, ncols, sa, 4, group, y, ys);
        gb(n, ncols, sb, 4, group, y, ys);
        bad += memcmp(sa, sb, sizeof(float) * 4 * (size_t) ncols) != 0;
        for (int c = 0; c < ncols; c++) {
            x4a(n, a4, group, y + c * ys);
            bad += memcmp(sa + 4 * c, a4, sizeof a4) != 0;
        }
    }
    CHECK(!bad, "wasm_relaxed %s n=%lld: dotadd kernels == i16 kernels bit for bit (%d differ)", kiln_type_name(t), (long long) n, bad);
    n_dotadd[t == KILN_TYPE_IQ4_NL]++;
    free(yc); free(y);
}
#endif

static void test_kernels(void) {
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    for (int ti = 0; ti < NTYPES; ti++) {
        const enum kiln_type t = types[ti];
        const int nbs[] = { 1, 2, 3, 5, 8, 9, 130 };
        for (int bi = 0; bi < 7; bi++) {
            const int64_t n = 32 * nbs[bi];
            const size_t rs = kiln_row_size(t, n);
            struct kiln_context * ctx = tu_ctx(16 * rs + (1 << 20));
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 4);
            fill_rows(t, n, 4, w->data);
            char * plain = malloc(4 * rs);
            memcpy(plain, w->data, 4 * rs);
            CHECK(kiln_repack_tensor(w), "repack %s n=%lld: %s", kiln_type_name(t), (long long) n, kiln_last_error());
            CHECK(memcmp(plain, w->data, 4 * rs) != 0 || n == 0, "repack changed nothing");
            const int shift = kiln_repack_scale_shift(w);
            check_shift(t, plain, 4, n, w, shift);
            /* the layout round-trips */
            char * row = malloc(rs);
            for (int r = 0; r < 4; r++) {
                kiln_repack_unpack_row(t, shift, w->data, r, n, row);
                CHECK(memcmp(row, plain + r * rs, rs) == 0, "%s unpack row %d differs", kiln_type_name(t), r);
            }
            free(row);
            float * yf = malloc(sizeof(float) * (size_t) n);
            for (int64_t i = 0; i < n; i++) yf[i] = tu_rand_uniform(-2, 2);
            for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
                const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
                if (!k || !k->vec_dot_x4[t]) continue;
                const enum kiln_type vt = k->vec_dot_type[t];
                /* misaligned by 2 bytes (blocks need only their natural alignment) */
                char * xb = malloc(4 * rs + 2 + 64), * yb = malloc(kiln_row_size(vt, n) + 2 + 64);
                char * xp = xb + 2, * yp = yb + 2;
                memcpy(xp, w->data, 4 * rs);
                k->from_float[vt](yf, yp, n);
                float s4[4], sref[4];
                k->vec_dot_x4[t](n, s4, xp, yp);
                ks->vec_dot_x4[t](n, sref, xp, yp);
                for (int r = 0; r < 4; r++) {
                    s4[r] = ldexpf(s4[r], -shift); /* exact: what mul_mat does */
                    sref[r] = ldexpf(sref[r], -shift);
                    float s1;
                    k->vec_dot[t](n, &s1, plain + r * rs, yp);
                    if (blocksum_contract(t, (enum kiln_isa) isa)) {
                        const float e = blocksum_ref(t, n, plain + r * rs, yp);
                        CHECK(memcmp(&e, &s4[r], sizeof(float)) == 0, "%s x4 %s n=%lld row %d: %.9g vs llama.cpp order %.9g",
                              k->isa, kiln_type_name(t), (long long) n, r, s4[r], e);
                        CHECK(fabsf(s4[r] - s1) <= 1e-4f * (1.0f + fabsf(s1)), "%s x4 %s vs plain: %g vs %g",
                              k->isa, kiln_type_name(t), s4[r], s1);
                    } else {
                        CHECK(memcmp(&s1, &s4[r], sizeof(float)) == 0, "%s x4 %s n=%lld row %d: %.9g vs plain %.9g",
                              k->isa, kiln_type_name(t), (long long) n, r, s4[r], s1);
                    }
                    CHECK(fabsf(s4[r] - sref[r]) <= 1e-4f * (1.0f + fabsf(sref[r])), "%s x4 %s vs scalar: %g vs %g",
                          k->isa, kiln_type_name(t), s4[r], sref[r]);
                }
                if (isa == KILN_ISA_AVX512) {
                    /* the avx512 row's rule: bit-identical to the avx2 row */
                    const struct kiln_kernels * k2 = kiln_kernels_for_isa(KILN_ISA_AVX2);
                    float a[4], b[4];
                    k->vec_dot_x4[t](n, a, xp, yp);
                    k2->vec_dot_x4[t](n, b, xp, yp);
                    CHECK(memcmp(a, b, sizeof a) == 0, "avx512 x4 %s n=%lld == avx2 bit for bit: %.9g vs %.9g",
                          kiln_type_name(t), (long long) n, a[0], b[0]);
                    n_avx512++;
                }
                free(xb); free(yb);
                if (k->gemm_x4[t]) test_gemm_x4(k, t, n, w->data);
                if (k->gemm_x16[t]) test_gemm_x16(k, t, n, false);
                if (k->gemm_x16[t] && t == KILN_TYPE_Q8_0) test_gemm_x16(k, t, n, true);
            }
#if defined(__wasm_relaxed_simd__)
            if (kiln_wasm_relaxed_dot_add_direct()) check_relaxed_dotadd(t, n, plain, w->data, shift, yf);
#endif
            free(yf);
            free(plain);
            kiln_free(ctx);
        }
    }
}

/* mul_mat(W, X) plain and repacked, all ISAs and thread counts: identical */
static void test_mul_mat(enum kiln_type t, int64_t K, int64_t N, int64_t M, int64_t ne02, int64_t ne12) {
    /* data from the shape alone, not from how many ISA tables the tests before ran */
    tu_seed((uint64_t) (t * 1000003 + K * 1009 + N * 31 + M * 7 + ne12));
    struct kiln_context * ctx = tu_ctx(64u << 20);
    struct kiln_tensor * w = kiln_new_tensor_3d(ctx, t, K, N, ne02);
    struct kiln_tensor * wr = kiln_new_tensor_3d(ctx, t, K, N, ne02);
    struct kiln_tensor * x = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, M, ne12);
    fill_rows(t, K, (int) (N * ne02), w->data);
    memcpy(wr->data, w->data, kiln_nbytes(w));
    tu_fill_uniform(x, -1, 1);
    double * wf = malloc(sizeof(double) * (size_t) (K * N * ne02));
    {
        float * row = malloc(sizeof(float) * (size_t) K);
        for (int64_t r = 0; r < N * ne02; r++) {
            kiln_get_type_traits(t)->to_float((const char *) w->data + r * w->nb[1], row, K);
            for (int64_t q = 0; q < K; q++) wf[r * K + q] = row[q];
        }
        free(row);
    }
    double * xf = tu_to_f64(x);
    CHECK(kiln_repack_tensor(wr), "repack: %s", kiln_last_error());
    if (amp < 1e-3f) CHECK(kiln_repack_scale_shift(wr) > 0, "%s: subnormal scales, no shift", kiln_type_name(t));
    CHECK(kiln_tensor_is_repacked(wr) && !kiln_tensor_is_repacked(w), "repacked flag");
    struct kiln_tensor * y = kiln_mul_mat(ctx, w, x);
    struct kiln_tensor * yr = kiln_mul_mat(ctx, wr, x);
    const int64_t ny = N * M * ne12;
    double * ref = malloc(sizeof(double) * (size_t) ny);
    for (int64_t b = 0; b < ne12; b++) {
        const int64_t wb = b / (ne12 / ne02);
        for (int64_t j = 0; j < M; j++) {
            for (int64_t i = 0; i < N; i++) {
                double s = 0;
                for (int64_t q = 0; q < K; q++) s += wf[(wb * N + i) * K + q] * xf[(b * M + j) * K + q];
                ref[(b * M + j) * N + i] = s;
            }
        }
    }
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kt = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kt) continue;
        kiln_cpu_force_isa(kt->isa);
        for (int nth = 1; nth <= 4; nth *= 2) {
            CHECK(tu_compute(ctx, y, nth) == KILN_STATUS_SUCCESS, "plain: %s", kiln_last_error());
            CHECK(tu_compute(ctx, yr, nth) == KILN_STATUS_SUCCESS, "repacked: %s", kiln_last_error());
            if (blocksum_contract(t, (enum kiln_isa) isa)) {
                /* grouped rows in llama.cpp's order, the tail rows plain */
                const struct kiln_kernels * k = kt;
                const size_t rs = kiln_row_size(t, K), ys = kiln_row_size(KILN_TYPE_Q8_0, K);
                char * yq = malloc(ys);
                int bad = 0;
                for (int64_t b = 0; b < ne12 && !bad; b++) {
                    const int64_t wb = b / (ne12 / ne02);
                    for (int64_t j = 0; j < M && !bad; j++) {
                        k->from_float[KILN_TYPE_Q8_0]((const float *) ((const char *) x->data + b * x->nb[2] + j * x->nb[1]), yq, K);
                        for (int64_t i = 0; i < N; i++) {
                            const char * wrow = (const char *) w->data + wb * w->nb[2] + i * rs;
                            float e;
                            if (i < N - N % 4) e = blocksum_ref(t, K, wrow, yq);
                            else (M == 1 && k->vec_dot_1[t] ? k->vec_dot_1[t] : k->vec_dot[t])(K, &e, wrow, yq); /* mat-vec variant */
                            const float got = ((const float *) yr->data)[(b * M + j) * N + i];
                            if (memcmp(&e, &got, sizeof e) != 0) {
                                CHECK(0, "%s %s K=%lld N=%lld M=%lld b=%lld/%lld %d threads: [%lld,%lld,%lld] %.9g vs llama.cpp order %.9g",
                                      kt->isa, kiln_type_name(t), (long long) K, (long long) N, (long long) M, (long long) ne02,
                                      (long long) ne12, nth, (long long) i, (long long) j, (long long) b, got, e);
                                bad = 1;
                                break;
                            }
                        }
                    }
                }
                CHECK(!bad, "blocksum order element by element");
                free(yq);
            } else {
                CHECK(memcmp(y->data, yr->data, kiln_nbytes(y)) == 0, "%s %s K=%lld N=%lld M=%lld b=%lld/%lld %d threads: repacked differs",
                      kt->isa, kiln_type_name(t), (long long) K, (long long) N, (long long) M, (long long) ne02, (long long) ne12, nth);
            }
            double * out = tu_to_f64(yr);
            const double e = tu_nmse(out, ref, ny);
            CHECK(e < 1e-4, "%s %s K=%lld N=%lld M=%lld nmse %g", kt->isa, kiln_type_name(t), (long long) K, (long long) N, (long long) M, e);
            free(out);
        }
    }
    /* a table without x4 kernels for the type (none has gaps among these three now) unpacks rows into scratch:
     * exercised here by taking the scalar table's x4 entries away */
    {
        struct kiln_kernels * ks = (struct kiln_kernels *) kiln_kernels_for_isa(KILN_ISA_SCALAR);
        const kiln_vec_dot_t saved = ks->vec_dot_x4[t];
        ks->vec_dot_x4[t] = NULL;
        kiln_cpu_force_isa("scalar");
        for (int nth = 1; nth <= 2; nth++) {
            CHECK(tu_compute(ctx, y, nth) == KILN_STATUS_SUCCESS, "plain: %s", kiln_last_error());
            CHECK(tu_compute(ctx, yr, nth) == KILN_STATUS_SUCCESS, "unpacking: %s", kiln_last_error());
            CHECK(memcmp(y->data, yr->data, kiln_nbytes(y)) == 0, "unpacking fallback %s K=%lld N=%lld: differs",
                  kiln_type_name(t), (long long) K, (long long) N);
        }
        ks->vec_dot_x4[t] = saved;
    }
    kiln_cpu_force_isa(NULL);
    free(ref); free(wf); free(xf);
    kiln_free(ctx);
}

/* an inf or nan block scale anywhere in the grouped rows: no shift (the
 * scaled sums would not be exact); an all-zero tensor: none either */
static void test_shift_specials(void) {
    const kiln_fp16_t specials[] = { 0x7c00, 0xfc00, 0x7e00 };
    for (int ti = 0; ti < NTYPES; ti++) {
        const enum kiln_type t = types[ti];
        const size_t bs = t == KILN_TYPE_Q8_0 ? 34 : 18;
        for (int si = 0; si < 4; si++) {
            struct kiln_context * ctx = tu_ctx(1 << 20);
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, 64, 8);
            amp = 1e-4f;
            fill_rows(t, 64, 8, w->data);
            amp = 1.0f;
            if (si < 3) memcpy((char *) w->data + 5 * w->nb[1] + bs, &specials[si], sizeof(kiln_fp16_t)); /* row 5, block 1 */
            else memset(w->data, 0, kiln_nbytes(w));
            CHECK(kiln_repack_tensor(w), "repack: %s", kiln_last_error());
            CHECK(kiln_repack_scale_shift(w) == 0, "%s case %d: shift %d, expected none", kiln_type_name(t), si, kiln_repack_scale_shift(w));
            kiln_free(ctx);
        }
    }
}

/* inf, nan and subnormal block scales, in the weights or the activations:
 * every order-preserving x4 kernel and its batched form still equal the
 * ISA's plain vec_dot per row (bits, or both nan). The wasm relaxed loops
 * convert scales with a short form that is exact for finite values only and
 * redo a call with the exact one when a scale was inf/nan
 * (kernels_wasm_relaxed.c): this is what catches a wrong redo. */
static bool same_or_nan(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof a) == 0; }

static void test_special_scales(void) {
    /* {where: 0 weight row 2 block 3, 1 activation column 1 block 5; scale} */
    static const struct { int where; kiln_fp16_t h; } cases[] = {
        { 0, 0x7c00 }, { 0, 0xfc00 }, { 0, 0x7e01 }, { 1, 0x7c00 }, { 1, 0xfe00 }, { 1, 0x0003 }, { 1, 0x83ff }, { 0, 0x0001 },
    };
    const int64_t n = 32 * 9;
    int n_cases = 0, n_iq4 = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        const enum kiln_type t = types[ti];
        const size_t rs = kiln_row_size(t, n), bs = t == KILN_TYPE_Q8_0 ? 34 : 18;
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            struct kiln_context * ctx = tu_ctx(1 << 20);
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, n, 4);
            fill_rows(t, n, 4, w->data);
            if (cases[ci].where == 0) memcpy((char *) w->data + 2 * rs + 3 * bs, &cases[ci].h, sizeof(kiln_fp16_t));
            char * plain = malloc(4 * rs);
            memcpy(plain, w->data, 4 * rs);
            CHECK(kiln_repack_tensor(w), "repack: %s", kiln_last_error());
            const int shift = kiln_repack_scale_shift(w);
            float * yf = malloc(sizeof(float) * (size_t) n);
            /* the tables, and (wasm relaxed) a copy with the x4 / batched
             * kernels the table did not take (i16 or dot-add: where the
             * dot-add is one instruction both are right) */
            for (int isa = 0; isa <= KILN_ISA_COUNT; isa++) {
                const struct kiln_kernels * k = isa < KILN_ISA_COUNT ? kiln_kernels_for_isa((enum kiln_isa) isa) : NULL;
#if defined(__wasm_relaxed_simd__)
                struct kiln_kernels kalt;
                if (isa == KILN_ISA_COUNT && kiln_wasm_relaxed_dot_add_direct()) {
                    kalt = *kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
                    kalt.vec_dot_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_vec_dot__wasm_relaxed;
                    kalt.gemm_x4[KILN_TYPE_Q4_0] = q4_0x4_q8_0_gemm__wasm_relaxed;
                    kalt.vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__wasm_relaxed;
                    kalt.gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__wasm_relaxed;
                    kalt.vec_dot_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_vec_dot__wasm_relaxed;
                    kalt.gemm_x4[KILN_TYPE_IQ4_NL] = iq4_nlx4_q8_0_gemm__wasm_relaxed;
                    kalt.isa = "wasm_relaxed (i16 kernels)";
                    k = &kalt;
                }
#endif
                if (!k || !k->vec_dot_x4[t] || (isa < KILN_ISA_COUNT && blocksum_contract(t, (enum kiln_isa) isa))) continue;
                const enum kiln_type vt = k->vec_dot_type[t];
                const size_t ys = kiln_row_size(vt, n);
                char * y = malloc(3 * ys);
                for (int c = 0; c < 3; c++) {
                    for (int64_t i = 0; i < n; i++) yf[i] = tu_rand_uniform(-2, 2);
                    k->from_float[vt](yf, y + c * ys, n);
                }
                if (cases[ci].where == 1) memcpy(y + ys + 5 * 34, &cases[ci].h, sizeof(kiln_fp16_t));
                for (int c = 0; c < 3; c++) {
                    float s4[4];
                    k->vec_dot_x4[t](n, s4, w->data, y + c * ys);
                    for (int r = 0; r < 4; r++) {
                        float s1;
                        k->vec_dot[t](n, &s1, plain + r * rs, y + c * ys);
                        const float got = ldexpf(s4[r], -shift);
                        CHECK(same_or_nan(got, s1), "%s x4 %s scale 0x%04x (%s) col %d row %d: %.9g vs plain %.9g", k->isa,
                              kiln_type_name(t), cases[ci].h, cases[ci].where ? "activation" : "weight", c, r, got, s1);
                    }
                }
                if (k->gemm_x4[t]) {
                    for (int ncols = 1; ncols <= 3; ncols++) {
                        float s[3 * 4], e[4];
                        k->gemm_x4[t](n, ncols, s, 4, w->data, y, ys);
                        for (int c = 0; c < ncols; c++) {
                            k->vec_dot_x4[t](n, e, w->data, y + c * ys);
                            for (int r = 0; r < 4; r++) {
                                CHECK(same_or_nan(s[c * 4 + r], e[r]), "%s gemm_x4 %s scale 0x%04x ncols %d col %d row %d: %.9g vs x4 %.9g",
                                      k->isa, kiln_type_name(t), cases[ci].h, ncols, c, r, s[c * 4 + r], e[r]);
                            }
                        }
                    }
                }
                n_cases++;
                n_iq4 += t == KILN_TYPE_IQ4_NL;
                free(y);
            }
            free(yf); free(plain);
            kiln_free(ctx);
        }
    }
    printf("x4 / batched kernels with inf, nan and subnormal scales == plain: %d cases (iq4_nl %d)\n", n_cases, n_iq4);
}

static void test_bad_inputs(void) {
    struct kiln_context * ctx = tu_ctx(1 << 20);
    CHECK(!kiln_repack_tensor(NULL) && strstr(kiln_last_error(), "NULL"), "NULL tensor");
    struct kiln_tensor * f = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 32, 8);
    CHECK(!kiln_repack_tensor(f) && strstr(kiln_last_error(), "f32"), "f32: %s", kiln_last_error());
    struct kiln_tensor * q3 = kiln_new_tensor_2d(ctx, KILN_TYPE_Q4_0, 64, 3);
    CHECK(!kiln_repack_tensor(q3) && strstr(kiln_last_error(), "3 rows"), "3 rows: %s", kiln_last_error());
    struct kiln_tensor * q = kiln_new_tensor_2d(ctx, KILN_TYPE_Q8_0, 64, 8);
    struct kiln_tensor * v = kiln_view_2d(ctx, q, 64, 4, q->nb[1], 0);
    CHECK(!kiln_repack_tensor(v) && strstr(kiln_last_error(), "view"), "view: %s", kiln_last_error());
    CHECK(kiln_repack_tensor(q) && kiln_repack_tensor(q), "repacking twice is a no-op");
    /* mul_mat_id refuses repacked experts */
    struct kiln_tensor * as = kiln_new_tensor_3d(ctx, KILN_TYPE_Q8_0, 32, 4, 2);
    memset(as->data, 0, kiln_nbytes(as));
    CHECK(kiln_repack_tensor(as), "repack experts");
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 32, 1, 1);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 1, 1);
    memset(b->data, 0, kiln_nbytes(b));
    memset(ids->data, 0, kiln_nbytes(ids));
    struct kiln_tensor * o = kiln_mul_mat_id(ctx, as, b, ids);
    if (o) CHECK(tu_compute(ctx, o, 1) != KILN_STATUS_SUCCESS && strstr(kiln_last_error(), "repacked"), "mul_mat_id: %s", kiln_last_error());
    kiln_free(ctx);
}


/* kiln_repack_wanted: llama.cpp's repack rule of the CPU's own build, by
 * type and row count (kernels.h repack_rows) */
static void test_repack_wanted(void) {
    struct kiln_context * ctx = tu_ctx(1 << 20);
    const struct kiln_kernels * k = kiln_kernels();
    const bool arm = k->isa_id == KILN_ISA_NEON, dp = arm && kiln_cpu_has_dotprod();
    static const int64_t rows[] = { 4, 8, 12, 16, 6 };
    int bad = 0;
    for (int ti = 0; ti < NTYPES; ti++) {
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++) {
            const enum kiln_type t = types[ti];
            struct kiln_tensor * w = kiln_new_tensor_2d(ctx, t, 64, rows[ri]);
            int m = t == KILN_TYPE_Q8_0 ? 1 : 8; /* x86, scalar, wasm */
            if (dp) m = 4;
            else if (arm) m = 0;
            const bool want = k->vec_dot_x4[t] && m > 0 && rows[ri] % m == 0;
            if (kiln_repack_wanted(w) != want) {
                bad++;
                printf("  %s %s rows %lld: wanted %d, expected %d\n", k->isa, kiln_type_name(t), (long long) rows[ri], kiln_repack_wanted(w), want);
            }
        }
    }
    struct kiln_tensor * f = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 64, 8);
    CHECK(!bad && !kiln_repack_wanted(f) && !kiln_repack_wanted(NULL), "kiln_repack_wanted follows %s's rule (%d wrong)", k->isa, bad);
    kiln_free(ctx);
}

int main(void) {
    tu_seed(7);
    test_repack_wanted();
    test_kernels();
    /* subnormal block scales, raised by a power of two at repack and taken
     * off after the kernel: same bits as the plain path (repack.h) */
    amp = 1e-4f; /* q8_0 / iq4_nl scales ~8e-7, q4_0 ~1.3e-5: all subnormal */
    test_kernels();
    amp = 2e-5f; spike = 60000.0f; /* the spike's scale leaves less room than needed */
    test_kernels();
    amp = 1.0f; spike = 0.0f;
    for (int ti = 0; ti < NTYPES; ti++) {
        const enum kiln_type t = types[ti];
        test_mul_mat(t, 32, 4, 1, 1, 1);
        test_mul_mat(t, 64, 7, 1, 1, 1);
        test_mul_mat(t, 96, 13, 1, 1, 1);
        test_mul_mat(t, 256, 67, 1, 1, 1);
        test_mul_mat(t, 128, 37, 3, 1, 1);
        test_mul_mat(t, 64, 9, 1, 2, 4);
        test_mul_mat(t, 2048, 70, 1, 1, 1);
        test_mul_mat(t, 256, 52, 27, 1, 1); /* 16-row calls, a 4-row group and 24 + 3 activation rows */
        /* 48-row blocks ending in 16 + 4 + 1 rows, 5 blocks of 32 (not a whole
         * range of the 16-row kernels), 64 + 6 activation rows; then batches
         * (broadcast weights) with many activation rows each */
        test_mul_mat(t, 160, 117, 70, 1, 1);
        test_mul_mat(t, 96, 40, 5, 2, 4);
        amp = 1e-4f;
        test_mul_mat(t, 256, 52, 27, 1, 1);
        test_mul_mat(t, 256, 67, 1, 1, 1);
        test_mul_mat(t, 128, 37, 3, 1, 1);
        amp = 2e-5f; spike = 60000.0f;
        test_mul_mat(t, 96, 13, 2, 1, 1);
        amp = 1.0f; spike = 0.0f;
    }
    test_shift_specials();
    test_special_scales();
    test_bad_inputs();
#if defined(__aarch64__)
    {
        /* which NEON x4 kernels the table holds: the SDOT build exactly
         * where the CPU has dotprod, its batched 4-bit kernels through SMMLA
         * where it has i8mm too; KILN_EXPECT_DOTPROD / KILN_EXPECT_I8MM (the
         * qemu runs, CMakeLists.txt) say which this run must see */
        const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
        const int dp = kiln_cpu_has_dotprod(), mm = dp && kiln_cpu_has_i8mm();
        CHECK(kn && kn->vec_dot_x4[KILN_TYPE_Q4_0] == (dp ? q4_0x4_q8_0_vec_dot__neon_dotprod : q4_0x4_q8_0_vec_dot__neon) &&
              kn->gemm_x4[KILN_TYPE_Q8_0] == (dp ? q8_0x4_q8_0_gemm__neon_dotprod : NULL),
              "neon table's x4 kernels follow kiln_cpu_has_dotprod()");
        CHECK(kn && kn->gemm_x4[KILN_TYPE_Q4_0] == (mm ? q4_0x4_q8_0_gemm__neon_i8mm : dp ? q4_0x4_q8_0_gemm__neon_dotprod : q4_0x4_q8_0_gemm__neon) &&
              kn->gemm_x4[KILN_TYPE_IQ4_NL] == (mm ? iq4_nlx4_q8_0_gemm__neon_i8mm : dp ? iq4_nlx4_q8_0_gemm__neon_dotprod : iq4_nlx4_q8_0_gemm__neon),
              "neon table's batched 4-bit kernels follow kiln_cpu_has_i8mm()");
        const char * want = getenv("KILN_EXPECT_DOTPROD");
        if (want) CHECK(dp == atoi(want), "dotprod %d, KILN_EXPECT_DOTPROD=%s", dp, want);
        want = getenv("KILN_EXPECT_I8MM");
        if (want) CHECK(kiln_cpu_has_i8mm() == atoi(want), "i8mm %d, KILN_EXPECT_I8MM=%s", kiln_cpu_has_i8mm(), want);
        printf("neon x4 / gemm_x4 kernels checked above: the %s build%s\n", dp ? "dotprod (SDOT)" : "baseline (no dotprod)",
               mm ? ", batched q4_0 / iq4_nl through SMMLA (i8mm)" : "");
    }
#endif
#if defined(__wasm_relaxed_simd__)
    const struct kiln_kernels * kr = kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
    CHECK(kr && (kr->gemm_x4[KILN_TYPE_Q4_0] == q4_0x4_q8_0_gemm__wasm_relaxed_dotadd) == kiln_wasm_relaxed_dot_add_direct(),
          "the relaxed table's q4_0 kernels follow the dot-add probe");
    CHECK(kr && (kr->gemm_x4[KILN_TYPE_Q8_0] == q8_0x4_q8_0_gemm__wasm_relaxed_dotadd) == kiln_wasm_relaxed_dot_add_direct(),
          "the relaxed table's batched q8_0 kernel follows the dot-add probe");
    CHECK(kr && kr->vec_dot_x4[KILN_TYPE_IQ4_NL] && kr->gemm_x4[KILN_TYPE_IQ4_NL] &&
              (kr->vec_dot_x4[KILN_TYPE_IQ4_NL] == iq4_nlx4_q8_0_vec_dot__wasm_relaxed_dotadd) == kiln_wasm_relaxed_dot_add_direct() &&
              (kr->gemm_x4[KILN_TYPE_IQ4_NL] == iq4_nlx4_q8_0_gemm__wasm_relaxed_dotadd) == kiln_wasm_relaxed_dot_add_direct(),
          "the relaxed table has iq4_nl x4 / batched kernels, following the dot-add probe");
    {
        /* the batched q8_0 kernel's i16 form (not in the table) against the
         * table's i16 x4 kernel: the structure it shares with the dot-add
         * form, testable in every engine */
        struct kiln_kernels k16 = *kr;
        k16.vec_dot_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_vec_dot__wasm_relaxed;
        k16.gemm_x4[KILN_TYPE_Q8_0] = q8_0x4_q8_0_gemm__wasm_relaxed;
        for (int64_t n = 32; n <= 2048; n *= 4) {
            const size_t rs = kiln_row_size(KILN_TYPE_Q8_0, n);
            char * g = malloc(4 * rs);
            for (size_t i = 0; i < 4 * rs; i++) g[i] = (char) (int) tu_rand_uniform(-127, 127);
            for (size_t b = 0; b < 4 * rs; b += 136) {
                for (int j = 0; j < 4; j++) { const kiln_fp16_t h = (kiln_fp16_t) (0x2c00 + 97 * j + (int) (b % 7)); memcpy(g + b + 2 * j, &h, 2); }
            }
            test_gemm_x4(&k16, KILN_TYPE_Q8_0, n, g);
            free(g);
        }
    }
    if (kiln_wasm_relaxed_dot_add_direct()) {
        printf("relaxed dot-add is one instruction here: the table has the dotadd q4_0/q8_0/iq4_nl kernels, checked above; "
               "i16 == dotadd kernels: %d q4_0/q8_0 and %d iq4_nl cases\n", n_dotadd[0], n_dotadd[1]);
    }
    else printf("relaxed dot-add is NOT one instruction in this engine: the table has the i16 q4_0/q8_0/iq4_nl kernels; dotadd kernels NOT TESTED "
                "here (V8's fallback for it is slower, and wrong in Node 20's V8 11.3; Chromium on AVX-VNNI or arm64 runs them)\n");
#endif
    printf("gemm_x16 (16-row batched) kernels == their table's x4 bit for bit: %d cases (", n_x16);
    for (int i = 0; i < KILN_ISA_COUNT; i++) {
        if (n_x16_isa[i]) printf(" %s %d", kiln_kernels_for_isa((enum kiln_isa) i)->isa, n_x16_isa[i]);
    }
    printf(" )\n");
    if (kiln_kernels_for_isa(KILN_ISA_AVX512)) printf("avx512 x4 kernels == avx2 bit for bit: %d cases\n", n_avx512);
    else printf("avx512 row NOT TESTED: this CPU/build has no AVX-512 F+BW+VL+VNNI\n");
    return tu_finish();
}
