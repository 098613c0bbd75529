/*
 * test_quant_dot.c — the quantized dot products: the scalar reference of
 * every type against dequantize-then-double-dot, and every ISA variant
 * compiled into this build against the scalar one, over 1..16 blocks and
 * misaligned pointers.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "quants.h"
#include "cpu/kernels.h"
#include "cpu/arch/quant_dot.h"
#include "cpu/repack.h"

#include <math.h>

static const enum kiln_type qtypes[] = {
    KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1, KILN_TYPE_Q8_0,
    KILN_TYPE_Q2_K, KILN_TYPE_Q3_K, KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K,
    KILN_TYPE_IQ4_NL, KILN_TYPE_IQ4_XS, KILN_TYPE_TQ1_0, KILN_TYPE_TQ2_0,
    KILN_TYPE_IQ2_XXS, KILN_TYPE_IQ2_XS, KILN_TYPE_IQ2_S, KILN_TYPE_IQ3_XXS, KILN_TYPE_IQ3_S,
    KILN_TYPE_IQ1_S, KILN_TYPE_IQ1_M,
};
#define N_TYPES ((int) (sizeof(qtypes) / sizeof(qtypes[0])))

/* A weight row of type t: quantized from uniform data, or (types without a
 * quantizer) random bytes with the block scale forced to a sane value. */
static void make_weights(enum kiln_type t, int64_t n, uint8_t * q) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(t);
    if (tt->from_float_ref) {
        float * x = malloc(sizeof(float) * n);
        for (int64_t i = 0; i < n; i++) x[i] = tu_rand_uniform(-1, 1);
        if (t == KILN_TYPE_TQ1_0 || t == KILN_TYPE_TQ2_0) for (int64_t i = 0; i < n; i++) x[i] = (float) ((int) (x[i] * 1.5f));
        tt->from_float_ref(x, q, n);
        free(x);
        return;
    }
    const size_t nb = (size_t) (n / tt->blck_size);
    for (size_t j = 0; j < nb * tt->type_size; j++) q[j] = (uint8_t) tu_rand_u64();
    for (size_t b = 0; b < nb; b++) {
        uint8_t * blk = q + b * tt->type_size;
        if (t == KILN_TYPE_IQ1_M) {
            /* fp16 scale 0x3c00 lives in the top nibbles of the 4 scale words */
            blk[49] &= 0x0f; blk[51] &= 0x0f;
            blk[53] = (uint8_t) ((blk[53] & 0x0f) | 0xc0);
            blk[55] = (uint8_t) ((blk[55] & 0x0f) | 0x30);
        } else {
            blk[0] = (uint8_t) tu_rand_u64();
            blk[1] = (uint8_t) (0x34 | (tu_rand_u64() & 0x83)); /* |d| in [2^-3, 2^-2) or negative */
        }
    }
}

static double ref_dot(enum kiln_type t, enum kiln_type vt, int64_t n, const void * x, const void * y, double * sum_abs) {
    float * xf = malloc(sizeof(float) * n);
    float * yf = malloc(sizeof(float) * n);
    kiln_get_type_traits(t)->to_float(x, xf, n);
    kiln_get_type_traits(vt)->to_float(y, yf, n);
    double s = 0, sa = 0;
    for (int64_t i = 0; i < n; i++) { s += (double) xf[i] * yf[i]; sa += fabs((double) xf[i] * yf[i]); }
    free(xf); free(yf);
    *sum_abs = sa;
    return s;
}

static void test_scalar_vs_reference(void) {
    tu_case = "scalar vec_dot vs dequantized dot";
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    tu_seed(21);
    for (int k = 0; k < N_TYPES; k++) {
        const enum kiln_type t = qtypes[k];
        const enum kiln_type vt = ks->vec_dot_type[t];
        CHECK(ks->vec_dot[t] && vt < KILN_TYPE_COUNT && ks->from_float[vt], "%s has vec_dot", kiln_type_name(t));
        if (!ks->vec_dot[t]) continue;
        const int64_t n = 256 * 5;
        uint8_t * x = malloc(kiln_row_size(t, n));
        uint8_t * y = malloc(kiln_row_size(vt, n));
        float * act = malloc(sizeof(float) * n);
        double worst = 0;
        for (int rep = 0; rep < 4; rep++) {
            make_weights(t, n, x);
            for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1) * (rep == 3 ? 100.f : 1.f);
            ks->from_float[vt](act, y, n);
            float s = 0;
            ks->vec_dot[t](n, &s, x, y);
            double sa;
            const double r = ref_dot(t, vt, n, x, y, &sa);
            const double rel = fabs(s - r) / (sa + 1e-30);
            if (rel > worst) worst = rel;
            /* the dequantized activations are what the kernel multiplies, so
             * this checks the bit layouts and scale algebra, not precision */
        }
        /* q*_1: the activation's s = fp16(d * sum(q)) is rounded to half
         * precision, so the min term only tracks to ~2^-11 */
        const double tol = vt == KILN_TYPE_Q8_1 ? 1e-3 : 2e-5;
        CHECK(worst < tol, "%s . %s: relative error %.3g", kiln_type_name(t), kiln_type_name(vt), worst);
        free(x); free(y); free(act);
    }
}

/* every non-scalar ISA table against the scalar one */
static void test_isa_vs_scalar(void) {
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    static const int nblocks[] = { 1, 2, 3, 7, 8, 16 };
    int n_isa = 0;
    for (int isa = 1; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kk = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kk) continue;
        n_isa++;
        tu_case = kk->isa;
        tu_seed(100 + isa);
        for (int k = 0; k < N_TYPES; k++) {
            const enum kiln_type t = qtypes[k];
            const enum kiln_type vt = ks->vec_dot_type[t];
            CHECK(kk->vec_dot[t] && kk->vec_dot_type[t] == vt, "%s: %s registered with the same activation type", kk->isa, kiln_type_name(t));
            if (!kk->vec_dot[t]) continue;
            const int64_t bs = kiln_blck_size(t) > kiln_blck_size(vt) ? kiln_blck_size(t) : kiln_blck_size(vt);
            double worst = 0;
            int bad_len = -1;
            for (int li = 0; li < 6; li++) {
                for (int mis = 0; mis < 2; mis++) {
                    const int64_t n = bs * nblocks[li];
                    const size_t xs = kiln_row_size(t, n), ys = kiln_row_size(vt, n);
                    uint8_t * xb = malloc(xs + 8);
                    uint8_t * yb = malloc(ys + 8);
                    /* blocks keep their natural C alignment (2 bytes, q8_K 4:
                     * fp16/float members, as in ggml) but no SIMD alignment */
                    uint8_t * x = xb + 2 * mis;
                    uint8_t * y = yb + 4 * mis;
                    float * act = malloc(sizeof(float) * n);
                    make_weights(t, n, x);
                    for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1);
                    ks->from_float[vt](act, y, n);
                    float s0 = 0, s1 = 0, s2 = 0;
                    ks->vec_dot[t](n, &s0, x, y);
                    kk->vec_dot[t](n, &s1, x, y);
                    /* the mat-vec variant, where the table has one */
                    if (kk->vec_dot_1[t]) kk->vec_dot_1[t](n, &s2, x, y);
                    else s2 = s1;
                    double sa;
                    ref_dot(t, vt, n, x, y, &sa);
                    const double rel = fmax(fabs((double) s1 - s0), fabs((double) s2 - s0)) / (sa + 1e-30);
                    if (rel > worst) { worst = rel; if (rel >= 1e-5) bad_len = (int) nblocks[li]; }
                    free(xb); free(yb); free(act);
                }
            }
            CHECK(worst < 1e-5, "%s %s vs scalar: relative diff %.3g (at %d blocks)", kk->isa, kiln_type_name(t), worst, bad_len);
        }
    }
    printf("  ISA tables tested against scalar: %d\n", n_isa);
}

/* Variants the table does not hold on this CPU (e.g. plain NEON where the
 * CPU has dotprod): called directly against the scalar ones. */
struct variant { const char * name; kiln_vec_dot_t fn; enum kiln_type t; };
#define VARIANT(name, S) { #name "__" #S, name##_vec_dot__##S, 0 },
static void test_direct_variants(void) {
#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
    struct variant vs[] = { KILN_QDOT_SIMD_LIST(VARIANT, neon) KILN_QDOT_SIMD_LIST(VARIANT, neon_dotprod) };
    const int nv = (int) (sizeof(vs) / sizeof(vs[0]));
    const int with_dotprod = kiln_cpu_has_dotprod();
    static const enum kiln_type order[12] = {
        KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1, KILN_TYPE_Q8_0, KILN_TYPE_Q2_K,
        KILN_TYPE_Q3_K, KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K, KILN_TYPE_IQ4_NL, KILN_TYPE_IQ4_XS };
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    tu_case = "direct neon variants";
    tu_seed(77);
    for (int v = 0; v < nv; v++) {
        if (v >= 12 && !with_dotprod) break;
        const enum kiln_type t = order[v % 12];
        const enum kiln_type vt = ks->vec_dot_type[t];
        const int64_t n = 256 * 3;
        uint8_t * x = malloc(kiln_row_size(t, n) + 2);
        uint8_t * y = malloc(kiln_row_size(vt, n) + 4);
        float * act = malloc(sizeof(float) * n);
        make_weights(t, n, x + 2);
        for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1);
        ks->from_float[vt](act, y + 4, n);
        float s0 = 0, s1 = 0;
        ks->vec_dot[t](n, &s0, x + 2, y + 4);
        vs[v].fn(n, &s1, x + 2, y + 4);
        double sa;
        ref_dot(t, vt, n, x + 2, y + 4, &sa);
        CHECK(fabs((double) s1 - s0) / (sa + 1e-30) < 1e-5, "%s vs scalar", vs[v].name);
        free(x); free(y); free(act);
    }
    printf("  direct NEON variants checked (dotprod %s)\n", with_dotprod ? "yes" : "no");
#endif
}

/* The wasm q8_0 kernels (SIMD128 and relaxed) follow the scalar
 * reference's float order: plain and x4 must equal it bit for bit, with
 * scales that are subnormal, and inf or nan on either side (the x4
 * kernels' exact fallback). */
#if defined(__wasm_simd128__)
static void test_q8_0_reference_order(const struct kiln_kernels * k, const struct kiln_kernels * ks) {
    tu_case = k->isa;
    const int64_t n = 32 * 40;
    uint8_t * y = malloc(kiln_row_size(KILN_TYPE_Q8_0, n));
    float * act = malloc(sizeof(float) * n);
    const int64_t nb = n / 32;
    block_q8_0 * rows = malloc(sizeof(block_q8_0) * nb * 4);
    block_q8_0x4 * grp = malloc(sizeof(block_q8_0x4) * nb);
    int same_plain = 0, same_x4 = 0, total = 0;
    for (int rep = 0; rep < 24; rep++) {
        for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1) * (rep % 3 ? 3.f : 0.02f);
        ks->from_float[KILN_TYPE_Q8_0](act, y, n);
        block_q8_0 * by = (block_q8_0 *) y;
        for (int r = 0; r < 4; r++) {
            for (int64_t b = 0; b < nb; b++) {
                block_q8_0 * q = &rows[r * nb + b];
                q->d = kiln_fp32_to_fp16(tu_rand_uniform(0.001f, 0.05f) * (tu_rand_uniform(0, 1) < 0.3f ? -1.f : 1.f));
                for (int j = 0; j < 32; j++) q->qs[j] = (int8_t) (tu_rand_uniform(-127.49f, 127.49f));
            }
        }
        if (rep >= 8) { /* specials */
            const uint16_t sp[6] = { 0x7c00, 0xfc00, 0x7e00, 0x0001, 0x83ff, 0x0000 };
            rows[(rep % 4) * nb + rep % nb].d = sp[rep % 6];
            if (rep % 2) by[(rep * 7) % nb].d = sp[(rep + 3) % 6];
            if (rep >= 20) for (int64_t b = 0; b < nb; b++) rows[b].d = 0x0200; /* all subnormal */
        }
        for (int64_t b = 0; b < nb; b++) {
            for (int r = 0; r < 4; r++) { grp[b].d[r] = rows[r * nb + b].d; memcpy(grp[b].qs + 32 * r, rows[r * nb + b].qs, 32); }
        }
        float g4[4];
        k->vec_dot_x4[KILN_TYPE_Q8_0](n, g4, grp, y);
        for (int r = 0; r < 4; r++) {
            float ref = 0, pl = 0;
            ks->vec_dot[KILN_TYPE_Q8_0](n, &ref, &rows[r * nb], y);
            k->vec_dot[KILN_TYPE_Q8_0](n, &pl, &rows[r * nb], y);
            same_plain += memcmp(&pl, &ref, 4) == 0 || (isnan(pl) && isnan(ref));
            same_x4 += memcmp(&g4[r], &ref, 4) == 0 || (isnan(g4[r]) && isnan(ref));
            total++;
        }
    }
    CHECK(same_plain == total, "q8_0: plain == scalar bit for bit (%d of %d)", same_plain, total);
    CHECK(same_x4 == total, "q8_0: x4 == scalar bit for bit, specials included (%d of %d)", same_x4, total);
    free(rows); free(grp);
    free(y); free(act);
}
#endif

/* The relaxed-SIMD table (wasm builds with -mrelaxed-simd): its q4_0 dot
 * makes the SIMD128 kernel's i32 lanes, so the two agree bit for bit; its
 * q8_0 dot must stay exact at the extremes of the 8-bit range, where the
 * i16 pair sums of relaxed_dot come closest to saturating (2 * 127 * 127). */
#if defined(__wasm_relaxed_simd__)
/* A q6_K or q5_K relaxed kernel against SIMD128's, bit for bit, 9
 * super-blocks, 24 rows: quantized rows, then random bytes with the values,
 * scales and activations at their extremes (q6_K: quants 0 / 63, scales
 * -128 / 127, i16 pair sums up to 16128; q5_K: values 0 / 31, scales and
 * mins 63; activations -128 / 127 for both) */
static void relaxed_k_vs_simd128(const struct kiln_kernels * kr, const struct kiln_kernels * kb, const struct kiln_kernels * ks,
                                 enum kiln_type t) {
    const int64_t n = 256 * 9;
    uint8_t * xm = malloc(kiln_row_size(t, n) + 2), * ym = malloc(kiln_row_size(KILN_TYPE_Q8_K, n) + 4);
    uint8_t * x = xm + 2, * y = ym + 4;
    float * act = malloc(sizeof(float) * n);
    int same = 0;
    for (int rep = 0; rep < 24; rep++) {
        make_weights(t, n, x);
        for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1) * (rep % 2 ? 30.f : 1.f);
        ks->from_float[KILN_TYPE_Q8_K](act, y, n);
        const uint8_t v = rep % 4 == 0 ? 0xff : 0;
        const bool rnd = rep % 4 > 1;
        for (int64_t b = 0; rep >= 8 && b < n / 256; b++) {
            if (t == KILN_TYPE_Q6_K) {
                block_q6_K * bx = (block_q6_K *) x + b;
                for (int j = 0; j < 128; j++) bx->ql[j] = rnd ? (uint8_t) tu_rand_u64() : v;
                for (int j = 0; j < 64; j++) bx->qh[j] = rnd ? (uint8_t) tu_rand_u64() : v;
                for (int j = 0; j < 16; j++) bx->scales[j] = (int8_t) (j % 3 == 0 ? -128 : j % 3 == 1 ? 127 : (int8_t) tu_rand_u64());
            } else {
                block_q5_K * bx = (block_q5_K *) x + b;
                for (int j = 0; j < 128; j++) bx->qs[j] = rnd ? (uint8_t) tu_rand_u64() : v;
                for (int j = 0; j < 32; j++) bx->qh[j] = rnd ? (uint8_t) tu_rand_u64() : v;
                for (int j = 0; j < 12; j++) bx->scales[j] = rep % 2 ? 0xff : (uint8_t) tu_rand_u64();
            }
            block_q8_K * by = (block_q8_K *) y + b;
            for (int j = 0; j < 256; j++) by->qs[j] = (int8_t) (rep % 3 == 0 ? -128 : rep % 3 == 1 ? 127 : (int8_t) tu_rand_u64());
            for (int j = 0; j < 16; j++) {
                int sum = 0;
                for (int k = 0; k < 16; k++) sum += by->qs[16 * j + k];
                by->bsums[j] = (int16_t) sum;
            }
        }
        float a = 0, b = 0;
        kr->vec_dot[t](n, &a, x, y);
        kb->vec_dot[t](n, &b, x, y);
        same += memcmp(&a, &b, sizeof a) == 0;
    }
    CHECK(same == 24, "%s: relaxed == SIMD128 bit for bit (%d of 24)", kiln_type_name(t), same);
    free(xm); free(ym); free(act);
}
#endif

static void test_wasm_relaxed(void) {
#if defined(__wasm_relaxed_simd__)
    tu_case = "wasm_relaxed";
    const struct kiln_kernels * kr = kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
    const struct kiln_kernels * kb = kiln_kernels_for_isa(KILN_ISA_WASM_SIMD128);
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    CHECK(kr && kb, "relaxed and SIMD128 tables present");
    if (!kr || !kb) return;
    tu_seed(303);
    const int64_t n = 32 * 40;
    uint8_t * x = malloc(kiln_row_size(KILN_TYPE_Q8_0, n));
    uint8_t * y = malloc(kiln_row_size(KILN_TYPE_Q8_0, n));
    float * act = malloc(sizeof(float) * n);
    int same = 0;
    for (int rep = 0; rep < 20; rep++) {
        make_weights(KILN_TYPE_Q4_0, n, x);
        for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1) * (rep % 2 ? 50.f : 1.f);
        ks->from_float[KILN_TYPE_Q8_0](act, y, n);
        float a = 0, b = 0;
        kr->vec_dot[KILN_TYPE_Q4_0](n, &a, x, y);
        kb->vec_dot[KILN_TYPE_Q4_0](n, &b, x, y);
        same += memcmp(&a, &b, sizeof a) == 0;
    }
    CHECK(same == 20, "q4_0: relaxed == SIMD128 bit for bit (%d of 20)", same);
    /* q8_0 at +-127 in both operands, all sign combinations */
    static const int8_t vals[4][2] = { { 127, 127 }, { -127, -127 }, { 127, -127 }, { -127, 127 } };
    for (int c = 0; c < 4; c++) {
        block_q8_0 * bx = (block_q8_0 *) x, * by = (block_q8_0 *) y;
        for (int64_t b = 0; b < n / 32; b++) {
            bx[b].d = kiln_fp32_to_fp16(0.5f); by[b].d = kiln_fp32_to_fp16(0.25f);
            for (int j = 0; j < 32; j++) { bx[b].qs[j] = vals[c][0]; by[b].qs[j] = (j % 3 == 0) ? 0 : vals[c][1]; }
        }
        float r = 0, s0 = 0;
        kr->vec_dot[KILN_TYPE_Q8_0](n, &r, x, y);
        ks->vec_dot[KILN_TYPE_Q8_0](n, &s0, x, y);
        CHECK(r == s0, "q8_0 extremes %d x %d: relaxed %.9g, scalar %.9g", vals[c][0], vals[c][1], r, s0);
    }
    free(x); free(y); free(act);
    /* q6_K and q5_K: the relaxed kernels' integer sums give SIMD128's floats
     * bit for bit (relaxed_k_vs_simd128) */
    relaxed_k_vs_simd128(kr, kb, ks, KILN_TYPE_Q6_K);
    CHECK(kr->vec_dot[KILN_TYPE_Q6_K] == q6_K_q8_K_vec_dot__wasm_relaxed, "q6_K: the relaxed table holds the relaxed kernel");
    relaxed_k_vs_simd128(kr, kb, ks, KILN_TYPE_Q5_K);
    CHECK(kr->vec_dot[KILN_TYPE_Q5_K] == q5_K_q8_K_vec_dot__wasm_relaxed, "q5_K: the relaxed table holds the relaxed kernel");
#endif
}

/* The avx512 and avxvnni rows' rule: every per-type dot (and mat-vec-only
 * dot) bit-identical to the avx2 row's (the ones they replace and the AVX2
 * ones they keep), on quantized weights and activations at 1..37 blocks,
 * misaligned. */
static void test_vnni_vs_avx2(enum kiln_isa isa, const char * needs) {
    const struct kiln_kernels * k5 = kiln_kernels_for_isa(isa);
    const struct kiln_kernels * k2 = kiln_kernels_for_isa(KILN_ISA_AVX2);
    if (!k5) {
        printf("%s row NOT TESTED: this CPU/build has no %s\n", kiln_isa_name(isa), needs);
        return;
    }
    tu_case = kiln_isa_name(isa);
    tu_seed(512);
    int cases = 0;
    static const int nblocks[] = { 1, 2, 3, 8, 37 };
    for (int ti = 0; ti < N_TYPES; ti++) {
        const enum kiln_type t = qtypes[ti], vt = k2->vec_dot_type[t];
        CHECK(k5->vec_dot_type[t] == vt, "%s: same activation type", kiln_type_name(t));
        const int64_t bs = kiln_blck_size(t) > kiln_blck_size(vt) ? kiln_blck_size(t) : kiln_blck_size(vt);
        for (int li = 0; li < 5; li++) {
            const int64_t n = bs * nblocks[li];
            uint8_t * xb = malloc(kiln_row_size(t, n) + 8), * yb = malloc(kiln_row_size(vt, n) + 8);
            uint8_t * x = xb + 2, * y = yb + 4;
            float * act = malloc(sizeof(float) * (size_t) n);
            make_weights(t, n, x);
            for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-3, 3);
            k2->from_float[vt](act, y, n);
            float a = 0, b = 0;
            k5->vec_dot[t](n, &a, x, y);
            k2->vec_dot[t](n, &b, x, y);
            CHECK(memcmp(&a, &b, sizeof a) == 0, "%s %s n=%lld: %.9g, avx2 %.9g", k5->isa, kiln_type_name(t), (long long) n, a, b);
            cases++;
            /* the mat-vec-only order, where AVX2 has one */
            CHECK(!k2->vec_dot_1[t] == !k5->vec_dot_1[t], "%s %s: vec_dot_1 present as in avx2", k5->isa, kiln_type_name(t));
            if (k2->vec_dot_1[t] && k5->vec_dot_1[t]) {
                k5->vec_dot_1[t](n, &a, x, y);
                k2->vec_dot_1[t](n, &b, x, y);
                CHECK(memcmp(&a, &b, sizeof a) == 0, "%s %s mat-vec n=%lld: %.9g, avx2 %.9g", k5->isa, kiln_type_name(t), (long long) n, a, b);
                cases++;
            }
            free(xb); free(yb); free(act);
        }
    }
    printf("  %s dots == avx2 bit for bit: %d cases\n", k5->isa, cases);
}

/* vec_dot_y4 (one weight row against 4 activation rows): every output
 * bit-identical to the same table's vec_dot (itself tested against scalar
 * and, on avx512, against avx2 above), at 1..37 blocks, rows off vector
 * alignment and an odd output stride. Counts the tables that have one, so a table losing
 * it shows in the output. */
static void test_vec_dot_y4(void) {
    int cases = 0, tables = 0;
    static const int nblocks[] = { 1, 2, 3, 8, 37 };
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kk = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kk) continue;
        bool any = false;
        tu_case = kk->isa;
        tu_seed(700 + isa);
        for (int ti = 0; ti < N_TYPES; ti++) {
            const enum kiln_type t = qtypes[ti], vt = kk->vec_dot_type[t];
            if (!kk->vec_dot_y4[t]) continue;
            any = true;
            const int64_t bs = kiln_blck_size(t) > kiln_blck_size(vt) ? kiln_blck_size(t) : kiln_blck_size(vt);
            for (int li = 0; li < 5; li++) {
                const int64_t n = bs * nblocks[li];
                const size_t ys = kiln_row_size(vt, n) + 4; /* rows 4-byte aligned (the blocks' own alignment), not 16 or 64 */
                uint8_t * xb = malloc(kiln_row_size(t, n) + 8), * yb = malloc(4 * ys + 8);
                uint8_t * x = xb + 2, * y = yb + 4;
                float * act = malloc(sizeof(float) * (size_t) n);
                make_weights(t, n, x);
                for (int c = 0; c < 4; c++) {
                    for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-3, 3) * (float) (c + 1);
                    kk->from_float[vt](act, y + (size_t) c * ys, n);
                }
                float s[4 * 5];
                for (int i = 0; i < 20; i++) s[i] = -1.0f;
                kk->vec_dot_y4[t](n, s, 5, x, y, ys);
                for (int c = 0; c < 4; c++) {
                    float want = 0;
                    kk->vec_dot[t](n, &want, x, y + (size_t) c * ys);
                    CHECK(memcmp(&s[5 * c], &want, sizeof want) == 0, "%s %s y4 n=%lld row %d: %.9g, vec_dot %.9g", kk->isa,
                          kiln_type_name(t), (long long) n, c, s[5 * c], want);
                    CHECK(s[5 * c + 1] == -1.0f, "%s %s y4: wrote outside its outputs", kk->isa, kiln_type_name(t));
                    cases++;
                }
                free(xb); free(yb); free(act);
            }
        }
        tables += any;
    }
    printf("  vec_dot_y4 == vec_dot bit for bit: %d cases in %d tables\n", cases, tables);
}

/* vec_dot_rows (a block of weight rows against a block of activation rows):
 * every output bit-identical to the same table's vec_dot, for 1, 3, 8, 9
 * and 19 weight rows (the kernels' 8-row groups and tails) against 1..70
 * activation rows (past their 32- / 64-row column chunks), at 1, 3 and 8 blocks,
 * rows at odd strides off vector alignment, results at a stride (nothing
 * written outside). Extremes included: one weight row of all-63 6-bit
 * values with scales -128 / 127 (Q6_K), of all-31 5-bit values with every
 * scale and min 63 (Q5_K), activation rows of one repeated value (q8_K
 * -128 throughout) and of +-max alternating, where the kernels' i16 sums
 * reach 4 * 63 * 128 (4 * 31 * 128); Q5_K also rows of random bytes and
 * rows with fp16 d / dmin at 65504 and the smallest subnormal. */
static void test_vec_dot_rows(void) {
    int cases = 0, tables = 0, type_cases[N_TYPES] = { 0 };
    static const int nblocks[] = { 1, 3, 8 };
    static const int nrows[] = { 1, 3, 8, 9, 19 };
    enum { NR = 19, NC = 70 };
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kk = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kk) continue;
        bool any = false;
        tu_case = kk->isa;
        tu_seed(800 + isa);
        for (int ti = 0; ti < N_TYPES; ti++) {
            const enum kiln_type t = qtypes[ti], vt = kk->vec_dot_type[t];
            if (!kk->vec_dot_rows[t]) continue;
            any = true;
            const int64_t bs = kiln_blck_size(t) > kiln_blck_size(vt) ? kiln_blck_size(t) : kiln_blck_size(vt);
            for (int li = 0; li < 3; li++) {
                const int64_t n = bs * nblocks[li];
                const size_t xs = kiln_row_size(t, n) + 6, ys = kiln_row_size(vt, n) + 4;
                uint8_t * xb = malloc(NR * xs + 8), * yb = malloc(NC * ys + 8);
                uint8_t * x = xb + 2, * y = yb + 4;
                float * act = malloc(sizeof(float) * (size_t) n);
                for (int r = 0; r < NR; r++) make_weights(t, n, x + (size_t) r * xs);
                if (t == KILN_TYPE_Q6_K) {
                    block_q6_K * b = (block_q6_K *) x;
                    for (int64_t i = 0; i < n / QK_K; i++) {
                        memset(b[i].ql, 0xff, sizeof b[i].ql);
                        memset(b[i].qh, 0xff, sizeof b[i].qh);
                        for (int j = 0; j < 16; j++) b[i].scales[j] = (int8_t) (j % 3 ? -128 : 127);
                    }
                }
                if (t == KILN_TYPE_Q5_K) {
                    /* row 0: every value 31, every scale and min 63 (the
                     * i16 bound 4 * 31 * 128 against the -128 rows); rows
                     * 4..6: random bytes (every 6-bit scale / min pattern,
                     * every qh bit); row 9 (the first tail row of 9 and
                     * 19): d = 65504, dmin the smallest subnormal; row 17:
                     * d the smallest subnormal, dmin = -65504 */
                    for (int64_t i = 0; i < n / QK_K; i++) {
                        block_q5_K * b0 = (block_q5_K *) x + i;
                        memset(b0->qs, 0xff, sizeof b0->qs);
                        memset(b0->qh, 0xff, sizeof b0->qh);
                        memset(b0->scales, 0xff, sizeof b0->scales);
                        for (int r = 4; r <= 6; r++) {
                            block_q5_K * br = (block_q5_K *) (x + (size_t) r * xs) + i;
                            uint8_t * raw = (uint8_t *) br;
                            for (size_t j = 0; j < sizeof *br; j++) raw[j] = (uint8_t) tu_rand_u64();
                            br->d = (kiln_fp16_t) (0x2c00 | (tu_rand_u64() & 0x83ff));
                            br->dmin = (kiln_fp16_t) (0x2000 | (tu_rand_u64() & 0x83ff));
                        }
                        ((block_q5_K *) (x + 9 * xs) + i)->d = 0x7bff;
                        ((block_q5_K *) (x + 9 * xs) + i)->dmin = 0x0001;
                        ((block_q5_K *) (x + 17 * xs) + i)->d = 0x0001;
                        ((block_q5_K *) (x + 17 * xs) + i)->dmin = 0xfbff;
                    }
                }
                for (int c = 0; c < NC; c++) {
                    for (int64_t i = 0; i < n; i++) {
                        act[i] = c % 7 == 1 ? 2.5f : c % 7 == 2 ? (i % 2 ? -3.0f : 3.0f) : tu_rand_uniform(-3, 3) * (float) (c % 5 + 1);
                    }
                    kk->from_float[vt](act, y + (size_t) c * ys, n);
                }
                float * want = malloc(sizeof(float) * NR * NC);
                for (int c = 0; c < NC; c++) {
                    for (int r = 0; r < NR; r++) kk->vec_dot[t](n, &want[c * NR + r], x + (size_t) r * xs, y + (size_t) c * ys);
                }
                float * s = malloc(sizeof(float) * (NR + 3) * NC);
                int bad = 0;
                for (int ri = 0; ri < 5 && !bad; ri++) {
                    const int nr = nrows[ri];
                    const size_t ss = (size_t) nr + 3;
                    for (int nc = 1; nc <= NC && !bad; nc++) {
                        for (size_t i = 0; i < ss * NC; i++) s[i] = -1.0f;
                        kk->vec_dot_rows[t](n, nr, nc, s, ss, x, xs, y, ys);
                        for (int c = 0; c < NC; c++) {
                            for (size_t r = 0; r < ss; r++) {
                                const float got = s[c * ss + r];
                                if (c >= nc || (int) r >= nr) {
                                    if (got != -1.0f) { CHECK(0, "%s %s rows: wrote outside (row %d col %d)", kk->isa, kiln_type_name(t), (int) r, c); bad = 1; }
                                    continue;
                                }
                                if (memcmp(&got, &want[c * NR + r], sizeof got)) {
                                    CHECK(0, "%s %s rows n=%lld nr %d nc %d: row %d col %d %.9g, vec_dot %.9g", kk->isa, kiln_type_name(t),
                                          (long long) n, nr, nc, (int) r, c, got, want[c * NR + r]);
                                    bad = 1;
                                }
                                cases++;
                                type_cases[ti]++;
                            }
                        }
                    }
                }
                CHECK(!bad, "%s %s vec_dot_rows n=%lld", kk->isa, kiln_type_name(t), (long long) n);
                free(xb); free(yb); free(act); free(want); free(s);
            }
        }
        tables += any;
    }
    printf("  vec_dot_rows == vec_dot bit for bit: %d outputs in %d tables\n", cases, tables);
    for (int ti = 0; ti < N_TYPES; ti++) {
        if (type_cases[ti]) printf("    %s: %d outputs\n", kiln_type_name(qtypes[ti]), type_cases[ti]);
    }
    if (!kiln_kernels_for_isa(KILN_ISA_AVX512)) printf("  avx512 vec_dot_rows NOT TESTED: this CPU/build has no AVX-512 F+BW+VL+VNNI\n");
}

/* block b of an activation row for the quantizer tests (round: which
 * variant): by b % 8 random, exact ties at scale 1 (amax 127, k + 0.5),
 * zeros, subnormals, huge values, +-inf, NaN, NaN last */
static void fill_act_block(float * xb, int b, int round) {
    const int kind = b % 8;
    for (int j = 0; j < 32; j++) {
        float v = tu_rand_uniform(-2, 2);
        if (kind == 1) v = (float) ((int) tu_rand_uniform(-127, 127)) + 0.5f; /* ties at scale 1 */
        if (kind == 2) v = 0.0f;
        if (kind == 3) v *= 1e-40f;                                      /* subnormal */
        if (kind == 4) v *= 1e30f;
        xb[j] = v;
    }
    if (kind == 1) xb[(round + b) % 32] = (round & 2) ? -127.0f : 127.0f;
    if (kind == 5) xb[(3 * b + round) % 32] = (round & 2) ? -INFINITY : INFINITY;
    if (kind == 6) xb[(5 * b + round) % 32] = NAN;
    if (kind == 7 && round >= 2) xb[31] = NAN;
}

/* Every table's activation quantizer for Q8_0 writes the bytes of
 * kiln_quantize_row_q8_0_act (ggml x86's rounding; NEON's: below): the
 * blocks of fill_act_block, input and output off vector alignment. */
static void test_q8_0_act_quantizers(void) {
    int cases = 0;
    enum { NB = 64, N = NB * 32 };
    float * x = malloc(sizeof(float) * (N + 1));
    uint8_t * want = malloc(kiln_row_size(KILN_TYPE_Q8_0, N)), * got = malloc(kiln_row_size(KILN_TYPE_Q8_0, N) + 2);
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * kk = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!kk || isa == KILN_ISA_NEON) continue; /* ggml arm64's bytes: test_neon_act_quantizers */
        tu_case = kk->isa;
        tu_seed(900 + isa);
        for (int round = 0; round < 4; round++) {
            float * xs = x + (round & 1); /* misaligned every other round */
            for (int b = 0; b < NB; b++) fill_act_block(xs + 32 * b, b, round);
            kiln_quantize_row_q8_0_act(xs, want, N);
            kk->from_float[KILN_TYPE_Q8_0](xs, got + 2, N); /* blocks are 2-byte aligned: off vector alignment */
            CHECK(memcmp(want, got + 2, kiln_row_size(KILN_TYPE_Q8_0, N)) == 0, "%s q8_0 activation bytes differ (round %d)", kk->isa, round);
            cases++;
        }
    }
    free(x); free(want); free(got);
    printf("  q8_0 activation quantizers == kiln_quantize_row_q8_0_act: %d rows of %d blocks\n", cases, (int) NB);
}

#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
#include <arm_neon.h>

/* ---- llama.cpp's arm64 arithmetic for the 32-element blocks, written as
 * scalar code from ggml's NEON source (arch/arm/quants.c, llamafile's
 * tinyBLAS_Q0_ARM), with the contractions its compiler makes (fused
 * vmlaq_n_f32, `s += a * b`, `a * b + c * d` as fma(a, b, c * d)). ---- */

/* block i's weight quants as signed values, in the order they meet
 * y.qs[0..31]; its scale d, and for q4_1 / q5_1 the min m */
static void ggml_arm_decode(enum kiln_type t, const uint8_t * row, int64_t i, int8_t q[32], float * d, float * m) {
    static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
    *m = 0;
    switch (t) {
        case KILN_TYPE_Q4_0: { const block_q4_0 * b = (const block_q4_0 *) row + i; *d = kiln_fp16_to_fp32(b->d);
            for (int j = 0; j < 16; j++) { q[j] = (int8_t) ((b->qs[j] & 15) - 8); q[16 + j] = (int8_t) ((b->qs[j] >> 4) - 8); } break; }
        case KILN_TYPE_Q4_1: { const block_q4_1 * b = (const block_q4_1 *) row + i; *d = kiln_fp16_to_fp32(b->d); *m = kiln_fp16_to_fp32(b->m);
            for (int j = 0; j < 16; j++) { q[j] = (int8_t) (b->qs[j] & 15); q[16 + j] = (int8_t) (b->qs[j] >> 4); } break; }
        case KILN_TYPE_Q5_0: case KILN_TYPE_Q5_1: {
            const uint8_t * qh, * qs;
            if (t == KILN_TYPE_Q5_0) { const block_q5_0 * b = (const block_q5_0 *) row + i; *d = kiln_fp16_to_fp32(b->d); qh = b->qh; qs = b->qs; }
            else { const block_q5_1 * b = (const block_q5_1 *) row + i; *d = kiln_fp16_to_fp32(b->d); *m = kiln_fp16_to_fp32(b->m); qh = b->qh; qs = b->qs; }
            const uint32_t h = (uint32_t) qh[0] | (uint32_t) qh[1] << 8 | (uint32_t) qh[2] << 16 | (uint32_t) qh[3] << 24;
            const int off = t == KILN_TYPE_Q5_0 ? 16 : 0;
            for (int j = 0; j < 16; j++) {
                q[j] = (int8_t) (((qs[j] & 15) | ((h >> j) & 1) << 4) - off);
                q[16 + j] = (int8_t) (((qs[j] >> 4) | ((h >> (j + 16)) & 1) << 4) - off);
            }
            break; }
        case KILN_TYPE_Q8_0: { const block_q8_0 * b = (const block_q8_0 *) row + i; *d = kiln_fp16_to_fp32(b->d);
            memcpy(q, b->qs, 32); break; }
        default: { const block_iq4_nl * b = (const block_iq4_nl *) row + i; *d = kiln_fp16_to_fp32(b->d);
            for (int j = 0; j < 16; j++) { q[j] = kv[b->qs[j] & 15]; q[16 + j] = kv[b->qs[j] >> 4]; } break; }
    }
}

/* the 4 i32 lanes of ggml_vdotq_s32(ggml_vdotq_s32(0, lo), hi) as floats:
 * SDOT adds bytes 4k..4k+3 of each 16 into lane k; without dotprod,
 * vmull_s8 + vpaddlq_s16 add bytes 2k, 2k+1, 8+2k, 9+2k */
static void ggml_arm_lanes(const int8_t * a, const int8_t * b, int sdot, float lane[4], int * total) {
    *total = 0;
    for (int k = 0; k < 4; k++) {
        int s = 0;
        for (int h = 0; h < 32; h += 16) {
            if (sdot) for (int j = 0; j < 4; j++) s += a[h + 4 * k + j] * b[h + 4 * k + j];
            else for (int j = 0; j < 2; j++) s += a[h + 2 * k + j] * b[h + 2 * k + j] + a[h + 8 + 2 * k + j] * b[h + 8 + 2 * k + j];
        }
        lane[k] = (float) s;
        *total += s;
    }
}

/* vaddvq_f32: pairwise */
static float ggml_arm_hsum(const float v[4]) { return (v[0] + v[1]) + (v[2] + v[3]); }

/* ggml_vec_dot_T_q8_x on NEON (tinyblas = 0), or tinyBLAS_Q0_ARM's sum
 * for one output (tinyblas = 1: Q4_0 / Q8_0 with dotprod) */
static float ggml_arm_dot(enum kiln_type t, int64_t nb, const uint8_t * x, const uint8_t * yrow, int sdot, int tinyblas) {
    const int q81 = t == KILN_TYPE_Q4_1 || t == KILN_TYPE_Q5_1;
    float acc[2][4] = { { 0 } };
    float sumf = 0, summs = 0, summs2[2] = { 0, 0 };
    int64_t i = 0;
    for (; i < nb && (tinyblas || i + 1 < nb || (i & 1)); i++) {
        int8_t q[32];
        float dx, mx, lane[4];
        int tot;
        ggml_arm_decode(t, x, i, q, &dx, &mx);
        const int8_t * yq = q81 ? ((const block_q8_1 *) yrow)[i].qs : ((const block_q8_0 *) yrow)[i].qs;
        const float dy = kiln_fp16_to_fp32(q81 ? ((const block_q8_1 *) yrow)[i].d : ((const block_q8_0 *) yrow)[i].d);
        const float sy = q81 ? kiln_fp16_to_fp32(((const block_q8_1 *) yrow)[i].s) : 0;
        ggml_arm_lanes(q, yq, sdot, lane, &tot);
        if (t == KILN_TYPE_IQ4_NL && !tinyblas) {
            /* sumf += dx0 * dy0 * sum0 + dx1 * dy1 * sum1, per pair */
            int8_t q1[32];
            float dx1, mx1, lane1[4];
            int tot1;
            ggml_arm_decode(t, x, i + 1, q1, &dx1, &mx1);
            ggml_arm_lanes(q1, ((const block_q8_0 *) yrow)[i + 1].qs, sdot, lane1, &tot1);
            const float dy1 = kiln_fp16_to_fp32(((const block_q8_0 *) yrow)[i + 1].d);
            sumf = sumf + fmaf(dx * dy, (float) tot, (dx1 * dy1) * (float) tot1);
            i++;
            continue;
        }
        const int w = tinyblas ? 0 : (int) (i & 1);
        for (int k = 0; k < 4; k++) acc[w][k] = fmaf(lane[k], dx * dy, acc[w][k]);
        if (t == KILN_TYPE_Q4_1 && w == 1) {
            float mx0, dx0;
            int8_t q0[32];
            ggml_arm_decode(t, x, i - 1, q0, &dx0, &mx0);
            const float sy0 = kiln_fp16_to_fp32(((const block_q8_1 *) yrow)[i - 1].s);
            summs = summs + fmaf(mx0, sy0, mx * sy);
        }
        if (t == KILN_TYPE_Q5_1) summs2[w] = fmaf(mx, sy, summs2[w]);
    }
    if (tinyblas) return ggml_arm_hsum(acc[0]);
    if (t != KILN_TYPE_IQ4_NL) sumf = ggml_arm_hsum(acc[0]) + ggml_arm_hsum(acc[1]);
    if (t == KILN_TYPE_Q4_1) sumf = sumf + summs;
    if (t == KILN_TYPE_Q5_1) sumf = (sumf + summs2[0]) + summs2[1];
    for (; i < nb; i++) {
        /* the scalar tail: one block left */
        int8_t q[32];
        float dx, mx, lane[4];
        int tot;
        ggml_arm_decode(t, x, i, q, &dx, &mx);
        const int8_t * yq = q81 ? ((const block_q8_1 *) yrow)[i].qs : ((const block_q8_0 *) yrow)[i].qs;
        const float dy = kiln_fp16_to_fp32(q81 ? ((const block_q8_1 *) yrow)[i].d : ((const block_q8_0 *) yrow)[i].d);
        ggml_arm_lanes(q, yq, sdot, lane, &tot);
        switch (t) {
            case KILN_TYPE_Q4_0: sumf = fmaf((float) tot * dx, dy, sumf); break;
            case KILN_TYPE_Q5_0: sumf = fmaf(dx * dy, (float) tot, sumf); break;
            case KILN_TYPE_Q8_0: sumf = fmaf((float) tot, dx * dy, sumf); break;
            case KILN_TYPE_IQ4_NL: sumf = fmaf(dy * dx, (float) tot, sumf); break;
            default: sumf = sumf + fmaf(dx * dy, (float) tot, mx * kiln_fp16_to_fp32(((const block_q8_1 *) yrow)[i].s)); break;
        }
    }
    return sumf;
}

/* The NEON 32-element-block dots (plain and dotprod builds, and the NEON
 * table's vec_dot / vec_dot_n) against ggml_arm_dot, bit for bit, over
 * even and odd block counts. */
static void test_neon_ggml_order(void) {
    const int dp = kiln_cpu_has_dotprod();
    static const enum kiln_type ts[6] = { KILN_TYPE_Q4_0, KILN_TYPE_Q4_1, KILN_TYPE_Q5_0, KILN_TYPE_Q5_1, KILN_TYPE_Q8_0, KILN_TYPE_IQ4_NL };
    const kiln_vec_dot_t plain[6] = { q4_0_q8_0_vec_dot__neon, q4_1_q8_1_vec_dot__neon, q5_0_q8_0_vec_dot__neon,
                                      q5_1_q8_1_vec_dot__neon, q8_0_q8_0_vec_dot__neon, iq4_nl_q8_0_vec_dot__neon };
    const kiln_vec_dot_t sdot[6] = { q4_0_q8_0_vec_dot__neon_dotprod, q4_1_q8_1_vec_dot__neon_dotprod, q5_0_q8_0_vec_dot__neon_dotprod,
                                     q5_1_q8_1_vec_dot__neon_dotprod, q8_0_q8_0_vec_dot__neon_dotprod, iq4_nl_q8_0_vec_dot__neon_dotprod };
    const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
    static const int nbs[] = { 1, 2, 3, 6, 7, 16, 33 };
    int checked = 0, differ_orders = 0;
    tu_case = "neon dots == ggml arm64";
    tu_seed(4242);
    for (int ti = 0; ti < 6; ti++) {
        const enum kiln_type t = ts[ti];
        const int q81 = t == KILN_TYPE_Q4_1 || t == KILN_TYPE_Q5_1;
        for (int li = 0; li < (int) (sizeof nbs / sizeof nbs[0]); li++) {
            for (int rep = 0; rep < 8; rep++) {
                const int64_t nb = nbs[li], n = 32 * nb;
                uint8_t * x = malloc(kiln_row_size(t, n));
                uint8_t * y = malloc(kiln_row_size(KILN_TYPE_Q8_1, n));
                float * act = malloc(sizeof(float) * n);
                make_weights(t, n, x);
                for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-1, 1) * (rep & 1 ? 30.f : 1.f);
                if (q81) kiln_quantize_row_q8_1_act_arm(act, y, n);
                else kiln_quantize_row_q8_0_act_arm(act, y, n);
                float got, want;
                for (int v = 0; v < 2; v++) {
                    if (v == 1 && !dp) break;
                    want = ggml_arm_dot(t, nb, x, y, v, 0);
                    (v ? sdot : plain)[ti](n, &got, x, y);
                    CHECK(memcmp(&got, &want, 4) == 0, "%s%s %lld blocks: %.9g, ggml arm64 %.9g", kiln_type_name(t),
                          v ? " dotprod" : "", (long long) nb, got, want);
                    checked++;
                }
                want = ggml_arm_dot(t, nb, x, y, dp, 0);
                kn->vec_dot[t](n, &got, x, y);
                CHECK(memcmp(&got, &want, 4) == 0, "NEON table %s %lld blocks: %.9g, ggml arm64 %.9g", kiln_type_name(t), (long long) nb, got, want);
                /* mul_mat with 2+ src1 rows: tinyBLAS's sum for q4_0 / q8_0 with dotprod */
                const int tiny = dp && (t == KILN_TYPE_Q4_0 || t == KILN_TYPE_Q8_0);
                CHECK((kn->vec_dot_n[t] != NULL) == tiny, "NEON table %s: vec_dot_n %s", kiln_type_name(t), tiny ? "missing" : "unexpected");
                if (tiny && kn->vec_dot_n[t]) {
                    const float wn = ggml_arm_dot(t, nb, x, y, 1, 1);
                    kn->vec_dot_n[t](n, &got, x, y);
                    CHECK(memcmp(&got, &wn, 4) == 0, "NEON vec_dot_n %s %lld blocks: %.9g, tinyBLAS %.9g", kiln_type_name(t), (long long) nb, got, wn);
                    differ_orders += wn != want;
                    checked++;
                }
                checked++;
                free(x); free(y); free(act);
            }
        }
    }
    printf("  NEON 32-block dots == ggml arm64's (dotprod %s): %d sums, %d where tinyBLAS's order differs from vec_dot's\n",
           dp ? "yes" : "no", checked, differ_orders);
}

/* ggml's NEON quantize_row_q8_0 / q8_1, in its intrinsics */
static void ggml_arm_quantize(const float * x, uint8_t * out, int64_t k, int q81) {
    for (int64_t i = 0; i < k / 32; i++) {
        float32x4_t srcv[8], asrcv[8], amaxv[8];
        for (int j = 0; j < 8; j++) srcv[j] = vld1q_f32(x + i * 32 + 4 * j);
        for (int j = 0; j < 8; j++) asrcv[j] = vabsq_f32(srcv[j]);
        for (int j = 0; j < 4; j++) amaxv[2 * j] = vmaxq_f32(asrcv[2 * j], asrcv[2 * j + 1]);
        for (int j = 0; j < 2; j++) amaxv[4 * j] = vmaxq_f32(amaxv[4 * j], amaxv[4 * j + 2]);
        amaxv[0] = vmaxq_f32(amaxv[0], amaxv[4]);
        const float amax = vmaxvq_f32(amaxv[0]);
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        int8_t * qs = q81 ? ((block_q8_1 *) out)[i].qs : ((block_q8_0 *) out)[i].qs;
        int32x4_t accv = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const int32x4_t vi = vcvtnq_s32_f32(vmulq_n_f32(srcv[j], id));
            for (int l = 0; l < 4; l++) qs[4 * j + l] = (int8_t) vgetq_lane_s32(vi, l);
            accv = vaddq_s32(accv, vi);
        }
        __fp16 h = (__fp16) d;
        if (q81) {
            memcpy(&((block_q8_1 *) out)[i].d, &h, 2);
            h = (__fp16) (d * vaddvq_s32(accv));
            memcpy(&((block_q8_1 *) out)[i].s, &h, 2);
        } else {
            memcpy(&((block_q8_0 *) out)[i].d, &h, 2);
        }
    }
}

/* The NEON table's activation quantizers write ggml arm64's bytes: random
 * blocks, exact ties, zeros, subnormals, huge values, inf and NaN. */
static void test_neon_act_quantizers(void) {
    enum { NB = 64, N = NB * 32 };
    const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
    float * x = malloc(sizeof(float) * N);
    uint8_t * want = malloc(kiln_row_size(KILN_TYPE_Q8_1, N)), * got = malloc(kiln_row_size(KILN_TYPE_Q8_1, N));
    int cases = 0, vs_x86 = 0;
    tu_case = "neon activation quantizers";
    tu_seed(31337);
    for (int round = 0; round < 8; round++) {
        for (int b = 0; b < NB; b++) {
            float * xb = x + 32 * b;
            fill_act_block(xb, b, round);
            if (b % 8 == 0 && round >= 4) {
                /* near-ties at an arbitrary scale: (m + 1/2) * amax / 127,
                 * where 1 / (amax / 127) and 127 / amax round differently */
                const float amax = tu_rand_uniform(0.5f, 2.0f), d = amax / 127.0f;
                for (int j = 0; j < 32; j++) xb[j] = ((float) (int) tu_rand_uniform(-126, 126) + 0.5f) * d;
                xb[b % 32] = amax;
            }
        }
        for (int q81 = 0; q81 < 2; q81++) {
            const enum kiln_type vt = q81 ? KILN_TYPE_Q8_1 : KILN_TYPE_Q8_0;
            ggml_arm_quantize(x, want, N, q81);
            kn->from_float[vt](x, got, N);
            CHECK(memcmp(want, got, kiln_row_size(vt, N)) == 0, "%s activation bytes differ from ggml arm64's (round %d)", kiln_type_name(vt), round);
            if (!q81) {
                kiln_quantize_row_q8_0_act(x, got, N);
                vs_x86 += memcmp(want, got, kiln_row_size(vt, N)) != 0;
            }
            cases++;
        }
    }
    free(x); free(want); free(got);
    printf("  NEON q8_0 / q8_1 activation quantizers == ggml arm64's: %d rows of %d blocks (%d of 8 q8_0 rows differ from x86's bytes)\n",
           cases, (int) NB, vs_x86);
}
#endif

int main(void) {
#if defined(__wasm_simd128__)
    test_q8_0_reference_order(kiln_kernels_for_isa(KILN_ISA_WASM_SIMD128), kiln_kernels_for_isa(KILN_ISA_SCALAR));
#endif
#if defined(__wasm_relaxed_simd__)
    test_q8_0_reference_order(kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED), kiln_kernels_for_isa(KILN_ISA_SCALAR));
#endif
    test_direct_variants();
    test_wasm_relaxed();
    test_scalar_vs_reference();
    test_isa_vs_scalar();
    test_vnni_vs_avx2(KILN_ISA_AVX512, "AVX-512 F+BW+VL+VNNI");
    test_vnni_vs_avx2(KILN_ISA_AVXVNNI, "AVX-VNNI");
    test_vec_dot_y4();
    test_vec_dot_rows();
    test_q8_0_act_quantizers();
#if defined(__aarch64__) && !defined(__EMSCRIPTEN__)
    test_neon_ggml_order();
    test_neon_act_quantizers();
#endif
    return tu_finish();
}
