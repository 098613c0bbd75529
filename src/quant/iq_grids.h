/* iq_grids.h — i-quant codebooks and sign tables (see iq_grids.c). */
#ifndef KILN_IQ_GRIDS_H
#define KILN_IQ_GRIDS_H

#include <stdint.h>

extern const uint64_t kiln_iq2xxs_grid[256];
extern const uint64_t kiln_iq2xs_grid[512];
extern const uint64_t kiln_iq2s_grid[1024];
extern const uint64_t kiln_iq1s_grid[2048];
extern const uint32_t kiln_iq3xxs_grid[256];
extern const uint32_t kiln_iq3s_grid[512];
extern const uint8_t  kiln_ksigns_iq2xs[128];

#define KILN_IQ1S_DELTA 0.125f
#define KILN_IQ1M_DELTA 0.125f

#endif
