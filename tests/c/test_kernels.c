/*
 * test_kernels.c — every SIMD variant of every kernel-table primitive
 * against the scalar reference (and the reductions against a double sum
 * written here), over lengths around every vector width and tile size,
 * with pointers misaligned by one float.
 */
#include "util/test_util.h"
#include "cpu/kernels.h"
#include "cpu/arch/arch.h"

#include <math.h>
#include <stdint.h>

static const int64_t lengths[] = { 0, 1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 64, 100, 1000, 4099 };
#define N_LEN ((int) (sizeof(lengths) / sizeof(lengths[0])))

/* fp16 arithmetic as llama.cpp's armv8.2_2 arm64 build does it (the NEON
 * table's fp16 kernels, vec_fp16arith.c): a double rounded once to fp16
 * (through float with round-to-odd, so no double rounding) */
static kiln_fp16_t d2h(double d) {
    float f = (float) d;
    if ((double) f != d) {
        if (fabs((double) f) > fabs(d)) f = nextafterf(f, 0.0f);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        u |= 1u;
        memcpy(&f, &u, sizeof f);
    }
    return kiln_fp32_to_fp16(f);
}
static double h2d(kiln_fp16_t h) { return kiln_fp16_to_fp32(h); }
/* the table computes F16 in fp16 arithmetic (vec_fp16arith.c) */
static bool f16_arith(const struct kiln_kernels * k) {
#if defined(__aarch64__)
    return k->isa_id == KILN_ISA_NEON && k->f16_dot == f16_dot__neon_fp16;
#else
    (void) k;
    return false;
#endif
}
/* ggml_vec_mad_f16 / _scale_f16 there: fp16 steps over whole 32s, v rounded
 * to fp16; the rest in f32 (fused) */
static void ref_mad_fp16(int64_t n, kiln_fp16_t * y, const kiln_fp16_t * x, float v) {
    const kiln_fp16_t v16 = kiln_fp32_to_fp16(v);
    const int64_t np = n - n % 32;
    for (int64_t i = 0; i < n; i++) {
        y[i] = i < np ? d2h(h2d(y[i]) + h2d(x[i]) * h2d(v16))
                      : kiln_fp32_to_fp16(fmaf(kiln_fp16_to_fp32(x[i]), v, kiln_fp16_to_fp32(y[i])));
    }
}
static void ref_scale_fp16(int64_t n, kiln_fp16_t * y, float v) {
    const kiln_fp16_t v16 = kiln_fp32_to_fp16(v);
    const int64_t np = n - n % 32;
    for (int64_t i = 0; i < n; i++) y[i] = i < np ? d2h(h2d(y[i]) * h2d(v16)) : kiln_fp32_to_fp16(kiln_fp16_to_fp32(y[i]) * v);
}
/* ggml_vec_dot_f16 there: 4 x 8 fp16 fused accumulators over steps of 32,
 * (0 + 2) + (1 + 3) in fp16, widened, halves added, lanes (l0 + l1) +
 * (l2 + l3); the rest (float products) in double */
static float ref_dot_f16_fp16(int64_t n, const kiln_fp16_t * x, const kiln_fp16_t * y) {
    kiln_fp16_t a[4][8];
    for (int q = 0; q < 4; q++) for (int j = 0; j < 8; j++) a[q][j] = 0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int q = 0; q < 4; q++) {
            for (int j = 0; j < 8; j++) a[q][j] = d2h(h2d(a[q][j]) + h2d(x[i + 8 * q + j]) * h2d(y[i + 8 * q + j]));
        }
    }
    float w[8];
    for (int j = 0; j < 8; j++) {
        const kiln_fp16_t t02 = d2h(h2d(a[0][j]) + h2d(a[2][j])), t13 = d2h(h2d(a[1][j]) + h2d(a[3][j]));
        w[j] = kiln_fp16_to_fp32(d2h(h2d(t02) + h2d(t13)));
    }
    const float l0 = w[0] + w[4], l1 = w[1] + w[5], l2 = w[2] + w[6], l3 = w[3] + w[7];
    double s = (l0 + l1) + (l2 + l3);
    for (; i < n; i++) s += (double) (kiln_fp16_to_fp32(x[i]) * kiln_fp16_to_fp32(y[i]));
    return (float) s;
}
#define MAXN 4099
#define PAD 16

/* buffers with room for a one-float misalignment and a guard zone */
static float xb[MAXN + PAD], yb[MAXN + PAD], zb[MAXN + PAD], rb[MAXN + PAD];
static kiln_fp16_t hx[MAXN + PAD], hy[MAXN + PAD];
static kiln_bf16_t bx[MAXN + PAD], by[MAXN + PAD];

static void fill(float * p, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) p[i] = tu_rand_uniform(lo, hi);
}

/* the kernel list (arch/vec_list.h) drives two checks: every table holds
 * its ISA's own function in each field, and every kernel is covered by a
 * test below (each test marks what it checks with COVER) */
#define VEC_ENUM(ret, name, params, S) VEC_##name,
enum { KILN_VEC_LIST(VEC_ENUM, _) N_VEC };
static bool covered[N_VEC];
#define COVER(name) (covered[VEC_##name] = true)

#define CHECK_FILLED(ret, name, params, S) \
    CHECK(k->name == name##__##S, "%s table: " #name " is " #name "__" #S, k->isa);
static void test_fill(const struct kiln_kernels * k) {
    switch (k->isa_id) {
        case KILN_ISA_SCALAR: KILN_VEC_LIST(CHECK_FILLED, scalar) break;
#ifdef KILN_ARCH_X86
        case KILN_ISA_AVX2: case KILN_ISA_AVX512: case KILN_ISA_AVXVNNI: KILN_VEC_LIST(CHECK_FILLED, avx2) break;
#endif
#ifdef KILN_ARCH_ARM
        case KILN_ISA_NEON: {
            /* NEON's list but f16_dot, in fp16 arithmetic where the CPU
             * has it (main checks which) */
            struct kiln_kernels c = *k;
            if (c.f16_dot == f16_dot__neon_fp16) c.f16_dot = f16_dot__neon;
            const struct kiln_kernels * kk = k;
            k = &c;
            KILN_VEC_LIST(CHECK_FILLED, neon)
            k = kk;
            break;
        }
#endif
#ifdef KILN_ARCH_WASM_SIMD
        case KILN_ISA_WASM_SIMD128: KILN_VEC_LIST(CHECK_FILLED, wasm_simd128) break;
        case KILN_ISA_WASM_RELAXED: {
            /* SIMD128's list but silu, relaxed where madd fuses (main checks it) */
            struct kiln_kernels c = *k;
#if defined(__wasm_relaxed_simd__)
            if (c.f32_silu == f32_silu__wasm_relaxed) c.f32_silu = f32_silu__wasm_simd128;
#endif
            const struct kiln_kernels * kk = k;
            k = &c;
            KILN_VEC_LIST(CHECK_FILLED, wasm_simd128)
            k = kk;
            break;
        }
#endif
        default: CHECK(0, "table %s: no vector-kernel list for this ISA", k->isa); break;
    }
}

#define CHECK_COVERED(ret, name, params, S) CHECK(covered[VEC_##name], #name " (arch/vec_list.h) has a test here");

static bool close_rel(double got, double ref, double scale, double tol) {
    if (isnan(ref)) return isnan(got);
    if (isinf(ref)) return got == ref;
    return fabs(got - ref) <= tol * scale + 1e-37;
}

static void test_reductions(const struct kiln_kernels * s, const struct kiln_kernels * k) {
    COVER(f32_dot); COVER(f16_dot); COVER(bf16_dot);
    for (int li = 0; li < N_LEN; li++) {
        const int64_t n = lengths[li];
        for (int off = 0; off <= 1; off++) {
            float * x = xb + off, * y = yb + off;
            fill(x, n, -1.0f, 1.0f);
            fill(y, n, -1.0f, 1.0f);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) { ref += (double) x[i] * y[i]; mag += fabs((double) x[i] * y[i]); }
            const double tol = 4e-7 * (sqrt((double) n) + 2);
            CHECK(close_rel(k->f32_dot(n, x, y), ref, mag, tol), "%s f32_dot n=%lld off=%d: %.9g vs %.9g",
                  k->isa, (long long) n, off, k->f32_dot(n, x, y), ref);
            CHECK(close_rel(s->f32_dot(n, x, y), ref, mag, 1e-7), "scalar f32_dot is the double reference n=%lld", (long long) n);

            kiln_fp16_t * hxp = hx + off, * hyp = hy + off;
            kiln_bf16_t * bxp = bx + off, * byp = by + off;
            kiln_fp32_to_fp16_row(x, hxp, n); kiln_fp32_to_fp16_row(y, hyp, n);
            kiln_fp32_to_bf16_row(x, bxp, n); kiln_fp32_to_bf16_row(y, byp, n);
            double rh = 0, mh = 0, rbf = 0, mbf = 0;
            for (int64_t i = 0; i < n; i++) {
                const double ph = (double) kiln_fp16_to_fp32(hxp[i]) * kiln_fp16_to_fp32(hyp[i]);
                const double pb = (double) kiln_bf16_to_fp32(bxp[i]) * kiln_bf16_to_fp32(byp[i]);
                rh += ph; mh += fabs(ph); rbf += pb; mbf += fabs(pb);
            }
            /* (fp16 accumulators: test_ggml_orders checks those bit for bit) */
            CHECK(f16_arith(k) || close_rel(k->f16_dot(n, hxp, hyp), rh, mh, tol), "%s f16_dot n=%lld off=%d", k->isa, (long long) n, off);
            CHECK(close_rel(k->bf16_dot(n, bxp, byp), rbf, mbf, tol), "%s bf16_dot n=%lld off=%d", k->isa, (long long) n, off);
        }
    }
}

static void test_maps(const struct kiln_kernels * s, const struct kiln_kernels * k) {
    COVER(f32_add); COVER(f32_mul); COVER(f32_scale); COVER(f32_axpy); COVER(f32_exp); COVER(f32_silu);
    COVER(f32_gelu); COVER(f32_softmax_exp); COVER(f32_to_f16); COVER(f16_to_f32);
    for (int li = 0; li < N_LEN; li++) {
        const int64_t n = lengths[li];
        for (int off = 0; off <= 1; off++) {
            float * x = xb + off, * y = yb + off, * z = zb + off, * r = rb + off;
            fill(x, n, -4.0f, 4.0f);
            fill(y, n, -4.0f, 4.0f);
            int bad;

            /* exact maps */
            k->f32_add(n, x, y, z); s->f32_add(n, x, y, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += z[i] != r[i];
            CHECK(!bad, "%s f32_add n=%lld off=%d", k->isa, (long long) n, off);
            k->f32_mul(n, x, y, z); s->f32_mul(n, x, y, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += z[i] != r[i];
            CHECK(!bad, "%s f32_mul n=%lld off=%d", k->isa, (long long) n, off);
            k->f32_scale(n, 0.37f, x, z); s->f32_scale(n, 0.37f, x, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += z[i] != r[i];
            CHECK(!bad, "%s f32_scale n=%lld off=%d", k->isa, (long long) n, off);
            /* in place */
            memcpy(z, x, (size_t) n * sizeof(float));
            k->f32_scale(n, -2.0f, z, z);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += z[i] != -2.0f * x[i];
            CHECK(!bad, "%s f32_scale in place n=%lld", k->isa, (long long) n);

            /* axpy: FMA or not, one rounding apart */
            memcpy(z, y, (size_t) n * sizeof(float)); memcpy(r, y, (size_t) n * sizeof(float));
            k->f32_axpy(n, 1.7f, x, z); s->f32_axpy(n, 1.7f, x, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += !close_rel(z[i], r[i], fabs(1.7 * x[i]) + fabs(y[i]), 2.5e-7);
            CHECK(!bad, "%s f32_axpy n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            /* the guard past the end is untouched */
            z[n] = 12345.0f; k->f32_axpy(n, 1.0f, x, z);
            CHECK(z[n] == 12345.0f, "%s f32_axpy writes past n=%lld", k->isa, (long long) n);

            /* transcendental maps: a few ulp */
            fill(x, n, -20.0f, 20.0f);
            k->f32_exp(n, x, z); s->f32_exp(n, x, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += !close_rel(z[i], r[i], fabs(r[i]), 3e-7);
            CHECK(!bad, "%s f32_exp n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            k->f32_silu(n, x, z); s->f32_silu(n, x, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += !close_rel(z[i], r[i], fabs(r[i]) + 1e-6, 1e-6);
            CHECK(!bad, "%s f32_silu n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            fill(x, n, -6.0f, 6.0f);
            k->f32_gelu(n, x, z); s->f32_gelu(n, x, r);
            bad = 0;
            for (int64_t i = 0; i < n; i++) {
                const double v = x[i], u = 0.79788456080286535588 * v * (1.0 + 0.044715 * v * v);
                const double ref = 0.5 * v * (1.0 + tanh(u));
                /* u itself carries a float rounding, amplified by exp(-2u) for x << 0 */
                const double sc = fabs(ref) * (1.0 + 2.0 * fabs(u));
                bad += !close_rel(z[i], ref, sc, 1e-6) + !close_rel(r[i], ref, sc, 1e-6);
            }
            CHECK(!bad, "%s f32_gelu n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);

            /* softmax row: y = exp(x - max), returns the sum */
            float mx = -INFINITY;
            for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
            const double sk = k->f32_softmax_exp(n, x, z, mx), sr = s->f32_softmax_exp(n, x, r, mx);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += !close_rel(z[i], r[i], fabs(r[i]), 3e-7);
            CHECK(!bad && close_rel(sk, sr, sr, 4e-7 * (sqrt((double) n) + 2)), "%s f32_softmax_exp n=%lld off=%d (%d bad, %.9g vs %.9g)",
                  k->isa, (long long) n, off, bad, sk, sr);

            /* f16 conversions: bit-exact with the reference */
            for (int64_t i = 0; i < n; i++) x[i] = ldexpf(tu_rand_uniform(-1.0f, 1.0f), (int) (tu_rand_u64() % 44) - 28);
            kiln_fp16_t * hxp = hx + off, * hyp = hy + off;
            k->f32_to_f16(n, x, hxp); s->f32_to_f16(n, x, hyp);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += hxp[i] != hyp[i];
            CHECK(!bad, "%s f32_to_f16 n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            for (int64_t i = 0; i < n; i++) hxp[i] = (kiln_fp16_t) (tu_rand_u64() & 0xffff);
            k->f16_to_f32(n, hxp, z); s->f16_to_f32(n, hxp, r);
            bad = 0; for (int64_t i = 0; i < n; i++) bad += isnan(r[i]) ? !isnan(z[i]) : memcmp(&z[i], &r[i], 4) != 0;
            CHECK(!bad, "%s f16_to_f32 n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);

            /* F16 accumulators: bit-exact with the reference, and the
             * reference against a double computation rounded once to f32 */
            for (int64_t i = 0; i < n; i++) {
                hxp[i] = kiln_fp32_to_fp16(tu_rand_uniform(-4.0f, 4.0f));
                hyp[i] = kiln_fp32_to_fp16(tu_rand_uniform(-4.0f, 4.0f));
            }
            kiln_fp16_t * ha = malloc(sizeof(kiln_fp16_t) * (size_t) (n + 1)), * hb = malloc(sizeof(kiln_fp16_t) * (size_t) (n + 1));
            memcpy(ha, hyp, sizeof(kiln_fp16_t) * (size_t) n);
            memcpy(hb, hyp, sizeof(kiln_fp16_t) * (size_t) n);
            const float vm = tu_rand_uniform(-2.0f, 2.0f);
            k->f16_mad(n, ha, hxp, vm); s->f16_mad(n, hb, hxp, vm);
            bad = 0;
            for (int64_t i = 0; i < n; i++) {
                const float ref = (float) ((double) kiln_fp16_to_fp32(hxp[i]) * vm + (double) kiln_fp16_to_fp32(hyp[i]));
                bad += hb[i] != kiln_fp32_to_fp16(ref);
            }
            /* the fp16-arithmetic table: its own reference */
            if (f16_arith(k)) { memcpy(hb, hyp, sizeof(kiln_fp16_t) * (size_t) n); ref_mad_fp16(n, hb, hxp, vm); }
            for (int64_t i = 0; i < n; i++) bad += ha[i] != hb[i];
            CHECK(!bad, "%s f16_mad n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            if (f16_arith(k)) { memcpy(hb, ha, sizeof(kiln_fp16_t) * (size_t) n); k->f16_scale(n, ha, vm); ref_scale_fp16(n, hb, vm); }
            else { k->f16_scale(n, ha, vm); s->f16_scale(n, hb, vm); }
            bad = 0; for (int64_t i = 0; i < n; i++) bad += ha[i] != hb[i];
            CHECK(!bad, "%s f16_scale n=%lld off=%d (%d bad)", k->isa, (long long) n, off, bad);
            free(ha); free(hb);
        }
    }

    /* special values through the transcendental maps */
    float sp[16] = { 0.0f, -0.0f, 1.0f, -1.0f, 88.5f, -87.0f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 1e-30f, -1e-30f, 30.0f, -30.0f, 0.5f };
    float o[16], ro[16];
    k->f32_exp(16, sp, o); s->f32_exp(16, sp, ro);
    int bad = 0;
    for (int i = 0; i < 16; i++) bad += !close_rel(o[i], ro[i], fabs(ro[i]), 3e-7);
    CHECK(!bad, "%s f32_exp special values (%d bad)", k->isa, bad);
    k->f32_silu(16, sp, o); s->f32_silu(16, sp, ro);
    bad = 0;
    for (int i = 0; i < 16; i++) bad += !close_rel(o[i], ro[i], fabs(ro[i]) + 1e-30, 1e-6);
    CHECK(!bad, "%s f32_silu special values (%d bad)", k->isa, bad);
    /* every f16 bit pattern converts exactly */
    static kiln_fp16_t all[65536];
    static float fa[65536], fr[65536];
    for (int i = 0; i < 65536; i++) all[i] = (kiln_fp16_t) i;
    k->f16_to_f32(65536, all, fa); s->f16_to_f32(65536, all, fr);
    bad = 0;
    for (int i = 0; i < 65536; i++) bad += isnan(fr[i]) ? !isnan(fa[i]) : memcmp(&fa[i], &fr[i], 4) != 0;
    CHECK(!bad, "%s f16_to_f32 all 65536 patterns (%d bad)", k->isa, bad);
    /* rounding edges of f32 -> f16: ties, overflow, subnormals */
    float ed[12] = { 65504.0f, 65519.0f, 65520.0f, 1e6f, 5.96e-8f, 2.98e-8f, 2.99e-8f, 1.0009765625f + 0.00048828125f,
                     1.0f + 0.00048828125f, -6.1e-5f, 3.0e-5f, -70000.0f };
    kiln_fp16_t eo[12], er[12];
    k->f32_to_f16(12, ed, eo); s->f32_to_f16(12, ed, er);
    bad = 0;
    for (int i = 0; i < 12; i++) bad += eo[i] != er[i];
    CHECK(!bad, "%s f32_to_f16 rounding edges (%d bad)", k->isa, bad);

    /* f32 -> f16 over the whole float range: every exponent with mantissas
     * just below, at and above the fp16 rounding point (ties included),
     * signs, subnormals, inf and nan payloads */
    enum { NS = 1 << 16 };
    static float sw[NS];
    static kiln_fp16_t so[NS], sr[NS];
    bad = 0;
    for (uint32_t base = 0; base < 512; base++) {            /* sign + exponent */
        for (int j = 0; j < NS; j++) {
            const uint32_t m = ((uint32_t) (j >> 2) << 13) & 0x7fffff;   /* kept bits */
            static const uint32_t low[4] = { 0x0fff, 0x1000, 0x1001, 0x0000 };
            const uint32_t bits = (base << 23) | m | low[j & 3];
            memcpy(&sw[j], &bits, 4);
        }
        k->f32_to_f16(NS, sw, so); s->f32_to_f16(NS, sw, sr);
        for (int j = 0; j < NS; j++) bad += so[j] != sr[j];
    }
    CHECK(!bad, "%s f32_to_f16 over all exponents, ties and specials (%d bad)", k->isa, bad);

    /* the F16 accumulator with every fp16 pattern as x (inf, nan,
     * subnormals) and as y, against the scalar fmaf path */
    static kiln_fp16_t ya[65536], yb[65536];
    const float vs[5] = { 0.7f, -3.0f, 1e-3f, 65504.0f, 1.0000001f };
    bad = 0;
    for (int vi = 0; vi < 5; vi++) {
        for (int i = 0; i < 65536; i++) ya[i] = yb[i] = (kiln_fp16_t) ((i * 40503u + (unsigned) vi * 7919u) & 0xffff);
        k->f16_mad(65536, ya, all, vs[vi]);
        if (f16_arith(k)) ref_mad_fp16(65536, yb, all, vs[vi]);
        else s->f16_mad(65536, yb, all, vs[vi]);
        for (int i = 0; i < 65536; i++) {
            const int an = (ya[i] & 0x7c00) == 0x7c00 && (ya[i] & 0x3ff), bn = (yb[i] & 0x7c00) == 0x7c00 && (yb[i] & 0x3ff);
            bad += (an || bn) ? an != bn : ya[i] != yb[i];
        }
    }
    CHECK(!bad, "%s f16_mad over all fp16 patterns (%d bad)", k->isa, bad);
    /* and full-precision multipliers, where a sum rounded twice would show */
    bad = 0;
    for (int rep = 0; rep < 64; rep++) {
        const float v = tu_rand_uniform(-8.0f, 8.0f) * ldexpf(1.0f, (int) (tu_rand_u64() % 40) - 30);
        for (int i = 0; i < 4096; i++) {
            all[i] = kiln_fp32_to_fp16(tu_rand_uniform(-1.0f, 1.0f) * ldexpf(1.0f, (int) (tu_rand_u64() % 30) - 15));
            ya[i] = yb[i] = kiln_fp32_to_fp16(tu_rand_uniform(-1.0f, 1.0f) * ldexpf(1.0f, (int) (tu_rand_u64() % 30) - 15));
        }
        k->f16_mad(4096, ya, all, v);
        if (f16_arith(k)) ref_mad_fp16(4096, yb, all, v);
        else s->f16_mad(4096, yb, all, v);
        for (int i = 0; i < 4096; i++) bad += ya[i] != yb[i];
    }
    for (int i = 0; i < 65536; i++) all[i] = (kiln_fp16_t) i;
    CHECK(!bad, "%s f16_mad with full-precision multipliers (%d bad)", k->isa, bad);
}

/* the f16val kernels (fp16 values held as floats, kernels.h) against the
 * same table's fp16 kernels, bit for bit: random rows of every length, then
 * every fp16 pattern (inf, nan, subnormals) as x and as y */
static bool same_f16val(float got, kiln_fp16_t want) {
    const float w = kiln_fp16_to_fp32(want);
    return isnan(w) ? isnan(got) : memcmp(&got, &w, 4) == 0;
}

static void test_f16val(const struct kiln_kernels * k) {
    if (!k->f16val_mad) {
        CHECK(!k->f16val_dot && !k->f16val_scale, "%s: the f16val kernels come as a set", k->isa);
        return;
    }
    CHECK(k->f16val_dot && k->f16val_scale, "%s: the f16val kernels come as a set", k->isa);
    static kiln_fp16_t h1[65536], h2[65536];
    static float f1[65536], f2[65536];
    int bad = 0;
    for (int li = 0; li < N_LEN; li++) {
        const int64_t n = lengths[li];
        for (int rep = 0; rep < 4; rep++) {
            for (int64_t i = 0; i < n; i++) {
                h1[i] = kiln_fp32_to_fp16(tu_rand_uniform(-1.0f, 1.0f) * ldexpf(1.0f, (int) (tu_rand_u64() % 30) - 18));
                h2[i] = kiln_fp32_to_fp16(tu_rand_uniform(-4.0f, 4.0f));
                f1[i] = kiln_fp16_to_fp32(h1[i]);
                f2[i] = kiln_fp16_to_fp32(h2[i]);
            }
            const float d16 = k->f16_dot(n, h1, h2), d32 = k->f16val_dot(n, f1, f2);
            bad += memcmp(&d16, &d32, 4) != 0;
            const float v = tu_rand_uniform(-2.0f, 2.0f) * ldexpf(1.0f, (int) (tu_rand_u64() % 20) - 12);
            k->f16_mad(n, h2, h1, v); k->f16val_mad(n, f2, f1, v);
            for (int64_t i = 0; i < n; i++) bad += !same_f16val(f2[i], h2[i]);
            k->f16_scale(n, h2, v); k->f16val_scale(n, f2, v);
            for (int64_t i = 0; i < n; i++) bad += !same_f16val(f2[i], h2[i]);
        }
    }
    CHECK(!bad, "%s f16val_dot/mad/scale on random rows (%d bad)", k->isa, bad);
    const float vs[6] = { 0.7f, -3.0f, 1e-3f, 65504.0f, 1.0000001f, 0.0f };
    bad = 0;
    for (int vi = 0; vi < 6; vi++) {
        for (int i = 0; i < 65536; i++) {
            h1[i] = (kiln_fp16_t) i;
            h2[i] = (kiln_fp16_t) ((i * 40503u + (unsigned) vi * 7919u) & 0xffff);
            f1[i] = kiln_fp16_to_fp32(h1[i]);
            f2[i] = kiln_fp16_to_fp32(h2[i]);
        }
        k->f16_mad(65536, h2, h1, vs[vi]); k->f16val_mad(65536, f2, f1, vs[vi]);
        for (int i = 0; i < 65536; i++) bad += !same_f16val(f2[i], h2[i]);
        for (int i = 0; i < 65536; i++) { h1[i] = (kiln_fp16_t) i; f1[i] = kiln_fp16_to_fp32(h1[i]); }
        k->f16_scale(65536, h1, vs[vi]); k->f16val_scale(65536, f1, vs[vi]);
        for (int i = 0; i < 65536; i++) bad += !same_f16val(f1[i], h1[i]);
    }
    CHECK(!bad, "%s f16val_mad/scale over all fp16 patterns (%d bad)", k->isa, bad);
    /* the rounding step alone (v = 1 on any float): the fp16 round trip over
     * every exponent and sign, with mantissas just below, at and above each
     * rounding point (ties), subnormals, overflow, inf and nan */
    enum { NS = 1 << 14 };
    static float sw[NS], sr[NS];
    bad = 0;
    for (uint32_t base = 0; base < 512; base++) {
        for (int j = 0; j < NS; j++) {
            static const uint32_t low[4] = { 0x0fff, 0x1000, 0x1001, 0x0000 };
            const uint32_t bits = (base << 23) | (((uint32_t) (j >> 2) << 13) & 0x7fffff) | low[j & 3];
            memcpy(&sw[j], &bits, 4);
            sr[j] = kiln_fp16_to_fp32(kiln_fp32_to_fp16(sw[j]));
        }
        k->f16val_scale(NS, sw, 1.0f);
        for (int j = 0; j < NS; j++) bad += isnan(sr[j]) ? !isnan(sw[j]) : memcmp(&sw[j], &sr[j], 4) != 0;
    }
    CHECK(!bad, "%s f16val rounding over all exponents, ties and specials (%d bad)", k->isa, bad);
}

/* ---- llama.cpp's x86 orders (kernels.h: f32_gemm_tile8, f32_dot8,
 * f32_dot_ggml; f16_dot on x86 and wasm), against references written here
 * in plain C, bit for bit: "fused" says whether the table's multiply-add
 * rounds once (x86 FMA; relaxed SIMD where the engine fuses) or twice
 * (SIMD128) */
static bool table_fuses(const struct kiln_kernels * k) {
#if defined(__wasm_relaxed_simd__)
    if (k->isa_id == KILN_ISA_WASM_RELAXED) return kiln_wasm_relaxed_madd_fuses();
#endif
    return k->isa_id == KILN_ISA_AVX2 || k->isa_id == KILN_ISA_AVX512 || k->isa_id == KILN_ISA_AVXVNNI;
}
static float madd_ref(float a, float b, float c, bool fused) { return fused ? fmaf(a, b, c) : a * b + c; }

/* tinyBLAS: 8 lanes, then (l0+l4 + l2+l6) + (l1+l5 + l3+l7); n % 8 == 0 */
static float ref_dot8(int64_t n, const float * x, const float * y, bool fused) {
    float l[8] = { 0 };
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) l[j] = madd_ref(x[i + j], y[i + j], l[j], fused);
    }
    const float t0 = l[0] + l[4], t1 = l[1] + l[5], t2 = l[2] + l[6], t3 = l[3] + l[7];
    return (t0 + t2) + (t1 + t3);
}

/* ggml's 4 x 8-lane accumulators over steps of 32 and GGML_F32x8_REDUCE */
static float ref_reduce32(int64_t n, const float * x, const float * y, bool fused, int64_t * end) {
    float a[4][8] = { { 0 } };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int q = 0; q < 4; q++) {
            for (int j = 0; j < 8; j++) a[q][j] = madd_ref(x[i + 8 * q + j], y[i + 8 * q + j], a[q][j], fused);
        }
    }
    float t[8];
    for (int j = 0; j < 8; j++) t[j] = (a[0][j] + a[2][j]) + (a[1][j] + a[3][j]);
    const float u0 = t[0] + t[4], u1 = t[1] + t[5], u2 = t[2] + t[6], u3 = t[3] + t[7];
    *end = i;
    return (u0 + u1) + (u2 + u3);
}

/* ggml_vec_dot_f32 in llama.cpp's AVX2 build: the tail in groups of 4
 * rounded products added in order, the last n % 4 fused */
static float ref_dot_ggml(int64_t n, const float * x, const float * y, bool fused) {
    int64_t i;
    float s = ref_reduce32(n, x, y, fused, &i);
    for (; i + 4 <= n; i += 4) {
        for (int j = 0; j < 4; j++) { const float p = x[i + j] * y[i + j]; s += p; }
    }
    for (; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* ggml_vec_dot_f16 on AVX2: as above (fp16 products are exact in float, so
 * fused or not is the same), the tail summed in double */
static float ref_dot_f16(int64_t n, const kiln_fp16_t * hx0, const kiln_fp16_t * hy0) {
    float * x = malloc(sizeof(float) * (size_t) (n + 1)), * y = malloc(sizeof(float) * (size_t) (n + 1));
    for (int64_t i = 0; i < n; i++) { x[i] = kiln_fp16_to_fp32(hx0[i]); y[i] = kiln_fp16_to_fp32(hy0[i]); }
    int64_t i;
    double s = ref_reduce32(n, x, y, false, &i);
    for (; i < n; i++) s += x[i] * y[i];
    free(x); free(y);
    return (float) s;
}

static bool same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

/* ggml_vec_dot_f32 / ggml_vec_dot_f16 in llama.cpp's arm64 NEON build (f16
 * without FP16 vector arithmetic): 4 x 4-lane fused accumulators over steps
 * of 16, reduced (0 + 2) + (1 + 3), the lanes as vaddvq_f32 adds them,
 * (l0 + l1) + (l2 + l3); then the tail: f32 one fused product at a time,
 * f16 its float products in double */
static float ref_reduce16(int64_t n, const float * x, const float * y, int64_t * end) {
    float a[4][4] = { { 0 } };
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        for (int q = 0; q < 4; q++) {
            for (int j = 0; j < 4; j++) a[q][j] = fmaf(x[i + 4 * q + j], y[i + 4 * q + j], a[q][j]);
        }
    }
    float t[4];
    for (int j = 0; j < 4; j++) t[j] = (a[0][j] + a[2][j]) + (a[1][j] + a[3][j]);
    *end = i;
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* the leftovers as llama.cpp's arm64 binary sums `sumf += x[i] * y[i]`:
 * its compiler vectorizes 8 of them when at least 8 remain (the products
 * rounded, then added in order), the rest contracted to fmaf */
static float ref_dot_neon(int64_t n, const float * x, const float * y) {
    int64_t i;
    float s = ref_reduce16(n, x, y, &i);
    if (n - i >= 8) for (const int64_t e = i + 8; i < e; i++) s += x[i] * y[i];
    for (; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

static float ref_dot_f16_neon(int64_t n, const kiln_fp16_t * hx0, const kiln_fp16_t * hy0) {
    float * x = malloc(sizeof(float) * (size_t) (n + 1)), * y = malloc(sizeof(float) * (size_t) (n + 1));
    for (int64_t i = 0; i < n; i++) { x[i] = kiln_fp16_to_fp32(hx0[i]); y[i] = kiln_fp16_to_fp32(hy0[i]); }
    int64_t i;
    double s = ref_reduce16(n, x, y, &i);
    for (; i < n; i++) s += (double) (x[i] * y[i]);
    free(x); free(y);
    return (float) s;
}


/* ggml's vector expf (after Arm's optimized-routines expf) as its AVX2 and
 * arm64 NEON builds compute it, lane by lane with fmaf: the silu and the
 * softmax exponentials of every SIMD table must give these bits (x86 and
 * wasm in vectors of 8, NEON of 4; the rest of a row by expf; softmax on
 * x86 and NEON) */
static float bits_f(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }
static float ref_expf_ggml(float x) {
    const float shift = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    uint32_t zi;
    memcpy(&zi, &z, sizeof zi);
    const uint32_t e = zi << 23;
    const float k = bits_f(e + 0x3f800000u);
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u, 0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(j, k, k);
    const uint32_t g = n <= 0.0f ? 0x82000000u : 0u;
    const float s1 = bits_f(g + 0x7f000000u), s2 = bits_f(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

static void test_ggml_expf(const struct kiln_kernels * k) {
    if (k->isa_id == KILN_ISA_SCALAR) return;
    const int64_t w = k->isa_id == KILN_ISA_NEON ? 4 : 8;
    enum { N = 4099 };
    static float x[N], y[N], e[N];
    for (int i = 0; i < N; i++) x[i] = i < 3000 ? tu_rand_uniform(-30.0f, 30.0f) : tu_rand_uniform(-200.0f, 200.0f);
    x[7] = INFINITY; x[8] = -INFINITY; x[9] = NAN; x[10] = -0.0f; x[11] = 1e-40f; x[N - 2] = 95.0f;
    const int64_t nv = N - N % w;
    int bad = 0;
    k->f32_silu(N, x, y);
    for (int64_t i = 0; i < N; i++) {
        const float want = i < nv ? x[i] / (1.0f + ref_expf_ggml(0.0f - x[i])) : x[i] / (1.0f + expf(-x[i]));
        bad += !((isnan(want) && isnan(y[i])) || same_float(want, y[i]));
    }
    CHECK(!bad, "%s f32_silu is ggml's (vector expf in %d lanes, expf after): %d differ", k->isa, (int) w, bad);
    /* softmax: finite inputs below the row maximum; x86 and NEON (wasm's
     * keeps an exponential of its own: ggml's wasm build has no vector one) */
    if (k->isa_id == KILN_ISA_WASM_SIMD128 || k->isa_id == KILN_ISA_WASM_RELAXED) return;
    for (int i = 0; i < N; i++) x[i] = tu_rand_uniform(-120.0f, 0.0f);
    x[5] = 0.0f;
    k->f32_softmax_exp(N, x, e, 0.0f);
    bad = 0;
    for (int64_t i = 0; i < N; i++) bad += !same_float(i < nv ? ref_expf_ggml(x[i] - 0.0f) : expf(x[i] - 0.0f), e[i]);
    CHECK(!bad, "%s f32_softmax_exp values are ggml's: %d differ", k->isa, bad);
}

static void test_ggml_orders(const struct kiln_kernels * k) {
    const bool x86_or_wasm = k->isa_id != KILN_ISA_SCALAR && k->isa_id != KILN_ISA_NEON;
    CHECK(!x86_or_wasm || (k->f32_gemm_tile8 && k->f32_dot8 && k->f32_dot_ggml), "%s has llama.cpp's f32 orders", k->isa);
    const bool fused = table_fuses(k);
    int bad = 0, bad16 = 0, badtol = 0;
    for (int li = 0; li < N_LEN; li++) {
        const int64_t n = lengths[li];
        for (int off = 0; off <= 1; off++) {
            float * x = xb + off, * y = yb + off;
            fill(x, n, -1.0f, 1.0f);
            fill(y, n, -1.0f, 1.0f);
            double ref = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) { ref += (double) x[i] * y[i]; mag += fabs((double) x[i] * y[i]); }
            const double tol = 4e-7 * (sqrt((double) n) + 2);
            if (k->f32_dot_ggml) {
                const float g = k->f32_dot_ggml(n, x, y);
                bad += !same_float(g, ref_dot_ggml(n, x, y, fused));
                badtol += !close_rel(g, ref, mag, tol);
            }
            if (k->f32_dot8) {
                const int64_t n8 = n - n % 8;
                const float g = k->f32_dot8(n8, x, y);
                bad += !same_float(g, ref_dot8(n8, x, y, fused));
            }
            if (x86_or_wasm || k->isa_id == KILN_ISA_NEON) {
                kiln_fp16_t * hxp = hx + off, * hyp = hy + off;
                kiln_fp32_to_fp16_row(x, hxp, n); kiln_fp32_to_fp16_row(y, hyp, n);
                const float want = f16_arith(k) ? ref_dot_f16_fp16(n, hxp, hyp)
                                   : k->isa_id == KILN_ISA_NEON ? ref_dot_f16_neon(n, hxp, hyp) : ref_dot_f16(n, hxp, hyp);
                bad16 += !same_float(k->f16_dot(n, hxp, hyp), want);
            }
            if (k->isa_id == KILN_ISA_NEON) bad += !same_float(k->f32_dot(n, x, y), ref_dot_neon(n, x, y));
        }
    }
    if (k->isa_id == KILN_ISA_NEON) {
        /* the leftovers past the steps of 16 (8 rounded products, then
         * fused ones): many short rows, where the two orders part */
        int rows = 0, apart = 0;
        for (int rep = 0; rep < 256; rep++) {
            const int64_t n = 8 + rep % 40; /* 8..47: n % 16 from 0 to 15 */
            fill(xb, n, -1.0f, 1.0f);
            fill(yb, n, -1.0f, 1.0f);
            const float want = ref_dot_neon(n, xb, yb);
            bad += !same_float(k->f32_dot(n, xb, yb), want);
            float all_fused = 0;
            for (int64_t i = 0; i < n; i++) all_fused = fmaf(xb[i], yb[i], all_fused);
            rows++;
            apart += n % 16 >= 8 && !same_float(all_fused, want);
        }
        printf("  NEON f32_dot == ggml arm64's on %d short rows (%d where fusing every leftover would differ)\n", rows, apart);
        CHECK(apart > 0, "the short rows tell the leftover orders apart");
    }
    CHECK(!bad && !badtol, "%s f32_dot_ggml / f32_dot8 (NEON: f32_dot) equal the references (fused %d): %d differ, %d out of tolerance",
          k->isa, fused, bad, badtol);
    CHECK(!bad16, "%s f16_dot sums in ggml's order (%s; %d differ)", k->isa, k->isa_id == KILN_ISA_NEON ? "arm64" : "AVX2", bad16);
    if (!k->f32_gemm_tile8) return;
    /* the tile: each output its tinyBLAS product, nothing written past MR */
    const int MR = k->tile8_mr, NR = k->tile8_nr;
    static const int64_t ks[] = { 0, 8, 16, 64, 200, 1000, 4096 };
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        const int64_t K = ks[ki];
        const int64_t lda = K + 5, ldb = K + 3, ldc = MR + 2;
        float * a = malloc(sizeof(float) * (size_t) (lda * MR + 1));
        float * b = malloc(sizeof(float) * (size_t) (ldb * NR + 1));
        float c[8 * 8 + 16];
        fill(a, lda * MR + 1, -1.0f, 1.0f);
        fill(b, ldb * NR + 1, -1.0f, 1.0f);
        for (int i = 0; i < 8 * 8 + 16; i++) c[i] = -777.0f;
        k->f32_gemm_tile8(K, a + 1, lda, b + 1, ldb, c, ldc);
        int tb = 0;
        for (int j = 0; j < NR; j++) {
            for (int i = 0; i < MR; i++) {
                tb += !same_float(c[j * ldc + i], ref_dot8(K, a + 1 + i * lda, b + 1 + j * ldb, fused));
                tb += !same_float(c[j * ldc + i], k->f32_dot8(K, a + 1 + i * lda, b + 1 + j * ldb));
            }
            for (int i = MR; i < ldc; i++) tb += c[j * ldc + i] != -777.0f;
        }
        CHECK(!tb, "%s f32_gemm_tile8 %dx%d k=%lld: tinyBLAS's sums (%d bad)", k->isa, MR, NR, (long long) K, tb);
        free(a); free(b);
    }
}

static void test_gemm_tile(const struct kiln_kernels * k) {
    const int MR = k->gemm_mr, NR = k->gemm_nr;
    for (int li = 0; li < N_LEN; li++) {
        const int64_t K = lengths[li];
        const int64_t lda = K + 5, ldb = K + 3, ldc = MR + 2;
        float * a = malloc(sizeof(float) * (size_t) (lda * MR + 1));
        float * b = malloc(sizeof(float) * (size_t) (ldb * NR + 1));
        float c[8 * 8 + 16];
        fill(a, lda * MR + 1, -1.0f, 1.0f);
        fill(b, ldb * NR + 1, -1.0f, 1.0f);
        for (int i = 0; i < 8 * 8 + 16; i++) c[i] = -777.0f;
        /* misaligned by one float */
        k->f32_gemm_tile(K, a + 1, lda, b + 1, ldb, c, ldc);
        int bad = 0;
        for (int j = 0; j < NR; j++) {
            for (int i = 0; i < MR; i++) {
                double ref = 0, mag = 0;
                for (int64_t q = 0; q < K; q++) {
                    const double p = (double) a[1 + i * lda + q] * b[1 + j * ldb + q];
                    ref += p; mag += fabs(p);
                }
                bad += !close_rel(c[j * ldc + i], ref, mag, 4e-7 * (sqrt((double) K) + 2));
            }
            for (int i = MR; i < ldc; i++) bad += c[j * ldc + i] != -777.0f;
        }
        CHECK(!bad, "%s f32_gemm_%dx%d k=%lld (%d bad)", k->isa, MR, NR, (long long) K, bad);
        free(a); free(b);
    }
}

/* packed microkernel: MR rows of a (stride lda, misaligned) x a k-major
 * panel of NR columns, stored then accumulated, against double sums */
static void test_gemm_packed(const struct kiln_kernels * k) {
    if (!k->f32_gemm_packed) return;
    const int MR = k->pack_mr, NR = k->pack_nr;
    CHECK(MR <= KILN_GEMM_MAX_MR && NR <= KILN_GEMM_MAX_NR, "%s pack tile %dx%d within the maxima", k->isa, MR, NR);
    for (int li = 0; li < N_LEN; li++) {
        const int64_t K = lengths[li];
        const int64_t lda = K + 3, ldc = NR + 5;
        float * a = malloc(sizeof(float) * (size_t) (lda * MR + 1));
        float * bp = malloc(sizeof(float) * (size_t) (K * NR + 1));
        float c[KILN_GEMM_MAX_MR * (KILN_GEMM_MAX_NR + 5)];
        fill(a, lda * MR + 1, -1.0f, 1.0f);
        fill(bp, K * NR + 1, -1.0f, 1.0f);
        for (int i = 0; i < MR * ldc; i++) c[i] = -777.0f;
        int bad = 0;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0 stores, pass 1 adds the same products again: 2x */
            k->f32_gemm_packed(K, a + 1, lda, bp + 1, c, ldc, pass);
            for (int j = 0; j < MR; j++) {
                for (int i = 0; i < NR; i++) {
                    double ref = 0, mag = 0;
                    for (int64_t q = 0; q < K; q++) {
                        const double p = (double) a[1 + j * lda + q] * bp[1 + q * NR + i];
                        ref += p; mag += fabs(p);
                    }
                    bad += !close_rel(c[j * ldc + i], (pass + 1) * ref, (pass + 1) * mag, 4e-7 * (sqrt((double) K) + 2));
                }
                for (int i = NR; i < ldc; i++) bad += c[j * ldc + i] != -777.0f;
            }
        }
        CHECK(!bad, "%s f32_gemm_%dx%d packed k=%lld (%d bad)", k->isa, MR, NR, (long long) K, bad);
        free(a); free(bp);
    }
}

/* the avx512 row's rule: its packed microkernel gives each output the
 * avx2 row's bits (same panel width; the avx2 kernel run over the same
 * rows in tiles of its own height, the last tile shifted to overlap) */
static void test_gemm_packed_vs_avx2(const struct kiln_kernels * k) {
    const struct kiln_kernels * k2 = kiln_kernels_for_isa(KILN_ISA_AVX2);
    if (k->isa_id != KILN_ISA_AVX512 || !k2) return;
    const int MR = k->pack_mr, NR = k->pack_nr, MR2 = k2->pack_mr;
    CHECK(NR == k2->pack_nr && MR >= MR2, "avx512 panel width %d == avx2's %d", NR, k2->pack_nr);
    if (NR != k2->pack_nr || MR < MR2) return;
    for (int li = 0; li < N_LEN; li++) {
        const int64_t K = lengths[li], lda = K + 3;
        float * a = malloc(sizeof(float) * (size_t) (lda * MR + 1));
        float * bp = malloc(sizeof(float) * (size_t) (K * NR + 1));
        float c[KILN_GEMM_MAX_MR * KILN_GEMM_MAX_NR], c2[KILN_GEMM_MAX_MR * KILN_GEMM_MAX_NR];
        float t[KILN_GEMM_MAX_MR * KILN_GEMM_MAX_NR];
        fill(a, lda * MR + 1, -1.0f, 1.0f);
        fill(bp, K * NR + 1, -1.0f, 1.0f);
        int bad = 0;
        for (int pass = 0; pass < 2; pass++) {
            /* pass 0 stores, pass 1 adds the products to what pass 0 stored */
            k->f32_gemm_packed(K, a + 1, lda, bp + 1, c, NR, pass);
            bool done[KILN_GEMM_MAX_MR] = { false };
            for (int j0 = 0; j0 < MR; j0 += MR2) {
                const int j = j0 + MR2 <= MR ? j0 : MR - MR2;
                k2->f32_gemm_packed(K, a + 1 + j * lda, lda, bp + 1, t, NR, 0);
                for (int r = 0; r < MR2; r++) {
                    if (done[j + r]) continue;
                    done[j + r] = true;
                    for (int i = 0; i < NR; i++) c2[(j + r) * NR + i] = pass ? c2[(j + r) * NR + i] + t[r * NR + i] : t[r * NR + i];
                }
            }
            bad += memcmp(c, c2, sizeof(float) * (size_t) (MR * NR)) != 0;
        }
        CHECK(!bad, "%s f32_gemm_%dx%d == avx2's bit for bit, k=%lld", k->isa, MR, NR, (long long) K);
        free(a); free(bp);
    }
}

static void test_type_slots(const struct kiln_kernels * k) {
    const enum kiln_type types[3] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };
    for (int t = 0; t < 3; t++) {
        CHECK(k->vec_dot[types[t]] && k->vec_dot_type[types[t]] == types[t] && k->from_float[types[t]],
              "%s %s has vec_dot/vec_dot_type/from_float", k->isa, kiln_type_name(types[t]));
    }
    float x[33], y[33];
    fill(x, 33, -1, 1); fill(y, 33, -1, 1);
    float s = 0;
    k->vec_dot[KILN_TYPE_F32](33, &s, x, y);
    CHECK(s == k->f32_dot(33, x, y), "%s vec_dot[f32] is f32_dot", k->isa);
}

static void test_selection(void) {
    tu_case = "selection";
    const char * best = kiln_cpu_isa();
    CHECK(best && kiln_kernels() && strcmp(kiln_kernels()->isa, best) == 0, "kiln_cpu_isa names the table");
#if defined(__x86_64__)
    if (kiln_cpu_has_avx512_vnni()) {
        CHECK(strcmp(best, "avx512") == 0, "AVX-512 VNNI machine picks avx512, got %s", best);
        CHECK(kiln_kernels_for_isa(KILN_ISA_AVX2) != NULL, "and keeps the avx2 table");
    } else if (kiln_cpu_has_avx2() && kiln_cpu_has_fma() && kiln_cpu_has_f16c()) {
        CHECK(strcmp(best, "avx2") == 0, "avx2 machine picks avx2, got %s", best);
        CHECK(kiln_kernels_for_isa(KILN_ISA_AVX512) == NULL, "no avx512 table without AVX-512 VNNI");
        printf("avx512 row NOT TESTED: this CPU lacks AVX-512 F+BW+VL+VNNI\n");
    }
    if (kiln_cpu_has_avxvnni() && kiln_cpu_has_avx2() && kiln_cpu_has_fma() && kiln_cpu_has_f16c()) {
        CHECK(kiln_kernels_for_isa(KILN_ISA_AVXVNNI) != NULL, "AVX-VNNI machine has the avxvnni table");
        if (!kiln_cpu_has_avx512_vnni()) CHECK(strcmp(best, "avxvnni") == 0, "AVX-VNNI without AVX-512 picks avxvnni, got %s", best);
    } else {
        CHECK(kiln_kernels_for_isa(KILN_ISA_AVXVNNI) == NULL, "no avxvnni table without AVX-VNNI");
        printf("avxvnni row NOT TESTED: this CPU lacks AVX-VNNI\n");
    }
#elif defined(__aarch64__)
    CHECK(strcmp(best, "neon") == 0, "arm64 picks neon, got %s", best);
#elif defined(__wasm_relaxed_simd__)
    CHECK(strcmp(best, "wasm_relaxed") == 0, "a relaxed-SIMD build picks wasm_relaxed, got %s", best);
    CHECK(kiln_kernels_for_isa(KILN_ISA_WASM_SIMD128) != NULL, "and keeps the SIMD128 table");
#elif defined(__wasm_simd128__)
    CHECK(strcmp(best, "wasm_simd128") == 0, "wasm picks simd128, got %s", best);
#endif
    kiln_cpu_force_isa("scalar");
    CHECK(strcmp(kiln_cpu_isa(), "scalar") == 0, "force scalar");
    kiln_clear_error();
    kiln_cpu_force_isa("no-such-isa");
    CHECK(strcmp(kiln_cpu_isa(), "scalar") == 0 && strstr(kiln_last_error(), "no-such-isa"), "unknown isa: unchanged + message");
    kiln_cpu_force_isa(NULL);
    CHECK(strcmp(kiln_cpu_isa(), best) == 0, "force NULL restores %s", best);
    CHECK(kiln_kernels_for_isa(KILN_ISA_SCALAR) != NULL, "scalar table always there");
    CHECK(kiln_kernels_for_isa(KILN_ISA_COUNT) == NULL, "out of range isa");
}

/* panel packing: every nr, odd k and lda, misaligned rows, against the
 * contract written out (values, then zeros for the missing rows) */
static void test_gemm_pack(const struct kiln_kernels * k) {
    if (!k->f32_gemm_pack) return;
    const int NR = k->pack_nr;
    for (int li = 0; li < N_LEN; li++) {
        const int64_t K = lengths[li], lda = K + 5;
        float * a = malloc(sizeof(float) * (size_t) (lda * NR + 1));
        float * bp = malloc(sizeof(float) * (size_t) (K * NR + 1));
        fill(a, lda * NR + 1, -1.0f, 1.0f);
        int bad = 0;
        for (int nr = 1; nr <= NR; nr++) {
            for (int64_t i = 0; i < K * NR; i++) bp[i] = -777.0f;
            k->f32_gemm_pack(K, a + 1, lda, nr, bp);
            for (int64_t q = 0; q < K; q++) {
                for (int r = 0; r < NR; r++) bad += bp[q * NR + r] != (r < nr ? a[1 + r * lda + q] : 0.0f);
            }
        }
        CHECK(!bad, "%s f32_gemm_pack (NR %d) k=%lld (%d bad)", k->isa, NR, (long long) K, bad);
        free(a); free(bp);
    }
}

/* f32_gemm_fma: bit-identical to f32_axpy rows of the same table (its
 * contract: one FMA chain per value in k order), and near the product in
 * double (the AVX-512 row has its own 512-bit blocks; AVX-VNNI inherits
 * AVX2's) */
static void test_gemm_fma(const struct kiln_kernels * k) {
    if (!k->f32_gemm_fma) {
        printf("  f32_gemm_fma: none on %s (flash attention uses f32_axpy)\n", k->isa);
        return;
    }
    static const int ms[] = { 1, 3, 4, 7, 64 }, ks[] = { 1, 8, 13, 64, 128 }, ns[] = { 8, 16, 24, 64, 136 };
    for (int t = 0; t < 5; t++) {
        const int m = ms[t], kk = ks[(t + 2) % 5], n = ns[t];
        float * A = malloc(sizeof(float) * (size_t) (m * kk)), * B = malloc(sizeof(float) * (size_t) (kk * n));
        float * C = malloc(sizeof(float) * (size_t) (m * n)), * R = malloc(sizeof(float) * (size_t) (m * n));
        fill(A, m * kk, -1, 1); fill(B, kk * n, -1, 1); fill(C, m * n, -1, 1);
        memcpy(R, C, sizeof(float) * (size_t) (m * n));
        double err = 0, ref2 = 0;
        for (int i = 0; i < m; i++) for (int j = 0; j < n; j++) {
            double d = C[i * n + j];
            for (int q = 0; q < kk; q++) d += (double) A[i * kk + q] * B[q * n + j];
            ref2 += d * d;
            R[i * n + j] = (float) d; /* overwritten below; keeps d for the error */
        }
        float * D = malloc(sizeof(float) * (size_t) (m * n));
        memcpy(D, R, sizeof(float) * (size_t) (m * n));
        memcpy(R, C, sizeof(float) * (size_t) (m * n));
        k->f32_gemm_fma(m, kk, n, C, A, B);
        for (int i = 0; i < m; i++) for (int q = 0; q < kk; q++) k->f32_axpy(n, A[i * kk + q], B + q * n, R + i * n);
        CHECK(memcmp(C, R, sizeof(float) * (size_t) (m * n)) == 0, "f32_gemm_fma %dx%dx%d: bits of f32_axpy rows", m, kk, n);
        for (int i = 0; i < m * n; i++) err += ((double) C[i] - D[i]) * ((double) C[i] - D[i]);
        CHECK(err / ref2 < 1e-12, "f32_gemm_fma %dx%dx%d: nmse %.3g vs double", m, kk, n, err / ref2);
        free(A); free(B); free(C); free(R); free(D);
    }
}

int main(void) {
    tu_seed(42);
    test_selection();
    const struct kiln_kernels * s = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    int n_isa = 0;
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        n_isa++;
        tu_case = k->isa;
        printf("isa %s\n", k->isa);
        test_fill(k);
        test_reductions(s, k);
        test_f16val(k);
        test_maps(s, k);
        test_gemm_tile(k);
        test_ggml_orders(k);
        test_ggml_expf(k);
        test_gemm_packed(k);
        test_gemm_packed_vs_avx2(k);
        test_gemm_pack(k);
        test_gemm_fma(k);
        test_type_slots(k);
    }
    CHECK(n_isa >= 1, "at least one isa");
    /* scripts/test-neon.sh runs this on a CPU with and without fp16
     * arithmetic and says which to expect */
    const char * want_f16 = getenv("KILN_EXPECT_F16ARITH");
    if (want_f16) {
        const struct kiln_kernels * kn = kiln_kernels_for_isa(KILN_ISA_NEON);
        CHECK(kn && f16_arith(kn) == (atoi(want_f16) != 0), "the NEON table's F16 kernels %s fp16 arithmetic", atoi(want_f16) ? "use" : "do not use");
    }
    KILN_VEC_LIST(CHECK_COVERED, _)
#if defined(__wasm_relaxed_simd__)
    /* the relaxed fp16 accumulator (checked above against scalar fmaf) is
     * in the table exactly where relaxed_madd fuses, as on x86 with FMA */
    {
        const bool fuses = kiln_wasm_relaxed_madd_fuses();
        const struct kiln_kernels * kr = kiln_kernels_for_isa(KILN_ISA_WASM_RELAXED);
        printf("relaxed_madd fuses: %s\n", fuses ? "yes" : "no");
        CHECK(kr && kr->f16_mad == (fuses ? f16_mad__wasm_relaxed : f16_mad__wasm_simd128), "wasm_relaxed f16_mad follows the fuse probe");
        CHECK(kr && kr->f16val_mad == (fuses ? f16val_mad__wasm_relaxed : f16val_mad__wasm_simd128), "wasm_relaxed f16val_mad follows the fuse probe");
        CHECK(kr && kr->f32_silu == (fuses ? f32_silu__wasm_relaxed : f32_silu__wasm_simd128), "wasm_relaxed f32_silu follows the fuse probe");
        if (fuses) {
            /* the relaxed silu's FMAs are SIMD128's exact fmaf, so the same
             * bits (llama.cpp's AVX2 silu): every lane path (normal, |n| >
             * 126, > 192, inf, nan, the scalar tail) */
            enum { N = 4099 };
            static float x[N], a[N], b[N];
            for (int i = 0; i < N; i++) x[i] = i < 3000 ? tu_rand_uniform(-30.0f, 30.0f) : tu_rand_uniform(-200.0f, 200.0f);
            x[7] = INFINITY; x[8] = -INFINITY; x[9] = NAN; x[10] = -0.0f; x[11] = 1e-40f;
            f32_silu__wasm_relaxed(N, x, a);
            f32_silu__wasm_simd128(N, x, b);
            int bad = 0;
            for (int i = 0; i < N; i++) bad += !((isnan(a[i]) && isnan(b[i])) || memcmp(&a[i], &b[i], sizeof(float)) == 0);
            CHECK(!bad, "wasm_relaxed f32_silu == SIMD128's bit for bit (%d differ)", bad);
        }
    }
#endif
    return tu_finish();
}
