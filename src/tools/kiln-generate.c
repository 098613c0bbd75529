/*
 * kiln-generate — generate text with a llama-family GGUF model.
 *
 *   kiln-generate [-m FILE] [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P]
 *                 [--min-p P] [--repeat-penalty R] [--seed S] [--threads N]
 *                 [--ctx N] [--batch N] [--kv-f32] [--stop STR]... [--print-ids]
 *                 [--print-logits N] [--isa scalar|avx2|...] [--warmup]
 *                 [--grammar-file F | --json-schema F] [--print-grammar]
 *                 [--chat [--system S] [--message ROLE TEXT]... [--chat-template T] [--print-prompt]]
 *
 * stdout: the prompt followed by the generated text and a newline, nothing
 * else (or, with --print-ids, the generated token ids on one line). Logs and timings go to
 * stderr. --print-logits N first prints, one JSON line each, the logits after
 * each of the prompt's first N tokens (evaluated one at a time, then the
 * cache is emptied), for cross-checks against llama.cpp. Defaults: the embedded models/stories260K.gguf, prompt
 * "Once upon a time", 200 tokens, greedy. --grammar-file constrains the output
 * to a GBNF grammar, --json-schema to a JSON Schema (converted to GBNF);
 * --print-grammar prints that GBNF and exits (no model needed).
 * --warmup evaluates BOS and EOS once before the prompt and empties the
 * cache again, as llama.cpp's tools do at start: the prompt's timing then
 * starts on weights that have been read once (the first pass over freshly
 * repacked weights can cost ~0.1 s on some VMs). The output is unchanged.
 * --chat: the messages (--system, each --message, then the prompt as the
 * user's turn when -p is given) rendered by the built-in chat template that
 * the model's tokenizer.chat_template resembles, or --chat-template T (a
 * name such as chatml / llama3 / gemma / phi3, template text, or @FILE), the
 * assistant's turn opened, special tokens parsed; --print-prompt prints that
 * text and exits (no model needed with --chat-template).
 */
#include "kiln-llama.h"

#include "tools/lora_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(void) {
    fprintf(stderr,
            "usage: kiln-generate [-m FILE] [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
            "                     [--repeat-penalty R] [--seed S] [--threads N] [--ctx N] [--batch N]\n"
            "                     [--kv-f32] [--stop STR]... [--print-ids] [--print-logits N] [--isa NAME] [--warmup]\n"
            "                     [--grammar-file F | --json-schema F] [--print-grammar]\n"
            "                     [--chat [--system S] [--message ROLE TEXT]... [--chat-template T] [--print-prompt]]\n"
            "                     [--lora FILE]... [--lora-scaled FILE S]...\n");
}

/* a whole file as a NUL-terminated string, or NULL */
static char * slurp(const char * path) {
    FILE * f = fopen(path, "rb");
    if (!f) return NULL;
    char * buf = NULL;
    size_t n = 0, cap = 0, k;
    char tmp[65536];
    while ((k = fread(tmp, 1, sizeof(tmp), f)) > 0) {
        if (n + k + 1 > cap) {
            cap = (n + k + 1) * 2;
            char * b = realloc(buf, cap);
            if (!b) { free(buf); fclose(f); return NULL; }
            buf = b;
        }
        memcpy(buf + n, tmp, k);
        n += k;
    }
    fclose(f);
    if (!buf) buf = calloc(1, 1);
    else buf[n] = 0;
    return buf;
}

static void on_piece(const char * text, int32_t len, kiln_token token, void * user) {
    (void) token;
    (void) user;
    fwrite(text, 1, (size_t) len, stdout);
    fflush(stdout);
}

static void on_token_id(const char * text, int32_t len, kiln_token token, void * user) {
    (void) text;
    (void) len;
    int * first = user;
    if (token >= 0) {
        printf(*first ? "%d" : " %d", token);
        *first = 0;
    }
}

/* {"pos":i,"token":t,"logits":[...]} per position, %.9g so floats round-trip */
static int dump_prompt_logits(struct kiln_model * model, const char * prompt, int n, bool add_special, bool parse_special) {
    const struct kiln_vocab * vocab = kiln_model_vocab(model);
    int32_t len = (int32_t) strlen(prompt);
    int32_t nt = kiln_tokenize(vocab, prompt, len, NULL, 0, add_special, parse_special);
    nt = nt < 0 ? -nt : nt;
    kiln_token * toks = malloc(sizeof(kiln_token) * (size_t) (nt > 0 ? nt : 1));
    if (!toks || kiln_tokenize(vocab, prompt, len, toks, nt, add_special, parse_special) != nt) {
        fprintf(stderr, "kiln-generate: tokenize failed: %s\n", kiln_last_error());
        free(toks);
        return 1;
    }
    const int32_t n_vocab = kiln_model_n_vocab(model);
    kiln_model_reset(model);
    for (int32_t i = 0; i < nt && i < n; i++) {
        if (kiln_model_eval(model, &toks[i], 1) != KILN_STATUS_SUCCESS) {
            fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
            free(toks);
            return 1;
        }
        const float * lg = kiln_model_logits(model);
        printf("{\"pos\":%d,\"token\":%d,\"logits\":[", i, toks[i]);
        for (int32_t j = 0; j < n_vocab; j++) {
            printf(j ? ",%.9g" : "%.9g", (double) lg[j]);
        }
        printf("]}\n");
    }
    kiln_model_reset(model);
    free(toks);
    return 0;
}

/* one evaluation of BOS, EOS (those the vocabulary has), then an empty
 * cache: every weight read once before the timed prompt */
static int run_warmup(struct kiln_model * model) {
    const struct kiln_vocab * vocab = kiln_model_vocab(model);
    const kiln_token bos = kiln_vocab_bos(vocab), eos = kiln_vocab_eos(vocab);
    kiln_token toks[2];
    int32_t n = 0;
    if (bos >= 0) toks[n++] = bos;
    if (eos >= 0) toks[n++] = eos;
    if (n == 0) toks[n++] = 0;
    if (kiln_model_eval(model, toks, n) != KILN_STATUS_SUCCESS) {
        fprintf(stderr, "kiln-generate: warmup: %s\n", kiln_last_error());
        return 1;
    }
    kiln_model_reset(model);
    return 0;
}

/* the chat messages rendered with the template (NULL: the model's
 * tokenizer.chat_template); a malloc'd string or NULL (message on stderr) */
static char * chat_prompt(const struct kiln_model * model, const char * tmpl, const struct kiln_chat_message * msgs, int n) {
    char * owned = NULL;
    if (tmpl && tmpl[0] == '@') {
        tmpl = owned = slurp(tmpl + 1);
        if (!owned) { fprintf(stderr, "kiln-generate: cannot read the chat template file\n"); return NULL; }
    } else if (!tmpl && model) {
        const int32_t n = kiln_model_meta_val_str(model, "tokenizer.chat_template", NULL, 0);
        if (n >= 0 && (owned = malloc((size_t) n + 1)) != NULL) kiln_model_meta_val_str(model, "tokenizer.chat_template", owned, (size_t) n + 1);
        tmpl = owned;
    }
    char * out = NULL;
    const char * name = kiln_chat_template_detect(tmpl);
    if (name) fprintf(stderr, "kiln-generate: chat template %s\n", name);
    const int32_t len = kiln_chat_apply_template(tmpl, msgs, (size_t) n, true, NULL, 0);
    if (len >= 0 && (out = malloc((size_t) len + 1)) != NULL) kiln_chat_apply_template(tmpl, msgs, (size_t) n, true, out, len + 1);
    if (!out) fprintf(stderr, "kiln-generate: %s\n", len < 0 ? kiln_last_error() : "out of memory");
    free(owned);
    return out;
}

int main(int argc, char ** argv) {
    const char * path = "models/stories260K.gguf";
    const char * prompt = "Once upon a time";
    bool chat = false, print_prompt = false, prompt_given = false;
    const char * chat_template = NULL;
    struct kiln_chat_message msgs[64];
    int n_msgs = 0;
    struct kiln_generate_params gp = kiln_generate_params_default();
    struct kiln_sampler_params sp = kiln_sampler_params_default();
    struct kiln_model_params mp = kiln_model_params_default();
    gp.max_tokens = 200;
    bool print_ids = false, warmup = false;
    int print_logits = 0;
    const char * stops[16];
    int n_stops = 0;
    const char * grammar_file = NULL, * schema_file = NULL;
    bool print_grammar = false;
    static struct lora_args loras;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const int used = lora_args_parse(&loras, argc, argv, i, "kiln-generate");
        if (used < 0) return 2;
        if (used > 0) {
            i += used - 1;
            continue;
        }
        bool has = i + 1 < argc;
#define ARG(name) (!strcmp(a, name) && has)
        if (ARG("-m") || ARG("--model")) path = argv[++i];
        else if (ARG("-p") || ARG("--prompt")) prompt = argv[++i], prompt_given = true;
        else if (!strcmp(a, "--chat")) chat = true;
        else if (!strcmp(a, "--print-prompt")) print_prompt = true;
        else if (ARG("--chat-template")) chat_template = argv[++i];
        else if (ARG("--system") && n_msgs < 63) msgs[n_msgs++] = (struct kiln_chat_message) { "system", argv[++i] };
        else if (!strcmp(a, "--message") && i + 2 < argc && n_msgs < 63) {
            msgs[n_msgs++] = (struct kiln_chat_message) { argv[i + 1], argv[i + 2] };
            i += 2;
        }
        else if (ARG("-n") || ARG("--n-predict")) gp.max_tokens = atoi(argv[++i]);
        else if (ARG("--temp")) sp.temperature = (float) atof(argv[++i]);
        else if (ARG("--top-k")) sp.top_k = atoi(argv[++i]);
        else if (ARG("--top-p")) sp.top_p = (float) atof(argv[++i]);
        else if (ARG("--min-p")) sp.min_p = (float) atof(argv[++i]);
        else if (ARG("--repeat-penalty")) sp.repeat_penalty = (float) atof(argv[++i]);
        else if (ARG("--seed") || ARG("-s")) sp.seed = strtoull(argv[++i], NULL, 10);
        else if (ARG("--threads") || ARG("-t")) mp.n_threads = atoi(argv[++i]);
        else if (ARG("--ctx") || ARG("-c")) mp.n_ctx = atoi(argv[++i]);
        else if (ARG("--batch") || ARG("-b")) mp.n_batch = atoi(argv[++i]);
        else if (ARG("--stop") && n_stops < 16) stops[n_stops++] = argv[++i];
        else if (ARG("--grammar-file")) grammar_file = argv[++i];
        else if (ARG("--json-schema")) schema_file = argv[++i];
        else if (!strcmp(a, "--print-grammar")) print_grammar = true;
        else if (!strcmp(a, "--kv-f32")) mp.kv_type = KILN_TYPE_F32;
        else if (!strcmp(a, "--print-ids")) print_ids = true;
        else if (!strcmp(a, "--warmup")) warmup = true;
        else if (ARG("--print-logits")) print_logits = atoi(argv[++i]);
        else if (ARG("--isa")) {
            kiln_cpu_force_isa(argv[++i]); /* scalar, avx2, ...: compare kernels on a whole model */
            if (strcmp(kiln_cpu_isa(), argv[i]) != 0) {
                fprintf(stderr, "kiln-generate: --isa %s: %s\n", argv[i], kiln_last_error());
                return 2;
            }
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(); return 0; }
        else {
            fprintf(stderr, "kiln-generate: unknown or incomplete argument '%s'\n", a);
            usage();
            return 2;
        }
#undef ARG
    }
    if (print_grammar && (grammar_file || schema_file)) {
        char * text = slurp(grammar_file ? grammar_file : schema_file);
        char * gbnf = text && schema_file ? kiln_json_schema_to_grammar(text, -1) : text;
        if (gbnf) fputs(gbnf, stdout);
        else fprintf(stderr, "kiln-generate: %s\n", text ? kiln_last_error() : "cannot read the file");
        if (gbnf != text) free(gbnf);
        free(text);
        return gbnf ? 0 : 1;
    }
    bool ctx_given = mp.n_ctx > 0;
    gp.stop = stops;
    gp.n_stop = n_stops;
    if (chat && prompt_given) msgs[n_msgs++] = (struct kiln_chat_message) { "user", prompt };
    char * chat_text = NULL;
    if (chat && print_prompt && chat_template) {
        chat_text = chat_prompt(NULL, chat_template, msgs, n_msgs);
        if (chat_text) fputs(chat_text, stdout);
        free(chat_text);
        return chat_text ? 0 : 1;
    }

    int64_t t0 = kiln_time_us();
    struct kiln_model * model = kiln_model_load(path, mp);
    if (!model) {
        fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
        return 1;
    }
    fprintf(stderr, "kiln-generate: loaded %s in %.1f ms (context %d, vocab %d, isa %s)\n", path,
            (kiln_time_us() - t0) / 1000.0, kiln_model_n_ctx(model), kiln_model_n_vocab(model), kiln_cpu_isa());
    if (mp.n_threads <= 0) {
        /* tiny models run fastest on one thread; bigger ones use the cores */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        int n = kiln_model_n_embd(model) < 512 ? 1 : (int) (ncpu > 8 ? 8 : ncpu < 1 ? 1 : ncpu);
        struct kiln_model_params mp2 = mp;
        mp2.n_threads = n;
        if (n != KILN_DEFAULT_N_THREADS) {
            kiln_model_free(model);
            model = kiln_model_load(path, mp2);
            if (!model) {
                fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
                return 1;
            }
        }
    }
    if (chat) {
        chat_text = chat_prompt(model, chat_template, msgs, n_msgs);
        if (!chat_text || print_prompt) {
            if (chat_text) fputs(chat_text, stdout);
            free(chat_text);
            kiln_model_free(model);
            return chat_text ? 0 : 1;
        }
        prompt = chat_text;
        gp.parse_special = true;
    }
    /* without --ctx, make room for the prompt and the tokens asked for (the
     * metadata's context length may be smaller than what the model handles) */
    if (!ctx_given && gp.max_tokens > 0) {
        int32_t n_prompt = kiln_tokenize(kiln_model_vocab(model), prompt, (int32_t) strlen(prompt), NULL, 0, true, false);
        int32_t need = (n_prompt < 0 ? -n_prompt : n_prompt) + gp.max_tokens;
        if (need > kiln_model_n_ctx(model)) {
            fprintf(stderr, "kiln-generate: context %d -> %d to fit the prompt and %d tokens (set it with --ctx)\n",
                    kiln_model_n_ctx(model), need, gp.max_tokens);
            if (kiln_model_set_n_ctx(model, need) != KILN_STATUS_SUCCESS) {
                fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
                return 1;
            }
        }
    }
    if (!lora_args_apply(&loras, model, "kiln-generate")) {
        kiln_model_free(model);
        return 1;
    }
    if (warmup && run_warmup(model) != 0) {
        kiln_model_free(model);
        return 1;
    }
    if (print_logits > 0 && dump_prompt_logits(model, prompt, print_logits, gp.add_special, gp.parse_special) != 0) {
        kiln_model_free(model);
        return 1;
    }
    struct kiln_sampler * smpl = kiln_sampler_new(sp);
    if (!smpl) {
        fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
        kiln_model_free(model);
        return 2;
    }
    if (grammar_file || schema_file) {
        char * text = slurp(grammar_file ? grammar_file : schema_file);
        char * gbnf = text && schema_file ? kiln_json_schema_to_grammar(text, -1) : text;
        if (!text) kiln_set_last_error("cannot read %s", grammar_file ? grammar_file : schema_file);
        enum kiln_status gs = gbnf ? kiln_sampler_set_grammar(smpl, kiln_model_vocab(model), gbnf, NULL) : KILN_STATUS_INVALID_ARG;
        if (gbnf != text) free(gbnf);
        free(text);
        if (gs != KILN_STATUS_SUCCESS) {
            fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
            kiln_sampler_free(smpl);
            kiln_model_free(model);
            return 1;
        }
    }

    int first = 1;
    if (!print_ids) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    struct kiln_generate_stats st;
    enum kiln_status s = kiln_generate(model, smpl, prompt, gp, print_ids ? on_token_id : on_piece, &first, &st);
    printf("\n"); /* the story (or the ids) ends its line before the timing on stderr */
    fflush(stdout);
    if (s != KILN_STATUS_SUCCESS) {
        fprintf(stderr, "kiln-generate: %s\n", kiln_last_error());
    }
    fprintf(stderr, "kiln-generate: prompt %d tokens, %.1f tokens/s; generated %d tokens, %.1f tokens/s\n",
            st.prompt_tokens, st.prompt_tokens_per_second, st.generated_tokens, st.tokens_per_second);
    kiln_sampler_free(smpl);
    kiln_model_free(model);
    free(chat_text);
    return s == KILN_STATUS_SUCCESS ? 0 : 1;
}
