/*
 * test_quant.c — quantized block types: round-trip error bounds, determinism,
 * hand-computed known-answer vectors, dequantization against a second,
 * element-wise reference written here, kiln_quantize_chunk.
 */
#include "util/test_util.h"
#include "blocks.h"
#include "quants.h"

struct qtype { enum kiln_type t; double max_rel_rmse; };

/* relative RMSE (rmse / rms of the data) bounds for uniform [-1, 1] data,
 * about 1.5x what each format reaches */
static const struct qtype qtypes[] = {
    { KILN_TYPE_Q4_0, 0.095 },  { KILN_TYPE_Q4_1, 0.075 },  { KILN_TYPE_Q5_0, 0.048 },
    { KILN_TYPE_Q5_1, 0.038 },  { KILN_TYPE_Q8_0, 0.0060 }, { KILN_TYPE_Q8_1, 0.0060 },
    { KILN_TYPE_Q2_K, 0.36 },   { KILN_TYPE_Q3_K, 0.17 },   { KILN_TYPE_Q4_K, 0.075 },
    { KILN_TYPE_Q5_K, 0.038 },  { KILN_TYPE_Q6_K, 0.019 },  { KILN_TYPE_Q8_K, 0.0060 },
    { KILN_TYPE_IQ4_NL, 0.085 }, { KILN_TYPE_IQ4_XS, 0.085 },
    { KILN_TYPE_TQ1_0, 0.75 },  { KILN_TYPE_TQ2_0, 0.75 },
};
#define N_QTYPES ((int) (sizeof(qtypes) / sizeof(qtypes[0])))

static void fill(float * x, int64_t n, float lo, float hi) {
    for (int64_t i = 0; i < n; i++) x[i] = tu_rand_uniform(lo, hi);
}

static void test_round_trip(void) {
    tu_case = "round trip";
    const int64_t n = 256 * 16;
    float * x = malloc(n * sizeof(float));
    float * y = malloc(n * sizeof(float));
    void * q = malloc(n * 2);
    void * q2 = malloc(n * 2);
    tu_seed(1);
    fill(x, n, -1, 1);
    for (int i = 0; i < N_QTYPES; i++) {
        const struct kiln_type_traits * tt = kiln_get_type_traits(qtypes[i].t);
        CHECK(tt && tt->from_float_ref && tt->to_float, "%s has quantize + dequantize", kiln_type_name(qtypes[i].t));
        if (!tt || !tt->from_float_ref || !tt->to_float) continue;
        memset(q, 0xAB, n * 2);
        tt->from_float_ref(x, q, n);
        tt->to_float(q, y, n);
        double se = 0, sx = 0;
        for (int64_t j = 0; j < n; j++) { se += (double)(y[j] - x[j]) * (y[j] - x[j]); sx += (double) x[j] * x[j]; }
        const double rel = sqrt(se / sx);
        if (getenv("KILN_TEST_VERBOSE")) printf("  %-7s rel rmse %.5f\n", tt->type_name, rel);
        CHECK(rel < qtypes[i].max_rel_rmse, "%s relative rmse %.5f < %.5f", tt->type_name, rel, qtypes[i].max_rel_rmse);
        CHECK(rel > qtypes[i].max_rel_rmse / 20, "%s rmse %.6f suspiciously small", tt->type_name, rel);
        /* determinism: a second run into other memory writes the same bytes */
        memset(q2, 0x5C, n * 2);
        tt->from_float_ref(x, q2, n);
        CHECK(memcmp(q, q2, kiln_row_size(qtypes[i].t, n)) == 0, "%s deterministic", tt->type_name);
        /* zero data stays zero */
        float zeros[256] = {0};
        float back[256];
        tt->from_float_ref(zeros, q2, 256);
        tt->to_float(q2, back, 256);
        int allzero = 1;
        for (int j = 0; j < 256; j++) allzero &= back[j] == 0.0f;
        CHECK(allzero, "%s zeros round-trip to zeros", tt->type_name);
    }
    free(x); free(y); free(q); free(q2);
}

/* ---- known answers, worked out by hand from the format definitions ------ */

static void test_known_q4_0(void) {
    tu_case = "known q4_0";
    /* x = j - 16: the largest magnitude is x[0] = -16, so d = -16 / -8 = 2
     * (fp16 0x4000) and q = trunc((j - 16) / 2 + 8.5) clamped to 15, i.e.
     * q[j] = floor((j + 1) / 2) for j < 31 and 15 for j = 31. Byte j packs
     * q[j] (low nibble) with q[j + 16] (high). */
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float) (j - 16);
    static const uint8_t want_qs[16] = { 0x80, 0x91, 0x91, 0xA2, 0xA2, 0xB3, 0xB3, 0xC4,
                                         0xC4, 0xD5, 0xD5, 0xE6, 0xE6, 0xF7, 0xF7, 0xF8 };
    block_q4_0 b;
    kiln_quantize_row_q4_0_ref(x, &b, 32);
    CHECK(b.d == 0x4000, "q4_0 d = 0x%04x, want 0x4000", b.d);
    CHECK(memcmp(b.qs, want_qs, 16) == 0, "q4_0 nibbles");
    float y[32];
    kiln_dequantize_row_q4_0(&b, y, 32);
    int ok = 1;
    for (int j = 0; j < 32; j++) {
        const int q = j < 31 ? (j + 1) / 2 : 15;
        ok &= y[j] == (float) ((q - 8) * 2);
    }
    CHECK(ok, "q4_0 dequantized values (q - 8) * 2");
    /* an all-zero block: d = 0 / -8 = -0 (fp16 0x8000, as ggml writes it)
     * and every quant is the zero point 8 */
    float z[32] = {0};
    kiln_quantize_row_q4_0_ref(z, &b, 32);
    int zok = b.d == 0x8000;
    for (int j = 0; j < 16; j++) zok &= b.qs[j] == 0x88;
    CHECK(zok, "q4_0 zero block");
}

static void test_known_q8_0(void) {
    tu_case = "known q8_0";
    /* amax 127 makes d = 1 (fp16 0x3c00) and id = 1, so q = roundf(x):
     * halves round away from zero */
    float x[32] = { 127.f, -2.5f, 2.5f, 0.49f, -0.5f, 0.5f, -127.f, 1.5f, -1.5f, 3.49f, 100.2f, -99.7f };
    static const int8_t want[12] = { 127, -3, 3, 0, -1, 1, -127, 2, -2, 3, 100, -100 };
    block_q8_0 b;
    kiln_quantize_row_q8_0_ref(x, &b, 32);
    CHECK(b.d == 0x3c00, "q8_0 d = 0x%04x", b.d);
    CHECK(memcmp(b.qs, want, 12) == 0, "q8_0 quants");
    int rest = 1;
    for (int j = 12; j < 32; j++) rest &= b.qs[j] == 0;
    CHECK(rest, "q8_0 zeros");
    /* q8_1 also stores s = d * sum(q) */
    block_q8_1 b1;
    kiln_quantize_row_q8_1_ref(x, &b1, 32);
    int sum = 0;
    for (int j = 0; j < 12; j++) sum += want[j];
    CHECK(b1.d == 0x3c00 && kiln_fp16_to_fp32(b1.s) == (float) sum, "q8_1 s = %g want %d", kiln_fp16_to_fp32(b1.s), sum);
}

static void test_known_q4_K(void) {
    tu_case = "known q4_K";
    /* x = j % 16: every 32-sub-block spans [0, 15] exactly, so the fit is
     * scale 1, min 0 with zero error. Block scale d = fp16(1/63) = 0x2410
     * (1.015625 * 2^-6), dmin = 0; each 6-bit sub-scale is 63 and each min 0.
     * Packing: bytes 0..3 = 63 | (63 >> 4) << 6 = 0xff, bytes 4..7 = 0
     * (mins), bytes 8..11 = 63 & 15 = 0x0f. With d*63 = 0.99975586 the
     * requantized values are x again; byte l of each 32-byte group holds
     * element l (low nibble) and l + 32 (high), both (l % 16). */
    float x[256];
    for (int j = 0; j < 256; j++) x[j] = (float) (j % 16);
    block_q4_K b;
    kiln_quantize_row_q4_K_ref(x, &b, 256);
    CHECK(b.d == 0x2410, "q4_K d = 0x%04x want 0x2410", b.d);
    CHECK(b.dmin == 0x0000, "q4_K dmin = 0x%04x", b.dmin);
    static const uint8_t want_sc[12] = { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x0f, 0x0f, 0x0f, 0x0f };
    CHECK(memcmp(b.scales, want_sc, 12) == 0, "q4_K scales");
    int ok = 1;
    for (int l = 0; l < 128; l++) ok &= b.qs[l] == (uint8_t) ((l % 16) * 0x11);
    CHECK(ok, "q4_K nibbles");
    float y[256];
    kiln_dequantize_row_q4_K(&b, y, 256);
    const float d1 = 0.015869140625f * 63;
    int dok = 1;
    for (int j = 0; j < 256; j++) dok &= y[j] == d1 * (float) (j % 16);
    CHECK(dok, "q4_K dequantized values");
}

/* ---- a second dequantizer, element by element from the layouts ---------- */

static float ref_elem(enum kiln_type t, const uint8_t * blk, int i) {
    float d = kiln_fp16_to_fp32((uint16_t) (blk[0] | blk[1] << 8));
    switch (t) {
        case KILN_TYPE_Q4_0: {
            const uint8_t b = blk[2 + (i % 16)];
            return (float) (((i < 16) ? (b & 15) : (b >> 4)) - 8) * d;
        }
        case KILN_TYPE_Q5_1: {
            const float m = kiln_fp16_to_fp32((uint16_t) (blk[2] | blk[3] << 8));
            const uint32_t qh = blk[4] | blk[5] << 8 | blk[6] << 16 | (uint32_t) blk[7] << 24;
            const uint8_t b = blk[8 + (i % 16)];
            const int q = ((i < 16) ? (b & 15) : (b >> 4)) | (((qh >> i) & 1) << 4);
            return q * d + m;
        }
        case KILN_TYPE_Q4_K: {
            const float dmin = kiln_fp16_to_fp32((uint16_t) (blk[2] | blk[3] << 8));
            const uint8_t * sc = blk + 4;
            const int sb = i / 32;
            int s, m;
            if (sb < 4) { s = sc[sb] & 63; m = sc[sb + 4] & 63; }
            else { s = (sc[sb + 4] & 15) | ((sc[sb - 4] >> 6) << 4); m = (sc[sb + 4] >> 4) | ((sc[sb] >> 6) << 4); }
            const uint8_t b = blk[16 + 32 * (i / 64) + (i % 32)];
            const int q = (i % 64) < 32 ? (b & 15) : (b >> 4);
            return d * s * q - dmin * m;
        }
        case KILN_TYPE_Q6_K: {
            /* ql[128], qh[64], scales[16], d */
            d = kiln_fp16_to_fp32((uint16_t) (blk[208] | blk[209] << 8));
            const int half = i / 128, r = i % 128, quarter = r / 32, l = r % 32;
            const uint8_t lb = blk[64 * half + 32 * (quarter & 1) + l];
            const int lo = quarter < 2 ? (lb & 15) : (lb >> 4);
            const int hi = (blk[128 + 32 * half + l] >> (2 * quarter)) & 3;
            const int8_t scale = (int8_t) blk[192 + 8 * half + 2 * quarter + l / 16];
            return d * scale * ((lo | hi << 4) - 32);
        }
        case KILN_TYPE_IQ4_XS: {
            static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };
            const int ib = i / 32;
            const uint16_t sh = (uint16_t) (blk[2] | blk[3] << 8);
            const int ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 15) | (((sh >> (2 * ib)) & 3) << 4);
            const uint8_t b = blk[8 + 16 * ib + (i % 16)];
            return d * (ls - 32) * kv[(i % 32) < 16 ? (b & 15) : (b >> 4)];
        }
        case KILN_TYPE_Q3_K: {
            /* hmask[32], qs[64], scales[12], d */
            d = kiln_fp16_to_fp32((uint16_t) (blk[108] | blk[109] << 8));
            const uint8_t * sc = blk + 96;
            const int sb = i / 16;
            const int lo = sb < 8 ? (sc[sb] & 15) : (sc[sb - 8] >> 4);
            const int s = (lo | (((sc[8 + sb % 4] >> (2 * (sb / 4))) & 3) << 4)) - 32;
            const int half = i / 128, r = i % 128, plane = r / 32, l = r % 32;
            const int q = (blk[32 + 32 * half + l] >> (2 * plane)) & 3;
            const int h = (blk[l] >> (4 * half + plane)) & 1;
            return d * s * (q - (h ? 0 : 4));
        }
        default: return NAN;
    }
}

static void test_dequant_reference(void) {
    tu_case = "dequantize vs element reference";
    const enum kiln_type ts[] = { KILN_TYPE_Q4_0, KILN_TYPE_Q5_1, KILN_TYPE_Q3_K, KILN_TYPE_Q4_K, KILN_TYPE_Q6_K, KILN_TYPE_IQ4_XS };
    tu_seed(7);
    for (int k = 0; k < (int) (sizeof(ts) / sizeof(ts[0])); k++) {
        const enum kiln_type t = ts[k];
        const int64_t bs = kiln_blck_size(t), tsz = (int64_t) kiln_type_size(t);
        const int nblk = 3;
        uint8_t * raw = malloc(tsz * nblk);
        for (int64_t j = 0; j < tsz * nblk; j++) raw[j] = (uint8_t) tu_rand_u64();
        /* keep the fp16 scales finite and modest */
        for (int b = 0; b < nblk; b++) {
            uint8_t * blk = raw + b * tsz;
            const int off = (t == KILN_TYPE_Q6_K) ? 208 : (t == KILN_TYPE_Q3_K) ? 108 : 0;
            blk[off + 1] = (uint8_t) (0x20 | (blk[off + 1] & 0x83));
            if (t == KILN_TYPE_Q5_1 || t == KILN_TYPE_Q4_K) blk[3] = (uint8_t) (0x20 | (blk[3] & 0x83));
        }
        float * y = malloc(sizeof(float) * bs * nblk);
        kiln_get_type_traits(t)->to_float(raw, y, bs * nblk);
        int bad = 0;
        for (int b = 0; b < nblk; b++) {
            for (int i = 0; i < bs; i++) {
                const float r = ref_elem(t, raw + b * tsz, i);
                if (memcmp(&r, &y[b * bs + i], 4) != 0) { if (!bad) fprintf(stderr, "  %s blk %d elem %d: %g vs %g\n", kiln_type_name(t), b, i, y[b * bs + i], r); bad++; }
            }
        }
        CHECK(bad == 0, "%s: %d elements differ from the element reference", kiln_type_name(t), bad);
        free(raw); free(y);
    }
}

static void test_dequant_iq_all_finite(void) {
    tu_case = "i-quant dequantize";
    /* grid types: random bytes with a sane scale decode to finite values on
     * the grid, and all-zero blocks decode to 0 (scale 0) */
    const enum kiln_type ts[] = { KILN_TYPE_IQ2_XXS, KILN_TYPE_IQ2_XS, KILN_TYPE_IQ2_S, KILN_TYPE_IQ3_XXS,
                                  KILN_TYPE_IQ3_S, KILN_TYPE_IQ1_S, KILN_TYPE_IQ1_M };
    tu_seed(11);
    for (int k = 0; k < 7; k++) {
        const struct kiln_type_traits * tt = kiln_get_type_traits(ts[k]);
        CHECK(tt && tt->to_float && !tt->from_float_ref, "%s: dequantize only", kiln_type_name(ts[k]));
        uint8_t raw[110];
        for (size_t j = 0; j < sizeof(raw); j++) raw[j] = (uint8_t) tu_rand_u64();
        if (ts[k] != KILN_TYPE_IQ1_M) raw[1] = 0x3c; else { raw[49] &= 0x0f; raw[51] = (uint8_t) ((raw[51] & 0x0f) | 0x30); }
        float y[256];
        tt->to_float(raw, y, 256);
        int fin = 1;
        double mx = 0;
        for (int j = 0; j < 256; j++) { /* branchy on purpose: gcc-12 aarch64 ICEs vectorizing this */
            if (!isfinite(y[j])) fin = 0;
            else if (fabs(y[j]) > mx) mx = fabs(y[j]);
        }
        CHECK(fin && mx > 0, "%s finite, nonzero (max %g)", tt->type_name, mx);
    }
    /* iq2_xxs by hand: grid index 0 is all-8 coordinates; with d = 1,
     * scale nibble 0 (db = 0.125) and no sign bits every value is 1.0 */
    block_iq2_xxs b;
    memset(&b, 0, sizeof(b));
    b.d = 0x3c00;
    float y[256];
    kiln_dequantize_row_iq2_xxs(&b, y, 256);
    int ok = 1;
    for (int j = 0; j < 256; j++) ok &= y[j] == 1.0f;
    CHECK(ok, "iq2_xxs grid 0 -> 1.0 (got %g)", y[0]);
    /* sign bits: 7 stored, the 8th is the parity; set bit 0 of the first
     * group: element 0 negative and (odd count) element 7 negative too */
    uint32_t aux = 1;
    memcpy((uint8_t *) b.qs + 4, &aux, 4);
    kiln_dequantize_row_iq2_xxs(&b, y, 256);
    CHECK(y[0] == -1.0f && y[7] == -1.0f && y[1] == 1.0f && y[8] == 1.0f, "iq2_xxs sign parity");
}

static void test_chunk(void) {
    tu_case = "quantize_chunk";
    const int64_t n_per_row = 512, nrows = 4;
    float * x = malloc(sizeof(float) * n_per_row * nrows);
    tu_seed(3);
    fill(x, n_per_row * nrows, -2, 2);
    for (int i = 0; i < N_QTYPES; i++) {
        const enum kiln_type t = qtypes[i].t;
        if (t == KILN_TYPE_Q8_1 || t == KILN_TYPE_Q8_K) continue;
        const size_t rs = kiln_row_size(t, n_per_row);
        uint8_t * a = calloc(rs * nrows, 1);
        uint8_t * b = calloc(rs * nrows, 1);
        const size_t got = kiln_quantize_chunk(t, x, a, 0, nrows, n_per_row, NULL);
        CHECK(got == rs * nrows, "%s chunk returns %zu", kiln_type_name(t), got);
        /* rows 2..3 alone land at the same place */
        const size_t got2 = kiln_quantize_chunk(t, x, b, 2 * n_per_row, 2, n_per_row, NULL);
        CHECK(got2 == 2 * rs && memcmp(a + 2 * rs, b + 2 * rs, 2 * rs) == 0, "%s chunk start offset", kiln_type_name(t));
        if (t != KILN_TYPE_IQ4_NL) {
            kiln_get_type_traits(t)->from_float_ref(x, b, n_per_row * nrows);
            CHECK(memcmp(a, b, rs * nrows) == 0, "%s chunk == reference rows", kiln_type_name(t));
        }
        /* with an importance matrix of ones the result stays close to x */
        float * im = malloc(sizeof(float) * n_per_row);
        for (int j = 0; j < n_per_row; j++) im[j] = 1.0f + (j % 7) * 0.1f;
        CHECK(kiln_quantize_chunk(t, x, b, 0, nrows, n_per_row, im) == rs * nrows, "%s chunk imatrix", kiln_type_name(t));
        float * y = malloc(sizeof(float) * n_per_row * nrows);
        kiln_get_type_traits(t)->to_float(b, y, n_per_row * nrows);
        double se = 0, sx = 0;
        for (int64_t j = 0; j < n_per_row * nrows; j++) { se += (double) (y[j] - x[j]) * (y[j] - x[j]); sx += (double) x[j] * x[j]; }
        CHECK(sqrt(se / sx) < qtypes[i].max_rel_rmse, "%s imatrix rmse %.4f", kiln_type_name(t), sqrt(se / sx));
        free(im); free(y); free(a); free(b);
    }
    /* errors */
    uint8_t buf[4096];
    kiln_clear_error();
    CHECK(kiln_quantize_chunk(KILN_TYPE_Q4_K, x, buf, 0, 1, 100, NULL) == 0 && strstr(kiln_last_error(), "multiple"),
          "n_per_row not a multiple of the block: %s", kiln_last_error());
    CHECK(kiln_quantize_chunk((enum kiln_type) 4, x, buf, 0, 1, 32, NULL) == 0 && strstr(kiln_last_error(), "invalid type"),
          "removed type id: %s", kiln_last_error());
    CHECK(kiln_quantize_chunk((enum kiln_type) 99, x, buf, 0, 1, 32, NULL) == 0, "out of range type");
    CHECK(kiln_quantize_chunk(KILN_TYPE_IQ2_XXS, x, buf, 0, 1, 256, NULL) == 0 && strstr(kiln_last_error(), "importance"),
          "iq2_xxs needs an imatrix: %s", kiln_last_error());
    CHECK(kiln_quantize_chunk(KILN_TYPE_IQ3_S, x, buf, 0, 1, 256, NULL) == 0 && strstr(kiln_last_error(), "no quantizer"),
          "iq3_s has no quantizer: %s", kiln_last_error());
    CHECK(kiln_quantize_chunk(KILN_TYPE_Q4_0, x, buf, 16, 1, 32, NULL) == 0, "start not a row boundary");
    CHECK(kiln_quantize_requires_imatrix(KILN_TYPE_IQ2_XS) && kiln_quantize_requires_imatrix(KILN_TYPE_IQ1_S)
          && !kiln_quantize_requires_imatrix(KILN_TYPE_Q4_K), "requires_imatrix");
    /* f32 / f16 rows go through too */
    CHECK(kiln_quantize_chunk(KILN_TYPE_F16, x, buf, 0, 2, 64, NULL) == 256, "f16 chunk");
    free(x);
}

int main(void) {
    test_round_trip();
    test_known_q4_0();
    test_known_q8_0();
    test_known_q4_K();
    test_dequant_reference();
    test_dequant_iq_all_finite();
    test_chunk();
    return tu_finish();
}
