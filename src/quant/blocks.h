/*
 * blocks.h — byte layouts of the GGUF quantized block types.
 *
 * These must match the GGUF/ggml layouts byte for byte: a user's model file
 * is read straight into these structs. Each size is checked at compile time.
 * d/dmin/m/s are IEEE half floats stored as raw bits (kiln_fp16_t).
 */
#ifndef KILN_QUANT_BLOCKS_H
#define KILN_QUANT_BLOCKS_H

#include <stdint.h>
#include "kiln.h"

#define QK4_0 32
typedef struct { kiln_fp16_t d; uint8_t qs[QK4_0 / 2]; } block_q4_0;
#define QK4_1 32
typedef struct { kiln_fp16_t d; kiln_fp16_t m; uint8_t qs[QK4_1 / 2]; } block_q4_1;
#define QK5_0 32
typedef struct { kiln_fp16_t d; uint8_t qh[4]; uint8_t qs[QK5_0 / 2]; } block_q5_0;
#define QK5_1 32
typedef struct { kiln_fp16_t d; kiln_fp16_t m; uint8_t qh[4]; uint8_t qs[QK5_1 / 2]; } block_q5_1;
#define QK8_0 32
typedef struct { kiln_fp16_t d; int8_t qs[QK8_0]; } block_q8_0;
#define QK8_1 32
/* s = d * sum(qs) */
typedef struct { kiln_fp16_t d; kiln_fp16_t s; int8_t qs[QK8_1]; } block_q8_1;

#define QK_K 256
#define K_SCALE_SIZE 12

/* 2.625 bits per weight */
typedef struct { uint8_t scales[QK_K / 16]; uint8_t qs[QK_K / 4]; kiln_fp16_t d; kiln_fp16_t dmin; } block_q2_K;
/* 3.4375 bits per weight */
typedef struct { uint8_t hmask[QK_K / 8]; uint8_t qs[QK_K / 4]; uint8_t scales[12]; kiln_fp16_t d; } block_q3_K;
/* 4.5 bits per weight */
typedef struct { kiln_fp16_t d; kiln_fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qs[QK_K / 2]; } block_q4_K;
/* 5.5 bits per weight */
typedef struct { kiln_fp16_t d; kiln_fp16_t dmin; uint8_t scales[K_SCALE_SIZE]; uint8_t qh[QK_K / 8]; uint8_t qs[QK_K / 2]; } block_q5_K;
/* 6.5625 bits per weight */
typedef struct { uint8_t ql[QK_K / 2]; uint8_t qh[QK_K / 4]; int8_t scales[QK_K / 16]; kiln_fp16_t d; } block_q6_K;
/* intermediate activation quantization for the k-quant dot products */
typedef struct { float d; int8_t qs[QK_K]; int16_t bsums[QK_K / 16]; } block_q8_K;

/* ternary */
typedef struct { uint8_t qs[(QK_K - 4 * QK_K / 64) / 5]; uint8_t qh[QK_K / 64]; kiln_fp16_t d; } block_tq1_0;
typedef struct { uint8_t qs[QK_K / 4]; kiln_fp16_t d; } block_tq2_0;

/* i-quants */
typedef struct { kiln_fp16_t d; uint16_t qs[QK_K / 8]; } block_iq2_xxs;
typedef struct { kiln_fp16_t d; uint16_t qs[QK_K / 8]; uint8_t scales[QK_K / 32]; } block_iq2_xs;
typedef struct { kiln_fp16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t scales[QK_K / 32]; } block_iq2_s;
typedef struct { kiln_fp16_t d; uint8_t qs[3 * QK_K / 8]; } block_iq3_xxs;
#define IQ3S_N_SCALE (QK_K / 64)
typedef struct { kiln_fp16_t d; uint8_t qs[QK_K / 4]; uint8_t qh[QK_K / 32]; uint8_t signs[QK_K / 8]; uint8_t scales[IQ3S_N_SCALE]; } block_iq3_s;
typedef struct { kiln_fp16_t d; uint8_t qs[QK_K / 8]; uint16_t qh[QK_K / 32]; } block_iq1_s;
/* iq1_m has no d: the scale is spread over the 4 high nibbles of scales[] */
typedef struct { uint8_t qs[QK_K / 8]; uint8_t qh[QK_K / 16]; uint8_t scales[QK_K / 32]; } block_iq1_m;
#define QK4_NL 32
typedef struct { kiln_fp16_t d; uint8_t qs[QK4_NL / 2]; } block_iq4_nl;
typedef struct { kiln_fp16_t d; uint16_t scales_h; uint8_t scales_l[QK_K / 64]; uint8_t qs[QK_K / 2]; } block_iq4_xs;

#define KILN_STATIC_ASSERT(c, msg) _Static_assert(c, msg)
KILN_STATIC_ASSERT(sizeof(block_q4_0) == 18, "block_q4_0 size");
KILN_STATIC_ASSERT(sizeof(block_q4_1) == 20, "block_q4_1 size");
KILN_STATIC_ASSERT(sizeof(block_q5_0) == 22, "block_q5_0 size");
KILN_STATIC_ASSERT(sizeof(block_q5_1) == 24, "block_q5_1 size");
KILN_STATIC_ASSERT(sizeof(block_q8_0) == 34, "block_q8_0 size");
KILN_STATIC_ASSERT(sizeof(block_q8_1) == 36, "block_q8_1 size");
KILN_STATIC_ASSERT(sizeof(block_q2_K) == 84, "block_q2_K size");
KILN_STATIC_ASSERT(sizeof(block_q3_K) == 110, "block_q3_K size");
KILN_STATIC_ASSERT(sizeof(block_q4_K) == 144, "block_q4_K size");
KILN_STATIC_ASSERT(sizeof(block_q5_K) == 176, "block_q5_K size");
KILN_STATIC_ASSERT(sizeof(block_q6_K) == 210, "block_q6_K size");
KILN_STATIC_ASSERT(sizeof(block_q8_K) == 292, "block_q8_K size");
KILN_STATIC_ASSERT(sizeof(block_tq1_0) == 54, "block_tq1_0 size");
KILN_STATIC_ASSERT(sizeof(block_tq2_0) == 66, "block_tq2_0 size");
KILN_STATIC_ASSERT(sizeof(block_iq2_xxs) == 66, "block_iq2_xxs size");
KILN_STATIC_ASSERT(sizeof(block_iq2_xs) == 74, "block_iq2_xs size");
KILN_STATIC_ASSERT(sizeof(block_iq2_s) == 82, "block_iq2_s size");
KILN_STATIC_ASSERT(sizeof(block_iq3_xxs) == 98, "block_iq3_xxs size");
KILN_STATIC_ASSERT(sizeof(block_iq3_s) == 110, "block_iq3_s size");
KILN_STATIC_ASSERT(sizeof(block_iq1_s) == 50, "block_iq1_s size");
KILN_STATIC_ASSERT(sizeof(block_iq1_m) == 56, "block_iq1_m size");
KILN_STATIC_ASSERT(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
KILN_STATIC_ASSERT(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");

#endif /* KILN_QUANT_BLOCKS_H */
