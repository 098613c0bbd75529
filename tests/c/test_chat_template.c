/* kiln_chat_apply_template / kiln_chat_template_detect: the API contract
 * (length returned, truncation with a NUL, refusals). What the templates
 * render is compared with llama.cpp's Jinja engine on real templates by
 * tests/oracle/chat-template.mjs. */
#include "kiln-llama.h"
#include "util/test_util.h"

#include <string.h>

int main(void) {
    const struct kiln_chat_message msgs[] = { { "system", "S" }, { "user", "U" } };
    /* a name and a template text that names it by its markers */
    CHECK(kiln_chat_template_detect(NULL) && strcmp(kiln_chat_template_detect(NULL), "chatml") == 0, "chat template check");
    CHECK(strcmp(kiln_chat_template_detect("llama3"), "llama3") == 0, "chat template check");
    CHECK(strcmp(kiln_chat_template_detect("{{ '<start_of_turn>' + role }}"), "gemma") == 0, "chat template check");
    CHECK(kiln_chat_template_detect("{{ messages }}") == NULL, "chat template check");

    /* ChatML spelled out: the length, then a buffer too small by one */
    const char * want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n";
    const int32_t n = kiln_chat_apply_template("chatml", msgs, 2, true, NULL, 0);
    CHECK(n == (int32_t) strlen(want), "chat template check");
    char buf[256];
    CHECK(kiln_chat_apply_template(NULL, msgs, 2, true, buf, sizeof buf) == n && strcmp(buf, want) == 0, "chat template check");
    memset(buf, 'x', sizeof buf);
    CHECK(kiln_chat_apply_template("chatml", msgs, 2, true, buf, n) == n, "chat template check");
    CHECK(strlen(buf) == (size_t) n - 1 && strncmp(buf, want, (size_t) n - 1) == 0, "chat template check");
    CHECK(kiln_chat_apply_template("chatml", msgs, 2, false, buf, sizeof buf) == n - (int32_t) strlen("<|im_start|>assistant\n"), "chat template check");

    /* refusals: unknown template, a message without content, no buffer with a length */
    CHECK(kiln_chat_apply_template("{{ messages }}", msgs, 2, true, buf, sizeof buf) == -1, "chat template check");
    CHECK(strstr(kiln_last_error(), "built-in") != NULL, "chat template check");
    const struct kiln_chat_message bad[] = { { "user", NULL } };
    CHECK(kiln_chat_apply_template("chatml", bad, 1, true, buf, sizeof buf) == -1, "chat template check");
    CHECK(kiln_chat_apply_template("chatml", msgs, 2, true, NULL, 10) == -1, "chat template check");
    CHECK(kiln_chat_apply_template("chatml", NULL, 0, true, buf, sizeof buf) == (int32_t) strlen("<|im_start|>assistant\n"), "chat template check");
    return tu_finish();
}
