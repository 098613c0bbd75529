// Browser test of the Train page (web-demo/train.html): Debian's chromium
// driven by playwright-core against web-demo/server.mjs with COOP/COEP.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer } from '../../web-demo/server.mjs';
import { launchContext, ROOT } from './shared.mjs';

const ARTIFACTS = path.join(ROOT, 'test-artifacts');

let server, context, userDir;

before(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  server = await startServer({ port: 0, isolation: true, quiet: true });
  userDir = mkdtempSync(path.join(tmpdir(), 'kiln-e2e-train-'));
  context = await launchContext(userDir);
});

after(async () => {
  await context?.close();
  await server?.close();
  if (userDir) rmSync(userDir, { recursive: true, force: true });
});

const points = (p) => p.evaluate(() => Number(document.querySelector('[data-testid=train-loss-chart]').dataset.points));

test('Train page: batches run, the chart updates, stop works, a full short run reports test accuracy and a prediction', async () => {
  const p = await context.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(server.url + 'train.html');
  await p.waitForFunction(() => window.__kilnDemo?.ready === true || /could not start|failed/.test(document.body.textContent), null, { timeout: 60000 });
  assert.ok(await p.evaluate(() => window.__kilnDemo?.ready === true), `the page did not get ready\n${logs.join('\n')}`);
  assert.match(await p.textContent('#ndata'), /1000 training, 500 test images/);

  // a long run, stopped after a few batches
  await p.fill('#epochs', '50');
  await p.fill('#batch', '16');
  await p.click('[data-testid=train-start]');
  await p.waitForFunction(() => Number(document.querySelector('[data-testid=train-loss-chart]').dataset.points) >= 5, null, { timeout: 60000 });
  const png = await p.locator('[data-testid=train-loss-chart]').screenshot();
  assert.ok(png.length > 1000);
  assert.match(await p.textContent('[data-testid=train-status]'), /epoch \d+\/50 · batch \d+\/62 · loss \d/);
  await p.click('[data-testid=train-stop]');
  await p.waitForFunction(() => /stopped after \d+ batches/.test(document.querySelector('[data-testid=train-status]').textContent), null, { timeout: 30000 });
  const stoppedAt = await points(p);
  assert.ok(stoppedAt >= 5 && stoppedAt < 50 * 62, `stopped at ${stoppedAt}`);

  // a complete short run: 2 epochs of 10 batches
  await p.fill('#epochs', '2');
  await p.fill('#batch', '100');
  await p.click('[data-testid=train-start]');
  await p.waitForFunction(() => /done: /.test(document.querySelector('[data-testid=train-status]').textContent), null, { timeout: 120000 });
  assert.equal(await points(p), 20);
  const acc = await p.textContent('[data-testid=train-test-accuracy]');
  const m = acc.match(/([\d.]+) % on 500 test images/);
  assert.ok(m && Number(m[1]) > 30, `test accuracy: ${acc}`);
  await p.fill('[data-testid=train-pick]', '3');
  await p.waitForFunction(() => /predicted: .* · true: /.test(document.querySelector('[data-testid=train-prediction]').textContent), null, { timeout: 30000 });
  await p.screenshot({ path: path.join(ARTIFACTS, 'train.png'), fullPage: true });
  assert.deepEqual(logs.filter((l) => l.startsWith('pageerror')), []);
  await p.close();
});
