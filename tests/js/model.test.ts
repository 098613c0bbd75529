// Models: loading stories260K.gguf from a path, bytes, a Blob and a local
// HTTP URL, progress, abort, malformed files, load/free without growth.
import { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kiln, KilnAbortError, KilnError, type Progress } from '../../js/dist/index.js';
import { BUILDS, MODEL, engine } from './helpers.js';

const BYTES = new Uint8Array(readFileSync(MODEL));

/** A server on 127.0.0.1 for the tests' URLs:
 *  /model        the file, with Content-Length
 *  /nolength     the file, chunked (no length announced)
 *  /stall        the first 1.1 MB, then holds the connection until closed
 *  /huge         claims 5 GB (GGUF header first), then holds
 *  /missing      404 */
async function startServer(): Promise<{ server: Server; base: string }> {
  const held: (() => void)[] = [];
  const server = createServer((req, res) => {
    if (req.url === '/model') {
      res.writeHead(200, { 'content-length': String(BYTES.length), 'content-type': 'application/octet-stream' });
      res.end(BYTES);
    } else if (req.url === '/nolength') {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      for (let o = 0; o < BYTES.length; o += 100_000) res.write(BYTES.subarray(o, o + 100_000));
      res.end();
    } else if (req.url === '/stall') {
      res.writeHead(200, { 'content-length': String(BYTES.length) });
      res.write(BYTES.subarray(0, 1_100_000));
      held.push(() => res.destroy());
    } else if (req.url === '/huge') {
      res.writeHead(200, { 'content-length': String(5 * 1024 ** 3) });
      res.write(BYTES.subarray(0, 64 * 1024));
      held.push(() => res.destroy());
    } else {
      res.writeHead(404); res.end();
    }
  });
  server.on('close', () => held.forEach((f) => f()));
  (server as any).releaseHeld = () => { held.splice(0).forEach((f) => f()); };
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const addr = server.address() as { port: number };
  return { server, base: `http://127.0.0.1:${addr.port}` };
}

function checkProgress(events: Progress[], total: number) {
  expect(events.length).toBeGreaterThan(0);
  for (let i = 1; i < events.length; i++) expect(events[i].loaded).toBeGreaterThanOrEqual(events[i - 1].loaded);
  for (const e of events) expect(e.total).toBe(total);
  expect(events[events.length - 1].loaded).toBe(total);
}

describe.each(BUILDS)('models (%s)', (build) => {
  let kiln: Kiln;
  let server: Server;
  let base: string;
  beforeAll(async () => {
    kiln = await engine(build);
    ({ server, base } = await startServer());
  });
  afterAll(async () => {
    kiln?.destroy();
    (server as any)?.releaseHeld?.();
    await new Promise((r) => server?.close(r));
  });

  async function expectUsable(k: Kiln) {
    const m = await k.loadModel(BYTES);
    expect(m.tensorNames).toContain('token_embd.weight');
    m.free();
    // freed here, not by the garbage collector at some later point (the
    // load/free test counts handles)
    const t = k.tensor(new Float32Array([3, 4]), [2]);
    expect(Array.from(await t.data())).toEqual([3, 4]);
    t.free();
  }

  it('loads from a path, a Uint8Array, a Blob and an HTTP URL, progress ending at total', async () => {
    const sources: [string, unknown][] = [
      ['path', MODEL], ['bytes', BYTES], ['blob', new Blob([BYTES])], ['url', `${base}/model`], ['url without length', `${base}/nolength`],
    ];
    for (const [what, src] of sources) {
      const events: Progress[] = [];
      const t0 = performance.now();
      const m = await kiln.loadModel(src as any, { onProgress: (p) => events.push(p) });
      const ms = performance.now() - t0;
      expect(m.size, what).toBe(BYTES.length);
      expect(m.version).toBe(3);
      expect(m.tensorNames.length).toBe(48);
      expect(m.metadata['general.architecture']).toBe('llama');
      expect(m.metadata['llama.embedding_length']).toBe(64);
      expect(m.metadata['tokenizer.ggml.tokens']).toEqual({ array: 'string', length: 512 });
      checkProgress(events, BYTES.length);
      // the weights are readable and equal the file's bytes
      const emb = m.tensor('token_embd.weight');
      const info = await emb.info();
      expect(info.shape.length).toBeGreaterThanOrEqual(2);
      emb.free();
      m.free();
      console.log(`[kiln ${build}] stories260K from ${what}: ${(BYTES.length / 1e6).toFixed(2)} MB in ${ms.toFixed(1)} ms = ${(BYTES.length / 1e6 / (ms / 1000)).toFixed(0)} MB/s`);
    }
  });

  it('a model tensor holds the file bytes and keeps the model alive after free()', async () => {
    const m = await kiln.loadModel(BYTES);
    const t = m.tensor('output_norm.weight');
    m.free();
    const data = await t.data();
    const info = await t.info();
    expect(info.type).toBe('f32');
    expect(data.length).toBe(info.shape.reduce((a, b) => a * b, 1));
    // find the values in the file: the tensor is a view of the bytes loaded
    const raw = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const hay = Buffer.from(BYTES);
    expect(hay.indexOf(Buffer.from(raw))).toBeGreaterThan(0);
    t.free();
    await expect(m.tensor('output_norm.weight').data()).rejects.toMatchObject({ code: 'INVALID_HANDLE' });
    const m2 = await kiln.loadModel(BYTES);
    await expect(m2.tensor('no.such.tensor').data()).rejects.toMatchObject({ code: 'INVALID_ARGUMENT' });
    m2.free();
  });

  it('abort during a load (stalled HTTP stream) gives KilnAbortError; the engine still works', async () => {
    const ac = new AbortController();
    const events: Progress[] = [];
    const p = kiln.loadModel(`${base}/stall`, {
      signal: ac.signal,
      onProgress: (e) => { events.push(e); ac.abort(); }, // abort once bytes are flowing
    });
    await expect(p).rejects.toBeInstanceOf(KilnAbortError);
    expect(events.length).toBeGreaterThan(0);
    expect(events[0].loaded).toBeLessThan(BYTES.length);
    (server as any).releaseHeld();
    // abort before the job starts: dropped from the queue
    const ac2 = new AbortController();
    ac2.abort();
    await expect(kiln.loadModel(BYTES, { signal: ac2.signal })).rejects.toBeInstanceOf(KilnAbortError);
    await expectUsable(kiln);
  });

  it('abort of a path load between chunks; memory returns', async () => {
    const before = (await kiln.memory()).used;
    const ac = new AbortController();
    const p = kiln.loadModel(BYTES, { signal: ac.signal, onProgress: () => ac.abort() });
    // the whole copy may finish before the abort lands: either outcome is
    // typed, and nothing is leaked
    const r = await p.then((m) => { m.free(); return 'loaded'; }, (e) => e);
    if (r !== 'loaded') expect(r).toBeInstanceOf(KilnAbortError);
    expect((await kiln.memory()).used).toBe(before);
  });

  it('malformed GGUF gives KilnError(BAD_MODEL) and the engine still works', async () => {
    const bad: [string, Uint8Array][] = [];
    bad.push(['bad magic', new Uint8Array(100).fill(7)]);
    const v9 = BYTES.slice(0, 4096); v9[4] = 9; bad.push(['version 9', v9]);
    bad.push(['truncated header', BYTES.slice(0, 300)]);
    bad.push(['truncated data', BYTES.slice(0, BYTES.length - 1000)]);
    const counts = BYTES.slice(); new DataView(counts.buffer).setBigUint64(8, 1n << 40n, true); bad.push(['absurd tensor count', counts]);
    const kvs = BYTES.slice(); new DataView(kvs.buffer).setBigUint64(16, 1n << 50n, true); bad.push(['absurd kv count', kvs]);
    bad.push(['tiny', new Uint8Array([0x47, 0x47, 0x55])]);
    // random corruption of the header region, deterministic
    let s = 12345;
    for (let k = 0; k < 20; k++) {
      const c = BYTES.slice(0, 20000);
      for (let j = 0; j < 8; j++) { s = (s * 1103515245 + 12345) >>> 0; c[24 + (s % 2000)] = s >>> 24; }
      bad.push([`corrupt ${k}`, c]);
    }
    for (const [what, b] of bad) {
      const r = await kiln.loadModel(b).then((m) => { m.free(); return null; }, (e) => e);
      if (what.startsWith('corrupt') && r === null) continue; // a corruption that kept the file valid
      expect(r, what).toBeInstanceOf(KilnError);
      expect(['BAD_MODEL', 'BAD_SOURCE'], `${what}: ${r.message}`).toContain(r.code);
    }
    await expect(kiln.loadModel(`${base}/missing`)).rejects.toMatchObject({ code: 'BAD_SOURCE' });
    await expect(kiln.loadModel('/no/such/file.gguf')).rejects.toMatchObject({ code: 'BAD_SOURCE' });
    await expectUsable(kiln);
  });

  it('a model larger than wasm32 memory fails up front', async () => {
    const r = await kiln.loadModel(`${base}/huge`).then(() => null, (e) => e);
    (server as any).releaseHeld();
    expect(r).toBeInstanceOf(KilnError);
    expect(r.code).toBe('MODEL_TOO_LARGE');
    expect(r.message).toMatch(/does not fit/);
    expect((await kiln.memory()).total).toBeLessThan(1024 ** 3);
    await expectUsable(kiln);
  });

  it('load/free 100 times: kiln.memory().used does not grow', async () => {
    const m0 = await kiln.loadModel(BYTES);
    m0.free();
    const { used: base0, handles: h0 } = await kiln.memory();
    for (let i = 0; i < 100; i++) {
      const m = await kiln.loadModel(i % 2 ? BYTES : MODEL);
      if (i % 10 === 0) m.tensor('token_embd.weight').free();
      m.free();
    }
    const after = await kiln.memory();
    expect(after.used).toBeLessThanOrEqual(base0);
    expect(after.handles).toBe(h0);
  });
});
