/*
 * test_ops_reduce.c — reductions, indexing and shape ops (sum, sum_rows,
 * mean, argmax, count_equal, repeat, repeat_back, concat, get_rows,
 * get_rows_back, diag, diag_mask_inf/zero, arange, argsort, top_k, pad,
 * pad_reflect_1d, upscale) against double references, over types, shapes,
 * layouts and 1/2/4 threads (bit-identical), plus edge cases and bad input.
 */
#include "util/elem_check.h"

static char case_name[200];

struct rarg {
    enum kiln_type type;
    int64_t ne[4];
    int layout;
    int p[4];     /* op-specific integers */
    bool inplace;
};

/* builds inputs + op in ctx and a malloc'd reference (logical order) */
typedef struct kiln_tensor * (*case_fn)(struct kiln_context * ctx, const struct rarg * a, double ** ref);

static void run_case(const char * op, case_fn fn, const struct rarg * arg, double thr) {
    snprintf(case_name, sizeof case_name, "%s%s %s [%lld,%lld,%lld,%lld] %s p(%d,%d,%d,%d)", op, arg->inplace ? "_inplace" : "",
             kiln_type_name(arg->type), (long long) arg->ne[0], (long long) arg->ne[1], (long long) arg->ne[2], (long long) arg->ne[3],
             ec_layout_names[arg->layout], arg->p[0], arg->p[1], arg->p[2], arg->p[3]);
    tu_case = case_name;
    ec_cases++;
    struct ec_bits bits = { 0 };
    for (int t = 0; t < 3; t++) {
        struct kiln_context * ctx = tu_ctx((size_t) ec_nel(arg->ne) * 96 + (4 << 20));
        tu_seed(31337);
        double * ref = NULL;
        struct kiln_tensor * r = fn(ctx, arg, &ref);
        if (!CHECK(r != NULL, "constructor: %s", kiln_last_error())) { free(ref); kiln_free(ctx); break; }
        if (!CHECK(tu_compute(ctx, r, ec_threads[t]) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error())) { free(ref); kiln_free(ctx); break; }
        const int64_t n = kiln_nelements(r);
        double * out = tu_to_f64(r);
        const double e = tu_nmse(out, ref, n);
        CHECK(e <= thr, "nmse %g with %d threads", e, ec_threads[t]);
        ec_bits_check(&bits, out, n, ec_threads[t]);
        free(out); free(ref);
        kiln_free(ctx);
    }
    ec_bits_free(&bits);
}

static double * alloc_ref(int64_t n) { return (double *) calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }
#define IDX(ne, i0, i1, i2, i3) ((i0) + (ne)[0] * ((i1) + (ne)[1] * ((i2) + (ne)[2] * (i3))))

static struct kiln_tensor * input(struct kiln_context * ctx, const struct rarg * a, double ** x, float lo, float hi) {
    struct kiln_tensor * t = ec_new(ctx, a->type, a->ne, a->layout);
    tu_fill_uniform(t, lo, hi);
    *x = tu_to_f64(t);
    return t;
}

/* ---------------------------------------------------------- reductions */

static struct kiln_tensor * c_sum(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -1, 1);
    *ref = alloc_ref(1);
    for (int64_t i = 0; i < ec_nel(a->ne); i++) (*ref)[0] += x[i];
    (*ref)[0] = ec_round(a->type, (*ref)[0]);
    free(x);
    return kiln_sum(ctx, t);
}
static struct kiln_tensor * c_sum_rows(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -1, 1);
    const int64_t nr = a->ne[1] * a->ne[2] * a->ne[3];
    *ref = alloc_ref(nr);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t i = 0; i < a->ne[0]; i++) (*ref)[r] += x[r * a->ne[0] + i];
        if (a->p[0]) (*ref)[r] /= (double) a->ne[0];
    }
    free(x);
    return a->p[0] ? kiln_mean(ctx, t) : kiln_sum_rows(ctx, t);
}
static struct kiln_tensor * c_argmax(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -10, 10);
    *ref = alloc_ref(a->ne[1]);
    for (int64_t r = 0; r < a->ne[1]; r++) {
        int64_t best = 0;
        for (int64_t i = 1; i < a->ne[0]; i++) if (x[r * a->ne[0] + i] > x[r * a->ne[0] + best]) best = i;
        (*ref)[r] = (double) best;
    }
    free(x);
    return kiln_argmax(ctx, t);
}
static struct kiln_tensor * c_count_equal(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -3, 3);
    double * y; struct kiln_tensor * u = input(ctx, a, &y, -3, 3);
    *ref = alloc_ref(1);
    for (int64_t i = 0; i < ec_nel(a->ne); i++) (*ref)[0] += x[i] == y[i];
    free(x); free(y);
    return kiln_count_equal(ctx, t, u);
}

/* ------------------------------------------------- repeat and friends */

/* p = repetition counts per dim */
static struct kiln_tensor * c_repeat(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t nd[4] = { a->ne[0] * a->p[0], a->ne[1] * a->p[1], a->ne[2] * a->p[2], a->ne[3] * a->p[3] };
    struct kiln_tensor * shape = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, nd[0], nd[1], nd[2], nd[3]);
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i3 = 0; i3 < nd[3]; i3++) for (int64_t i2 = 0; i2 < nd[2]; i2++)
    for (int64_t i1 = 0; i1 < nd[1]; i1++) for (int64_t i0 = 0; i0 < nd[0]; i0++)
        (*ref)[IDX(nd, i0, i1, i2, i3)] = x[IDX(a->ne, i0 % a->ne[0], i1 % a->ne[1], i2 % a->ne[2], i3 % a->ne[3])];
    free(x);
    return kiln_repeat(ctx, t, shape);
}
/* a->ne is the big shape, p the repetition counts (divisors) */
static struct kiln_tensor * c_repeat_back(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -1, 1);
    const int64_t nd[4] = { a->ne[0] / a->p[0], a->ne[1] / a->p[1], a->ne[2] / a->p[2], a->ne[3] / a->p[3] };
    struct kiln_tensor * shape = kiln_new_tensor_4d(ctx, KILN_TYPE_F32, nd[0], nd[1], nd[2], nd[3]);
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++) for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a->ne[1]; i1++) for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
        (*ref)[IDX(nd, i0 % nd[0], i1 % nd[1], i2 % nd[2], i3 % nd[3])] += x[IDX(a->ne, i0, i1, i2, i3)];
    free(x);
    return kiln_repeat_back(ctx, t, shape);
}
/* p[0] = dim, p[1] = b's size along dim */
static struct kiln_tensor * c_concat(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int dim = a->p[0];
    struct rarg bb = *a;
    bb.ne[dim] = a->p[1];
    bb.layout = (a->layout + 1) % EC_LAYOUTS;
    double * y; struct kiln_tensor * u = input(ctx, &bb, &y, -5, 5);
    int64_t nd[4] = { a->ne[0], a->ne[1], a->ne[2], a->ne[3] };
    nd[dim] += a->p[1];
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i3 = 0; i3 < nd[3]; i3++) for (int64_t i2 = 0; i2 < nd[2]; i2++)
    for (int64_t i1 = 0; i1 < nd[1]; i1++) for (int64_t i0 = 0; i0 < nd[0]; i0++) {
        int64_t j[4] = { i0, i1, i2, i3 };
        if (j[dim] < a->ne[dim]) (*ref)[IDX(nd, i0, i1, i2, i3)] = x[IDX(a->ne, j[0], j[1], j[2], j[3])];
        else { j[dim] -= a->ne[dim]; (*ref)[IDX(nd, i0, i1, i2, i3)] = y[IDX(bb.ne, j[0], j[1], j[2], j[3])]; }
    }
    free(x); free(y);
    return kiln_concat(ctx, t, u, dim);
}

/* ----------------------------------------------------------- indexing */

/* a: [ne0, ne1, ne2, ne3]; indices I32 [p0, ne2, p1] (p1 <= ne3) */
static struct kiln_tensor * c_get_rows(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t nidx = a->p[0], nb2 = a->p[1];
    struct kiln_tensor * ids = kiln_new_tensor_3d(ctx, KILN_TYPE_I32, nidx, a->ne[2], nb2);
    const int64_t ni = kiln_nelements(ids);
    for (int64_t i = 0; i < ni; i++) ((int32_t *) ids->data)[i] = (int32_t)(tu_rand_u64() % (uint64_t) a->ne[1]);
    const int64_t nd[4] = { a->ne[0], nidx, a->ne[2], nb2 };
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i12 = 0; i12 < nb2; i12++) for (int64_t i11 = 0; i11 < a->ne[2]; i11++) for (int64_t i10 = 0; i10 < nidx; i10++) {
        const int64_t row = ((int32_t *) ids->data)[IDX(((int64_t[4]){ nidx, a->ne[2], nb2, 1 }), i10, i11, i12, 0)];
        for (int64_t i0 = 0; i0 < a->ne[0]; i0++) (*ref)[IDX(nd, i0, i10, i11, i12)] = x[IDX(a->ne, i0, row, i11, i12)];
    }
    free(x);
    return kiln_get_rows(ctx, t, ids);
}
/* a: grad [ne0, p0 indices]; result rows ne1 */
static struct kiln_tensor * c_get_rows_back(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    struct rarg g = *a;
    g.ne[1] = a->p[0];
    double * x; struct kiln_tensor * t = input(ctx, &g, &x, -1, 1);
    struct kiln_tensor * ids = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, a->p[0]);
    for (int64_t i = 0; i < a->p[0]; i++) ((int32_t *) ids->data)[i] = (int32_t)(tu_rand_u64() % (uint64_t) a->ne[1]);
    struct kiln_tensor * shape = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, a->ne[0], a->ne[1]);
    *ref = alloc_ref(a->ne[0] * a->ne[1]);
    for (int64_t i = 0; i < a->p[0]; i++) {
        const int64_t r = ((int32_t *) ids->data)[i];
        for (int64_t j = 0; j < a->ne[0]; j++) (*ref)[r * a->ne[0] + j] += x[i * a->ne[0] + j];
    }
    free(x);
    return kiln_get_rows_back(ctx, t, ids, shape);
}
static struct kiln_tensor * c_diag(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t nd[4] = { a->ne[0], a->ne[0], a->ne[2], a->ne[3] };
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i3 = 0; i3 < nd[3]; i3++) for (int64_t i2 = 0; i2 < nd[2]; i2++) for (int64_t i = 0; i < nd[0]; i++)
        (*ref)[IDX(nd, i, i, i2, i3)] = x[IDX(a->ne, i, 0, i2, i3)];
    free(x);
    return kiln_diag(ctx, t);
}
/* p[0] = n_past, p[1] = 1 for -inf, 0 for zero */
static struct kiln_tensor * c_diag_mask(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t n = ec_nel(a->ne);
    *ref = alloc_ref(n);
    for (int64_t i = 0; i < n; i++) {
        const int64_t i0 = i % a->ne[0], i1 = (i / a->ne[0]) % a->ne[1];
        (*ref)[i] = i0 > a->p[0] + i1 ? (a->p[1] ? -INFINITY : 0.0) : x[i];
    }
    free(x);
    if (a->p[1]) return a->inplace ? kiln_diag_mask_inf_inplace(ctx, t, a->p[0]) : kiln_diag_mask_inf(ctx, t, a->p[0]);
    return a->inplace ? kiln_diag_mask_zero_inplace(ctx, t, a->p[0]) : kiln_diag_mask_zero(ctx, t, a->p[0]);
}

/* p = (start, stop, step) * 0.25 */
static struct kiln_tensor * c_arange(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    const float start = a->p[0] * 0.25f, stop = a->p[1] * 0.25f, step = a->p[2] * 0.25f;
    const int64_t n = (int64_t) ceil(((double) stop - start) / step);
    *ref = alloc_ref(n);
    for (int64_t i = 0; i < n; i++) (*ref)[i] = start + (double) step * (double) i;
    struct kiln_tensor * r = kiln_arange(ctx, start, stop, step);
    CHECK(r && r->ne[0] == n, "arange length %lld", (long long) n);
    return r;
}

/* p[0] = order, p[1] = k for top_k (0: argsort), p[2] = value levels (0: continuous; else ties) */
static struct kiln_tensor * c_argsort(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    struct kiln_tensor * t = ec_new(ctx, a->type, a->ne, a->layout);
    tu_fill_uniform(t, -100, 100);
    if (a->p[2]) {
        double * v = tu_to_f64(t);
        for (int64_t i = 0; i < ec_nel(a->ne); i++) v[i] = (double)(tu_rand_u64() % (uint64_t) a->p[2]);
        tu_from_f64(t, v);
        free(v);
    }
    double * x = tu_to_f64(t);
    const bool desc = a->p[0] == KILN_SORT_ORDER_DESC || a->p[1] > 0;
    const int64_t ne0 = a->ne[0], nr = a->ne[1] * a->ne[2] * a->ne[3];
    const int64_t k = a->p[1] > 0 ? a->p[1] : ne0;
    *ref = alloc_ref(k * nr);
    int64_t * idx = (int64_t *) malloc(sizeof(int64_t) * (size_t)(ne0 > 0 ? ne0 : 1));
    for (int64_t r = 0; r < nr; r++) {
        const double * v = x + r * ne0;
        if (k < ne0) {
            /* top k by repeated selection (ties: lower index first) */
            for (int64_t s = 0; s < k; s++) {
                int64_t best = -1;
                for (int64_t i = 0; i < ne0; i++) {
                    bool used = false;
                    for (int64_t q = 0; q < s && !used; q++) used = idx[q] == i;
                    if (used) continue;
                    if (best < 0 || v[i] > v[best]) best = i;
                }
                idx[s] = best;
            }
            for (int64_t i = 0; i < k; i++) (*ref)[r * k + i] = (double) idx[i];
            continue;
        }
        /* stable insertion sort: ties keep index order */
        for (int64_t i = 0; i < ne0; i++) {
            int64_t j = i;
            while (j > 0 && (desc ? v[idx[j - 1]] < v[i] : v[idx[j - 1]] > v[i])) { idx[j] = idx[j - 1]; j--; }
            idx[j] = i;
        }
        for (int64_t i = 0; i < k; i++) (*ref)[r * k + i] = (double) idx[i];
    }
    free(idx); free(x);
    if (a->p[1] > 0) return kiln_top_k(ctx, t, a->p[1]);
    return kiln_argsort(ctx, t, (enum kiln_sort_order) a->p[0]);
}

/* ---------------------------------------------------------- pad/scale */

static struct kiln_tensor * c_pad(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t nd[4] = { a->ne[0] + a->p[0], a->ne[1] + a->p[1], a->ne[2] + a->p[2], a->ne[3] + a->p[3] };
    *ref = alloc_ref(ec_nel(nd));
    for (int64_t i3 = 0; i3 < a->ne[3]; i3++) for (int64_t i2 = 0; i2 < a->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < a->ne[1]; i1++) for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
        (*ref)[IDX(nd, i0, i1, i2, i3)] = x[IDX(a->ne, i0, i1, i2, i3)];
    free(x);
    return kiln_pad(ctx, t, a->p[0], a->p[1], a->p[2], a->p[3]);
}
static struct kiln_tensor * c_pad_reflect(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    const int64_t p0 = a->p[0], p1 = a->p[1], ne0 = a->ne[0], n0 = ne0 + p0 + p1;
    const int64_t nr = a->ne[1] * a->ne[2] * a->ne[3];
    *ref = alloc_ref(n0 * nr);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t i = 0; i < ne0; i++) (*ref)[r * n0 + p0 + i] = x[r * ne0 + i];
        for (int64_t i = 1; i <= p0; i++) (*ref)[r * n0 + p0 - i] = x[r * ne0 + i];
        for (int64_t i = 1; i <= p1; i++) (*ref)[r * n0 + p0 + ne0 - 1 + i] = x[r * ne0 + ne0 - 1 - i];
    }
    free(x);
    return kiln_pad_reflect_1d(ctx, t, a->p[0], a->p[1]);
}
/* p = target shape; p[0] < 0: kiln_upscale by -p[0] */
static struct kiln_tensor * c_upscale(struct kiln_context * ctx, const struct rarg * a, double ** ref) {
    double * x; struct kiln_tensor * t = input(ctx, a, &x, -5, 5);
    int64_t nd[4];
    if (a->p[0] < 0) { nd[0] = a->ne[0] * -a->p[0]; nd[1] = a->ne[1] * -a->p[0]; nd[2] = a->ne[2]; nd[3] = a->ne[3]; }
    else for (int i = 0; i < 4; i++) nd[i] = a->p[i];
    *ref = alloc_ref(ec_nel(nd));
    /* nearest: source index floor(i * ne_src / ne_dst) */
    for (int64_t i3 = 0; i3 < nd[3]; i3++) for (int64_t i2 = 0; i2 < nd[2]; i2++)
    for (int64_t i1 = 0; i1 < nd[1]; i1++) for (int64_t i0 = 0; i0 < nd[0]; i0++)
        (*ref)[IDX(nd, i0, i1, i2, i3)] = x[IDX(a->ne, i0 * a->ne[0] / nd[0], i1 * a->ne[1] / nd[1], i2 * a->ne[2] / nd[2], i3 * a->ne[3] / nd[3])];
    free(x);
    if (a->p[0] < 0) return kiln_upscale(ctx, t, -a->p[0]);
    return kiln_upscale_ext(ctx, t, a->p[0], a->p[1], a->p[2], a->p[3]);
}

/* ------------------------------------------------------------- drivers */

#define R(T, n0, n1, n2, n3, L, q0, q1, q2, q3) (&(struct rarg){ T, { n0, n1, n2, n3 }, L, { q0, q1, q2, q3 }, false })
#define RI(T, n0, n1, n2, n3, L, q0, q1, q2, q3) (&(struct rarg){ T, { n0, n1, n2, n3 }, L, { q0, q1, q2, q3 }, true })

static const enum kiln_type FT[3] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16 };

static void test_reductions(void) {
    for (int t = 0; t < 3; t++) {
        const double thr = t == 0 ? 1e-12 : t == 1 ? 1e-6 : 5e-5;
        for (int l = 0; l < EC_LAYOUTS; l++) {
            run_case("sum", c_sum, R(FT[t], 7, 5, 3, 2, l, 0, 0, 0, 0), thr);
            run_case("sum_rows", c_sum_rows, R(FT[t], 33, 5, 3, 2, l, 0, 0, 0, 0), thr);
            run_case("mean", c_sum_rows, R(FT[t], 33, 5, 3, 2, l, 1, 0, 0, 0), t == 0 ? 1e-12 : 1e-6);
            run_case("argmax", c_argmax, R(FT[t], 65, 9, 1, 1, l, 0, 0, 0, 0), 0);
        }
        run_case("sum", c_sum, R(FT[t], 1, 1, 1, 1, EC_CONT, 0, 0, 0, 0), thr);
        run_case("sum_rows", c_sum_rows, R(FT[t], 1, 7, 1, 1, EC_CONT, 0, 0, 0, 0), thr);
    }
    run_case("sum", c_sum, R(KILN_TYPE_F32, 65537, 2, 1, 1, EC_CONT, 0, 0, 0, 0), 1e-12);
    run_case("sum_rows", c_sum_rows, R(KILN_TYPE_F32, 65537, 3, 1, 1, EC_PADDED, 0, 0, 0, 0), 1e-12);
    run_case("mean", c_sum_rows, R(KILN_TYPE_F32, 65537, 2, 1, 1, EC_CONT, 1, 0, 0, 0), 1e-12);
    run_case("argmax", c_argmax, R(KILN_TYPE_F32, 65537, 3, 1, 1, EC_CONT, 0, 0, 0, 0), 0);
    run_case("argmax", c_argmax, R(KILN_TYPE_F32, 1, 4, 1, 1, EC_CONT, 0, 0, 0, 0), 0);
    static const enum kiln_type CT[] = { KILN_TYPE_I32, KILN_TYPE_F32, KILN_TYPE_I8, KILN_TYPE_I64 };
    for (int t = 0; t < 4; t++) {
        run_case("count_equal", c_count_equal, R(CT[t], 37, 5, 3, 1, EC_CONT, 0, 0, 0, 0), 0);
        run_case("count_equal", c_count_equal, R(CT[t], 37, 5, 3, 1, EC_PERM, 0, 0, 0, 0), 0);
    }
}

static void test_shape_ops(void) {
    static const enum kiln_type RT[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_I32, KILN_TYPE_I16 };
    for (int t = 0; t < 5; t++) {
        run_case("repeat", c_repeat, R(RT[t], 3, 2, 2, 1, EC_CONT, 2, 3, 1, 2), 0);
        run_case("repeat", c_repeat, R(RT[t], 5, 1, 3, 2, EC_TRANS, 1, 4, 2, 1), 0);
        run_case("repeat", c_repeat, R(RT[t], 1, 1, 1, 1, EC_CONT, 7, 3, 2, 2), 0);
        run_case("repeat", c_repeat, R(RT[t], 4, 3, 2, 1, EC_PERM, 3, 1, 1, 3), 0);
        for (int d = 0; d < 4; d++) run_case("concat", c_concat, R(RT[t], 5, 4, 3, 2, d % EC_LAYOUTS, d, 3, 0, 0), 0);
        run_case("pad", c_pad, R(RT[t], 5, 3, 2, 1, EC_CONT, 2, 1, 0, 3), 0);
        run_case("pad", c_pad, R(RT[t], 5, 3, 2, 2, EC_TRANS, 0, 0, 2, 0), 0);
        run_case("upscale", c_upscale, R(RT[t], 3, 4, 2, 1, EC_CONT, -2, 0, 0, 0), 0);
        run_case("upscale_ext", c_upscale, R(RT[t], 3, 4, 2, 1, EC_PERM, 7, 9, 3, 2), 0);
    }
    for (int t = 0; t < 3; t++) {
        const double thr = t == 0 ? 1e-12 : t == 1 ? 1e-6 : 5e-5;
        run_case("repeat_back", c_repeat_back, R(FT[t], 6, 4, 3, 2, EC_CONT, 2, 4, 1, 2), thr);
        run_case("repeat_back", c_repeat_back, R(FT[t], 6, 4, 3, 2, EC_TRANS, 3, 1, 3, 1), thr);
        run_case("repeat_back", c_repeat_back, R(FT[t], 7, 5, 1, 1, EC_CONT, 7, 5, 1, 1), thr);
        run_case("pad_reflect_1d", c_pad_reflect, R(FT[t], 9, 4, 2, 1, EC_CONT, 3, 8, 0, 0), 0);
        run_case("pad_reflect_1d", c_pad_reflect, R(FT[t], 5, 3, 1, 2, EC_PADDED, 0, 2, 0, 0), 0);
        run_case("pad_reflect_1d", c_pad_reflect, R(FT[t], 2, 3, 1, 1, EC_TRANS, 1, 1, 0, 0), 0);
    }
    run_case("concat", c_concat, R(KILN_TYPE_F32, 65537, 2, 1, 1, EC_CONT, 1, 1, 0, 0), 0);
    run_case("concat", c_concat, R(KILN_TYPE_I64, 5, 3, 2, 1, EC_CONT, 0, 1, 0, 0), 0);
    run_case("upscale_ext", c_upscale, R(KILN_TYPE_F32, 5, 3, 1, 1, EC_CONT, 13, 7, 2, 1), 0);
    run_case("upscale", c_upscale, R(KILN_TYPE_F32, 7, 5, 3, 1, EC_TRANS, -3, 0, 0, 0), 0);
}

static void test_indexing(void) {
    static const enum kiln_type GT[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_BF16, KILN_TYPE_I32 };
    for (int t = 0; t < 4; t++) {
        const double thr = 0; /* get_rows copies exactly (f16/bf16 -> f32 is exact) */
        run_case("get_rows", c_get_rows, R(GT[t], 9, 11, 1, 1, EC_CONT, 5, 1, 0, 0), thr);
        run_case("get_rows", c_get_rows, R(GT[t], 9, 11, 3, 1, EC_CONT, 4, 1, 0, 0), thr);
        run_case("get_rows", c_get_rows, R(GT[t], 6, 5, 3, 2, EC_TRANS, 7, 2, 0, 0), thr);
        run_case("get_rows", c_get_rows, R(GT[t], 6, 5, 2, 3, EC_PADDED, 3, 2, 0, 0), thr);
    }
    run_case("get_rows", c_get_rows, R(KILN_TYPE_F32, 65537, 3, 1, 1, EC_CONT, 4, 1, 0, 0), 0);
    run_case("get_rows", c_get_rows, R(KILN_TYPE_F32, 1, 7, 1, 1, EC_CONT, 1, 1, 0, 0), 0);
    run_case("get_rows_back", c_get_rows_back, R(KILN_TYPE_F32, 9, 6, 1, 1, EC_CONT, 13, 0, 0, 0), 1e-12);
    run_case("get_rows_back", c_get_rows_back, R(KILN_TYPE_F16, 9, 6, 1, 1, EC_TRANS, 13, 0, 0, 0), 1e-12);
    run_case("get_rows_back", c_get_rows_back, R(KILN_TYPE_F32, 33, 40, 1, 1, EC_PADDED, 3, 0, 0, 0), 1e-12);
    static const enum kiln_type DT[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_I32 };
    for (int t = 0; t < 3; t++) {
        run_case("diag", c_diag, R(DT[t], 7, 1, 3, 2, EC_CONT, 0, 0, 0, 0), 0);
        run_case("diag", c_diag, R(DT[t], 1, 1, 1, 1, EC_CONT, 0, 0, 0, 0), 0);
    }
    for (int t = 0; t < 3; t++) {
        for (int inf = 0; inf < 2; inf++) {
            run_case("diag_mask", c_diag_mask, R(FT[t], 9, 7, 2, 1, EC_CONT, 0, inf, 0, 0), 0);
            run_case("diag_mask", c_diag_mask, R(FT[t], 9, 7, 3, 2, t == 0 ? EC_TRANS : EC_PERM, 2, inf, 0, 0), 0);
            run_case("diag_mask", c_diag_mask, RI(FT[t], 16, 16, 2, 1, EC_CONT, 3, inf, 0, 0), 0);
            run_case("diag_mask", c_diag_mask, RI(FT[t], 5, 8, 1, 1, EC_PADDED, -2, inf, 0, 0), 0);
        }
    }
    run_case("diag_mask", c_diag_mask, R(KILN_TYPE_F32, 1500, 3, 1, 1, EC_CONT, 1100, 1, 0, 0), 0);
}

static void test_sort_arange(void) {
    static const enum kiln_type ST[] = { KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_I32, KILN_TYPE_BF16 };
    for (int t = 0; t < 4; t++) {
        for (int o = 0; o < 2; o++) {
            run_case("argsort", c_argsort, R(ST[t], 17, 5, 3, 1, EC_CONT, o, 0, 0, 0), 0);
            run_case("argsort", c_argsort, R(ST[t], 64, 3, 1, 2, EC_TRANS, o, 0, 0, 0), 0);
            run_case("argsort ties", c_argsort, R(ST[t], 33, 4, 1, 1, EC_PERM, o, 0, 4, 0), 0);
        }
        run_case("top_k", c_argsort, R(ST[t], 40, 6, 1, 1, EC_CONT, 0, 5, 0, 0), 0);
        run_case("top_k", c_argsort, R(ST[t], 9, 3, 2, 1, EC_TRANS, 0, 9, 3, 0), 0);
    }
    run_case("argsort", c_argsort, R(KILN_TYPE_F32, 1, 4, 1, 1, EC_CONT, 0, 0, 0, 0), 0);
    run_case("argsort", c_argsort, R(KILN_TYPE_F32, 4099, 2, 1, 1, EC_CONT, 1, 0, 0, 0), 0);
    run_case("top_k", c_argsort, R(KILN_TYPE_F32, 65537, 1, 1, 1, EC_CONT, 0, 40, 0, 0), 0);
    run_case("arange", c_arange, R(KILN_TYPE_F32, 0, 0, 0, 0, EC_CONT, 0, 40, 1, 0), 1e-14);
    run_case("arange", c_arange, R(KILN_TYPE_F32, 0, 0, 0, 0, EC_CONT, -13, 17, 3, 0), 1e-14);
    run_case("arange", c_arange, R(KILN_TYPE_F32, 0, 0, 0, 0, EC_CONT, 2, 3, 7, 0), 1e-14);
    run_case("arange", c_arange, R(KILN_TYPE_F32, 0, 0, 0, 0, EC_CONT, 0, 262148, 4, 0), 1e-14);
}

/* ---------------------------------------------------------- edge cases */

static void test_special(void) {
    tu_case = "special values";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    /* argmax: first maximum wins, NaN ignored; argsort puts NaN last (asc) */
    const float xs[6] = { 1.0f, NAN, 3.0f, 3.0f, -INFINITY, 2.0f };
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 6, 1);
    memcpy(a->data, xs, sizeof xs);
    struct kiln_tensor * am = kiln_argmax(ctx, a);
    struct kiln_tensor * as = kiln_argsort(ctx, a, KILN_SORT_ORDER_ASC);
    struct kiln_tensor * s = kiln_sum(ctx, a);
    struct kiln_tensor * dm = kiln_diag_mask_inf(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 3, 3), 0);
    kiln_set_f32(dm->src[0], 1.0f);
    CHECK(tu_compute(ctx, am, 2) == 0 && tu_compute(ctx, as, 2) == 0 && tu_compute(ctx, s, 1) == 0 && tu_compute(ctx, dm, 3) == 0, "compute");
    CHECK(kiln_get_i32_1d(am, 0) == 2, "argmax: first of equal maxima, NaN skipped (got %d)", kiln_get_i32_1d(am, 0));
    const int32_t want[6] = { 4, 0, 5, 2, 3, 1 };
    CHECK(memcmp(as->data, want, sizeof want) == 0, "argsort with -inf, ties and NaN");
    CHECK(isnan(kiln_get_f32_1d(s, 0)), "sum propagates NaN");
    const float * D = (const float *) dm->data;
    CHECK(isinf(D[1]) && D[1] < 0 && isinf(D[2]) && isinf(D[5]) && D[3] == 1.0f && D[4] == 1.0f && D[0] == 1.0f, "diag_mask_inf writes -inf above the diagonal");
    kiln_free(ctx);
}

static void test_empty(void) {
    tu_case = "empty";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * e = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 0, 3);
    struct kiln_tensor * s = kiln_sum(ctx, e);
    struct kiln_tensor * sr = kiln_sum_rows(ctx, e);
    struct kiln_tensor * as = kiln_argsort(ctx, e, KILN_SORT_ORDER_ASC);
    struct kiln_tensor * c = kiln_concat(ctx, e, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 2, 3), 0);
    struct kiln_tensor * ids = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 0);
    struct kiln_tensor * gr = kiln_get_rows(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3), ids);
    struct kiln_tensor * grb = kiln_get_rows_back(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 0), ids, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3));
    struct kiln_tensor * rb = kiln_repeat_back(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 0, 3), kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 2, 3));
    CHECK(s && sr && as && c && gr && grb && rb, "constructors accept empty dims: %s", kiln_last_error());
    kiln_set_f32(c->src[1], 2.0f);
    struct kiln_cgraph * g = kiln_new_graph(ctx);
    struct kiln_tensor * outs[] = { s, sr, as, c, gr, grb, rb };
    for (int i = 0; i < 7; i++) kiln_build_forward_expand(g, outs[i]);
    CHECK(kiln_graph_compute_with_ctx(ctx, g, 4) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error());
    CHECK(kiln_get_f32_1d(s, 0) == 0.0f && kiln_get_f32_1d(sr, 2) == 0.0f, "sums of nothing are 0");
    CHECK(kiln_get_f32_1d(grb, 5) == 0.0f && kiln_get_f32_1d(rb, 5) == 0.0f, "back ops of nothing are 0");
    CHECK(kiln_get_f32_1d(c, 5) == 2.0f, "concat with an empty part");
    kiln_free(ctx);
}

static void test_bad_index(void) {
    tu_case = "get_rows out of range";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 4, 3);
    struct kiln_tensor * ids = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 2);
    kiln_set_i32_1d(ids, 0, 1);
    kiln_set_i32_1d(ids, 1, 3);
    struct kiln_tensor * r = kiln_get_rows(ctx, a, ids);
    CHECK(tu_compute(ctx, r, 2) == KILN_STATUS_INVALID_ARG && strstr(kiln_last_error(), "outside"), "index 3 of 3 rows: %s", kiln_last_error());
    kiln_set_i32_1d(ids, 1, -1);
    CHECK(tu_compute(ctx, r, 1) == KILN_STATUS_INVALID_ARG, "negative index");
    kiln_free(ctx);
}

static void test_get_rows_quant(void) {
    tu_case = "get_rows quantized";
    static const enum kiln_type Q[] = { KILN_TYPE_Q8_0, KILN_TYPE_Q4_0, KILN_TYPE_Q6_K };
    for (int q = 0; q < 3; q++) {
        struct kiln_context * ctx = tu_ctx(1 << 22);
        const struct kiln_type_traits * tt = kiln_get_type_traits(Q[q]);
        struct kiln_tensor * a = kiln_new_tensor_2d(ctx, Q[q], 256, 4);
        memset(a->data, 0, kiln_nbytes(a));
        struct kiln_tensor * ids = kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 3);
        kiln_set_i32(ids, 2);
        struct kiln_tensor * r = kiln_get_rows(ctx, a, ids);
        CHECK(r && r->type == KILN_TYPE_F32, "get_rows on %s builds an f32 result", kiln_type_name(Q[q]));
        enum kiln_status st = tu_compute(ctx, r, 2);
        if (!tt->to_float) {
            CHECK(st == KILN_STATUS_UNSUPPORTED && strstr(kiln_last_error(), kiln_type_name(Q[q])), "unsupported: %s", kiln_last_error());
        } else if (tt->from_float_ref) {
            /* quantize known rows, gather, compare with the dequantized rows */
            float src[1024], deq[1024];
            for (int i = 0; i < 1024; i++) src[i] = sinf((float) i * 0.37f);
            tt->from_float_ref(src, a->data, 1024);
            tt->to_float(a->data, deq, 1024);
            kiln_set_i32_1d(ids, 0, 3); kiln_set_i32_1d(ids, 1, 0); kiln_set_i32_1d(ids, 2, 3);
            CHECK(tu_compute(ctx, r, 2) == KILN_STATUS_SUCCESS, "compute: %s", kiln_last_error());
            const float * o = (const float *) r->data;
            CHECK(memcmp(o, deq + 768, 1024) == 0 && memcmp(o + 256, deq, 1024) == 0, "rows are the dequantized rows");
        }
        kiln_free(ctx);
    }
}

static void test_bad_input(void) {
    tu_case = "bad input";
    struct kiln_context * ctx = tu_ctx(1 << 20);
    struct kiln_tensor * a = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 4, 3);
    struct kiln_tensor * b = kiln_new_tensor_3d(ctx, KILN_TYPE_F32, 6, 5, 3);
    struct kiln_tensor * ai = kiln_new_tensor_3d(ctx, KILN_TYPE_I32, 6, 4, 3);
    struct kiln_tensor * aq = kiln_new_tensor_2d(ctx, KILN_TYPE_Q8_0, 32, 2);
    struct kiln_tensor * ids = kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 2, 3);
    struct kiln_tensor * idf = kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 2, 3);
#define BAD(expr, needle) do { kiln_clear_error(); CHECK((expr) == NULL && strstr(kiln_last_error(), needle) != NULL, \
        "%s -> NULL with '%s' (got '%s')", #expr, needle, kiln_last_error()); } while (0)
    BAD(kiln_sum(ctx, NULL), "NULL");
    BAD(kiln_sum(ctx, ai), "i32");
    BAD(kiln_sum_rows(ctx, aq), "q8_0");
    BAD(kiln_mean(ctx, ai), "mean");
    BAD(kiln_argmax(ctx, a), "matrix");
    BAD(kiln_argmax(ctx, NULL), "NULL");
    BAD(kiln_count_equal(ctx, a, b), "shapes differ");
    BAD(kiln_count_equal(ctx, a, ai), "must be f32");
    BAD(kiln_repeat(ctx, b, a), "does not broadcast");
    BAD(kiln_repeat(ctx, aq, a), "q8_0");
    BAD(kiln_repeat_back(ctx, a, b), "does not broadcast");
    BAD(kiln_repeat_back(ctx, NULL, a), "NULL");
    BAD(kiln_concat(ctx, a, b, 0), "differs");
    BAD(kiln_concat(ctx, a, b, 4), "dim 4");
    BAD(kiln_concat(ctx, a, ai, 1), "must be f32");
    BAD(kiln_get_rows(ctx, a, idf), "must be i32");
    BAD(kiln_get_rows(ctx, a, kiln_new_tensor_2d(ctx, KILN_TYPE_I32, 2, 2)), "do not match");
    BAD(kiln_get_rows(ctx, NULL, ids), "NULL");
    BAD(kiln_get_rows_back(ctx, a, ids, a), "do not fit");
    BAD(kiln_get_rows_back(ctx, kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 6, 2), kiln_new_tensor_1d(ctx, KILN_TYPE_I32, 2), kiln_new_tensor_2d(ctx, KILN_TYPE_F32, 5, 9)), "do not fit");
    BAD(kiln_diag(ctx, a), "ne1 == 1");
    BAD(kiln_diag_mask_inf(ctx, ai, 0), "i32");
    BAD(kiln_diag_mask_zero_inplace(ctx, NULL, 0), "NULL");
    BAD(kiln_arange(ctx, 5, 1, 1), "greater than start");
    BAD(kiln_arange(ctx, 0, 1, 0), "positive");
    BAD(kiln_arange(ctx, 0, NAN, 1), "finite");
    BAD(kiln_argsort(ctx, aq, KILN_SORT_ORDER_ASC), "q8_0");
    BAD(kiln_argsort(ctx, a, (enum kiln_sort_order) 7), "order");
    BAD(kiln_top_k(ctx, a, 7), "k = 7");
    BAD(kiln_top_k(ctx, a, -1), "k = -1");
    BAD(kiln_pad(ctx, a, -1, 0, 0, 0), "negative");
    BAD(kiln_pad(ctx, aq, 1, 0, 0, 0), "q8_0");
    BAD(kiln_pad_reflect_1d(ctx, a, 6, 0), "padding");
    BAD(kiln_pad_reflect_1d(ctx, ai, 1, 1), "i32");
    BAD(kiln_upscale(ctx, a, 0), "scale_factor");
    BAD(kiln_upscale_ext(ctx, a, 5, 4, 3, 1), "smaller");
    BAD(kiln_upscale_ext(ctx, NULL, 5, 4, 3, 1), "NULL");
#undef BAD
    kiln_free(ctx);
}

int main(void) {
    test_reductions();
    test_shape_ops();
    test_indexing();
    test_sort_arange();
    test_special();
    test_empty();
    test_bad_index();
    test_get_rows_quant();
    test_bad_input();
    printf("%d op cases\n", ec_cases);
    return tu_finish();
}
