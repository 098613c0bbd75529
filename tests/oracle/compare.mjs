// compare.mjs — small comparisons (and a tool runner) shared by the oracle scripts.
import { spawnSync } from "node:child_process";
import path from "node:path";

// KILN_TOOL_PREFIX: a command the tools run under, e.g. "qemu-aarch64-static
// -cpu neoverse-n1" for an aarch64 build (scripts/test-arm-oracle.sh)
const TOOL_PREFIX = (process.env.KILN_TOOL_PREFIX ?? "").split(/\s+/).filter((x) => x !== "");

/** a native tool's stdout (input: its stdin, if any); throws with its stderr when it fails */
export function runTool(cmd, argv, input = undefined) {
    const [c, a] = TOOL_PREFIX.length ? [TOOL_PREFIX[0], [...TOOL_PREFIX.slice(1), cmd, ...argv]] : [cmd, argv];
    const r = spawnSync(c, a, { encoding: "utf8", maxBuffer: 512 << 20, input });
    if (r.error) throw r.error;
    if (r.status !== 0) throw new Error(`${path.basename(cmd)} ${argv.join(" ")} exited ${r.status}: ${r.stderr}`);
    return r.stdout;
}

/** log-probabilities of a logit vector (logit - logsumexp) */
export function logSoftmax(v) {
    let m = -Infinity;
    for (const x of v) m = Math.max(m, x);
    let s = 0;
    for (const x of v) s += Math.exp(x - m);
    const lse = m + Math.log(s);
    return v.map((x) => x - lse);
}

/** the first index where two token lists differ, -1 if equal */
export function firstDiff(a, b) {
    const n = Math.max(a.length, b.length);
    for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
    return -1;
}

/** max |log p - kl[token]| over a node-llama-cpp probabilities map (token -> p)
 * against log-probabilities kl; Infinity when the map does not cover them all */
export function maxLogprobDiff(probs, kl) {
    let d = probs.size === kl.length ? 0 : Infinity;
    for (const [tok, pr] of probs) if (pr > 1e-30) d = Math.max(d, Math.abs(Math.log(pr) - kl[tok]));
    return d;
}

/** kiln-generate --print-ids --print-logits N output: the JSON logit lines
 * ({token, logits}) and the generated ids */
export function parseGenerate(out) {
    const logits = [];
    let ids = [];
    for (const l of out.split("\n").filter((x) => x !== "")) {
        if (l.startsWith("{")) logits.push(JSON.parse(l));
        else ids = l.trim().split(/\s+/).map(Number);
    }
    return { logits, ids };
}

/** log-probs (token -> log p) of a node-llama-cpp probabilities map, over n tokens */
export function mapLog(probs, n) {
    const ll = new Float64Array(n).fill(-Infinity);
    for (const [t, p] of probs) ll[t] = Math.log(p);
    return ll;
}

/** the largest log-prob difference of likely tokens a greedy near-tie may show */
export const DRIFT = 5e-2;

/** a and b: two engines' greedy picks at their first difference; la, lb:
 * their log-prob vectors there. A near-tie: each engine's top-2 is the two
 * picks (swapped) and the log-probs of likely tokens agree within DRIFT. */
export function nearTie(a, b, la, lb) {
    const top2 = (l) => [...l.keys()].sort((x, y) => l[y] - l[x]).slice(0, 2);
    let drift = 0;
    for (let t = 0; t < la.length; t++) if (la[t] > Math.log(1e-4)) drift = Math.max(drift, Math.abs(la[t] - lb[t]));
    const [a1, a2] = top2(la), [b1, b2] = top2(lb);
    return { ok: a1 === a && a2 === b && b1 === b && b2 === a && drift <= DRIFT, drift, gap: la[a] - la[b] };
}
