/*
 * features.c — runtime CPU feature detection. Natively: cpuid on x86,
 * hwcaps on arm64. In wasm the features are fixed by the build flags.
 */
#include "../core/internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
static int x86_bit(int leaf, int subleaf, int reg, int bit) {
    unsigned a, b, c, d;
    if (!__get_cpuid_count((unsigned) leaf, (unsigned) subleaf, &a, &b, &c, &d)) return 0;
    const unsigned r[4] = { a, b, c, d };
    return (int)((r[reg] >> bit) & 1);
}
/* the OS must save the YMM state for AVX to be usable */
static int x86_os_avx(void) {
    if (!x86_bit(1, 0, 2, 27)) return 0; /* OSXSAVE */
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}
/* KILN_CPU_CAP=avx2 hides AVX-512 and AVX-VNNI, so that an AVX-512 machine
 * runs (and tests) exactly what an AVX2-only machine would: the kernel
 * table's avx2 row as the default, and every AVX-512/VNNI test prints
 * NOT TESTED. Read once; any other value is ignored. */
static int x86_capped_at_avx2(void) {
    static int cap = -1;
    if (cap < 0) {
        const char * e = getenv("KILN_CPU_CAP");
        cap = (e && strcmp(e, "avx2") == 0) ? 1 : 0;
    }
    return cap;
}
int kiln_cpu_has_sse3(void)   { return x86_bit(1, 0, 2, 0); }
int kiln_cpu_has_ssse3(void)  { return x86_bit(1, 0, 2, 9); }
int kiln_cpu_has_avx(void)    { return x86_bit(1, 0, 2, 28) && x86_os_avx(); }
int kiln_cpu_has_avx2(void)   { return kiln_cpu_has_avx() && x86_bit(7, 0, 1, 5); }
int kiln_cpu_has_f16c(void)   { return kiln_cpu_has_avx() && x86_bit(1, 0, 2, 29); }
int kiln_cpu_has_fma(void)    { return kiln_cpu_has_avx() && x86_bit(1, 0, 2, 12); }
int kiln_cpu_has_avx512(void) {
    if (x86_capped_at_avx2() || !kiln_cpu_has_avx() || !x86_bit(7, 0, 1, 16)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6) == 0xe6;
}
int kiln_cpu_has_avx512_vnni(void) {
    return kiln_cpu_has_avx512() && x86_bit(7, 0, 1, 30) /* BW */ && x86_bit(7, 0, 1, 31) /* VL */ &&
           x86_bit(7, 0, 2, 11) /* AVX512_VNNI */ && kiln_cpu_has_avx2() && kiln_cpu_has_fma() && kiln_cpu_has_f16c();
}
int kiln_cpu_has_avxvnni(void) {
    return !x86_capped_at_avx2() && x86_bit(7, 1, 0, 4) /* AVX-VNNI: leaf 7 subleaf 1 EAX bit 4 */ && kiln_cpu_has_avx2() && kiln_cpu_has_fma() &&
           kiln_cpu_has_f16c();
}
#else
int kiln_cpu_has_sse3(void)   { return 0; }
int kiln_cpu_has_ssse3(void)  { return 0; }
int kiln_cpu_has_avx(void)    { return 0; }
int kiln_cpu_has_avx2(void)   { return 0; }
int kiln_cpu_has_f16c(void)   { return 0; }
int kiln_cpu_has_fma(void)    { return 0; }
int kiln_cpu_has_avx512(void) { return 0; }
int kiln_cpu_has_avx512_vnni(void) { return 0; }
int kiln_cpu_has_avxvnni(void) { return 0; }
#endif

#if defined(__aarch64__)
#if defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
int kiln_cpu_has_dotprod(void) { return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0; }
int kiln_cpu_has_fp16_va(void) { return (getauxval(AT_HWCAP) & HWCAP_FPHP) != 0; }
int kiln_cpu_has_i8mm(void)    { return (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0; }
#ifndef HWCAP_ASIMDHP
#define HWCAP_ASIMDHP (1 << 10)
#endif
#ifndef HWCAP_SVE
#define HWCAP_SVE (1 << 22)
#endif
int kiln_cpu_arm_f16_arith(void) {
    const unsigned long h = getauxval(AT_HWCAP);
    return (h & HWCAP_ASIMDDP) && (h & HWCAP_FPHP) && (h & HWCAP_ASIMDHP) && !(h & HWCAP_SVE);
}
#else
int kiln_cpu_arm_f16_arith(void) { return 0; }
int kiln_cpu_has_dotprod(void) { return 0; }
int kiln_cpu_has_fp16_va(void) { return 0; }
int kiln_cpu_has_i8mm(void)    { return 0; }
#endif
int kiln_cpu_has_neon(void)    { return 1; }
int kiln_cpu_has_arm_fma(void) { return 1; }
#else
int kiln_cpu_has_neon(void)    { return 0; }
int kiln_cpu_has_arm_fma(void) { return 0; }
int kiln_cpu_has_dotprod(void) { return 0; }
int kiln_cpu_has_fp16_va(void) { return 0; }
int kiln_cpu_has_i8mm(void)    { return 0; }
#endif

int kiln_cpu_has_wasm_simd(void) {
#if defined(__wasm_simd128__)
    return 1;
#else
    return 0;
#endif
}
int kiln_cpu_has_wasm_relaxed_simd(void) {
#if defined(__wasm_relaxed_simd__)
    return 1;
#else
    return 0;
#endif
}
