/*
 * types.c — the type traits table: one row per GGUF type id.
 *
 * Quantized rows get their to_float / from_float_ref from src/quant/ (see
 * quants.h); a NULL function means "not supported for conversion yet" and
 * callers report that instead of crashing.
 */
#include "kiln.h"
#include "quants.h"

static void f32_to_float(const void * x, float * y, int64_t n) {
    const float * src = (const float *) x;
    for (int64_t i = 0; i < n; i++) y[i] = src[i];
}
static void f32_from_float(const float * x, void * y, int64_t n) {
    float * dst = (float *) y;
    for (int64_t i = 0; i < n; i++) dst[i] = x[i];
}
static void f16_to_float(const void * x, float * y, int64_t n) {
    kiln_fp16_to_fp32_row((const kiln_fp16_t *) x, y, n);
}
static void f16_from_float(const float * x, void * y, int64_t n) {
    kiln_fp32_to_fp16_row(x, (kiln_fp16_t *) y, n);
}
static void bf16_to_float(const void * x, float * y, int64_t n) {
    kiln_bf16_to_fp32_row((const kiln_bf16_t *) x, y, n);
}
static void bf16_from_float(const float * x, void * y, int64_t n) {
    kiln_fp32_to_bf16_row_ref(x, (kiln_bf16_t *) y, n);
}

#define ROW(T, name, blck, size, q, tf, ff) \
    [KILN_TYPE_##T] = { name, blck, 0, size, q, tf, ff }

static const struct kiln_type_traits type_traits[KILN_TYPE_COUNT] = {
    ROW(F32,     "f32",     1,   4,   false, f32_to_float,  f32_from_float),
    ROW(F16,     "f16",     1,   2,   false, f16_to_float,  f16_from_float),
    ROW(Q4_0,    "q4_0",    32,  18,  true,  KILN_QFN_TO(q4_0),    KILN_QFN_FROM(q4_0)),
    ROW(Q4_1,    "q4_1",    32,  20,  true,  KILN_QFN_TO(q4_1),    KILN_QFN_FROM(q4_1)),
    ROW(Q5_0,    "q5_0",    32,  22,  true,  KILN_QFN_TO(q5_0),    KILN_QFN_FROM(q5_0)),
    ROW(Q5_1,    "q5_1",    32,  24,  true,  KILN_QFN_TO(q5_1),    KILN_QFN_FROM(q5_1)),
    ROW(Q8_0,    "q8_0",    32,  34,  true,  KILN_QFN_TO(q8_0),    KILN_QFN_FROM(q8_0)),
    ROW(Q8_1,    "q8_1",    32,  36,  true,  KILN_QFN_TO(q8_1),    KILN_QFN_FROM(q8_1)),
    ROW(Q2_K,    "q2_K",    256, 84,  true,  KILN_QFN_TO(q2_K),    KILN_QFN_FROM(q2_K)),
    ROW(Q3_K,    "q3_K",    256, 110, true,  KILN_QFN_TO(q3_K),    KILN_QFN_FROM(q3_K)),
    ROW(Q4_K,    "q4_K",    256, 144, true,  KILN_QFN_TO(q4_K),    KILN_QFN_FROM(q4_K)),
    ROW(Q5_K,    "q5_K",    256, 176, true,  KILN_QFN_TO(q5_K),    KILN_QFN_FROM(q5_K)),
    ROW(Q6_K,    "q6_K",    256, 210, true,  KILN_QFN_TO(q6_K),    KILN_QFN_FROM(q6_K)),
    ROW(Q8_K,    "q8_K",    256, 292, true,  KILN_QFN_TO(q8_K),    KILN_QFN_FROM(q8_K)),
    ROW(IQ2_XXS, "iq2_xxs", 256, 66,  true,  KILN_QFN_TO(iq2_xxs), NULL),
    ROW(IQ2_XS,  "iq2_xs",  256, 74,  true,  KILN_QFN_TO(iq2_xs),  NULL),
    ROW(IQ3_XXS, "iq3_xxs", 256, 98,  true,  KILN_QFN_TO(iq3_xxs), NULL),
    ROW(IQ1_S,   "iq1_s",   256, 50,  true,  KILN_QFN_TO(iq1_s),   NULL),
    ROW(IQ4_NL,  "iq4_nl",  32,  18,  true,  KILN_QFN_TO(iq4_nl),  KILN_QFN_FROM(iq4_nl)),
    ROW(IQ3_S,   "iq3_s",   256, 110, true,  KILN_QFN_TO(iq3_s),   NULL),
    ROW(IQ2_S,   "iq2_s",   256, 82,  true,  KILN_QFN_TO(iq2_s),   NULL),
    ROW(IQ4_XS,  "iq4_xs",  256, 136, true,  KILN_QFN_TO(iq4_xs),  KILN_QFN_FROM(iq4_xs)),
    ROW(I8,      "i8",      1,   1,   false, NULL, NULL),
    ROW(I16,     "i16",     1,   2,   false, NULL, NULL),
    ROW(I32,     "i32",     1,   4,   false, NULL, NULL),
    ROW(I64,     "i64",     1,   8,   false, NULL, NULL),
    ROW(F64,     "f64",     1,   8,   false, NULL, NULL),
    ROW(IQ1_M,   "iq1_m",   256, 56,  true,  KILN_QFN_TO(iq1_m),   NULL),
    ROW(BF16,    "bf16",    1,   2,   false, bf16_to_float, bf16_from_float),
    ROW(TQ1_0,   "tq1_0",   256, 54,  true,  KILN_QFN_TO(tq1_0),   KILN_QFN_FROM(tq1_0)),
    ROW(TQ2_0,   "tq2_0",   256, 66,  true,  KILN_QFN_TO(tq2_0),   KILN_QFN_FROM(tq2_0)),
};

bool kiln_type_is_valid(int type) {
    return type >= 0 && type < KILN_TYPE_COUNT && type_traits[type].type_name != NULL;
}

const struct kiln_type_traits * kiln_get_type_traits(enum kiln_type type) {
    return kiln_type_is_valid((int) type) ? &type_traits[type] : NULL;
}

const char * kiln_type_name(enum kiln_type type) {
    return kiln_type_is_valid((int) type) ? type_traits[type].type_name : "NONE";
}

int64_t kiln_blck_size(enum kiln_type type) {
    return kiln_type_is_valid((int) type) ? type_traits[type].blck_size : 0;
}

size_t kiln_type_size(enum kiln_type type) {
    return kiln_type_is_valid((int) type) ? type_traits[type].type_size : 0;
}

size_t kiln_row_size(enum kiln_type type, int64_t ne) {
    if (!kiln_type_is_valid((int) type)) return 0;
    return type_traits[type].type_size * (size_t)(ne / type_traits[type].blck_size);
}

bool kiln_is_quantized(enum kiln_type type) {
    return kiln_type_is_valid((int) type) && type_traits[type].is_quantized;
}
