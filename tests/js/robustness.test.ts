// Bad input never breaks the engine: 1,000 random bad calls each give a
// typed error; aborting a compute leaves the engine usable.
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kiln, KilnAbortError, KilnError, type Tensor } from '../../js/dist/index.js';
import { BUILDS, MODEL, f32, engine, rand } from './helpers.js';

const BYTES = new Uint8Array(readFileSync(MODEL));

describe.each(BUILDS)('robustness (%s)', (build) => {
  let kiln: Kiln;
  let other: Kiln;
  beforeAll(async () => { kiln = await engine(build); other = await engine('st', 1); });
  afterAll(() => { kiln?.destroy(); other?.destroy(); });

  async function usable() {
    const x = kiln.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [3, 2]);
    expect(Array.from(await x.transpose().data())).toEqual([1, 4, 2, 5, 3, 6]);
    x.free();
    const m = await kiln.loadModel(BYTES);
    expect(m.tensorNames.length).toBe(48);
    m.free();
  }

  it('1,000 random bad calls each give a typed error; the engine stays usable', async () => {
    const { handles: h0 } = await kiln.memory();
    const good = kiln.tensor(rand(12), [4, 3]);
    const vec = kiln.tensor(rand(5), [5]);
    const freed = kiln.tensor(rand(6), [6]);
    freed.free();
    const foreign = other.tensor(new Float32Array(4), [4]);
    let s = 987654321;
    const rnd = (n: number) => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s % n; };
    const pick = <T,>(xs: T[]) => xs[rnd(xs.length)];
    const makers: [string, () => Tensor][] = [
      // wrong shapes
      ['add mismatched', () => good.add(vec)],
      ['mul mismatched', () => vec.mul(good)],
      ['matmul mismatched', () => good.matmul(vec)],
      ['reshape to another count', () => good.reshape([5, 2 + rnd(4)])],
      ['reshape to 5 dims', () => good.reshape([1, 1, 1, 1, 12])],
      ['permute repeated axes', () => good.permute(0, 0, 1, 2)],
      ['permute axis out of range', () => good.permute(0, 1, 2, 4 + rnd(100))],
      ['view past the end', () => good.view([4, 3], [16], 4 + 4 * rnd(10))],
      ['concat bad dim', () => good.concat(good, 4 + rnd(5))],
      ['softmaxExt bad mask', () => good.softmaxExt(vec, 1, 0)],
      ['rope bad positions', () => good.rope(vec, 4)],
      // freed handles, and tensors of another engine
      ['freed input', () => freed.add(good)],
      ['freed scale', () => freed.scale(2)],
      ['freed transpose', () => freed.transpose()],
      ['foreign input', () => good.add(foreign)],
      ['foreign mul', () => good.mul(foreign)],
      ['not a tensor', () => good.add({} as Tensor)],
      // huge allocations
      ['huge tensor', () => kiln.tensor(new Float32Array(4), [70000 + rnd(1000), 70000])],
      ['huge 4d tensor', () => kiln.tensor(new Float32Array(4), [1e6, 1e6, 1e6, 1e6])],
      ['huge i8 tensor', () => kiln.tensor(new Int8Array(4), [65536, 65536 + rnd(10)])],
      // wrong types and data
      ['untyped bytes', () => kiln.tensor(new Uint8Array(8), [8])],
      ['unknown type', () => kiln.tensor(new Float32Array(4), [4], 'q9_9' as any)],
      ['not an array', () => kiln.tensor('hello' as any, [5])],
      ['data too short', () => kiln.tensor(new Float32Array(3), [2, 2])],
      ['data too long', () => kiln.tensor(new Float32Array(9), [2, 4])],
      ['zero dim', () => kiln.tensor(new Float32Array(0), [0])],
      ['negative dim', () => kiln.tensor(new Float32Array(4), [-4])],
      ['fractional dim', () => kiln.tensor(new Float32Array(4), [2.5, 2])],
      ['NaN dim', () => kiln.tensor(new Float32Array(4), [NaN])],
      ['5 dims', () => kiln.tensor(new Float32Array(1), [1, 1, 1, 1, 1])],
      ['no dims', () => kiln.tensor(new Float32Array(1), [])],
      ['block type, bad row', () => kiln.tensor(new Uint8Array(18), [31], 'q4_0')],
      ['cast to no type', () => good.cast('x' as any)],
      ['NaN parameter', () => good.scale(NaN)],
      ['string parameter', () => good.scale('2' as any)],
      ['topK too large', () => good.topK(100 + rnd(10))],
      ['integer parameter out of range', () => good.permute(2 ** 32, 1, 2, 3)],
      ['fractional axis', () => good.permute(0.5, 1, 2, 3)],
    ];
    const seen = new Map<string, number>();
    for (let i = 0; i < 1000; i++) {
      const [what, make] = pick(makers);
      let t: Tensor;
      try {
        t = make();
      } catch (e) {
        // a synchronous throw must be typed too
        expect(e, what).toBeInstanceOf(KilnError);
        continue;
      }
      const err = await t.data().then(() => null, (e) => e);
      expect(err, `${what} should fail`).toBeInstanceOf(KilnError);
      expect(err.code, `${what}: ${err.message}`).not.toBe('ENGINE_CRASHED');
      expect(err.message.length).toBeGreaterThan(0);
      seen.set(err.code, (seen.get(err.code) ?? 0) + 1);
      t.free();
    }
    // every class of failure was exercised
    expect(seen.get('INVALID_HANDLE')).toBeGreaterThan(0);
    expect(seen.get('OUT_OF_MEMORY')).toBeGreaterThan(0);
    expect(seen.get('INVALID_ARGUMENT')).toBeGreaterThan(0);
    // the good tensor still holds its data
    expect((await good.data()).length).toBe(12);
    good.free(); vec.free(); foreign.free();
    expect((await kiln.memory()).handles).toBe(h0);
    expect((await kiln.memory()).total).toBeLessThan(1024 ** 3); // nothing huge was ever allocated
    await usable();
  });

  it('a job aborted while queued is dropped', async () => {
    const x = kiln.tensor(new Float32Array([1, 2]), [2]);
    const slow = kiln.loadModel(BYTES); // occupies the engine
    const ac = new AbortController();
    const p = x.data({ signal: ac.signal });
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(KilnAbortError);
    (await slow).free();
    expect(Array.from(await x.data())).toEqual([1, 2]);
    x.free();
  });

  it('abort during a long compute gives KilnAbortError; the engine still works', async () => {
    const n = 256;
    const w = kiln.tensor(rand(n * n, 5).map((v) => v / n), [n, n]);
    let x = kiln.tensor(rand(n * n, 6), [n, n]);
    const first = w.matmul(x);
    await f32(first);
    for (let i = 0; i < 300; i++) x = w.matmul(x); // ~5 G multiply-adds if it ran to the end
    const ac = new AbortController();
    const p = x.data({ signal: ac.signal });
    await new Promise((r) => setImmediate(r)); // the job is on the worker now
    ac.abort();
    await expect(p).rejects.toBeInstanceOf(KilnAbortError);
    // the engine computes again, and the abort word was reset
    const y = kiln.tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
    const eye = kiln.tensor(new Float32Array([1, 0, 0, 1]), [2, 2]);
    expect(Array.from(await eye.matmul(y).data())).toEqual([1, 2, 3, 4]);
    x.free();
    await usable();
  });

  it('destroy() fails pending work with ENGINE_CLOSED', async () => {
    const k = await engine(build, 2);
    const t = k.tensor(new Float32Array([1]), [1]);
    const p = k.loadModel(BYTES);
    const q = t.data();
    k.destroy();
    await expect(p).rejects.toMatchObject({ code: 'ENGINE_CLOSED' });
    await expect(q).rejects.toMatchObject({ code: 'ENGINE_CLOSED' });
    await expect(t.data()).rejects.toMatchObject({ code: 'ENGINE_CLOSED' });
  });
});
