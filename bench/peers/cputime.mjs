// Diagnosis aid for a starved, shared machine: CPU seconds per generated
// token (user+sys), which contention inflates far less than wall time.
// Kiln: kiln-generate under /usr/bin/time, N+1 tokens minus 1 token (cancels
// load, repack and prompt); llama.cpp: process.cpuUsage() around its decode
// loop (it runs in this process). 1 thread.
//   node bench/peers/cputime.mjs MODEL.gguf [N=16]
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { emit } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const [,, model, nArg = '16'] = process.argv;
const n = +nArg;
const prompt = 'Once upon a time';
const kcpu = (toks) => {
  const r = spawnSync('/usr/bin/time', ['-f', 'CPU %U %S', path.join(root, 'build/bin/kiln-generate'), '-m', model, '-p', prompt, '-n', String(toks), '-t', '1', '--temp', '0', '--print-ids'], { encoding: 'utf8' });
  const m = /CPU ([\d.]+) ([\d.]+)/.exec(r.stderr); return +m[1] + +m[2];
};
const kiln = [];
for (let i = 0; i < 2; i++) kiln.push((kcpu(n + 1) - kcpu(1)) / n);
const { loadOracleLlama } = await import('../../tests/oracle/llamacpp.mjs');
const llama = await loadOracleLlama({ ggmlCpu: 'auto' });
const lm = await llama.loadModel({ modelPath: model });
const ctx = await lm.createContext({ contextSize: 256, threads: 1 });
const seq = ctx.getSequence();
const lc = [];
for (let i = 0; i < 2; i++) {
  await seq.clearHistory();
  let c0 = null, k = 0;
  for await (const tok of seq.evaluate([lm.tokens.bos, ...lm.tokenize(prompt)], { temperature: 0 })) {
    if (k === 0) c0 = process.cpuUsage();
    if (++k > n) break;
  }
  const d = process.cpuUsage(c0); lc.push((d.user + d.system) / 1e6 / n);
}
await ctx.dispose(); await lm.dispose(); await llama.dispose();
console.log(JSON.stringify(emit({ what: 'peers_cpu_per_token', model: path.basename(model), threads: 1, kiln_cpu_s: kiln, llamacpp_cpu_s: lc })));
