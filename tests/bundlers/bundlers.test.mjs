// kiln-ml as an app developer gets it: the packed tarball (`npm pack`)
// installed into fixture apps built by real bundlers with no configuration
// beyond each tool's defaults — Vite (build, and the dev server), webpack 5,
// esbuild — then run in Chromium. Each page generates 200 greedy tokens from
// "Once upon a time" with the embedded stories260K model; the text must equal
// llama.cpp's reference (models/README.md). Served cross-origin isolated
// (COOP/COEP on the static or dev server) the page must run kiln-mt with
// threads, without those headers kiln-st; only the one variant picked is
// downloaded. Also Node: an ESM script and a CommonJS require() of the
// installed package.
// Run: scripts/test-bundlers.sh (suite `bundlers` of scripts/test.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchChromium, referenceText } from '../e2e/shared.mjs';
import { startServer } from '../../web-demo/server.mjs';
import { statSync } from 'node:fs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const MODEL = path.join(ROOT, 'models/stories260K.gguf');
const PROMPT = 'Once upon a time';
// llama.cpp's greedy 200 tokens after "Once upon a time" (models/README.md), without the BOS piece
const REFERENCE = referenceText();

// the fixture app: the same source for every bundler
const APP = `import { Kiln } from 'kiln-ml';
window.kilnRun = async (opts) => {
  try {
    const kiln = await Kiln.create({ logLevel: 'error', ...opts });
    const model = await kiln.loadModel(new URL('stories260K.gguf', document.baseURI).href);
    const r = await model.complete(${JSON.stringify(PROMPT)}, { maxTokens: 200, temperature: 0 });
    const info = kiln.info();
    model.free();
    kiln.destroy();
    return { text: ${JSON.stringify(PROMPT)} + r.text, build: info.build, threads: info.threads, cores: navigator.hardwareConcurrency, isa: info.isa, isolated: self.crossOriginIsolated };
  } catch (e) {
    return { error: String((e && (e.stack || e.message)) || e), code: e && e.code };
  }
};
window.kilnReady = true;
`;
const NODE_ESM = `import { Kiln } from 'kiln-ml';
const kiln = await Kiln.create({ logLevel: 'error' });
const model = await kiln.loadModel(process.argv[2]);
const r = await model.complete(${JSON.stringify(PROMPT)}, { maxTokens: 200, temperature: 0 });
console.log(JSON.stringify({ text: ${JSON.stringify(PROMPT)} + r.text, build: kiln.info().build }));
kiln.destroy();
`;
const NODE_CJS = `const { Kiln } = require('kiln-ml');
(async () => {
  const kiln = await Kiln.create({ logLevel: 'error', build: 'st' });
  const model = await kiln.loadModel(process.argv[2]);
  const r = await model.complete(${JSON.stringify(PROMPT)}, { maxTokens: 200, temperature: 0 });
  console.log(JSON.stringify({ text: ${JSON.stringify(PROMPT)} + r.text, build: kiln.info().build }));
  kiln.destroy();
})();
`;

let work, app, browser;
const dists = {};       // fixture -> folder to serve
const pageOpts = {};    // fixture -> Kiln.create options the page passes
const buildLogs = {};
const toClose = [];

function run(cmd, args, cwd, env = {}) {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
}

before(async () => {
  assert.ok(REFERENCE, 'reference text found in models/README.md');
  work = mkdtempSync(path.join(tmpdir(), 'kiln-bundlers-'));
  // the package as npm publishes it
  const tgz = path.join(work, run('npm', ['pack', '--silent', '--pack-destination', work], ROOT).trim().split('\n').pop());
  app = path.join(work, 'app');
  mkdirSync(app);
  writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'kiln-fixtures', private: true, type: 'module' }));
  run('npm', ['install', tgz, '--no-audit', '--no-fund', '--prefer-offline', '--no-package-lock', '--ignore-scripts'], app);

  // Vite: index.html + main.js, the model in public/ (copied as is by default)
  const vite = path.join(app, 'vite');
  mkdirSync(path.join(vite, 'public'), { recursive: true });
  writeFileSync(path.join(vite, 'index.html'), '<!doctype html><meta charset="utf-8"><title>vite</title><script type="module" src="/main.js"></script>\n');
  writeFileSync(path.join(vite, 'main.js'), APP);
  copyFileSync(MODEL, path.join(vite, 'public/stories260K.gguf'));
  buildLogs.vite = run(process.execPath, [path.join(ROOT, 'node_modules/vite/bin/vite.js'), 'build'], vite, { NO_COLOR: '1' });
  dists.vite = path.join(vite, 'dist');
  pageOpts.vite = {};

  // webpack 5: src/index.js -> dist/main.js, webpack's defaults (the CLI's
  // production mode); the page's HTML and the model are the app's files
  const wp = path.join(app, 'webpack');
  mkdirSync(path.join(wp, 'src'), { recursive: true });
  writeFileSync(path.join(wp, 'src/index.js'), APP);
  const { default: webpack } = await import('webpack');
  // what `npx webpack` does in that folder (its defaults are relative to the working directory)
  const config = { context: wp, mode: 'production', output: { path: path.join(wp, 'dist') } };
  const stats = await new Promise((resolve, reject) => webpack(config, (e, s) => (e ? reject(e) : resolve(s))));
  buildLogs.webpack = stats.toString({ all: false, errors: true, warnings: true });
  assert.ok(!stats.hasErrors(), `webpack failed:\n${buildLogs.webpack}`);
  dists.webpack = path.join(wp, 'dist');
  writeFileSync(path.join(dists.webpack, 'index.html'), '<!doctype html><meta charset="utf-8"><title>webpack</title><script src="main.js"></script>\n');
  copyFileSync(MODEL, path.join(dists.webpack, 'stories260K.gguf'));
  pageOpts.webpack = {};

  // esbuild bundles ES modules (--format=esm) but copies no assets named by
  // new URL(…, import.meta.url): the README's recipe copies the engine files
  // beside the bundle and names them with wasmUrl / workerUrl
  const eb = path.join(app, 'esbuild');
  mkdirSync(eb, { recursive: true });
  writeFileSync(path.join(eb, 'app.js'), APP);
  const esbuild = await import('esbuild');
  const r = await esbuild.build({ entryPoints: [path.join(eb, 'app.js')], bundle: true, format: 'esm', outdir: path.join(eb, 'dist'), logLevel: 'silent' });
  buildLogs.esbuild = r.warnings.map((w) => w.text).join('\n');
  dists.esbuild = path.join(eb, 'dist');
  const pkg = path.join(app, 'node_modules/kiln-ml');
  cpSync(path.join(pkg, 'wasm/dist'), path.join(dists.esbuild, 'kiln'), { recursive: true });
  copyFileSync(path.join(pkg, 'js/dist/worker.js'), path.join(dists.esbuild, 'kiln/worker.js'));
  writeFileSync(path.join(dists.esbuild, 'index.html'), '<!doctype html><meta charset="utf-8"><title>esbuild</title><script type="module" src="app.js"></script>\n');
  copyFileSync(MODEL, path.join(dists.esbuild, 'stories260K.gguf'));
  pageOpts.esbuild = { wasmUrl: '/kiln/', workerUrl: '/kiln/worker.js' };

  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  for (const c of toClose) await c();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** open url in a fresh page, run the app, return its result and the requests made */
async function runPage(url, opts, requests) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  try {
    const first = requests.length;
    await page.goto(url);
    await page.waitForFunction(() => window.kilnReady === true, null, { timeout: 60_000 });
    const r = await page.evaluate((o) => window.kilnRun(o), opts);
    return { ...r, requests: requests.slice(first).map((q) => q.path), errors };
  } finally {
    await page.close();
  }
}

function checkRun(r, isolated, label, opts = {}) {
  assert.equal(r.error, undefined, `${label}: ${r.error}`);
  assert.equal(r.text, REFERENCE, `${label}: the generated text`);
  assert.equal(r.isolated, isolated, `${label}: crossOriginIsolated`);
  if (isolated) {
    assert.equal(r.build, 'mt', `${label}: threads when isolated`);
    // asked for, or the default: one core left to the page, at most 8
    const want = opts.threads ?? Math.max(1, Math.min(8, r.cores - 1));
    assert.equal(r.threads, want, `${label}: ${r.threads} threads (${r.cores} cores)`);
  } else {
    assert.equal(r.build, 'st', `${label}: single-thread without isolation`);
    assert.equal(r.threads, 1);
  }
  // Chromium runs relaxed SIMD: the page picks kiln-{st,mt}-relaxed and downloads that one engine only
  assert.equal(r.isa, 'wasm_relaxed', `${label}: isa`);
  const wasm = r.requests.filter((p) => p.endsWith('.wasm'));
  assert.equal(wasm.length, 1, `${label}: one engine downloaded, not ${JSON.stringify(wasm)}`);
}

for (const fixture of ['vite', 'webpack', 'esbuild']) {
  for (const isolated of [true, false]) {
    test(`${fixture} build, ${isolated ? 'cross-origin isolated (kiln-mt)' : 'not isolated (kiln-st)'}: the reference text`, async () => {
      const srv = await startServer({ port: 0, isolation: isolated, quiet: true, mounts: { '/': dists[fixture] } });
      toClose.push(srv.close);
      // vite's isolated page asks for 2 threads: the pool runs under a bundler whatever the default
      const opts = { ...pageOpts[fixture], ...(isolated && fixture === 'vite' ? { threads: 2 } : {}) };
      const r = await runPage(srv.url, opts, srv.requests);
      checkRun(r, isolated, fixture, opts);
      // what the page downloaded for its first token, the model aside (a JSON line for the size report)
      const served = (p) => { try { return statSync(path.join(dists[fixture], p === '/' ? 'index.html' : p)).isFile(); } catch { return false; } };
      const files = [...new Set(['/', ...r.requests.filter((p) => !p.endsWith('.gguf'))])].filter(served); // not the 404 favicon
      const bytes = Object.fromEntries(files.map((p) => [p, statSync(path.join(dists[fixture], p === '/' ? 'index.html' : p)).size]));
      console.log(JSON.stringify({ bench: 'first-token-bytes', fixture, isolated, total: Object.values(bytes).reduce((a, b) => a + b, 0), files: bytes }));
      if (fixture !== 'esbuild') {
        // the bundler emitted the engine and the worker under its own names
        assert.ok(!r.requests.some((p) => p.includes('node_modules') || p.includes('/wasm/dist/')), `${fixture}: ${r.requests.join(' ')}`);
      }
    });
  }
}

test('vite build: no warning, no node: module in the browser bundle, every engine file emitted', () => {
  assert.doesNotMatch(buildLogs.vite, /externalized|doesn't exist at build time|node:/i, buildLogs.vite);
  const files = readdirSync(path.join(dists.vite, 'assets'));
  for (const v of ['kiln-st', 'kiln-mt', 'kiln-st-relaxed', 'kiln-mt-relaxed']) {
    assert.ok(files.some((f) => f.startsWith(`${v}-`) && f.endsWith('.wasm')), `${v}.wasm in dist/assets: ${files.join(' ')}`);
  }
  // the app's own bundle (what index.html loads, and its chunks) imports no node: module
  const chunks = files.filter((f) => f.endsWith('.js') && !/^(worker|kiln-)/.test(f));
  assert.ok(chunks.length > 0);
  for (const f of chunks) {
    assert.doesNotMatch(readFileSync(path.join(dists.vite, 'assets', f), 'utf8'), /(from\s*|import\s*\(\s*)["']node:/, f);
  }
});

test('webpack 5 and esbuild: the builds report no error', () => {
  assert.doesNotMatch(buildLogs.webpack, /ERROR/, buildLogs.webpack);
  assert.doesNotMatch(buildLogs.esbuild, /node:/, buildLogs.esbuild);
});

for (const isolated of [true, false]) {
  test(`vite dev server, ${isolated ? 'COOP/COEP headers (kiln-mt)' : 'no headers (kiln-st)'}: the reference text`, async () => {
    const { createServer } = await import('vite');
    const headers = isolated ? { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' } : {};
    const requests = [];
    const server = await createServer({
      root: path.join(app, 'vite'), configFile: false, logLevel: 'silent',
      server: { host: '127.0.0.1', port: 0, headers },
      plugins: [{ name: 'record-requests', configureServer(s) { s.middlewares.use((req, _res, next) => { requests.push({ path: req.url.split('?')[0] }); next(); }); } }],
    });
    await server.listen();
    toClose.push(() => server.close());
    const url = server.resolvedUrls.local[0];
    const r = await runPage(url, {}, requests);
    checkRun(r, isolated, 'vite dev');
  });
}

test('Node: an ES module script and a CommonJS require() of the installed package', () => {
  writeFileSync(path.join(app, 'esm.mjs'), NODE_ESM);
  writeFileSync(path.join(app, 'cjs.cjs'), NODE_CJS);
  const esm = JSON.parse(run(process.execPath, ['esm.mjs', MODEL], app).trim().split('\n').pop());
  assert.equal(esm.text, REFERENCE);
  assert.equal(esm.build, 'mt');
  const cjs = JSON.parse(run(process.execPath, ['--no-warnings', 'cjs.cjs', MODEL], app).trim().split('\n').pop());
  assert.equal(cjs.text, REFERENCE);
});

test('esbuild without wasmUrl: the error names every URL tried and suggests wasmUrl', async () => {
  const srv = await startServer({ port: 0, isolation: true, quiet: true, mounts: { '/': dists.esbuild } });
  toClose.push(srv.close);
  const r = await runPage(srv.url, { workerUrl: '/kiln/worker.js' }, srv.requests);
  assert.equal(r.code, 'BAD_SOURCE', r.error);
  // 'auto' tries the relaxed build, then SIMD128: both URLs, both 404
  assert.match(r.error, /kiln-mt-relaxed\.wasm: HTTP 404.*kiln-mt\.wasm: HTTP 404/s);
  assert.match(r.error, /wasmUrl/);
});
