// bench/finetune-run.mjs — LoRA training speed, native vs wasm in Node:
// tokens per second of optimizer steps (forward + backward + AdamW) and peak
// memory, per model and thread count. Native is build/bin/bench-finetune
// (one process per configuration, so its peak RSS is that configuration's);
// wasm is the npm package's model.finetune() (kiln-st for 1 thread, kiln-mt
// for more), one Kiln engine per configuration, timed per step from the
// progress events; its peak memory is the wasm heap (which never shrinks) and
// the process's peak RSS (model bytes in JS and the heap both count there).
// tokens_per_cpu_s divides by CPU time (native: the process's; wasm: the Node
// process's, all its threads): on a shared machine it shows the cost of the
// work apart from waiting for a core.
// Runs alternate native / wasm per configuration. One JSON line each:
//
//   {"what":"finetune","engine":"native"|"st"|"mt","model":…,"threads":…,"rank":…,"ctx":…,"batch":…,
//    "steps":…,"tokens_per_s":…,"p25":…,"p75":…,"peak_MB":…}
//
//   node bench/finetune-run.mjs [-m FILE]... [--threads 1,2] [--steps N] [--ctx N] [--batch N] [--rank R]
//        [--engines native,wasm]
//
// Default model: models/stories260K.gguf; the 2048-wide Q4_0 model is
// bench/peers/data/synth-q4_0.gguf (bench/peers/make-models.sh). Needs a
// Release build/ and `npm run build`.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Kiln } from '../js/dist/index.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, def) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : def; };
const models = args.flatMap((a, i) => (a === '-m' ? [path.resolve(args[i + 1])] : []));
if (!models.length) models.push(path.join(root, 'models/stories260K.gguf'));
const threads = opt('--threads', '1,2').split(',').map(Number);
const steps = Number(opt('--steps', '5'));
const ctx = Number(opt('--ctx', '64')), batch = Number(opt('--batch', '4')), rank = Number(opt('--rank', '8'));
const engines = opt('--engines', 'native,wasm').split(',');

const median = (a, q = 0.5) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.floor(q * s.length))]; };
const emit = (o) => console.log(JSON.stringify(o));

function native(model, t) {
  const r = spawnSync(path.join(root, 'build/bin/bench-finetune'), ['-m', model, '--threads', String(t), '--ctx', String(ctx),
    '--batch', String(batch), '--rank', String(rank), '--steps', String(steps)], { encoding: 'utf8', cwd: root });
  const line = r.stdout.trim().split('\n').find((l) => l.startsWith('{'));
  if (!line) return emit({ what: 'finetune', engine: 'native', model: path.basename(model), threads: t, error: r.stderr.trim() || `exit ${r.status}` });
  const j = JSON.parse(line);
  emit({ what: 'finetune', engine: 'native', model: path.basename(model), isa: j.isa, threads: t, rank, ctx, batch, lora_params: j.lora_params,
    steps: j.steps, tokens_per_s: j.tokens_per_s, p25: j.p25, p75: j.p75, tokens_per_cpu_s: j.tokens_per_cpu_s, peak_MB: j.peak_rss_MB });
}

// text enough for (steps + 1) * batch windows whatever the vocabulary: the Zorbu corpus, repeated
const corpus = readFileSync(path.join(root, 'tests/data/zorbu/zorbu.txt'), 'utf8');
const data = Array.from({ length: 8 }, () => corpus).join('');

async function wasm(model, t) {
  const build = t > 1 ? 'mt' : 'st';
  let rssPeak = process.memoryUsage().rss;
  const kiln = await Kiln.create({ build, threads: t, logLevel: 'error' });
  try {
    const m = await kiln.loadModel(model);
    const times = [];
    let last = 0;
    const ac = new AbortController();
    let tokens = 0, timedTokens = 0, cpu0 = null, cpuUs = 0;
    const done = m.finetune({
      // valFraction 0.01: model.finetune measures the validation loss before the first step, and with
      // no held-out sequences it would run over all the training ones (minutes on a large model)
      data, rank, alpha: 2 * rank, targets: ['q', 'v'], nCtx: ctx, batchSize: batch, epochs: 1, lr: 1e-3, valFraction: 0.01, seed: 1, signal: ac.signal,
      onProgress: (p) => {
        const now = performance.now();
        rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
        const c = process.cpuUsage();
        if (p.step > 1) { // step 1 is the warm-up
          times.push(p.tokens / ((now - last) / 1000));
          timedTokens += p.tokens;
          cpuUs = c.user + c.system - (cpu0.user + cpu0.system);
        } else cpu0 = c;
        tokens = p.tokens;
        last = now;
        if (p.step > steps) ac.abort();
      },
    });
    await done.catch((e) => { if (e?.code !== 'ABORTED') throw e; });
    const mem = await kiln.memory();
    emit({ what: 'finetune', engine: build, model: path.basename(model), simd: kiln.info().isa, threads: t, rank, ctx, batch,
      tokens_per_step: tokens, steps: times.length, tokens_per_s: +median(times).toFixed(1), p25: +median(times, 0.25).toFixed(1),
      p75: +median(times, 0.75).toFixed(1), tokens_per_cpu_s: +(timedTokens / (cpuUs / 1e6)).toFixed(1), wasm_heap_MB: +(mem.total / 2 ** 20).toFixed(1), peak_MB: +(rssPeak / 2 ** 20).toFixed(1) });
    m.free();
  } catch (e) {
    emit({ what: 'finetune', engine: build, model: path.basename(model), threads: t, error: e?.message ?? String(e) });
  } finally { kiln.destroy(); }
}

for (const model of models) {
  for (const t of threads) {
    if (engines.includes('native')) native(model, t);
    if (engines.includes('wasm')) await wasm(model, t);
  }
}
