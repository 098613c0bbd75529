// Browser test of the Listen page (web-demo/listen.html): Chromium with a
// fake microphone playing jfk.wav (then silence) through getUserMedia and the
// page's AudioWorklet into the VAD stream in the engine worker; and the same
// file given to the file input. Expected: whisper.cpp's segments on jfk.wav
// (0.32-2.27, 3.27-4.41, 5.38-7.68, 8.16-10.62 s): exactly for the file, and
// for the microphone (48 kHz capture, resampled in the engine, starting at an
// arbitrary offset) the same durations and spacing within 0.15 s.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer } from '../../web-demo/server.mjs';
import { fakeMicArgs, launchContext, ROOT } from './shared.mjs';

const JFK = path.join(ROOT, 'tests/data/audio/jfk.wav');
const WHISPER = [[0.32, 2.27], [3.27, 4.41], [5.38, 7.68], [8.16, 10.62]];

let server, context, userDir, tmp;

before(async () => {
  server = await startServer({ port: 0, isolation: true, quiet: true });
  tmp = mkdtempSync(path.join(tmpdir(), 'kiln-e2e-listen-'));
  // the fake microphone: jfk.wav, then 2 s of silence so the last segment ends
  const mic = path.join(tmp, 'mic.wav');
  execFileSync('sox', [JFK, mic, 'pad', '0', '2']);
  userDir = path.join(tmp, 'profile');
  context = await launchContext(userDir, { args: fakeMicArgs(mic) });
});

after(async () => {
  await context?.close();
  await server?.close();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('Listen page: an audio file gives whisper.cpp\'s segments; the fake microphone gives the same speech live', async () => {
  const p = await context.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(server.url + 'listen.html');
  await p.waitForFunction(() => window.__kilnDemo?.ready === true || /failed/.test(document.body.textContent), null, { timeout: 60000 });
  assert.ok(await p.evaluate(() => window.__kilnDemo?.ready === true), `the page did not get ready\n${logs.join('\n')}`);

  await p.setInputFiles('[data-testid=listen-file]', JFK);
  await p.waitForFunction(() => window.__kilnDemo.found.filter((s) => s.source === 'jfk.wav').length >= 4, null, { timeout: 60000 });
  const fromFile = await p.evaluate(() => window.__kilnDemo.found.filter((s) => s.source === 'jfk.wav').map((s) => [s.start, s.end]));
  assert.deepEqual(fromFile, WHISPER);
  assert.ok(Number(await p.getAttribute('[data-testid=listen-plot]', 'data-points')) === 344);

  await p.click('[data-testid=listen-mic]');
  await p.waitForFunction(() => window.__kilnDemo.found.filter((s) => s.source === 'mic').length >= 4, null, { timeout: 60000 })
    .catch(() => {});
  const mic = await p.evaluate(() => window.__kilnDemo.found.filter((s) => s.source === 'mic').map((s) => [s.start, s.end]));
  assert.equal(mic.length, 4, `microphone segments: ${JSON.stringify(mic)}\n${logs.join('\n')}`);
  const t0 = mic[0][0] - WHISPER[0][0];
  mic.forEach(([a, b], i) => {
    assert.ok(Math.abs(b - a - (WHISPER[i][1] - WHISPER[i][0])) <= 0.15, `segment ${i} lasts ${b - a} s, whisper.cpp ${WHISPER[i][1] - WHISPER[i][0]} s`);
    assert.ok(Math.abs(a - t0 - WHISPER[i][0]) <= 0.15, `segment ${i} starts at ${a - t0} s after the first, whisper.cpp ${WHISPER[i][0]} s`);
  });
  assert.equal(await p.locator('[data-testid=listen-segment] audio').count(), 8);
  await p.click('[data-testid=listen-mic]');
});
