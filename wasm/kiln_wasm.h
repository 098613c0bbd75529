/*
 * kiln_wasm.h — the flat C ABI that the JavaScript package calls (kw_*).
 *
 * Everything crossing it is a number: integer handles (> 0), sizes as
 * doubles (wasm32 sizes can exceed 2^31), and status codes (< 0). Nothing
 * aborts across it: every failure returns a KW_E_* code and leaves a message
 * in kw_last_error().
 *
 * Tensor handles own their own small context. An op handle records the op
 * and gets its result buffer at creation (compute is lazy: kw_compute()).
 * A handle keeps its inputs alive: kw_free() ends the caller's use, the
 * memory goes when no live handle depends on it any more.
 */
#ifndef KILN_WASM_H
#define KILN_WASM_H

#include <stdint.h>

/* the codes and, in kw_code_name(), the KilnError codes the JS package throws for them */
enum kw_code {
    KW_OK             = 0,
    KW_E_INVALID      = -1, /* bad argument: shapes, types, values */
    KW_E_NOMEM        = -2, /* an allocation failed (wasm32 heap is 4 GB at most) */
    KW_E_HANDLE       = -3, /* not a live handle of the right kind */
    KW_E_UNSUPPORTED  = -4, /* op or type combination without a kernel */
    KW_E_ABORTED      = -5, /* cancelled through the abort flag */
    KW_E_FAILED       = -6, /* compute failed */
    KW_E_FORMAT       = -7, /* malformed model file */
};

#endif
