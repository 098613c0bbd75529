/*
 * quants_iq.c — dequantizers of the grid-based i-quants IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (no quantizers: those need an
 * importance matrix and the grid neighbour search).
 */
#include "quants.h"
#include "quants_impl.h"
#include "iq_grids.h"

static inline float sgn(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

void kiln_dequantize_row_iq2_xxs(const void * vx, float * y, int64_t k) {
    const block_iq2_xxs * x = (const block_iq2_xxs *) vx;
    uint32_t aux32[2];
    const uint8_t * aux8 = (const uint8_t *) aux32;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            memcpy(aux32, x[i].qs + 4 * ib32, 8);
            const float db = d * (0.5f + (aux32[1] >> 28)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const uint8_t * grid = (const uint8_t *) (kiln_iq2xxs_grid + aux8[l]);
                const uint8_t signs = kiln_ksigns_iq2xs[(aux32[1] >> 7 * l) & 127];
                for (int j = 0; j < 8; ++j) y[j] = db * grid[j] * sgn(signs, j);
                y += 8;
            }
        }
    }
}

void kiln_dequantize_row_iq2_xs(const void * vx, float * y, int64_t k) {
    const block_iq2_xs * x = (const block_iq2_xs *) vx;
    float db[2];
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            db[0] = d * (0.5f + (x[i].scales[ib32] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const uint16_t q = x[i].qs[4 * ib32 + l];
                const uint8_t * grid = (const uint8_t *) (kiln_iq2xs_grid + (q & 511));
                const uint8_t signs = kiln_ksigns_iq2xs[q >> 9];
                for (int j = 0; j < 8; ++j) y[j] = db[l / 2] * grid[j] * sgn(signs, j);
                y += 8;
            }
        }
    }
}

void kiln_dequantize_row_iq2_s(const void * vx, float * y, int64_t k) {
    const block_iq2_s * x = (const block_iq2_s *) vx;
    float db[2];
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const uint8_t * signs = qs + QK_K / 8;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            db[0] = d * (0.5f + (x[i].scales[ib32] & 0xf)) * 0.25f;
            db[1] = d * (0.5f + (x[i].scales[ib32] >> 4)) * 0.25f;
            for (int l = 0; l < 4; ++l) {
                const float dl = db[l / 2];
                const uint8_t * grid = (const uint8_t *) (kiln_iq2s_grid + (qs[l] | (qh[ib32] << (8 - 2 * l) & 0x300)));
                for (int j = 0; j < 8; ++j) y[j] = dl * grid[j] * sgn(signs[l], j);
                y += 8;
            }
            qs += 4;
            signs += 4;
        }
    }
}

void kiln_dequantize_row_iq3_xxs(const void * vx, float * y, int64_t k) {
    const block_iq3_xxs * x = (const block_iq3_xxs *) vx;
    uint32_t aux32;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        const uint8_t * qs = x[i].qs;
        const uint8_t * scales_and_signs = qs + QK_K / 4;
        for (int ib32 = 0; ib32 < QK_K / 32; ++ib32) {
            memcpy(&aux32, scales_and_signs + 4 * ib32, 4);
            const float db = d * (0.5f + (aux32 >> 28)) * 0.5f;
            for (int l = 0; l < 4; ++l) {
                const uint8_t signs = kiln_ksigns_iq2xs[(aux32 >> 7 * l) & 127];
                const uint8_t * grid1 = (const uint8_t *) (kiln_iq3xxs_grid + qs[2 * l + 0]);
                const uint8_t * grid2 = (const uint8_t *) (kiln_iq3xxs_grid + qs[2 * l + 1]);
                for (int j = 0; j < 4; ++j) {
                    y[j + 0] = db * grid1[j] * sgn(signs, j);
                    y[j + 4] = db * grid2[j] * sgn(signs, j + 4);
                }
                y += 8;
            }
            qs += 8;
        }
    }
}

void kiln_dequantize_row_iq3_s(const void * vx, float * y, int64_t k) {
    const block_iq3_s * x = (const block_iq3_s *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        const uint8_t * signs = x[i].signs;
        for (int ib32 = 0; ib32 < QK_K / 32; ib32 += 2) {
            const float dbs[2] = { d * (1 + 2 * (x[i].scales[ib32 / 2] & 0xf)),
                                   d * (1 + 2 * (x[i].scales[ib32 / 2] >> 4)) };
            for (int half = 0; half < 2; ++half) {
                const float db = dbs[half];
                for (int l = 0; l < 4; ++l) {
                    const uint8_t * grid1 = (const uint8_t *) (kiln_iq3s_grid + (qs[2 * l + 0] | ((qh[half] << (8 - 2 * l)) & 256)));
                    const uint8_t * grid2 = (const uint8_t *) (kiln_iq3s_grid + (qs[2 * l + 1] | ((qh[half] << (7 - 2 * l)) & 256)));
                    for (int j = 0; j < 4; ++j) {
                        y[j + 0] = db * grid1[j] * sgn(signs[l], j);
                        y[j + 4] = db * grid2[j] * sgn(signs[l], j + 4);
                    }
                    y += 8;
                }
                qs += 8;
                signs += 4;
            }
            qh += 2;
        }
    }
}

void kiln_dequantize_row_iq1_s(const void * vx, float * y, int64_t k) {
    const block_iq1_s * x = (const block_iq1_s *) vx;
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = KQ_H2F(x[i].d);
        const uint8_t * qs = x[i].qs;
        const uint16_t * qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float dl = d * (2 * ((qh[ib] >> 12) & 7) + 1);
            const float delta = qh[ib] & 0x8000 ? -KILN_IQ1S_DELTA : KILN_IQ1S_DELTA;
            for (int l = 0; l < 4; ++l) {
                const int8_t * grid = (const int8_t *) (kiln_iq1s_grid + (qs[l] | (((qh[ib] >> 3 * l) & 7) << 8)));
                for (int j = 0; j < 8; ++j) y[j] = dl * (grid[j] + delta);
                y += 8;
            }
            qs += 4;
        }
    }
}

/* IQ1_M keeps its fp16 super-block scale in the top nibbles of the four
 * 16-bit scale words. */
static inline float iq1m_scale(const uint8_t * scales_bytes, uint16_t sc[4]) {
    memcpy(sc, scales_bytes, 8);
    const uint16_t u = (uint16_t)((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    return KQ_H2F(u);
}

void kiln_dequantize_row_iq1_m(const void * vx, float * y, int64_t k) {
    const block_iq1_m * x = (const block_iq1_m *) vx;
    float delta[4];
    uint16_t idx[4], sc[4];
    for (int64_t i = 0; i < k / QK_K; i++) {
        const float d = iq1m_scale(x[i].scales, sc);
        const uint8_t * qs = x[i].qs;
        const uint8_t * qh = x[i].qh;
        for (int ib = 0; ib < QK_K / 32; ++ib) {
            const float dl1 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1);
            const float dl2 = d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1);
            idx[0] = (uint16_t)(qs[0] | ((qh[0] << 8) & 0x700));
            idx[1] = (uint16_t)(qs[1] | ((qh[0] << 4) & 0x700));
            idx[2] = (uint16_t)(qs[2] | ((qh[1] << 8) & 0x700));
            idx[3] = (uint16_t)(qs[3] | ((qh[1] << 4) & 0x700));
            delta[0] = qh[0] & 0x08 ? -KILN_IQ1M_DELTA : KILN_IQ1M_DELTA;
            delta[1] = qh[0] & 0x80 ? -KILN_IQ1M_DELTA : KILN_IQ1M_DELTA;
            delta[2] = qh[1] & 0x08 ? -KILN_IQ1M_DELTA : KILN_IQ1M_DELTA;
            delta[3] = qh[1] & 0x80 ? -KILN_IQ1M_DELTA : KILN_IQ1M_DELTA;
            for (int l = 0; l < 4; ++l) {
                const float dl = l < 2 ? dl1 : dl2;
                const int8_t * grid = (const int8_t *) (kiln_iq1s_grid + idx[l]);
                for (int j = 0; j < 8; ++j) y[j] = dl * (grid[j] + delta[l]);
                y += 8;
            }
            qs += 4;
            qh += 2;
        }
    }
}
