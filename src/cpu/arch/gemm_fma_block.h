/*
 * gemm_fma_block.h — one register block of kernels.h's f32_gemm_fma for any
 * vector ISA: C rows i..i+R-1, columns j..j+V*W-1 += A[rows] B, the R x V
 * sums held in registers across k, every C value one chain of
 * MADD(a, b, c) = a * b + c in k order from its value in C (the ISA's
 * f32_axpy step: fused or not as that is), so the blocking never changes a
 * bit. The includer passes its vector type VT, W floats per vector, and
 * LOAD(p), STORE(p, v), SPLAT(x), MADD(a, b, c); i, j, k, n, A, B and C
 * are the caller's.
 */
#ifndef KILN_GEMM_FMA_BLOCK_H
#define KILN_GEMM_FMA_BLOCK_H

#define KILN_GEMM_FMA_BLOCK(VT, W, LOAD, STORE, SPLAT, MADD, R, V)                                \
    do {                                                                                          \
        VT acc_[R][V];                                                                            \
        for (int r_ = 0; r_ < (R); r_++)                                                          \
            for (int c_ = 0; c_ < (V); c_++) acc_[r_][c_] = LOAD(C + (i + r_) * n + j + (W) * c_); \
        for (int q_ = 0; q_ < k; q_++) {                                                          \
            VT b_[V];                                                                             \
            for (int c_ = 0; c_ < (V); c_++) b_[c_] = LOAD(B + q_ * n + j + (W) * c_);            \
            for (int r_ = 0; r_ < (R); r_++) {                                                    \
                const VT a_ = SPLAT(A[(i + r_) * k + q_]);                                        \
                for (int c_ = 0; c_ < (V); c_++) acc_[r_][c_] = MADD(a_, b_[c_], acc_[r_][c_]);   \
            }                                                                                     \
        }                                                                                         \
        for (int r_ = 0; r_ < (R); r_++)                                                          \
            for (int c_ = 0; c_ < (V); c_++) STORE(C + (i + r_) * n + j + (W) * c_, acc_[r_][c_]); \
    } while (0)

#endif
