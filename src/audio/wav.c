/*
 * wav.c — RIFF/WAVE reader (see kiln-audio.h): PCM 8/16/24/32-bit and IEEE
 * float32/64, plain or WAVE_FORMAT_EXTENSIBLE, mixed down to mono float.
 */
#include "kiln-audio.h"
#include "audio_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t rd_u32(const uint8_t * p) { return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24; }
static uint16_t rd_u16(const uint8_t * p) { return (uint16_t)(p[0] | p[1] << 8); }

/* one sample of the given format as a float in [-1, 1] */
static float sample_at(const uint8_t * p, int bits, bool is_float) {
    if (is_float) {
        if (bits == 32) { float f; uint32_t u = rd_u32(p); memcpy(&f, &u, 4); return f; }
        uint64_t u = (uint64_t) rd_u32(p) | (uint64_t) rd_u32(p + 4) << 32;
        double d; memcpy(&d, &u, 8); return (float) d;
    }
    switch (bits) {
        case 8:  return ((int) p[0] - 128) / 128.0f;
        case 16: return (int16_t) rd_u16(p) / 32768.0f;
        case 24: { int32_t v = (int32_t)((uint32_t) p[0] << 8 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 24) >> 8; return v / 8388608.0f; }
        default: return (float)((int32_t) rd_u32(p) / 2147483648.0);
    }
}

bool kiln_wav_read_mem(const void * data, size_t size, struct kiln_wav * out) {
    if (!out) { kiln_set_last_error("wav: output is NULL"); return false; }
    memset(out, 0, sizeof(*out));
    const uint8_t * b = (const uint8_t *) data;
    if (!b || size < 12 || memcmp(b, "RIFF", 4) != 0 || memcmp(b + 8, "WAVE", 4) != 0) {
        kiln_set_last_error("wav: not a RIFF/WAVE file");
        return false;
    }
    const uint8_t * fmt = NULL; size_t fmt_size = 0;
    const uint8_t * pcm = NULL; size_t pcm_size = 0;
    size_t off = 12;
    while (off + 8 <= size) {
        const uint32_t len = rd_u32(b + off + 4);
        const uint8_t * body = b + off + 8;
        size_t avail = size - off - 8;
        if (memcmp(b + off, "fmt ", 4) == 0) {
            if (len > avail) { kiln_set_last_error("wav: truncated fmt chunk"); return false; }
            fmt = body; fmt_size = len;
        } else if (memcmp(b + off, "data", 4) == 0) {
            /* a truncated data chunk (or a streaming writer's 0/~0 size) keeps what is there */
            pcm = body; pcm_size = len <= avail && len != 0 ? len : avail;
            if (fmt) break;
        }
        if (len > avail) break;
        off += 8 + (size_t) len + (len & 1);
    }
    if (!fmt || fmt_size < 16) { kiln_set_last_error("wav: no fmt chunk"); return false; }
    if (!pcm) { kiln_set_last_error("wav: no data chunk"); return false; }
    uint16_t tag = rd_u16(fmt);
    const int channels = rd_u16(fmt + 2);
    const uint32_t rate = rd_u32(fmt + 4);
    const int block = rd_u16(fmt + 12);
    const int bits = rd_u16(fmt + 14);
    if (tag == 0xFFFE) { /* WAVE_FORMAT_EXTENSIBLE: the sub-format GUID starts with the tag */
        if (fmt_size < 40) { kiln_set_last_error("wav: truncated WAVE_FORMAT_EXTENSIBLE fmt chunk"); return false; }
        tag = rd_u16(fmt + 24);
    }
    const bool is_float = tag == 3;
    if (tag != 1 && tag != 3) { kiln_set_last_error("wav: unsupported format tag %u (PCM and IEEE float only)", tag); return false; }
    if (is_float ? (bits != 32 && bits != 64) : (bits != 8 && bits != 16 && bits != 24 && bits != 32)) {
        kiln_set_last_error("wav: unsupported %s sample size %d bits", is_float ? "float" : "PCM", bits);
        return false;
    }
    if (channels < 1 || channels > 64) { kiln_set_last_error("wav: bad channel count %d", channels); return false; }
    if (rate < 1000 || rate > 1000000) { kiln_set_last_error("wav: unsupported sample rate %u", rate); return false; }
    const int bytes = bits / 8;
    if (block != channels * bytes) { kiln_set_last_error("wav: block align %d does not match %d channels x %d bits", block, channels, bits); return false; }
    const int64_t n = (int64_t)(pcm_size / (size_t) block);
    float * s = (float *) malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    if (!s) { kiln_set_last_error("wav: out of memory for %lld samples", (long long) n); return false; }
    for (int64_t i = 0; i < n; i++) {
        const uint8_t * p = pcm + (size_t) i * (size_t) block;
        float acc = 0.0f;
        for (int c = 0; c < channels; c++) acc += sample_at(p + c * bytes, bits, is_float);
        s[i] = channels == 1 ? acc : acc / (float) channels;
    }
    out->samples = s;
    out->n_samples = n;
    out->sample_rate = (int) rate;
    out->n_channels = channels;
    out->bits = bits;
    out->is_float = is_float;
    return true;
}

uint8_t * kiln_audio_read_file(const char * who, const char * path, size_t * size) {
    *size = 0;
    FILE * f = path ? fopen(path, "rb") : NULL;
    if (!f) { kiln_set_last_error("%s: cannot open %s", who, path ? path : "(null)"); return NULL; }
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0) n = ftell(f);
    if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { fclose(f); kiln_set_last_error("%s: cannot read %s", who, path); return NULL; }
    uint8_t * buf = (uint8_t *) malloc((size_t) n + 1);
    if (!buf) { fclose(f); kiln_set_last_error("%s: out of memory reading %s", who, path); return NULL; }
    *size = fread(buf, 1, (size_t) n, f);
    fclose(f);
    return buf;
}

void kiln_audio_error_path(const char * path) {
    char msg[256];
    snprintf(msg, sizeof msg, "%s", kiln_last_error());
    kiln_set_last_error("%s (%s)", msg, path);
}

bool kiln_wav_read_file(const char * path, struct kiln_wav * out) {
    if (out) memset(out, 0, sizeof(*out));
    size_t size;
    uint8_t * buf = kiln_audio_read_file("wav", path, &size);
    if (!buf) return false;
    const bool ok = kiln_wav_read_mem(buf, size, out);
    free(buf);
    if (!ok) kiln_audio_error_path(path);
    return ok;
}

void kiln_wav_free(struct kiln_wav * wav) {
    if (!wav) return;
    free(wav->samples);
    wav->samples = NULL;
    wav->n_samples = 0;
}
