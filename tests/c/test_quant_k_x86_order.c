/*
 * test_quant_k_x86_order.c — the x86 rows' plain Q4_K, Q5_K and Q6_K dots
 * sum in llama.cpp's AVX2 order (ggml's x86 ggml_vec_dot_q{4,5,6}_K_q8_K,
 * which llama.cpp runs for Q5_K and Q6_K on x86, where it does not repack
 * them, and for Q4_K weights it cannot repack: row counts not a multiple of
 * 8). That order, written here in scalar C from the plain block layouts,
 * per super-block:
 *  - 8 i32 lanes; lane j gets, for every 32-value chunk c of the block, the
 *    products q * y * scale(c) at chunk bytes 4j..4j+3;
 *  - Q6_K: q is the unsigned 6-bit value and lane j then loses
 *    32 * (bsums[2j] * sc[2j] + bsums[2j + 1] * sc[2j + 1]) (the -32 offset
 *    of values 32j..32j+31, not of the lane's own bytes);
 *  - acc[j] = fmaf(d_x * d_y, (float) lane[j], acc[j]);
 *  - Q5_K: mins = fmaf(dmin_x * d_y, (float) sum m_s * bsum_s, mins);
 *  - Q4_K: 4 mins lanes, lane k: fmaf(dmin_x * d_y, (float) (m_2k * bsum_2k +
 *    m_2k+1 * bsum_2k+1), lane), reduced as (0 + 2) + (1 + 3);
 * result: the 8 accumulators reduced as (j, j+4), then (0, 2), (1, 3), then
 * the two, minus mins. Every x86 row (avx2, avx512, avxvnni) must equal this
 * bit for bit at 1..37 super-blocks with misaligned pointers, on quantized
 * weights and on random bytes (Q6_K scales over all of int8). The model
 * itself is checked against a double dot of the dequantized values.
 * tests/oracle/ggml_repack_check.c checks the same rows against llama.cpp's
 * binary.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "quants.h"
#include "cpu/kernels.h"

#include <math.h>

static float h2f(kiln_fp16_t h) { return kiln_fp16_to_fp32(h); }

static void scale_min(const uint8_t * q, int j, int * sc, int * m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 15) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

static float reduce8(const float a[8]) {
    float s4[4];
    for (int j = 0; j < 4; j++) s4[j] = a[j] + a[j + 4];
    return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

static float model_q4_K(int64_t n, const block_q4_K * x, const block_q8_K * y) {
    float acc[8] = { 0 }, am[4] = { 0 };
    for (int64_t b = 0; b < n / QK_K; b++) {
        int lane[8] = { 0 }, ml[4] = { 0 };
        for (int c = 0; c < 8; c++) {
            int sc, m;
            scale_min(x[b].scales, c, &sc, &m);
            ml[c / 2] += m * (y[b].bsums[2 * c] + y[b].bsums[2 * c + 1]);
            for (int e = 0; e < 32; e++) {
                const int q = (x[b].qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 15;
                lane[e / 4] += q * y[b].qs[32 * c + e] * sc;
            }
        }
        const float d = h2f(x[b].d) * y[b].d, dm = h2f(x[b].dmin) * y[b].d;
        for (int j = 0; j < 8; j++) acc[j] = fmaf(d, (float) lane[j], acc[j]);
        for (int k = 0; k < 4; k++) am[k] = fmaf(dm, (float) ml[k], am[k]);
    }
    return reduce8(acc) - ((am[0] + am[2]) + (am[1] + am[3]));
}

static float model_q5_K(int64_t n, const block_q5_K * x, const block_q8_K * y) {
    float acc[8] = { 0 }, mins = 0;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int lane[8] = { 0 }, msum = 0;
        for (int c = 0; c < 8; c++) {
            int sc, m;
            scale_min(x[b].scales, c, &sc, &m);
            msum += m * (y[b].bsums[2 * c] + y[b].bsums[2 * c + 1]);
            for (int e = 0; e < 32; e++) {
                const int lo = (x[b].qs[32 * (c / 2) + e] >> (4 * (c % 2))) & 15;
                const int q = lo | (((x[b].qh[e] >> c) & 1) << 4);
                lane[e / 4 % 8] += q * y[b].qs[32 * c + e] * sc;
            }
        }
        const float d = h2f(x[b].d) * y[b].d;
        for (int j = 0; j < 8; j++) acc[j] = fmaf(d, (float) lane[j], acc[j]);
        mins = fmaf(h2f(x[b].dmin) * y[b].d, (float) msum, mins);
    }
    return reduce8(acc) - mins;
}

static float model_q6_K(int64_t n, const block_q6_K * x, const block_q8_K * y) {
    float acc[8] = { 0 };
    for (int64_t b = 0; b < n / QK_K; b++) {
        int lane[8] = { 0 };
        for (int c = 0; c < 8; c++) {          /* chunk c: values 32c..32c+31 */
            const int half = c / 4, p = c % 4;
            const uint8_t * ql = x[b].ql + 64 * half + 32 * (p % 2);
            const uint8_t * qh = x[b].qh + 32 * half;
            for (int e = 0; e < 32; e++) {
                const int q = ((ql[e] >> (4 * (p / 2))) & 15) | (((qh[e] >> (2 * p)) & 3) << 4);
                lane[e / 4] += q * y[b].qs[32 * c + e] * x[b].scales[2 * c + e / 16];
            }
        }
        for (int j = 0; j < 8; j++) {
            lane[j] -= 32 * (y[b].bsums[2 * j] * x[b].scales[2 * j] + y[b].bsums[2 * j + 1] * x[b].scales[2 * j + 1]);
        }
        const float d = h2f(x[b].d) * y[b].d;
        for (int j = 0; j < 8; j++) acc[j] = fmaf(d, (float) lane[j], acc[j]);
    }
    return reduce8(acc);
}

static float model(enum kiln_type t, int64_t n, const void * x, const void * y) {
    return t == KILN_TYPE_Q4_K ? model_q4_K(n, x, y) : t == KILN_TYPE_Q5_K ? model_q5_K(n, x, y) : model_q6_K(n, x, y);
}

/* weights: quantized from uniform data, or random bytes with a sane d */
static void make_weights(enum kiln_type t, int64_t n, uint8_t * q, int random_bytes) {
    const struct kiln_type_traits * tt = kiln_get_type_traits(t);
    if (!random_bytes) {
        float * xf = malloc(sizeof(float) * (size_t) n);
        for (int64_t i = 0; i < n; i++) xf[i] = tu_rand_uniform(-1, 1);
        tt->from_float_ref(xf, q, n);
        free(xf);
        return;
    }
    const int64_t nb = n / QK_K;
    for (size_t j = 0; j < (size_t) nb * tt->type_size; j++) q[j] = (uint8_t) tu_rand_u64();
    for (int64_t b = 0; b < nb; b++) {
        if (t == KILN_TYPE_Q4_K) {
            block_q4_K * blk = (block_q4_K *) q + b;
            blk->d = kiln_fp32_to_fp16(tu_rand_uniform(1e-3f, 2e-2f));
            blk->dmin = kiln_fp32_to_fp16(tu_rand_uniform(1e-3f, 2e-2f));
        } else if (t == KILN_TYPE_Q5_K) {
            block_q5_K * blk = (block_q5_K *) q + b;
            blk->d = kiln_fp32_to_fp16(tu_rand_uniform(1e-3f, 2e-2f));
            blk->dmin = kiln_fp32_to_fp16(tu_rand_uniform(1e-3f, 2e-2f));
        } else {
            ((block_q6_K *) q + b)->d = kiln_fp32_to_fp16(tu_rand_uniform(-2e-3f, 2e-3f));
        }
    }
}

static double ref_dot(enum kiln_type t, int64_t n, const void * x, const void * y, double * sum_abs) {
    float * xf = malloc(sizeof(float) * (size_t) n), * yf = malloc(sizeof(float) * (size_t) n);
    kiln_get_type_traits(t)->to_float(x, xf, n);
    kiln_get_type_traits(KILN_TYPE_Q8_K)->to_float(y, yf, n);
    double s = 0, sa = 0;
    for (int64_t i = 0; i < n; i++) { s += (double) xf[i] * yf[i]; sa += fabs((double) xf[i] * yf[i]); }
    free(xf); free(yf);
    *sum_abs = sa;
    return s;
}

int main(void) {
    static const enum kiln_type types[3] = { KILN_TYPE_Q4_K, KILN_TYPE_Q5_K, KILN_TYPE_Q6_K };
    static const enum kiln_isa rows[3] = { KILN_ISA_AVX2, KILN_ISA_AVX512, KILN_ISA_AVXVNNI };
    static const int nblocks[] = { 1, 2, 3, 8, 37 };
    const struct kiln_kernels * ks = kiln_kernels_for_isa(KILN_ISA_SCALAR);
    int cases[3] = { 0 }, model_cases = 0;
    tu_seed(5601);
    for (int ti = 0; ti < 3; ti++) {
        const enum kiln_type t = types[ti];
        tu_case = kiln_type_name(t);
        for (int li = 0; li < 5; li++) {
            for (int rb = 0; rb < 2; rb++) {
                const int64_t n = (int64_t) QK_K * nblocks[li];
                uint8_t * xb = malloc(kiln_row_size(t, n) + 8), * yb = malloc(kiln_row_size(KILN_TYPE_Q8_K, n) + 8);
                uint8_t * x = xb + 2, * y = yb + 4;
                float * act = malloc(sizeof(float) * (size_t) n);
                make_weights(t, n, x, rb);
                for (int64_t i = 0; i < n; i++) act[i] = tu_rand_uniform(-3, 3) * (i % 11 == 0 ? 4.f : 1.f);
                ks->from_float[KILN_TYPE_Q8_K](act, y, n);
                const float want = model(t, n, x, y);
                double sa;
                const double r = ref_dot(t, n, x, y, &sa);
                CHECK(fabs(want - r) <= 1e-5 * sa + 1e-6, "model n=%lld %s: %.9g vs double %.9g (sum|.| %.3g)", (long long) n,
                      rb ? "random bytes" : "quantized", want, r, sa);
                model_cases++;
                for (int ri = 0; ri < 3; ri++) {
                    const struct kiln_kernels * k = kiln_kernels_for_isa(rows[ri]);
                    if (!k) continue;
                    float got = 0;
                    k->vec_dot[t](n, &got, x, y);
                    CHECK(memcmp(&got, &want, sizeof got) == 0, "%s n=%lld %s: %.9g, ggml AVX2 order %.9g", k->isa, (long long) n,
                          rb ? "random bytes" : "quantized", got, want);
                    cases[ri]++;
                }
                free(xb); free(yb); free(act);
            }
        }
    }
    printf("  model vs double dot: %d cases\n", model_cases);
    for (int ri = 0; ri < 3; ri++) {
        if (kiln_kernels_for_isa(rows[ri])) printf("  %s q4_K/q5_K/q6_K == ggml AVX2 order bit for bit: %d cases\n", kiln_isa_name(rows[ri]), cases[ri]);
        else printf("%s row NOT TESTED: this CPU/build has no %s kernels\n", kiln_isa_name(rows[ri]), kiln_isa_name(rows[ri]));
    }
    return tu_finish();
}
