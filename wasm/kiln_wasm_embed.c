/*
 * kiln_wasm_embed.c — embeddings over a generator handle's model (kw_llm_*,
 * kiln_wasm_generate.c): the text is tokenized in wasm (special tokens
 * added as the vocabulary asks: [CLS] ... [SEP], BOS), run through the
 * encoder or decoder, pooled and optionally normalized (kiln_model_embed).
 * The floats stay in a buffer here until the next call; JS copies them out
 * from kw_embed_out().
 */
#include "kiln_wasm_internal.h"
#include "kiln-llama.h"

#include <stdlib.h>
#include <string.h>

struct kiln_model * kw_llm_model(int g, const char * fn);

static float * g_out;
static int32_t g_cap;

KW_EXPORT const float * kw_embed_out(void) { return g_out; }

KW_EXPORT int kw_llm_n_embd(int g) {
    struct kiln_model * m = kw_llm_model(g, "llm_n_embd");
    return m ? kiln_model_n_embd(m) : KW_E_HANDLE;
}

/* pooling: -1 the file's, 0 none, 1 mean, 2 cls, 3 last; returns the number of floats */
KW_EXPORT int kw_llm_embed(int g, const char * text, int len, int pooling, int normalize) {
    struct kiln_model * m = kw_llm_model(g, "llm_embed");
    if (!m) return KW_E_HANDLE;
    if (pooling < -1 || pooling > 3) return kw_fail(KW_E_INVALID, "embed: pooling %d (none, mean, cls or last)", pooling);
    if (len < 0 || (!text && len > 0)) return kw_fail(KW_E_INVALID, "embed: text of %d bytes", len);
    struct kiln_embed_params p = kiln_embed_params_default();
    p.pooling = (enum kiln_pooling_type) pooling;
    p.normalize = normalize != 0;
    kiln_clear_error();
    int32_t n = kiln_model_embed(m, text ? text : "", len, p, g_out, g_cap);
    if (n < 0 && n != INT32_MIN) {
        float * o = realloc(g_out, sizeof(float) * (size_t) -n);
        if (!o) return kw_fail(KW_E_NOMEM, "embed: out of memory for %d floats", -n);
        g_out = o;
        g_cap = -n;
        n = kiln_model_embed(m, text ? text : "", len, p, g_out, g_cap);
    }
    if (n == INT32_MIN || n < 0) {
        if (strstr(kiln_last_error(), "aborted")) return kw_fail(KW_E_ABORTED, "embed aborted");
        return kw_fail_kiln(KW_E_INVALID, "embed");
    }
    return n;
}
