/*
 * kiln_wasm_autograd.c — gradients and optimizer steps for the JS tensor
 * API (requiresGrad / backward / grad / optimizers).
 *
 * A tensor handle made from data can be marked as a parameter
 * (kw_param_set): it gets the PARAM flag and a gradient accumulator of its
 * own shape, zeroed. kw_backward builds the loss's forward graph, lets the
 * engine's kiln_build_backward_expand append the gradient computation with
 * the parameters' accumulators as grad_accs (so a backward pass adds into
 * them in place: gradients accumulate until kw_param_zero_grad), and runs
 * the whole graph. The backward nodes live in a context of their own that
 * is freed when the pass ends; nothing of it outlives the call.
 *
 * Optimizers (kw_optim_*) keep per-parameter state (AdamW moments, SGD
 * momentum buffers, step counts) and update parameters in place with graph
 * ops: opt_step_adamw, or SGD as plain ops ending in a cpy into the
 * parameter. Hyper-parameters come with every step so JS can change them.
 *
 * Nothing aborts: bad handles, non-scalar losses, ops without a backward
 * rule are KW_E_* codes with a message in kw_last_error().
 */
#include "kiln_wasm_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ parameters */

static int * g_params = NULL; /* slots of live entries with requiresGrad */
static int g_n_params = 0, g_cap_params = 0;
static int * g_reached = NULL; /* handles of the parameters the last backward pass reached */
static int g_n_reached = 0, g_cap_reached = 0;

static bool grow(int ** a, int * cap, int need) {
    if (need <= *cap) return true;
    const int nc = *cap ? *cap * 2 : 64;
    int * p = (int *) realloc(*a, (size_t) (nc > need ? nc : need) * sizeof *p);
    if (!p) return false;
    *a = p;
    *cap = nc > need ? nc : need;
    return true;
}

static int param_slot_of(const struct kiln_tensor * t) {
    for (int i = 0; i < g_n_params; i++) if (kw_entry_slot(g_params[i])->t == t) return g_params[i];
    return 0;
}

static void shape_str(const struct kiln_tensor * t, char * buf, size_t n) {
    snprintf(buf, n, "%s [%lld, %lld, %lld, %lld]", kiln_type_name(t->type), (long long) t->ne[0], (long long) t->ne[1],
             (long long) t->ne[2], (long long) t->ne[3]);
}

void kw_param_release(struct kw_entry * e) {
    for (int i = 0; i < g_n_params; i++) {
        if (kw_entry_slot(g_params[i]) == e) { g_params[i] = g_params[--g_n_params]; break; }
    }
    if (e->gctx) kiln_free(e->gctx);
    free(e->gbuf);
    e->gctx = NULL;
    e->gbuf = NULL;
    e->grad = NULL;
    e->has_grad = 0;
}

/* Marks a tensor made from data as a parameter: gradients of losses
 * computed from it are accumulated for it. Idempotent. */
KW_EXPORT int kw_param_set(int h) {
    const int slot = kw_slot(h, KW_KIND_TENSOR, "requiresGrad");
    if (slot < 0) return slot;
    struct kw_entry * e = kw_entry_slot(slot);
    if (e->grad) return KW_OK;
    struct kiln_tensor * t = e->t;
    char s[128];
    shape_str(t, s, sizeof s);
    if (t->op != KILN_OP_NONE || t->view_src || !e->buf) {
        return kw_fail(KW_E_INVALID, "requiresGrad: only tensors made from data (kiln.tensor) can require gradients, "
                       "not the result of an op, a view or a model weight");
    }
    if (t->type != KILN_TYPE_F32) return kw_fail(KW_E_INVALID, "requiresGrad: only f32 tensors can have gradients, not %s", s);
    if (!grow(&g_params, &g_cap_params, g_n_params + 1)) return kw_fail(KW_E_NOMEM, "requiresGrad: out of memory");
    struct kiln_context * gctx = kw_new_ctx(1, 0);
    struct kiln_tensor * g = gctx ? kiln_new_tensor(gctx, KILN_TYPE_F32, KILN_MAX_DIMS, t->ne) : NULL;
    void * buf = NULL;
    if (!g || posix_memalign(&buf, 64, kiln_nbytes(t)) != 0 || !buf) {
        if (gctx) kiln_free(gctx);
        return kw_fail(KW_E_NOMEM, "requiresGrad: out of memory for the gradient of a %s tensor", s);
    }
    memset(buf, 0, kiln_nbytes(t));
    g->data = buf;
    kiln_set_name(g, "grad");
    e->gctx = gctx;
    e->gbuf = buf;
    e->grad = g;
    e->has_grad = 0;
    kiln_set_param(e->ctx, t);
    g_params[g_n_params++] = slot;
    return KW_OK;
}

/* the slot of a parameter's handle, or a KW_E_* code */
static int param_slot(int h, const char * fn) {
    const int slot = kw_slot(h, KW_KIND_TENSOR, fn);
    if (slot < 0) return slot;
    if (!kw_entry_slot(slot)->grad) return kw_fail(KW_E_INVALID, "%s: the tensor does not require gradients (requiresGrad)", fn);
    return slot;
}

KW_EXPORT int kw_param_is(int h) {
    const int slot = kw_slot(h, KW_KIND_TENSOR, "is_param");
    return slot < 0 ? slot : kw_entry_slot(slot)->grad != NULL;
}

KW_EXPORT int kw_param_has_grad(int h) {
    const int slot = param_slot(h, "grad");
    return slot < 0 ? slot : kw_entry_slot(slot)->has_grad;
}

/* A new handle that views the accumulated gradient (it reads the current
 * values whenever it is computed) and keeps the parameter alive. */
KW_EXPORT int kw_param_grad(int h) {
    const int pslot = param_slot(h, "grad");
    if (pslot < 0) return pslot;
    const int slot = kw_entry_new(KW_KIND_TENSOR);
    if (slot < 0) return slot;
    struct kw_entry * pe = kw_entry_slot(pslot); /* after kw_entry_new: the table may have moved */
    struct kw_entry * e = kw_entry_slot(slot);
    e->ctx = kw_new_ctx(2, 0);
    e->t = e->ctx ? kiln_view_tensor(e->ctx, pe->grad) : NULL;
    if (!e->t) { kw_entry_discard(slot); return kw_fail_kiln(KW_E_NOMEM, "grad"); }
    kw_entry_add_dep(slot, pslot);
    const int rc = kw_alloc_ctx(e);
    if (rc < 0) { kw_entry_discard(slot); return rc; }
    return kw_handle_of(slot);
}

KW_EXPORT int kw_param_zero_grad(int h) {
    const int slot = param_slot(h, "zeroGrad");
    if (slot < 0) return slot;
    struct kw_entry * e = kw_entry_slot(slot);
    memset(e->gbuf, 0, kiln_nbytes(e->grad));
    return KW_OK;
}

/* ------------------------------------------------------------ backward */

static bool retryable(const char * msg) {
    return strstr(msg, "is full") != NULL || strstr(msg, "out of memory") != NULL;
}

/* Adds d(loss)/d(param) into the accumulator of every parameter the loss
 * depends on (through ops with backward rules). Returns how many
 * parameters were reached; their handles are kw_backward_param(0..n-1). */
KW_EXPORT int kw_backward(int h, int job_id) {
    g_n_reached = 0;
    struct kiln_tensor * loss = kw_tensor(h, "backward");
    if (!loss) return KW_E_HANDLE;
    char s[128];
    shape_str(loss, s, sizeof s);
    if (loss->type != KILN_TYPE_F32 || kiln_nelements(loss) != 1) {
        return kw_fail(KW_E_INVALID, "backward: the loss must be a scalar (one f32 element), not %s; reduce it first (sum, mean)", s);
    }
    if (loss->op == KILN_OP_NONE) {
        /* a one-element parameter is its own loss: d(loss)/d(loss) = 1 */
        const int ps = (loss->flags & KILN_TENSOR_FLAG_PARAM) ? param_slot_of(loss) : 0;
        if (!ps || !grow(&g_reached, &g_cap_reached, 1)) {
            return kw_fail(KW_E_INVALID, "backward: the loss is a leaf tensor without requiresGrad; it must be computed from tensors with requiresGrad");
        }
        struct kw_entry * e = kw_entry_slot(ps);
        ((float *) e->grad->data)[0] += 1.0f;
        e->has_grad = 1;
        g_reached[g_n_reached++] = kw_handle_of(ps);
        return 1;
    }
    for (size_t size = 2048;; size *= 4) {
        const bool last = size >= (1u << 20);
        /* room for the graph, and for the backward nodes (a few per forward node) */
        struct kiln_init_params p = { kiln_graph_overhead_custom(size, true) + size * kiln_tensor_overhead() + 65536, NULL, true };
        struct kiln_context * ctx = kiln_init(p);
        if (!ctx) return kw_fail_kiln(KW_E_NOMEM, "backward");
        struct kiln_cgraph * g = kiln_new_graph_custom(ctx, size, true);
        if (!g) { kiln_free(ctx); return kw_fail_kiln(KW_E_NOMEM, "backward"); }
        kiln_clear_error();
        if (kiln_build_forward_expand(g, loss) != KILN_STATUS_SUCCESS) {
            kiln_free(ctx);
            if (!last) continue;
            return kw_fail_kiln(KW_E_NOMEM, "backward: graph");
        }
        const int n_fwd = kiln_graph_n_nodes(g);
        struct kiln_tensor ** nodes = kiln_graph_nodes(g);
        struct kiln_tensor ** accs = (struct kiln_tensor **) calloc((size_t) n_fwd + 1, sizeof *accs);
        if (!accs) { kiln_free(ctx); return kw_fail(KW_E_NOMEM, "backward: out of memory"); }
        int n_par = 0;
        for (int i = 0; i < n_fwd; i++) {
            if (!(nodes[i]->flags & KILN_TENSOR_FLAG_PARAM)) continue;
            const int ps = param_slot_of(nodes[i]);
            if (ps) { accs[i] = kw_entry_slot(ps)->grad; n_par++; }
        }
        if (n_par == 0) {
            free(accs);
            kiln_free(ctx);
            return kw_fail(KW_E_INVALID, "backward: the loss does not depend on any tensor with requiresGrad");
        }
        /* the flag is only needed while the backward graph is built: the
         * same tensor may be an ordinary node of a later graph */
        kiln_set_loss(loss);
        const enum kiln_status st = kiln_build_backward_expand(ctx, g, accs);
        loss->flags &= ~KILN_TENSOR_FLAG_LOSS;
        if (st != KILN_STATUS_SUCCESS) {
            char msg[600];
            snprintf(msg, sizeof msg, "%s", kiln_last_error());
            free(accs);
            kiln_free(ctx);
            if (!last && retryable(msg)) continue;
            return kw_fail(st == KILN_STATUS_ALLOC_FAILED ? KW_E_NOMEM : KW_E_UNSUPPORTED, "%s", msg);
        }
        struct kw_entry tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.ctx = ctx;
        int rc = kw_alloc_ctx(&tmp);
        struct kiln_tensor * seed = kiln_graph_get_grad(g, loss);
        if (rc >= 0 && (!seed || !seed->data)) rc = kw_fail(KW_E_FAILED, "backward: the loss has no gradient seed");
        if (rc >= 0) {
            kiln_set_f32(seed, 1.0f);
            rc = kw_run_graph(g, job_id, "backward");
        }
        if (rc >= 0) {
            for (int i = 0; i < n_fwd; i++) {
                if (!accs[i] || kiln_graph_get_grad(g, nodes[i]) == accs[i]) continue; /* not reached */
                const int ps = param_slot_of(nodes[i]);
                if (!ps || !grow(&g_reached, &g_cap_reached, g_n_reached + 1)) continue;
                kw_entry_slot(ps)->has_grad = 1;
                g_reached[g_n_reached++] = kw_handle_of(ps);
            }
            rc = g_n_reached;
        }
        free(accs);
        free(tmp.buf);
        kiln_free(ctx);
        return rc;
    }
}

KW_EXPORT int kw_backward_param(int i) { return i >= 0 && i < g_n_reached ? g_reached[i] : 0; }

/* ------------------------------------------------------------ optimizers */

enum { KO_SGD = 0, KO_ADAMW = 1 };

struct ko_state {
    int slot, gen;           /* the parameter's entry */
    struct kiln_context * ctx;
    void * buf;
    struct kiln_tensor * m;  /* AdamW first moment, SGD momentum buffer */
    struct kiln_tensor * v;  /* AdamW second moment */
    double iter;             /* AdamW steps taken (bias correction) */
};

struct ko {
    int kind;
    struct ko_state * st;
    int n, cap;
};

static struct ko * optim_of(int h, const char * fn) { return (struct ko *) kw_object(h, KW_KIND_OPTIMIZER, fn); }

static void state_free(struct ko_state * s) {
    if (s->ctx) kiln_free(s->ctx);
    free(s->buf);
    memset(s, 0, sizeof *s);
}

static void optim_release(void * p) {
    struct ko * o = (struct ko *) p;
    for (int i = 0; i < o->n; i++) state_free(&o->st[i]);
    free(o->st);
    free(o);
}

KW_EXPORT int kw_optim_new(int kind) {
    if (kind != KO_SGD && kind != KO_ADAMW) return kw_fail(KW_E_INVALID, "optimizer: kind %d is neither sgd (0) nor adamw (1)", kind);
    struct ko * o = (struct ko *) calloc(1, sizeof *o);
    if (!o) return kw_fail(KW_E_NOMEM, "optimizer: out of memory");
    o->kind = kind;
    return kw_object_new(KW_KIND_OPTIMIZER, o, optim_release);
}

KW_EXPORT int kw_optim_free(int h) { return kw_object_free(h, KW_KIND_OPTIMIZER, "optimizer_free"); }

/* number of parameters the optimizer holds state for (tests) */
KW_EXPORT int kw_optim_n_states(int h) {
    struct ko * o = optim_of(h, "optimizer_states");
    return o ? o->n : KW_E_HANDLE;
}

/* drops the state of parameters that no longer exist */
static void optim_prune(struct ko * o) {
    for (int i = 0; i < o->n;) {
        struct kw_entry * e = kw_entry_slot(o->st[i].slot);
        if (e->gen == o->st[i].gen && e->grad) { i++; continue; }
        state_free(&o->st[i]);
        o->st[i] = o->st[--o->n];
    }
}

static struct ko_state * optim_state(struct ko * o, int slot, bool two) {
    struct kw_entry * e = kw_entry_slot(slot);
    for (int i = 0; i < o->n; i++) if (o->st[i].slot == slot && o->st[i].gen == e->gen) return &o->st[i];
    if (o->n == o->cap) {
        const int nc = o->cap ? o->cap * 2 : 16;
        struct ko_state * p = (struct ko_state *) realloc(o->st, (size_t) nc * sizeof *p);
        if (!p) { kw_fail(KW_E_NOMEM, "optimizer: out of memory"); return NULL; }
        o->st = p;
        o->cap = nc;
    }
    struct ko_state * s = &o->st[o->n];
    memset(s, 0, sizeof *s);
    s->slot = slot;
    s->gen = e->gen;
    s->ctx = kw_new_ctx(2, 0);
    const size_t nb = (kiln_nbytes(e->t) + 63) & ~(size_t) 63;
    if (!s->ctx || posix_memalign(&s->buf, 64, nb * (two ? 2 : 1)) != 0 || !s->buf) {
        s->buf = NULL;
        state_free(s);
        kw_fail(KW_E_NOMEM, "optimizer: out of memory for the state of a parameter");
        return NULL;
    }
    memset(s->buf, 0, nb * (two ? 2 : 1));
    s->m = kiln_new_tensor(s->ctx, KILN_TYPE_F32, KILN_MAX_DIMS, e->t->ne);
    s->v = two ? kiln_new_tensor(s->ctx, KILN_TYPE_F32, KILN_MAX_DIMS, e->t->ne) : NULL;
    if (!s->m || (two && !s->v)) { state_free(s); kw_fail_kiln(KW_E_NOMEM, "optimizer"); return NULL; }
    s->m->data = s->buf;
    if (two) s->v->data = (char *) s->buf + nb;
    o->n++;
    return s;
}

static bool finite_in(double x, double lo, double hi) { return isfinite(x) && x >= lo && x <= hi; }

/* One step over the parameters hs[0..n-1] that have a gradient (the others
 * are skipped, as PyTorch does). SGD (PyTorch's, no dampening/nesterov):
 * d = g + wd*p; with momentum b = momentum*b + d, d = b; p -= lr*d.
 * AdamW: the opt_step_adamw op (decoupled weight decay, bias correction by
 * the parameter's own step count). Returns the number of parameters
 * updated. */
KW_EXPORT int kw_optim_step(int ho, const int * hs, int n, double lr, double beta1, double beta2, double eps,
                            double wd, double momentum, int job_id) {
    struct ko * o = optim_of(ho, "optimizer step");
    if (!o) return KW_E_HANDLE;
    if (n < 0 || (n > 0 && !hs)) return kw_fail(KW_E_INVALID, "optimizer step: %d parameters", n);
    if (!finite_in(lr, 0, 1e9)) return kw_fail(KW_E_INVALID, "optimizer step: lr %g must be finite and >= 0", lr);
    if (!finite_in(wd, 0, 1e9)) return kw_fail(KW_E_INVALID, "optimizer step: weightDecay %g must be finite and >= 0", wd);
    if (o->kind == KO_ADAMW) {
        if (!finite_in(beta1, 0, 1) || beta1 >= 1 || !finite_in(beta2, 0, 1) || beta2 >= 1) {
            return kw_fail(KW_E_INVALID, "optimizer step: betas (%g, %g) must be in [0, 1)", beta1, beta2);
        }
        if (!finite_in(eps, 0, 1e9)) return kw_fail(KW_E_INVALID, "optimizer step: eps %g must be finite and >= 0", eps);
    } else if (!finite_in(momentum, 0, 1)) {
        return kw_fail(KW_E_INVALID, "optimizer step: momentum %g must be in [0, 1]", momentum);
    }
    /* every handle checked before anything changes */
    int * slots = (int *) malloc(sizeof(int) * (size_t) (n > 0 ? n : 1));
    if (!slots) return kw_fail(KW_E_NOMEM, "optimizer step: out of memory");
    int m = 0;
    for (int i = 0; i < n; i++) {
        const int slot = param_slot(hs[i], "optimizer step");
        if (slot < 0) { free(slots); return slot; }
        struct kw_entry * e = kw_entry_slot(slot);
        for (int j = 0; j < m; j++) {
            if (slots[j] == slot) { free(slots); return kw_fail(KW_E_INVALID, "optimizer step: a parameter is listed twice"); }
        }
        if (e->has_grad) slots[m++] = slot;
    }
    optim_prune(o);
    if (m == 0) { free(slots); return 0; }

    const size_t gsize = 16 * (size_t) m + 16;
    struct kiln_context * ctx = kw_new_ctx(10 * (size_t) m + 4, kiln_graph_overhead_custom(gsize, false) + 4096);
    struct kiln_cgraph * g = ctx ? kiln_new_graph_custom(ctx, gsize, false) : NULL;
    int * used = (int *) calloc((size_t) m, sizeof *used); /* state indices: o->st may move */
    struct kiln_tensor ** aps = (struct kiln_tensor **) calloc((size_t) m, sizeof *aps);
    int rc = (ctx && g && used && aps) ? KW_OK : kw_fail_kiln(KW_E_NOMEM, "optimizer step");
    kiln_clear_error();
    for (int i = 0; rc >= 0 && i < m; i++) {
        struct kw_entry * e = kw_entry_slot(slots[i]);
        struct kiln_tensor * p = e->t;
        struct kiln_tensor * last = NULL;
        if (o->kind == KO_ADAMW) {
            struct ko_state * s = optim_state(o, slots[i], true);
            if (!s) { rc = KW_E_NOMEM; break; }
            used[i] = (int) (s - o->st);
            aps[i] = kiln_new_tensor_1d(ctx, KILN_TYPE_F32, 7);
            last = aps[i] ? kiln_opt_step_adamw(ctx, p, e->grad, s->m, s->v, aps[i]) : NULL;
        } else {
            struct kiln_tensor * d = e->grad;
            if (wd != 0) d = kiln_add(ctx, d, kiln_scale(ctx, p, (float) wd));
            if (d && momentum != 0) {
                struct ko_state * s = optim_state(o, slots[i], false);
                if (!s) { rc = KW_E_NOMEM; break; }
                struct kiln_tensor * b = kiln_add(ctx, kiln_scale(ctx, s->m, (float) momentum), d);
                struct kiln_tensor * keep = b ? kiln_cpy(ctx, b, s->m) : NULL;
                if (!keep || kiln_build_forward_expand(g, keep) != KILN_STATUS_SUCCESS) { rc = kw_fail_kiln(KW_E_FAILED, "optimizer step"); break; }
                d = b;
            }
            struct kiln_tensor * upd = d ? kiln_sub(ctx, p, kiln_scale(ctx, d, (float) lr)) : NULL;
            last = upd ? kiln_cpy(ctx, upd, p) : NULL;
        }
        if (!last || kiln_build_forward_expand(g, last) != KILN_STATUS_SUCCESS) rc = kw_fail_kiln(KW_E_FAILED, "optimizer step");
    }
    struct kw_entry tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.ctx = ctx;
    if (rc >= 0) rc = kw_alloc_ctx(&tmp);
    if (rc >= 0 && o->kind == KO_ADAMW) {
        for (int i = 0; i < m; i++) {
            const double it = o->st[used[i]].iter + 1;
            float * a = (float *) aps[i]->data;
            a[0] = (float) lr; a[1] = (float) beta1; a[2] = (float) beta2; a[3] = (float) eps; a[4] = (float) wd;
            a[5] = (float) (1.0 / (1.0 - pow(beta1, it)));
            a[6] = (float) (1.0 / (1.0 - pow(beta2, it)));
        }
    }
    if (rc >= 0) rc = kw_run_graph(g, job_id, "optimizer step");
    if (rc >= 0) {
        if (o->kind == KO_ADAMW) for (int i = 0; i < m; i++) o->st[used[i]].iter += 1;
        rc = m;
    }
    free(tmp.buf);
    if (ctx) kiln_free(ctx);
    free(used);
    free(aps);
    free(slots);
    return rc;
}
