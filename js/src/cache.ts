/*
 * cache.ts — a persistent cache for models loaded by URL (browsers).
 *
 * Storage: the Origin Private File System when there is one, else the Cache
 * API. An entry is keyed by its URL and records the size and ETag the server
 * announced. On a miss the download is split (tee): one branch streams into
 * the engine as usual, the other into storage. The entry is committed only
 * after every byte arrived, the byte count equals the announced size, and
 * the engine loaded the file (GGUF for loadModel, whisper.cpp's format for
 * loadWhisper); anything else (abort, network error,
 * short body, bad file, full disk) discards what was written, so an
 * interrupted download never leaves an entry behind.
 *
 * OPFS layout, under the folder `kiln-models/`: `<id>.gguf` holds the bytes
 * (whatever the format)
 * and `<id>.json` the entry ({url, size, etag, storedAt}). The JSON is the
 * commit marker: it is written last, and a data file without one is
 * leftover and removed by list(). Writes go through createWritable(), whose
 * data only replaces the file on close().
 */
import { KilnAbortError, KilnError, errorText } from './errors.js';
import type { Progress } from './scheduler.js';

export interface CacheEntry {
  url: string;
  /** bytes */
  size: number;
  etag: string | null;
  /** ms since the epoch */
  storedAt: number;
  backend: 'opfs' | 'cache-api';
}

/** how a cached load went, for onCache */
export type CacheEvent =
  | { state: 'hit'; entry: CacheEntry }
  | { state: 'stored'; entry: CacheEntry }
  | { state: 'not-stored'; reason: string }
  | { state: 'stale'; entry: CacheEntry }
  | { state: 'unavailable'; reason: string };

export interface ModelCache {
  /** entries that are complete (leftovers of interrupted writes are removed) */
  list(): Promise<CacheEntry[]>;
  /** remove the entry of a URL; true if there was one */
  delete(url: string): Promise<boolean>;
  /** remove every entry */
  clear(): Promise<void>;
  /** the storage in use, or null where neither OPFS nor the Cache API exists (Node) */
  backend(): Promise<'opfs' | 'cache-api' | null>;
}

/** what loadModel needs from the engine (kept structural to avoid an import cycle) */
interface Loader<M> {
  loadModel(source: string | ReadableStream<Uint8Array> | Blob, opts: { onProgress?: (p: Progress) => void; signal?: AbortSignal; size?: number }): Promise<M>;
  /** download a URL in the engine's worker, which also writes the bytes to `store` */
  loadModelStoring?(url: string, store: FileSystemFileHandle, opts: { onProgress?: (p: Progress) => void; signal?: AbortSignal }): Promise<{ model: M; stored: { bytes: number; etag: string | null; error?: string } | null }>;
}

/** @internal */
export interface CachedLoadOptions {
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
  /** true: use an entry without asking the network; 'revalidate': HEAD first and drop an entry whose size/ETag changed */
  cache?: boolean | 'revalidate';
  onCache?: (e: CacheEvent) => void;
}

const DIR = 'kiln-models';
const CACHE_NAME = 'kiln-models-v1';

/** a stable file name for a URL (two FNV-1a 32-bit hashes; the entry also stores the URL and is checked) */
function idOf(url: string): string {
  let h1 = 0x811c9dc5, h2 = 0x01000193 ^ 0x5bd1e995;
  for (let i = 0; i < url.length; i++) {
    const c = url.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 0x01000193) >>> 0;
    h2 = Math.imul(h2 ^ c, 0x01000193 + 2 * i + 1) >>> 0;
  }
  return h1.toString(16).padStart(8, '0') + h2.toString(16).padStart(8, '0');
}

function normalize(url: string | URL): string {
  const base = globalThis.location?.href;
  return new URL(String(url), base).href;
}

/* ------------------------------------------------------------ backends */

interface Writer {
  /** OPFS: the data file, which the engine's worker may write instead (write() is then not called) */
  handle?: FileSystemFileHandle;
  write(chunk: Uint8Array): Promise<void>;
  commit(entry: CacheEntry): Promise<void>;
  discard(): Promise<void>;
}

interface Backend {
  kind: 'opfs' | 'cache-api';
  list(): Promise<CacheEntry[]>;
  get(url: string): Promise<{ entry: CacheEntry; blob: Blob } | null>;
  remove(url: string): Promise<boolean>;
  clear(): Promise<void>;
  begin(url: string): Promise<Writer>;
}

/** ids with a download being written (list() must not take them for leftovers) */
const writing = new Set<string>();

async function opfsBackend(): Promise<Backend | null> {
  const storage: StorageManager | undefined = globalThis.navigator?.storage;
  if (!storage || typeof storage.getDirectory !== 'function') return null;
  // keys() is in every OPFS browser, not yet in TypeScript's DOM library
  let dir: FileSystemDirectoryHandle & { keys(): AsyncIterable<string> };
  try {
    const root = await storage.getDirectory();
    dir = await root.getDirectoryHandle(DIR, { create: true }) as typeof dir;
    // createWritable is what makes writes atomic; without it use the Cache API
    const probe = await dir.getFileHandle('.probe', { create: true });
    if (typeof probe.createWritable !== 'function') return null;
  } catch {
    return null;
  }
  const readMeta = async (id: string): Promise<CacheEntry | null> => {
    try {
      const f = await (await dir.getFileHandle(`${id}.json`)).getFile();
      const m = JSON.parse(await f.text());
      if (typeof m.url !== 'string' || typeof m.size !== 'number') return null;
      return { url: m.url, size: m.size, etag: m.etag ?? null, storedAt: m.storedAt ?? 0, backend: 'opfs' };
    } catch { return null; }
  };
  const removeQuiet = async (name: string) => { try { await dir.removeEntry(name); } catch { /* absent */ } };
  const get = async (url: string) => {
    const id = idOf(url);
    const entry = await readMeta(id);
    if (!entry || entry.url !== url) return null;
    try {
      const file: File = await (await dir.getFileHandle(`${id}.gguf`)).getFile();
      if (file.size !== entry.size) return null;
      return { entry, blob: file as Blob };
    } catch { return null; }
  };
  return {
    kind: 'opfs',
    async list() {
      const out: CacheEntry[] = [];
      const names: string[] = [];
      for await (const name of dir.keys()) names.push(name);
      for (const name of names) {
        if (name.endsWith('.json')) {
          const id = name.slice(0, -5);
          const e = await readMeta(id);
          if (e && (await get(e.url))) out.push(e);
          else { await removeQuiet(name); await removeQuiet(`${id}.gguf`); }
        } else if (name.endsWith('.gguf')) {
          // data without its commit marker: an interrupted write (unless one is under way)
          const id = name.slice(0, -5);
          if (!names.includes(`${id}.json`) && !writing.has(id)) await removeQuiet(name);
        }
      }
      return out.sort((a, b) => a.storedAt - b.storedAt);
    },
    get,
    async remove(url) {
      const id = idOf(url);
      const had = !!(await readMeta(id));
      await removeQuiet(`${id}.json`);
      await removeQuiet(`${id}.gguf`);
      return had;
    },
    async clear() {
      const names: string[] = [];
      for await (const name of dir.keys()) names.push(name);
      for (const n of names) if (n !== '.probe') await removeQuiet(n);
    },
    async begin(url) {
      const id = idOf(url);
      // an old entry for this URL stops being one before its bytes change
      await removeQuiet(`${id}.json`);
      writing.add(id);
      let fh: FileSystemFileHandle;
      try { fh = await dir.getFileHandle(`${id}.gguf`, { create: true }); } catch (e) { writing.delete(id); throw e; }
      // opened on the first write: a download the worker stores never opens it here
      let w: FileSystemWritableFileStream | null = null;
      let open = false;
      return {
        handle: fh,
        async write(chunk) {
          if (!w) { w = await fh.createWritable({ keepExistingData: false }); open = true; }
          await w.write(chunk as Uint8Array<ArrayBuffer>);
        },
        async commit(entry) {
          try {
            if (open && w) await w.close();
            open = false;
            const mh = await dir.getFileHandle(`${id}.json`, { create: true });
            const mw = await mh.createWritable({ keepExistingData: false });
            await mw.write(JSON.stringify({ url: entry.url, size: entry.size, etag: entry.etag, storedAt: entry.storedAt }));
            await mw.close();
          } finally { writing.delete(id); }
        },
        async discard() {
          if (open && w) { open = false; try { await w.abort(); } catch { /* already closed */ } }
          await removeQuiet(`${id}.json`);
          await removeQuiet(`${id}.gguf`);
          writing.delete(id);
        },
      };
    },
  };
}

async function cacheApiBackend(): Promise<Backend | null> {
  const caches: CacheStorage | undefined = globalThis.caches;
  if (!caches || typeof caches.open !== 'function') return null;
  let c: Cache;
  try { c = await caches.open(CACHE_NAME); } catch { return null; }
  const entryOf = (url: string, r: Response): CacheEntry => ({
    url, size: Number(r.headers.get('x-kiln-size')), etag: r.headers.get('x-kiln-etag') || null,
    storedAt: Number(r.headers.get('x-kiln-stored') ?? 0), backend: 'cache-api',
  });
  return {
    kind: 'cache-api',
    async list() {
      const out: CacheEntry[] = [];
      for (const req of await c.keys()) {
        const r = await c.match(req);
        if (r) out.push(entryOf(req.url, r));
      }
      return out.sort((a, b) => a.storedAt - b.storedAt);
    },
    async get(url) {
      const r = await c.match(url);
      if (!r) return null;
      const entry = entryOf(url, r);
      const blob: Blob = await r.blob();
      if (blob.size !== entry.size) { await c.delete(url); return null; }
      return { entry, blob };
    },
    remove: (url) => c.delete(url),
    async clear() { for (const req of await c.keys()) await c.delete(req); },
    async begin(url) {
      // the Cache API cannot commit a stream later, so the bytes are kept
      // until verified and put in one go
      let parts: Uint8Array[] | null = [];
      return {
        async write(chunk) { parts?.push(chunk); },
        async commit(entry) {
          const body = new Blob(parts as BlobPart[]);
          parts = null;
          await c.put(url, new Response(body, {
            headers: {
              'content-type': 'application/octet-stream', 'content-length': String(entry.size),
              'x-kiln-size': String(entry.size), 'x-kiln-etag': entry.etag ?? '', 'x-kiln-stored': String(entry.storedAt),
            },
          }));
        },
        async discard() { parts = null; },
      };
    },
  };
}

let backendP: Promise<Backend | null> | null = null;
function backend(): Promise<Backend | null> {
  if (!backendP) backendP = (async () => (await opfsBackend()) ?? (await cacheApiBackend()))();
  return backendP;
}

/** @internal the package's model cache (kiln.cache) */
export const modelCache: ModelCache = {
  async list() { const b = await backend(); return b ? b.list() : []; },
  async delete(url) { const b = await backend(); return b ? b.remove(normalize(url)) : false; },
  async clear() { const b = await backend(); if (b) await b.clear(); },
  async backend() { return (await backend())?.kind ?? null; },
};

/* ------------------------------------------------------------ loading */

function isAbort(e: unknown, signal?: AbortSignal) {
  return !!signal?.aborted || e instanceof KilnAbortError || (e as { name?: unknown } | null)?.name === 'AbortError' || (e as { code?: unknown } | null)?.code === 'ABORTED';
}

/** @internal
 * loadModel(url, {cache}) — serve from the cache when the URL has an entry,
 * else download, loading and storing at once, and commit the entry when
 * the load succeeded with every byte.
 */
export async function loadModelCached<M>(engine: Loader<M>, url: string | URL, opts: CachedLoadOptions): Promise<M> {
  const href = normalize(url);
  const { signal, onProgress } = opts;
  const tell = (e: CacheEvent) => { try { opts.onCache?.(e); } catch { /* the caller's problem */ } };
  if (signal?.aborted) throw new KilnAbortError();
  const b = await backend();
  if (!b) {
    tell({ state: 'unavailable', reason: 'neither OPFS nor the Cache API is available here' });
    return engine.loadModel(href, { onProgress, signal });
  }

  const hit = await b.get(href);
  if (hit) {
    let fresh = true;
    if (opts.cache === 'revalidate') {
      try {
        const h = await fetch(href, { method: 'HEAD', signal, cache: 'no-store' });
        const size = Number(h.headers.get('content-length') ?? NaN);
        const etag = h.headers.get('etag');
        if (h.ok && ((Number.isFinite(size) && size !== hit.entry.size) || (etag && hit.entry.etag && etag !== hit.entry.etag))) fresh = false;
      } catch (e) {
        if (isAbort(e, signal)) throw new KilnAbortError();
        // offline: the entry is all there is
      }
    }
    if (fresh) {
      tell({ state: 'hit', entry: hit.entry });
      return engine.loadModel(hit.blob, { onProgress, signal });
    }
    tell({ state: 'stale', entry: hit.entry });
    await b.remove(href);
  }

  // OPFS: the engine's worker downloads, loads and writes the cache file
  // itself, so no chunk of the model passes through this (the page's) thread
  if (b.kind === 'opfs' && engine.loadModelStoring) {
    let writer: Writer | null = null;
    let refused = '';
    try { writer = await b.begin(href); } catch (e) { refused = `storage refused: ${errorText(e)}`; }
    if (writer?.handle) {
      let r: Awaited<ReturnType<NonNullable<Loader<M>['loadModelStoring']>>>;
      try {
        r = await engine.loadModelStoring(href, writer.handle, { signal, onProgress });
      } catch (e) {
        await writer.discard();
        if (isAbort(e, signal)) throw new KilnAbortError();
        throw e;
      }
      const s = r.stored;
      if (!s || s.error) {
        await writer.discard();
        tell({ state: 'not-stored', reason: s?.error ?? 'the engine did not store the download' });
      } else {
        await commitEntry(writer, { url: href, size: s.bytes, etag: s.etag, storedAt: Date.now(), backend: b.kind }, tell);
      }
      return r.model;
    }
    if (writer) await writer.discard();
    if (refused) {
      tell({ state: 'not-stored', reason: refused });
      return engine.loadModel(href, { onProgress, signal });
    }
  }

  let resp: Response;
  try {
    resp = await fetch(href, { signal, cache: 'no-store' });
  } catch (e) {
    if (isAbort(e, signal)) throw new KilnAbortError();
    throw new KilnError('BAD_SOURCE', `cannot fetch ${href}: ${errorText(e)}`);
  }
  if (!resp.ok || !resp.body) throw new KilnError('BAD_SOURCE', `cannot fetch ${href}: HTTP ${resp.status}`);
  const announced = Number(resp.headers.get('content-length') ?? NaN);
  const etag = resp.headers.get('etag');
  // where streams cannot be handed to a worker, the download is gathered
  // here and given to the engine as a Blob once complete
  const transferable = streamsTransferable();
  const [toEngine, toCache] = transferable ? resp.body.tee() : [null, resp.body];
  const held: Uint8Array[] | null = transferable ? null : [];
  let downloadError = '';

  let writer: Writer | null = null;
  let notStored = '';
  try { writer = await b.begin(href); } catch (e) { notStored = `storage refused: ${errorText(e)}`; }

  // progress from the download itself (finer than the engine's), never backwards
  let shown = 0;
  const report = (loaded: number, total: number) => {
    if (loaded > shown || loaded === total) { shown = Math.max(shown, loaded); onProgress?.({ loaded: shown, total }); }
  };
  let written = 0;
  const store = (async () => {
    const reader = toCache.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (writer) {
          try { await writer.write(value); } catch (e) {
            notStored = `storage failed: ${errorText(e)}`;
            const w = writer; writer = null; await w.discard();
          }
        }
        written += value.byteLength;
        held?.push(value);
        if (Number.isFinite(announced)) report(written, announced);
      }
      return true;
    } catch (e) {
      downloadError = errorText(e);
      return false; // the download failed or was aborted
    } finally {
      reader.releaseLock();
    }
  })();

  let model: M;
  try {
    let source: ReadableStream<Uint8Array> | Blob;
    if (toEngine) source = toEngine;
    else {
      if (!(await store)) throw signal?.aborted ? new KilnAbortError() : new KilnError('BAD_SOURCE', `cannot fetch ${href}: ${downloadError}`);
      source = new Blob(held as BlobPart[]);
      held!.length = 0;
    }
    model = await engine.loadModel(source, {
      size: Number.isFinite(announced) ? announced : undefined, signal,
      onProgress: (p) => report(p.loaded, p.total),
    });
  } catch (e) {
    try { await toCache.cancel(); } catch { /* locked or done */ }
    await store;
    if (writer) await (writer as Writer).discard();
    if (isAbort(e, signal)) throw new KilnAbortError();
    throw e;
  }
  const complete = await store;
  const w = writer as Writer | null;
  if (!w) {
    tell({ state: 'not-stored', reason: notStored || 'no storage' });
  } else if (!complete || (Number.isFinite(announced) && written !== announced)) {
    await w.discard();
    tell({ state: 'not-stored', reason: `the download ended at ${written} of ${announced} bytes` });
  } else {
    await commitEntry(w, { url: href, size: written, etag, storedAt: Date.now(), backend: b.kind }, tell);
  }
  return model;
}

/** a complete download becomes an entry (or is dropped when storage fails) */
async function commitEntry(w: Writer, entry: CacheEntry, tell: (e: CacheEvent) => void) {
  try {
    await w.commit(entry);
    tell({ state: 'stored', entry });
  } catch (e) {
    await w.discard();
    tell({ state: 'not-stored', reason: `storage failed: ${errorText(e)}` });
  }
}

let transferableStreams: boolean | null = null;
/** can a ReadableStream be transferred to a worker (Chromium, Firefox: yes; older Safari: no) */
function streamsTransferable(): boolean {
  if (transferableStreams === null) {
    try {
      const { port1, port2 } = new MessageChannel();
      const rs = new ReadableStream();
      port1.postMessage(rs, [rs as unknown as Transferable]);
      port1.close(); port2.close();
      transferableStreams = true;
    } catch {
      transferableStreams = false;
    }
  }
  return transferableStreams;
}
