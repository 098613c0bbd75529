// Every decoder architecture in Chromium through the npm package: a page
// imports kiln-ml from /js/dist/, loads each architecture's random-weight
// Q4_K test model (tests/oracle/arch-models.mjs, the files arch.mjs compares
// with llama.cpp and arch-wasm.mjs with native Kiln) by URL, and generates
// 48 greedy tokens; they must equal what the same wasm engine gives in Node
// on the same file (kiln-mt in a cross-origin isolated page, kiln-st in a
// plain one, 2 threads and 1, SIMD128 on both sides: Node 20 runs no relaxed
// SIMD; arch-wasm.mjs covers the relaxed engines).
// Needs the native kiln-synth-model (scripts/test-e2e.sh builds it).
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startServer } from '../../web-demo/server.mjs';
import { Kiln } from '../../js/dist/index.js';
import { ARCH_VOCAB, archModel } from '../oracle/arch-models.mjs';
import { ROOT, launchChromium } from './shared.mjs';

const BUILD = path.join(ROOT, 'build');
const WT = 'q4_K';
const PROMPT = 'The quick brown fox jumps over the lazy dog, and then it ran into the forest where';
const OPTS = { maxTokens: 48, temperature: 0 };
const N_CTX = 256;
const ARCHS = ARCH_VOCAB.map(([a]) => a);

const PAGE = `<!doctype html>
<meta charset="utf-8"><title>kiln architectures</title>
<script type="module">
import { Kiln } from '/js/dist/index.js';
window.kilnArchs = async (files, prompt, opts, nCtx, threads) => {
  const kiln = await Kiln.create({ logLevel: 'error', threads, simd: 'simd128' });
  const out = { build: kiln.info().build, tokens: {} };
  try {
    for (const f of files) {
      const model = await kiln.loadModel('/fixtures/' + f, { nCtx });
      out.tokens[f] = (await model.complete(prompt, opts)).tokens;
      model.free();
    }
  } catch (e) {
    out.error = String(e && (e.stack || e.message) || e);
  } finally { kiln.destroy(); }
  return out;
};
window.kilnReady = true;
</script>`;

let pageDir, isolated, plain, browser;
const files = {};
const node = { st: {}, mt: {} };

before(async () => {
  for (const a of ARCHS) files[a] = archModel(BUILD, a, WT);
  pageDir = mkdtempSync(path.join(tmpdir(), 'kiln-arch-'));
  writeFileSync(path.join(pageDir, 'arch.html'), PAGE);
  const mounts = { '/fixtures/': path.dirname(files[ARCHS[0]]), '/page/': pageDir };
  isolated = await startServer({ port: 0, isolation: true, quiet: true, mounts });
  plain = await startServer({ port: 0, isolation: false, quiet: true, mounts });
  browser = await launchChromium();
  // the same engines in Node on the same files: the reference
  for (const build of ['st', 'mt']) {
    const kiln = await Kiln.create({ build, simd: 'simd128', threads: build === 'mt' ? 2 : 1, logLevel: 'error' });
    try {
      for (const a of ARCHS) {
        const model = await kiln.loadModel(files[a], { nCtx: N_CTX });
        node[build][a] = (await model.complete(PROMPT, OPTS)).tokens;
        model.free();
      }
    } finally { kiln.destroy(); }
  }
});

after(async () => {
  await browser?.close();
  await isolated?.close();
  await plain?.close();
  if (pageDir) rmSync(pageDir, { recursive: true, force: true });
});

for (const [name, server, build] of [['cross-origin isolated (kiln-mt)', () => isolated, 'mt'], ['not isolated (kiln-st)', () => plain, 'st']]) {
  test(`browser, ${name}: every architecture (${WT}) generates Node's greedy tokens`, async () => {
    const p = await browser.newPage();
    const logs = [];
    p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
    p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
    await p.goto(server().url + 'page/arch.html');
    await p.waitForFunction(() => window.kilnReady === true, null, { timeout: 30000 });
    const names = ARCHS.map((a) => path.basename(files[a]));
    const r = await p.evaluate(([f, pr, o, n, t]) => window.kilnArchs(f, pr, o, n, t), [names, PROMPT, OPTS, N_CTX, build === 'mt' ? 2 : 1]);
    assert.equal(r.error, undefined, `${r.error}\n${logs.join('\n')}`);
    assert.equal(r.build, build);
    for (const a of ARCHS) {
      assert.equal(node[build][a].length, OPTS.maxTokens, `${a}: Node generated ${node[build][a].length} tokens`);
      assert.deepEqual(r.tokens[path.basename(files[a])], node[build][a], `${a} ${WT} in Chromium (kiln-${build})`);
    }
    await p.close();
  });
}
