#!/usr/bin/env node
// Bytes a page downloads before its first generated token, for kiln-ml and
// its peers, each built by the same Vite (the repository's, default
// settings) from a one-screen app; prints one JSON line per package.
//   kiln-ml:   the app's JS + the engine worker + one engine (kiln-mt-relaxed:
//              Chromium, cross-origin isolated) + its pthread script
//   wllama:    the app's JS (its workers are inlined) + wllama.wasm
//   transformers.js: the app's JS + the onnxruntime-web files it fetches from
//              jsDelivr in Chromium (ort-wasm-simd-threaded.asyncify.{mjs,wasm}),
//              sized from the installed onnxruntime-web of the same version
// Models are not counted. tests/bundlers measures kiln-ml's bytes from a real
// page's requests (its "first-token-bytes" lines); the numbers agree.
// Usage: node bench/bundle-size.mjs [--transformers DIR]   (DIR: a node_modules
// holding @huggingface/transformers, e.g. a scratch `npm install` of it)
import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (k) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : null; };
const work = mkdtempSync(path.join(tmpdir(), 'kiln-size-'));

function version(dir) { return JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')).version; }

/** Vite-build main.js in a folder whose node_modules has the given packages; returns dist/assets */
async function viteApp(name, modules, main) {
  const app = path.join(work, name);
  mkdirSync(path.join(app, 'node_modules'), { recursive: true });
  for (const [pkg, dir] of Object.entries(modules)) {
    mkdirSync(path.dirname(path.join(app, 'node_modules', pkg)), { recursive: true });
    symlinkSync(dir, path.join(app, 'node_modules', pkg));
  }
  writeFileSync(path.join(app, 'package.json'), '{"type":"module"}');
  writeFileSync(path.join(app, 'index.html'), '<!doctype html><script type="module" src="/main.js"></script>');
  writeFileSync(path.join(app, 'main.js'), main);
  await build({ root: app, configFile: false, logLevel: 'error' });
  return path.join(app, 'dist/assets');
}

function report(pkg, ver, files) {
  const out = {};
  let total = 0, gz = 0;
  for (const f of files) {
    const b = readFileSync(f);
    out[path.basename(f)] = b.length;
    total += b.length;
    gz += gzipSync(b).length;
  }
  console.log(JSON.stringify({ bench: 'first-token-bytes', package: pkg, version: ver, vite: version(path.join(ROOT, 'node_modules/vite')),
    bytes: total, gzipBytes: gz, files: out }));
}

const pick = (dir, re) => readdirSync(dir).filter((f) => re.test(f)).map((f) => path.join(dir, f));

try {
  {
    const dir = await viteApp('kiln', { 'kiln-ml': ROOT }, `import { Kiln } from 'kiln-ml';
const kiln = await Kiln.create();
const model = await kiln.loadModel('/stories260K.gguf');
document.body.textContent = (await model.complete('Once upon a time')).text;`);
    report('kiln-ml', version(ROOT), [...pick(dir, /^index-.*\.js$/), ...pick(dir, /^worker-.*\.js$/),
      ...pick(dir, /^kiln-mt-relaxed-.*\.(js|wasm)$/), ...pick(dir, /^kiln-mt(-relaxed)?\.worker-.*\.js$/).slice(0, 1)]);
  }
  {
    const wl = path.join(ROOT, 'node_modules/@wllama/wllama');
    const dir = await viteApp('wllama', { '@wllama/wllama': wl }, `import { Wllama } from '@wllama/wllama';
import wasm from '@wllama/wllama/esm/wasm/wllama.wasm?url';
const w = new Wllama({ default: wasm });
await w.loadModelFromUrl('/stories260K.gguf');
document.body.textContent = await w.createCompletion('Once upon a time', { nPredict: 50 });`);
    report('@wllama/wllama', version(wl), [...pick(dir, /\.js$/), ...pick(dir, /\.wasm$/)]);
  }
  const tdir = arg('--transformers');
  if (tdir && existsSync(path.join(tdir, '@huggingface/transformers'))) {
    const nm = path.resolve(tdir);
    const app = path.join(nm, '..', 'kiln-size-app');
    rmSync(app, { recursive: true, force: true });
    mkdirSync(app);
    writeFileSync(path.join(app, 'index.html'), '<!doctype html><script type="module" src="/main.js"></script>');
    writeFileSync(path.join(app, 'main.js'), `import { pipeline } from '@huggingface/transformers';
const gen = await pipeline('text-generation', 'Xenova/llama2.c-stories15M');
document.body.textContent = (await gen('Once upon a time', { max_new_tokens: 50 }))[0].generated_text;`);
    await build({ root: app, configFile: false, logLevel: 'error' });
    const dir = path.join(app, 'dist/assets');
    const ort = path.join(nm, 'onnxruntime-web/dist');
    report('@huggingface/transformers', version(path.join(nm, '@huggingface/transformers')),
      [...pick(dir, /\.js$/), path.join(ort, 'ort-wasm-simd-threaded.asyncify.mjs'), path.join(ort, 'ort-wasm-simd-threaded.asyncify.wasm')]);
    rmSync(app, { recursive: true, force: true });
  } else {
    console.error('transformers.js: not measured (pass --transformers DIR, a node_modules holding @huggingface/transformers)');
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
