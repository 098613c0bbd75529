/*
 * repack_q4_K_x86.h — what the AVX2 and AVX-512 Q4_K x8 kernels share
 * (layout and orders: src/cpu/repack.h): the scale / min decoding of one
 * super-block, the min sums and the float steps. Include after
 * <immintrin.h>, in files compiled with at least -mavx2 -mfma -mf16c.
 */
#ifndef KILN_REPACK_Q4_K_X86_H
#define KILN_REPACK_Q4_K_X86_H

#include <string.h>

#include "../../repack.h"

/* one super-block of a group, decoded once for every activation row */
struct q4kx8_sb {
    uint64_t sc[8];  /* sub-block s: the 8 rows' 6-bit scales, byte r = row r */
    __m256i  mn[4];  /* sub-block pair p: i16 lanes (m[2p][r], m[2p+1][r]), 32-bit lane r = row r */
    __m256   d, dmin;/* the rows' fp32 super-block scales, row order */
};

static inline void q4kx8_decode(const block_q4_Kx8 * x, struct q4kx8_sb * o) {
    uint64_t mn[8];
    for (int s = 0; s < 8; s++) {
        uint32_t u0, u1, u2;
        memcpy(&u0, x->scales + 12 * s, 4);
        memcpy(&u1, x->scales + 12 * s + 4, 4);
        memcpy(&u2, x->scales + 12 * s + 8, 4);
        const uint32_t s03 = u0 & 0x3f3f3f3fu, m03 = u1 & 0x3f3f3f3fu;
        const uint32_t s47 = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
        const uint32_t m47 = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
        o->sc[s] = (uint64_t) s47 << 32 | s03;
        mn[s] = (uint64_t) m47 << 32 | m03;
    }
    for (int p = 0; p < 4; p++) {
        const __m128i e = _mm_cvtsi64_si128((long long) mn[2 * p]), od = _mm_cvtsi64_si128((long long) mn[2 * p + 1]);
        o->mn[p] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(e, od));
    }
    o->d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) x->d));
    o->dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) x->dmin));
}

/* Piece k (0..3) of sub-block pair p, for the 256-bit cores: the nibbles
 * of rows 0..3 (a) and 4..7 (b) against the 8 q8 values they meet, low
 * nibbles (sub-block 2p, *vl) and high (2p + 1, *vh), each 8 bytes
 * broadcast to the four 64-bit lanes (one row each). */
struct q4kx8_piece { __m256i lo_a, lo_b, hi_a, hi_b, vl, vh; };

static inline struct q4kx8_piece q4kx8_load_piece(const block_q4_Kx8 * xb, const block_q8_K * yb, int p, int k) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const uint8_t * q = xb->qs + 64 * (4 * p + k);
    const __m256i wa = _mm256_loadu_si256((const __m256i *) q), wb = _mm256_loadu_si256((const __m256i *) (q + 32));
    long long yl, yh;
    memcpy(&yl, yb->qs + 64 * p + 8 * k, 8);
    memcpy(&yh, yb->qs + 64 * p + 32 + 8 * k, 8);
    struct q4kx8_piece o;
    o.lo_a = _mm256_and_si256(wa, m4);
    o.lo_b = _mm256_and_si256(wb, m4);
    o.hi_a = _mm256_and_si256(_mm256_srli_epi16(wa, 4), m4);
    o.hi_b = _mm256_and_si256(_mm256_srli_epi16(wb, 4), m4);
    o.vl = _mm256_set1_epi64x(yl);
    o.vh = _mm256_set1_epi64x(yh);
    return o;
}

/* the min sums M_p (pair p of sub-blocks) of the 8 rows against one q8_K block */
static inline void q4kx8_mins(const struct q4kx8_sb * sb, const block_q8_K * y, __m256i mp[4]) {
    /* the 8 sub-blocks' sums of q8 values (|sum| <= 32 * 127: i16) */
    const __m128i bs = _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y->bsums), _mm_loadu_si128((const __m128i *) (y->bsums + 8)));
    mp[0] = _mm256_madd_epi16(sb->mn[0], _mm256_set1_epi32(_mm_extract_epi32(bs, 0)));
    mp[1] = _mm256_madd_epi16(sb->mn[1], _mm256_set1_epi32(_mm_extract_epi32(bs, 1)));
    mp[2] = _mm256_madd_epi16(sb->mn[2], _mm256_set1_epi32(_mm_extract_epi32(bs, 2)));
    mp[3] = _mm256_madd_epi16(sb->mn[3], _mm256_set1_epi32(_mm_extract_epi32(bs, 3)));
}

/* The float steps, lane r = row r (ip: the integer sums, row order).
 * Mat-vec: one fma per super-block; batched: one per sub-block pair. */
static inline void q4kx8_step_vec(const struct q4kx8_sb * sb, float dy, const __m256i ip[4], const __m256i mp[4],
                                  __m256 * acc, __m256 * accm) {
    const __m256 vy = _mm256_set1_ps(dy);
    const __m256i i = _mm256_add_epi32(_mm256_add_epi32(ip[0], ip[1]), _mm256_add_epi32(ip[2], ip[3]));
    const __m256i m = _mm256_add_epi32(_mm256_add_epi32(mp[0], mp[1]), _mm256_add_epi32(mp[2], mp[3]));
    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i), _mm256_mul_ps(sb->d, vy), *acc);
    *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(sb->dmin, vy), *accm);
}

static inline void q4kx8_step_pairs(const struct q4kx8_sb * sb, float dy, const __m256i ip[4], const __m256i mp[4],
                                    __m256 * acc, __m256 * accm) {
    const __m256 vy = _mm256_set1_ps(dy);
    const __m256 dd = _mm256_mul_ps(sb->d, vy), dm = _mm256_mul_ps(sb->dmin, vy);
    for (int p = 0; p < 4; p++) {
        *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ip[p]), dd, *acc);
        *accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mp[p]), dm, *accm);
    }
}

/* The kernels around a per-column integer core
 * CORE(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * yb, __m256i ip[4]):
 * the mat-vec kernel, and the batched one (the group's super-block decoded
 * once for up to 4 activation rows at a time). */
#define KILN_Q4_KX8_KERNELS(CORE, S) KILN_Q4_KX8_VEC(CORE, S) KILN_Q4_KX8_GEMM(CORE, S)
#define KILN_Q4_KX8_VEC(CORE, S) \
void q4_Kx8_q8_K_vec_dot__##S(int64_t n, float * s, const void * vx, const void * vy) { \
    const block_q4_Kx8 * x = vx; \
    const block_q8_K * y = vy; \
    __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps(); \
    for (int64_t b = 0; b < n / QK_K; b++) { \
        struct q4kx8_sb sb; \
        __m256i ip[4], mp[4]; \
        q4kx8_decode(&x[b], &sb); \
        CORE(&x[b], &sb, &y[b], ip); \
        q4kx8_mins(&sb, &y[b], mp); \
        q4kx8_step_vec(&sb, y[b].d, ip, mp, &acc, &accm); \
    } \
    _mm256_storeu_ps(s, _mm256_sub_ps(acc, accm)); \
}
#define KILN_Q4_KX8_GEMM(CORE, S) \
void q4_Kx8_q8_K_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) { \
    const block_q4_Kx8 * x = vx; \
    for (int c0 = 0; c0 < ncols; c0 += 4) { \
        const int nc = ncols - c0 < 4 ? ncols - c0 : 4; \
        __m256 acc[4], accm[4]; \
        for (int c = 0; c < 4; c++) acc[c] = accm[c] = _mm256_setzero_ps(); \
        for (int64_t b = 0; b < n / QK_K; b++) { \
            struct q4kx8_sb sb; \
            q4kx8_decode(&x[b], &sb); \
            for (int c = 0; c < nc; c++) { \
                const block_q8_K * yb = (const block_q8_K *) ((const char *) vy + (size_t) (c0 + c) * ys) + b; \
                __m256i ip[4], mp[4]; \
                CORE(&x[b], &sb, yb, ip); \
                q4kx8_mins(&sb, yb, mp); \
                q4kx8_step_pairs(&sb, yb->d, ip, mp, &acc[c], &accm[c]); \
            } \
        } \
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(s + (size_t) (c0 + c) * ss, _mm256_sub_ps(acc[c], accm[c])); \
    } \
}

#endif
