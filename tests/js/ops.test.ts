// Tensor ops through the JS API against plain-JS references, on both builds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { Kiln, KilnError } from '../../js/dist/index.js';
import { BUILDS, f32, engine, nmse, rand } from './helpers.js';

type Shape = [number, number, number, number];
const full = (s: number[]): Shape => [s[0] ?? 1, s[1] ?? 1, s[2] ?? 1, s[3] ?? 1];
const count = (s: number[]) => s.reduce((a, b) => a * b, 1);

/** element of a contiguous tensor of shape s at (i0..i3) */
const at = (x: Float32Array, s: Shape, i0: number, i1: number, i2: number, i3: number) =>
  x[i0 + s[0] * (i1 + s[1] * (i2 + s[2] * i3))];

function refBroadcast(a: Float32Array, sa: number[], b: Float32Array, sb: number[], f: (x: number, y: number) => number) {
  const A = full(sa), B = full(sb);
  const out = new Float64Array(count(A));
  let k = 0;
  for (let i3 = 0; i3 < A[3]; i3++) for (let i2 = 0; i2 < A[2]; i2++) for (let i1 = 0; i1 < A[1]; i1++) for (let i0 = 0; i0 < A[0]; i0++) {
    out[k++] = f(at(a, A, i0, i1, i2, i3), at(b, B, i0 % B[0], i1 % B[1], i2 % B[2], i3 % B[3]));
  }
  return out;
}

function refRows(a: Float32Array, ne0: number, f: (row: Float32Array) => number[]) {
  const out: number[] = [];
  for (let r = 0; r < a.length / ne0; r++) out.push(...f(a.subarray(r * ne0, (r + 1) * ne0)));
  return out;
}

describe.each(BUILDS)('ops (%s)', (build) => {
  let kiln: Kiln;
  beforeAll(async () => { kiln = await engine(build); });
  afterAll(() => kiln?.destroy());

  it('round-trips data of every plain type', async () => {
    const f = rand(7 * 3);
    expect(Array.from(await kiln.tensor(f, [7, 3]).data())).toEqual(Array.from(f));
    const i = new Int32Array([1, -2, 3, 2147483647, -2147483648, 0]);
    expect(Array.from(await kiln.tensor(i, [3, 2]).data())).toEqual(Array.from(i));
    const h = new Uint16Array([0x3c00, 0xc000, 0x7bff]); // f16 bits: 1, -2, 65504
    expect(Array.from(await kiln.tensor(h, [3], 'f16').data())).toEqual(Array.from(h));
    const b = new Int8Array([-128, 5, 127, 0]);
    const bi = await kiln.tensor(b, [2, 2]).info();
    expect(bi).toEqual({ shape: [2, 2], type: 'i8', nbytes: 4 });
    expect(Array.from(await kiln.tensor(b, [2, 2]).data())).toEqual(Array.from(b));
  });

  it('transpose / permute / reshape / view read back in logical order', async () => {
    const s = [5, 3, 2, 2];
    const x = rand(count(s), 3);
    const t = kiln.tensor(x, s);
    const S = full(s);
    // permute(1, 0, 2, 3) == transpose: result ne = [3, 5, 2, 2]
    for (const p of [t.transpose(), t.permute(1, 0, 2, 3)]) {
      const got = await p.data();
      expect((await p.info()).shape).toEqual([3, 5, 2, 2]);
      const ref: number[] = [];
      for (let i3 = 0; i3 < 2; i3++) for (let i2 = 0; i2 < 2; i2++) for (let i1 = 0; i1 < 5; i1++) for (let i0 = 0; i0 < 3; i0++) ref.push(at(x, S, i1, i0, i2, i3));
      expect(Array.from(got)).toEqual(ref);
    }
    // ggml permute semantics: axis i of the source goes to position axes[i]
    const q = t.permute(2, 0, 3, 1); // result ne: [3, 2, 5, 2]
    expect((await q.info()).shape).toEqual([3, 2, 5, 2]);
    const gq = await q.data();
    const refq: number[] = [];
    for (let j3 = 0; j3 < 2; j3++) for (let j2 = 0; j2 < 5; j2++) for (let j1 = 0; j1 < 2; j1++) for (let j0 = 0; j0 < 3; j0++) {
      // source axis 0 -> 2, 1 -> 0, 2 -> 3, 3 -> 1
      refq.push(at(x, S, j2, j0, j3, j1));
    }
    expect(Array.from(gq)).toEqual(refq);
    const r = t.reshape([10, 6]);
    expect((await r.info()).shape).toEqual([10, 6]);
    expect(Array.from(await r.data())).toEqual(Array.from(x));
    // a view of rows 1..2 of a [5, 3] matrix
    const m = kiln.tensor(x.subarray(0, 15), [5, 3]);
    const v = m.view([5, 2], [20], 20);
    expect(Array.from(await v.data())).toEqual(Array.from(x.subarray(5, 15)));
  });

  const binary: [string, (x: number, y: number) => number][] = [
    ['add', (x, y) => x + y], ['sub', (x, y) => x - y], ['mul', (x, y) => x * y], ['div', (x, y) => x / y],
  ];
  for (const [name, f] of binary) {
    it(`${name} with broadcasting`, async () => {
      for (const [sa, sb] of [[[7, 5], [7, 5]], [[9, 4, 3], [9, 1, 3]], [[6, 4, 2, 3], [1, 4, 1, 3]], [[33], [1]]] as number[][][]) {
        const a = rand(count(sa), 11);
        const b = rand(count(sb), 12).map((v) => (name === 'div' ? v + 2 : v));
        const out = await f32((kiln.tensor(a, sa) as any)[name](kiln.tensor(b, sb)));
        expect(nmse(out, refBroadcast(a, sa, b, sb, f))).toBeLessThan(1e-10);
      }
    });
  }

  it('scale', async () => {
    const a = rand(50, 4);
    const out = await f32(kiln.tensor(a, [10, 5]).scale(-0.75));
    expect(nmse(out, Array.from(a, (v) => v * -0.75))).toBeLessThan(1e-12);
  });

  it('matmul (ggml mul_mat: [k, n] x [k, m] -> [n, m])', async () => {
    for (const [k, n, m] of [[16, 8, 4], [37, 5, 9], [64, 33, 17]]) {
      const a = rand(k * n, 21), b = rand(k * m, 22);
      const out = await f32(kiln.tensor(a, [k, n]).matmul(kiln.tensor(b, [k, m])));
      const ref: number[] = [];
      for (let j = 0; j < m; j++) for (let i = 0; i < n; i++) {
        let s = 0;
        for (let q = 0; q < k; q++) s += a[q + i * k] * b[q + j * k];
        ref.push(s);
      }
      expect(nmse(out, ref)).toBeLessThan(1e-8);
    }
  });

  it('softmax over rows', async () => {
    const a = rand(13 * 6, 31).map((v) => v * 8);
    const out = await f32(kiln.tensor(a, [13, 6]).softmax());
    const ref = refRows(a, 13, (r) => { const mx = Math.max(...r); const e = Array.from(r, (v) => Math.exp(v - mx)); const s = e.reduce((x, y) => x + y); return e.map((v) => v / s); });
    expect(nmse(out, ref)).toBeLessThan(1e-10);
  });

  it('rmsNorm over rows', async () => {
    const a = rand(32 * 5, 41);
    const out = await f32(kiln.tensor(a, [32, 5]).rmsNorm(1e-6));
    const ref = refRows(a, 32, (r) => { const ms = r.reduce((x, y) => x + y * y, 0) / r.length; return Array.from(r, (v) => v / Math.sqrt(ms + 1e-6)); });
    expect(nmse(out, ref)).toBeLessThan(1e-10);
  });

  it('rope (normal mode) over [head_dim, heads, tokens]', async () => {
    const hd = 8, nh = 3, nt = 4, nDims = 8, base = 10000;
    const a = rand(hd * nh * nt, 51);
    const pos = new Int32Array([0, 1, 5, 9]);
    const out = await f32(kiln.tensor(a, [hd, nh, nt]).rope(kiln.tensor(pos, [nt]), nDims, { freqBase: base }));
    const ref = Array.from(a);
    for (let t = 0; t < nt; t++) for (let h = 0; h < nh; h++) for (let i = 0; i < nDims; i += 2) {
      const th = pos[t] * Math.pow(base, -i / nDims);
      const o = t * hd * nh + h * hd + i;
      const x0 = a[o], x1 = a[o + 1];
      ref[o] = x0 * Math.cos(th) - x1 * Math.sin(th);
      ref[o + 1] = x0 * Math.sin(th) + x1 * Math.cos(th);
    }
    expect(nmse(out, ref)).toBeLessThan(1e-9);
  });

  it('sum, sumRows, mean', async () => {
    const a = rand(11 * 7, 61);
    const s = await f32(kiln.tensor(a, [11, 7]).sum());
    expect(Math.abs(s[0] - a.reduce((x, y) => x + y, 0))).toBeLessThan(1e-4);
    const sr = await f32(kiln.tensor(a, [11, 7]).sumRows());
    expect(nmse(sr, refRows(a, 11, (r) => [r.reduce((x, y) => x + y, 0)]))).toBeLessThan(1e-10);
    const mn = await f32(kiln.tensor(a, [11, 7]).mean());
    expect(nmse(mn, refRows(a, 11, (r) => [r.reduce((x, y) => x + y, 0) / 11]))).toBeLessThan(1e-10);
  });

  const unary: [string, (x: number) => number, number][] = [
    ['neg', (x) => -x, 1e-14], ['abs', Math.abs, 1e-14], ['sqr', (x) => x * x, 1e-12], ['exp', Math.exp, 1e-10],
    ['tanh', Math.tanh, 1e-10], ['relu', (x) => Math.max(0, x), 1e-14], ['sigmoid', (x) => 1 / (1 + Math.exp(-x)), 1e-10],
    ['silu', (x) => x / (1 + Math.exp(-x)), 1e-8],
    ['gelu', (x) => 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x))), 1e-5],
  ];
  for (const [name, f, tol] of unary) {
    it(`unary ${name}`, async () => {
      const a = rand(45, 71).map((v) => v * 3);
      const out = await f32((kiln.tensor(a, [9, 5]) as any)[name]());
      expect(nmse(out, Array.from(a, f))).toBeLessThan(tol);
    });
  }

  it('cont of a permuted tensor', async () => {
    const x = rand(4 * 3, 81);
    const out = await f32(kiln.tensor(x, [4, 3]).transpose().cont());
    const ref: number[] = [];
    for (let i1 = 0; i1 < 4; i1++) for (let i0 = 0; i0 < 3; i0++) ref.push(x[i1 + 4 * i0]);
    expect(Array.from(out)).toEqual(ref);
  });

  it('bad shapes reject with a KilnError naming both shapes', async () => {
    const a = kiln.tensor(rand(12), [4, 3]);
    const b = kiln.tensor(rand(10), [5, 2]);
    const err = await a.add(b).data().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(KilnError);
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toMatch(/4.*3/);
    expect(err.message).toMatch(/5.*2/);
    // reshape to a different element count names both sizes too
    const r = await a.reshape([5, 3]).data().then(() => null, (e) => e);
    expect(r).toBeInstanceOf(KilnError);
    expect(r.code).toBe('INVALID_ARGUMENT');
  });

  it('reports the build it runs', () => {
    const i = kiln.info();
    expect(i.build).toBe(build);
    expect(i.simd).toBe(true);
    expect(i.threads).toBe(build === 'mt' ? 4 : 1);
    expect(i.version).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

describe('Kiln.create', () => {
  it('picks kiln-mt in Node and runs 8 threads', async () => {
    const k = await Kiln.create({ threads: 8, logLevel: 'error' });
    try {
      expect(k.info().build).toBe('mt');
      expect(k.info().threads).toBe(8);
      expect(Array.from(await k.tensor(new Float32Array([1, 2]), [2]).data())).toEqual([1, 2]);
    } finally { k.destroy(); }
  });
  it('rejects a bad thread count', async () => {
    await expect(Kiln.create({ threads: 0 })).rejects.toBeInstanceOf(KilnError);
  });
});

// the op methods of Tensor are written from the engine's op table (KW_OPS) by
// scripts/gen-tensor-ops.mjs: js/src/kiln.ts must be what the table gives, and
// every op the engine reports is a Tensor method or listed as not being one
describe('Tensor op methods from KW_OPS', () => {
  it('js/src/kiln.ts is up to date with wasm/kiln_wasm_ops.c; the engine reports the same ops', async () => {
    // @ts-ignore: a plain .mjs script
    const gen = await import('../../scripts/gen-tensor-ops.mjs');
    const src = readFileSync(new URL('../../js/src/kiln.ts', import.meta.url), 'utf8');
    expect(gen.rewrite(src) === src).toBe(true);
    const table = gen.readOpTable() as { name: string; inputs: string; params: string }[];
    // the table read from the source is the one compiled into the engine
    const kiln = await Kiln.create({ build: 'st', logLevel: 'error' });
    try { expect(kiln.info().ops).toEqual(table.map((r) => r.name)); } finally { kiln.destroy(); }
  });
});
