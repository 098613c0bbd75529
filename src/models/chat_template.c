/*
 * chat_template.c — llama.cpp's built-in chat templates without a Jinja
 * engine: a model's tokenizer.chat_template is recognised by the marker
 * strings it contains (or given by name, "chatml", "llama3", ...), and the
 * messages are rendered by a small function per family, with llama.cpp's
 * rules for each (which roles exist, where content is trimmed, how a system
 * message is folded into the first user turn where the family has none).
 *
 * This serves C callers and kiln-generate --chat; the JS package renders
 * the file's own Jinja template when it can. tests/oracle/chat-template.mjs
 * compares the output with llama.cpp's Jinja engine on real templates.
 */
#include "kiln-llama.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum tmpl_id {
    T_UNKNOWN = -1,
    T_CHATML, T_LLAMA2, T_LLAMA2_SYS, T_LLAMA2_SYS_BOS, T_LLAMA2_SYS_STRIP,
    T_MISTRAL_V1, T_MISTRAL_V3, T_MISTRAL_V3_TEKKEN, T_MISTRAL_V7, T_MISTRAL_V7_TEKKEN,
    T_PHI3, T_PHI4, T_FALCON3, T_ZEPHYR, T_MONARCH, T_GEMMA, T_ORION, T_OPENCHAT,
    T_VICUNA, T_VICUNA_ORCA, T_DEEPSEEK, T_DEEPSEEK2, T_DEEPSEEK3, T_COMMAND_R, T_LLAMA3,
    T_CHATGLM3, T_CHATGLM4, T_GLMEDGE, T_MINICPM, T_EXAONE3, T_GRANITE, T_GRANITE4,
    T_LLAMA4, T_SMOLVLM, T_RWKV, T_COUNT
};

/* the names llama.cpp accepts for its built-in templates (granite 4.0 and
 * 4.1 render alike) */
static const struct { const char * name; enum tmpl_id id; } k_names[] = {
    { "chatml", T_CHATML }, { "llama2", T_LLAMA2 }, { "llama2-sys", T_LLAMA2_SYS },
    { "llama2-sys-bos", T_LLAMA2_SYS_BOS }, { "llama2-sys-strip", T_LLAMA2_SYS_STRIP },
    { "mistral-v1", T_MISTRAL_V1 }, { "mistral-v3", T_MISTRAL_V3 }, { "mistral-v3-tekken", T_MISTRAL_V3_TEKKEN },
    { "mistral-v7", T_MISTRAL_V7 }, { "mistral-v7-tekken", T_MISTRAL_V7_TEKKEN },
    { "phi3", T_PHI3 }, { "phi4", T_PHI4 }, { "falcon3", T_FALCON3 }, { "zephyr", T_ZEPHYR },
    { "monarch", T_MONARCH }, { "gemma", T_GEMMA }, { "orion", T_ORION }, { "openchat", T_OPENCHAT },
    { "vicuna", T_VICUNA }, { "vicuna-orca", T_VICUNA_ORCA }, { "deepseek", T_DEEPSEEK },
    { "deepseek2", T_DEEPSEEK2 }, { "deepseek3", T_DEEPSEEK3 }, { "command-r", T_COMMAND_R },
    { "llama3", T_LLAMA3 }, { "chatglm3", T_CHATGLM3 }, { "chatglm4", T_CHATGLM4 }, { "glmedge", T_GLMEDGE },
    { "minicpm", T_MINICPM }, { "exaone3", T_EXAONE3 }, { "granite", T_GRANITE },
    { "granite-4.0", T_GRANITE4 }, { "granite-4.1", T_GRANITE4 }, { "llama4", T_LLAMA4 }, { "smolvlm", T_SMOLVLM },
    { "rwkv-world", T_RWKV },
};

static bool has(const char * t, const char * s) { return strstr(t, s) != NULL; }

static enum tmpl_id detect(const char * t) {
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strcmp(t, k_names[i].name) == 0) return k_names[i].id;
    }
    if (has(t, "<|im_start|>")) {
        if (has(t, "<|im_sep|>")) return T_PHI4;
        return has(t, "<end_of_utterance>") ? T_SMOLVLM : T_CHATML;
    }
    if (strncmp(t, "mistral", 7) == 0 || has(t, "[INST]")) {
        if (has(t, "[SYSTEM_PROMPT]")) return T_MISTRAL_V7;
        if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
            if (has(t, " [INST]")) return T_MISTRAL_V1;
            if (has(t, "\"[INST]\"")) return T_MISTRAL_V3_TEKKEN;
            return T_MISTRAL_V3;
        }
        if (has(t, "content.strip()")) return T_LLAMA2_SYS_STRIP;
        if (has(t, "bos_token + '[INST]")) return T_LLAMA2_SYS_BOS;
        return has(t, "<<SYS>>") ? T_LLAMA2_SYS : T_LLAMA2;
    }
    if (has(t, "<|assistant|>") && has(t, "<|end|>")) return T_PHI3;
    if (has(t, "[gMASK]<sop>")) return T_CHATGLM4;
    if (has(t, "<|assistant|>") && has(t, "<|user|>")) {
        if (has(t, "<|tool_declare|>")) return T_UNKNOWN; /* EXAONE MoE: not built in here */
        return has(t, "</s>") ? T_FALCON3 : T_GLMEDGE;
    }
    if (has(t, "<|{{ item['role'] }}|>") && has(t, "<|begin_of_image|>")) return T_GLMEDGE;
    if (has(t, "<|user|>") && has(t, "<|endoftext|>")) return T_ZEPHYR;
    if (has(t, "bos_token + message['role']")) return T_MONARCH;
    if (has(t, "<start_of_turn>")) return T_GEMMA;
    if (has(t, "'\\n\\nAssistant: ' + eos_token")) return T_ORION;
    if (has(t, "GPT4 Correct ")) return T_OPENCHAT;
    if (has(t, "USER: ") && has(t, "ASSISTANT: ")) return has(t, "SYSTEM: ") ? T_VICUNA_ORCA : T_VICUNA;
    if (has(t, "### Instruction:") && has(t, "<|EOT|>")) return T_DEEPSEEK;
    if (has(t, "<|START_OF_TURN_TOKEN|>") && has(t, "<|USER_TOKEN|>")) return T_COMMAND_R;
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return T_LLAMA3;
    if (has(t, "[gMASK]sop")) return T_CHATGLM3;
    if (has(t, "<\xe7\x94\xa8\xe6\x88\xb7>")) return T_MINICPM; /* <用户> */
    if (has(t, "'Assistant: ' + message['content'] + eos_token")) return T_DEEPSEEK2;
    if (has(t, "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>") && has(t, "<\xef\xbd\x9c" "User\xef\xbd\x9c>") &&
        has(t, "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>")) return T_DEEPSEEK3;
    if (has(t, "[|system|]") && has(t, "[|assistant|]") && has(t, "[|endofturn|]")) {
        return has(t, "[|tool|]") ? T_UNKNOWN /* EXAONE 4 */ : T_EXAONE3;
    }
    if (has(t, "rwkv-world") || has(t, "{{- 'User: ' + message['content']|trim + '\\n\\n' -}}")) return T_RWKV;
    if (has(t, "<|start_of_role|>")) return has(t, "<tool_call>") || has(t, "<tools>") ? T_GRANITE4 : T_GRANITE;
    if (has(t, "<|header_start|>") && has(t, "<|header_end|>")) return T_LLAMA4;
    return T_UNKNOWN;
}

const char * kiln_chat_template_detect(const char * tmpl) {
    const enum tmpl_id id = detect(tmpl ? tmpl : "chatml");
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (k_names[i].id == id) return k_names[i].name;
    }
    return NULL;
}

/* a growing string; on allocation failure it stays failed and the caller reports it */
struct sb { char * s; size_t n, cap; bool oom; };

static void put_n(struct sb * b, const char * s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char * p = realloc(b->s, cap);
        if (!p) { b->oom = true; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

/* the strings up to a NULL, one after another */
static void put(struct sb * b, ...) {
    va_list ap;
    va_start(ap, b);
    for (const char * s = va_arg(ap, const char *); s; s = va_arg(ap, const char *)) put_n(b, s, strlen(s));
    va_end(ap);
}
#define PUT(...) put(b, __VA_ARGS__, (const char *) NULL)

/* s without leading and trailing ASCII white space */
static void put_trim(struct sb * b, const char * s) {
    size_t i = 0, n = strlen(s);
    while (i < n && isspace((unsigned char) s[i])) i++;
    while (n > i && isspace((unsigned char) s[n - 1])) n--;
    put_n(b, s + i, n - i);
}

static bool is(const char * role, const char * r) { return strcmp(role, r) == 0; }

static void render(enum tmpl_id id, const struct kiln_chat_message * msg, size_t n, bool add_ass, struct sb * b) {
    switch (id) {
    case T_CHATML:
        for (size_t i = 0; i < n; i++) PUT("<|im_start|>", msg[i].role, "\n", msg[i].content, "<|im_end|>\n");
        if (add_ass) PUT("<|im_start|>assistant\n");
        break;
    case T_MISTRAL_V7: case T_MISTRAL_V7_TEKKEN: {
        const char * sp = id == T_MISTRAL_V7 ? " " : "";
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) PUT("[SYSTEM_PROMPT]", sp, msg[i].content, "[/SYSTEM_PROMPT]");
            else if (is(msg[i].role, "user")) PUT("[INST]", sp, msg[i].content, "[/INST]");
            else PUT(sp, msg[i].content, "</s>");
        }
        break;
    }
    case T_MISTRAL_V1: case T_MISTRAL_V3: case T_MISTRAL_V3_TEKKEN: {
        const char * lead = id == T_MISTRAL_V1 ? " " : "", * trail = id == T_MISTRAL_V3_TEKKEN ? "" : " ";
        bool in_turn = false;
        for (size_t i = 0; i < n; i++) {
            if (!in_turn) { PUT(lead, "[INST]", trail); in_turn = true; }
            if (is(msg[i].role, "system")) PUT(msg[i].content, "\n\n");
            else if (is(msg[i].role, "user")) PUT(msg[i].content, lead, "[/INST]");
            else {
                PUT(trail);
                if (id == T_MISTRAL_V3) put_trim(b, msg[i].content); else PUT(msg[i].content);
                PUT("</s>");
                in_turn = false;
            }
        }
        break;
    }
    case T_LLAMA2: case T_LLAMA2_SYS: case T_LLAMA2_SYS_BOS: case T_LLAMA2_SYS_STRIP: {
        bool in_turn = true; /* the first [INST] follows the tokenizer's BOS */
        PUT("[INST] ");
        for (size_t i = 0; i < n; i++) {
            if (!in_turn) { PUT(id == T_LLAMA2_SYS_BOS ? "<s>[INST] " : "[INST] "); in_turn = true; }
            const bool sys = is(msg[i].role, "system"), user = is(msg[i].role, "user");
            if (sys) PUT(id != T_LLAMA2 ? "<<SYS>>\n" : "");
            if (id == T_LLAMA2_SYS_STRIP) put_trim(b, msg[i].content); else PUT(msg[i].content);
            if (sys) PUT(id != T_LLAMA2 ? "\n<</SYS>>\n\n" : "\n");
            else if (user) PUT(" [/INST]");
            else { PUT("</s>"); in_turn = false; }
        }
        break;
    }
    case T_PHI3: case T_FALCON3: case T_ZEPHYR: {
        const char * end = id == T_PHI3 ? "<|end|>\n" : id == T_FALCON3 ? "\n" : "<|endoftext|>\n";
        for (size_t i = 0; i < n; i++) PUT("<|", msg[i].role, "|>\n", msg[i].content, end);
        if (add_ass) PUT("<|assistant|>\n");
        break;
    }
    case T_PHI4:
        for (size_t i = 0; i < n; i++) PUT("<|im_start|>", msg[i].role, "<|im_sep|>", msg[i].content, "<|im_end|>");
        if (add_ass) PUT("<|im_start|>assistant<|im_sep|>");
        break;
    case T_MONARCH:
        for (size_t i = 0; i < n; i++) PUT(i ? "<s>" : "", msg[i].role, "\n", msg[i].content, "</s>\n");
        if (add_ass) PUT("<s>assistant\n");
        break;
    case T_GEMMA: {
        /* no system role: the system text opens the next user turn */
        struct sb sys = { 0 };
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) { put_trim(&sys, msg[i].content); continue; }
            const bool model = is(msg[i].role, "assistant");
            PUT("<start_of_turn>", model ? "model" : msg[i].role, "\n");
            if (sys.n && !model) { PUT(sys.s, "\n\n"); sys.n = 0; }
            put_trim(b, msg[i].content);
            PUT("<end_of_turn>\n");
        }
        free(sys.s);
        if (sys.oom) b->oom = true;
        if (add_ass) PUT("<start_of_turn>model\n");
        break;
    }
    case T_ORION: {
        struct sb sys = { 0 };
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) { put(&sys, msg[i].content, (const char *) NULL); continue; }
            if (is(msg[i].role, "user")) {
                PUT("Human: ");
                if (sys.n) { PUT(sys.s, "\n\n"); sys.n = 0; }
                PUT(msg[i].content, "\n\nAssistant: </s>");
            } else PUT(msg[i].content, "</s>");
        }
        free(sys.s);
        if (sys.oom) b->oom = true;
        break;
    }
    case T_OPENCHAT:
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) PUT(msg[i].content, "<|end_of_turn|>");
            else {
                char first[2] = { (char) toupper((unsigned char) msg[i].role[0]), 0 };
                PUT("GPT4 Correct ", first, msg[i].role[0] ? msg[i].role + 1 : "", ": ", msg[i].content, "<|end_of_turn|>");
            }
        }
        if (add_ass) PUT("GPT4 Correct Assistant:");
        break;
    case T_VICUNA: case T_VICUNA_ORCA:
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) {
                if (id == T_VICUNA_ORCA) PUT("SYSTEM: ", msg[i].content, "\n"); else PUT(msg[i].content, "\n\n");
            } else if (is(msg[i].role, "user")) PUT("USER: ", msg[i].content, "\n");
            else if (is(msg[i].role, "assistant")) PUT("ASSISTANT: ", msg[i].content, "</s>\n");
        }
        if (add_ass) PUT("ASSISTANT:");
        break;
    case T_DEEPSEEK:
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) PUT(msg[i].content);
            else if (is(msg[i].role, "user")) PUT("### Instruction:\n", msg[i].content, "\n");
            else if (is(msg[i].role, "assistant")) PUT("### Response:\n", msg[i].content, "\n<|EOT|>\n");
        }
        if (add_ass) PUT("### Response:\n");
        break;
    case T_DEEPSEEK2: case T_DEEPSEEK3: {
        const char * eos = "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>";
        const char * user = id == T_DEEPSEEK2 ? "User: " : "<\xef\xbd\x9cUser\xef\xbd\x9c>";
        const char * ass = id == T_DEEPSEEK2 ? "Assistant: " : "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>";
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) PUT(msg[i].content, "\n\n");
            else if (is(msg[i].role, "user")) PUT(user, msg[i].content, id == T_DEEPSEEK2 ? "\n\n" : "");
            else if (is(msg[i].role, "assistant")) PUT(ass, msg[i].content, eos);
        }
        if (add_ass) PUT(id == T_DEEPSEEK2 ? "Assistant:" : ass);
        break;
    }
    case T_COMMAND_R:
        for (size_t i = 0; i < n; i++) {
            const char * tok = is(msg[i].role, "system") ? "<|SYSTEM_TOKEN|>" : is(msg[i].role, "user") ? "<|USER_TOKEN|>"
                             : is(msg[i].role, "assistant") ? "<|CHATBOT_TOKEN|>" : NULL;
            if (!tok) continue;
            PUT("<|START_OF_TURN_TOKEN|>", tok);
            put_trim(b, msg[i].content);
            PUT("<|END_OF_TURN_TOKEN|>");
        }
        if (add_ass) PUT("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>");
        break;
    case T_LLAMA3: case T_LLAMA4: {
        const char * hs = id == T_LLAMA3 ? "<|start_header_id|>" : "<|header_start|>";
        const char * he = id == T_LLAMA3 ? "<|end_header_id|>\n\n" : "<|header_end|>\n\n";
        for (size_t i = 0; i < n; i++) {
            PUT(hs, msg[i].role, he);
            put_trim(b, msg[i].content);
            PUT(id == T_LLAMA3 ? "<|eot_id|>" : "<|eot|>");
        }
        if (add_ass) PUT(hs, "assistant", he);
        break;
    }
    case T_CHATGLM3: case T_CHATGLM4: case T_GLMEDGE:
        if (id != T_GLMEDGE) PUT(id == T_CHATGLM3 ? "[gMASK]sop" : "[gMASK]<sop>");
        for (size_t i = 0; i < n; i++) PUT("<|", msg[i].role, "|>", id == T_CHATGLM3 ? "\n " : "\n", msg[i].content);
        if (add_ass) PUT(id == T_CHATGLM4 ? "<|assistant|>\n" : "<|assistant|>");
        break;
    case T_MINICPM:
        for (size_t i = 0; i < n; i++) {
            const bool user = is(msg[i].role, "user");
            if (user) PUT("<\xe7\x94\xa8\xe6\x88\xb7>");
            put_trim(b, msg[i].content);
            if (user) PUT("<AI>");
        }
        break;
    case T_EXAONE3:
        for (size_t i = 0; i < n; i++) {
            const char * tag = is(msg[i].role, "system") ? "[|system|]" : is(msg[i].role, "user") ? "[|user|]"
                             : is(msg[i].role, "assistant") ? "[|assistant|]" : NULL;
            if (!tag) continue;
            PUT(tag);
            put_trim(b, msg[i].content);
            PUT(is(msg[i].role, "user") ? "\n" : "[|endofturn|]\n");
        }
        if (add_ass) PUT("[|assistant|]");
        break;
    case T_GRANITE: case T_GRANITE4:
        for (size_t i = 0; i < n; i++) {
            const bool call = is(msg[i].role, "assistant_tool_call");
            PUT("<|start_of_role|>", call && id == T_GRANITE4 ? "assistant" : msg[i].role, "<|end_of_role|>", call ? "<|tool_call|>" : "",
                msg[i].content, "<|end_of_text|>\n");
        }
        if (add_ass) PUT("<|start_of_role|>assistant<|end_of_role|>");
        break;
    case T_SMOLVLM:
        PUT("<|im_start|>");
        for (size_t i = 0; i < n; i++) {
            if (is(msg[i].role, "system")) PUT(msg[i].content, "\n\n");
            else if (is(msg[i].role, "user")) PUT("User: ", msg[i].content, "<end_of_utterance>\n");
            else PUT("Assistant: ", msg[i].content, "<end_of_utterance>\n");
        }
        if (add_ass) PUT("Assistant:");
        break;
    case T_RWKV: /* the model's end of turn is "\n\n" */
        for (size_t i = 0; i < n; i++) {
            const char * who = is(msg[i].role, "system") ? "System: " : is(msg[i].role, "user") ? "User: "
                             : is(msg[i].role, "assistant") ? "Assistant: " : NULL;
            if (!who) continue;
            PUT(who);
            put_trim(b, msg[i].content);
            PUT("\n\n");
            if (is(msg[i].role, "user") && i == n - 1) PUT("Assistant:");
        }
        break;
    default:
        break;
    }
}

int32_t kiln_chat_apply_template(const char * tmpl, const struct kiln_chat_message * msgs, size_t n_msg, bool add_ass,
                                 char * buf, int32_t length) {
    if ((!msgs && n_msg) || length < 0 || (length > 0 && !buf)) {
        kiln_set_last_error("chat template: invalid arguments");
        return -1;
    }
    for (size_t i = 0; i < n_msg; i++) {
        if (!msgs[i].role || !msgs[i].content) {
            kiln_set_last_error("chat template: message %zu has no role or content", i);
            return -1;
        }
    }
    const enum tmpl_id id = detect(tmpl ? tmpl : "chatml");
    if (id == T_UNKNOWN) {
        kiln_set_last_error("chat template: not one of the built-in templates (%s)", tmpl);
        return -1;
    }
    struct sb b = { 0 };
    render(id, msgs, n_msg, add_ass, &b);
    if (b.oom || b.n > INT32_MAX) {
        free(b.s);
        kiln_set_last_error("chat template: out of memory");
        return -1;
    }
    if (length > 0) {
        const size_t k = b.n < (size_t) length - 1 ? b.n : (size_t) length - 1;
        if (k) memcpy(buf, b.s, k);
        buf[k] = '\0';
    }
    free(b.s);
    return (int32_t) b.n;
}
