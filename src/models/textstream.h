/* textstream.h — what generated text may be shown yet (private; tested by
 * test_generate): whole UTF-8 characters only, and nothing that could still
 * become a stop string; text from a stop string on is dropped. */
#ifndef KILN_MODELS_TEXTSTREAM_H
#define KILN_MODELS_TEXTSTREAM_H

#include <stdbool.h>
#include <stddef.h>

struct textstream {
    char * buf;
    size_t n, cap;
    const char * const * stop;
    int n_stop;
};

/* append bytes; false when out of memory */
bool textstream_add(struct textstream * ts, const char * s, size_t n);
/* how many leading bytes of buf may be shown now (final: the stream ended,
 * show everything before a stop string); *hit: a stop string was found at
 * that point. The caller shows them, then calls textstream_consume. */
size_t textstream_ready(const struct textstream * ts, bool final, bool * hit);
void   textstream_consume(struct textstream * ts, size_t n);
void   textstream_free(struct textstream * ts);

#endif
