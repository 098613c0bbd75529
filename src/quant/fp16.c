/*
 * fp16.c — IEEE half and bfloat16 conversions, bit-exact with ggml's
 * reference conversions (round to nearest even; bf16 keeps NaNs quiet).
 */
#include "kiln.h"

#include <string.h>

static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float kiln_fp16_to_fp32(kiln_fp16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp  = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) {                      /* inf / nan */
        return bits_f32(sign | 0x7f800000u | (mant << 13));
    }
    if (exp == 0) {
        if (mant == 0) return bits_f32(sign);
        /* subnormal: value = mant * 2^-24 */
        float v = (float) mant * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (mant << 13));
}

kiln_fp16_t kiln_fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000;
    const uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {              /* inf or nan: keep nan quiet */
        return (kiln_fp16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
    }
    if (absx >= 0x477ff000u) {              /* rounds to >= 65520: overflow to inf */
        return (kiln_fp16_t)(sign | 0x7c00);
    }
    if (absx < 0x38800000u) {               /* below the smallest normal half: subnormal or zero */
        /* shift the 24-bit significand into place with round-to-nearest-even */
        const uint32_t e = absx >> 23;
        if (e < 102) return (kiln_fp16_t) sign; /* < 2^-25: rounds to zero */
        const uint32_t m = (absx & 0x7fffff) | 0x800000;
        const uint32_t shift = 126 - e;     /* 14..24 */
        uint32_t h = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1);
        const uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) h++;
        return (kiln_fp16_t)(sign | h);
    }
    /* normal: rebias exponent, round mantissa to 10 bits (nearest even) */
    uint32_t h = ((absx >> 13) - (112u << 10));
    const uint32_t rem = absx & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
    return (kiln_fp16_t)(sign | h);
}

void kiln_fp16_to_fp32_row(const kiln_fp16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp16_to_fp32(x[i]);
}

void kiln_fp32_to_fp16_row(const float * x, kiln_fp16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp32_to_fp16(x[i]);
}

float kiln_bf16_to_fp32(kiln_bf16_t h) {
    return bits_f32((uint32_t) h.bits << 16);
}

kiln_bf16_t kiln_fp32_to_bf16(float f) {
    kiln_bf16_t h;
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {  /* nan: force quiet */
        h.bits = (uint16_t)((u >> 16) | 64);
        return h;
    }
    h.bits = (uint16_t)((u + (0x7fff + ((u >> 16) & 1))) >> 16);
    return h;
}

void kiln_bf16_to_fp32_row(const kiln_bf16_t * x, float * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_bf16_to_fp32(x[i]);
}

void kiln_fp32_to_bf16_row_ref(const float * x, kiln_bf16_t * y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = kiln_fp32_to_bf16(x[i]);
}

void kiln_fp32_to_bf16_row(const float * x, kiln_bf16_t * y, int64_t n) {
    kiln_fp32_to_bf16_row_ref(x, y, n);
}
