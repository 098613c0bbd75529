// loadModel() from bytes in memory (js/src/bytes.ts), st and mt: the same
// model as from a path, the caller's buffer intact (or detached with
// {transfer: true}), bad sizes, abort halfway through the copy.
import { readFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnAbortError, KilnError, type Kiln, type Progress } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

const FILE = new Uint8Array(readFileSync(MODEL));
const GREEDY = { maxTokens: 40, temperature: 0 };
const PROMPT = 'Once upon a time';
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const FILE_SHA = sha(FILE);

/** the file's bytes in a fresh ArrayBuffer of their own */
const fresh = () => FILE.slice();

/** a GGUF header followed by `mb` MB of zeros: big enough for several slices */
function big(mb: number): Uint8Array {
  const b = new Uint8Array(FILE.length + mb * 1024 * 1024);
  b.set(FILE);
  return b;
}

describe.each(BUILDS)('loadModel from bytes (%s)', (build) => {
  let kiln: Kiln;
  let fromPath: string;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    const m = await kiln.loadModel(MODEL);
    fromPath = (await m.complete(PROMPT, GREEDY)).text;
    m.free();
    expect(fromPath.length).toBeGreaterThan(50);
  });
  afterAll(() => kiln?.destroy());

  async function sameModel(src: unknown, opts: Record<string, unknown> = {}, what = '') {
    const events: Progress[] = [];
    const m = await kiln.loadModel(src as any, { ...opts, onProgress: (p) => events.push(p) });
    expect(m.size, what).toBe(FILE.length);
    expect(m.tensorNames.length).toBe(48);
    expect(events.length, what).toBeGreaterThan(0);
    expect(events[events.length - 1], what).toEqual({ loaded: FILE.length, total: FILE.length });
    // the weights are the file's: a view of the model buffer equals its bytes
    const t = m.tensor('output_norm.weight');
    const norm = await t.data();
    t.free(); // it would keep the model's memory until collected
    expect(Buffer.from(FILE).indexOf(Buffer.from(norm.buffer, norm.byteOffset, norm.byteLength)), what).toBeGreaterThan(0);
    expect((await m.complete(PROMPT, GREEDY)).text, what).toBe(fromPath);
    m.free();
  }

  it('Uint8Array, ArrayBuffer, a view inside a larger buffer, a DataView, a SharedArrayBuffer: the same model as from the path; the caller\'s bytes untouched', async () => {
    const u8 = fresh();
    await sameModel(u8, {}, 'Uint8Array');
    expect(sha(u8)).toBe(FILE_SHA);

    const ab = fresh().buffer;
    await sameModel(ab, {}, 'ArrayBuffer');
    expect(ab.byteLength).toBe(FILE.length);
    expect(sha(new Uint8Array(ab))).toBe(FILE_SHA);

    // only the view's bytes are the model, at an odd offset
    const outer = new Uint8Array(FILE.length + 1000).fill(0xA5);
    outer.set(FILE, 333);
    const inner = outer.subarray(333, 333 + FILE.length);
    await sameModel(inner, {}, 'view at 333');
    expect(sha(inner)).toBe(FILE_SHA);
    expect(outer[332]).toBe(0xA5);
    expect(outer[333 + FILE.length]).toBe(0xA5);

    await sameModel(new DataView(outer.buffer, 333, FILE.length), {}, 'DataView');

    const sab = new SharedArrayBuffer(FILE.length);
    new Uint8Array(sab).set(FILE);
    await sameModel(sab, {}, 'SharedArrayBuffer');
    await sameModel(new Uint8Array(sab), { transfer: true }, 'SharedArrayBuffer view, transfer ignored');
    expect(sha(new Uint8Array(sab))).toBe(FILE_SHA);
  });

  it('{transfer: true} detaches the caller\'s buffer and gives the same model', async () => {
    const u8 = fresh();
    const buf = u8.buffer;
    const p = kiln.loadModel(u8, { transfer: true });
    // detached at once, before the load is done
    expect(buf.byteLength).toBe(0);
    expect(u8.length).toBe(0);
    if ('detached' in buf) expect((buf as any).detached).toBe(true);
    const m = await p;
    expect(m.size).toBe(FILE.length);
    expect((await m.complete(PROMPT, GREEDY)).text).toBe(fromPath);
    m.free();

    await sameModel(fresh().buffer, { transfer: true }, 'ArrayBuffer, transfer');
    const outer = new Uint8Array(FILE.length + 64);
    outer.set(FILE, 64);
    await sameModel(outer.subarray(64), { transfer: true }, 'view at 64, transfer');
    expect(outer.buffer.byteLength).toBe(0); // the whole underlying buffer went

    // the detached buffer cannot be loaded again: a typed error
    const again = await kiln.loadModel(buf).then(() => null, (e) => e);
    expect(again).toBeInstanceOf(KilnError);
    expect(again.code).toBe('BAD_SOURCE');
    expect(again.message).toMatch(/detached/);
    const again2 = await kiln.loadModel(u8, { transfer: true }).then(() => null, (e) => e);
    expect(again2).toBeInstanceOf(KilnError);

    // a load aborted before it starts leaves the buffer with the caller
    const kept = fresh();
    const ac = new AbortController();
    ac.abort();
    await expect(kiln.loadModel(kept, { transfer: true, signal: ac.signal })).rejects.toBeInstanceOf(KilnAbortError);
    expect(sha(kept)).toBe(FILE_SHA);
  });

  it('bad sizes and headers fail as before, with or without transfer; nothing leaks', async () => {
    const m0 = await kiln.loadModel(FILE);
    m0.free();
    const before = await kiln.memory();
    const header = FILE.slice(0, 8);
    const cases: [string, () => Uint8Array | ArrayBuffer, string, RegExp][] = [
      ['empty ArrayBuffer', () => new ArrayBuffer(0), 'BAD_MODEL', /0 bytes is too small/],
      ['empty view', () => new Uint8Array(0), 'BAD_MODEL', /too small/],
      ['3 bytes', () => FILE.slice(0, 3), 'BAD_MODEL', /3 bytes is too small/],
      ['the 8-byte header alone', () => header.slice(), 'BAD_MODEL', /too small/],
      ['23 bytes', () => FILE.slice(0, 23), 'BAD_MODEL', /too small/],
      ['bad magic, 5 MB', () => new Uint8Array(5 << 20).fill(7), 'BAD_MODEL', /bad magic/],
      ['version 9', () => { const b = fresh(); b[4] = 9; return b; }, 'BAD_MODEL', /version 9/],
      ['300 bytes', () => FILE.slice(0, 300), 'BAD_MODEL', /./],
      ['truncated by 1 byte', () => FILE.slice(0, FILE.length - 1), 'BAD_MODEL', /./],
      ['half', () => FILE.slice(0, FILE.length >> 1), 'BAD_MODEL', /./],
    ];
    for (const transfer of [false, true]) {
      for (const [what, make, code, msg] of cases) {
        const src = make();
        const r = await kiln.loadModel(src, { transfer }).then((m) => { m.free(); return null; }, (e) => e);
        expect(r, `${what} (transfer ${transfer})`).toBeInstanceOf(KilnError);
        expect(r.code, `${what}: ${r.message}`).toBe(code);
        expect(r.message, what).toMatch(msg);
      }
    }
    const after = await kiln.memory();
    expect(after.used).toBe(before.used);
    expect(after.handles).toBe(before.handles);
    const m = await kiln.loadModel(FILE);
    expect((await m.complete(PROMPT, GREEDY)).text).toBe(fromPath);
    m.free();
  });

  it('abort in the middle of the copy: KilnAbortError, the model buffer freed, the engine usable', async () => {
    const before = (await kiln.memory()).used;
    const src = big(24);
    const total = src.byteLength;
    const events: Progress[] = [];
    const ac = new AbortController();
    const r = await kiln.loadModel(src, { signal: ac.signal, onProgress: (p) => { events.push(p); ac.abort(); } })
      .then(() => 'loaded', (e) => e);
    expect(r).toBeInstanceOf(KilnAbortError);
    expect(events.length).toBeGreaterThan(0);
    expect(events[0].loaded).toBeGreaterThan(0);
    expect(events[0].loaded).toBeLessThan(total);
    expect(events[0].total).toBe(total);
    expect(src.byteLength).toBe(total);
    expect((await kiln.memory()).used).toBe(before);

    // with transfer the worker copies alone: the abort may land after the
    // copy; either way the outcome is typed and nothing stays allocated
    const ac2 = new AbortController();
    const r2 = await kiln.loadModel(big(24), { transfer: true, signal: ac2.signal, onProgress: () => ac2.abort() })
      .then((m) => { m.free(); return 'loaded'; }, (e) => e);
    if (r2 !== 'loaded') expect(r2).toBeInstanceOf(KilnError);
    expect((await kiln.memory()).used).toBe(before);

    // the header past the abort still makes a working model
    const m = await kiln.loadModel(FILE);
    expect((await m.complete(PROMPT, GREEDY)).text).toBe(fromPath);
    m.free();
  });

  it('a big buffer: progress in steps up to total, 50 loads from bytes without growth', async () => {
    const src = big(20);
    const events: Progress[] = [];
    // the zeros past the tensor data are ignored, as llama.cpp does
    const big20 = await kiln.loadModel(src, { onProgress: (p) => events.push(p) });
    expect(big20.size).toBe(src.byteLength);
    expect((await big20.complete(PROMPT, GREEDY)).text).toBe(fromPath);
    big20.free();
    expect(events.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < events.length; i++) expect(events[i].loaded).toBeGreaterThanOrEqual(events[i - 1].loaded);
    expect(events[events.length - 1].loaded).toBe(src.byteLength);

    const m0 = await kiln.loadModel(FILE);
    m0.free();
    const { used, handles } = await kiln.memory();
    for (let i = 0; i < 50; i++) {
      const m = await kiln.loadModel(i % 2 ? fresh() : fresh().buffer, { transfer: i % 3 === 0 });
      m.free();
    }
    const after = await kiln.memory();
    expect(after.used).toBeLessThanOrEqual(used);
    expect(after.handles).toBe(handles);
  });
});
