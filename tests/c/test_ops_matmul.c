/*
 * test_ops_matmul.c — mul_mat, mul_mat_id, its backward products (mul_mat_id_back,
 * out_prod_id) and out_prod against a plain
 * double-precision reference written here: F32/F16/BF16 weights (and any
 * quantized type once its dot product is registered), odd shapes, batch 1
 * and > 1, broadcasting over dims 2/3, non-contiguous src1, 1/2/4 threads
 * (bit-identical), every ISA table, and bad input.
 */
#include "util/test_util.h"
#include "cpu/kernels.h"

static const int threads[3] = { 1, 2, 4 };

static double nmse_threshold(enum kiln_type t) {
    switch (t) {
        case KILN_TYPE_F32:  return 1e-10;
        case KILN_TYPE_F16:  return 1e-6;  /* src1 rounded to f16: ~(2^-11)^2/3 */
        case KILN_TYPE_BF16: return 6e-5;  /* ~(2^-8)^2/3 */
        default:             return 1e-2;  /* quantized weights vs their dequantized values */
    }
}

/* fill weights of any type: floats directly, quantized via the reference quantizer */
static void fill_weights(struct kiln_tensor * t) {
    if (!kiln_is_quantized(t->type)) { tu_fill_uniform(t, -1.0f, 1.0f); return; }
    const struct kiln_type_traits * tt = kiln_get_type_traits(t->type);
    const int64_t nrow = kiln_nrows(t), k = t->ne[0];
    float * row = malloc(sizeof(float) * (size_t) k);
    for (int64_t r = 0; r < nrow; r++) {
        for (int64_t i = 0; i < k; i++) row[i] = tu_rand_uniform(-1.0f, 1.0f);
        tt->from_float_ref(row, (char *) t->data + r * t->nb[1], k);
    }
    free(row);
}

/* weights as doubles, rows of ne0 in logical order (dequantized when needed) */
static double * weights_f64(const struct kiln_tensor * t) {
    if (!kiln_is_quantized(t->type)) return tu_to_f64(t);
    const struct kiln_type_traits * tt = kiln_get_type_traits(t->type);
    const int64_t nrow = kiln_nrows(t), k = t->ne[0];
    double * v = malloc(sizeof(double) * (size_t) (nrow * k + 1));
    float * row = malloc(sizeof(float) * (size_t) k);
    for (int64_t r = 0; r < nrow; r++) {
        tt->to_float((const char *) t->data + r * t->nb[1], row, k);
        for (int64_t i = 0; i < k; i++) v[r * k + i] = row[i];
    }
    free(row);
    return v;
}

/* runs out with 1, 2, 4 threads: the first against ref, the others bit-identical */
static void run_and_compare(struct kiln_context * ctx, struct kiln_tensor * out, const double * ref, double thr, const char * what) {
    const int64_t n = kiln_nelements(out);
    float * first = NULL;
    for (int ti = 0; ti < 3; ti++) {
        memset(out->data, 0xff, kiln_nbytes(out)); /* NaN garbage: every element must be written */
        const enum kiln_status st = tu_compute(ctx, out, threads[ti]);
        if (!CHECK(st == KILN_STATUS_SUCCESS, "%s: compute with %d threads: %s (%s)", what, threads[ti], kiln_status_to_string(st), kiln_last_error())) break;
        if (ti == 0) {
            double * got = tu_to_f64(out);
            const double e = tu_nmse(got, ref, n);
            CHECK(e <= thr, "%s: nmse %.3g > %.3g", what, e, thr);
            free(got);
            first = malloc(kiln_nbytes(out) + 1);
            memcpy(first, out->data, kiln_nbytes(out));
        } else {
            CHECK(memcmp(first, out->data, kiln_nbytes(out)) == 0, "%s: %d threads differ from 1 thread", what, threads[ti]);
        }
    }
    free(first);
}

struct mm_shape { int64_t K, N, M, a2, a3, b2, b3; };

/* src1 layouts: 0 contiguous, 1 transposed view (ne0 strided), 2 permuted dims 1<->2 */
static struct kiln_tensor * make_src1(struct kiln_context * ctx, enum kiln_type type, const struct mm_shape * s, int layout) {
    struct kiln_tensor * b;
    if (layout == 1) {
        b = kiln_new_tensor_4d(ctx, type, s->M, s->K, s->b2, s->b3);
        b = kiln_transpose(ctx, b);
    } else if (layout == 2) {
        b = kiln_new_tensor_4d(ctx, type, s->K, s->b2, s->M, s->b3);
        b = kiln_permute(ctx, b, 0, 2, 1, 3);
    } else {
        b = kiln_new_tensor_4d(ctx, type, s->K, s->M, s->b2, s->b3);
    }
    tu_fill_uniform(b, -1.0f, 1.0f);
    return b;
}

/* the order test_mul_mat_case asks of its mul_mat (kiln_mul_mat_set_order) */
static enum kiln_mm_order g_order = KILN_MM_ORDER_GGML;

/* test_mul_mat_case repacks the weights where kiln_repack_wanted() */
static bool g_repack;

static void test_mul_mat_case(enum kiln_type t0, const struct mm_shape * s, int layout, enum kiln_type t1) {
    char what[200];
    snprintf(what, sizeof what, "mul_mat %s x %s K=%lld N=%lld M=%lld a=[%lld,%lld] b=[%lld,%lld] layout=%d isa=%s",
             kiln_type_name(t0), kiln_type_name(t1), (long long) s->K, (long long) s->N, (long long) s->M,
             (long long) s->a2, (long long) s->a3, (long long) s->b2, (long long) s->b3, layout, kiln_cpu_isa());
    tu_case = what;
    const size_t need = (size_t) (s->K * s->N * s->a2 * s->a3 + 2 * s->K * s->M * s->b2 * s->b3 + 2 * s->N * s->M * s->b2 * s->b3) * 16 * 4 + (4 << 20);
    struct kiln_context * ctx = tu_ctx(need);
    struct kiln_tensor * a = kiln_new_tensor_4d(ctx, t0, s->K, s->N, s->a2, s->a3);
    fill_weights(a);
    struct kiln_tensor * b = make_src1(ctx, t1, s, layout);
    struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
    if (!CHECK(out != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    if (g_order != KILN_MM_ORDER_GGML) kiln_mul_mat_set_order(out, g_order);
    CHECK(out->type == KILN_TYPE_F32 && out->ne[0] == s->N && out->ne[1] == s->M && out->ne[2] == s->b2 && out->ne[3] == s->b3, "%s: shape", what);

    double * A = weights_f64(a), * B = tu_to_f64(b);
    const int64_t n = kiln_nelements(out);
    double * ref = malloc(sizeof(double) * (size_t) (n + 1));
    const int64_t r2 = s->b2 / s->a2, r3 = s->b3 / s->a3;
    for (int64_t i3 = 0; i3 < s->b3; i3++)
    for (int64_t i2 = 0; i2 < s->b2; i2++)
    for (int64_t j = 0; j < s->M; j++)
    for (int64_t i = 0; i < s->N; i++) {
        const double * arow = A + (((i3 / r3) * s->a2 + i2 / r2) * s->N + i) * s->K;
        const double * brow = B + ((i3 * s->b2 + i2) * s->M + j) * s->K;
        double acc = 0;
        for (int64_t k = 0; k < s->K; k++) acc += arow[k] * brow[k];
        ref[((i3 * s->b2 + i2) * s->M + j) * s->N + i] = acc;
    }
    double thr = nmse_threshold(t0);
    if (t1 != KILN_TYPE_F32 && thr < nmse_threshold(t1)) thr = nmse_threshold(t1);
    /* the reference above read the plain layout */
    if (g_repack && kiln_repack_wanted(a)) CHECK(kiln_repack_tensor(a), "%s: repack: %s", what, kiln_last_error());
    run_and_compare(ctx, out, ref, thr, what);
    free(A); free(B); free(ref);
    kiln_free(ctx);
}

static const struct mm_shape mm_shapes[] = {
    {   1,  1,  1, 1, 1, 1, 1 },
    {   7,  5,  3, 1, 1, 1, 1 },
    {  33, 17,  1, 1, 1, 1, 1 },   /* gemv */
    { 256, 97,  1, 1, 1, 1, 1 },   /* gemv, odd rows */
    {  64, 48, 24, 1, 1, 1, 1 },   /* exactly one block */
    { 100, 61, 29, 1, 1, 1, 1 },   /* tile and block edges */
    {  35, 50, 13, 2, 1, 6, 2 },   /* broadcast: r2 = 3, r3 = 2 */
    {  16,  8,  5, 1, 2, 3, 4 },   /* broadcast: r2 = 3, r3 = 2 */
    { 600, 50, 250, 1, 1, 1, 1 },  /* packed path: 3 K blocks, partial panels and row groups */
    { 129, 70, 50, 1, 1, 1, 1 },   /* several blocks each way */
};
#define N_MM_SHAPES ((int) (sizeof(mm_shapes) / sizeof(mm_shapes[0])))

static void test_mul_mat(void) {
    const enum kiln_type types[3] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        kiln_cpu_force_isa(k->isa);
        for (int ti = 0; ti < 3; ti++) {
            for (int si = 0; si < N_MM_SHAPES; si++) {
                for (int layout = 0; layout < 3; layout++) {
                    /* the scalar table on the big shapes only for f32, to stay quick */
                    if (isa == KILN_ISA_SCALAR && ti > 0 && si == N_MM_SHAPES - 1) continue;
                    test_mul_mat_case(types[ti], &mm_shapes[si], layout, KILN_TYPE_F32);
                }
            }
        }
        /* activations already in the weight type, and f16 activations for f32 weights */
        test_mul_mat_case(KILN_TYPE_F16, &mm_shapes[5], 0, KILN_TYPE_F16);
        test_mul_mat_case(KILN_TYPE_BF16, &mm_shapes[5], 0, KILN_TYPE_BF16);
        test_mul_mat_case(KILN_TYPE_F32, &mm_shapes[5], 0, KILN_TYPE_F16);
        test_mul_mat_case(KILN_TYPE_F16, &mm_shapes[2], 1, KILN_TYPE_BF16);
    }
    kiln_cpu_force_isa(NULL);
}

/* llamafile's tinyBLAS<4> on NEON for one output, lane by lane */
static float ref_tinyblas4(int64_t K, const float * x, const float * y) {
    float l[4] = { 0, 0, 0, 0 };
    for (int64_t q = 0; q < K; q++) l[q % 4] = fmaf(x[q], y[q], l[q % 4]);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

/* arm64 (f32_dot4): f32 x f32 with 4+ src1 rows and K % 4 == 0 gives
 * tinyBLAS<4>'s sums bit for bit (llama.cpp's arm64 sgemm); with 3 rows,
 * or K % 4 != 0, the table's f32_dot (ggml_vec_dot_f32's order there) */
static void test_mul_mat_dot4(const struct kiln_kernels * k) {
    static const int64_t shapes[][2] = { { 600, 40 }, { 600, 3 }, { 602, 9 } };
    for (int si = 0; si < 3; si++) {
        const int64_t K = shapes[si][0], M = shapes[si][1], N = 12;
        tu_case = "mul_mat f32 on NEON: llama.cpp arm64's orders";
        struct kiln_context * ctx = tu_ctx(16 << 20);
        struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, N);
        struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, M);
        tu_fill_uniform(a, -1.0f, 1.0f);
        tu_fill_uniform(b, -1.0f, 1.0f);
        struct kiln_tensor * g = kiln_mul_mat(ctx, a, b);
        if (CHECK(tu_compute(ctx, g, 2) == KILN_STATUS_SUCCESS, "%s: computes: %s", k->isa, kiln_last_error())) {
            const bool sgemm = M >= 4 && K % 4 == 0;
            int bad = 0;
            for (int64_t j = 0; j < M; j++) for (int64_t i = 0; i < N; i++) {
                const float * x = (const float *) a->data + i * K, * y = (const float *) b->data + j * K;
                const float want = sgemm ? ref_tinyblas4(K, x, y) : k->f32_dot(K, x, y);
                bad += kiln_get_f32_1d(g, (int) (j * N + i)) != want;
            }
            CHECK(!bad, "%s K %lld x %lld rows: %d outputs differ from %s", k->isa, (long long) K, (long long) M, bad,
                  sgemm ? "tinyBLAS<4>" : "f32_dot");
        }
        kiln_free(ctx);
    }
}

/* KILN_MM_ORDER_FAST (Kiln's packed GEMM for f32 batches) against the
 * double reference on every table and f32 shape; where the table has
 * llama.cpp's tile order (x86, wasm) the two orders give other bits on a
 * product with 600-long sums, so the switch is seen to take effect */
static void test_mul_mat_order(void) {
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        kiln_cpu_force_isa(k->isa);
        g_order = KILN_MM_ORDER_FAST;
        for (int si = 0; si < N_MM_SHAPES; si++) test_mul_mat_case(KILN_TYPE_F32, &mm_shapes[si], 0, KILN_TYPE_F32);
        g_order = KILN_MM_ORDER_GGML;
        if (k->f32_dot4) test_mul_mat_dot4(k);
        /* (on NEON Kiln's packed GEMM sums this shape in tinyBLAS<4>'s order too) */
        if (!k->f32_gemm_tile8) continue;
        tu_case = "mul_mat order: GGML vs FAST bits";
        struct kiln_context * ctx = tu_ctx(16 << 20);
        struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 600, 64);
        struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 600, 40);
        tu_fill_uniform(a, -1.0f, 1.0f);
        tu_fill_uniform(b, -1.0f, 1.0f);
        struct kiln_tensor * g = kiln_mul_mat(ctx, a, b), * f = kiln_mul_mat(ctx, a, b);
        kiln_mul_mat_set_order(f, KILN_MM_ORDER_FAST);
        if (CHECK(tu_compute(ctx, g, 2) == KILN_STATUS_SUCCESS && tu_compute(ctx, f, 2) == KILN_STATUS_SUCCESS,
                  "%s: computes: %s", k->isa, kiln_last_error())) {
            int differ = 0;
            for (int64_t i = 0; i < kiln_nelements(g); i++) differ += kiln_get_f32_1d(g, (int) i) != kiln_get_f32_1d(f, (int) i);
            CHECK(differ > 0, "%s: FAST takes another order than GGML (%d of %lld outputs differ)", k->isa, differ,
                  (long long) kiln_nelements(g));
        }
        kiln_free(ctx);
    }
    kiln_cpu_force_isa(NULL);
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 4);
    kiln_clear_error();
    kiln_mul_mat_set_order(a, KILN_MM_ORDER_FAST);
    CHECK(strstr(kiln_last_error(), "not a mul_mat") != NULL, "set_order on a non-mul_mat: message");
    kiln_clear_error();
    kiln_mul_mat_set_order(kiln_mul_mat(ctx, a, a), (enum kiln_mm_order) 7);
    CHECK(strstr(kiln_last_error(), "unknown order") != NULL, "set_order with an unknown order: message");
    kiln_free(ctx);
}

/* weights that are a view: rows of K values inside wider rows (nb01 > K*4),
 * at an offset, as a slice of a fused weight matrix would be */
static void test_mul_mat_src0_view(void) {
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        kiln_cpu_force_isa(k->isa);
        for (int mi = 0; mi < 2; mi++) {
            const int64_t K = 37, N = 23, M = mi == 0 ? 1 : 14, W = K + 6;
            char what[120];
            snprintf(what, sizeof what, "mul_mat src0 view K=%lld N=%lld M=%lld isa=%s", (long long) K, (long long) N, (long long) M, k->isa);
            tu_case = what;
            struct kiln_context * ctx = tu_ctx(8 << 20);
            struct kiln_tensor * wide = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, W, N);
            tu_fill_uniform(wide, -1.0f, 1.0f);
            struct kiln_tensor * a = kiln_view_2d(ctx, wide, K, N, wide->nb[1], 3 * sizeof(float));
            struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, M);
            tu_fill_uniform(b, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
            if (!CHECK(out != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); continue; }
            double * A = tu_to_f64(a), * B = tu_to_f64(b);
            double * ref = malloc(sizeof(double) * (size_t) (N * M));
            for (int64_t j = 0; j < M; j++)
                for (int64_t i = 0; i < N; i++) {
                    double acc = 0;
                    for (int64_t q = 0; q < K; q++) acc += A[i * K + q] * B[j * K + q];
                    ref[j * N + i] = acc;
                }
            run_and_compare(ctx, out, ref, 1e-10, what);
            free(A); free(B); free(ref);
            kiln_free(ctx);
        }
    }
    kiln_cpu_force_isa(NULL);
}

/* quantized weights: every type with a dot product is checked against the
 * dequantized weights; the rest must say they are unsupported */
static void test_mul_mat_quant(void) {
    for (int t = 0; t < KILN_TYPE_COUNT; t++) {
        if (!kiln_is_quantized((enum kiln_type) t)) continue;
        const struct kiln_type_traits * tt = kiln_get_type_traits((enum kiln_type) t);
        if (t == KILN_TYPE_Q8_K || t == KILN_TYPE_Q8_1) continue; /* activation-only types */
        const int64_t K = tt->blck_size * 3;
        if (kiln_kernels()->vec_dot[t] && tt->to_float && tt->from_float_ref) {
            const struct mm_shape s1 = { K, 37, 1, 1, 1, 1, 1 }, s2 = { K, 19, 11, 1, 1, 2, 1 };
            test_mul_mat_case((enum kiln_type) t, &s1, 0, KILN_TYPE_F32);
            test_mul_mat_case((enum kiln_type) t, &s2, 2, KILN_TYPE_F32);
        } else if (!kiln_kernels()->vec_dot[t]) {
            tu_case = "mul_mat quant unsupported";
            struct kiln_context * ctx = tu_ctx(1 << 20);
            struct kiln_tensor * a = kiln_new_tensor_2d(ctx, (enum kiln_type) t, K, 4);
            struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, 2);
            memset(a->data, 0, kiln_nbytes(a));
            kiln_set_f32(b, 1.0f);
            struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
            CHECK(out != NULL, "%s: constructor accepts quantized weights", tt->type_name);
            kiln_clear_error();
            const enum kiln_status st = tu_compute(ctx, out, 2);
            CHECK(st == KILN_STATUS_UNSUPPORTED && strstr(kiln_last_error(), tt->type_name),
                  "%s without a dot product: UNSUPPORTED naming the type (got %s, '%s')", tt->type_name, kiln_status_to_string(st), kiln_last_error());
            kiln_free(ctx);
        }
    }
}

static void test_mul_mat_id_case(enum kiln_type t0, int64_t K, int64_t N, int64_t n_as, int64_t n_used, int64_t n_b, int64_t n_tok) {
    char what[160];
    snprintf(what, sizeof what, "mul_mat_id %s K=%lld N=%lld experts=%lld used=%lld n_b=%lld tokens=%lld isa=%s", kiln_type_name(t0),
             (long long) K, (long long) N, (long long) n_as, (long long) n_used, (long long) n_b, (long long) n_tok, kiln_cpu_isa());
    tu_case = what;
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * n_as + K * n_b * n_tok + N * n_used * n_tok) * 16 * 4 + (4 << 20));
    struct kiln_tensor * as = kiln_new_tensor_3d(ctx, t0, K, N, n_as);
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, n_b, n_tok);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, n_used, n_tok);
    fill_weights(as);
    tu_fill_uniform(b, -1.0f, 1.0f);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t e = 0; e < n_used; e++) {
            /* distinct experts per token, like a top-k router */
            int32_t id;
            bool dup;
            do {
                id = (int32_t) (tu_rand_u64() % (uint64_t) n_as);
                dup = false;
                for (int64_t q = 0; q < e; q++) dup |= kiln_get_i32_nd(ids, (int) q, (int) t, 0, 0) == id;
            } while (dup);
            kiln_set_i32_nd(ids, (int) e, (int) t, 0, 0, id);
        }
    }
    struct kiln_tensor * out = kiln_mul_mat_id(ctx, as, b, ids);
    if (!CHECK(out != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    CHECK(out->ne[0] == N && out->ne[1] == n_used && out->ne[2] == n_tok && out->ne[3] == 1, "%s: shape", what);
    double * A = weights_f64(as), * B = tu_to_f64(b);
    double * ref = malloc(sizeof(double) * (size_t) (N * n_used * n_tok + 1));
    for (int64_t t = 0; t < n_tok; t++)
    for (int64_t e = 0; e < n_used; e++) {
        const int32_t id = kiln_get_i32_nd(ids, (int) e, (int) t, 0, 0);
        for (int64_t i = 0; i < N; i++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc += A[(id * N + i) * K + k] * B[(t * n_b + e % n_b) * K + k];
            ref[(t * n_used + e) * N + i] = acc;
        }
    }
    run_and_compare(ctx, out, ref, nmse_threshold(t0), what);

    /* an id outside [0, n_as) is input data: an error status, not a crash */
    kiln_set_i32_nd(ids, 0, (int) (n_tok - 1), 0, 0, (int32_t) n_as);
    kiln_clear_error();
    const enum kiln_status st = tu_compute(ctx, out, 2);
    CHECK(st != KILN_STATUS_SUCCESS && strstr(kiln_last_error(), "expert index"), "%s: bad id -> %s '%s'", what, kiln_status_to_string(st), kiln_last_error());
    free(A); free(B); free(ref);
    kiln_free(ctx);
}

static void test_mul_mat_id(void) {
    const enum kiln_type types[3] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        kiln_cpu_force_isa(k->isa);
        for (int ti = 0; ti < 3; ti++) {
            test_mul_mat_id_case(types[ti], 32, 20, 4, 2, 2, 5);   /* b per slot */
            test_mul_mat_id_case(types[ti], 33, 45, 8, 3, 1, 7);   /* b shared by the slots */
            test_mul_mat_id_case(types[ti], 64, 7, 3, 1, 1, 1);    /* one token */
            test_mul_mat_id_case(types[ti], 17, 40, 6, 4, 4, 40);  /* many rows per expert */
        }
    }
    kiln_cpu_force_isa(NULL);
}

/* mul_mat_id's backward products against double: mul_mat_id_back (each
 * chosen expert's matrix times g, as may be quantized) and out_prod_id (the
 * outer products summed per expert; experts nobody chose are zero), with 1,
 * 2, 4 threads bit-identical; a strided g reads the same */
static void test_mul_mat_id_back_case(enum kiln_type t0, int64_t K, int64_t N, int64_t n_as, int64_t n_used, int64_t n_b, int64_t n_tok) {
    char what[160];
    snprintf(what, sizeof what, "mul_mat_id backward %s K=%lld N=%lld experts=%lld used=%lld n_b=%lld tokens=%lld isa=%s", kiln_type_name(t0),
             (long long) K, (long long) N, (long long) n_as, (long long) n_used, (long long) n_b, (long long) n_tok, kiln_cpu_isa());
    tu_case = what;
    struct kiln_context * ctx = tu_ctx((size_t) (K * N * n_as * 3 + K * n_used * n_tok * 2 + N * n_used * n_tok * 2) * 16 + (4 << 20));
    struct kiln_tensor * as = kiln_new_tensor_3d(ctx, t0, K, N, n_as);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, n_b, n_tok);
    /* g as a permuted view of [N, n_tok, n_used]: strided rows */
    struct kiln_tensor * gp = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, N, n_tok, n_used);
    struct kiln_tensor * g = kiln_permute(ctx, gp, 0, 2, 1, 3);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, n_used, n_tok);
    fill_weights(as);
    tu_fill_uniform(a, -1.0f, 1.0f);
    tu_fill_uniform(gp, -1.0f, 1.0f);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t e = 0; e < n_used; e++) kiln_set_i32_nd(ids, (int) e, (int) t, 0, 0, (int32_t) ((t * 3 + e * 5) % (n_as - 1)));
    }
    struct kiln_tensor * back = kiln_mul_mat_id_back(ctx, as, g, ids);
    struct kiln_tensor * op = t0 == KILN_TYPE_F32 ? kiln_out_prod_id(ctx, a, g, ids, n_as) : NULL;
    if (!CHECK(back && (op || t0 != KILN_TYPE_F32), "%s: constructors: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    double * W = weights_f64(as), * A = tu_to_f64(a);
    const float * G = gp->data; /* G[(s * n_tok + t) * N + n] = g[n, s, t] */
    double * ref = calloc((size_t) (K * n_used * n_tok + 1), sizeof(double));
    double * ref2 = calloc((size_t) (K * N * n_as + 1), sizeof(double));
    for (int64_t t = 0; t < n_tok; t++)
    for (int64_t e = 0; e < n_used; e++) {
        const int32_t id = kiln_get_i32_nd(ids, (int) e, (int) t, 0, 0);
        for (int64_t n = 0; n < N; n++) {
            const double gv = G[(e * n_tok + t) * N + n];
            for (int64_t k = 0; k < K; k++) {
                ref[(t * n_used + e) * K + k] += W[(id * N + n) * K + k] * gv;
                ref2[(id * N + n) * K + k] += A[(t * n_b + e % n_b) * K + k] * gv;
            }
        }
    }
    run_and_compare(ctx, back, ref, 1e-10, what); /* the reference uses the dequantized weights: f32 sums only */
    if (op) run_and_compare(ctx, op, ref2, 1e-10, what);
    free(W); free(A); free(ref); free(ref2);
    kiln_free(ctx);
}

static void test_mul_mat_id_back(void) {
    const enum kiln_type types[4] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_Q8_0, KILN_TYPE_Q4_K };
    for (int ti = 0; ti < 4; ti++) {
        const int64_t K = types[ti] == KILN_TYPE_Q4_K ? 256 : 64;
        test_mul_mat_id_back_case(types[ti], K, 20, 5, 2, 2, 9);   /* b per slot; expert 4 never chosen */
        test_mul_mat_id_back_case(types[ti], K, 37, 9, 3, 1, 23);  /* b shared; several chunks per expert */
    }
}

static void test_out_prod_case(enum kiln_type ta, int64_t M, int64_t K, int64_t P, int64_t a2, int64_t a3, int64_t b2, int64_t b3, bool b_transposed) {
    char what[160];
    snprintf(what, sizeof what, "out_prod %s M=%lld K=%lld P=%lld a=[%lld,%lld] b=[%lld,%lld] bT=%d isa=%s", kiln_type_name(ta),
             (long long) M, (long long) K, (long long) P, (long long) a2, (long long) a3, (long long) b2, (long long) b3, b_transposed, kiln_cpu_isa());
    tu_case = what;
    struct kiln_context * ctx = tu_ctx((size_t) (M * K * a2 * a3 + P * K * b2 * b3 + M * P * b2 * b3) * 16 * 4 + (4 << 20));
    struct kiln_tensor * a = kiln_new_tensor_4d(ctx, ta, M, K, a2, a3);
    fill_weights(a);
    struct kiln_tensor * b;
    if (b_transposed) b = kiln_transpose(ctx, kiln_new_tensor_4d(ctx, KILN_TYPE_F32, K, P, b2, b3));
    else b = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, P, K, b2, b3);
    tu_fill_uniform(b, -1.0f, 1.0f);
    struct kiln_tensor * out = kiln_out_prod(ctx, a, b);
    if (!CHECK(out != NULL, "%s: constructor: %s", what, kiln_last_error())) { kiln_free(ctx); return; }
    CHECK(out->ne[0] == M && out->ne[1] == P && out->ne[2] == b2 && out->ne[3] == b3, "%s: shape", what);
    double * A = weights_f64(a), * B = tu_to_f64(b);
    double * ref = malloc(sizeof(double) * (size_t) (M * P * b2 * b3 + 1));
    const int64_t r2 = b2 / a2, r3 = b3 / a3;
    for (int64_t i3 = 0; i3 < b3; i3++)
    for (int64_t i2 = 0; i2 < b2; i2++)
    for (int64_t j = 0; j < P; j++)
    for (int64_t i = 0; i < M; i++) {
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
            acc += A[(((i3 / r3) * a2 + i2 / r2) * K + k) * M + i] * B[((i3 * b2 + i2) * K + k) * P + j];
        }
        ref[((i3 * b2 + i2) * P + j) * M + i] = acc;
    }
    run_and_compare(ctx, out, ref, 1e-10, what);
    free(A); free(B); free(ref);
    kiln_free(ctx);
}

static void test_out_prod(void) {
    for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
        const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
        if (!k) continue;
        kiln_cpu_force_isa(k->isa);
        test_out_prod_case(KILN_TYPE_F32, 1, 1, 1, 1, 1, 1, 1, false);
        test_out_prod_case(KILN_TYPE_F32, 17, 9, 5, 1, 1, 1, 1, false);
        test_out_prod_case(KILN_TYPE_F32, 33, 20, 31, 1, 1, 1, 1, true);
        test_out_prod_case(KILN_TYPE_F32, 8, 6, 3, 2, 1, 4, 3, false);
        test_out_prod_case(KILN_TYPE_F16, 21, 7, 9, 1, 1, 2, 1, false);
        test_out_prod_case(KILN_TYPE_BF16, 12, 5, 6, 1, 2, 1, 2, true);
        /* converted rows over several blocks of dst rows, broadcast (the LoRA backward's shapes) */
        test_out_prod_case(KILN_TYPE_F16, 21, 7, 130, 1, 1, 2, 1, false);
        test_out_prod_case(KILN_TYPE_Q8_0, 64, 5, 70, 1, 1, 1, 1, true);
        test_out_prod_case(KILN_TYPE_Q4_0, 32, 3, 65, 1, 1, 1, 1, true);
        test_out_prod_case(KILN_TYPE_Q4_K, 256, 2, 66, 1, 1, 2, 1, true);
    }
    kiln_cpu_force_isa(NULL);
}

static void expect_fail(struct kiln_tensor * r, const char * needle, const char * what) {
    CHECK(r == NULL, "%s: returns NULL", what);
    CHECK(strstr(kiln_last_error(), needle) != NULL, "%s: message '%s' mentions '%s'", what, kiln_last_error(), needle);
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 4, 2);
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 3, 4);
    struct kiln_tensor * b7 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 7, 3);
    struct kiln_tensor * b3 = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 3, 3);
    struct kiln_tensor * bi = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 8, 3);
    CHECK(kiln_mul_mat(ctx, a, b) != NULL, "valid mul_mat");
    expect_fail(kiln_mul_mat(ctx, a, b7), "same ne[0]", "mul_mat ne0 mismatch");
    expect_fail(kiln_mul_mat(ctx, a, b3), "broadcast", "mul_mat dim 2 not a multiple");
    expect_fail(kiln_mul_mat(ctx, kiln_transpose(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 8)), b), "transposed", "mul_mat transposed a");
    expect_fail(kiln_mul_mat(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 8, 2), bi), "b must be", "mul_mat int b");
    expect_fail(kiln_mul_mat(ctx, NULL, b), "NULL", "mul_mat NULL a");
    expect_fail(kiln_mul_mat(NULL, a, b), "context", "mul_mat NULL ctx");

    struct kiln_tensor * as = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 5, 4);
    struct kiln_tensor * bb = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 2, 6);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 2, 6);
    CHECK(kiln_mul_mat_id(ctx, as, bb, ids) != NULL, "valid mul_mat_id");
    expect_fail(kiln_mul_mat_id(ctx, as, bb, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 2, 6)), "must be i32", "mul_mat_id f32 ids");
    expect_fail(kiln_mul_mat_id(ctx, as, bb, kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 2, 5)), "tokens", "mul_mat_id token count");
    expect_fail(kiln_mul_mat_id(ctx, as, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 9, 2, 6), ids), "ne[0]", "mul_mat_id K mismatch");
    expect_fail(kiln_mul_mat_id(ctx, as, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 8, 3, 6), ids), "divide", "mul_mat_id slots");
    expect_fail(kiln_mul_mat_id(ctx, kiln_new_tensor_4d(ctx, KILN_TYPE_F32, 8, 5, 2, 2), bb, ids), "3d", "mul_mat_id 4d as");
    expect_fail(kiln_mul_mat_id(ctx, as, bb, NULL), "NULL", "mul_mat_id NULL ids");

    struct kiln_tensor * pa = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 6, 4);
    CHECK(kiln_out_prod(ctx, pa, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 4)) != NULL, "valid out_prod");
    expect_fail(kiln_out_prod(ctx, pa, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 5)), "ne[1]", "out_prod ne1 mismatch");
    expect_fail(kiln_out_prod(ctx, kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 4, 2), kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 3, 4, 3)), "broadcast", "out_prod broadcast");
    expect_fail(kiln_out_prod(ctx, pa, NULL), "NULL", "out_prod NULL b");

    kiln_mul_mat_set_prec(kiln_mul_mat(ctx, a, b), KILN_PREC_F32);
    struct kiln_tensor * mm = kiln_mul_mat(ctx, a, b);
    kiln_mul_mat_set_prec(mm, KILN_PREC_F32);
    CHECK(mm->op_params[0] == KILN_PREC_F32, "set_prec records op_params[0]");
    kiln_clear_error();
    kiln_mul_mat_set_prec(a, KILN_PREC_F32);
    CHECK(strstr(kiln_last_error(), "not a mul_mat") != NULL, "set_prec on a non-mul_mat: message");
    kiln_free(ctx);
}

/* empty dims compute to nothing (and K = 0 gives zeros) without crashing */
static void test_empty(void) {
    tu_case = "empty";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 0, 4);
    struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 0, 3);
    struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
    if (!CHECK(out && out->ne[0] == 4 && out->ne[1] == 3, "K = 0 shape: %s", kiln_last_error())) { kiln_free(ctx); return; }
    memset(out->data, 0xff, kiln_nbytes(out));
    CHECK(tu_compute(ctx, out, 2) == KILN_STATUS_SUCCESS, "K = 0 computes: %s", kiln_last_error());
    int bad = 0;
    for (int i = 0; i < 12; i++) bad += kiln_get_f32_1d(out, i) != 0.0f;
    CHECK(!bad, "K = 0 gives zeros");
    struct kiln_tensor * a2 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 5, 0);
    struct kiln_tensor * b2 = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 5, 3);
    struct kiln_tensor * o2 = kiln_mul_mat(ctx, a2, b2);
    CHECK(o2 && tu_compute(ctx, o2, 4) == KILN_STATUS_SUCCESS, "N = 0 computes");
    kiln_free(ctx);
}

/* F16 weights times batches and single rows: every output bit-identical
 * to the table's own F16 dot of that weight row and the f16-rounded src1
 * row (wasm widens the rows to floats once per block, then f16val_dot:
 * this pins it to f16_dot); K not a multiple of 8 exercises the tails,
 * 61 src0 rows and 29 src1 rows cross the blocks' edges */
static void test_mul_mat_f16_exact(void) {
    const struct kiln_kernels * k = kiln_kernels();
    static const int64_t Ks[] = { 8, 100, 384 };
    static const int64_t Ms[] = { 1, 29 };
    for (int ki = 0; ki < 3; ki++) {
        for (int mi = 0; mi < 2; mi++) {
            const int64_t K = Ks[ki], N = 61, M = Ms[mi];
            struct kiln_context * ctx = kiln_init((struct kiln_init_params) { .mem_size = 8u << 20 });
            struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F16, K, N);
            struct kiln_tensor * b = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, K, M);
            fill_weights(a);
            tu_fill_uniform(b, -1.0f, 1.0f);
            struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
            const enum kiln_status st = tu_compute(ctx, out, 2);
            if (!CHECK(st == KILN_STATUS_SUCCESS, "f16 exact K=%lld M=%lld: %s", (long long) K, (long long) M, kiln_last_error())) { kiln_free(ctx); continue; }
            kiln_fp16_t * bh = malloc(sizeof(kiln_fp16_t) * (size_t) K);
            int bad = 0;
            for (int64_t j = 0; j < M; j++) {
                k->from_float[KILN_TYPE_F16]((const float *) ((const char *) b->data + j * b->nb[1]), bh, K);
                for (int64_t i = 0; i < N; i++) {
                    float want;
                    k->vec_dot[KILN_TYPE_F16](K, &want, (const char *) a->data + i * a->nb[1], bh);
                    const float got = ((const float *) ((const char *) out->data + j * out->nb[1]))[i];
                    bad += memcmp(&got, &want, sizeof(float)) != 0;
                }
            }
            CHECK(bad == 0, "%s: f16 mul_mat K=%lld M=%lld equals the f16 dot bit for bit (%d of %lld differ)", k->isa,
                  (long long) K, (long long) M, bad, (long long) (N * M));
            free(bh);
            kiln_free(ctx);
        }
    }
}

/* K-quant weights that are not repacked (Q6_K, Q5_K: the batched kernels
 * vec_dot_y4 / vec_dot_rows, kernels.h) sum every element as the table's
 * vec_dot does on that row and the row's q8_K activations: every table,
 * 1/2/4 threads, 53 weight rows (a 48-row block and a 5-row one, past the
 * kernels' 8-row groups), 70 activation rows (a 64-row block and 6 more),
 * one weight matrix broadcast over 2 batches, and a small case */
static void test_mul_mat_kquant_exact(void) {
    static const int64_t shape[2][4] = { { 768, 53, 70, 2 }, { 256, 8, 5, 1 } }; /* K, N, M, batches */
    static const enum kiln_type types[2] = { KILN_TYPE_Q6_K, KILN_TYPE_Q5_K };
    for (int si = 0; si < 4; si++) {
        const enum kiln_type wt = types[si / 2];
        const int64_t K = shape[si % 2][0], N = shape[si % 2][1], M = shape[si % 2][2], nb2 = shape[si % 2][3];
        struct kiln_context * ctx = tu_ctx((size_t) (K * N + K * M * nb2) * 8 + (8 << 20));
        struct kiln_tensor * a = kiln_new_tensor_2d(ctx, wt, K, N);
        struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, K, M, nb2);
        fill_weights(a);
        tu_fill_uniform(b, -2.0f, 2.0f);
        struct kiln_tensor * out = kiln_mul_mat(ctx, a, b);
        void * yq = malloc(kiln_row_size(KILN_TYPE_Q8_K, K));
        for (int isa = 0; isa < KILN_ISA_COUNT; isa++) {
            const struct kiln_kernels * k = kiln_kernels_for_isa((enum kiln_isa) isa);
            if (!k || !k->vec_dot[wt]) continue;
            kiln_cpu_force_isa(k->isa);
            for (int ti = 0; ti < 3; ti++) {
                const enum kiln_status st = tu_compute(ctx, out, threads[ti]);
                if (!CHECK(st == KILN_STATUS_SUCCESS, "%s exact: %s", kiln_type_name(wt), kiln_last_error())) continue;
                int bad = 0;
                for (int64_t bb = 0; bb < nb2; bb++) {
                    for (int64_t j = 0; j < M; j++) {
                        k->from_float[KILN_TYPE_Q8_K]((const float *) ((const char *) b->data + bb * b->nb[2] + j * b->nb[1]), yq, K);
                        for (int64_t i = 0; i < N; i++) {
                            float want;
                            k->vec_dot[wt](K, &want, (const char *) a->data + i * a->nb[1], yq);
                            const float got = ((const float *) ((const char *) out->data + bb * out->nb[2] + j * out->nb[1]))[i];
                            bad += memcmp(&got, &want, sizeof(float)) != 0;
                        }
                    }
                }
                CHECK(bad == 0, "%s: %s mul_mat K=%lld N=%lld M=%lld x%lld, %d threads, equals vec_dot bit for bit (%d of %lld differ)%s",
                      k->isa, kiln_type_name(wt), (long long) K, (long long) N, (long long) M, (long long) nb2, threads[ti], bad, (long long) (N * M * nb2),
                      k->vec_dot_rows[wt] ? " [vec_dot_rows]" : "");
            }
        }
        kiln_cpu_force_isa(NULL);
        free(yq);
        kiln_free(ctx);
    }
}

/* a mat-vec on several threads splits its rows into chunks of decreasing
 * size (ops_matmul.c, gemv_guided_bounds): row counts around the 32-row
 * floor and the multiples of 8, and long ones whose split runs to many
 * chunks, in f32, q4_0, and q4_0 and q4_K repacked where this build
 * repacks them (groups of 4 / 8 rows), with 2 and 4 threads equal 1 thread
 * bit for bit, every row written */
static void test_mul_mat_gemv_split(void) {
    static const int64_t rows[] = { 1, 8, 31, 32, 33, 39, 40, 100, 257, 1000, 4099 };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct mm_shape s = { 64, rows[i], 1, 1, 1, 1, 1 };
        test_mul_mat_case(KILN_TYPE_F32, &s, 0, KILN_TYPE_F32);
        test_mul_mat_case(KILN_TYPE_Q4_0, &s, 0, KILN_TYPE_F32);
        g_repack = true;
        test_mul_mat_case(KILN_TYPE_Q4_0, &s, 0, KILN_TYPE_F32);
        test_mul_mat_case(KILN_TYPE_Q4_K, &(struct mm_shape) { 256, rows[i], 1, 1, 1, 1, 1 }, 0, KILN_TYPE_F32);
        g_repack = false;
    }
}

int main(void) {
    tu_seed(7);
    test_mul_mat_f16_exact();
    test_mul_mat_kquant_exact();
    test_bad_input();
    test_empty();
    test_mul_mat();
    test_mul_mat_order();
    test_mul_mat_src0_view();
    test_mul_mat_quant();
    test_mul_mat_gemv_split();
    test_mul_mat_id();
    test_mul_mat_id_back();
    test_out_prod();
    return tu_finish();
}
