// Whisper real-time factor at tiny's real shapes (384 wide, 6 heads, 4 + 4
// layers) and base.en's (512 wide, 8 heads, 6 + 6 layers), F16; random
// weights with the real vocabulary and filterbank run at the speed of
// trained ones for the same tokens) on 30 s of audio: Kiln
// native (build/bin/kiln-transcribe) vs whisper.cpp through
// @fugood/whisper.node, greedy, temperature 0, no fallback, same threads.
// Both decode the same tokens (tests/audio/whisper-oracle.mjs); the time is
// whisper_full's (mel + encoder + decoding), without model loading. One JSON
// line per engine and thread count: median / p25 / p75 of the runs, RTF =
// seconds of compute per second of audio (lower is faster).
//
// Kiln's wasm builds (st, mt) run in Node on the same samples.
//
//   node bench/whisper-rtf.mjs [--build build] [--threads 1,2] [--runs 3] [--models tiny,base.en] [--no-wasm]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const build = path.resolve(root, opt('--build', 'build'));
const threads = opt('--threads', '1,2').split(',').map(Number);
const runs = Number(opt('--runs', '3'));
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-whisper-bench-'));
const sh = (cmd, a) => execFileSync(cmd, a, { stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
// the real shapes of whisper.cpp's files, on their vocabularies and filterbanks (tests/data/audio)
const SHAPES = {
  tiny: { file: 'for-tests-ggml-tiny.bin', args: ['--state', '384', '--head', '6', '--audio-layer', '4', '--text-layer', '4'] },
  'base.en': { file: 'for-tests-ggml-base.en.bin', args: ['--state', '512', '--head', '8', '--audio-layer', '6', '--text-layer', '6'] },
};
const models = opt('--models', 'tiny,base.en').split(',').map((name) => {
  if (!SHAPES[name]) throw new Error(`--models: ${name} is not one of ${Object.keys(SHAPES).join(', ')}`);
  const file = path.join(tmp, `${name}-real-f16.bin`);
  sh(path.join(build, 'bin/kiln-whisper-random'), [path.join(root, 'tests/data/audio', SHAPES[name].file), file,
    ...SHAPES[name].args, '--ftype', '1', '--seed', '10', '--logit-std', '3']);
  return { name, file };
});
const jfk = path.join(root, 'tests/data/audio/jfk.wav');
const wav = path.join(tmp, 'a30.wav');
sh('sox', [jfk, jfk, jfk, wav, 'trim', '0', '30']);
const seconds = 30;
const q = (v, p) => { const s = [...v].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))]; };
const { initWhisper } = await import('@fugood/whisper.node');
// Kiln's wasm: whisper.transcribe() on the same 16 kHz samples (kiln.loadWhisper, js/src/whisper.ts)
const withWasm = !args.includes('--no-wasm');
const { Kiln } = withWasm ? await import('../js/dist/index.js') : {};
function pcm16(file) {
  const b = fs.readFileSync(file);
  for (let off = 12; off + 8 <= b.length;) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') { const x = new Float32Array(len >> 1); for (let i = 0; i < x.length; i++) x[i] = b.readInt16LE(off + 8 + 2 * i) / 32768; return x; }
    off += 8 + len + (len & 1);
  }
  throw new Error(`${file}: no data chunk`);
}
const samples = pcm16(wav);
async function wasmRuns(model, build, t) {
  const k = await Kiln.create({ build, threads: t, logLevel: 'error' });
  try {
    const w = await k.loadWhisper(model);
    const v = [];
    for (let r = 0; r < runs; r++) {
      const t0 = performance.now();
      await w.transcribe(samples, 16000, { temperatureInc: 0 });
      v.push((performance.now() - t0) / 1000);
    }
    return { v, isa: k.info().isa };
  } finally { k.destroy(); }
}
for (const { name, file: model } of models) for (const t of threads) {
  const label = `${name}-shape f16 (random weights)`;
  const kiln = [], wcpp = [];
  let nSegW = 0;
  for (let r = 0; r < runs; r++) {
    const err = execFileSync('bash', ['-c', `"${path.join(build, 'bin/kiln-transcribe')}" -m "${model}" -f "${wav}" -t ${t} -bs 1 -nf --print-timing 2>&1 >/dev/null`]).toString();
    kiln.push(Number(/full_ms ([0-9.]+)/.exec(err)[1]) / 1000);
    const ctx = await initWhisper({ filePath: model, useGpu: false });
    const t0 = performance.now();
    const res = await ctx.transcribe(wav, { language: 'en', maxThreads: t, temperature: 0, temperatureInc: 0, bestOf: 1 }).promise;
    wcpp.push((performance.now() - t0) / 1000);
    nSegW = res.segments.length;
    await ctx.release();
  }
  for (const [engine, v] of [['kiln-native', kiln], ['whisper.cpp-node', wcpp]]) {
    console.log(JSON.stringify({ what: 'whisper_full', model: label, audio_s: seconds, engine, threads: t, runs,
      median_s: +q(v, 0.5).toFixed(3), p25_s: +q(v, 0.25).toFixed(3), p75_s: +q(v, 0.75).toFixed(3), rtf: +(q(v, 0.5) / seconds).toFixed(4),
      isa: engine === 'kiln-native' ? 'avx512/avx2 (runtime)' : 'ggml cpu (prebuilt)' }));
  }
  const ratio = { what: 'ratio', model: label, threads: t, whisper_cpp_over_kiln: +(q(wcpp, 0.5) / q(kiln, 0.5)).toFixed(3), segments_whisper_cpp: nSegW };
  if (withWasm) {
    for (const build of t === 1 ? ['st', 'mt'] : ['mt']) {
      const { v, isa } = await wasmRuns(model, build, t);
      console.log(JSON.stringify({ what: 'whisper_full', model: label, audio_s: seconds, engine: `kiln-wasm-${build}-node`, threads: t, runs,
        median_s: +q(v, 0.5).toFixed(3), p25_s: +q(v, 0.25).toFixed(3), p75_s: +q(v, 0.75).toFixed(3), rtf: +(q(v, 0.5) / seconds).toFixed(4), isa }));
      ratio[`wasm_${build}_over_native`] = +(q(v, 0.5) / q(kiln, 0.5)).toFixed(3);
    }
  }
  console.log(JSON.stringify(ratio));
}
fs.rmSync(tmp, { recursive: true, force: true });
