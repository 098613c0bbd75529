#include "textstream.h"

#include <stdlib.h>
#include <string.h>

bool textstream_add(struct textstream * ts, const char * s, size_t n) {
    if (ts->n + n > ts->cap) {
        size_t cap = (ts->n + n) * 2 + 64;
        char * b = realloc(ts->buf, cap);
        if (!b) {
            return false;
        }
        ts->buf = b;
        ts->cap = cap;
    }
    memcpy(ts->buf + ts->n, s, n);
    ts->n += n;
    return true;
}

/* bytes at the end that begin a character not yet complete */
static size_t incomplete_tail(const char * s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char) s[n - back];
        if ((c & 0xC0) == 0x80) {
            continue;
        }
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > back ? back : 0;
    }
    return 0;
}

size_t textstream_ready(const struct textstream * ts, bool final, bool * hit) {
    size_t stop_at = ts->n;
    *hit = false;
    for (int i = 0; i < ts->n_stop; i++) {
        const char * s = ts->stop[i];
        size_t sl = s ? strlen(s) : 0;
        for (size_t k = 0; sl > 0 && k + sl <= ts->n && k < stop_at; k++) {
            if (memcmp(ts->buf + k, s, sl) == 0) {
                stop_at = k;
                *hit = true;
                break;
            }
        }
    }
    if (*hit || final) {
        return stop_at;
    }
    /* hold back the longest tail that is a proper prefix of a stop string */
    size_t hold = 0;
    for (int i = 0; i < ts->n_stop; i++) {
        const char * s = ts->stop[i];
        size_t sl = s ? strlen(s) : 0;
        for (size_t l = sl > 0 ? sl - 1 : 0; l > hold; l--) {
            if (l <= ts->n && memcmp(ts->buf + ts->n - l, s, l) == 0) {
                hold = l;
                break;
            }
        }
    }
    size_t ready = ts->n - hold;
    return ready - incomplete_tail(ts->buf, ready);
}

void textstream_consume(struct textstream * ts, size_t n) {
    if (n > ts->n) {
        n = ts->n;
    }
    if (n == 0) {
        return; /* also: an empty stream may have no buffer yet */
    }
    memmove(ts->buf, ts->buf + n, ts->n - n);
    ts->n -= n;
}

void textstream_free(struct textstream * ts) {
    free(ts->buf);
    ts->buf = NULL;
    ts->n = ts->cap = 0;
}
