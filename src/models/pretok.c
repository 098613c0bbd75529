#include "pretok.h"
#include "unicode.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable list of word lengths */

struct lens {
    size_t * v;
    size_t   n, cap;
    bool     oom;
};

static void push(struct lens * l, size_t x) {
    if (x == 0 || l->oom) {
        return;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        size_t * v = realloc(l->v, cap * sizeof(size_t));
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = x;
}

/* ---- a fragment [ini, end) of the code points, with out-of-range reads
 * returning "nothing" as llama.cpp's splitters do */

#define OUT_OF_RANGE 0xFFFFFFFFu

struct frag {
    const uint32_t * cpts;
    size_t ini, end;
};

static uint32_t cpt_at(const struct frag * f, size_t pos) {
    return (pos >= f->ini && pos < f->end) ? f->cpts[pos] : OUT_OF_RANGE;
}

static uint8_t flags_at(const struct frag * f, size_t pos) {
    return (pos >= f->ini && pos < f->end) ? ucd_flags(f->cpts[pos]) : 0;
}

static bool is_ws(uint8_t fl)     { return (fl & UCD_WHITESPACE) != 0; }
static bool is_letter(uint8_t fl) { return (fl & UCD_LETTER) != 0; }
static bool is_number(uint8_t fl) { return (fl & UCD_NUMBER) != 0; }
/* [^\s\p{L}\p{N}] as the hand-written splitters test it: assigned code
 * points only (flags != 0) */
static bool is_other(uint8_t fl)  { return fl != 0 && !(fl & (UCD_WHITESPACE | UCD_LETTER | UCD_NUMBER)); }

static uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

/* 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when ci): match length or 0 */
static size_t contraction(const struct frag * f, size_t pos, bool ci) {
    if (cpt_at(f, pos) != '\'' || pos + 1 >= f->end) {
        return 0;
    }
    uint32_t a = cpt_at(f, pos + 1);
    if (ci) {
        a = ascii_lower(a);
    }
    if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        return 2;
    }
    if (pos + 2 < f->end) {
        uint32_t b = cpt_at(f, pos + 2);
        if (ci) {
            b = ascii_lower(b);
        }
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
            return 3;
        }
    }
    return 0;
}

/* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static void split_gpt2(const struct frag * f, struct lens * out) {
    size_t prev = f->ini;
    size_t pos = f->ini;
#define EMIT(e) do { push(out, (e) - prev); prev = (e); } while (0)
    while (pos < f->end) {
        uint32_t cpt = cpt_at(f, pos);
        uint8_t fl = flags_at(f, pos);
        size_t c = contraction(f, pos, false);
        if (c) {
            pos += c;
            EMIT(pos);
            continue;
        }
        uint8_t fl2 = (cpt == ' ') ? flags_at(f, pos + 1) : fl;
        if (is_letter(fl2)) {
            pos += (cpt == ' ');
            while (is_letter(fl2)) {
                fl2 = flags_at(f, ++pos);
            }
            EMIT(pos);
            continue;
        }
        if (is_number(fl2)) {
            pos += (cpt == ' ');
            while (is_number(fl2)) {
                fl2 = flags_at(f, ++pos);
            }
            EMIT(pos);
            continue;
        }
        if (is_other(fl2)) {
            pos += (cpt == ' ');
            while (is_other(fl2)) {
                fl2 = flags_at(f, ++pos);
            }
            EMIT(pos);
            continue;
        }
        size_t n_ws = 0;
        while (is_ws(flags_at(f, pos + n_ws))) {
            n_ws++;
        }
        if (n_ws > 1 && cpt_at(f, pos + n_ws) != OUT_OF_RANGE) {
            pos += n_ws - 1;
            EMIT(pos);
            continue;
        }
        if (n_ws > 0) {
            pos += n_ws;
            EMIT(pos);
            continue;
        }
        EMIT(pos + 1);
        pos++;
    }
}

/* (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
 * | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+  (llama3: 3, qwen2: 1) */
static void split_llama3(const struct frag * f, struct lens * out, size_t max_digits) {
    size_t prev = f->ini;
    size_t pos = f->ini;
    while (pos < f->end) {
        uint32_t cpt = cpt_at(f, pos);
        uint8_t fl = flags_at(f, pos);
        size_t c = contraction(f, pos, true);
        if (c) {
            pos += c;
            EMIT(pos);
            continue;
        }
        if (!(cpt == '\r' || cpt == '\n' || is_number(fl))) {
            if (is_letter(fl) || is_letter(flags_at(f, pos + 1))) {
                pos++;
                while (is_letter(flags_at(f, pos))) {
                    pos++;
                }
                EMIT(pos);
                continue;
            }
        }
        if (is_number(fl)) {
            size_t ini = pos;
            while (is_number(flags_at(f, pos))) {
                if (++pos - ini >= max_digits) {
                    EMIT(pos);
                    ini = pos;
                }
            }
            EMIT(pos);
            continue;
        }
        uint8_t fl2 = (cpt == ' ') ? flags_at(f, pos + 1) : fl;
        /* llama.cpp tests the first code point's own flags for "assigned" here */
        if (!(fl2 & (UCD_WHITESPACE | UCD_LETTER | UCD_NUMBER)) && fl != 0) {
            pos += (cpt == ' ');
            while (is_other(fl2)) {
                fl2 = flags_at(f, ++pos);
            }
            uint32_t c2 = cpt_at(f, pos);
            while (c2 == '\r' || c2 == '\n') {
                c2 = cpt_at(f, ++pos);
            }
            EMIT(pos);
            continue;
        }
        size_t n_ws = 0, last_rn = 0;
        while (is_ws(flags_at(f, pos + n_ws))) {
            uint32_t c2 = cpt_at(f, pos + n_ws);
            if (c2 == '\r' || c2 == '\n') {
                last_rn = pos + n_ws + 1;
            }
            n_ws++;
        }
        if (last_rn > 0) {
            pos = last_rn;
            EMIT(pos);
            continue;
        }
        if (n_ws > 1 && cpt_at(f, pos + n_ws) != OUT_OF_RANGE) {
            pos += n_ws - 1;
            EMIT(pos);
            continue;
        }
        if (n_ws > 0) {
            pos += n_ws;
            EMIT(pos);
            continue;
        }
        EMIT(pos + 1);
        pos++;
    }
#undef EMIT
}

/* ---- std::regex-style expressions: a matcher returns the length of the
 * match starting at pos (0 = none); the driver scans left to right like
 * std::regex_iterator and keeps the unmatched gaps as words too. */

typedef size_t (*matcher_fn)(const struct frag * f, size_t pos, const void * arg);

static void split_regex(const struct frag * f, struct lens * out, matcher_fn m, const void * arg) {
    size_t prev = f->ini;
    size_t pos = f->ini;
    while (pos < f->end) {
        size_t len = m(f, pos, arg);
        if (len == 0) {
            pos++;
            continue;
        }
        push(out, pos - prev);
        push(out, len);
        pos += len;
        prev = pos;
    }
    push(out, f->end - prev);
}

/* a code point as the collapsed text sees it: ASCII stays itself; other
 * whitespace is \s; other code points are their category */
static bool ascii_punct(uint32_t c) {
    return (c >= 0x21 && c <= 0x23) || (c >= 0x25 && c <= 0x2A) || (c >= 0x2C && c <= 0x2F) ||
           (c >= 0x3A && c <= 0x3B) || (c >= 0x3F && c <= 0x40) || (c >= 0x5B && c <= 0x5D) ||
           c == 0x5F || c == 0x7B || c == 0x7D;
}

static bool cls_ws(uint32_t c) {
    return c < 128 ? (c == ' ' || (c >= 0x09 && c <= 0x0D)) : is_ws(ucd_flags(c));
}

/* the non-ASCII category as collapsed: whitespace wins over the category */
static uint8_t collapsed_cat(uint32_t c) {
    uint8_t fl = ucd_flags(c);
    return (fl & UCD_WHITESPACE) ? UCD_WHITESPACE : (fl & 0x7F);
}

static bool cls_punct(uint32_t c) {
    return c < 128 ? ascii_punct(c) : collapsed_cat(c) == UCD_PUNCT;
}

static bool cls_letter(uint32_t c) {
    return c < 128 ? ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) : collapsed_cat(c) == UCD_LETTER;
}

static bool cls_number(uint32_t c) {
    return c < 128 ? (c >= '0' && c <= '9') : collapsed_cat(c) == UCD_NUMBER;
}

/* [\p{P}<extra ASCII>]+ */
static size_t m_punct_plus(const struct frag * f, size_t pos, const void * arg) {
    const char * extra = arg;
    size_t p = pos;
    for (; p < f->end; p++) {
        uint32_t c = f->cpts[p];
        if (!(cls_punct(c) || (c < 128 && c != 0 && strchr(extra, (int) c)))) {
            break;
        }
    }
    return p - pos;
}

static size_t m_number_plus(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    size_t p = pos;
    while (p < f->end && cls_number(f->cpts[p])) {
        p++;
    }
    return p - pos;
}

static size_t m_number_one(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    return cls_number(f->cpts[pos]) ? 1 : 0;
}

static size_t m_three_ascii_digits(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    if (pos + 3 > f->end) {
        return 0;
    }
    for (size_t i = 0; i < 3; i++) {
        uint32_t c = f->cpts[pos + i];
        if (c < '0' || c > '9') {
            return 0;
        }
    }
    return 3;
}

static size_t m_cr_lf(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    return (f->cpts[pos] == '\r' || f->cpts[pos] == '\n') ? 1 : 0;
}

/* \s?X+ for a class predicate */
typedef bool (*class_fn)(uint32_t c);

static size_t opt_ws_then_run(const struct frag * f, size_t pos, class_fn cls) {
    size_t p = pos;
    if (cls_ws(f->cpts[p]) && p + 1 < f->end && cls(f->cpts[p + 1])) {
        p++;
    }
    size_t start = p;
    while (p < f->end && cls(f->cpts[p])) {
        p++;
    }
    return p > start ? p - pos : 0;
}

static size_t m_ws_letters(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    return opt_ws_then_run(f, pos, cls_letter);
}

static size_t m_ws_puncts(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    return opt_ws_then_run(f, pos, cls_punct);
}

/* character sets written as in llama.cpp's expressions ("a-z" ranges and
 * single code points), parsed once */
struct cset {
    const char * spec;
    uint32_t lo[128], hi[128];
    int n;
    bool ready;
};

static void cset_init(struct cset * s) {
    if (s->ready) {
        return;
    }
    size_t n = 0;
    uint32_t * c = utf8_to_cpts(s->spec, strlen(s->spec), &n);
    s->n = 0;
    for (size_t i = 0; c && i < n && s->n < 128;) {
        if (i + 2 < n && c[i + 1] == '-') {
            s->lo[s->n] = c[i];
            s->hi[s->n] = c[i + 2];
            i += 3;
        } else {
            s->lo[s->n] = s->hi[s->n] = c[i];
            i += 1;
        }
        s->n++;
    }
    free(c);
    s->ready = true;
}

static bool cset_has(const struct cset * s, uint32_t c) {
    for (int i = 0; i < s->n; i++) {
        if (c >= s->lo[i] && c <= s->hi[i]) {
            return true;
        }
    }
    return false;
}

static struct cset cs_deepseek_letters = { .spec =
    "A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf"
    "\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5"
    "\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd"
    "\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"
    "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97"
    "\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe"
    "\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac"
    "\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95\xe2\x84\x99-\xe2\x84\x9d"
    "\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9\xe2\x84\xbc-\xe2\x84\xbf"
    "\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae"
    "\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87"
    "\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba"
    "\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb"
    "\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83" };

/* !-/:-~！-／：-～‘-‟　-。 */
static struct cset cs_deepseek_punct = { .spec =
    "!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82" };

/* 一-龥ࠀ-一가-퟿ */
static struct cset cs_cjk = { .spec =
    "\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf" };

/* wregex runs on the raw text, where non-ASCII whitespace reads as \v */
static uint32_t wregex_view(uint32_t c) {
    return (c > 0x7F && is_ws(ucd_flags(c))) ? 0x0B : c;
}

/* \s?[set]+ */
static size_t m_ws_set(const struct frag * f, size_t pos, const void * arg) {
    const struct cset * s = arg;
    size_t p = pos;
    if (cls_ws(f->cpts[p]) && p + 1 < f->end && cset_has(s, wregex_view(f->cpts[p + 1]))) {
        p++;
    }
    size_t start = p;
    while (p < f->end && cset_has(s, wregex_view(f->cpts[p]))) {
        p++;
    }
    return p > start ? p - pos : 0;
}

static size_t m_set_plus(const struct frag * f, size_t pos, const void * arg) {
    const struct cset * s = arg;
    size_t p = pos;
    while (p < f->end && cset_has(s, wregex_view(f->cpts[p]))) {
        p++;
    }
    return p - pos;
}

/* \s+$ */
static size_t m_trailing_ws(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    for (size_t p = pos; p < f->end; p++) {
        if (!cls_ws(f->cpts[p])) {
            return 0;
        }
    }
    return f->end - pos;
}

/* gpt-4o (Phi-4-mini, Llama 4, ...), as llama.cpp rewrites it for std::regex:
 *   [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
 *  |[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:<the same contractions>)?
 *  |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * on the collapsed text, where every non-ASCII letter is one and the same
 * byte: it is neither a-z nor A-Z, so it counts as upper case AND as lower
 * case ("ÉCOLE" splits as "É" "COLE"). The matcher follows ECMAScript's
 * backtracking: the first alternative that matches, quantifiers greedy. */
static bool cls_upper_like(uint32_t c) { return cls_letter(c) && !(c >= 'a' && c <= 'z'); }
static bool cls_lower_like(uint32_t c) { return cls_letter(c) && !(c >= 'A' && c <= 'Z'); }
static bool cls_other(uint32_t c)      { return !cls_ws(c) && !cls_letter(c) && !cls_number(c); }

static size_t m_gpt4o(const struct frag * f, size_t pos, const void * arg) {
    (void) arg;
    const uint32_t * t = f->cpts;
    const size_t end = f->end;
    const uint32_t c = t[pos];
    /* the two letter alternatives: an optional prefix, then the letters */
    size_t s = pos;
    if (c != '\r' && c != '\n' && !cls_letter(c) && !cls_number(c) && pos + 1 < end && cls_letter(t[pos + 1])) {
        s = pos + 1;
    }
    if (cls_letter(t[s])) {
        size_t n_up = 0;
        while (s + n_up < end && cls_upper_like(t[s + n_up])) {
            n_up++;
        }
        /* the upper-case run gives back code points until a lower-case one
         * can follow it; when none can, the second alternative takes the run */
        size_t e = s + n_up;
        for (size_t k = n_up + 1; k-- > 0;) {
            if (s + k < end && cls_lower_like(t[s + k])) {
                e = s + k;
                while (e < end && cls_lower_like(t[e])) {
                    e++;
                }
                break;
            }
        }
        return e + contraction(f, e, true) - pos;
    }
    if (cls_number(c)) {
        size_t n = 1;
        while (n < 3 && pos + n < end && cls_number(t[pos + n])) {
            n++;
        }
        return n;
    }
    size_t p = pos + (c == ' ' && pos + 1 < end && cls_other(t[pos + 1]));
    if (cls_other(t[p])) {
        while (p < end && cls_other(t[p])) {
            p++;
        }
        while (p < end && (t[p] == '\r' || t[p] == '\n' || t[p] == '/')) {
            p++;
        }
        return p - pos;
    }
    /* whitespace: through the last \r or \n of the run; else all of it but
     * the last one when something follows; else all of it */
    size_t n_ws = 0, last_rn = 0;
    while (pos + n_ws < end && cls_ws(t[pos + n_ws])) {
        if (t[pos + n_ws] == '\r' || t[pos + n_ws] == '\n') {
            last_rn = n_ws + 1;
        }
        n_ws++;
    }
    if (last_rn > 0) {
        return last_rn;
    }
    return (n_ws > 1 && pos + n_ws < end) ? n_ws - 1 : n_ws;
}

/* ---- the expressions per pre-tokenizer */

enum step_kind { STEP_GPT2, STEP_LLAMA3, STEP_QWEN2, STEP_REGEX };

struct step {
    enum step_kind kind;
    matcher_fn     m;
    const void   * arg;
};

static int steps_for(enum pretok_type type, struct step * s) {
    int n = 0;
#define REGEX(fn, a) (s[n++] = (struct step) { STEP_REGEX, fn, a })
#define KIND(k)      (s[n++] = (struct step) { k, NULL, NULL })
    switch (type) {
        case PRETOK_LLAMA3:
            KIND(STEP_LLAMA3);
            break;
        case PRETOK_QWEN2:
            KIND(STEP_QWEN2);
            break;
        case PRETOK_DEEPSEEK_LLM:
            cset_init(&cs_deepseek_letters);
            cset_init(&cs_deepseek_punct);
            cset_init(&cs_cjk);
            REGEX(m_cr_lf, NULL);
            REGEX(m_ws_set, &cs_deepseek_letters);
            REGEX(m_ws_set, &cs_deepseek_punct);
            REGEX(m_trailing_ws, NULL);
            REGEX(m_set_plus, &cs_cjk);
            REGEX(m_number_plus, NULL);
            break;
        case PRETOK_DEEPSEEK_CODER:
            cset_init(&cs_cjk);
            REGEX(m_cr_lf, NULL);
            REGEX(m_ws_letters, NULL);
            REGEX(m_ws_puncts, NULL);
            REGEX(m_set_plus, &cs_cjk);
            REGEX(m_number_one, NULL);
            break;
        case PRETOK_FALCON:
            REGEX(m_punct_plus, "$+<=>^~|`");
            KIND(STEP_GPT2);
            REGEX(m_three_ascii_digits, NULL);
            break;
        case PRETOK_STARCODER:
        case PRETOK_REFACT:
            REGEX(m_number_one, NULL);
            KIND(STEP_GPT2);
            break;
        case PRETOK_GPT2:
        case PRETOK_MPT:
            KIND(STEP_GPT2);
            break;
        case PRETOK_GPT4O:
            REGEX(m_gpt4o, NULL);
            break;
        case PRETOK_DEFAULT:
        default:
            REGEX(m_punct_plus, "$+<=>^~|");
            KIND(STEP_GPT2);
            REGEX(m_number_plus, NULL);
            REGEX(m_three_ascii_digits, NULL);
            break;
    }
#undef REGEX
#undef KIND
    return n;
}

void pretok_prepare(enum pretok_type type) {
    struct step steps[8];
    (void) steps_for(type, steps);
}

size_t * pretok_split(enum pretok_type type, const uint32_t * cpts, size_t n, size_t * n_words) {
    struct step steps[8];
    int n_steps = steps_for(type, steps);
    struct lens cur = { 0 };
    push(&cur, n);
    for (int si = 0; si < n_steps && !cur.oom; si++) {
        struct lens next = { 0 };
        size_t start = 0;
        for (size_t w = 0; w < cur.n; w++) {
            struct frag f = { cpts, start, start + cur.v[w] };
            switch (steps[si].kind) {
                case STEP_GPT2:   split_gpt2(&f, &next); break;
                case STEP_LLAMA3: split_llama3(&f, &next, 3); break;
                case STEP_QWEN2:  split_llama3(&f, &next, 1); break;
                case STEP_REGEX:  split_regex(&f, &next, steps[si].m, steps[si].arg); break;
            }
            start = f.end;
        }
        free(cur.v);
        cur = next;
    }
    if (cur.oom) {
        free(cur.v);
        *n_words = 0;
        return NULL;
    }
    *n_words = cur.n;
    if (!cur.v) {
        cur.v = malloc(sizeof(size_t));
    }
    return cur.v;
}
