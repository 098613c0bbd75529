/*
 * repack.c — kiln_repack_tensor(): Q4_0 / Q8_0 / IQ4_NL weights to the x4
 * layout and Q4_K / Q5_K / Q6_K weights to the x8 layouts of
 * src/cpu/repack.h (Q6_K in wasm builds: its x4 layout), in place, marked
 * by tensor->extra.
 */
#include "repack.h"
#include "../core/internal.h"
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__) && !defined(__EMSCRIPTEN__)
#include <sys/mman.h>
#include <unistd.h>
#endif

/* Weights usually live in a private mapping of the model file (gguf_read.c),
 * whose pages the rewrite below copies on first write: one fault and one
 * TLB flush across the CPUs per 4 KiB page once the reads have mapped them
 * (perf: memmove in page faults, most of a Q4_0 model's load time on a
 * loaded 2-core VM). Making the range writable before the first read is
 * one call (Linux 5.14+: MADV_POPULATE_WRITE); where it fails or does not
 * exist, the per-page faults remain, nothing else changes. */
static void prefault_writable(void * p, size_t n) {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE) && !defined(__EMSCRIPTEN__)
    const long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || n == 0) return;
    const uintptr_t a = (uintptr_t) p & ~((uintptr_t) pg - 1);
    const uintptr_t e = ((uintptr_t) p + n + (uintptr_t) pg - 1) & ~((uintptr_t) pg - 1);
    (void) madvise((void *) a, e - a, MADV_POPULATE_WRITE);
#else
    (void) p; (void) n;
#endif
}

/* The marker: extra points at one of these, so no allocation to free; one
 * per type and scale shift (see choose_shift). */
struct kiln_repack_tag { enum kiln_type type; int rows; int shift; };
#define TAG_TYPES 6
#define TAG(t, s) { t, is_x8(t) ? KILN_REPACK_ROWS_Q4_K : KILN_REPACK_ROWS, s }
#define TAGS(t) { TAG(t, 0), TAG(t, 1), TAG(t, 2), TAG(t, 3), TAG(t, 4), TAG(t, 5), TAG(t, 6), TAG(t, 7), \
                  TAG(t, 8), TAG(t, 9), TAG(t, 10) }
/* the K-quants: 8 rows per group (x8; Q6_K in wasm builds: 4, x4), shift 0
 * only (their kernels convert every fp16 scale exactly) */
#define is_x8(t) ((t) == KILN_TYPE_Q4_K || (t) == KILN_TYPE_Q5_K || ((t) == KILN_TYPE_Q6_K && KILN_REPACK_ROWS_Q6_K == 8))
static const struct kiln_repack_tag tags[TAG_TYPES][KILN_REPACK_MAX_SHIFT + 1] = {
    TAGS(KILN_TYPE_Q4_0), TAGS(KILN_TYPE_Q8_0), TAGS(KILN_TYPE_IQ4_NL), TAGS(KILN_TYPE_Q4_K),
    TAGS(KILN_TYPE_Q5_K), TAGS(KILN_TYPE_Q6_K),
};
#undef TAGS
#undef TAG

static int type_index(enum kiln_type type) {
    switch (type) {
        case KILN_TYPE_Q4_0:   return 0;
        case KILN_TYPE_Q8_0:   return 1;
        case KILN_TYPE_IQ4_NL: return 2;
        case KILN_TYPE_Q4_K:   return 3;
        case KILN_TYPE_Q5_K:   return 4;
        case KILN_TYPE_Q6_K:   return 5;
        default:               return -1;
    }
}

static const struct kiln_repack_tag * tag_of(const struct kiln_tensor * t) {
    if (!t || !t->extra) return NULL;
    const struct kiln_repack_tag * g = (const struct kiln_repack_tag *) t->extra;
    /* extra may belong to another backend: only pointers into the table count */
    const uintptr_t p = (uintptr_t) t->extra, lo = (uintptr_t) &tags[0][0], hi = (uintptr_t) &tags[TAG_TYPES - 1][KILN_REPACK_MAX_SHIFT];
    return p >= lo && p <= hi && (p - lo) % sizeof(tags[0][0]) == 0 ? g : NULL;
}

int kiln_repacked_rows(const struct kiln_tensor * t) {
    const struct kiln_repack_tag * g = tag_of(t);
    return g ? g->rows : 0;
}

int kiln_repack_scale_shift(const struct kiln_tensor * t) {
    const struct kiln_repack_tag * g = tag_of(t);
    return g ? g->shift : 0;
}

bool kiln_tensor_is_repacked(const struct kiln_tensor * tensor) {
    return kiln_repacked_rows(tensor) > 0;
}

bool kiln_repack_has_kernel(enum kiln_type type) {
    if ((int) type < 0 || type >= KILN_TYPE_COUNT || type_index(type) < 0) return false;
    const struct kiln_kernels * k = kiln_kernels();
    return k && k->vec_dot_x4[type] != NULL;
}

bool kiln_repack_wanted(const struct kiln_tensor * t) {
    if (!t || !kiln_repack_has_kernel(t->type)) return false;
    const int m = kiln_kernels()->repack_rows[t->type];
    return m > 0 && t->ne[1] % m == 0;
}

/* bytes of one block's scale, and of its quants */
static void geometry(enum kiln_type type, size_t * qbytes) {
    *qbytes = type == KILN_TYPE_Q8_0 ? QK8_0 : QK4_0 / 2; /* q4_0, iq4_nl: 16 bytes of nibbles */
}

/* an fp16 scale times 2^shift (shift may be negative): exact for the
 * shifts choose_shift allows, which keep every value finite and non-zero */
static void scale_fp16(void * p, int shift) {
    if (shift == 0) return;
    kiln_fp16_t h;
    memcpy(&h, p, sizeof h);
    h = kiln_fp32_to_fp16(ldexpf(kiln_fp16_to_fp32(h), shift));
    memcpy(p, &h, sizeof h);
}

static void pack_group(enum kiln_type type, int shift, const char * rows, size_t row_size, int64_t nb, char * out) {
    size_t qb;
    geometry(type, &qb);
    const size_t bs = sizeof(kiln_fp16_t) + qb; /* plain block */
    for (int64_t b = 0; b < nb; b++) {
        char * xb = out + (size_t) b * 4 * bs;
        for (int r = 0; r < 4; r++) {
            const char * src = rows + (size_t) r * row_size + (size_t) b * bs;
            memcpy(xb + r * sizeof(kiln_fp16_t), src, sizeof(kiln_fp16_t));
            scale_fp16(xb + r * sizeof(kiln_fp16_t), shift);
            memcpy(xb + 4 * sizeof(kiln_fp16_t) + r * qb, src + sizeof(kiln_fp16_t), qb);
        }
    }
}

/* The block scales of the grouped rows, raised by 2^shift so that none is
 * an fp16 subnormal, where the largest leaves room (exponent <= 30 after).
 * Why: wasm has no fp16 conversion, and the kernels' short one (a subnormal
 * would be a float subnormal operand: a microcode assist per block on x86)
 * sends such blocks down an exact, slower path — every attn_output /
 * ffn_down block of a Q8_0 model whose weights are below ~0.008. Every x4
 * kernel computes sums of integer x (dx * dy) terms, each product and sum
 * rounded once in f32; scaling dx by a power of two scales all of them
 * exactly (the values stay far inside f32's normal range: products
 * >= 2^-48, block terms < 2^51, sums < 2^81 for rows under 2^35 values),
 * so mul_mat multiplies the 4 results by 2^-shift and gets the unshifted
 * kernel's bits. inf / nan scales: no shift. */
static int choose_shift(enum kiln_type type, const char * data, size_t row_size, int64_t nrows_grouped, int64_t nmat,
                        size_t mat_stride, int64_t nb) {
    size_t qb;
    geometry(type, &qb);
    const size_t bs = sizeof(kiln_fp16_t) + qb;
    unsigned min_sub = 0x400, max_mag = 0;
    for (int64_t m = 0; m < nmat; m++) {
        for (int64_t r = 0; r < nrows_grouped; r++) {
            const char * row = data + (size_t) m * mat_stride + (size_t) r * row_size;
            for (int64_t b = 0; b < nb; b++) {
                kiln_fp16_t h;
                memcpy(&h, row + (size_t) b * bs, sizeof h);
                const unsigned mag = h & 0x7fffu;
                if (mag >= 0x7c00u) return 0;
                if (mag > max_mag) max_mag = mag;
                if (mag != 0 && mag < min_sub) min_sub = mag;
            }
        }
    }
    if (min_sub >= 0x400) return 0;
    int need = 0;
    while ((min_sub << need) < 0x400u) need++;
    const int room = 30 - (int) (max_mag >> 10);
    return KILN_MAX(0, KILN_MIN(need, room));
}

/* the 12-byte plain scales / mins of 8 rows (one super-block each) -> the
 * x8 layout's 8 groups of 12 bytes (repack.h), shared by Q4_K and Q5_K */
static void pack_scales_x8(const uint8_t * const q[8], uint8_t out[96]) {
    uint8_t sc[8][8], mn[8][8]; /* [sub-block][row] */
    for (int r = 0; r < 8; r++) {
        for (int j = 0; j < 4; j++) {
            sc[j][r] = q[r][j] & 63;
            mn[j][r] = q[r][j + 4] & 63;
            sc[j + 4][r] = (uint8_t) ((q[r][j + 8] & 15) | ((q[r][j] >> 6) << 4));
            mn[j + 4][r] = (uint8_t) ((q[r][j + 8] >> 4) | ((q[r][j + 4] >> 6) << 4));
        }
    }
    for (int s = 0; s < 8; s++) {
        uint8_t * g = out + 12 * s;
        for (int j = 0; j < 4; j++) {
            g[j] = (uint8_t) ((sc[s][j] & 63) | ((sc[s][j + 4] >> 4) << 6));
            g[4 + j] = (uint8_t) ((mn[s][j] & 63) | ((mn[s][j + 4] >> 4) << 6));
            g[8 + j] = (uint8_t) ((sc[s][j + 4] & 15) | ((mn[s][j + 4] & 15) << 4));
        }
    }
}

/* row r's plain 12 bytes back from the x8 groups */
static void unpack_scales_x8(const uint8_t in[96], int r, uint8_t out[12]) {
    uint8_t sc[8], mn[8];
    for (int s = 0; s < 8; s++) {
        const uint8_t * g = in + 12 * s;
        const int j = r % 4;
        sc[s] = r < 4 ? g[j] & 63 : (uint8_t) ((g[8 + j] & 15) | ((g[j] >> 6) << 4));
        mn[s] = r < 4 ? g[4 + j] & 63 : (uint8_t) ((g[8 + j] >> 4) | ((g[4 + j] >> 6) << 4));
    }
    /* the plain 12-byte packing (quants_impl.h kq_get_scale_min_k4) */
    for (int j = 0; j < 4; j++) {
        out[j] = (uint8_t) (sc[j] | ((sc[j + 4] >> 4) << 6));
        out[j + 4] = (uint8_t) (mn[j] | ((mn[j + 4] >> 4) << 6));
        out[j + 8] = (uint8_t) ((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
}

/* The x8 layouts interleave the rows' bytes in pieces: piece k of row r of
 * an 8-row group sits at (8 k + r) * size. x8_put stores n pieces of one
 * plain row there, x8_get reads them back. */
static void x8_put(uint8_t * dst, int r, const uint8_t * src, int n, size_t size) {
    for (int k = 0; k < n; k++) memcpy(dst + (size_t) (8 * k + r) * size, src + size * (size_t) k, size);
}

static void x8_get(uint8_t * dst, const uint8_t * src, int r, int n, size_t size) {
    for (int k = 0; k < n; k++) memcpy(dst + size * (size_t) k, src + (size_t) (8 * k + r) * size, size);
}

/* 8 plain Q4_K rows -> x8 super-blocks (repack.h) */
static void pack_group_q4_K(const char * rows, size_t row_size, int64_t nb, block_q4_Kx8 * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q4_Kx8 * o = &out[b];
        const uint8_t * q[8];
        for (int r = 0; r < 8; r++) {
            const block_q4_K * in = (const block_q4_K *) (rows + (size_t) r * row_size) + b;
            o->d[r] = in->d;
            o->dmin[r] = in->dmin;
            x8_put(o->qs, r, in->qs, 16, 8);
            q[r] = in->scales;
        }
        pack_scales_x8(q, o->scales);
    }
}

static void unpack_row_q4_K(const block_q4_Kx8 * x, int r, int64_t nb, block_q4_K * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q4_K * o = &out[b];
        o->d = x[b].d[r];
        o->dmin = x[b].dmin[r];
        x8_get(o->qs, x[b].qs, r, 16, 8);
        unpack_scales_x8(x[b].scales, r, o->scales);
    }
}

/* 8 plain Q5_K rows -> x8 super-blocks: 4-byte pieces of qs and qh (repack.h) */
static void pack_group_q5_K(const char * rows, size_t row_size, int64_t nb, block_q5_Kx8 * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q5_Kx8 * o = &out[b];
        const uint8_t * q[8];
        for (int r = 0; r < 8; r++) {
            const block_q5_K * in = (const block_q5_K *) (rows + (size_t) r * row_size) + b;
            o->d[r] = in->d;
            o->dmin[r] = in->dmin;
            x8_put(o->qs, r, in->qs, 32, 4);
            x8_put(o->qh, r, in->qh, 8, 4);
            q[r] = in->scales;
        }
        pack_scales_x8(q, o->scales);
    }
}

static void unpack_row_q5_K(const block_q5_Kx8 * x, int r, int64_t nb, block_q5_K * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q5_K * o = &out[b];
        o->d = x[b].d[r];
        o->dmin = x[b].dmin[r];
        x8_get(o->qs, x[b].qs, r, 32, 4);
        x8_get(o->qh, x[b].qh, r, 8, 4);
        unpack_scales_x8(x[b].scales, r, o->scales);
    }
}

/* 8 plain Q6_K rows -> x8 super-blocks: 4-byte pieces of ql and qh, the
 * 16 scales row after row per sub-block (repack.h) */
static void pack_group_q6_K(const char * rows, size_t row_size, int64_t nb, block_q6_Kx8 * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q6_Kx8 * o = &out[b];
        for (int r = 0; r < 8; r++) {
            const block_q6_K * in = (const block_q6_K *) (rows + (size_t) r * row_size) + b;
            o->d[r] = in->d;
            for (int j = 0; j < 16; j++) o->scales[8 * j + r] = in->scales[j];
            x8_put(o->ql, r, in->ql, 32, 4);
            x8_put(o->qh, r, in->qh, 16, 4);
        }
    }
}

#if KILN_REPACK_ROWS_Q6_K == 8
static void unpack_row_q6_K(const block_q6_Kx8 * x, int r, int64_t nb, block_q6_K * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q6_K * o = &out[b];
        o->d = x[b].d[r];
        for (int j = 0; j < 16; j++) o->scales[j] = x[b].scales[8 * j + r];
        x8_get(o->ql, x[b].ql, r, 32, 4);
        x8_get(o->qh, x[b].qh, r, 16, 4);
    }
}
#endif

/* 8 plain rows of a K-quant -> its x8 super-blocks */
static void pack_group_x8(enum kiln_type type, const char * rows, size_t row_size, int64_t nb, void * out) {
    if (type == KILN_TYPE_Q4_K) pack_group_q4_K(rows, row_size, nb, out);
    else if (type == KILN_TYPE_Q5_K) pack_group_q5_K(rows, row_size, nb, out);
    else pack_group_q6_K(rows, row_size, nb, out);
}

#if KILN_REPACK_ROWS_Q6_K == 4
/* value v (0..255) of a plain Q6_K super-block set to the 6-bit quant q */
static void q6_K_set(block_q6_K * x, int v, int q) {
    const int h = v / 128, g = (v % 128) / 32, i = v % 32;
    uint8_t * l = &x->ql[64 * h + 32 * (g & 1) + i], * hb = &x->qh[32 * h + i];
    *l = (uint8_t) (g < 2 ? (*l & 0xf0) | (q & 15) : (*l & 0x0f) | ((q & 15) << 4));
    *hb = (uint8_t) ((*hb & ~(3 << (2 * g))) | (((q >> 4) & 3) << (2 * g)));
}

/* a plain Q6_K super-block's 256 6-bit quants (0..63), value order */
static void q6_K_quants(const block_q6_K * x, uint8_t v[256]) {
    for (int h = 0; h < 2; h++) {
        const uint8_t * ql = x->ql + 64 * h, * qh = x->qh + 32 * h;
        uint8_t * o = v + 128 * h;
        for (int i = 0; i < 32; i++) {
            o[i] = (uint8_t) ((ql[i] & 15) | (qh[i] & 3) << 4);
            o[i + 32] = (uint8_t) ((ql[i + 32] & 15) | ((qh[i] >> 2) & 3) << 4);
            o[i + 64] = (uint8_t) ((ql[i] >> 4) | ((qh[i] >> 4) & 3) << 4);
            o[i + 96] = (uint8_t) ((ql[i + 32] >> 4) | (qh[i] >> 6) << 4);
        }
    }
}

/* 4 plain Q6_K rows -> x4 super-blocks (repack.h), 4 bytes at a time (a
 * model's Q6_K weights are repacked at every load) */
static void pack_group_q6_Kx4(const char * rows, size_t row_size, int64_t nb, block_q6_Kx4 * out) {
    uint8_t v[4][256];
    for (int64_t b = 0; b < nb; b++) {
        block_q6_Kx4 * o = &out[b];
        for (int r = 0; r < 4; r++) {
            const block_q6_K * in = (const block_q6_K *) (rows + (size_t) r * row_size) + b;
            o->d[r] = in->d;
            for (int c = 0; c < 16; c++) o->scales[8 * (c / 2) + 2 * r + c % 2] = in->scales[c];
            q6_K_quants(in, v[r]);
        }
        for (int c = 0; c < 16; c++) {
            for (int r = 0; r < 4; r++) {
                uint32_t q[4];
                memcpy(q, &v[r][16 * c], 16);
                /* the fourth 4 values' bits 4-5, 2-3, 0-1 into the top of each byte of the others */
                for (int t = 0; t < 3; t++) {
                    const uint32_t w = q[t] | (((q[3] >> (4 - 2 * t)) & 0x03030303u) << 6);
                    memcpy(o->qs + 48 * c + 16 * t + 4 * r, &w, 4);
                }
            }
        }
    }
}

static void unpack_row_q6_Kx4(const block_q6_Kx4 * x, int r, int64_t nb, block_q6_K * out) {
    for (int64_t b = 0; b < nb; b++) {
        block_q6_K * o = &out[b];
        memset(o->ql, 0, sizeof o->ql);
        memset(o->qh, 0, sizeof o->qh);
        o->d = x[b].d[r];
        for (int c = 0; c < 16; c++) {
            o->scales[c] = x[b].scales[8 * (c / 2) + 2 * r + c % 2];
            const uint8_t * v = x[b].qs + 48 * c + 4 * r;
            for (int i = 0; i < 4; i++) {
                for (int t = 0; t < 3; t++) q6_K_set(o, 16 * c + 4 * t + i, v[16 * t + i] & 63);
                q6_K_set(o, 16 * c + 12 + i, (v[i] >> 6) << 4 | (v[16 + i] >> 6) << 2 | v[32 + i] >> 6);
            }
        }
    }
}
#endif

void kiln_repack_unpack_row(enum kiln_type type, int shift, const void * group, int r, int64_t n, void * out) {
    if (type == KILN_TYPE_Q4_K) {
        unpack_row_q4_K(group, r, n / QK_K, out);
        return;
    }
    if (type == KILN_TYPE_Q5_K) {
        unpack_row_q5_K(group, r, n / QK_K, out);
        return;
    }
    if (type == KILN_TYPE_Q6_K) {
#if KILN_REPACK_ROWS_Q6_K == 4
        unpack_row_q6_Kx4(group, r, n / QK_K, out);
#else
        unpack_row_q6_K(group, r, n / QK_K, out);
#endif
        return;
    }
    size_t qb;
    geometry(type, &qb);
    const size_t bs = sizeof(kiln_fp16_t) + qb;
    const int64_t nb = n / 32;
    for (int64_t b = 0; b < nb; b++) {
        const char * xb = (const char *) group + (size_t) b * 4 * bs;
        char * dst = (char *) out + (size_t) b * bs;
        memcpy(dst, xb + r * sizeof(kiln_fp16_t), sizeof(kiln_fp16_t));
        scale_fp16(dst, -shift);
        memcpy(dst + sizeof(kiln_fp16_t), xb + 4 * sizeof(kiln_fp16_t) + r * qb, qb);
    }
}

bool kiln_repack_tensor(struct kiln_tensor * t) {
    if (!t) {
        kiln_set_error("repack: NULL tensor");
        return false;
    }
    const int ti = type_index(t->type);
    if (ti < 0) {
        kiln_set_error("repack: %s weights have no interleaved layout (q4_0, q8_0, iq4_nl, q4_K, q5_K and q6_K do)", kiln_type_name(t->type));
        return false;
    }
    if (kiln_repacked_rows(t)) return true;
    if (t->extra) {
        kiln_set_error("repack: tensor '%s' already carries backend data", t->name);
        return false;
    }
    if (!t->data || t->view_src || !kiln_is_contiguous(t)) {
        kiln_set_error("repack: tensor '%s' must own contiguous data (not a view)", t->name);
        return false;
    }
    const int64_t ne00 = t->ne[0], ne01 = t->ne[1];
    const int64_t nmat = t->ne[2] * t->ne[3];
    const bool x8 = is_x8(t->type);
    const int rows = x8 ? KILN_REPACK_ROWS_Q4_K : KILN_REPACK_ROWS;
    const int64_t ngroups = ne01 / rows;
    if (ngroups == 0) {
        kiln_set_error("repack: tensor '%s' has %lld rows, fewer than a group of %d", t->name, (long long) ne01, rows);
        return false;
    }
    const size_t row_size = t->nb[1];
    prefault_writable(t->data, kiln_nbytes(t));
    const int shift = kiln_repack_is_kquant(t->type) ? 0 : choose_shift(t->type, (const char *) t->data, row_size, ngroups * 4, nmat, t->nb[2], ne00 / 32);
    char * tmp = malloc((size_t) rows * row_size);
    if (!tmp) {
        kiln_set_error("repack: out of memory");
        return false;
    }
    for (int64_t m = 0; m < nmat; m++) {
        char * mat = (char *) t->data + (size_t) m * t->nb[2];
        for (int64_t g = 0; g < ngroups; g++) {
            char * grp = mat + (size_t) g * rows * row_size;
            if (x8) {
                pack_group_x8(t->type, grp, row_size, ne00 / QK_K, tmp);
#if KILN_REPACK_ROWS_Q6_K == 4
            } else if (t->type == KILN_TYPE_Q6_K) { /* x4 */
                pack_group_q6_Kx4(grp, row_size, ne00 / QK_K, (block_q6_Kx4 *) tmp);
#endif
            } else {
                pack_group(t->type, shift, grp, row_size, ne00 / 32, tmp);
            }
            memcpy(grp, tmp, (size_t) rows * row_size);
        }
    }
    free(tmp);
    t->extra = (void *) &tags[ti][shift];
    return true;
}

void kiln_q8_0_aux_row(const void * y, int64_t n, kiln_q8_0_aux * a) {
    const block_q8_0 * b = y;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        int32_t sum = 0;
        for (int j = 0; j < QK8_0; j++) sum += b[i].qs[j];
        a[i].m8sum = -8 * sum;
        a[i].d = kiln_fp16_to_fp32(b[i].d);
    }
}

void kiln_q8_0_aux8_row(const void * y, int64_t n, kiln_q8_0_aux8 * a) {
    const block_q8_0 * b = y;
    for (int64_t i = 0; i < n / QK8_0; i++) {
        for (int j = 0; j < 8; j++) {
            const int8_t * q = b[i].qs + 4 * j;
            a[i].m128[j] = -128 * (q[0] + q[1] + q[2] + q[3]);
        }
        a[i].d = kiln_fp16_to_fp32(b[i].d);
    }
}
