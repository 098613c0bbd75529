// Shared helpers for the peers benchmark: statistics, interleaved A/B runs,
// JSON lines. Not a test: timings on a shared machine are noisy, which is why
// every table shows min-max beside the median.
import { appendFileSync } from 'node:fs';

export function stats(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return { median: null, min: null, max: null, n: 0 };
  const m = v.length >> 1;
  const median = v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return { median, min: v[0], max: v[v.length - 1], n: v.length };
}

// Runs A B A B ... `reps` times (after `warmup` unrecorded pairs); each side
// returns a number (higher is better) or an object {value, ...}. more(): asked
// before each pair after the first recorded one; false stops early (a time
// budget), so at least one pair is always recorded.
export async function interleave(reps, warmup, a, b, more = () => true) {
  return interleaveN(reps, warmup, [a, b], more);
}

// interleave for any number of sides: A B C A B C ...
export async function interleaveN(reps, warmup, fns, more = () => true) {
  const rs = fns.map(() => []);
  for (let i = 0; i < warmup + reps; i++) {
    if (i > warmup && !more()) break;
    for (let f = 0; f < fns.length; f++) {
      const x = await fns[f](i);
      if (i >= warmup) rs[f].push(x);
    }
  }
  return rs;
}

// A wall-clock budget for the whole run: sections ask before optional work
// (extra reps and rounds) whether it still fits.
export function budget(totalS) {
  const t0 = Date.now();
  return {
    elapsedS: () => (Date.now() - t0) / 1e3,
    leftS: () => totalS - (Date.now() - t0) / 1e3,
    // time until a point of the budget (a fraction of it), from now
    untilS: (frac) => totalS * frac - (Date.now() - t0) / 1e3,
  };
}

let jsonFile = null;
export function setJsonFile(f) { jsonFile = f; }
export function emit(obj) {
  const line = JSON.stringify(obj);
  if (jsonFile) appendFileSync(jsonFile, line + '\n');
  return obj;
}

export const fmt = (x, d = 2) => (x == null || !Number.isFinite(x) ? '—' : x.toFixed(d));
export const range = (s, d = 2) => (s.median == null ? '—' : `${fmt(s.median, d)} (${fmt(s.min, d)}–${fmt(s.max, d)})`);
export function ratioStats(a, b) {
  // per-run ratios (run i of A over run i of B) — interleaved pairs share the machine's state
  const r = a.map((x, i) => (x != null && b[i] ? x / b[i] : NaN));
  return stats(r);
}

export function table(rows, headers) {
  const all = [headers, ...rows].map((r) => r.map(String));
  const w = headers.map((_, j) => Math.max(...all.map((r) => r[j].length)));
  const line = (r) => r.map((c, j) => c.padEnd(w[j])).join('  ');
  return [line(all[0]), w.map((n) => '-'.repeat(n)).join('  '), ...all.slice(1).map(line)].join('\n');
}
