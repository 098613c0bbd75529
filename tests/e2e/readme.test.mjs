// The package README's JavaScript examples, run as written: every ```js
// block in README.md carries a `<!-- run: page -->` / `<!-- run: node -->`
// tag (both allowed) and runs there — in Node as a module importing
// 'kiln-ml' (the package's own exports, by self-reference), in Chromium as a
// module of a page whose import map points 'kiln-ml' at js/dist, served
// cross-origin isolated. A block passes when it finishes without an error;
// the two quick starts must also produce llama.cpp's reference text
// (models/README.md) since they generate greedily from "Once upon a time".
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { launchChromium, referenceText } from './shared.mjs';
import { startServer } from '../../web-demo/server.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const PROMPT = 'Once upon a time';
const REFERENCE = referenceText();
// the reference after the prompt: what complete() returns for it
const CONTINUATION = REFERENCE?.slice(PROMPT.length);

/** README.md's js blocks with their run tags */
function blocks() {
  const md = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const out = [];
  const re = /(?:<!--\s*run:\s*([a-z ]+?)\s*-->\s*\n)?([ \t]*)```js\n([\s\S]*?)\n[ \t]*```/g;
  for (const m of md.matchAll(re)) {
    const line = md.slice(0, m.index).split('\n').length;
    const code = m[3].split('\n').map((l) => l.slice(m[2].length)).join('\n');
    out.push({ line, where: (m[1] ?? '').split(/\s+/).filter(Boolean), code });
  }
  return out;
}

const BLOCKS = blocks();
let work, server, browser;

before(async () => {
  assert.ok(CONTINUATION, 'reference text found in models/README.md');
  work = mkdtempSync(path.join(tmpdir(), 'kiln-readme-'));
  // the esbuild recipe's folder: the engine builds and the worker, copied
  const kilnDir = path.join(work, 'kiln');
  cpSync(path.join(ROOT, 'wasm/dist'), kilnDir, { recursive: true });
  copyFileSync(path.join(ROOT, 'js/dist/worker.js'), path.join(kilnDir, 'worker.js'));
  mkdirSync(path.join(work, 'pages'));
  server = await startServer({ port: 0, isolation: true, quiet: true, mounts: { '/kiln/': kilnDir, '/pages/': path.join(work, 'pages') } });
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await server?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

test('every js block of README.md is tagged to run', () => {
  assert.ok(BLOCKS.length >= 6, `${BLOCKS.length} blocks`);
  for (const b of BLOCKS) {
    assert.ok(b.where.length > 0 && b.where.every((w) => w === 'page' || w === 'node'), `README.md:${b.line}: add <!-- run: page|node -->`);
  }
});

const isQuickStart = (b) => b.code.includes(`complete('${PROMPT}', { temperature: 0 })`);

for (const b of BLOCKS) {
  if (b.where.includes('node')) {
    test(`README.md:${b.line} in Node`, async () => {
      // inside the repository, so that 'kiln-ml' resolves to this package (self-reference)
      const dir = path.join(ROOT, 'build/readme-blocks');
      mkdirSync(dir, { recursive: true });
      const file = path.join(dir, `block-${b.line}.mjs`);
      writeFileSync(file, b.code + '\n');
      const { stdout } = await promisify(execFile)(process.execPath, [file], { cwd: ROOT, timeout: 120_000 });
      if (isQuickStart(b)) assert.ok(stdout.startsWith(CONTINUATION), `output: ${stdout.slice(0, 200)}`);
    });
  }
  if (b.where.includes('page')) {
    test(`README.md:${b.line} in a page (Chromium)`, async () => {
      writeFileSync(path.join(work, 'pages', `block-${b.line}.js`), b.code + '\n');
      writeFileSync(path.join(work, 'pages', `block-${b.line}.html`), `<!doctype html><meta charset="utf-8">
<script type="importmap">{ "imports": { "kiln-ml": "/js/dist/index.js" } }</script>
<script type="module">
import('/pages/block-${b.line}.js').then(() => { window.__done = { ok: true }; },
  (e) => { window.__done = { error: String((e && (e.stack || e.message)) || e) }; });
</script>`);
      const page = await browser.newPage();
      const logs = [];
      page.on('console', (m) => logs.push(m.text()));
      page.on('pageerror', (e) => logs.push(`pageerror: ${e}`));
      try {
        await page.goto(`${server.url}pages/block-${b.line}.html`);
        await page.waitForFunction(() => window.__done, null, { timeout: 120_000 });
        const done = await page.evaluate(() => window.__done);
        assert.equal(done.error, undefined, `${done.error}\n${logs.join('\n')}`);
        if (isQuickStart(b)) {
          const text = await page.evaluate(() => document.body.textContent);
          assert.ok(text.startsWith(CONTINUATION), `page text: ${text.slice(0, 200)}`);
        }
      } finally {
        await page.close();
      }
    });
  }
}
