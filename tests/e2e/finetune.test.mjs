// The demo's Fine-tune page (web-demo/finetune.html) in Chromium, cross-origin
// isolated (kiln-mt, 2 threads): LoRA fine-tuning of the embedded stories260K
// on 200 lines about "Zorbu the otter" (tests/data/zorbu/zorbu.txt, a name the
// model never saw), given to the page as a dropped file.
//  - the validation loss falls by at least half, the curves are drawn from
//    every step's progress event, and the page's thread never works 50 ms
//    at a time while the worker trains: its own code per progress event and
//    per chart frame stays under 50 ms, and the Long Tasks API sees no task
//    over 50 ms (asserted when the machine is not loaded by other jobs: a
//    1-minute load average up to twice the core count; on a busier machine
//    the waiting for a core counts too, and the tasks are printed instead);
//  - Kiln's own greedy generation from "Once upon a time" with the adapter
//    names Zorbu, the base model's does not; the page's two texts equal what
//    the npm package in Node (kiln-st) generates from the same base model,
//    without and with the downloaded adapter;
//  - the download is the adapter's GGUF: node-llama-cpp's reader sees
//    general.type = adapter, adapter.type = lora and the q/v tensors.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readGgufFileInfo } from 'node-llama-cpp';
import { startServer } from '../../web-demo/server.mjs';
import { Kiln } from '../../js/dist/index.js';
import { ROOT, assertNoLongTasksUnlessLoaded, launchChromium } from './shared.mjs';

const ARTIFACTS = path.join(ROOT, 'test-artifacts');
const DATA = path.join(ROOT, 'tests/data/zorbu/zorbu.txt');
const MODEL = path.join(ROOT, 'models/stories260K.gguf');

let server, browser, dir;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-e2e-finetune-'));
  server = await startServer({ port: 0, isolation: true, quiet: true });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('Fine-tune page: Zorbu is learned, the curves update, the page never blocks, the adapter downloads', async () => {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1100, height: 1000 } });
  const p = await context.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(server.url + 'finetune.html');
  await p.waitForFunction(() => window.__kilnFinetune?.ready === true || /could not start/.test(document.body.textContent), null, { timeout: 60000 });
  assert.ok(await p.evaluate(() => window.__kilnFinetune?.ready === true), `the page did not get ready\n${logs.join('\n')}`);
  assert.equal(await p.getAttribute('[data-testid=status]', 'data-build'), 'mt');
  const links = await p.$$eval('header nav a', (as) => as.map((a) => [a.textContent, a.getAttribute('aria-current')]));
  assert.deepEqual(links.find(([n]) => n === 'Fine-tune'), ['Fine-tune', 'page']);

  // the training text as a file, as a user drops one
  await p.setInputFiles('[data-testid=ft-data-file]', DATA);
  await p.waitForFunction(() => /^200 lines/.test(document.querySelector('[data-testid=ft-data-info]').textContent), null, { timeout: 10000 });
  assert.equal(await p.inputValue('[data-testid=ft-data]'), readFileSync(DATA, 'utf8'));
  // the settings of the native and Node learning tests (tests/oracle/finetune.mjs, tests/js/finetune.test.ts)
  await p.fill('[data-testid=ft-ctx]', '64');
  await p.fill('[data-testid=ft-batch]', '8');
  await p.fill('[data-testid=ft-epochs]', '3');
  await p.fill('[data-testid=ft-lr]', '0.02');
  await p.fill('[data-testid=ft-seed]', '1');
  const t0 = Date.now();
  await p.click('[data-testid=ft-train]');
  await p.waitForFunction(() => Number(document.querySelector('[data-testid=ft-chart]').dataset.steps) >= 5, null, { timeout: 120000 });
  assert.match(await p.textContent('[data-testid=ft-progress]'), /step \d+\/45 · epoch \d · loss \d/);
  await p.waitForFunction(() => window.__kilnFinetune.tunedText !== '' || window.__kilnFinetune.lastError !== '', null, { timeout: 180000 });
  const demo = await p.evaluate(() => window.__kilnFinetune);
  assert.equal(demo.lastError, '', `${demo.lastError}\n${logs.join('\n')}`);
  console.log(`# fine-tune page (${await p.getAttribute('[data-testid=status]', 'data-threads')} threads): ${demo.steps} steps, validation loss ` +
    `${demo.valLossBefore.toFixed(4)} -> ${demo.valLoss.at(-1).loss.toFixed(4)}, ${((Date.now() - t0) / 1000).toFixed(1)} s with the comparison; ` +
    `page code at most ${demo.handlerMs.toFixed(1)} ms per event; long tasks: ${JSON.stringify(demo.longTasks)}`);
  assert.equal(demo.steps, 45);
  assert.equal(demo.trainLoss.length, 45);
  assert.ok(demo.trainLoss.every(Number.isFinite));
  assert.equal(await p.getAttribute('[data-testid=ft-chart]', 'data-steps'), '45');
  assert.equal(await p.getAttribute('[data-testid=ft-chart]', 'data-vals'), '4'); // before training + 3 epoch ends
  assert.ok(demo.valLoss.at(-1).loss < demo.valLossBefore / 2, `validation loss ${demo.valLossBefore} -> ${demo.valLoss.at(-1).loss}`);
  assert.ok(demo.handlerMs < 50, `the page's code ran ${demo.handlerMs} ms for one progress event or frame`);
  const blocking = demo.longTasks.filter((t) => t.phase === 'training');
  assertNoLongTasksUnlessLoaded(blocking, 'Fine-tune page while training');

  // Kiln's greedy text, side by side
  const baseText = await p.textContent('[data-testid=ft-base-output]');
  const tunedText = await p.textContent('[data-testid=ft-tuned-output]');
  console.log(`# base:  ${JSON.stringify(baseText)}\n# tuned: ${JSON.stringify(tunedText)}`);
  assert.ok(tunedText.startsWith('Once upon a time') && tunedText.includes('Zorbu'), tunedText);
  assert.ok(baseText.startsWith('Once upon a time') && !baseText.includes('Zorbu'), baseText);

  // the download
  const [download] = await Promise.all([p.waitForEvent('download'), p.click('[data-testid=ft-download]')]);
  assert.equal(download.suggestedFilename(), 'lora-adapter.gguf');
  const file = path.join(dir, 'lora-adapter.gguf');
  await download.saveAs(file);
  const bytes = readFileSync(file);
  assert.equal(bytes.byteLength, demo.adapterBytes);
  const info = await readGgufFileInfo(file, { readTensorInfo: true });
  assert.equal(info.metadata.general?.type, 'adapter');
  assert.equal(info.metadata.adapter?.type, 'lora');
  assert.equal(info.metadata.adapter?.lora?.alpha, 16);
  assert.equal(info.tensorInfo.length, 5 * 2 * 2); // q and v of 5 layers, lora_a and lora_b
  await p.screenshot({ path: path.join(ARTIFACTS, 'finetune.png'), fullPage: true });
  assert.deepEqual(logs.filter((l) => l.startsWith('pageerror')), []);
  await context.close();

  // the same texts from the npm package in Node, without and with the downloaded adapter
  const kiln = await Kiln.create({ build: 'st', logLevel: 'error' });
  try {
    const opts = { maxTokens: 48, temperature: 0 };
    const base = await kiln.loadModel(MODEL);
    const tuned = await kiln.loadModel(MODEL, { lora: [{ source: new Uint8Array(bytes), scale: 1 }] });
    assert.equal('Once upon a time' + (await base.complete('Once upon a time', opts)).text, baseText);
    assert.equal('Once upon a time' + (await tuned.complete('Once upon a time', opts)).text, tunedText);
    base.free();
    tuned.free();
  } finally { kiln.destroy(); }
});
