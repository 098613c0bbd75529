/*
 * json_schema.c — JSON Schema to GBNF, the conversion llama.cpp's
 * json-schema-to-grammar performs: the same primitive rules, the same
 * whitespace rule, rules named after their path in the schema, objects with
 * required properties in order and optional ones in any subset (in order),
 * arrays as bounded repetitions with "," separators, enum/const as literals,
 * anyOf/oneOf as alternatives, local $ref (to $defs/definitions or any JSON
 * pointer), string formats date/time/date-time/uuid, min/maxLength, and
 * integer minimum/maximum as digit-range rules. Unsupported keywords that
 * would change what is valid (pattern, allOf, remote $ref) are errors.
 *
 * It carries a small JSON parser for the schema text whose errors name the
 * line and column.
 */
#include "kiln-llama.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ JSON */

enum jv_type { JV_NULL, JV_BOOL, JV_NUM, JV_STR, JV_ARR, JV_OBJ };

struct jv {
    enum jv_type type;
    bool b;
    double num;
    char * text;        /* string value (NUL-terminated, may hold \u0000) or number source */
    size_t len;
    struct jv * items;  /* array items / object values */
    char ** keys;       /* object keys */
    size_t n;
};

struct jparser {
    const char * src, * p, * end;
    const char * err_at;
    char err[128];
    int depth;
};

static void jv_free(struct jv * v) {
    if (!v) return;
    free(v->text);
    for (size_t i = 0; i < v->n; i++) {
        jv_free(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

static bool jfail(struct jparser * jp, const char * msg) {
    if (!jp->err_at) {
        jp->err_at = jp->p;
        snprintf(jp->err, sizeof(jp->err), "%s", msg);
    }
    return false;
}

static void jws(struct jparser * jp) {
    while (jp->p < jp->end && (*jp->p == ' ' || *jp->p == '\t' || *jp->p == '\n' || *jp->p == '\r')) jp->p++;
}

static void put_utf8(char * out, size_t * n, uint32_t cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char) cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char) (0xC0 | (cp >> 6));
        out[(*n)++] = (char) (0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char) (0xE0 | (cp >> 12));
        out[(*n)++] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char) (0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char) (0xF0 | (cp >> 18));
        out[(*n)++] = (char) (0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char) (0x80 | (cp & 0x3F));
    }
}

static bool jhex4(struct jparser * jp, uint32_t * out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        if (jp->p >= jp->end || !isxdigit((unsigned char) *jp->p)) return jfail(jp, "expected 4 hex digits after \\u");
        char c = *jp->p++;
        v = v * 16 + (uint32_t) (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    *out = v;
    return true;
}

static bool jstring(struct jparser * jp, char ** out, size_t * out_len) {
    jp->p++; /* opening quote */
    const char * start = jp->p;
    /* the decoded text is never longer than the rest of the input */
    size_t cap = (size_t) (jp->end - start);
    char * s = malloc(cap + 4);
    if (!s) return jfail(jp, "out of memory");
    size_t n = 0;
    for (;;) {
        if (jp->p >= jp->end) {
            free(s);
            return jfail(jp, "unterminated string");
        }
        unsigned char c = (unsigned char) *jp->p;
        if (c == '"') {
            jp->p++;
            break;
        }
        if (c < 0x20) {
            free(s);
            return jfail(jp, "control character in string");
        }
        if (c >= 0x80) {
            /* one well-formed UTF-8 character (JSON text is UTF-8) */
            int len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
            bool ok = len > 0 && jp->end - jp->p >= len;
            for (int k = 1; ok && k < len; k++) ok = ((unsigned char) jp->p[k] & 0xC0) == 0x80;
            if (!ok) {
                free(s);
                return jfail(jp, "invalid UTF-8 in string");
            }
            memcpy(s + n, jp->p, (size_t) len);
            n += (size_t) len;
            jp->p += len;
            continue;
        }
        if (c != '\\') {
            s[n++] = (char) c;
            jp->p++;
            continue;
        }
        jp->p++;
        if (jp->p >= jp->end) {
            free(s);
            return jfail(jp, "unterminated string");
        }
        char e = *jp->p++;
        uint32_t cp;
        switch (e) {
            case '"': s[n++] = '"'; break;
            case '\\': s[n++] = '\\'; break;
            case '/': s[n++] = '/'; break;
            case 'b': s[n++] = '\b'; break;
            case 'f': s[n++] = '\f'; break;
            case 'n': s[n++] = '\n'; break;
            case 'r': s[n++] = '\r'; break;
            case 't': s[n++] = '\t'; break;
            case 'u':
                if (!jhex4(jp, &cp)) {
                    free(s);
                    return false;
                }
                if (cp >= 0xD800 && cp < 0xDC00 && jp->p + 1 < jp->end && jp->p[0] == '\\' && jp->p[1] == 'u') {
                    uint32_t lo;
                    jp->p += 2;
                    if (!jhex4(jp, &lo)) {
                        free(s);
                        return false;
                    }
                    if (lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else {
                        put_utf8(s, &n, 0xFFFD);
                        cp = lo;
                    }
                } else if (cp >= 0xD800 && cp < 0xE000) {
                    cp = 0xFFFD;
                }
                put_utf8(s, &n, cp);
                break;
            default:
                jp->p--;
                free(s);
                return jfail(jp, "bad escape in string");
        }
    }
    s[n] = 0;
    *out = s;
    *out_len = n;
    return true;
}

static bool jvalue(struct jparser * jp, struct jv * v);

static bool jpush(struct jparser * jp, struct jv * v, size_t * cap, bool obj) {
    if (v->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct jv * it = realloc(v->items, nc * sizeof(*it));
        if (!it) return jfail(jp, "out of memory");
        v->items = it;
        if (obj) {
            char ** k = realloc(v->keys, nc * sizeof(*k));
            if (!k) return jfail(jp, "out of memory");
            v->keys = k;
        }
        *cap = nc;
    }
    memset(&v->items[v->n], 0, sizeof(struct jv));
    if (obj) v->keys[v->n] = NULL;
    v->n++;
    return true;
}

static bool jvalue(struct jparser * jp, struct jv * v) {
    memset(v, 0, sizeof(*v));
    jws(jp);
    if (jp->p >= jp->end) return jfail(jp, "unexpected end of input");
    if (++jp->depth > 256) return jfail(jp, "nested too deeply");
    char c = *jp->p;
    bool ok = true;
    if (c == '{' || c == '[') {
        bool obj = c == '{';
        v->type = obj ? JV_OBJ : JV_ARR;
        jp->p++;
        size_t cap = 0;
        jws(jp);
        if (jp->p < jp->end && *jp->p == (obj ? '}' : ']')) {
            jp->p++;
        } else {
            for (;;) {
                if (!jpush(jp, v, &cap, obj)) return false;
                if (obj) {
                    jws(jp);
                    if (jp->p >= jp->end || *jp->p != '"') return jfail(jp, "expected a string key");
                    size_t kl;
                    if (!jstring(jp, &v->keys[v->n - 1], &kl)) return false;
                    jws(jp);
                    if (jp->p >= jp->end || *jp->p != ':') return jfail(jp, "expected ':'");
                    jp->p++;
                }
                if (!jvalue(jp, &v->items[v->n - 1])) return false;
                jws(jp);
                if (jp->p < jp->end && *jp->p == ',') {
                    jp->p++;
                    continue;
                }
                if (jp->p < jp->end && *jp->p == (obj ? '}' : ']')) {
                    jp->p++;
                    break;
                }
                return jfail(jp, obj ? "expected ',' or '}'" : "expected ',' or ']'");
            }
        }
    } else if (c == '"') {
        v->type = JV_STR;
        ok = jstring(jp, &v->text, &v->len);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        const char * s = jp->p;
        const char * q = s;
        if (*q == '-') q++;
        if (q >= jp->end || !isdigit((unsigned char) *q)) return jfail(jp, "bad number");
        if (*q == '0') q++;
        else while (q < jp->end && isdigit((unsigned char) *q)) q++;
        if (q < jp->end && *q == '.') {
            q++;
            if (q >= jp->end || !isdigit((unsigned char) *q)) {
                jp->p = q;
                return jfail(jp, "bad number");
            }
            while (q < jp->end && isdigit((unsigned char) *q)) q++;
        }
        if (q < jp->end && (*q == 'e' || *q == 'E')) {
            q++;
            if (q < jp->end && (*q == '+' || *q == '-')) q++;
            if (q >= jp->end || !isdigit((unsigned char) *q)) {
                jp->p = q;
                return jfail(jp, "bad number");
            }
            while (q < jp->end && isdigit((unsigned char) *q)) q++;
        }
        v->type = JV_NUM;
        v->len = (size_t) (q - s);
        v->text = malloc(v->len + 1);
        if (!v->text) return jfail(jp, "out of memory");
        memcpy(v->text, s, v->len);
        v->text[v->len] = 0;
        v->num = strtod(v->text, NULL);
        jp->p = q;
    } else if ((size_t) (jp->end - jp->p) >= 4 && !memcmp(jp->p, "true", 4)) {
        v->type = JV_BOOL;
        v->b = true;
        jp->p += 4;
    } else if ((size_t) (jp->end - jp->p) >= 5 && !memcmp(jp->p, "false", 5)) {
        v->type = JV_BOOL;
        jp->p += 5;
    } else if ((size_t) (jp->end - jp->p) >= 4 && !memcmp(jp->p, "null", 4)) {
        v->type = JV_NULL;
        jp->p += 4;
    } else {
        return jfail(jp, "unexpected character");
    }
    jp->depth--;
    return ok;
}

/* parse a whole document; NULL + kiln_last_error naming line and column */
static struct jv * json_parse(const char * text, size_t len) {
    struct jparser jp = { .src = text, .p = text, .end = text + len };
    struct jv * v = calloc(1, sizeof(*v));
    if (!v) {
        kiln_set_last_error("json: out of memory");
        return NULL;
    }
    bool ok = jvalue(&jp, v);
    if (ok) {
        jws(&jp);
        if (jp.p != jp.end) ok = jfail(&jp, "trailing characters after the value");
    }
    if (!ok) {
        int line = 1, col = 1;
        for (const char * c = text; c < jp.err_at && c < jp.end; c++) {
            if (*c == '\n') {
                line++;
                col = 1;
            } else if (((unsigned char) *c & 0xC0) != 0x80) {
                col++;
            }
        }
        kiln_set_last_error("json schema: line %d, column %d: %s", line, col, jp.err);
        jv_free(v);
        free(v);
        return NULL;
    }
    return v;
}

static const struct jv * jget(const struct jv * o, const char * key) {
    if (!o || o->type != JV_OBJ) return NULL;
    for (size_t i = 0; i < o->n; i++) {
        if (strcmp(o->keys[i], key) == 0) return &o->items[i];
    }
    return NULL;
}

/* ------------------------------------------------------------ text */

struct sb {
    char * s;
    size_t n, cap;
    bool oom;
};

static void sb_addn(struct sb * b, const char * s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char * p = realloc(b->s, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void sb_add(struct sb * b, const char * s) {
    sb_addn(b, s, strlen(s));
}

static void sb_addf(struct sb * b, const char * fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k <= 0) return;
    char * tmp = malloc((size_t) k + 1);
    if (!tmp) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(tmp, (size_t) k + 1, fmt, ap);
    va_end(ap);
    sb_addn(b, tmp, (size_t) k);
    free(tmp);
}

/* compact JSON text of a value (strings escaped as JSON requires; other
 * characters kept as they are) */
static void json_dump(struct sb * b, const struct jv * v) {
    switch (v->type) {
        case JV_NULL: sb_add(b, "null"); break;
        case JV_BOOL: sb_add(b, v->b ? "true" : "false"); break;
        case JV_NUM:
            if (!strpbrk(v->text, ".eE")) {
                sb_add(b, v->text);
            } else {
                char tmp[40];
                for (int prec = 15; prec <= 17; prec++) {
                    snprintf(tmp, sizeof(tmp), "%.*g", prec, v->num);
                    if (strtod(tmp, NULL) == v->num) break;
                }
                sb_add(b, tmp);
                if (!strpbrk(tmp, ".eEn")) sb_add(b, ".0");
            }
            break;
        case JV_STR:
            sb_add(b, "\"");
            for (size_t i = 0; i < v->len; i++) {
                unsigned char c = (unsigned char) v->text[i];
                switch (c) {
                    case '"': sb_add(b, "\\\""); break;
                    case '\\': sb_add(b, "\\\\"); break;
                    case '\b': sb_add(b, "\\b"); break;
                    case '\f': sb_add(b, "\\f"); break;
                    case '\n': sb_add(b, "\\n"); break;
                    case '\r': sb_add(b, "\\r"); break;
                    case '\t': sb_add(b, "\\t"); break;
                    default:
                        if (c < 0x20) sb_addf(b, "\\u%04x", c);
                        else sb_addn(b, (const char *) &c, 1);
                }
            }
            sb_add(b, "\"");
            break;
        case JV_ARR:
            sb_add(b, "[");
            for (size_t i = 0; i < v->n; i++) {
                if (i) sb_add(b, ",");
                json_dump(b, &v->items[i]);
            }
            sb_add(b, "]");
            break;
        case JV_OBJ:
            sb_add(b, "{");
            for (size_t i = 0; i < v->n; i++) {
                if (i) sb_add(b, ",");
                struct jv k = { .type = JV_STR, .text = v->keys[i], .len = strlen(v->keys[i]) };
                json_dump(b, &k);
                sb_add(b, ":");
                json_dump(b, &v->items[i]);
            }
            sb_add(b, "}");
            break;
    }
}

/* a GBNF literal for text: quotes, with \r \n " \ escaped */
static void gbnf_literal(struct sb * b, const char * s, size_t n) {
    sb_add(b, "\"");
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
            case '\r': sb_add(b, "\\r"); break;
            case '\n': sb_add(b, "\\n"); break;
            case '"': sb_add(b, "\\\""); break;
            case '\\': sb_add(b, "\\\\"); break;
            default: sb_addn(b, s + i, 1);
        }
    }
    sb_add(b, "\"");
}

/* ------------------------------------------------------------ rules */

#define SPACE_RULE "| \" \" | \"\\n\"{1,2} [ \\t]{0,20}"

struct prim {
    const char * name;
    const char * body;
    const char * deps[7];
};

static const struct prim PRIMS[] = {
    { "boolean", "(\"true\" | \"false\") space", { 0 } },
    { "decimal-part", "[0-9]{1,16}", { 0 } },
    { "integral-part", "[0] | [1-9] [0-9]{0,15}", { 0 } },
    { "number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? integral-part)? space",
      { "integral-part", "decimal-part", 0 } },
    { "integer", "(\"-\"? integral-part) space", { "integral-part", 0 } },
    { "value", "object | array | string | number | boolean | null",
      { "object", "array", "string", "number", "boolean", "null", 0 } },
    { "object", "\"{\" space ( string \":\" space value (\",\" space string \":\" space value)* )? \"}\" space",
      { "string", "value", 0 } },
    { "array", "\"[\" space ( value (\",\" space value)* )? \"]\" space", { "value", 0 } },
    { "uuid", "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
              "[0-9a-fA-F]{12} \"\\\"\" space", { 0 } },
    { "char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\bfnrt] | \"u\" [0-9a-fA-F]{4})", { 0 } },
    { "string", "\"\\\"\" char* \"\\\"\" space", { "char", 0 } },
    { "null", "\"null\" space", { 0 } },
    /* string formats */
    { "date", "[0-9]{4} \"-\" ( \"0\" [1-9] | \"1\" [0-2] ) \"-\" ( \"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1] )", { 0 } },
    { "time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{3} )? ( \"Z\" | ( \"+\" | "
              "\"-\" ) ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )", { 0 } },
    { "date-time", "date \"T\" time", { "date", "time", 0 } },
    { "date-string", "\"\\\"\" date \"\\\"\" space", { "date", 0 } },
    { "time-string", "\"\\\"\" time \"\\\"\" space", { "time", 0 } },
    { "date-time-string", "\"\\\"\" date-time \"\\\"\" space", { "date-time", 0 } },
};
#define N_PRIMS (sizeof(PRIMS) / sizeof(PRIMS[0]))

static const struct prim * find_prim(const char * name) {
    for (size_t i = 0; i < N_PRIMS; i++) {
        if (strcmp(PRIMS[i].name, name) == 0) return &PRIMS[i];
    }
    return NULL;
}

struct rule {
    char * name;
    char * body;
};

struct conv {
    struct rule * rules;
    size_t n, cap;
    const struct jv * root;
    const char * resolving[64];
    int n_resolving;
    char * pending[64];   /* names of rules referred to while being defined */
    int n_pending;
    int depth;
    bool failed;
};

static bool cfail(struct conv * c, const char * fmt, ...) {
    if (!c->failed) {
        char msg[200];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        kiln_set_last_error("json schema: %s", msg);
        c->failed = true;
    }
    return false;
}

static struct rule * find_rule(struct conv * c, const char * name) {
    for (size_t i = 0; i < c->n; i++) {
        if (strcmp(c->rules[i].name, name) == 0) return &c->rules[i];
    }
    return NULL;
}

static char * xstrdup(const char * s) {
    size_t n = strlen(s);
    char * d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* store a rule under name (runs of other than [a-zA-Z0-9-] become '-');
 * a name taken by a different body gets a number appended. Returns the name
 * used (owned by the table), NULL on OOM. */
static const char * add_rule(struct conv * c, const char * name, const char * body) {
    if (c->failed) return NULL;
    struct sb esc = { 0 };
    for (const char * p = name; *p;) {
        if (isalnum((unsigned char) *p) || *p == '-') {
            sb_addn(&esc, p++, 1);
        } else {
            while (*p && !(isalnum((unsigned char) *p) || *p == '-')) p++;
            sb_add(&esc, "-");
        }
    }
    if (!esc.s) sb_add(&esc, "");
    if (esc.oom) {
        free(esc.s);
        cfail(c, "out of memory");
        return NULL;
    }
    struct rule * r = find_rule(c, esc.s);
    if (r && strcmp(r->body, body) == 0) {
        free(esc.s);
        return r->name;
    }
    char * key = esc.s;
    if (r) {
        char * k = malloc(esc.n + 16);
        if (!k) {
            free(esc.s);
            cfail(c, "out of memory");
            return NULL;
        }
        for (int i = 0;; i++) {
            snprintf(k, esc.n + 16, "%s%d", esc.s, i);
            struct rule * o = find_rule(c, k);
            if (!o || strcmp(o->body, body) == 0) break;
        }
        free(esc.s);
        key = k;
    }
    r = find_rule(c, key);
    if (r) {
        free(key);
        return r->name;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 32;
        struct rule * nr = realloc(c->rules, cap * sizeof(*nr));
        if (!nr) {
            free(key);
            cfail(c, "out of memory");
            return NULL;
        }
        c->rules = nr;
        c->cap = cap;
    }
    char * bd = xstrdup(body);
    if (!bd) {
        free(key);
        cfail(c, "out of memory");
        return NULL;
    }
    c->rules[c->n++] = (struct rule) { key, bd };
    return key;
}

static const char * add_primitive(struct conv * c, const char * name, const struct prim * p) {
    const char * n = add_rule(c, name, p->body);
    for (int i = 0; n && p->deps[i]; i++) {
        if (!find_rule(c, p->deps[i])) {
            const struct prim * d = find_prim(p->deps[i]);
            if (d && !add_primitive(c, p->deps[i], d)) return NULL;
        }
    }
    return n;
}

static bool is_reserved(const char * name) {
    return !strcmp(name, "root") || !strcmp(name, "dot") || find_prim(name) != NULL;
}

/* item repeated min..max times (max < 0: unbounded), with a separator */
/* minItems/maxItems/minLength/maxLength as a repetition count: absent (or
 * not a number) gives def; negative counts are 0; a maximum past what a GBNF
 * repetition can say (2000, the parser's limit) is no maximum, a minimum past
 * it is refused */
static long jcount(struct conv * c, const struct jv * v, long def, bool is_max, const char * what) {
    if (!v || v->type != JV_NUM) return def;
    if (!(v->num >= 0)) return 0;
    if (v->num > 2000) {
        if (is_max) return -1;
        cfail(c, "%s %g is more than a grammar can repeat (2000)", what, v->num);
        return 0;
    }
    return (long) v->num;
}

/* a schema number brought inside +-1e16 before it becomes an integer bound
 * (the 15-digit check then refuses what was beyond it) */
static double bound16(double x) {
    return x > 1e16 ? 1e16 : x < -1e16 ? -1e16 : x;
}

static void build_repetition(struct sb * b, const char * item, long min_items, long max_items, const char * sep) {
    bool has_max = max_items >= 0;
    if (max_items == 0) return;
    if (min_items == 0 && max_items == 1) {
        sb_addf(b, "%s?", item);
        return;
    }
    if (!sep) {
        if (min_items == 1 && !has_max) sb_addf(b, "%s+", item);
        else if (min_items == 0 && !has_max) sb_addf(b, "%s*", item);
        else if (has_max) sb_addf(b, "%s{%ld,%ld}", item, min_items, max_items);
        else sb_addf(b, "%s{%ld,}", item, min_items);
        return;
    }
    struct sb inner = { 0 };
    sb_add(&inner, "(");
    sb_add(&inner, sep);
    sb_add(&inner, " ");
    sb_add(&inner, item);
    sb_add(&inner, ")");
    if (min_items == 0) sb_add(b, "(");
    sb_add(b, item);
    sb_add(b, " ");
    if (inner.s) build_repetition(b, inner.s, min_items == 0 ? 0 : min_items - 1, has_max ? max_items - 1 : -1, NULL);
    if (min_items == 0) sb_add(b, ")?");
    b->oom = b->oom || inner.oom;
    free(inner.s);
}

static const char * visit(struct conv * c, const struct jv * s, const char * name);

static void path_name(char * out, size_t sz, const char * name, const char * suffix) {
    snprintf(out, sz, "%s%s%s", name, *name ? "-" : "", suffix);
}

/* ------------------------------------------------------------ integers */

static void digit_class(struct sb * b, char from, char to) {
    if (from == to) sb_addf(b, "[%c]", from);
    else sb_addf(b, "[%c-%c]", from, to);
}

/* canonical digit strings of equal length from lo to hi inclusive */
static void same_length_range(struct sb * b, const char * lo, const char * hi) {
    size_t n = strlen(lo), i = 0;
    while (i < n && lo[i] == hi[i]) i++;
    if (i > 0) {
        sb_add(b, "\"");
        sb_addn(b, lo, i);
        sb_add(b, "\"");
        if (i == n) return;
        sb_add(b, " ");
    }
    size_t rest = n - i - 1;
    if (rest == 0) {
        digit_class(b, lo[i], hi[i]);
        return;
    }
    bool lo_zeros = true, hi_nines = true;
    for (size_t k = i + 1; k < n; k++) {
        lo_zeros = lo_zeros && lo[k] == '0';
        hi_nines = hi_nines && hi[k] == '9';
    }
    char first = lo_zeros ? lo[i] : (char) (lo[i] + 1);
    char last = hi_nines ? hi[i] : (char) (hi[i] - 1);
    char nines[24], zeros[24];
    memset(nines, '9', rest);
    nines[rest] = 0;
    memset(zeros, '0', rest);
    zeros[rest] = 0;
    int alts = (!lo_zeros) + (first <= last) + (!hi_nines);
    if (alts > 1) sb_add(b, "(");
    int k = 0;
    if (!lo_zeros) {
        digit_class(b, lo[i], lo[i]);
        sb_add(b, " (");
        same_length_range(b, lo + i + 1, nines);
        sb_add(b, ")");
        k++;
    }
    if (first <= last) {
        if (k++) sb_add(b, " | ");
        digit_class(b, first, last);
        if (rest == 1) sb_add(b, " [0-9]");
        else sb_addf(b, " [0-9]{%zu}", rest);
    }
    if (!hi_nines) {
        if (k++) sb_add(b, " | ");
        digit_class(b, hi[i], hi[i]);
        sb_add(b, " (");
        same_length_range(b, zeros, hi + i + 1);
        sb_add(b, ")");
    }
    if (alts > 1) sb_add(b, ")");
}

/* canonical magnitudes lo..hi (hi < 0: up to 16 digits, as integral-part);
 * returns the number of alternatives written */
static int magnitude_range(struct sb * b, long long lo, long long hi, int k) {
    char los[24], his[24];
    snprintf(los, sizeof(los), "%lld", lo);
    int lo_len = (int) strlen(los), hi_len = 16;
    if (hi >= 0) {
        if (hi < lo) return k;
        snprintf(his, sizeof(his), "%lld", hi);
        hi_len = (int) strlen(his);
    }
    for (int len = lo_len; len <= hi_len; len++) {
        char from[24], to[24];
        if (len == lo_len) {
            memcpy(from, los, (size_t) lo_len + 1);
        } else {
            memset(from, '0', (size_t) len);
            from[0] = '1';
            from[len] = 0;
        }
        if (hi >= 0 && len == hi_len) {
            memcpy(to, his, (size_t) len + 1);
        } else if (hi < 0 && len > lo_len) {
            /* every longer length at once */
            if (k++) sb_add(b, " | ");
            sb_addf(b, "[1-9] [0-9]{%d,15}", len - 1);
            break;
        } else {
            memset(to, '9', (size_t) len);
            to[len] = 0;
        }
        if (k++) sb_add(b, " | ");
        same_length_range(b, from, to);
    }
    return k;
}

static void int_range(struct sb * b, bool has_min, long long mn, bool has_max, long long mx) {
    int k = 0;
    /* zero and positive values */
    if (!has_max || mx >= 0) {
        k = magnitude_range(b, has_min && mn > 0 ? mn : 0, has_max ? mx : -1, k);
    }
    /* negative values: "-" and a magnitude of at least 1 */
    if (!has_min || mn < 0) {
        long long lo = has_max && mx < 0 ? -mx : 1;
        long long hi = has_min ? -mn : -1;
        struct sb neg = { 0 };
        int kn = magnitude_range(&neg, lo, hi, 0);
        if (kn > 0) {
            if (k++) sb_add(b, " | ");
            sb_add(b, kn > 1 ? "\"-\" (" : "\"-\" ");
            if (neg.s) sb_add(b, neg.s);
            if (kn > 1) sb_add(b, ")");
        }
        b->oom = b->oom || neg.oom;
        free(neg.s);
    }
}

/* ------------------------------------------------------------ visitors */

/* a string literal rule matching any JSON string except the given ones
 * (the key rule of additionalProperties next to named properties) */
struct trie {
    unsigned char c;
    bool end;
    struct trie * kids;
    size_t n;
};

static void trie_free(struct trie * t) {
    for (size_t i = 0; i < t->n; i++) trie_free(&t->kids[i]);
    free(t->kids);
}

static bool trie_insert(struct trie * t, const char * s) {
    for (; *s; s++) {
        struct trie * next = NULL;
        for (size_t i = 0; i < t->n; i++) {
            if (t->kids[i].c == (unsigned char) *s) next = &t->kids[i];
        }
        if (!next) {
            size_t j = 0;
            while (j < t->n && t->kids[j].c < (unsigned char) *s) j++;
            struct trie * k = realloc(t->kids, (t->n + 1) * sizeof(*k));
            if (!k) return false;
            t->kids = k;
            memmove(&t->kids[j + 1], &t->kids[j], (t->n - j) * sizeof(*k));
            memset(&t->kids[j], 0, sizeof(*k));
            t->kids[j].c = (unsigned char) *s;
            t->n++;
            next = &t->kids[j];
        }
        t = next;
    }
    t->end = true;
    return true;
}

static void class_char(struct sb * b, unsigned char c) {
    if (c == ']' || c == '\\' || c == '-' || c == '^' || c == '"') sb_addf(b, "\\%c", c);
    else if (c < 0x20) sb_addf(b, "\\x%02X", c);
    else sb_addn(b, (const char *) &c, 1);
}

static void trie_visit(struct sb * b, const struct trie * t, const char * char_rule) {
    for (size_t i = 0; i < t->n; i++) {
        if (i) sb_add(b, " | ");
        sb_add(b, "[");
        class_char(b, t->kids[i].c);
        sb_add(b, "]");
        if (t->kids[i].n) {
            sb_add(b, " (");
            trie_visit(b, &t->kids[i], char_rule);
            sb_add(b, ")");
        } else if (t->kids[i].end) {
            sb_addf(b, " %s+", char_rule);
        }
    }
    if (t->n) {
        sb_add(b, " | [^\"");
        for (size_t i = 0; i < t->n; i++) class_char(b, t->kids[i].c);
        sb_addf(b, "] %s*", char_rule);
    }
}

static const char * not_strings(struct conv * c, const struct jv * props, const char * name) {
    struct trie t = { 0 };
    for (size_t i = 0; i < props->n; i++) {
        if (!trie_insert(&t, props->keys[i])) {
            trie_free(&t);
            cfail(c, "out of memory");
            return NULL;
        }
    }
    const char * char_rule = add_primitive(c, "char", find_prim("char"));
    struct sb b = { 0 };
    sb_add(&b, "[\"] ( ");
    if (char_rule) trie_visit(&b, &t, char_rule);
    sb_addf(&b, " )%s [\"] space", t.end ? "" : "?");
    trie_free(&t);
    const char * r = b.oom ? NULL : add_rule(c, name, b.s);
    free(b.s);
    return r;
}

static bool is_required(const struct jv * req, const char * key) {
    if (!req || req->type != JV_ARR) return false;
    for (size_t i = 0; i < req->n; i++) {
        if (req->items[i].type == JV_STR && strcmp(req->items[i].text, key) == 0) return true;
    }
    return false;
}

/* the alternatives for optional properties ks[0..n): the first one present
 * (or not, when first_optional), then the rest recursively */
static void optional_refs(struct conv * c, struct sb * b, const char * const * kv, const char * const * keys, size_t n,
                          bool first_optional, const char * name) {
    bool star = strcmp(keys[0], "*") == 0;
    if (first_optional) {
        sb_addf(b, "( \",\" space %s )%s", kv[0], star ? "*" : "?");
    } else {
        sb_add(b, kv[0]);
        if (star) sb_addf(b, " ( \",\" space %s )*", kv[0]);
    }
    if (n > 1) {
        struct sb rest = { 0 };
        optional_refs(c, &rest, kv + 1, keys + 1, n - 1, true, name);
        char rn[512];
        snprintf(rn, sizeof(rn), "%s%s%s-rest", name, *name ? "-" : "", keys[0]);
        const char * r = rest.s ? add_rule(c, rn, rest.s) : NULL;
        free(rest.s);
        if (r) sb_addf(b, " %s", r);
    }
}

static const char * build_object(struct conv * c, const struct jv * s, const char * name, const char * rule_name) {
    const struct jv * props = jget(s, "properties");
    const struct jv * req = jget(s, "required");
    const struct jv * addl = jget(s, "additionalProperties");
    size_t np = props && props->type == JV_OBJ ? props->n : 0;
    const char ** kv = calloc(np + 1, sizeof(char *));
    const char ** keys = calloc(np + 1, sizeof(char *));
    const char ** req_kv = calloc(np + 1, sizeof(char *));
    const char ** opt_kv = calloc(np + 1, sizeof(char *));
    const char ** opt_keys = calloc(np + 1, sizeof(char *));
    struct sb b = { 0 };
    const char * result = NULL;
    if (!kv || !keys || !req_kv || !opt_kv || !opt_keys) {
        cfail(c, "out of memory");
        goto done;
    }
    size_t n_req = 0, n_opt = 0;
    for (size_t i = 0; i < np; i++) {
        char pn[512], kn[512];
        path_name(pn, sizeof(pn), name, props->keys[i]);
        const char * vr = visit(c, &props->items[i], pn);
        if (!vr) goto done;
        snprintf(kn, sizeof(kn), "%s%s%s-kv", name, *name ? "-" : "", props->keys[i]);
        struct sb body = { 0 };
        struct sb key = { 0 };
        struct jv k = { .type = JV_STR, .text = props->keys[i], .len = strlen(props->keys[i]) };
        json_dump(&key, &k);
        if (key.s) gbnf_literal(&body, key.s, key.n);
        sb_addf(&body, " space \":\" space %s", vr);
        kv[i] = body.oom || key.oom ? NULL : add_rule(c, kn, body.s);
        free(body.s);
        free(key.s);
        if (!kv[i]) {
            cfail(c, "out of memory");
            goto done;
        }
        keys[i] = props->keys[i];
        if (is_required(req, props->keys[i])) req_kv[n_req++] = kv[i];
        else {
            opt_kv[n_opt] = kv[i];
            opt_keys[n_opt++] = props->keys[i];
        }
    }
    if (addl && (addl->type == JV_OBJ || (addl->type == JV_BOOL && addl->b))) {
        char sub[512], tmp[600];
        path_name(sub, sizeof(sub), name, "additional");
        const char * value_rule;
        if (addl->type == JV_OBJ) {
            snprintf(tmp, sizeof(tmp), "%s-value", sub);
            value_rule = visit(c, addl, tmp);
        } else {
            value_rule = add_primitive(c, "value", find_prim("value"));
        }
        const char * key_rule;
        if (np == 0) {
            key_rule = add_primitive(c, "string", find_prim("string"));
        } else {
            snprintf(tmp, sizeof(tmp), "%s-k", sub);
            key_rule = not_strings(c, props, tmp);
        }
        if (!value_rule || !key_rule) goto done;
        struct sb body = { 0 };
        sb_addf(&body, "%s \":\" space %s", key_rule, value_rule);
        snprintf(tmp, sizeof(tmp), "%s-kv", sub);
        opt_kv[n_opt] = body.oom ? NULL : add_rule(c, tmp, body.s);
        free(body.s);
        if (!opt_kv[n_opt]) goto done;
        opt_keys[n_opt++] = "*";
    }
    sb_add(&b, "\"{\" space ");
    for (size_t i = 0; i < n_req; i++) {
        if (i) sb_add(&b, " \",\" space ");
        sb_add(&b, req_kv[i]);
    }
    if (n_opt) {
        sb_add(&b, " (");
        if (n_req) sb_add(&b, " \",\" space ( ");
        for (size_t i = 0; i < n_opt; i++) {
            if (i) sb_add(&b, " | ");
            optional_refs(c, &b, opt_kv + i, opt_keys + i, n_opt - i, false, name);
        }
        if (n_req) sb_add(&b, " )");
        sb_add(&b, " )?");
    }
    sb_add(&b, " \"}\" space");
    if (b.oom) cfail(c, "out of memory");
    else result = add_rule(c, rule_name, b.s);
done:
    free(b.s);
    free(kv);
    free(keys);
    free(req_kv);
    free(opt_kv);
    free(opt_keys);
    return c->failed ? NULL : result;
}

/* the value at a local JSON pointer (#/a/b, ~0 ~1 unescaped) */
static const struct jv * resolve_pointer(const struct jv * root, const char * ref) {
    if (ref[0] != '#') return NULL;
    const struct jv * cur = root;
    const char * p = ref + 1;
    while (*p == '/') {
        p++;
        char seg[256];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof(seg)) {
            if (p[0] == '~' && p[1] == '0') { seg[n++] = '~'; p += 2; }
            else if (p[0] == '~' && p[1] == '1') { seg[n++] = '/'; p += 2; }
            else seg[n++] = *p++;
        }
        seg[n] = 0;
        if (cur->type == JV_OBJ) {
            cur = jget(cur, seg);
        } else if (cur->type == JV_ARR) {
            char * e;
            long i = strtol(seg, &e, 10);
            cur = (*e || i < 0 || (size_t) i >= cur->n) ? NULL : &cur->items[i];
        } else {
            cur = NULL;
        }
        if (!cur) return NULL;
    }
    return *p ? NULL : cur;
}

static const char * resolve_ref(struct conv * c, const char * ref) {
    const char * frag = strchr(ref, '#');
    if (!frag || frag != ref) {
        cfail(c, "only local $ref (\"#/...\") is supported: %.100s", ref);
        return NULL;
    }
    char name[512];
    snprintf(name, sizeof(name), "ref%s", frag + 1);
    struct sb esc = { 0 };
    for (const char * p = name; *p;) {
        if (isalnum((unsigned char) *p) || *p == '-') sb_addn(&esc, p++, 1);
        else {
            while (*p && !(isalnum((unsigned char) *p) || *p == '-')) p++;
            sb_add(&esc, "-");
        }
    }
    if (!esc.s || esc.oom) {
        free(esc.s);
        cfail(c, "out of memory");
        return NULL;
    }
    snprintf(name, sizeof(name), "%s", esc.s);
    free(esc.s);
    struct rule * r = find_rule(c, name);
    if (r) return r->name;
    for (int i = 0; i < c->n_resolving; i++) {
        if (strcmp(c->resolving[i], ref) == 0) {
            /* recursive reference: the rule is being defined higher up;
             * its name is kept until the conversion ends */
            for (int k = 0; k < c->n_pending; k++) {
                if (strcmp(c->pending[k], name) == 0) return c->pending[k];
            }
            char * k = c->n_pending < 64 ? xstrdup(name) : NULL;
            if (!k) {
                cfail(c, "out of memory or too many recursive $refs");
                return NULL;
            }
            c->pending[c->n_pending++] = k;
            return k;
        }
    }
    const struct jv * target = resolve_pointer(c->root, ref);
    if (!target) {
        cfail(c, "$ref %.100s does not resolve", ref);
        return NULL;
    }
    if (c->n_resolving >= 64) {
        cfail(c, "$ref chain too deep");
        return NULL;
    }
    c->resolving[c->n_resolving++] = ref;
    const char * out = visit(c, target, name);
    c->n_resolving--;
    return out;
}

static const char * visit_inner(struct conv * c, const struct jv * s, const char * name, const char * rule_name) {
    if (s->type == JV_BOOL && s->b) {
        /* `true`: any value */
        const char * v = add_primitive(c, "value", find_prim("value"));
        return v ? add_rule(c, rule_name, v) : NULL;
    }
    if (s->type != JV_OBJ) {
        cfail(c, "a schema must be an object (at '%s')", *name ? name : "root");
        return NULL;
    }
    const struct jv * type = jget(s, "type");
    const struct jv * fmt = jget(s, "format");
    const char * format = fmt && fmt->type == JV_STR ? fmt->text : "";
    const char * tname = type && type->type == JV_STR ? type->text : NULL;
    const struct jv * ref = jget(s, "$ref");
    const struct jv * alts = jget(s, "oneOf");
    if (!alts) alts = jget(s, "anyOf");
    struct sb b = { 0 };
    const char * out = NULL;

    if (ref && ref->type == JV_STR) {
        const char * r = resolve_ref(c, ref->text);
        return r ? add_rule(c, rule_name, r) : NULL;
    }
    if ((alts && alts->type == JV_ARR) || (type && type->type == JV_ARR)) {
        bool by_type = !(alts && alts->type == JV_ARR);
        const struct jv * list = by_type ? type : alts;
        if (list->n == 0) {
            cfail(c, "empty %s (at '%s')", by_type ? "type list" : "oneOf/anyOf", *name ? name : "root");
            return NULL;
        }
        for (size_t i = 0; i < list->n; i++) {
            char an[512];
            snprintf(an, sizeof(an), "%s%s%zu", name, *name ? "-" : "alternative-", i);
            const char * r;
            if (by_type) {
                /* the same schema with one type */
                struct jv copy = *s;
                struct jv * items = malloc(s->n * sizeof(*items));
                if (!items) {
                    cfail(c, "out of memory");
                    break;
                }
                memcpy(items, s->items, s->n * sizeof(*items));
                for (size_t k = 0; k < s->n; k++) {
                    if (strcmp(s->keys[k], "type") == 0) items[k] = list->items[i];
                }
                copy.items = items;
                r = visit(c, &copy, an);
                free(items);
            } else {
                r = visit(c, &list->items[i], an);
            }
            if (!r) break;
            if (i) sb_add(&b, " | ");
            sb_add(&b, r);
        }
        if (!c->failed) out = add_rule(c, rule_name, b.s ? b.s : "");
        free(b.s);
        return out;
    }
    const struct jv * cst = jget(s, "const");
    const struct jv * en = jget(s, "enum");
    if (cst || (en && en->type == JV_ARR)) {
        if (cst) {
            struct sb d = { 0 };
            json_dump(&d, cst);
            if (d.s) gbnf_literal(&b, d.s, d.n);
            free(d.s);
            sb_add(&b, " space");
        } else {
            sb_add(&b, "(");
            for (size_t i = 0; i < en->n; i++) {
                struct sb d = { 0 };
                json_dump(&d, &en->items[i]);
                if (i) sb_add(&b, " | ");
                if (d.s) gbnf_literal(&b, d.s, d.n);
                free(d.s);
            }
            sb_add(&b, ") space");
        }
        out = b.oom ? NULL : add_rule(c, rule_name, b.s);
        free(b.s);
        return out;
    }
    const struct jv * addl = jget(s, "additionalProperties");
    if ((!tname || !strcmp(tname, "object")) &&
        (jget(s, "properties") || (addl && !(addl->type == JV_BOOL && addl->b)))) {
        return build_object(c, s, name, rule_name);
    }
    if (jget(s, "allOf")) {
        cfail(c, "allOf is not supported (at '%s')", *name ? name : "root");
        return NULL;
    }
    const struct jv * items = jget(s, "items");
    if (!items) items = jget(s, "prefixItems");
    if ((!tname || !strcmp(tname, "array")) && items) {
        sb_add(&b, "\"[\" space ");
        if (items->type == JV_ARR) {
            for (size_t i = 0; i < items->n; i++) {
                char tn[512], suf[32];
                snprintf(suf, sizeof(suf), "tuple-%zu", i);
                path_name(tn, sizeof(tn), name, suf);
                const char * r = visit(c, &items->items[i], tn);
                if (!r) break;
                if (i) sb_add(&b, " \",\" space ");
                sb_add(&b, r);
            }
        } else {
            char in[512];
            path_name(in, sizeof(in), name, "item");
            const char * r = visit(c, items, in);
            const struct jv * mn = jget(s, "minItems"), * mx = jget(s, "maxItems");
            if (r) build_repetition(&b, r, jcount(c, mn, 0, false, "minItems"),
                                    jcount(c, mx, -1, true, "maxItems"), "\",\" space");
        }
        sb_add(&b, " \"]\" space");
        if (!c->failed) out = b.oom ? NULL : add_rule(c, rule_name, b.s);
        free(b.s);
        return out;
    }
    if ((!tname || !strcmp(tname, "string")) && jget(s, "pattern")) {
        cfail(c, "pattern is not supported (at '%s')", *name ? name : "root");
        return NULL;
    }
    if ((!tname || !strcmp(tname, "string")) && !strncmp(format, "uuid", 4) &&
        (format[4] == 0 || (format[4] >= '1' && format[4] <= '5' && format[5] == 0))) {
        return add_primitive(c, !strcmp(rule_name, "root") ? "root" : format, find_prim("uuid"));
    }
    char fs[64];
    snprintf(fs, sizeof(fs), "%s-string", format);
    if ((!tname || !strcmp(tname, "string")) && *format && find_prim(fs) &&
        (!strcmp(format, "date") || !strcmp(format, "time") || !strcmp(format, "date-time"))) {
        const char * p = add_primitive(c, fs, find_prim(fs));
        return p ? add_rule(c, rule_name, p) : NULL;
    }
    const struct jv * mnl = jget(s, "minLength"), * mxl = jget(s, "maxLength");
    if (tname && !strcmp(tname, "string") && (mnl || mxl)) {
        const char * ch = add_primitive(c, "char", find_prim("char"));
        sb_add(&b, "\"\\\"\" ");
        if (ch) build_repetition(&b, ch, jcount(c, mnl, 0, false, "minLength"),
                                 jcount(c, mxl, -1, true, "maxLength"), NULL);
        sb_add(&b, " \"\\\"\" space");
        out = b.oom || c->failed ? NULL : add_rule(c, rule_name, b.s);
        free(b.s);
        return out;
    }
    const struct jv * mn = jget(s, "minimum"), * xmn = jget(s, "exclusiveMinimum");
    const struct jv * mx = jget(s, "maximum"), * xmx = jget(s, "exclusiveMaximum");
    if ((!tname || !strcmp(tname, "integer")) && (mn || xmn || mx || xmx)) {
        bool has_min = false, has_max = false;
        long long lo = 0, hi = 0;
        if (mn && mn->type == JV_NUM) { has_min = true; lo = (long long) ceil(bound16(mn->num)); }
        else if (xmn && xmn->type == JV_NUM) { has_min = true; lo = (long long) floor(bound16(xmn->num)) + 1; }
        if (mx && mx->type == JV_NUM) { has_max = true; hi = (long long) floor(bound16(mx->num)); }
        else if (xmx && xmx->type == JV_NUM) { has_max = true; hi = (long long) ceil(bound16(xmx->num)) - 1; }
        if ((has_min && llabs(lo) > 999999999999999LL) || (has_max && llabs(hi) > 999999999999999LL)) {
            cfail(c, "integer bounds beyond 15 digits are not supported (at '%s')", *name ? name : "root");
            return NULL;
        }
        if (has_min && has_max && lo > hi) {
            cfail(c, "minimum above maximum (at '%s')", *name ? name : "root");
            return NULL;
        }
        sb_add(&b, "(");
        int_range(&b, has_min, lo, has_max, hi);
        sb_add(&b, ") space");
        out = b.oom ? NULL : add_rule(c, rule_name, b.s);
        free(b.s);
        return out;
    }
    if ((tname && !strcmp(tname, "object")) || s->n == 0) {
        const char * p = add_primitive(c, "object", find_prim("object"));
        return p ? add_rule(c, rule_name, p) : NULL;
    }
    if (!tname || !find_prim(tname) || !strcmp(tname, "uuid") || !strcmp(tname, "char")) {
        cfail(c, "unrecognized schema at '%s' (no supported \"type\")", *name ? name : "root");
        return NULL;
    }
    return add_primitive(c, !strcmp(rule_name, "root") ? "root" : tname, find_prim(tname));
}

static const char * visit(struct conv * c, const struct jv * s, const char * name) {
    if (c->failed) return NULL;
    if (++c->depth > 128) {
        cfail(c, "schema nested too deeply");
        return NULL;
    }
    char rule_name[512];
    if (is_reserved(name)) snprintf(rule_name, sizeof(rule_name), "%s-", name);
    else snprintf(rule_name, sizeof(rule_name), "%s", *name ? name : "root");
    const char * r = visit_inner(c, s, name, rule_name);
    c->depth--;
    return c->failed ? NULL : r;
}

static int cmp_rule(const void * a, const void * b) {
    return strcmp(((const struct rule *) a)->name, ((const struct rule *) b)->name);
}

char * kiln_json_schema_to_grammar(const char * schema, int32_t len) {
    if (!schema) {
        kiln_set_last_error("json schema: NULL text");
        return NULL;
    }
    size_t n = len < 0 ? strlen(schema) : (size_t) len;
    struct jv * root = json_parse(schema, n);
    if (!root) return NULL;
    struct conv c = { .root = root };
    add_rule(&c, "space", SPACE_RULE);
    visit(&c, root, "");
    char * out = NULL;
    if (!c.failed) {
        qsort(c.rules, c.n, sizeof(*c.rules), cmp_rule);
        struct sb b = { 0 };
        for (size_t i = 0; i < c.n; i++) {
            sb_addf(&b, "%s ::= ", c.rules[i].name);
            sb_add(&b, c.rules[i].body);
            sb_add(&b, "\n");
        }
        if (b.oom) {
            free(b.s);
            kiln_set_last_error("json schema: out of memory");
        } else {
            out = b.s;
        }
    }
    for (size_t i = 0; i < c.n; i++) {
        free(c.rules[i].name);
        free(c.rules[i].body);
    }
    free(c.rules);
    for (int i = 0; i < c.n_pending; i++) free(c.pending[i]);
    jv_free(root);
    free(root);
    return out;
}
