/*
 * bytes.ts — loadModel() from bytes in memory (ArrayBuffer, typed array,
 * DataView, SharedArrayBuffer) without a whole second copy on the way.
 *
 * Posting the caller's buffer to the engine worker would clone it, and the
 * worker would copy the clone into wasm memory: three copies alive at the
 * peak. Instead the worker checks the header (sent alone, 8 bytes), sizes
 * the model buffer once (kw_model_alloc) and asks for the bytes ('fill'):
 *
 * - kiln-mt: wasm memory is a SharedArrayBuffer, so this thread writes the
 *   bytes straight into the model buffer, in slices with a turn of the event
 *   loop between them (the caller's thread never blocks for long), then
 *   says 'filled'. One copy.
 * - kiln-st: the bytes travel in transferred slices, at most two in flight
 *   (the worker acknowledges each one and hands its buffer back), so the
 *   peak is the caller's buffer, the model buffer and two slices.
 * - {transfer: true}: the caller's ArrayBuffer is moved (detached on this
 *   side) instead; kiln-st copies it once into wasm memory, kiln-mt fills
 *   from it as above.
 * - A SharedArrayBuffer source is shared with the worker, which copies it
 *   once.
 *
 * Header checks, the allocation and its errors stay in the worker, so a bad
 * file fails exactly as it does from any other source.
 */
import { KilnAbortError, KilnError, errorText } from './errors.js';
import type { Progress, Scheduler } from './scheduler.js';
import type { FillMsg, ModelSourceMsg } from './protocol.js';
import { nodeImport } from './assets.js';

/** a slice sent or written at a time */
const SLICE = 4 << 20;

/** @internal */
export interface BytesPlan {
  source: ModelSourceMsg;
  transfer: Transferable[];
  onFill?: (msg: FillMsg, live: () => boolean) => void;
}

const isShared = (b: unknown): b is SharedArrayBuffer => typeof SharedArrayBuffer !== 'undefined' && b instanceof SharedArrayBuffer;

/** @internal */
export function isBytes(source: unknown): source is ArrayBuffer | SharedArrayBuffer | ArrayBufferView {
  return source instanceof ArrayBuffer || isShared(source) || ArrayBuffer.isView(source);
}

function viewOf(source: ArrayBuffer | SharedArrayBuffer | ArrayBufferView): Uint8Array {
  try {
    if (ArrayBuffer.isView(source)) return new Uint8Array(source.buffer, source.byteOffset, source.byteLength);
    return new Uint8Array(source);
  } catch {
    // a detached buffer (transferred elsewhere) cannot even be viewed
    throw new KilnError('BAD_SOURCE', 'loadModel: the buffer is detached (it was transferred, e.g. by an earlier {transfer: true})');
  }
}

/** the buffer moved out of the caller's hands, or null when it cannot be (a Node pooled Buffer, ...) */
function detach(buf: ArrayBuffer): ArrayBuffer | null {
  if (typeof structuredClone !== 'function') return null;
  try { return structuredClone(buf, { transfer: [buf] }); } catch { return null; }
}

/** one turn of the event loop (setImmediate in Node; a message elsewhere, which is not clamped like setTimeout) */
let channel: MessageChannel | null = null;
const waiting: (() => void)[] = [];
function nextTask(): Promise<void> {
  if (typeof globalThis.setImmediate === 'function') return new Promise((r) => globalThis.setImmediate(r));
  if (typeof MessageChannel === 'function') {
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = () => waiting.shift()?.();
    }
    return new Promise((r) => { waiting.push(r); channel!.port2.postMessage(0); });
  }
  return new Promise((r) => setTimeout(r, 0));
}

/** @internal
 * How loadModel() sends these bytes: the worker's source description, what
 * to transfer with the request, and the handler of its 'fill' requests.
 */
export function planBytes(sched: Scheduler, source: ArrayBuffer | SharedArrayBuffer | ArrayBufferView, build: 'st' | 'mt',
  opts: { transfer?: boolean; signal?: AbortSignal; onProgress?: (p: Progress) => void }): BytesPlan {
  let view = viewOf(source);
  if (isShared(view.buffer)) {
    // shared, not cloned: the worker reads it in place
    return { source: { kind: 'bytes', buffer: view.buffer, byteOffset: view.byteOffset, byteLength: view.byteLength }, transfer: [] };
  }
  if (opts.transfer) {
    // an aborted load must not take the caller's buffer
    if (opts.signal?.aborted) throw new KilnAbortError();
    const { byteOffset, byteLength } = view; // a detached view reads 0 for both
    const moved = detach(view.buffer as ArrayBuffer);
    if (moved) {
      view = new Uint8Array(moved, byteOffset, byteLength);
      if (build === 'st') return { source: { kind: 'bytes', buffer: moved, byteOffset: view.byteOffset, byteLength: view.byteLength }, transfer: [moved] };
    }
  }
  const total = view.byteLength;
  const head = view.slice(0, 8);
  const src: ModelSourceMsg = { kind: 'fill', mode: build === 'mt' ? 'shared' : 'slices', byteLength: total, head: head.buffer };
  const report = (loaded: number) => {
    try { opts.onProgress?.({ loaded, total }); } catch { /* the caller's callback does not stop the load */ }
  };

  if (build === 'mt') {
    let started = false;
    const onFill = (msg: FillMsg, live: () => boolean) => {
      if (started || !('memory' in msg)) return;
      started = true;
      void (async () => {
        try {
          const heap = new Uint8Array(msg.memory, msg.ptr >>> 0, total);
          let last = 0;
          for (let off = 0; off < total;) {
            if (!live()) return; // aborted or closed: the worker frees the buffer
            const n = Math.min(SLICE, total - off);
            heap.set(view.subarray(off, off + n), off);
            off += n;
            if (off - last >= (1 << 20) && off < total) { last = off; report(off); }
            await nextTask();
          }
          if (live()) sched.direct({ t: 'filled', job: msg.id });
        } catch (e) {
          if (live()) sched.direct({ t: 'filled', job: msg.id, error: errorText(e) });
        }
      })();
    };
    return { source: src, transfer: [], onFill };
  }

  let sent = 0;
  // the worker sends each slice's buffer back with its acknowledgement: two
  // buffers go back and forth, no garbage per slice
  const spare: ArrayBuffer[] = [];
  const slice = Math.min(SLICE, total);
  const onFill = (msg: FillMsg, live: () => boolean) => {
    if (!('loaded' in msg)) return;
    const acked = Number(msg.loaded) || 0;
    if (msg.buffer instanceof ArrayBuffer && msg.buffer.byteLength === slice) spare.push(msg.buffer);
    try {
      while (sent < total && sent - acked < 2 * slice && live()) {
        const n = Math.min(SLICE, total - sent);
        const buf = spare.pop() ?? new ArrayBuffer(slice);
        new Uint8Array(buf, 0, n).set(view.subarray(sent, sent + n));
        sched.direct({ t: 'fillData', job: msg.id, buffer: buf, byteLength: n }, [buf]);
        sent += n;
      }
    } catch (e) {
      if (live()) sched.direct({ t: 'filled', job: msg.id, error: errorText(e) });
    }
  };
  return { source: src, transfer: [], onFill };
}

/**
 * @internal A file's bytes as a fresh copy, read on the page's side (loadVad's
 * and loadWhisper's models, LoRA adapters): bytes, a Blob, a URL, or a path in
 * Node. who: the caller's name for messages; a URL is read as it arrives
 * (onProgress per chunk, signal aborts), the other sources report once.
 */
export async function smallSourceBytes(source: unknown, who: string,
  opts: { onProgress?: (p: Progress) => void; signal?: AbortSignal } = {}): Promise<Uint8Array> {
  let bytes: Uint8Array | null = null;
  if (isBytes(source)) bytes = viewOf(source).slice();
  else if (typeof Blob !== 'undefined' && source instanceof Blob) bytes = new Uint8Array(await source.arrayBuffer());
  else if (typeof source === 'string' || source instanceof URL) {
    const s = String(source);
    const isNode = typeof process === 'object' && !!process.versions?.node;
    if (!(isNode && !/^(https?|data|blob):/i.test(s))) return download(s, who, opts);
    const fs = await nodeImport('node:fs/promises') as { readFile(p: string | URL): Promise<Uint8Array> };
    try { bytes = new Uint8Array(await fs.readFile(s.startsWith('file:') ? new URL(s) : s)); } catch (e) {
      throw new KilnError('BAD_SOURCE', `${who}: cannot read ${s}: ${e instanceof Error ? e.message : String(e)}`);
    }
  } else throw new KilnError('BAD_SOURCE', `${who}: the source must be a URL, a path, bytes or a Blob`);
  opts.onProgress?.({ loaded: bytes.byteLength, total: bytes.byteLength });
  return bytes;
}

/** a fetch read as it arrives: progress per chunk, the signal stops it */
async function download(url: string, who: string, opts: { onProgress?: (p: Progress) => void; signal?: AbortSignal }): Promise<Uint8Array> {
  let r: Response;
  try { r = await fetch(url, { signal: opts.signal }); } catch (e) {
    if (opts.signal?.aborted) throw new KilnAbortError(`${who} aborted`);
    throw new KilnError('BAD_SOURCE', `${who}: cannot fetch ${url}: ${errorText(e)}`);
  }
  if (!r.ok || !r.body) throw new KilnError('BAD_SOURCE', `${who}: ${url}: HTTP ${r.status}`);
  const total = Number(r.headers.get('content-length') ?? NaN);
  const parts: Uint8Array[] = [];
  let loaded = 0;
  const reader = r.body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      parts.push(value);
      loaded += value.byteLength;
      opts.onProgress?.({ loaded, total: Number.isFinite(total) ? total : loaded });
    }
  } catch (e) {
    if (opts.signal?.aborted) throw new KilnAbortError(`${who} aborted`);
    throw new KilnError('BAD_SOURCE', `${who}: ${url}: ${errorText(e)}`);
  }
  const out = new Uint8Array(loaded);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.byteLength; }
  return out;
}
