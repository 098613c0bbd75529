/*
 * repack_q4_K_x86.h — what the AVX2, AVX-VNNI and AVX-512 Q4_K x8 kernels share
 * (layout and orders: src/cpu/repack.h): the scale / min decoding of one
 * super-block, the min sums, the float steps and the batched driver. Include after
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

/* The mat-vec kernel around a per-column integer core
 * CORE(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, const block_q8_K * yb, __m256i ip[4]). */
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
/* ---- batched, one x8 group against many activation rows ----------------
 * Per super-block, the group's nibbles are regrouped once for every
 * activation row of the call: w[s][j] holds bytes 4j..4j+3 of sub-block s
 * (low nibbles of the pair's bytes for even s, high for odd) of the 8
 * rows, one row per 32-bit lane in the order rows 0 1 4 5 2 3 6 7 (a
 * pshufd and a qword unpack per 8-byte piece); scv[s] / sc32[s] the rows'
 * 6-bit scales in the same lanes as i16 pairs / i32. A per-ISA core
 * SUB(w, s, N, yb, off, out) gives, for N activation rows, each lane's
 * sc_s * dot_s (exact i32); the two sub-blocks of a pair are added: the
 * integers of the x8 cores, in that lane order. Mins and float steps are
 * those of q4kx8_mins / q4kx8_step_pairs, per lane in the same lane order
 * (q4kx8_sb_lanes below) and in super-block order, the results put back in
 * row order at the end, so every output is bit-identical to the batched
 * order of repack.h (and to llama.cpp's AVX2 gemm). */
struct q4kx8_prep { __m256i w[8][8]; __m256i scv[8]; __m256i sc32[8]; };

static inline __m256i q4kx8_bcast4(const int8_t * p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

static inline void q4kx8_prep_wide(const block_q4_Kx8 * xb, const struct q4kx8_sb * sb, struct q4kx8_prep * o) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), lanes = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    for (int p = 0; p < 4; p++) {
        for (int k = 0; k < 4; k++) {
            const uint8_t * q = xb->qs + 64 * (4 * p + k);
            /* qwords: rows 0 1 | 2 3 and 4 5 | 6 7; pshufd puts dword 0 of both rows of a lane first */
            const __m256i wa = _mm256_shuffle_epi32(_mm256_loadu_si256((const __m256i *) q), 0xd8);
            const __m256i wb = _mm256_shuffle_epi32(_mm256_loadu_si256((const __m256i *) (q + 32)), 0xd8);
            const __m256i d0 = _mm256_unpacklo_epi64(wa, wb), d1 = _mm256_unpackhi_epi64(wa, wb);
            o->w[2 * p][2 * k] = _mm256_and_si256(d0, m4);
            o->w[2 * p][2 * k + 1] = _mm256_and_si256(d1, m4);
            o->w[2 * p + 1][2 * k] = _mm256_and_si256(_mm256_srli_epi16(d0, 4), m4);
            o->w[2 * p + 1][2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(d1, 4), m4);
        }
    }
    for (int s = 0; s < 8; s++) {
        const __m256i v = _mm256_permutevar8x32_epi32(_mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long) sb->sc[s])), lanes);
        o->sc32[s] = v;
        o->scv[s] = _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
    }
}

/* The batched float steps run in the cores' lane order (rows 0 1 4 5 2 3
 * 6 7): the super-block's d, dmin and min pairs are put in that order once
 * (q4kx8_sb_lanes), every step is per lane as in row order, and the
 * results go back to row order once per column chunk. The min sums take
 * the activation's 4 pair sums by broadcast loads. */
static inline void q4kx8_sb_lanes(struct q4kx8_sb * sb) {
    const __m256i lanes = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
    sb->d = _mm256_permutevar8x32_ps(sb->d, lanes);
    sb->dmin = _mm256_permutevar8x32_ps(sb->dmin, lanes);
    for (int p = 0; p < 4; p++) sb->mn[p] = _mm256_permutevar8x32_epi32(sb->mn[p], lanes);
}

static inline void q4kx8_mins_bc(const struct q4kx8_sb * sb, const block_q8_K * y, __m256i mp[4]) {
    int32_t bs[4];
    _mm_storeu_si128((__m128i *) bs, _mm_hadd_epi16(_mm_loadu_si128((const __m128i *) y->bsums), _mm_loadu_si128((const __m128i *) (y->bsums + 8))));
    for (int p = 0; p < 4; p++) mp[p] = _mm256_madd_epi16(sb->mn[p], _mm256_set1_epi32(bs[p]));
}

#define Q4KX8_WIDE_NC 32 /* activation rows per column chunk (accumulators on the stack; with 32 a
                          * super-block of them stays in L1 next to the prepared group) */
#define KILN_Q4_KX8_GEMM_WIDE(SUB, S) \
static inline __attribute__((always_inline)) void q4kx8_isums_##S(const struct q4kx8_prep * w, const int N, \
                                                                  const block_q8_K * const * yb, __m256i ip[][4]) { \
    for (int p = 0; p < 4; p++) { \
        __m256i lo[2], hi[2]; \
        SUB(w, 2 * p, N, yb, 64 * p, lo); \
        SUB(w, 2 * p + 1, N, yb, 64 * p + 32, hi); \
        for (int c = 0; c < N; c++) ip[c][p] = _mm256_add_epi32(lo[c], hi[c]); \
    } \
} \
void q4_Kx8_q8_K_gemm__##S(int64_t n, int ncols, float * s, size_t ss, const void * vx, const void * vy, size_t ys) { \
    const block_q4_Kx8 * x = vx; \
    struct q4kx8_prep w; \
    __m256 acc[Q4KX8_WIDE_NC], accm[Q4KX8_WIDE_NC]; \
    for (int c0 = 0; c0 < ncols; c0 += Q4KX8_WIDE_NC) { \
        const int nc = ncols - c0 < Q4KX8_WIDE_NC ? ncols - c0 : Q4KX8_WIDE_NC; \
        for (int c = 0; c < nc; c++) acc[c] = accm[c] = _mm256_setzero_ps(); \
        for (int64_t b = 0; b < n / QK_K; b++) { \
            struct q4kx8_sb sb; \
            q4kx8_decode(&x[b], &sb); \
            q4kx8_prep_wide(&x[b], &sb, &w); \
            q4kx8_sb_lanes(&sb); \
            for (int c = 0; c < nc; c += 2) { \
                const int N = nc - c >= 2 ? 2 : 1; \
                const block_q8_K * yb[2]; \
                for (int e = 0; e < N; e++) yb[e] = (const block_q8_K *) ((const char *) vy + (size_t) (c0 + c + e) * ys) + b; \
                __m256i ip[2][4]; \
                if (N == 2) q4kx8_isums_##S(&w, 2, yb, ip); else q4kx8_isums_##S(&w, 1, yb, ip); \
                for (int e = 0; e < N; e++) { \
                    __m256i mp[4]; \
                    q4kx8_mins_bc(&sb, yb[e], mp); \
                    q4kx8_step_pairs(&sb, yb[e]->d, ip[e], mp, &acc[c + e], &accm[c + e]); \
                } \
            } \
        } \
        for (int c = 0; c < nc; c++) { \
            const __m256i rows = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7); \
            _mm256_storeu_ps(s + (size_t) (c0 + c) * ss, _mm256_permutevar8x32_ps(_mm256_sub_ps(acc[c], accm[c]), rows)); \
        } \
    } \
}

#endif
