// kiln.loadWhisper(): Whisper in the engine worker (wasm st and mt) against
// the native build on the same model file and audio: build/bin/
// kiln-transcribe -ojf, which tests/audio/whisper-oracle.mjs and
// whisper-decode-oracle.mjs check token for token against whisper.cpp.
//
// Models: whisper.cpp-format files with random weights written by
// build/bin/kiln-whisper-random (kiln_whisper_write_random, the generator of
// the oracle tests) from whisper.cpp's weight-less test files: the real
// vocabularies, mel filterbank and hyperparameters at width 64 (2 encoder +
// 3 decoder layers), logit_std 3 so that decoding mixes text and timestamp
// tokens. Audio: jfk.wav (16 kHz) and the same samples at 8 kHz (resampled
// in the engine, and natively from the WAV file).
//
// What is compared: every segment's start/end (centiseconds) and text, and
// every token id, for greedy, beam search, sampling with the temperature
// fallback, an initial prompt, no timestamps, language detection,
// translate and VAD. Native and wasm run different SIMD kernels (AVX2/
// AVX-512 vs SIMD128): their logits differ by rounding, so a decision may
// flip where the native choice was a near tie (top-2 log-prob margin, or
// for a sampled token the draw's distance to its interval's edge, below
// GAP_TOL); everything before the first differing token must agree, and
// the margin there is printed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KilnAbortError, KilnError, type Kiln, type TranscribeOptions, type Transcript } from '../../js/dist/index.js';
import { BUILDS, engine } from './helpers.js';

const ROOT = new URL('../../', import.meta.url).pathname;
const DATA = ROOT + 'tests/data/audio/';
const BIN = ROOT + 'build/bin/';
// the oracle tests' tolerance (tests/audio/whisper-oracle.mjs): F16 cases come out equal; Q8_0 ones,
// whose activations are quantized per block, can flip a choice after ~100 tokens at a margin of ~1e-2
const GAP_TOL = 0.05;
const THREADS = 2;
// per test: each case runs the native tool and the engine; a loaded shared machine is many times slower than an idle one
const TIMEOUT = 900_000;

let dir = '';
const files: Record<string, string> = {};

function wavPcm16(file: string): { x: Float32Array; rate: number } {
  const b = readFileSync(file);
  const rate = b.readUInt32LE(24);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') {
      const n = len >> 1, x = new Float32Array(n);
      for (let i = 0; i < n; i++) x[i] = b.readInt16LE(off + 8 + 2 * i) / 32768;
      return { x, rate };
    }
    off += 8 + len + (len & 1);
  }
  throw new Error('no data chunk');
}

function writeWav16(file: string, x: Float32Array, rate: number) {
  const b = Buffer.alloc(44 + 2 * x.length);
  b.write('RIFF', 0); b.writeUInt32LE(36 + 2 * x.length, 4); b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16); b.writeUInt16LE(1, 20); b.writeUInt16LE(1, 22); b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(2 * rate, 28); b.writeUInt16LE(2, 32); b.writeUInt16LE(16, 34);
  b.write('data', 36); b.writeUInt32LE(2 * x.length, 40);
  for (let i = 0; i < x.length; i++) b.writeInt16LE(Math.round(x[i] * 32768), 44 + 2 * i);
  writeFileSync(file, b);
}

const jfk = wavPcm16(DATA + 'jfk.wav');
// every other sample: the same int16 values at 8 kHz (aliasing does not matter, both engines get these samples)
const jfk8 = { x: jfk.x.filter((_, i) => i % 2 === 0), rate: 8000 };

interface NativeSeg { start: number; end: number; text: string; tokens: { id: number; gap: number }[] }

/** native kiln-transcribe's segments for the options (the same meaning as TranscribeOptions) */
function native(model: string, wav: string, o: TranscribeOptions): { language: string; segments: NativeSeg[] } {
  const a = ['-m', model, '-f', wav, '-t', String(THREADS), '-l', o.language ?? 'en', '-bs', String(o.beamSize ?? 1), '-ojf', '-of', '-'];
  if (o.bestOf !== undefined) a.push('-bo', String(o.bestOf));
  if (o.temperature !== undefined) a.push('-tp', String(o.temperature));
  if (o.temperatureInc !== undefined) a.push('-tpi', String(o.temperatureInc));
  if (o.translate) a.push('-tr');
  if (o.timestamps === false) a.push('-nt');
  if (o.prompt) a.push('--prompt', o.prompt);
  if (o.vad) a.push('--vad', '-vm', DATA + 'ggml-silero-v6.2.0.bin');
  const j = JSON.parse(execFileSync(BIN + 'kiln-transcribe', a, { maxBuffer: 64 << 20 }).toString());
  return {
    language: j.result.language,
    segments: j.transcription.map((s: { offsets: { from: number; to: number }; text: string; tokens: { id: number; gap: number }[] }) =>
      ({ start: s.offsets.from / 1000, end: s.offsets.to / 1000, text: s.text, tokens: s.tokens.map((t) => ({ id: t.id, gap: t.gap })) })),
  };
}

/** the same transcript, or a divergence at a native near tie after which nothing is compared */
function expectSame(label: string, k: Transcript, n: { language: string; segments: NativeSeg[] }) {
  expect(k.language).toBe(n.language);
  const flat = (segs: { tokens: { id: number }[] }[]) => segs.flatMap((s, i) => s.tokens.map((t) => ({ seg: i, ...t })));
  const kt = flat(k.segments), nt = flat(n.segments) as { seg: number; id: number; gap: number }[];
  let i = 0;
  while (i < kt.length && i < nt.length && kt[i].id === nt[i].id && kt[i].seg === nt[i].seg) i++;
  if (i === kt.length && i === nt.length) {
    expect(k.segments.map((s) => [s.start, s.end, s.text])).toEqual(n.segments.map((s) => [s.start, s.end, s.text]));
    console.log(`  ${label}: equal, ${n.segments.length} segments / ${nt.length} tokens`);
    expect(nt.length).toBeGreaterThan(0);
    return;
  }
  // the decision before token i (or token i itself) was a near tie natively
  const gap = Math.min(nt[i]?.gap ?? Infinity, i > 0 ? nt[i - 1].gap : Infinity);
  console.log(`  ${label}: ${i} tokens equal, then wasm ${kt[i]?.id} vs native ${nt[i]?.id}; native top-2 margin ${gap.toExponential(2)}`);
  expect(gap, `${label}: divergence at token ${i} without a near tie`).toBeLessThan(GAP_TOL);
  const full = kt[i]?.seg ?? k.segments.length;
  expect(k.segments.slice(0, Math.min(full, nt[i]?.seg ?? full)).map((s) => [s.start, s.end, s.text]))
    .toEqual(n.segments.slice(0, Math.min(full, nt[i]?.seg ?? full)).map((s) => [s.start, s.end, s.text]));
}

beforeAll(() => {
  for (const t of ['kiln-whisper-random', 'kiln-transcribe']) {
    if (!existsSync(BIN + t)) throw new Error(`${BIN}${t} is missing: scripts/test-js.sh builds it (cmake --build build --target ${t})`);
  }
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-whisper-js-'));
  const model = (name: string, template: string, seed: number, ftype: number) => {
    files[name] = path.join(dir, name + '.bin');
    execFileSync(BIN + 'kiln-whisper-random', [DATA + template, files[name], '--seed', String(seed), '--logit-std', '3',
      '--state', '64', '--head', '2', '--audio-layer', '2', '--text-layer', '3', '--ftype', String(ftype)]);
  };
  model('tiny-f16', 'for-tests-ggml-tiny.bin', 1, 1);
  model('base.en-q8_0', 'for-tests-ggml-base.en.bin', 9, 7);
  files.jfk = DATA + 'jfk.wav';
  files.jfk8 = path.join(dir, 'jfk8.wav');
  writeWav16(files.jfk8, jfk8.x, jfk8.rate);
});

afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

const CASES: [string, string, 'jfk' | 'jfk8', TranscribeOptions][] = [
  ['greedy, no fallback', 'tiny-f16', 'jfk', { temperatureInc: 0 }],
  ['greedy, 8 kHz input', 'tiny-f16', 'jfk8', { temperatureInc: 0 }],
  ['beam search 5', 'base.en-q8_0', 'jfk', { beamSize: 5, temperatureInc: 0 }],
  // temperatures 0.4 then 1.0 (random weights' average log-prob is below -1: the fallback runs)
  ['sampling at temperature 0.4, best of 3, with the fallback', 'tiny-f16', 'jfk', { temperature: 0.4, bestOf: 3, temperatureInc: 0.6 }],
  ['initial prompt', 'base.en-q8_0', 'jfk', { prompt: 'So, my fellow Americans.', temperatureInc: 0 }],
  ['no timestamps', 'tiny-f16', 'jfk', { timestamps: false, temperatureInc: 0 }],
  ['language detection', 'tiny-f16', 'jfk', { language: 'auto', temperatureInc: 0 }],
  ['translate from German', 'tiny-f16', 'jfk', { language: 'de', translate: true, temperatureInc: 0 }],
];

describe.each(BUILDS)('whisper (%s)', (build) => {
  let k: Kiln;
  beforeAll(async () => { k = await engine(build, THREADS); });
  afterAll(() => k?.destroy());

  it('transcripts equal the native build\'s token for token', async () => {
    for (const [label, m, audio, o] of CASES) {
      // a fresh model per case, as the native tool's process (decoder 0's random generator lives with the model)
      const w = await k.loadWhisper(files[m]);
      if (m === 'tiny-f16') expect(w.info).toMatchObject({ nVocab: 51865, nAudioState: 64, nAudioLayer: 2, nTextLayer: 3, nMels: 80, ftype: 1, multilingual: true });
      else expect(w.info).toMatchObject({ nVocab: 51864, nAudioState: 64, multilingual: false, ftype: 7 });
      const a = audio === 'jfk' ? jfk : jfk8;
      const r = await w.transcribe(a.x, a.rate, o);
      w.free();
      expectSame(`${build} ${m} ${label}`, r, native(files[m], files[audio], o));
      expect(r.text).toBe(r.segments.map((s) => s.text).join(''));
      if (o.language === 'auto') {
        const probs = r.languageProbs!;
        expect(Object.keys(probs).length).toBe(100);
        expect(Math.max(...Object.values(probs))).toBe(probs[r.language]);
      }
    }
  }, TIMEOUT);

  it('VAD in front: only speech, times of the input, as the native --vad', async () => {
    const w = await k.loadWhisper(readFileSync(files['tiny-f16']));
    const vad = await k.loadVad(DATA + 'ggml-silero-v6.2.0.bin');
    const o: TranscribeOptions = { temperatureInc: 0 };
    const r = await w.transcribe(jfk.x, jfk.rate, { ...o, vad });
    expectSame(`${build} tiny-f16 VAD`, r, native(files['tiny-f16'], files.jfk, { ...o, vad }));
    vad.free();
    w.free();
  }, TIMEOUT);

  it('a Blob and a ReadableStream load as a path does (streamed into the worker, progress to the whole size)', async () => {
    const bytes = readFileSync(files['tiny-f16']);
    const o: TranscribeOptions = { temperatureInc: 0 };
    const ref = native(files['tiny-f16'], files.jfk, o);
    const seen: { loaded: number; total: number }[] = [];
    for (const src of [new Blob([bytes]), new Blob([bytes]).stream()]) {
      const w = await k.loadWhisper(src, { onProgress: (p) => seen.push(p) });
      expect(w.info).toMatchObject({ nVocab: 51865, nAudioState: 64, nTextLayer: 3, ftype: 1, multilingual: true });
      expectSame(`${build} tiny-f16 from ${src instanceof Blob ? 'a Blob' : 'a stream'}`, await w.transcribe(jfk.x, jfk.rate, o), ref);
      w.free();
    }
    expect(seen.at(-1)).toEqual({ loaded: bytes.length, total: bytes.length });
  }, TIMEOUT);

  it('streams segments and progress; an abort stops it and the model stays usable', async () => {
    const w = await k.loadWhisper(files['tiny-f16']);
    // 40 s: two windows
    const long = new Float32Array(jfk.x.length * 4);
    for (let i = 0; i < 4; i++) long.set(jfk.x, i * jfk.x.length);
    const streamed: unknown[] = [];
    const progress: number[] = [];
    const r = await w.transcribe(long, 16000, { temperatureInc: 0, onSegment: (s) => streamed.push(s), onProgress: (p) => progress.push(p) });
    expect(r.segments.length).toBeGreaterThan(1);
    expect(streamed).toEqual(r.segments);
    expect(progress[0]).toBe(0);
    expect(progress.at(-1)).toBe(100);
    expect(progress.length).toBeGreaterThan(2);
    // abort at the first segment: the transcription stops in the next graph (the second window's encoder at the latest)
    const ac = new AbortController();
    let seen = 0;
    const p = w.transcribe(long, 16000, { temperatureInc: 0, signal: ac.signal, onSegment: () => { seen++; ac.abort(); } });
    await expect(p).rejects.toBeInstanceOf(KilnAbortError);
    expect(seen).toBeGreaterThan(0);
    expect(seen).toBeLessThanOrEqual(r.segments.filter((s) => s.start < 30).length);
    const again = await w.transcribe(jfk.x, 16000, { temperatureInc: 0 });
    expect(again.segments).toEqual((await w.transcribe(jfk.x, 16000, { temperatureInc: 0 })).segments);
    w.free();
  }, TIMEOUT);

  it('bad input: a KilnError naming the problem, and the engine stays usable', async () => {
    const err = async (p: Promise<unknown>, code: string, msg: RegExp) => {
      const e = await p.then(() => null, (x: unknown) => x);
      expect(e).toBeInstanceOf(KilnError);
      expect((e as KilnError).code).toBe(code);
      expect((e as KilnError).message).toMatch(msg);
    };
    const good = readFileSync(files['tiny-f16']);
    await err(k.loadWhisper(new Uint8Array(1000).fill(7)), 'BAD_MODEL', /bad magic/);
    await err(k.loadWhisper(good.subarray(0, good.length >> 1)), 'BAD_MODEL', /truncated/);
    await err(k.loadWhisper(DATA + 'for-tests-ggml-tiny.bin'), 'BAD_MODEL', /tensor '.*' is missing/);
    await err(k.loadWhisper(new Uint8Array(0)), 'BAD_MODEL', /0 bytes/);
    await err(k.loadWhisper(path.join(dir, 'nope.bin')), 'BAD_SOURCE', /nope\.bin/);
    const w = await k.loadWhisper(good);
    await err(w.transcribe(jfk.x, 0), 'INVALID_ARGUMENT', /sampleRate 0/);
    await err(w.transcribe(jfk.x, 16000.5), 'INVALID_ARGUMENT', /sampleRate 16000\.5/);
    await err(w.transcribe(jfk.x, undefined), 'INVALID_ARGUMENT', /sampleRate undefined/);
    await err(w.transcribe({ sampleRate: 100, numberOfChannels: 1, length: 10, getChannelData: () => new Float32Array(10) }), 'INVALID_ARGUMENT', /sampleRate 100 /);
    await err(w.transcribe(new Float32Array(0), 16000), 'INVALID_ARGUMENT', /no audio/);
    await err(w.transcribe(jfk.x, 16000, { language: 'xx' }), 'INVALID_ARGUMENT', /unknown language 'xx'/);
    await err(w.transcribe(jfk.x, 16000, { beamSize: 9 }), 'INVALID_ARGUMENT', /beamSize 9/);
    await err(w.transcribe(jfk.x, 16000, { temperature: -1 }), 'INVALID_ARGUMENT', /temperature -1/);
    const r = await w.transcribe(jfk.x, 16000, { temperatureInc: 0 });
    expectSame(`${build} after errors`, r, native(files['tiny-f16'], files.jfk, { temperatureInc: 0 }));
    w.free();
    await err(w.transcribe(jfk.x, 16000), 'INVALID_HANDLE', /freed/);
  }, TIMEOUT);
});
