/*
 * cpu-pair.c — how much of a second core the machine gives right now: 10
 * independent AVX2 FMA chains for a fixed count, GFMA/s printed. Run one
 * copy, then two at once; two copies at half speed each mean the second
 * vCPU brought no compute (on the shared 2-vCPU VMs this ranged from 9.3 to
 * 20 GFMA/s each against 18.8 alone). Compare thread scaling only against
 * such a reading taken at the same time.
 *   gcc -O2 -mavx2 -mfma -o /tmp/cpu-pair bench/peers/cpu-pair.c
 *   /tmp/cpu-pair; (/tmp/cpu-pair & /tmp/cpu-pair; wait)
 */
#include <immintrin.h>
#include <stdio.h>
#include <time.h>
int main(void) {
    __m256 a[10]; for (int i = 0; i < 10; i++) a[i] = _mm256_set1_ps(1.0f + i * 1e-7f);
    const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long it = 0; it < 200000000; it++) {
        for (int i = 0; i < 10; i++) a[i] = _mm256_fmadd_ps(a[i], m, c);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    float s = 0; for (int i = 0; i < 10; i++) s += a[i][0];
    double dt = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    printf("%.2f GFMA/s (%g)\n", 200000000.0 * 10 * 8 / dt / 1e9, s);
    return 0;
}
