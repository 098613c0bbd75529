#include "unicode.h"

#include <stdlib.h>

uint8_t ucd_flags(uint32_t cpt) {
    if (cpt >= 0x110000) {
        return 0;
    }
    int lo = 0, hi = kiln_ucd_n_runs - 1;
    while (lo < hi) { /* last run whose start <= cpt */
        int mid = (lo + hi + 1) / 2;
        if (kiln_ucd_run_start[mid] <= cpt) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    return kiln_ucd_run_flags[lo];
}

uint32_t ucd_tolower(uint32_t cpt) {
    int lo = 0, hi = kiln_ucd_n_lower - 1;
    while (lo <= hi) {
        const int mid = (lo + hi) / 2;
        if (kiln_ucd_lower[mid][0] == cpt) return kiln_ucd_lower[mid][1];
        if (kiln_ucd_lower[mid][0] < cpt) lo = mid + 1;
        else hi = mid - 1;
    }
    return cpt;
}

uint32_t ucd_nfd_first(uint32_t cpt) {
    int lo = 0, hi = kiln_ucd_n_nfd - 1;
    while (lo <= hi) { /* the run holding cpt, if any */
        const int mid = (lo + hi) / 2;
        if (cpt < kiln_ucd_nfd[mid][0]) hi = mid - 1;
        else if (cpt > kiln_ucd_nfd[mid][1]) lo = mid + 1;
        else return kiln_ucd_nfd[mid][2];
    }
    return cpt;
}

size_t utf8_len(uint8_t lead) {
    static const uint8_t lookup[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    return lookup[lead >> 4];
}

uint32_t utf8_decode(const char * str, size_t n, size_t * offs) {
    const uint8_t * s = (const uint8_t *) str;
    size_t i = *offs;
    uint8_t c = s[i];
    if (!(c & 0x80)) {
        *offs = i + 1;
        return c;
    }
    /* continuation byte as lead, or a bad/short sequence: one byte of U+FFFD */
    if ((c & 0xE0) == 0xC0) {
        if (i + 1 < n && (s[i + 1] & 0xC0) == 0x80) {
            *offs = i + 2;
            return ((uint32_t) (c & 0x1F) << 6) | (s[i + 1] & 0x3F);
        }
    } else if ((c & 0xF0) == 0xE0) {
        if (i + 2 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80) {
            *offs = i + 3;
            return ((uint32_t) (c & 0x0F) << 12) | ((uint32_t) (s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        }
    } else if ((c & 0xF8) == 0xF0) {
        if (i + 3 < n && (s[i + 1] & 0xC0) == 0x80 && (s[i + 2] & 0xC0) == 0x80 && (s[i + 3] & 0xC0) == 0x80) {
            *offs = i + 4;
            return ((uint32_t) (c & 0x07) << 18) | ((uint32_t) (s[i + 1] & 0x3F) << 12) |
                   ((uint32_t) (s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
        }
    }
    *offs = i + 1;
    return 0xFFFD;
}

int utf8_encode(uint32_t cpt, char * out) {
    if (cpt <= 0x7F) {
        out[0] = (char) cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        out[0] = (char) (0xC0 | (cpt >> 6));
        out[1] = (char) (0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt <= 0xFFFF) {
        out[0] = (char) (0xE0 | (cpt >> 12));
        out[1] = (char) (0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char) (0x80 | (cpt & 0x3F));
        return 3;
    }
    if (cpt > 0x10FFFF) {
        cpt = 0xFFFD;
        return utf8_encode(cpt, out);
    }
    out[0] = (char) (0xF0 | (cpt >> 18));
    out[1] = (char) (0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char) (0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char) (0x80 | (cpt & 0x3F));
    return 4;
}

uint32_t * utf8_to_cpts(const char * s, size_t n, size_t * n_out) {
    uint32_t * out = malloc((n + 1) * sizeof(uint32_t));
    size_t k = 0;
    if (!out) {
        *n_out = 0;
        return NULL;
    }
    for (size_t offs = 0; offs < n;) {
        out[k++] = utf8_decode(s, n, &offs);
    }
    *n_out = k;
    return out;
}

/* Printable Latin-1 bytes stand for themselves; the other 68 bytes map, in
 * order, to U+0100 onwards (GPT-2's bytes_to_unicode). */
static int byte_is_printable(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* the 68 other bytes, in order: 0x00-0x20 (33), 0x7F-0xA0 (34), 0xAD (1) */
uint32_t bytes_to_unicode(uint8_t b) {
    if (byte_is_printable(b)) {
        return b;
    }
    uint32_t n = b <= 0x20 ? b : b <= 0xA0 ? 33u + (b - 0x7Fu) : 67u;
    return 256 + n;
}

int unicode_to_byte(uint32_t cpt) {
    if (cpt < 256) {
        return byte_is_printable((int) cpt) ? (int) cpt : -1;
    }
    if (cpt >= 256 + 68) {
        return -1;
    }
    uint32_t n = cpt - 256;
    return n < 33 ? (int) n : n < 67 ? (int) (0x7F + (n - 33)) : 0xAD;
}
