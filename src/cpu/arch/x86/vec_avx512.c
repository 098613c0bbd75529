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
#include "../gemm_fma_block.h"

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

/* C[m x n] += A[m x k] B[k x n], n % 8 == 0 (kernels.h f32_gemm_fma): as
 * f32_gemm_fma__avx2 on 512-bit registers, blocks of 4 rows x 64 columns,
 * then 4 x 16, then single rows; a last 8 columns on 256 bits. Each C value
 * is still one fmadd chain in k order from its value in C, so the bits are
 * AVX2's. */
#define GEMM_BLOCK512(R, V) KILN_GEMM_FMA_BLOCK(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, R, V)

static void gemm_fma_tail8(int i, int r_end, int j, int k, int n, float * C, const float * A, const float * B) {
    for (; i < r_end; i++) {
        __m256 acc = _mm256_loadu_ps(C + i * n + j);
        for (int q = 0; q < k; q++) acc = _mm256_fmadd_ps(_mm256_set1_ps(A[i * k + q]), _mm256_loadu_ps(B + q * n + j), acc);
        _mm256_storeu_ps(C + i * n + j, acc);
    }
}

void f32_gemm_fma__avx512(int m, int k, int n, float * C, const float * A, const float * B) {
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        int j = 0;
        for (; j + 64 <= n; j += 64) GEMM_BLOCK512(4, 4);
        for (; j + 16 <= n; j += 16) GEMM_BLOCK512(4, 1);
        if (j < n) gemm_fma_tail8(i, i + 4, j, k, n, C, A, B);
    }
    for (; i < m; i++) {
        int j = 0;
        for (; j + 64 <= n; j += 64) GEMM_BLOCK512(1, 4);
        for (; j + 16 <= n; j += 16) GEMM_BLOCK512(1, 1);
        if (j < n) gemm_fma_tail8(i, i + 1, j, k, n, C, A, B);
    }
}
#undef GEMM_BLOCK512
