/*
 * whisper_vad.c — whisper_full with Silero VAD in front, as whisper.cpp's
 * whisper_full does when params.vad is set:
 *
 *  - speech segments from the VAD (centiseconds, whisper.cpp's segmenter);
 *  - their audio joined: each segment's samples [start, end) (converted from
 *    centiseconds with rounding, clamped to n - 1), every segment but the
 *    last extended by samples_overlap seconds, 0.1 s of zeros between
 *    segments; the buffer is as long as whisper.cpp sizes it (speech +
 *    overlaps + silences);
 *  - a time map of (processed, original) centisecond points: each segment's
 *    start and end (its end without the overlap) and each silence's start
 *    and end, sorted, duplicates of a processed time dropped (first kept);
 *  - the joined audio transcribed, then every segment's t0 and t1 mapped:
 *    before the first / after the last point -> that point's original time,
 *    an exact point -> its time, otherwise linear interpolation between the
 *    neighbouring points (integer arithmetic), and t1 at least t0 + 10.
 */
#include "whisper_internal.h"

#include <stdlib.h>
#include <string.h>

static int cs_to_samples(int64_t cs) { return (int) ((cs / 100.0) * KILN_WHISPER_SAMPLE_RATE + 0.5); }
static int64_t samples_to_cs(int s) { return (int64_t) ((s / (double) KILN_WHISPER_SAMPLE_RATE) * 100.0 + 0.5); }

static int64_t map_time(const struct kiln_whisper * w, int64_t t) {
    const int64_t (*m)[2] = (const int64_t (*)[2]) w->vad_map;
    const int n = w->vad_n_map;
    if (n == 0) return t;
    if (t <= m[0][0]) return m[0][1];
    if (t >= m[n - 1][0]) return m[n - 1][1];
    int lo = 0, hi = n;   /* first point with processed >= t */
    while (lo < hi) { const int mid = (lo + hi) / 2; if (m[mid][0] < t) lo = mid + 1; else hi = mid; }
    if (m[lo][0] == t) return m[lo][1];
    const int64_t pd = m[lo][0] - m[lo - 1][0], od = m[lo][1] - m[lo - 1][1];
    if (pd == 0) return m[lo - 1][1];
    return m[lo - 1][1] + ((t - m[lo - 1][0]) * od) / pd;
}

static void map_segment(struct kiln_whisper * w, int i) {
    struct kiln_whisper_segment * s = &w->segs[i];
    const int64_t t0 = map_time(w, s->t0);
    int64_t t1 = map_time(w, s->t1);
    if (t1 - t0 < 10) t1 = t0 + 10;
    s->t0 = t0;
    s->t1 = t1;
}

struct vad_cb { struct kiln_whisper_params user; };

static void on_segment_mapped(const struct kiln_whisper * wc, int i, void * user) {
    struct kiln_whisper * w = (struct kiln_whisper *) wc;
    const struct vad_cb * cb = (const struct vad_cb *) user;
    map_segment(w, i);
    w->vad_mapped = i + 1;
    if (cb->user.on_segment) cb->user.on_segment(wc, i, cb->user.user);
}

static void on_progress_user(const struct kiln_whisper * w, int progress, void * user) {
    const struct vad_cb * cb = (const struct vad_cb *) user;
    if (cb->user.on_progress) cb->user.on_progress(w, progress, cb->user.user);
}

static int cmp_point(const void * a, const void * b) {
    const int64_t x = ((const int64_t *) a)[0], y = ((const int64_t *) b)[0];
    return x < y ? -1 : x > y;
}

int whisper_full_vad(struct kiln_whisper * w, const struct kiln_whisper_params * p, const float * samples, int64_t n64) {
    if (!p->vad_model) { kiln_set_last_error("whisper: vad is set but no VAD model is given"); return -1; }
    if (n64 > 0x7fffffff) { kiln_set_last_error("whisper: too many samples for VAD (%lld)", (long long) n64); return -1; }
    const int n = (int) n64;
    const int nw = kiln_vad_n_window(p->vad_model);
    const int64_t n_probs = (n64 + nw - 1) / nw;
    float * probs = (float *) malloc((size_t) (n_probs > 0 ? n_probs : 1) * sizeof(float));
    if (!probs) { kiln_set_last_error("whisper: out of memory"); return -1; }
    if (kiln_vad_probs(p->vad_model, samples, n64, probs) < 0) { free(probs); return -1; }
    const int ns = kiln_vad_segments(probs, n_probs, nw, KILN_WHISPER_SAMPLE_RATE, &p->vad_params, NULL, 0);
    struct kiln_vad_segment * seg = ns > 0 ? (struct kiln_vad_segment *) malloc((size_t) ns * sizeof(*seg)) : NULL;
    if (ns < 0 || (ns > 0 && !seg)) { free(probs); free(seg); if (ns >= 0) kiln_set_last_error("whisper: out of memory"); return -1; }
    if (ns > 0) kiln_vad_segments(probs, n_probs, nw, KILN_WHISPER_SAMPLE_RATE, &p->vad_params, seg, ns);
    free(probs);
    if (ns == 0) { free(seg); return 0; }   /* no speech: no segments */

    const int overlap = (int) (p->vad_params.samples_overlap * KILN_WHISPER_SAMPLE_RATE);
    const int silence = (int) (0.1 * KILN_WHISPER_SAMPLE_RATE);
    int64_t total = 0;
    for (int i = 0; i < ns; i++) {
        const int a = cs_to_samples(seg[i].start_cs);
        int b = cs_to_samples(seg[i].end_cs);
        if (i < ns - 1) b += overlap;
        if (b > n - 1) b = n - 1;
        total += b - a;
    }
    total += (int64_t) (ns - 1) * silence;
    if (total < 0) total = 0;
    float * buf = (float *) calloc((size_t) (total > 0 ? total : 1), sizeof(float));
    int64_t (*map)[2] = (int64_t (*)[2]) malloc((size_t) ns * 4 * sizeof(int64_t[2]));
    if (!buf || !map) { free(buf); free(map); free(seg); kiln_set_last_error("whisper: out of memory"); return -1; }
    int n_map = 0;
    int64_t off = 0;
    for (int i = 0; i < ns; i++) {
        int a = cs_to_samples(seg[i].start_cs), b = cs_to_samples(seg[i].end_cs);
        if (a > n - 1) a = n - 1;
        if (b > n - 1) b = n - 1;
        const int orig_len = b - a;
        if (i < ns - 1) { b += overlap; if (b > n - 1) b = n - 1; }
        const int len = b - a;
        if (len <= 0) continue;
        map[n_map][0] = samples_to_cs((int) off); map[n_map][1] = seg[i].start_cs; n_map++;
        map[n_map][0] = samples_to_cs((int) (off + orig_len)); map[n_map][1] = seg[i].end_cs; n_map++;
        const int64_t room = total - off;
        memcpy(buf + off, samples + a, (size_t) (len < room ? len : room) * sizeof(float));
        off += len;
        if (i < ns - 1) {
            map[n_map][0] = samples_to_cs((int) off); map[n_map][1] = seg[i].end_cs; n_map++;
            map[n_map][0] = samples_to_cs((int) (off + silence)); map[n_map][1] = seg[i + 1].start_cs; n_map++;
            off += silence;   /* zeros already */
        }
    }
    free(seg);
    /* sort by processed time (stable, so the first of equal times is kept as std::unique keeps it) */
    for (int i = 1; i < n_map; i++)
        for (int j = i; j > 0 && cmp_point(map[j - 1], map[j]) > 0; j--) {
            int64_t t0 = map[j][0], t1 = map[j][1];
            map[j][0] = map[j - 1][0]; map[j][1] = map[j - 1][1];
            map[j - 1][0] = t0; map[j - 1][1] = t1;
        }
    int u = 0;
    for (int i = 0; i < n_map; i++) if (u == 0 || map[u - 1][0] != map[i][0]) { map[u][0] = map[i][0]; map[u][1] = map[i][1]; u++; }

    struct vad_cb cb = { *p };
    struct kiln_whisper_params q = *p;
    q.vad = false;
    q.on_segment = on_segment_mapped;
    q.on_progress = on_progress_user;
    q.user = &cb;
    free(w->vad_map);
    w->vad_map = (int64_t *) map;
    w->vad_n_map = u;
    w->vad_mapped = 0;
    const int rc = whisper_full_samples(w, &q, buf, total);
    if (rc == 0) for (int i = w->vad_mapped; i < w->n_segs; i++) map_segment(w, i);
    free(buf);
    return rc;
}
