// Browser test of the Transcribe page (web-demo/transcribe.html): Chromium
// loads a random-weight whisper.cpp model (build/bin/kiln-whisper-random,
// the oracle tests' generator; width 64, logit_std 3) by URL, transcribes
// jfk.wav given to the file input (whole, then only its speech through the
// VAD), and the fake microphone playing jfk.wav through getUserMedia and the
// page's AudioWorklet, cut into speech by the VAD stream. Every transcript's
// tokens must equal those of the npm package in Node (wasm st) on the same
// samples: the file's 16 kHz samples, and for the microphone the captured
// samples the page transcribed (kept by the page). No main-thread task of
// the page may run over 50 ms meanwhile (the Generate page's rule). A second
// page loads the model URL from the persistent model cache.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer } from '../../web-demo/server.mjs';
import { Kiln } from '../../js/dist/index.js';
import { assertNoLongTasksUnlessLoaded, fakeMicArgs, launchContext, machineLoad, ROOT } from './shared.mjs';

const DATA = path.join(ROOT, 'tests/data/audio');
const JFK = path.join(DATA, 'jfk.wav');
const RANDOM = path.join(ROOT, 'build/bin/kiln-whisper-random');
// the test's waits poll the page this often (not every frame: a poll is a task on the page's thread)
const POLL_MS = 250;
const MODEL_PATH = '/fixtures/tiny.bin';
const modelRequests = () => server.requests.filter((r) => r.path === MODEL_PATH && r.method === 'GET').length;

let server, context, tmp, node, whisper, vad;

function wavPcm16(file) {
  const b = readFileSync(file);
  let off = 12;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), len = b.readUInt32LE(off + 4);
    if (id === 'data') {
      const x = new Float32Array(len >> 1);
      for (let i = 0; i < x.length; i++) x[i] = b.readInt16LE(off + 8 + 2 * i) / 32768;
      return x;
    }
    off += 8 + len + (len & 1);
  }
  throw new Error('no data chunk');
}

before(async () => {
  assert.ok(existsSync(RANDOM), `${RANDOM} is missing: scripts/test-e2e.sh builds it`);
  tmp = mkdtempSync(path.join(tmpdir(), 'kiln-e2e-transcribe-'));
  execFileSync(RANDOM, [path.join(DATA, 'for-tests-ggml-tiny.bin'), path.join(tmp, 'tiny.bin'), '--seed', '1', '--logit-std', '3',
    '--state', '64', '--head', '2', '--audio-layer', '2', '--text-layer', '3', '--ftype', '1']);
  // the fake microphone: jfk.wav, then 2 s of silence so the last speech ends
  const mic = path.join(tmp, 'mic.wav');
  execFileSync('sox', [JFK, mic, 'pad', '0', '2']);
  server = await startServer({ port: 0, isolation: true, quiet: true, mounts: { '/fixtures/': tmp } });
  context = await launchContext(path.join(tmp, 'profile'), { args: fakeMicArgs(mic), longTasks: true });
  node = await Kiln.create({ build: 'st', logLevel: 'error' });
  whisper = await node.loadWhisper(path.join(tmp, 'tiny.bin'));
  vad = await node.loadVad(path.join(DATA, 'ggml-silero-v6.2.0.bin'));
});

after(async () => {
  node?.destroy();
  await context?.close();
  await server?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

const ids = (segs) => segs.map((s) => s.tokens.map((t) => (typeof t === 'number' ? t : t.id)));

test('Transcribe page: file and microphone transcripts equal Node\'s token for token', async () => {
  const p = await context.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(server.url + `transcribe.html?model=${MODEL_PATH}`);
  await p.waitForFunction(() => window.__kilnDemo?.loaded === true || window.__kilnDemo?.errors.length > 0, null, { timeout: 60000, polling: POLL_MS });
  assert.equal(await p.evaluate(() => window.__kilnDemo.loaded), true, `the model did not load\n${logs.join('\n')}`);
  assert.match(await p.textContent('[data-testid=model-info]'), /multilingual, 2 \+ 3 layers, width 64/);
  assert.equal(await p.getAttribute('[data-testid=status]', 'data-build'), 'mt');
  // a URL goes to the persistent model cache on its first load
  assert.deepEqual(await p.evaluate(() => window.__kilnDemo.cacheEvents), ['stored']);
  assert.equal(modelRequests(), 1);
  const since = await p.evaluate(() => performance.now());

  const jfk = wavPcm16(JFK);
  const done = (n) => p.waitForFunction((k) => window.__kilnDemo.transcripts.length >= k, n, { timeout: 120000, polling: POLL_MS });
  const entry = (i) => p.evaluate((k) => { const e = window.__kilnDemo.transcripts[k]; return { ...e, samples: e.samples ? Array.from(e.samples) : null }; }, i);

  // greedy without the temperature fallback: argmax decisions only (sampled draws at a fallback
  // temperature depend on the last bits of the probabilities, which SIMD128 and relaxed SIMD round differently)
  await p.uncheck('[data-testid=fallback]');
  const NF = { temperatureInc: 0 };
  // the file, whole
  await p.uncheck('[data-testid=use-vad]');
  await p.setInputFiles('[data-testid=audio-file]', JFK);
  await done(1);
  const whole = await entry(0);
  assert.equal(whole.error, undefined, whole.error);
  const ref = await whisper.transcribe(jfk, 16000, NF);
  assert.ok(ref.segments.length > 0);
  assert.deepEqual(ids(whole.segments), ids(ref.segments));
  assert.deepEqual(whole.segments.map((s) => [s.start, s.end, s.text]), ref.segments.map((s) => [s.start, s.end, s.text]));

  // the file's speech only (whisper.cpp's VAD layout, times of the input)
  await p.check('[data-testid=use-vad]');
  await p.setInputFiles('[data-testid=audio-file]', []);
  await p.setInputFiles('[data-testid=audio-file]', JFK);
  await done(2);
  const speech = await entry(1);
  const refVad = await whisper.transcribe(jfk, 16000, { ...NF, vad });
  assert.deepEqual(ids(speech.segments), ids(refVad.segments));
  assert.deepEqual(speech.segments.map((s) => [s.start, s.end]), refVad.segments.map((s) => [s.start, s.end]));

  // the microphone: each piece of speech the VAD stream cuts is transcribed as it ends
  await p.click('[data-testid=mic]');
  await p.waitForFunction(() => window.__kilnDemo.transcripts.filter((t) => t.source === 'mic').length >= 4 && window.__kilnDemo.busy === 0,
    null, { timeout: 120000, polling: POLL_MS }).catch(() => {});
  await p.click('[data-testid=mic]');
  await p.waitForFunction(() => /Start/.test(document.querySelector('[data-testid=mic]').textContent) && window.__kilnDemo.busy === 0, null, { timeout: 120000, polling: POLL_MS });
  // the measured span ends here: reading the microphone's samples out below is the test's own work on the page's thread
  const until = await p.evaluate(() => performance.now());
  const n = await p.evaluate(() => window.__kilnDemo.transcripts.length);
  const pieces = [];
  for (let i = 2; i < n; i++) pieces.push(await entry(i));
  assert.equal(pieces.length, 4, `microphone pieces: ${pieces.length}\n${logs.join('\n')}`);
  for (const m of pieces) {
    assert.equal(m.error, undefined, m.error);
    assert.ok(m.rate >= 8000 && m.samples.length > 0.5 * m.rate, `${m.samples.length} samples at ${m.rate} Hz`);
    const r = await whisper.transcribe(new Float32Array(m.samples), m.rate, NF);
    assert.deepEqual(ids(m.segments), ids(r.segments));
  }
  assert.ok(pieces.some((m) => m.segments.length > 0));
  assert.ok(await p.locator('[data-testid=segment]').count() >= ref.segments.length + refVad.segments.length);

  // the page's main-thread tasks over 50 ms (PerformanceObserver 'longtask') from the first file to the
  // microphone's last transcript: none, asserted as the Fine-tune page's (tests/e2e/finetune.test.mjs) when the
  // machine's load average is at most twice its cores; a task's duration is wall time, including waiting for a
  // core, so above that they are printed and not asserted
  const long = (await p.evaluate(() => window.__longTasks)).filter((t) => t.start >= since && t.start < until).map((t) => Math.round(t.duration));
  console.log(`# main-thread long tasks (ms) while reading, transcribing and listening: ${JSON.stringify(long)}${machineLoad()}`);
  assertNoLongTasksUnlessLoaded(long, 'Transcribe page');
  assert.deepEqual(await p.evaluate(() => window.__kilnDemo.errors), []);
  await p.close();
});

test('Transcribe page: a model URL loaded again comes from the model cache, with no request, and transcribes the same', async () => {
  const before = modelRequests();
  assert.ok(before >= 1, 'the first test loaded the model by URL');
  const p = await context.newPage();
  await p.goto(server.url + `transcribe.html?model=${MODEL_PATH}`);
  await p.waitForFunction(() => window.__kilnDemo?.loaded === true || window.__kilnDemo?.errors.length > 0, null, { timeout: 60000, polling: POLL_MS });
  assert.deepEqual(await p.evaluate(() => window.__kilnDemo.cacheEvents), ['hit']);
  assert.equal(modelRequests(), before, 'no second request for the model');
  assert.match(await p.textContent('[data-testid=model-info]'), /from the cache/);
  const entries = await p.evaluate(() => window.__kilnDemo.kiln.cache.list());
  assert.deepEqual(entries.map((e) => [e.url, e.size]), [[server.url + MODEL_PATH.slice(1), statSync(path.join(tmp, 'tiny.bin')).size]]);
  // the cached bytes are the model's: the file transcribes as Node's does
  await p.uncheck('[data-testid=fallback]');
  await p.uncheck('[data-testid=use-vad]');
  await p.setInputFiles('[data-testid=audio-file]', JFK);
  await p.waitForFunction(() => window.__kilnDemo.transcripts.length >= 1, null, { timeout: 120000, polling: POLL_MS });
  const got = await p.evaluate(() => window.__kilnDemo.transcripts[0]);
  const ref = await whisper.transcribe(wavPcm16(JFK), 16000, { temperatureInc: 0 });
  assert.deepEqual(ids(got.segments), ids(ref.segments));
  await p.evaluate(() => window.__kilnDemo.kiln.cache.clear());
  assert.deepEqual(await p.evaluate(() => window.__kilnDemo.kiln.cache.list()), []);
  await p.close();
});
