// Kernels, Node, 1 thread: Kiln's wasm build (kiln-st, through the npm
// package's tensor API) vs @tensorflow/tfjs-backend-wasm (its SIMD build,
// XNNPACK), f32 GEMM 1024^3 and f32 mat-vec 4096x4096 (weights in LLM layout:
// row-major [out, in] times a vector). Kiln runs twice where the JS engine
// has relaxed SIMD (Chromium, Node 22+, Node 20 with
// --experimental-wasm-relaxed-simd, which `npm run bench:peers` passes):
// kiln-st-relaxed (what 'auto' picks there; `kiln`) and kiln-st (SIMD128,
// `kiln_simd128`); tfjs-backend-wasm has no relaxed-SIMD build. Both sides pay their API's overhead
// (upload is done once; each rep computes and reads the result back).
// Each side gets its fast weight layout: Kiln W as ggml [k, n] (rows of k),
// tfjs x . W with W as [k, n] (no transpose).
// gemm_f32_sum: the same GEMM with its product summed to one number inside
// each engine (Kiln: matmul().sum(); tfjs: tf.sum(matMul)), so no 4 MB
// result is copied out: the new buffer that copy fills costs page faults,
// ~11 ms per 4 MB on one VM (both sides, whenever the allocator hands out
// fresh pages: bench/peers/RESULTS-2026-12-03-s18.txt), of a ~45-60 ms rep.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stats, interleaveN, emit } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function rand(n, seed = 1) {
  const a = new Float32Array(n); let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (s * 1664525 + 1013904223) >>> 0; a[i] = (s / 2 ** 32) * 2 - 1; }
  return a;
}

async function tfjsSetup() {
  const tf = await import('@tensorflow/tfjs-core');
  const w = await import('@tensorflow/tfjs-backend-wasm');
  const dir = path.join(root, 'node_modules/@tensorflow/tfjs-backend-wasm/dist') + '/';
  tf.env().set('WASM_HAS_MULTITHREAD_SUPPORT', false); // 1 thread: the SIMD, non-threaded binary
  w.setWasmPaths({
    'tfjs-backend-wasm.wasm': dir + 'tfjs-backend-wasm.wasm',
    'tfjs-backend-wasm-simd.wasm': dir + 'tfjs-backend-wasm-simd.wasm',
    'tfjs-backend-wasm-threaded-simd.wasm': dir + 'tfjs-backend-wasm-threaded-simd.wasm',
  });
  await tf.setBackend('wasm'); await tf.ready();
  return { tf, simd: tf.env().getBool('WASM_HAS_SIMD_SUPPORT'), version: tf.version_core };
}

export async function runKernels({ reps = 5, warmup = 1, log = console.error } = {}) {
  const { Kiln, relaxedSimdSupported } = await import(path.join(root, 'js/dist/index.js'));
  const kilns = [await Kiln.create({ threads: 1, build: 'st' })];
  if (relaxedSimdSupported()) kilns.push(await Kiln.create({ threads: 1, build: 'st', simd: 'simd128' }));
  const { tf, simd, version } = await tfjsSetup();
  const names = kilns.map((k) => `kiln-${k.info().build}${k.info().simdFlavor === 'relaxed' ? '-relaxed' : ''}`);
  log(`kernels: ${names.join(', ')} (1 thread); tfjs-backend-wasm ${version} simd=${simd}`);
  const out = [];
  const cases = [
    { what: 'gemm_f32', shape: '1024x1024x1024', flop: 2 * 1024 ** 3, k: 1024, n: 1024, m: 1024 },
    { what: 'gemm_f32_sum', shape: '1024x1024x1024, summed', flop: 2 * 1024 ** 3, k: 1024, n: 1024, m: 1024, sum: true },
    { what: 'matvec_f32', shape: '4096x4096 . 4096', flop: 2 * 4096 * 4096, k: 4096, n: 4096, m: 1 },
  ];
  for (const c of cases) {
    const W = rand(c.k * c.n, 7), X = rand(c.k * c.m, 11);
    // Kiln (ggml semantics): matmul([k, n], [k, m]) -> [n, m]
    const kt = [];
    for (const kiln of kilns) {
      const kw = kiln.tensor(W, [c.k, c.n]), kx = kiln.tensor(X, [c.k, c.m]);
      await kw.ready?.(); await kx.ready?.();
      kt.push([kw, kx]);
    }
    // tfjs: x [m, k] . Wt [k, n] — its fast layout (matMul with transposeB
    // runs ~15x slower here), so it gets W transposed once, outside the timing
    const Wt = new Float32Array(c.k * c.n);
    for (let i = 0; i < c.n; i++) for (let j = 0; j < c.k; j++) Wt[j * c.n + i] = W[i * c.k + j];
    const tw = tf.tensor2d(Wt, [c.k, c.n]), tx = tf.tensor2d(X, [c.m, c.k]);
    const kilnRun = (i) => async () => {
      const [kw, kx] = kt[i];
      const t0 = performance.now(); const p = kw.matmul(kx); const y = c.sum ? p.sum() : p; const d = await y.data(); const dt = performance.now() - t0;
      if (y !== p) y.free?.();
      p.free?.(); return { ms: dt, gflops: c.flop / dt / 1e6, y0: d[0] };
    };
    const tfRun = async () => {
      const t0 = performance.now(); const p = tf.matMul(tx, tw, false, false); const y = c.sum ? tf.sum(p) : p; const d = y.dataSync(); const dt = performance.now() - t0;
      if (y !== p) y.dispose();
      p.dispose(); return { ms: dt, gflops: c.flop / dt / 1e6, y0: d[0] };
    };
    const rs = await interleaveN(reps, warmup, [...kilns.map((_, i) => kilnRun(i)), tfRun]);
    const b = rs[rs.length - 1], gb = b.map((r) => r.gflops);
    const agree = rs.slice(0, -1).every((a) => Math.abs(a[0].y0 - b[0].y0) <= 1e-3 * (1 + Math.abs(b[0].y0)));
    const ga = rs[0].map((r) => r.gflops);
    const extra = {};
    if (rs.length > 2) {
      const g2 = rs[1].map((r) => r.gflops);
      Object.assign(extra, { kiln_simd128_gflops: g2, kiln_simd128: stats(g2), ratio_simd128: stats(g2.map((x, i) => x / gb[i])) });
    }
    const rec = emit({ what: 'peers_kernel', case: c.what, shape: c.shape, threads: 1, kiln_build: names[0], kiln_gflops: ga, tfjs_gflops: gb,
      kiln: stats(ga), tfjs: stats(gb), ratio: stats(ga.map((x, i) => x / gb[i])), ...extra, agree, tfjs_version: version });
    log(`  ${c.what}: ${names[0]} ${rec.kiln.median?.toFixed(2)} GFLOPS` +
      (rec.kiln_simd128 ? `, kiln-st ${rec.kiln_simd128.median?.toFixed(2)} GFLOPS` : '') + `, tfjs ${rec.tfjs.median?.toFixed(2)} GFLOPS`);
    out.push(rec);
    for (const [kw, kx] of kt) { kw.free?.(); kx.free?.(); }
    tw.dispose(); tx.dispose();
  }
  for (const k of kilns) k.destroy();
  return out;
}
