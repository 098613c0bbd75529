// model.embed in Chromium: the kiln-mt build (cross-origin isolated page, 2
// threads) and the kiln-st build, each with relaxed SIMD and with SIMD128,
// embed the same texts with random-weight
// encoders written by kiln-synth-encoder (bert with absolute positions and
// mean pooling, nomic-bert with RoPE and cls pooling, F32 and F16) and with
// the stories260K decoder (last token). Every vector is compared with:
//  - llama.cpp's (node-llama-cpp's LlamaEmbeddingContext, the oracle's
//    pinned CPU build): after L2 normalization cosine >= 0.99999 and max
//    |diff| <= 1e-4 (the bar), the decoder too: its wasm kernels sum
//    in llama.cpp's AVX2 order (tests/js/embed.test.ts), which relaxed
//    SIMD's fused multiply-adds reproduce (stories260K: 3.7e-8 measured in
//    Node on these texts) and SIMD128 approaches without FMA (7.9e-5);
//  - Node's (the same package, kiln-st in this process: Node 20 runs the
//    SIMD128 build): the page's SIMD128 run must give the same vectors
//    (max |diff| <= 1e-6; 0 seen), its relaxed-SIMD run (fused
//    multiply-adds) agree within the tolerance against llama.cpp (encoders
//    2.9e-5 seen, the F16 one; the decoder 7.9e-5, SIMD128's distance).
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh
// writes the encoders with build/bin/kiln-synth-encoder first)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Kiln } from '../../js/dist/index.js';
import { loadOracleLlama } from '../oracle/llamacpp.mjs';
import { startServer } from '../../web-demo/server.mjs';
import { ROOT, launchChromium } from './shared.mjs';

const SYNTH = path.join(ROOT, 'build/bin/kiln-synth-encoder');
const VOCAB = path.join(ROOT, 'tests/data/vocab/ggml-vocab-bert-bge.gguf');
// name, kiln-synth-encoder arguments (small shapes: 128 wide, 2 layers, 128 positions)
const ENCODERS = [
  ['bert-mean-f32', ['--arch', 'bert', '--pooling', 'mean']],
  ['nomic-bert-cls-f32', ['--arch', 'nomic-bert', '--pooling', 'cls']],
  ['bert-mean-f16', ['--arch', 'bert', '--pooling', 'mean', '--type', 'f16']],
];
const TEXTS = ['Hello world', 'The quick brown fox jumps over the lazy dog.', 'Äpfel und Birnen: naïve café owners\' résumés!',
  'search boxes rank documents by the cosine of their embeddings'];
// per model: where the page fetches it, its file here, the pooling asked for
const MODELS = [
  ...ENCODERS.map(([name]) => ({ name, url: `fixtures/${name}.gguf`, pooling: undefined })),
  // stories260K's file has no pooling_type: llama.cpp gives the last token's vector
  { name: 'stories260K', url: 'models/stories260K.gguf', file: path.join(ROOT, 'models/stories260K.gguf'), pooling: 'last' },
];
const TOL = { cos: 0.99999, norm: { encoder: 1e-4, decoder: 1e-4 }, simd128: 1e-6 };

// the page: window.embedAll(build, simd, models, texts) -> vectors per model (plain arrays)
const PAGE = `<!doctype html><meta charset="utf-8"><title>embed</title>
<script type="module">
import { Kiln } from '/js/dist/index.js';
window.embedAll = async (build, simd, models, texts) => {
  const kiln = await Kiln.create({ build, simd, threads: build === 'mt' ? 2 : 1, logLevel: 'error' });
  try {
    const info = kiln.info();
    const out = {};
    for (const m of models) {
      const model = await kiln.loadModel(new URL('/' + m.url, location.href).href);
      const vecs = await model.embed(texts, m.pooling ? { pooling: m.pooling } : {});
      out[m.name] = vecs.map((v) => Array.from(v));
      model.free();
    }
    return { build: info.build, threads: info.threads, isa: info.isa, out };
  } finally { kiln.destroy(); }
};
window.embedReady = true;
</script>`;

let dir, isolated, plain, browser;
const llamaRef = {}; // name -> llama.cpp's raw vectors
const nodeVecs = {}; // name -> Node's normalized vectors

const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
function maxDiff(a, b) {
  let d = 0;
  for (let i = 0; i < b.length; i++) d = Math.max(d, Math.abs(a[i] - b[i]));
  return d;
}
function cosine(a, b) {
  let s = 0;
  for (let i = 0; i < b.length; i++) s += a[i] * b[i];
  return s / (norm(a) * norm(b));
}

before(async () => {
  assert.ok(existsSync(SYNTH), `${SYNTH} is missing: build it (cmake --build build --target kiln-synth-encoder; scripts/test-e2e.sh does)`);
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-embed-'));
  for (const [name, args] of ENCODERS) execFileSync(SYNTH, [path.join(dir, `${name}.gguf`), '--vocab', VOCAB, ...args]);
  for (const m of MODELS) m.file ??= path.join(dir, `${m.name}.gguf`);
  writeFileSync(path.join(dir, 'embed.html'), PAGE);
  isolated = await startServer({ port: 0, isolation: true, quiet: true, mounts: { '/fixtures/': dir } });
  plain = await startServer({ port: 0, isolation: false, quiet: true, mounts: { '/fixtures/': dir } });
  browser = await launchChromium();
  // llama.cpp: encoders without flash attention (attention in F32, as Kiln's
  // encoder), the decoder with it (over its F16 cache, as Kiln's decoder)
  const llama = await loadOracleLlama();
  try {
    for (const m of MODELS) {
      const enc = m.name !== 'stories260K';
      const lm = await llama.loadModel({ modelPath: m.file, defaultContextFlashAttention: !enc });
      const ctx = await lm.createEmbeddingContext({ contextSize: 128, batchSize: 128, threads: 1 });
      llamaRef[m.name] = [];
      for (const t of TEXTS) llamaRef[m.name].push([...(await ctx.getEmbeddingFor(t)).vector]);
      await ctx.dispose();
      await lm.dispose();
    }
  } finally { await llama.dispose(); }
  const kiln = await Kiln.create({ build: 'st', logLevel: 'error' });
  try {
    for (const m of MODELS) {
      const model = await kiln.loadModel(m.file);
      nodeVecs[m.name] = (await model.embed(TEXTS, m.pooling ? { pooling: m.pooling } : {})).map((v) => Array.from(v));
      model.free();
    }
  } finally { kiln.destroy(); }
});

after(async () => {
  await browser?.close();
  await isolated?.close();
  await plain?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** the browser's vectors against llama.cpp's and Node's; returns the worst numbers seen */
function checkVectors(got, where, simd) {
  const worst = { cos: 1, llama: 0, node: 0 };
  for (const m of MODELS) {
    assert.equal(got[m.name].length, TEXTS.length, `${where} ${m.name}`);
    for (let i = 0; i < TEXTS.length; i++) {
      const v = got[m.name][i], l = llamaRef[m.name][i], n = norm(l);
      const tag = `${where} ${m.name} ${JSON.stringify(TEXTS[i])}`;
      assert.equal(v.length, l.length, `${tag}: length`);
      assert.ok(Math.abs(norm(v) - 1) < 1e-5, `${tag}: normalized`);
      const dl = maxDiff(v, l.map((x) => x / n)), cos = cosine(v, l), dn = maxDiff(v, nodeVecs[m.name][i]);
      const tn = m.name === 'stories260K' ? TOL.norm.decoder : TOL.norm.encoder;
      assert.ok(dl <= tn, `${tag}: max |diff| with llama.cpp ${dl.toExponential(2)} > ${tn}`);
      assert.ok(cos >= TOL.cos, `${tag}: cosine with llama.cpp 1 - ${(1 - cos).toExponential(2)}`);
      const tNode = simd === 'simd128' ? TOL.simd128 : tn;
      assert.ok(dn <= tNode, `${tag}: max |diff| with Node ${dn.toExponential(2)} > ${tNode}`);
      worst.cos = Math.min(worst.cos, cos);
      worst.llama = Math.max(worst.llama, dl);
      worst.node = Math.max(worst.node, dn);
    }
  }
  console.log(`# ${where}: vs llama.cpp max |diff| ${worst.llama.toExponential(2)}, cosine 1 - ${(1 - worst.cos).toExponential(2)}; vs Node max |diff| ${worst.node.toExponential(2)}`);
}

async function embedIn(server, build, simd) {
  const p = await browser.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  await p.goto(server.url + 'fixtures/embed.html');
  await p.waitForFunction(() => window.embedReady === true, null, { timeout: 30000 });
  const models = MODELS.map(({ name, url, pooling }) => ({ name, url, pooling }));
  let r;
  try {
    r = await p.evaluate(([b, s, ms, ts]) => window.embedAll(b, s, ms, ts), [build, simd, models, TEXTS]);
  } catch (e) {
    throw new Error(`${e.message}\n${logs.join('\n')}`);
  } finally { await p.close(); }
  assert.equal(r.build, build);
  assert.equal(r.isa, simd === 'relaxed' ? 'wasm_relaxed' : 'wasm_simd128');
  return r;
}

for (const simd of ['relaxed', 'simd128']) {
  test(`Chromium kiln-mt ${simd} (2 threads, cross-origin isolated): model.embed equals llama.cpp's and Node's vectors`, async () => {
    const r = await embedIn(isolated, 'mt', simd);
    assert.equal(r.threads, 2);
    checkVectors(r.out, `chromium kiln-mt ${simd}`, simd);
  });

  test(`Chromium kiln-st ${simd} (a page without COOP/COEP): model.embed equals llama.cpp's and Node's vectors`, async () => {
    const r = await embedIn(plain, 'st', simd);
    checkVectors(r.out, `chromium kiln-st ${simd}`, simd);
  });
}
