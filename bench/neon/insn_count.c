/*
 * insn_count.c — calls one arm64 quant kernel once (argv: name, n values,
 * activation rows for the batched kernels), for insn-count.sh, which counts
 * the instructions it executes under qemu. The data is constant bytes: the
 * kernels have no data-dependent branches, so the count depends on n and
 * the rows alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*dot_fn)(int64_t, float *, const void *, const void *);
typedef void (*gemm_fn)(int64_t, int, float *, size_t, const void *, const void *, size_t);

#define DOTS(X) \
    X(q4_0_q8_0_vec_dot__neon) X(q4_0_q8_0_vec_dot__neon_dotprod) X(q8_0_q8_0_vec_dot__neon) X(q8_0_q8_0_vec_dot__neon_dotprod) \
    X(iq4_nl_q8_0_vec_dot__neon) X(iq4_nl_q8_0_vec_dot__neon_dotprod) X(q4_K_q8_K_vec_dot__neon) X(q4_K_q8_K_vec_dot__neon_dotprod) \
    X(q4_0x4_q8_0_vec_dot__neon) X(q4_0x4_q8_0_vec_dot__neon_dotprod) X(q8_0x4_q8_0_vec_dot__neon_dotprod) \
    X(iq4_nlx4_q8_0_vec_dot__neon) X(iq4_nlx4_q8_0_vec_dot__neon_dotprod) X(q4_Kx8_q8_K_vec_dot__neon) X(q4_Kx8_q8_K_vec_dot__neon_dotprod) \
    X(q5_K_q8_K_vec_dot__neon_dotprod) X(q6_K_q8_K_vec_dot__neon_dotprod) X(q5_Kx8_q8_K_vec_dot__neon_dotprod) X(q6_Kx8_q8_K_vec_dot__neon_dotprod)
#define GEMMS(X) \
    X(q4_0x4_q8_0_gemm__neon) X(q4_0x4_q8_0_gemm__neon_dotprod) X(q4_0x4_q8_0_gemm__neon_i8mm) \
    X(q8_0x4_q8_0_gemm__neon_dotprod) \
    X(iq4_nlx4_q8_0_gemm__neon) X(iq4_nlx4_q8_0_gemm__neon_dotprod) X(iq4_nlx4_q8_0_gemm__neon_i8mm) \
    X(q4_Kx8_q8_K_gemm__neon) X(q4_Kx8_q8_K_gemm__neon_dotprod) X(q5_Kx8_q8_K_gemm__neon_dotprod) X(q6_Kx8_q8_K_gemm__neon_dotprod)

#define DECL_DOT(f) void f(int64_t, float *, const void *, const void *);
#define DECL_GEMM(f) void f(int64_t, int, float *, size_t, const void *, const void *, size_t);
DOTS(DECL_DOT)
GEMMS(DECL_GEMM)

#define ROW_DOT(f) { #f, (void (*)(void)) f, 0 },
#define ROW_GEMM(f) { #f, (void (*)(void)) f, 1 },
static const struct { const char * name; void (*fn)(void); int gemm; } kernels[] = { DOTS(ROW_DOT) GEMMS(ROW_GEMM) };

int main(int argc, char ** argv) {
    if (argc < 3) { fprintf(stderr, "usage: insn_count KERNEL N [NCOLS]\n"); return 2; }
    const int64_t n = atoll(argv[2]);
    const int ncols = argc > 3 ? atoi(argv[3]) : 1;
    const size_t ys = 8192, bytes = (size_t) 16 * ys;
    if (n <= 0 || n > 2048 || ncols < 1 || ncols > 8) { fprintf(stderr, "insn_count: n in 1..2048, ncols in 1..8\n"); return 2; }
    uint8_t * x = malloc(bytes), * y = malloc(bytes);
    float s[8 * 16];
    if (!x || !y) return 1;
    memset(x, 0x11, bytes);
    memset(y, 0x22, bytes);
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++) {
        if (strcmp(kernels[i].name, argv[1]) != 0) continue;
        if (kernels[i].gemm) ((gemm_fn) kernels[i].fn)(n, ncols, s, 16, x, y, ys);
        else ((dot_fn) kernels[i].fn)(n, s, x, y);
        printf("%g\n", (double) s[0]);
        return 0;
    }
    fprintf(stderr, "insn_count: unknown kernel %s\n", argv[1]);
    return 2;
}
