// The SIMD flavour (KilnOptions.simd): 'auto' picks kiln-*-relaxed exactly
// when the JS engine runs relaxed SIMD (this suite runs twice, with and
// without Node 20's --experimental-wasm-relaxed-simd: scripts/test-js.sh),
// 'relaxed' fails clearly where it cannot run, 'simd128' never uses it, and
// 'auto' falls back to the SIMD128 files when the relaxed ones are missing.
// Quantized mat-vec and the f32 GEMM (the kernels relaxed SIMD replaces)
// agree with the SIMD128 engine.
import { mkdtempSync, symlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Kiln, KilnError, relaxedSimdSupported } from '../../js/dist/index.js';
import { BUILDS, rand, nmse } from './helpers.js';

const RELAXED_RUN = process.env.KILN_TEST_SIMD === 'relaxed';
const DIST = new URL('../../wasm/dist/', import.meta.url).pathname;
const FIX = new URL('../../build/js-fixtures/', import.meta.url).pathname;

describe('simd option', () => {
  it('probe matches the run (flag on: supported; off: not)', () => {
    expect(relaxedSimdSupported()).toBe(RELAXED_RUN);
  });

  it.each(BUILDS)('auto picks relaxed exactly when supported (%s)', async (build) => {
    const k = await Kiln.create({ build, threads: build === 'mt' ? 2 : 1, logLevel: 'error' });
    try {
      const i = k.info();
      expect(i.isa).toBe(RELAXED_RUN ? 'wasm_relaxed' : 'wasm_simd128');
      expect(i.simdFlavor).toBe(RELAXED_RUN ? 'relaxed' : 'simd128');
    } finally { k.destroy(); }
  });

  it('simd128 never uses relaxed; relaxed fails clearly where unsupported', async () => {
    const k = await Kiln.create({ build: 'st', simd: 'simd128', logLevel: 'error' });
    expect(k.info().isa).toBe('wasm_simd128');
    k.destroy();
    if (RELAXED_RUN) {
      const r = await Kiln.create({ build: 'st', simd: 'relaxed', logLevel: 'error' });
      expect(r.info().isa).toBe('wasm_relaxed');
      r.destroy();
    } else {
      const e = await Kiln.create({ build: 'st', simd: 'relaxed', logLevel: 'error' }).catch((x) => x);
      expect(e).toBeInstanceOf(KilnError);
      expect(e.code).toBe('UNSUPPORTED');
      expect(e.message).toMatch(/relaxed SIMD/);
    }
    const bad = await Kiln.create({ simd: 'avx512' as any, logLevel: 'error' }).catch((x) => x);
    expect(bad).toBeInstanceOf(KilnError);
    expect(bad.code).toBe('INVALID_ARGUMENT');
  });

  it('auto falls back to SIMD128 when the relaxed files are not there', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-dist-'));
    try {
      symlinkSync(join(DIST, 'st'), join(dir, 'st'));
      const k = await Kiln.create({ build: 'st', wasmUrl: dir, logLevel: 'error' });
      expect(k.info().isa).toBe('wasm_simd128');
      k.destroy();
      if (RELAXED_RUN) {
        const e = await Kiln.create({ build: 'st', simd: 'relaxed', wasmUrl: dir, logLevel: 'error' }).catch((x) => x);
        expect(e).toBeInstanceOf(Error);
      }
    } finally { rmSync(dir, { recursive: true, force: true }); }
  });
});

// the kernels relaxed SIMD swaps in, through the whole engine, against the
// SIMD128 engine in the same process (only meaningful in the relaxed run)
describe.runIf(RELAXED_RUN)('relaxed vs SIMD128 engines', () => {
  it('f32 GEMM (fused multiply-add): within float rounding of SIMD128', async () => {
    const kr = await Kiln.create({ build: 'st', simd: 'relaxed', logLevel: 'error' });
    const kb = await Kiln.create({ build: 'st', simd: 'simd128', logLevel: 'error' });
    try {
      const K = 256, M = 48, N = 40;
      const a = rand(K * M, 3), b = rand(K * N, 4);
      const out: Float32Array[] = [];
      for (const k of [kr, kb]) {
        out.push(await k.tensor(a, [K, M]).matmul(k.tensor(b, [K, N])).data() as Float32Array);
      }
      // double-precision reference
      const ref = new Float64Array(M * N);
      for (let j = 0; j < N; j++) for (let i = 0; i < M; i++) {
        let s = 0;
        for (let p = 0; p < K; p++) s += a[i * K + p] * b[j * K + p];
        ref[j * M + i] = s;
      }
      expect(nmse(out[0], ref)).toBeLessThan(1e-12);
      expect(nmse(out[1], ref)).toBeLessThan(1e-12);
    } finally { kr.destroy(); kb.destroy(); }
  });

  it.each(['q4_0', 'q8_0'])('%s model: same greedy text as SIMD128', async (t) => {
    const kr = await Kiln.create({ build: 'st', simd: 'relaxed', logLevel: 'error' });
    const kb = await Kiln.create({ build: 'st', simd: 'simd128', logLevel: 'error' });
    try {
      const texts: string[] = [];
      for (const k of [kr, kb]) {
        const m = await k.loadModel(join(FIX, `stories260K-pad-${t}.gguf`));
        texts.push((await m.complete('Once upon a time', { maxTokens: 60, temperature: 0 })).text);
        m.free();
      }
      expect(texts[0].length).toBeGreaterThan(100);
      expect(texts[0]).toBe(texts[1]);
    } finally { kr.destroy(); kb.destroy(); }
  });
});
