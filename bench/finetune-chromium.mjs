// bench/finetune-chromium.mjs — LoRA training speed in Chromium: the npm
// package (js/dist + wasm/dist, served by web-demo/server.mjs with COOP/COEP)
// in a headless Chromium page (playwright-core), model.finetune() on the
// embedded stories260K with the Zorbu corpus, the settings of
// bench/finetune-run.mjs. Timed from the page's progress events, step 1
// being the warm-up; CPU time is that of every Chromium process (utime +
// stime from /proc, every descendant of this process) between the first and the
// last timed progress event, so tokens_per_cpu_s shows the work apart from
// waiting for a core on a shared machine. One JSON line per thread count:
//
//   {"what":"finetune","engine":"chromium","build":…,"simd":…,"threads":…,"rank":…,"ctx":…,"batch":…,
//    "tokens_per_step":…,"steps":…,"tokens_per_s":…,"p25":…,"p75":…,"tokens_per_cpu_s":…,"load_avg":…}
//
//   node bench/finetune-chromium.mjs [--threads 1,2] [--steps N] [--ctx N] [--batch N] [--rank R]
//
// Needs js/dist and the wasm build the page picks (npm run build, or
// npm run build:ts + scripts/build-wasm.sh), and Debian's chromium.
import { readFileSync, readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium } from '../tests/e2e/shared.mjs';
import { startServer } from '../web-demo/server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const threads = opt('--threads', '1,2').split(',').map(Number);
const steps = Number(opt('--steps', '8'));
const ctx = Number(opt('--ctx', '64')), batch = Number(opt('--batch', '4')), rank = Number(opt('--rank', '8'));
const corpus = readFileSync(path.join(root, 'tests/data/zorbu/zorbu.txt'), 'utf8');
const data = Array.from({ length: 8 }, () => corpus).join('');
const median = (a, q = 0.5) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };

/** CPU seconds (user + system) of pid's descendants (not pid itself), from /proc */
function childrenCpu(pid) {
  const tick = 100; // USER_HZ on Linux
  const kids = new Map();
  const cpu = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let stat;
    try { stat = readFileSync(`/proc/${d}/stat`, 'utf8'); } catch { continue; }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
    const ppid = Number(f[1]);
    cpu.set(Number(d), (Number(f[11]) + Number(f[12])) / tick);
    if (!kids.has(ppid)) kids.set(ppid, []);
    kids.get(ppid).push(Number(d));
  }
  let total = -(cpu.get(pid) ?? 0);
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    total += cpu.get(p) ?? 0;
    stack.push(...(kids.get(p) ?? []));
  }
  return total;
}

const server = await startServer({ port: 0, isolation: true, quiet: true });
const browser = await launchChromium();
// Chromium and its helpers are this process's descendants (playwright starts them)
try {
  for (const t of threads) {
    const page = await browser.newPage();
    const marks = [];
    await page.exposeFunction('__cpuMark', () => { marks.push(childrenCpu(process.pid)); });
    await page.goto(server.url + 'js/dist/index.js'); // a bare document of the origin, cross-origin isolated (no demo page running)
    const r = await page.evaluate(async ({ data, t, steps, ctx, batch, rank }) => {
      const { Kiln } = await import('/js/dist/index.js');
      const kiln = await Kiln.create({ build: 'mt', threads: t, logLevel: 'error' });
      try {
        const m = await kiln.loadModel('/models/stories260K.gguf');
        const times = [];
        let last = 0, tokens = 0, timedTokens = 0, t0 = 0;
        const ac = new AbortController();
        await m.finetune({
          data, rank, alpha: 2 * rank, targets: ['q', 'v'], nCtx: ctx, batchSize: batch, epochs: 1, lr: 1e-3, valFraction: 0.01, seed: 1,
          signal: ac.signal,
          onProgress: (p) => {
            const now = performance.now();
            if (p.step === 1) { t0 = now; window.__cpuMark(); }
            else if (p.step > 1) { times.push(p.tokens / ((now - last) / 1000)); timedTokens += p.tokens; }
            if (p.step === steps + 1) window.__cpuMark();
            tokens = p.tokens;
            last = now;
            if (p.step > steps) ac.abort();
          },
        }).catch((e) => { if (e?.code !== 'ABORTED') throw e; });
        const info = kiln.info();
        m.free();
        return { times, tokens, timedTokens, wall: (last - t0) / 1000, build: info.build, simd: info.simdFlavor, threads: info.threads };
      } finally { kiln.destroy(); }
    }, { data, t, steps, ctx, batch, rank });
    await new Promise((res) => setTimeout(res, 200)); // the last exposed call lands
    const cpuS = marks.length >= 2 ? marks.at(-1) - marks[0] : NaN;
    console.log(JSON.stringify({ what: 'finetune', engine: 'chromium', build: r.build, simd: r.simd, threads: r.threads, rank, ctx, batch,
      tokens_per_step: r.tokens, steps: r.times.length, tokens_per_s: +median(r.times).toFixed(1), p25: +median(r.times, 0.25).toFixed(1),
      p75: +median(r.times, 0.75).toFixed(1), tokens_per_wall_s: +(r.timedTokens / r.wall).toFixed(1),
      tokens_per_cpu_s: +(r.timedTokens / cpuS).toFixed(1), cpu_s: +cpuS.toFixed(2), load_avg: +loadavg()[0].toFixed(1) }));
    await page.close();
  }
} finally {
  await browser.close();
  await server.close();
}
