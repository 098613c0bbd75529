/*
 * test_quantize_tool.c — build/bin/kiln-quantize end to end: a small GGUF
 * written here is requantized; weights that fit become the target type with
 * exactly the bytes kiln_quantize_chunk gives, everything else is copied
 * byte for byte; metadata survives; bad usage and bad files fail cleanly.
 */
#include "util/test_util.h"
#include "kiln-gguf.h"

#ifndef KILN_TOOLS_BUILT
int main(void) {
    printf("tools are not built in this configuration (wasm, or KILN_BUILD_TOOLS=OFF): skipped\n");
    return 0;
}
#else
#include "util/tool_run.h"

static char tool[4096 + 64];

static int run_tool(const char * args) { return tool_run(tool, args); }

static struct kiln_tensor * add(struct kiln_context * ctx, struct kiln_gguf_context * g, const char * name,
                                enum kiln_type t, int nd, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = { ne0, ne1 };
    struct kiln_tensor * x = kiln_new_tensor(ctx, t, nd, ne);
    kiln_set_name(x, name);
    const int64_t n = kiln_nelements(x);
    for (int64_t i = 0; i < n; i++) {
        const float v = tu_rand_uniform(-1, 1);
        if (t == KILN_TYPE_F32) ((float *) x->data)[i] = v;
        else ((kiln_fp16_t *) x->data)[i] = kiln_fp32_to_fp16(v);
    }
    kiln_gguf_add_tensor(g, x);
    return x;
}

int main(void) {
    tu_case = "kiln-quantize";
    if (!tool_path("kiln-quantize", tool, sizeof tool)) { CHECK(0, "tool not built at %s", tool); return tu_finish(); }

    char in[256], out[256];
    snprintf(in, sizeof(in), "/tmp/kiln_qtool_%d_in.gguf", (int) getpid());
    snprintf(out, sizeof(out), "/tmp/kiln_qtool_%d_out.gguf", (int) getpid());

    tu_seed(5);
    struct kiln_init_params ip = { 1 << 20, NULL, false };
    struct kiln_context * ctx = kiln_init(ip);
    struct kiln_gguf_context * g = kiln_gguf_init_empty();
    kiln_gguf_set_val_str(g, "general.name", "tiny");
    kiln_gguf_set_val_u32(g, "general.file_type", 0);
    struct kiln_tensor * w   = add(ctx, g, "blk.0.attn_q.weight", KILN_TYPE_F32, 2, 256, 3);
    struct kiln_tensor * nrm = add(ctx, g, "blk.0.attn_norm.weight", KILN_TYPE_F32, 1, 256, 1);
    struct kiln_tensor * odd = add(ctx, g, "blk.0.ffn_down.weight", KILN_TYPE_F32, 2, 48, 2);
    struct kiln_tensor * bia = add(ctx, g, "blk.0.attn_q.bias", KILN_TYPE_F32, 2, 256, 2);
    struct kiln_tensor * h   = add(ctx, g, "token_embd.weight", KILN_TYPE_F16, 2, 256, 2);
    CHECK(kiln_gguf_write_to_file(g, in, false), "write input: %s", kiln_last_error());

    const char * types[] = { "q4_0", "q4_K", "iq4_xs", "q8_0" };
    for (int ti = 0; ti < 4; ti++) {
        char args[1024];
        snprintf(args, sizeof(args), "%s %s %s", in, out, types[ti]);
        CHECK(run_tool(args) == 0, "%s: exit 0", types[ti]);
        struct kiln_context * octx = NULL;
        struct kiln_gguf_init_params p = { false, &octx, false };
        struct kiln_gguf_context * og = kiln_gguf_init_from_file(out, p);
        CHECK(og != NULL, "%s: output readable: %s", types[ti], kiln_last_error());
        if (!og) continue;
        enum kiln_type tt = KILN_TYPE_COUNT;
        for (int t = 0; t < KILN_TYPE_COUNT; t++)
            if (kiln_type_is_valid(t) && !strcmp(kiln_type_name((enum kiln_type) t), types[ti])) tt = (enum kiln_type) t;
        const int64_t kn = kiln_gguf_find_key(og, "general.name");
        CHECK(kn >= 0 && !strcmp(kiln_gguf_get_val_str(og, kn), "tiny"), "%s: metadata kept", types[ti]);
        const int64_t kf = kiln_gguf_find_key(og, "general.file_type");
        const uint32_t want_ft = ti == 0 ? 2 : ti == 1 ? 14 : ti == 2 ? 30 : 7;
        CHECK(kf >= 0 && kiln_gguf_get_val_u32(og, kf) == want_ft, "%s: general.file_type", types[ti]);

        struct kiln_tensor * ow = kiln_get_tensor(octx, "blk.0.attn_q.weight");
        CHECK(ow && ow->type == tt && ow->ne[0] == 256 && ow->ne[1] == 3, "%s: 2-D weight converted", types[ti]);
        if (ow) {
            const size_t rs = kiln_row_size(tt, 256);
            uint8_t * want = malloc(rs * 3);
            kiln_quantize_chunk(tt, (const float *) w->data, want, 0, 3, 256, NULL);
            CHECK(memcmp(want, ow->data, rs * 3) == 0, "%s: weight bytes == kiln_quantize_chunk", types[ti]);
            free(want);
        }
        struct kiln_tensor * oh = kiln_get_tensor(octx, "token_embd.weight");
        CHECK(oh && oh->type == tt, "%s: f16 weight converted", types[ti]);
        if (oh) {
            float f[512];
            kiln_fp16_to_fp32_row((const kiln_fp16_t *) h->data, f, 512);
            const size_t rs = kiln_row_size(tt, 256);
            uint8_t * want = malloc(rs * 2);
            kiln_quantize_chunk(tt, f, want, 0, 2, 256, NULL);
            CHECK(memcmp(want, oh->data, rs * 2) == 0, "%s: f16 weight bytes", types[ti]);
            free(want);
        }
        struct { const char * name; struct kiln_tensor * src; } same[] = {
            { "blk.0.attn_norm.weight", nrm }, { "blk.0.ffn_down.weight", odd }, { "blk.0.attn_q.bias", bia } };
        for (int k = 0; k < 3; k++) {
            struct kiln_tensor * o = kiln_get_tensor(octx, same[k].name);
            CHECK(o && o->type == KILN_TYPE_F32 && memcmp(o->data, same[k].src->data, kiln_nbytes(same[k].src)) == 0,
                  "%s: %s copied unchanged", types[ti], same[k].name);
        }
        kiln_gguf_free(og);
        kiln_free(octx);
    }

    char args[1024];
    CHECK(run_tool("") == 2, "no arguments: usage, exit 2");
    snprintf(args, sizeof(args), "%s %s iq2_xxs", in, out);
    CHECK(run_tool(args) == 2, "type without a reference quantizer: exit 2");
    snprintf(args, sizeof(args), "%s %s q9_9", in, out);
    CHECK(run_tool(args) == 2, "unknown type: exit 2");
    snprintf(args, sizeof(args), "/tmp/kiln_qtool_missing_%d.gguf %s q4_0", (int) getpid(), out);
    CHECK(run_tool(args) == 1, "missing input: exit 1");
    snprintf(args, sizeof(args), "%s /nonexistent-dir/out.gguf q4_0", in);
    CHECK(run_tool(args) == 1, "unwritable output: exit 1");

    unlink(in);
    unlink(out);
    kiln_gguf_free(g);
    kiln_free(ctx);
    return tu_finish();
}
#endif
