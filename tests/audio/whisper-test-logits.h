/*
 * whisper-test-logits.h — replaces a decoder's logits by a deterministic
 * function of its tokens so far, for comparing two engines' decoding logic
 * (beam search, sampling, fallback, ranking, segments) on identical numbers:
 * both drivers (whisper-cpp-driver.c through whisper.cpp's
 * logits_filter_callback, kiln-whisper-driver.c through Kiln's logits_filter)
 * install it. Every finite logit becomes scale * (a sum of four uniforms from
 * a hash of (seed, the token ids so far, the vocabulary index), centred),
 * minus 3.5 on timestamp tokens (so that timestamps are forced at some
 * steps, not all), plus a bias on EOT that grows with the length so
 * decoders finish;
 * suppressed (-INFINITY) entries stay suppressed.
 */
#ifndef WHISPER_TEST_LOGITS_H
#define WHISPER_TEST_LOGITS_H

#include <math.h>
#include <stdint.h>

static uint64_t wtl_mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ids: the decoder's token ids so far (n of them) */
static void wtl_fill(uint64_t seed, const int32_t * ids, int n, float * logits, int n_vocab, int eot, int beg, float scale) {
    uint64_t h = wtl_mix(seed);
    for (int i = 0; i < n; i++) h = wtl_mix(h ^ (uint64_t) (uint32_t) ids[i]);
    for (int i = 0; i < n_vocab; i++) {
        if (logits[i] == -INFINITY) continue;
        const uint64_t r = wtl_mix(h ^ ((uint64_t) i << 20));
        const float u = (float) ((r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + ((r >> 48) & 0xffff)) / 65536.0f - 2.0f;
        logits[i] = scale * u - (i >= beg ? 3.5f : 0.0f);
    }
    if (eot >= 0 && eot < n_vocab && logits[eot] != -INFINITY) logits[eot] += 0.2f * (float) n;
}

#endif
