/*
 * test_export_lora_tool.c — build/bin/kiln-export-lora end to end: a base
 * GGUF written here (F32, F16 and Q8_0 weights, an embedding, tensors no
 * adapter touches) and two adapters (F32 at scale 1, F16 at 0.5, adapting
 * overlapping sets of weights) are merged; every merged value is checked
 * against W + sum s B A computed here in double (F32 weights stay F32 within
 * float rounding; F16 and Q8_0 weights come out F16 within half an F16 step,
 * as llama.cpp's export-lora writes them); untouched tensors are copied byte
 * for byte and the metadata survives with general.file_type 1. Quantized
 * adapters, another architecture, shapes that do not fit and adapter
 * tensors without a base weight fail with a non-zero exit.
 */
#include "util/test_util.h"
#include "kiln-gguf.h"

#ifndef KILN_TOOLS_BUILT
int main(void) {
    printf("tools are not built in this configuration (wasm, or KILN_BUILD_TOOLS=OFF): skipped\n");
    return 0;
}
#else
#include <math.h>
#include "util/tool_run.h"

static char tool[4096 + 64];

static int run_tool(const char * args) { return tool_run(tool, args); }

static struct kiln_tensor * add(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name, enum kiln_type t,
                                int64_t ne0, int64_t ne1, float amp) {
    struct kiln_tensor * x = ne1 ? kiln_new_tensor_2d(ctx, t, ne0, ne1) : kiln_new_tensor_1d(ctx, t, ne0);
    kiln_set_name(x, name);
    float row[256];
    for (int64_t r = 0; r < (ne1 ? ne1 : 1); r++) {
        for (int64_t j = 0; j < ne0; j++) row[j] = tu_rand_uniform(-amp, amp);
        char * dst = (char *) x->data + r * kiln_row_size(t, ne0);
        if (t == KILN_TYPE_F32) memcpy(dst, row, sizeof(float) * (size_t) ne0);
        else kiln_get_type_traits(t)->from_float_ref(row, dst, ne0);
    }
    kiln_gguf_add_tensor(g, x);
    return x;
}

static struct kiln_gguf_context * adapter_ctx(const char * arch, float alpha) {
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_val_str(g, "general.architecture", arch);
    kiln_gguf_set_val_str(g, "general.type", "adapter");
    kiln_gguf_set_val_str(g, "adapter.type", "lora");
    kiln_gguf_set_val_f32(g, "adapter.lora.alpha", alpha);
    return g;
}

/* a tensor's row r as doubles (any type with to_float) */
static void row_f64(const struct kiln_tensor * t, int64_t r, double * out) {
    float tmp[256];
    const char * src = (const char *) t->data + r * t->nb[1];
    if (t->type == KILN_TYPE_F32) memcpy(tmp, src, sizeof(float) * (size_t) t->ne[0]);
    else kiln_get_type_traits(t->type)->to_float(src, tmp, t->ne[0]);
    for (int64_t j = 0; j < t->ne[0]; j++) out[j] = tmp[j];
}

struct lora { struct kiln_context * ctx; double s; };

/* the merged weight in double: W + sum of s * delta over the adapters holding it */
static double * reference(const struct kiln_tensor * w, const struct lora * ls, int n) {
    const int64_t ne0 = w->ne[0], ne1 = w->ne[1];
    double * ref = malloc(sizeof(double) * (size_t) (ne0 * ne1));
    for (int64_t o = 0; o < ne1; o++) row_f64(w, o, ref + o * ne0);
    const bool embd = !strcmp(w->name, "token_embd.weight");
    for (int i = 0; i < n; i++) {
        char na[96], nb[96];
        snprintf(na, sizeof na, "%s.lora_a", w->name);
        snprintf(nb, sizeof nb, "%s.lora_b", w->name);
        const struct kiln_tensor * a = kiln_get_tensor(ls[i].ctx, na), * b = kiln_get_tensor(ls[i].ctx, nb);
        if (!a) continue;
        const int64_t r = b->ne[0];
        double ar[256], br[256];
        for (int64_t o = 0; o < ne1; o++) {
            for (int64_t j = 0; j < ne0; j++) {
                double d = 0;
                for (int64_t k = 0; k < r; k++) {
                    if (embd) { row_f64(a, o, ar); row_f64(b, j, br); d += ar[k] * br[k]; }
                    else { row_f64(a, k, ar); row_f64(b, o, br); d += br[k] * ar[j]; }
                }
                ref[o * ne0 + j] += ls[i].s * d;
            }
        }
    }
    return ref;
}

int main(void) {
    tu_case = "kiln-export-lora";
    if (!tool_path("kiln-export-lora", tool, sizeof tool)) { CHECK(0, "tool not built at %s", tool); return tu_finish(); }
    char base[256], a1[256], a2[256], out[256], bad[256], args[2048];
    const int pid = (int) getpid();
    snprintf(base, sizeof base, "/tmp/kiln_xlora_%d_base.gguf", pid);
    snprintf(a1, sizeof a1, "/tmp/kiln_xlora_%d_a1.gguf", pid);
    snprintf(a2, sizeof a2, "/tmp/kiln_xlora_%d_a2.gguf", pid);
    snprintf(out, sizeof out, "/tmp/kiln_xlora_%d_out.gguf", pid);
    snprintf(bad, sizeof bad, "/tmp/kiln_xlora_%d_bad.gguf", pid);

    tu_seed(22);
    struct kiln_context * ctx = tu_ctx(16 << 20);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_val_str(g, "general.architecture", "llama");
    kiln_gguf_set_val_u32(g, "general.file_type", 7);
    kiln_gguf_set_val_u32(g, "llama.block_count", 1);
    add(ctx, g, "token_embd.weight", KILN_TYPE_F32, 64, 100, 1.0f);
    add(ctx, g, "blk.0.attn_q.weight", KILN_TYPE_F32, 64, 48, 0.5f);
    add(ctx, g, "blk.0.attn_k.weight", KILN_TYPE_F16, 64, 32, 0.5f);
    add(ctx, g, "blk.0.attn_v.weight", KILN_TYPE_Q8_0, 64, 32, 0.5f);
    add(ctx, g, "blk.0.ffn_down.weight", KILN_TYPE_Q8_0, 64, 64, 0.5f);
    add(ctx, g, "output_norm.weight", KILN_TYPE_F32, 64, 0, 1.0f);
    CHECK(kiln_gguf_write_to_file(g, base, false), "write base");

    /* adapter 1: F32 rank 4, alpha 8, on q, k, v and the embedding */
    struct kiln_gguf_context * g1 = adapter_ctx("llama", 8.0f);
    const char * w1[] = { "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight" };
    const int64_t o1[] = { 48, 32, 32 };
    char nm[96];
    for (int i = 0; i < 3; i++) {
        snprintf(nm, sizeof nm, "%s.lora_a", w1[i]); add(ctx, g1, nm, KILN_TYPE_F32, 64, 4, 0.3f);
        snprintf(nm, sizeof nm, "%s.lora_b", w1[i]); add(ctx, g1, nm, KILN_TYPE_F32, 4, o1[i], 0.3f);
    }
    add(ctx, g1, "token_embd.weight.lora_a", KILN_TYPE_F32, 4, 100, 0.3f);
    add(ctx, g1, "token_embd.weight.lora_b", KILN_TYPE_F32, 4, 64, 0.3f);
    CHECK(kiln_gguf_write_to_file(g1, a1, false), "write adapter 1");
    /* adapter 2: F16 rank 2, no alpha (scale as given), on q and v */
    struct kiln_gguf_context * g2 = adapter_ctx("llama", 0.0f);
    add(ctx, g2, "blk.0.attn_q.weight.lora_a", KILN_TYPE_F16, 64, 2, 0.3f);
    add(ctx, g2, "blk.0.attn_q.weight.lora_b", KILN_TYPE_F16, 2, 48, 0.3f);
    add(ctx, g2, "blk.0.attn_v.weight.lora_a", KILN_TYPE_F16, 64, 2, 0.3f);
    add(ctx, g2, "blk.0.attn_v.weight.lora_b", KILN_TYPE_F16, 2, 32, 0.3f);
    CHECK(kiln_gguf_write_to_file(g2, a2, false), "write adapter 2");

    snprintf(args, sizeof args, "-m %s --lora %s --lora-scaled %s 0.5 -o %s", base, a1, a2, out);
    CHECK(run_tool(args) == 0, "merge runs");
    struct kiln_context * mc = NULL, * c1 = NULL, * c2 = NULL, * bc = NULL;
    struct kiln_gguf_init_params p = { .no_alloc = false, .ctx = &mc };
    struct kiln_gguf_context * mg = kiln_gguf_init_from_file(out, p);
    p.ctx = &c1;
    struct kiln_gguf_context * ag1 = kiln_gguf_init_from_file(a1, p);
    p.ctx = &c2;
    struct kiln_gguf_context * ag2 = kiln_gguf_init_from_file(a2, p);
    p.ctx = &bc;
    struct kiln_gguf_context * bg = kiln_gguf_init_from_file(base, p);
    if (!CHECK(mg && ag1 && ag2 && bg, "read the files back: %s", kiln_last_error())) return tu_finish();
    const int64_t ft = kiln_gguf_find_key(mg, "general.file_type"), bk = kiln_gguf_find_key(mg, "llama.block_count");
    CHECK(ft >= 0 && kiln_gguf_get_val_u32(mg, ft) == 1 && bk >= 0 && kiln_gguf_get_val_u32(mg, bk) == 1,
          "metadata copied, general.file_type 1");
    CHECK(kiln_gguf_get_n_tensors(mg) == 6, "every tensor written (%lld)", (long long) kiln_gguf_get_n_tensors(mg));

    const struct lora ls[] = { { c1, 1.0 * 8.0 / 4.0 }, { c2, 0.5 } };
    const char * merged[] = { "token_embd.weight", "blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight" };
    const enum kiln_type want[] = { KILN_TYPE_F32, KILN_TYPE_F32, KILN_TYPE_F16, KILN_TYPE_F16 };
    for (int i = 0; i < 4; i++) {
        const struct kiln_tensor * w = kiln_get_tensor(bc, merged[i]), * m = kiln_get_tensor(mc, merged[i]);
        if (!CHECK(w && m && m->type == want[i] && m->ne[0] == w->ne[0] && m->ne[1] == w->ne[1], "%s merged as %s", merged[i],
                   kiln_type_name(want[i]))) continue;
        double * ref = reference(w, ls, 2);
        double worst = 0, moved = 0;
        double row[256], wrow[256];
        for (int64_t o = 0; o < w->ne[1]; o++) {
            row_f64(m, o, row);
            row_f64(w, o, wrow);
            for (int64_t j = 0; j < w->ne[0]; j++) {
                const double r = ref[o * w->ne[0] + j];
                /* F32: a few float roundings; F16: half a step of F16 plus float rounding */
                const double tol = want[i] == KILN_TYPE_F32 ? 4e-7 * (fabs(r) + 1) : fabs(r) * (1.0 / 2048) * 1.01 + 1e-7;
                worst = fmax(worst, fabs(row[j] - r) / tol);
                moved = fmax(moved, fabs(r - wrow[j]));
            }
        }
        CHECK(worst <= 1.0 && moved > 0.05, "%s = W + sum s B A (worst error %.2f of the tolerance; the adapters move it by %.3f)",
              merged[i], worst, moved);
        free(ref);
    }
    const char * copied[] = { "blk.0.ffn_down.weight", "output_norm.weight" };
    for (int i = 0; i < 2; i++) {
        const struct kiln_tensor * w = kiln_get_tensor(bc, copied[i]), * m = kiln_get_tensor(mc, copied[i]);
        CHECK(w && m && w->type == m->type && kiln_nbytes(w) == kiln_nbytes(m) && !memcmp(w->data, m->data, kiln_nbytes(w)),
              "%s copied byte for byte", copied[i]);
    }

    /* refusals */
    struct { const char * what; const char * arch; enum kiln_type t; int64_t a0, a1, b0, b1; const char * name; } cases[] = {
        { "a Q8_0 adapter", "llama", KILN_TYPE_Q8_0, 64, 32, 32, 48, "blk.0.attn_q.weight" },
        { "another architecture", "qwen3", KILN_TYPE_F32, 64, 4, 4, 48, "blk.0.attn_q.weight" },
        { "a transposed pair", "llama", KILN_TYPE_F32, 4, 64, 48, 4, "blk.0.attn_q.weight" },
        { "a weight the base lacks", "llama", KILN_TYPE_F32, 64, 4, 4, 48, "blk.7.attn_q.weight" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct kiln_gguf_context * gb = adapter_ctx(cases[i].arch, 8.0f);
        snprintf(nm, sizeof nm, "%s.lora_a", cases[i].name); add(ctx, gb, nm, cases[i].t, cases[i].a0, cases[i].a1, 0.3f);
        snprintf(nm, sizeof nm, "%s.lora_b", cases[i].name); add(ctx, gb, nm, cases[i].t, cases[i].b0, cases[i].b1, 0.3f);
        kiln_gguf_write_to_file(gb, bad, false);
        kiln_gguf_free(gb);
        snprintf(args, sizeof args, "-m %s --lora %s -o %s", base, bad, out);
        CHECK(run_tool(args) == 1, "%s refused", cases[i].what);
    }
    snprintf(args, sizeof args, "-m %s -o %s", base, out);
    CHECK(run_tool(args) == 2, "no adapter: usage");
    snprintf(args, sizeof args, "-m %s --lora /no/such.gguf -o %s", base, out);
    CHECK(run_tool(args) == 1, "a missing adapter file");

    kiln_gguf_free(mg); kiln_gguf_free(ag1); kiln_gguf_free(ag2); kiln_gguf_free(bg);
    kiln_free(mc); kiln_free(c1); kiln_free(c2); kiln_free(bc);
    kiln_gguf_free(g); kiln_gguf_free(g1); kiln_gguf_free(g2);
    kiln_free(ctx);
    remove(base); remove(a1); remove(a2); remove(out); remove(bad);
    return tu_finish();
}
#endif
