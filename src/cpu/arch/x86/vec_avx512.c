/*
 * vec_avx512.c — the avx512 row's f32 GEMM microkernel (kernels.h,
 * kiln_gemm_packed_t): 8 src1 rows x 16 packed src0 columns, one 512-bit
 * accumulator per row. Compiled with the avx512 row's flags.
 *
 * Exactness rule (the row's): bit-identical to f32_gemm_6x16__avx2 on the
 * same panel. Each output is the same chain acc = fma(a[p], bp[p], acc) for
 * p = 0..k-1 from zero, then stored or added to c, whatever the tile's row
 * count or vector width; the panel layout (16 columns, k-major) is AVX2's.
 */
#include <immintrin.h>

#include "../arch.h"

void f32_gemm_8x16__avx512(int64_t k, const float * a, int64_t lda, const float * bp, float * c, int64_t ldc, int accumulate) {
    __m512 acc[8];
    for (int j = 0; j < 8; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        const __m512 y = _mm512_loadu_ps(bp + 16 * p);
        for (int j = 0; j < 8; j++) acc[j] = _mm512_fmadd_ps(_mm512_set1_ps(a[j * lda + p]), y, acc[j]);
    }
    for (int j = 0; j < 8; j++) {
        float * cj = c + j * ldc;
        _mm512_storeu_ps(cj, accumulate ? _mm512_add_ps(_mm512_loadu_ps(cj), acc[j]) : acc[j]);
    }
}
