// npm run bench:generate — the generation benchmark: prompt-processing
// and generation tokens/s natively (build/bin/bench-generate, 1 and 2
// threads) and in wasm through the npm package (bench/generate-wasm.mjs:
// kiln-st, and kiln-mt with 2 threads), on stories260K and the synthetic
// 2048-wide Q4_0 / Q8_0 llama GGUFs (bash bench/peers/make-models.sh).
// Prints every JSON line as it comes (native lines get "engine":"native"),
// then a table. A benchmark, not a test: run by hand.
//
//   node bench/generate-run.mjs [-m FILE]... [--prompt N (32)] [--gen N (16)] [--reps N (3)]
//        [--only native,wasm] [--threads N (mt and native's second count, 2)]
// Needs build/bin/bench-generate (Release) and wasm/dist + js/dist (npm run build).
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (k, d) => { const i = args.indexOf(`--${k}`); return i >= 0 ? args[i + 1] : d; };
const files = args.flatMap((a, i) => (a === '-m' ? [args[i + 1]] : []));
if (!files.length) {
  files.push('models/stories260K.gguf');
  for (const t of ['q4_0', 'q8_0']) {
    const f = `bench/peers/data/synth-${t}.gguf`;
    if (existsSync(path.join(root, f))) files.push(f);
    else console.error(`bench:generate: ${f} is missing (bash bench/peers/make-models.sh makes it); skipped`);
  }
}
const nPrompt = opt('prompt', '32'), nGen = opt('gen', '16'), reps = opt('reps', '3'), mt = opt('threads', '2');
const only = opt('only', 'native,wasm').split(',');
const rows = [];

function run(cmd, argv, tag) {
  return new Promise((resolve) => {
    const p = spawn(cmd, argv, { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
    let buf = '';
    p.stdout.on('data', (d) => {
      buf += d; let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        let o;
        try { o = JSON.parse(line); } catch { console.log(line); continue; }
        if (tag) o = { what: o.what, engine: tag, build: tag, ...o };
        console.log(JSON.stringify(o));
        rows.push(o);
      }
    });
    p.on('exit', (code) => resolve(code));
    p.on('error', (e) => { console.error(`bench:generate: ${cmd}: ${e.message}`); resolve(1); });
  });
}

const t0 = Date.now();
if (only.includes('native')) {
  const bin = path.join(root, 'build/bin/bench-generate');
  if (!existsSync(bin)) console.error('bench:generate: build/bin/bench-generate is missing (cmake --build build)');
  else await run(bin, [...files.flatMap((f) => ['-m', f]), '--threads', '1', '--threads', mt, '--prompt', nPrompt, '--gen', nGen, '--reps', reps], 'native');
}
if (only.includes('wasm')) {
  await run(process.execPath, [path.join(root, 'bench/generate-wasm.mjs'), ...files.flatMap((f) => ['-m', f]), '--threads', mt, '--prompt', nPrompt, '--gen', nGen, '--reps', reps]);
}

const pad = (s, n) => String(s).padEnd(n);
console.log(`\nbench:generate — prompt ${nPrompt} tokens, ${nGen} generated, median of ${reps}; tokens/s (GB/s of weights read while generating), ${((Date.now() - t0) / 1e3) | 0} s`);
console.log([pad('model', 34), pad('engine', 10), pad('thr', 4), pad('pp tok/s', 10), pad('tg tok/s', 10), 'tg GB/s'].join('  '));
for (const r of rows) {
  const name = r.model.replace(/^.*\//, '');
  if (r.error) { console.log([pad(name, 34), pad(r.build ?? r.engine, 10), pad(r.threads ?? '', 4), `error: ${r.error}`].join('  ')); continue; }
  console.log([pad(name, 34), pad(r.build ?? r.engine, 10), pad(r.threads, 4), pad(r.pp_tokens_per_s, 10), pad(r.tg_tokens_per_s, 10), r.tg_GBps].join('  '));
}
