/*
 * kiln.ts — Kiln.create(), the tensor API and models, on the caller's thread.
 * All work happens in the engine worker (worker.ts); this side only queues
 * requests (scheduler.ts), so the caller never blocks.
 */
import { KilnError, errorText } from './errors.js';
import { Scheduler, type Port, type Progress } from './scheduler.js';
import { train as trainModel, type TrainOptions, type TrainedModel } from './train.js';
import { loadVad, type Vad, type VadSource } from './vad.js';
import { loadWhisper, type Whisper, type WhisperLoadOptions, type WhisperSource } from './whisper.js';
import { finetune, type FinetuneOptions, type FinetuneResult } from './finetune.js';
import { loadModelCached, modelCache, type CacheEvent, type ModelCache } from './cache.js';
import { backward, gradOf, makeOptim, zeroGrad, type BackwardOptions, type Optim } from './autograd.js';
import { isBytes, planBytes, smallSourceBytes } from './bytes.js';
import { engineWorkerUrl, filesUnder, nodeImport, packagedFiles, type EngineFiles } from './assets.js';
import type { FillMsg, MetadataValue, ModelSourceMsg, StoredMsg } from './protocol.js';
import { TextGen, type Session, type ChatMessage, type ChatOptions, type Completion, type GenerateOptions, type GenerationStats } from './generate.js';

export type Build = 'st' | 'mt';
/**
 * SIMD flavour of the engine: 'relaxed' adds relaxed SIMD (8-bit dot
 * products, fused multiply-add: faster q4_0/q8_0 mat-vec and f32 GEMM;
 * Chrome/Edge 114+, Node 22+, or Node 20 with --experimental-wasm-relaxed-simd),
 * 'simd128' is plain SIMD128 (every engine; the same results everywhere).
 */
export type Simd = 'relaxed' | 'simd128';
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';
export type DType = 'f32' | 'f16' | 'bf16' | 'f64' | 'i8' | 'i16' | 'i32' | 'i64'
  | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'q8_0' | 'q2_k' | 'q3_k' | 'q4_k' | 'q5_k' | 'q6_k';

/** GGUF / kiln type ids */
export const TYPE_IDS: Record<DType, number> = {
  f32: 0, f16: 1, q4_0: 2, q4_1: 3, q5_0: 6, q5_1: 7, q8_0: 8, q2_k: 10, q3_k: 11, q4_k: 12, q5_k: 13, q6_k: 14,
  i8: 24, i16: 25, i32: 26, i64: 27, f64: 28, bf16: 30,
};
const TYPE_NAMES: Record<number, DType> = Object.fromEntries(Object.entries(TYPE_IDS).map(([k, v]) => [v, k as DType]));

export type TensorData = Float32Array | Float64Array | Int32Array | Int16Array | Int8Array | Uint16Array | BigInt64Array | Uint8Array;

export interface KilnOptions {
  /** threads for compute (default: the machine's cores, in a browser less one for the page, at most 8); more than 1 needs kiln-mt */
  threads?: number;
  /**
   * a folder holding the engine builds as the package's wasm/dist/ does (st/, mt/, st-relaxed/, mt-relaxed/):
   * a URL, or a directory path in Node. Default: the files your bundler emitted (or the package's own when
   * unbundled). For a CDN, or a bundler that does not copy assets named by `new URL(…, import.meta.url)` (esbuild).
   */
  wasmUrl?: string | URL;
  /**
   * the engine worker script (the package's js/dist/worker.js), same origin as the page. Default: the
   * copy your bundler emitted (or the package's own). Needed with bundlers that do not copy it (esbuild).
   */
  workerUrl?: string | URL;
  logLevel?: LogLevel;
  /** force a build (tests); default: mt when threads are possible */
  build?: Build;
  /**
   * 'auto' (default): relaxed SIMD when the JS engine supports it, else
   * SIMD128. 'relaxed' fails where it is not supported; 'simd128' never uses
   * it. Relaxed SIMD's fused multiply-add rounds per CPU (fused on x86 with
   * FMA3 and on arm64), so f32 results can differ in the last bits between
   * machines; pick 'simd128' for results that are bit-identical everywhere.
   */
  simd?: 'auto' | Simd;
}

export interface KilnInfo {
  build: Build;
  /** the engine's SIMD flavour (see KilnOptions.simd) */
  simdFlavor: Simd;
  threads: number;
  simd: boolean;
  version: string;
  isa: string;
  /** ops this build has constructors for */
  ops: string[];
}

export interface MemoryStats { used: number; total: number; max: number; handles: number }

export interface LoraAdapter { source: string | URL | Blob | ArrayBuffer | ArrayBufferView; scale?: number }

export type ModelSource = string | URL | Blob | ArrayBuffer | SharedArrayBuffer | ArrayBufferView | ReadableStream<Uint8Array>;
export interface LoadOptions {
  onProgress?: (p: Progress) => void; signal?: AbortSignal;
  /** URLs in browsers: keep the file in the persistent model cache (cache.ts); 'revalidate' checks size/ETag with a HEAD first */
  cache?: boolean | 'revalidate'; onCache?: (e: CacheEvent) => void;
  /** a ReadableStream source: its length in bytes, when known */
  size?: number;
  /** text generation: load only the tokenizer (vocabulary-only GGUF files) */
  vocabOnly?: boolean;
  /** text generation: context length (default: the model's, kept within 512..4096) */
  nCtx?: number;
  /**
   * text generation: LoRA adapters in llama.cpp's GGUF format (as
   * llama.cpp's --lora / --lora-scaled and kiln-finetune write them), applied
   * in order, each at its scale (default 1): every adapted W x becomes
   * W x + scale * alpha / rank * B (A x). source: a URL, a path (Node), bytes
   * or a Blob. A file that does not fit the model fails the load (BAD_MODEL).
   */
  lora?: LoraAdapter[];
  /**
   * bytes sources (ArrayBuffer / typed array): move the caller's buffer to
   * the engine instead of copying it. The WHOLE underlying ArrayBuffer is
   * DETACHED on the caller's side (byteLength 0, unusable) as soon as
   * loadModel() is called, whether the load then succeeds or not. Without
   * it the buffer stays intact; kiln-mt then writes it straight into wasm
   * memory (one copy) and kiln-st sends it in slices (a few MB in flight),
   * so only kiln-st gains from it. Ignored for other sources, for a
   * SharedArrayBuffer (shared, never copied on the way) and for buffers that
   * cannot be transferred (e.g. Node's pooled small Buffers), which are
   * copied as without it.
   */
  transfer?: boolean;
}

const LEVELS: Record<LogLevel, number> = { debug: 1, info: 2, warn: 3, error: 4, silent: 5 };
const isNode = typeof process === 'object' && !!process.versions?.node && typeof globalThis.window === 'undefined';
let warnedSingleThread = false;

/* the smallest module with a relaxed-SIMD instruction
 * (i32x4.relaxed_dot_i8x16_i7x16_add_s): engines without the feature reject it */
const RELAXED_PROBE = new Uint8Array([0, 97, 115, 109, 1, 0, 0, 0, 1, 5, 1, 96, 0, 1, 123, 3, 2, 1, 0, 10, 61, 1, 59, 0,
  ...[0, 1, 2].flatMap(() => [253, 12, ...new Array(16).fill(0)]), 253, 147, 2, 11]);

/** whether this JS engine runs relaxed SIMD */
export function relaxedSimdSupported(): boolean {
  try { return WebAssembly.validate(RELAXED_PROBE); } catch { return false; }
}

function threadsPossible(): { ok: boolean; why: string } {
  if (isNode) return { ok: true, why: '' };
  if (typeof SharedArrayBuffer === 'undefined') return { ok: false, why: 'SharedArrayBuffer is not available' };
  if (globalThis.crossOriginIsolated !== true) return { ok: false, why: 'the page is not cross-origin isolated' };
  return { ok: true, why: '' };
}

async function defaultThreads(): Promise<number> {
  let n = 4;
  if (isNode) {
    const os = await nodeImport('node:os');
    n = typeof os.availableParallelism === 'function' ? os.availableParallelism() : os.cpus().length;
  } else if (typeof navigator !== 'undefined' && navigator.hardwareConcurrency) {
    // a page leaves one core to its own thread: with every core computing,
    // each of the page's tasks waits for the scheduler behind the engine's
    n = navigator.hardwareConcurrency - 1;
  }
  return Math.max(1, Math.min(8, n));
}

async function startWorker(workerUrl: string | URL | undefined): Promise<{ port: Port; listen: (fn: (m: any) => void, onError: (e: unknown) => void) => void }> {
  const url = workerUrl ? new URL(String(workerUrl), isNode ? `file://${process.cwd()}/` : globalThis.location?.href) : engineWorkerUrl();
  if (isNode) {
    const { Worker } = await nodeImport('node:worker_threads');
    const w = new Worker(url);
    // the worker keeps Node running while a job (a message with an id) awaits its reply, not when idle
    const waiting = new Set<number>();
    const track = () => { if (waiting.size) w.ref(); else w.unref(); };
    return {
      port: {
        post: (m: any, t) => { if (typeof m?.id === 'number') { waiting.add(m.id); track(); } w.postMessage(m, (t ?? []) as any); },
        terminate: () => { void w.terminate(); },
      },
      listen: (fn, onError) => {
        w.on('message', (m: any) => { if (m?.t === 'reply' && waiting.delete(m.id)) track(); fn(m); });
        w.on('error', onError);
        w.on('exit', (code: number) => onError(new Error(`engine worker exited (${code})`)));
        track();
      },
    };
  }
  const w = new Worker(url); // classic: it importScripts() emscripten's factory
  return {
    port: { post: (m, t) => w.postMessage(m, t ?? []), terminate: () => w.terminate() },
    listen: (fn, onError) => {
      w.onmessage = (ev) => fn(ev.data);
      w.onerror = (ev) => onError(ev);
    },
  };
}

/** a variant's files: under opts.wasmUrl when given, else the package's own (assets.ts) */
function variantFiles(wasmUrl: string | URL | undefined, variant: string): EngineFiles {
  if (!wasmUrl) return packagedFiles(variant);
  const s = String(wasmUrl);
  return filesUnder(new URL(s.endsWith('/') ? s : s + '/', isNode ? 'file:///' : globalThis.location?.href), variant);
}

let tensorIds = 0;

/** @internal how loadModel / loadWhisper hand a model file to the worker */
type SourcePlan = { source: ModelSourceMsg; transfer: Transferable[]; onFill?: (msg: FillMsg, live: () => boolean) => void };

export class Kiln {
  /** @internal */ readonly sched: Scheduler;
  private _info: KilnInfo;
  private registry: FinalizationRegistry<number> | null;
  private destroyed = false;
  /** the persistent model cache (OPFS, else the Cache API): list(), delete(url), clear() */
  readonly cache: ModelCache = modelCache;
  /** optimizers for tensors with requiresGrad: kiln.optim.sgd({lr}), kiln.optim.adamw({lr}) (autograd.ts) */
  readonly optim: Optim = makeOptim(this);
  /** @internal tensors with requiresGrad, by id (to mark the ones a backward pass reached) */
  readonly params = new Map<number, WeakRef<Tensor>>();

  private constructor(sched: Scheduler, info: KilnInfo) {
    this.sched = sched;
    this._info = info;
    // tensors the caller dropped without free() are freed when collected
    this.registry = typeof FinalizationRegistry === 'function'
      ? new FinalizationRegistry((id: number) => { this.params.delete(id); if (!this.destroyed) this.sched.send({ t: 'free', tensor: id }); })
      : null;
  }

  static async create(opts: KilnOptions = {}): Promise<Kiln> {
    const logLevel = LEVELS[opts.logLevel ?? 'warn'] ?? 3;
    let threads = opts.threads ?? await defaultThreads();
    if (!Number.isInteger(threads) || threads < 1 || threads > 64) throw new KilnError('INVALID_ARGUMENT', `threads must be an integer in 1..64, not ${threads}`);
    let build: Build = opts.build ?? 'mt';
    if (!opts.build) {
      const p = threadsPossible();
      if (!p.ok) {
        build = 'st';
        if (!warnedSingleThread && logLevel <= 3) {
          warnedSingleThread = true;
          console.warn(`kiln: running single-threaded (kiln-st) because ${p.why}. To enable threads, serve the page ` +
            `cross-origin isolated with the headers "Cross-Origin-Opener-Policy: same-origin" and ` +
            `"Cross-Origin-Embedder-Policy: require-corp" (or "credentialless").`);
        }
      }
    }
    if (build === 'st') threads = 1;
    const simdOpt = opts.simd ?? 'auto';
    if (simdOpt !== 'auto' && simdOpt !== 'relaxed' && simdOpt !== 'simd128') {
      throw new KilnError('INVALID_ARGUMENT', `simd must be 'auto', 'relaxed' or 'simd128', not ${String(simdOpt)}`);
    }
    const relaxedOk = relaxedSimdSupported();
    if (simdOpt === 'relaxed' && !relaxedOk) {
      throw new KilnError('UNSUPPORTED', 'simd: \'relaxed\' was asked for, but this JS engine does not support relaxed SIMD ' +
        '(Chrome/Edge 114+, Node 22+, or Node 20 with --experimental-wasm-relaxed-simd); use simd: \'auto\' or \'simd128\'');
    }
    const relaxed = simdOpt === 'relaxed' || (simdOpt === 'auto' && relaxedOk);
    // 'auto' falls back to the SIMD128 files when the relaxed ones are not
    // served (an older copy of wasm/dist); 'relaxed' does not
    const variants = relaxed ? [`${build}-relaxed`, ...(simdOpt === 'auto' ? [build] : [])] : [build];
    if (!import.meta.url && !(opts.workerUrl && opts.wasmUrl)) {
      // e.g. esbuild's default IIFE output, where import.meta is empty
      throw new KilnError('BAD_SOURCE', 'kiln-ml cannot find its files: import.meta.url is empty in this bundle (a classic/IIFE ' +
        'output format?). Bundle as an ES module (esbuild: --format=esm), or pass workerUrl and wasmUrl.');
    }
    const { port, listen } = await startWorker(opts.workerUrl);
    const sched = new Scheduler(port);
    listen((m) => sched.receive(m), (e: unknown) => {
      sched.fail(new KilnError('ENGINE_CRASHED', `the engine worker failed: ${errorText(e)}`));
    });
    // st: the abort word lives in its own shared buffer when one can exist
    const abortSab = build === 'st' && typeof SharedArrayBuffer !== 'undefined' && (isNode || globalThis.crossOriginIsolated)
      ? new SharedArrayBuffer(4) : null;
    const r = await sched.job({ t: 'init', build, threads, logLevel, abortSab,
      variants: variants.map((v) => ({ name: `kiln-${v}`, files: variantFiles(opts.wasmUrl, v) })),
      wasmUrlGiven: !!opts.wasmUrl })
      .catch((e) => { port.terminate(); throw e; });
    if (r.abortMemory) sched.setAbortWord(new Int32Array(r.abortMemory, r.abortPtr, 1));
    else if (abortSab) sched.setAbortWord(new Int32Array(abortSab));
    return new Kiln(sched, r.info);
  }

  /** build (st/mt), threads, SIMD, version */
  info(): KilnInfo { return { ...this._info, ops: [...this._info.ops] }; }

  /** wasm heap: bytes in use by allocations, and reserved (memory grows on demand up to max) */
  memory(): Promise<MemoryStats> { return this.sched.job({ t: 'memory' }); }

  /**
   * a tensor holding a copy of data; shape is ggml's order: shape[0] is the
   * innermost (contiguous) dimension. The third argument is the type, or
   * options: `{type, requiresGrad}` (requiresGrad: a trainable f32 leaf,
   * see backward() / grad / kiln.optim).
   */
  tensor(data: TensorData | number[], shape?: number[], typeOrOptions?: DType | TensorOptions): Tensor {
    const o: TensorOptions = typeof typeOrOptions === 'object' && typeOrOptions !== null ? typeOrOptions : { type: typeOrOptions };
    const type = o.type;
    const arr = Array.isArray(data) ? new Float32Array(data) : data;
    const out = this.newTensor(!!o.requiresGrad);
    if (o.requiresGrad) {
      out.isParam = true;
      this.params.set(out.id, new WeakRef(out));
    }
    if (!ArrayBuffer.isView(arr)) {
      this.sched.send({ t: 'tensor', out: out.id, type: -1, shape: [1], buffer: new ArrayBuffer(0), byteOffset: 0, byteLength: 0 });
      return out;
    }
    const t = type ?? inferType(arr);
    const sh = Array.isArray(shape) ? shape.map(Number) : shape === undefined ? [arr.length] : [NaN];
    if (!(t in TYPE_IDS)) {
      this.sched.send({ t: 'tensor', out: out.id, type: -1, shape: sh, buffer: new ArrayBuffer(0), byteOffset: 0, byteLength: 0 });
      return out;
    }
    const view = new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
    const copy = view.slice(); // the caller keeps its array; the copy is transferred
    this.sched.send({ t: 'tensor', out: out.id, type: TYPE_IDS[t], shape: sh, buffer: copy.buffer, byteOffset: 0, byteLength: copy.byteLength,
      param: !!o.requiresGrad }, [copy.buffer]);
    return out;
  }

  /** a trainable f32 tensor: kiln.tensor(data, shape, {requiresGrad: true}) */
  param(data: Float32Array | number[], shape?: number[]): Tensor {
    return this.tensor(data, shape, { type: 'f32', requiresGrad: true });
  }

  /** set the gradients of these tensors (with requiresGrad) to zero */
  zeroGrad(params: Tensor[]): void { zeroGrad(this, params, 'zeroGrad'); }

  /** F32 [ceil((stop-start)/step)] */
  arange(start: number, stop: number, step = 1): Tensor { return this.op('arange', [], [start, stop, step]); }

  /** load a GGUF model: URL (streamed), Blob/File, bytes, or a file path in Node */
  async loadModel(source: ModelSource, opts: LoadOptions = {}): Promise<Model> {
    const transfer: Transferable[] = [];
    if (opts.cache && !isNode && (source instanceof URL || typeof source === 'string')) {
      const { cache, onCache, ...rest } = opts;
      return loadModelCached<Model>(this, source, { ...rest, cache, onCache });
    }
    let lora: { bytes: ArrayBuffer; scale: number }[] | undefined;
    if (opts.lora !== undefined) {
      if (!Array.isArray(opts.lora)) throw new KilnError('INVALID_ARGUMENT', 'loadModel: lora must be an array of {source, scale}');
      if (opts.lora.length && opts.vocabOnly) throw new KilnError('INVALID_ARGUMENT', 'loadModel: lora adapters need the weights (not vocabOnly)');
      lora = [];
      for (const [i, l] of opts.lora.entries()) {
        const scale = l?.scale ?? 1;
        if (typeof scale !== 'number' || !Number.isFinite(scale)) {
          throw new KilnError('INVALID_ARGUMENT', `loadModel: lora[${i}].scale must be a finite number, not ${String(scale)}`);
        }
        const bytes = await smallSourceBytes(l?.source, `loadModel: lora[${i}]`);
        lora.push({ bytes: bytes.buffer as ArrayBuffer, scale });
        transfer.push(bytes.buffer as ArrayBuffer);
      }
    }
    if (opts.nCtx !== undefined && !(Number.isInteger(opts.nCtx) && opts.nCtx >= 0 && opts.nCtx < 2 ** 31)) {
      throw new KilnError('INVALID_ARGUMENT', `loadModel: nCtx must be an integer >= 0, not ${String(opts.nCtx)}`);
    }
    // a source that needs no await queues its job now, in call order (a job
    // started after loadModel waits behind it, and can be aborted while queued)
    const planned = this.modelSource(source, opts, 'loadModel');
    const plan = planned instanceof Promise ? await planned : planned;
    transfer.push(...plan.transfer);
    const r = await this.sched.job({ t: 'load', source: plan.source, vocabOnly: !!opts.vocabOnly, nCtx: opts.nCtx ?? 0, lora },
      { signal: opts.signal, onProgress: opts.onProgress, transfer, onFill: plan.onFill });
    return new Model(this, r.modelId, r);
  }

  /** @internal
   * How the worker gets a model file's bytes (loadModel, loadWhisper): a
   * stream, Blob, URL or path is read in the worker straight into wasm
   * memory; bytes go through bytes.ts (no whole second copy).
   */
  modelSource(source: ModelSource, opts: { size?: number; transfer?: boolean; signal?: AbortSignal; onProgress?: (p: Progress) => void }, who: string):
    SourcePlan | Promise<SourcePlan> {
    if (typeof ReadableStream !== 'undefined' && source instanceof ReadableStream) {
      return { source: { kind: 'stream', stream: source, size: opts.size ?? NaN }, transfer: [source as unknown as Transferable] };
    }
    if (typeof Blob !== 'undefined' && source instanceof Blob) return { source: { kind: 'blob', blob: source }, transfer: [] };
    // bytes.ts: no whole second copy on the way to wasm memory
    if (isBytes(source)) return planBytes(this.sched, source, this._info.build, opts);
    let src: ModelSourceMsg;
    if (source instanceof URL || (typeof source === 'string' && /^(https?|blob|data):/i.test(source))) src = { kind: 'url', url: String(source) };
    else if (typeof source === 'string' && /^file:/i.test(source) && isNode) src = { kind: 'path', path: decodeURIComponent(new URL(source).pathname) };
    else if (typeof source === 'string') {
      if (isNode) {
        // a relative path resolves against the process' directory (node:path, imported on use)
        return nodeImport('node:path').then((path) => ({ source: { kind: 'path' as const, path: path.resolve(source) }, transfer: [] }));
      } else {
        src = { kind: 'url', url: new URL(source, globalThis.location?.href).href };
      }
    } else throw new KilnError('BAD_SOURCE', `${who}: the source must be a URL, a Blob, bytes or a path`);
    return { source: src, transfer: [] };
  }

  /** @internal cache.ts: loadModel(url) whose worker also writes the downloaded bytes to an OPFS file */
  async loadModelStoring(url: string, store: FileSystemFileHandle, opts: { onProgress?: (p: Progress) => void; signal?: AbortSignal }): Promise<{ model: Model; stored: StoredMsg | null }> {
    const r = await this.sched.job({ t: 'load', source: { kind: 'url', url, store }, vocabOnly: false, nCtx: 0 }, { signal: opts.signal, onProgress: opts.onProgress });
    return { model: new Model(this, r.modelId, r), stored: r.stored ?? null };
  }

  /** train an example model (Fashion-MNIST FC/CNN) in the engine worker (train.ts) */
  train(opts: TrainOptions): Promise<TrainedModel> { return trainModel(this, opts); }

  /** Silero VAD from whisper.cpp's model file, run in the engine worker (vad.ts) */
  loadVad(source: VadSource): Promise<Vad> { return loadVad(this, source); }

  /** Whisper speech to text from whisper.cpp's model files, run in the engine worker (whisper.ts) */
  loadWhisper(source: WhisperSource, opts?: WhisperLoadOptions): Promise<Whisper> { return loadWhisper(this, source, opts); }

  /** stop the engine; everything pending fails with ENGINE_CLOSED */
  destroy() {
    if (this.destroyed) return;
    this.destroyed = true;
    this.sched.close(new KilnError('ENGINE_CLOSED', 'the engine was destroyed'));
  }

  /** @internal */
  newTensor(requiresGrad = false): Tensor {
    const t = new Tensor(this, ++tensorIds, requiresGrad);
    this.registry?.register(t, t.id, t);
    return t;
  }
  /** @internal */
  forget(t: Tensor) { this.registry?.unregister(t); this.params.delete(t.id); }

  /** @internal generic op: inputs are tensors (undefined = optional and absent) */
  op(name: string, inputs: (Tensor | undefined)[], params: number[] = []): Tensor {
    // as in PyTorch, a result requires gradients when an input does
    const out = this.newTensor(inputs.some((x) => x instanceof Tensor && x.kiln === this && x.requiresGrad));
    const ids = inputs.map((x) => {
      if (x === undefined) return 0;
      if (!(x instanceof Tensor) || x.kiln !== this) return -1;
      return x.id;
    });
    this.sched.send({ t: 'op', out: out.id, op: name, inputs: ids, params });
    return out;
  }
}

function inferType(a: TensorData): DType {
  if (a instanceof Float32Array) return 'f32';
  if (a instanceof Float64Array) return 'f64';
  if (a instanceof Int32Array) return 'i32';
  if (a instanceof Int16Array) return 'i16';
  if (a instanceof Int8Array) return 'i8';
  if (a instanceof Uint16Array) return 'f16';
  if (typeof BigInt64Array !== 'undefined' && a instanceof BigInt64Array) return 'i64';
  return 'invalid' as DType;
}

function typedFor(type: number, buf: ArrayBuffer): TensorData {
  switch (TYPE_NAMES[type]) {
    case 'f32': return new Float32Array(buf);
    case 'f64': return new Float64Array(buf);
    case 'i32': return new Int32Array(buf);
    case 'i16': return new Int16Array(buf);
    case 'i8': return new Int8Array(buf);
    case 'i64': return new BigInt64Array(buf);
    case 'f16': case 'bf16': return new Uint16Array(buf);
    default: return new Uint8Array(buf);
  }
}

export interface TensorInfo { shape: number[]; type: DType; nbytes: number }

export interface TensorOptions {
  /** the element type (default: from the array: Float32Array -> f32, ...) */
  type?: DType;
  /** a trainable leaf: backward() computes gradients for it (f32 only) */
  requiresGrad?: boolean;
}

export interface RopeOptions {
  mode?: number; nCtxOrig?: number; freqBase?: number; freqScale?: number; extFactor?: number;
  attnFactor?: number; betaFast?: number; betaSlow?: number; freqFactors?: Tensor;
}

/**
 * A node of a lazy graph. Ops return new tensors at once; nothing runs
 * until data(). Errors (bad shapes, freed inputs) surface as a rejected
 * KilnError from data() / info() / ready().
 */
export class Tensor {
  /** @internal */ readonly kiln: Kiln;
  /** @internal */ readonly id: number;
  /** @internal */ freed = false;
  /**
   * true for tensors made with requiresGrad and for every tensor computed
   * from one: backward() can be called on such a (scalar) tensor
   */
  readonly requiresGrad: boolean;
  /** @internal a leaf made with requiresGrad */ isParam = false;
  /** @internal a backward pass has reached it */ hasGrad = false;
  /** @internal */ gradTensor: Tensor | null = null;

  /** @internal */
  constructor(kiln: Kiln, id: number, requiresGrad = false) { this.kiln = kiln; this.id = id; this.requiresGrad = requiresGrad; }

  /** compute (if needed) and read the values, in logical order (shape[0] fastest) */
  async data(opts: { signal?: AbortSignal } = {}): Promise<TensorData> {
    const r = await this.kiln.sched.job({ t: 'data', tensor: this.id }, { signal: opts.signal });
    return typedFor(r.type, r.buffer);
  }
  /** shape and type, once built (rejects with the op's error) */
  async info(): Promise<TensorInfo> {
    const r = await this.kiln.sched.job({ t: 'ready', tensor: this.id });
    return { shape: r.shape, type: TYPE_NAMES[r.type] ?? (String(r.type) as DType), nbytes: r.nbytes };
  }
  async ready(): Promise<void> { await this.info(); }
  /** release the tensor (tensors built from it keep what they need) */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.kiln.forget(this);
    this.kiln.sched.send({ t: 'free', tensor: this.id });
  }

  /**
   * Backpropagation from this tensor, which must be a scalar (one f32
   * element): adds d(this)/d(p) into p.grad for every tensor p with
   * requiresGrad that it depends on. Gradients ACCUMULATE over calls (as in
   * PyTorch) until zeroGrad(); calling it again on the same loss is allowed
   * and adds again. Rejects with a KilnError for a non-scalar or non-f32
   * loss, a loss that depends on no tensor with requiresGrad, a freed
   * tensor, or an op on the path without a backward rule (the message names
   * the op; code UNSUPPORTED). The engine stays usable after any of these.
   */
  backward(opts: BackwardOptions = {}): Promise<void> { return backward(this, opts); }
  /**
   * The accumulated gradient of a tensor with requiresGrad: null until a
   * backward pass has reached it, then a tensor of the same shape that reads
   * the gradient as it is when computed (data()). Always null for tensors
   * without requiresGrad and for results of ops (only leaves keep gradients).
   */
  get grad(): Tensor | null { return this.isParam ? gradOf(this) : null; }
  /** set this tensor's accumulated gradient to zero (requiresGrad tensors only) */
  zeroGrad(): void { zeroGrad(this.kiln, [this], 'zeroGrad'); }

  private u(name: string) { return this.kiln.op(name, [this]); }
  private b(name: string, o: Tensor) { return this.kiln.op(name, [this, o]); }

  // ---- op methods: generated from KW_OPS (wasm/kiln_wasm_ops.c) by scripts/gen-tensor-ops.mjs; edit there
  add(b: Tensor) { return this.b('add', b); }
  sub(b: Tensor) { return this.b('sub', b); }
  mul(b: Tensor) { return this.b('mul', b); }
  div(b: Tensor) { return this.b('div', b); }
  /** ggml mul_mat: this [k, n], b [k, m] -> [n, m] */
  matmul(b: Tensor) { return this.b('matmul', b); }
  outProd(b: Tensor) { return this.b('outProd', b); }
  getRows(rows: Tensor) { return this.b('getRows', rows); }
  repeat(like: Tensor) { return this.b('repeat', like); }
  cpy(dst: Tensor) { return this.b('cpy', dst); }
  concat(b: Tensor, dim: number) { return this.kiln.op('concat', [this, b], [dim]); }
  scale(s: number) { return this.kiln.op('scale', [this], [s]); }
  softmax() { return this.u('softmax'); }
  softmaxExt(mask: Tensor | undefined, scale = 1, maxBias = 0) { return this.kiln.op('softmaxExt', [this, mask], [scale, maxBias]); }
  norm(eps = 1e-5) { return this.kiln.op('norm', [this], [eps]); }
  rmsNorm(eps = 1e-5) { return this.kiln.op('rmsNorm', [this], [eps]); }
  groupNorm(nGroups: number, eps = 1e-6) { return this.kiln.op('groupNorm', [this], [nGroups, eps]); }
  /** rotary embedding; pos: I32 [shape[2]] */
  rope(pos: Tensor, nDims: number, o: RopeOptions = {}) { return this.kiln.op('rope', [this, pos, o.freqFactors], [nDims, o.mode ?? 0, o.nCtxOrig ?? 0, o.freqBase ?? 10000, o.freqScale ?? 1, o.extFactor ?? 0, o.attnFactor ?? 1, o.betaFast ?? 32, o.betaSlow ?? 1]); }
  reshape(shape: number[]) {
    if (!Array.isArray(shape) || shape.length < 1 || shape.length > 4) return this.kiln.op('reshape', [this], [NaN, 1, 1, 1]);
    return this.kiln.op('reshape', [this], [1, 1, 1, 1].map((d, i) => shape[i] ?? d));
  }
  permute(a0: number, a1: number, a2 = 2, a3 = 3) { return this.kiln.op('permute', [this], [a0, a1, a2, a3]); }
  transpose() { return this.u('transpose'); }
  cont() { return this.u('cont'); }
  cast(type: DType) { return this.kiln.op('cast', [this], [TYPE_IDS[type] ?? -1]); }
  view(shape: number[], strides: number[], offset = 0) {
    const ne = [1, 1, 1, 1].map((d, i) => shape[i] ?? d);
    const nb = [0, 0, 0].map((d, i) => strides[i] ?? d);
    return this.kiln.op('view', [this], [...ne, ...nb, offset]);
  }
  /** mean over rows of -Σ targets * log_softmax(this); this: logits [classes, rows], targets: probabilities of the same shape -> f32 [1] */
  crossEntropyLoss(targets: Tensor) { return this.b('crossEntropyLoss', targets); }
  sum() { return this.u('sum'); }
  sumRows() { return this.u('sumRows'); }
  mean() { return this.u('mean'); }
  argmax() { return this.u('argmax'); }
  sqr() { return this.u('sqr'); }
  sqrt() { return this.u('sqrt'); }
  log() { return this.u('log'); }
  sin() { return this.u('sin'); }
  cos() { return this.u('cos'); }
  exp() { return this.u('exp'); }
  abs() { return this.u('abs'); }
  sgn() { return this.u('sgn'); }
  neg() { return this.u('neg'); }
  step() { return this.u('step'); }
  tanh() { return this.u('tanh'); }
  elu() { return this.u('elu'); }
  relu() { return this.u('relu'); }
  sigmoid() { return this.u('sigmoid'); }
  gelu() { return this.u('gelu'); }
  geluQuick() { return this.u('geluQuick'); }
  silu() { return this.u('silu'); }
  hardswish() { return this.u('hardswish'); }
  hardsigmoid() { return this.u('hardsigmoid'); }
  leakyRelu(slope = 0.01) { return this.kiln.op('leakyRelu', [this], [slope]); }
  clamp(min: number, max: number) { return this.kiln.op('clamp', [this], [min, max]); }
  diagMaskInf(nPast = 0) { return this.kiln.op('diagMaskInf', [this], [nPast]); }
  diagMaskZero(nPast = 0) { return this.kiln.op('diagMaskZero', [this], [nPast]); }
  argsort(descending = false) { return this.kiln.op('argsort', [this], [descending ? 1 : 0]); }
  topK(k: number) { return this.kiln.op('topK', [this], [k]); }
  pad(p0: number, p1 = 0, p2 = 0, p3 = 0) { return this.kiln.op('pad', [this], [p0, p1, p2, p3]); }
  diag() { return this.u('diag'); }
  // ---- end of the generated op methods
}

export type { MetadataValue };
/** pooling of Model.embed: llama.cpp's pooling types */
export type Pooling = 'none' | 'mean' | 'cls' | 'last';
const POOLING: Pooling[] = ['none', 'mean', 'cls', 'last'];
export interface EmbedOptions { pooling?: Pooling; normalize?: boolean; signal?: AbortSignal }
export interface ModelInfo { size: number; version: number; nKv: number; tensors: string[]; metadata: Record<string, MetadataValue> }

/** a GGUF model held in wasm memory */
export class Model {
  readonly size: number;
  readonly version: number;
  readonly nKv: number;
  readonly tensorNames: string[];
  /** the GGUF key/values: scalars and strings as values, arrays by element type and length */
  readonly metadata: Record<string, MetadataValue>;
  private freed = false;
  private gen: TextGen;

  /** @internal */
  constructor(private kiln: Kiln, private id: number, r: ModelInfo) {
    this.gen = new TextGen(kiln.sched, id);
    this.size = r.size;
    this.version = r.version;
    this.nKv = r.nKv;
    this.tensorNames = r.tensors;
    this.metadata = r.metadata;
  }

  /** a weight of the model as a tensor (it keeps the model's memory alive) */
  tensor(name: string): Tensor {
    const out = this.kiln.newTensor();
    this.kiln.sched.send({ t: 'modelTensor', out: out.id, model: this.id, name: String(name) });
    return out;
  }

  /* text generation (generate.ts) */
  /** text -> token ids (BOS added as the vocabulary asks unless addBos is false) */
  tokenize(text: string, opts: { addBos?: boolean; special?: boolean } = {}): Promise<number[]> { return this.gen.tokenize(text, opts); }
  /** token ids -> text */
  detokenize(ids: ArrayLike<number>, opts: { removeSpecial?: boolean; unparseSpecial?: boolean } = {}): Promise<string> { return this.gen.detokenize(ids, opts); }
  /** one token's text */
  tokenToPiece(token: number, opts: { special?: boolean } = {}): Promise<string> { return this.gen.tokenToPiece(token, opts); }
  /** a GGUF metadata value as text (null when absent) */
  meta(key: string): Promise<string | null> { return this.gen.meta(key); }
  /** the generated text (not the prompt) in pieces as they come; never splits a character */
  generate(prompt: string | number[], opts: GenerateOptions = {}): AsyncGenerator<string, Completion | undefined> { return this.gen.generate(prompt, opts); }
  /** the generated text at once, its tokens and speed */
  complete(prompt: string | number[], opts: GenerateOptions = {}): Promise<Completion> { return this.gen.complete(prompt, opts); }
  /** reply to messages through the model's tokenizer.chat_template (ChatML when it has none) */
  chat(messages: ChatMessage[], opts: ChatOptions = {}): Promise<Completion> { return this.gen.chat(messages, opts); }
  /** the chat template applied to messages, as chat() would feed the model */
  applyChatTemplate(messages: ChatMessage[], template?: string) { return this.gen.applyChatTemplate(messages, template); }
  /** stats of the last finished generate() / complete() */
  get lastStats(): GenerationStats | null { return this.gen.lastStats; }
  /** Embeddings as llama.cpp computes them (encoders: bert, nomic-bert;
   * decoders: their final-norm hidden states), one Float32Array per text
   * (an array of them for an array of texts). pooling: the file's
   * pooling_type by default ('none' gives every token's vector, one after
   * the other); normalize: divide by the L2 norm (default true). */
  embed(text: string, opts?: EmbedOptions): Promise<Float32Array>;
  embed(texts: string[], opts?: EmbedOptions): Promise<Float32Array[]>;
  async embed(input: string | string[], opts: EmbedOptions = {}): Promise<Float32Array | Float32Array[]> {
    const many = Array.isArray(input);
    const texts = many ? input : [input];
    if (!texts.every((t) => typeof t === 'string')) throw new KilnError('INVALID_ARGUMENT', 'embed: the input must be a string or an array of strings');
    const pool = opts.pooling === undefined ? -1 : POOLING.indexOf(opts.pooling);
    if (pool < -1 || (opts.pooling !== undefined && pool < 0)) {
      throw new KilnError('INVALID_ARGUMENT', `embed: pooling '${String(opts.pooling)}' (none, mean, cls or last)`);
    }
    const r = await this.kiln.sched.job({ t: 'embed', model: this.id, texts, pooling: pool, normalize: opts.normalize !== false }, { signal: opts.signal });
    const out: Float32Array[] = [];
    let o = 0;
    for (const n of r.counts) { out.push(new Float32Array(r.buffer, o * 4, n)); o += n; }
    return many ? out : out[0];
  }

  /** An independent conversation: its own KV cache over the model's weights
   * (generate/complete/chat as on the model, which use a default session).
   * Each session's cache costs 2 x layers x nCtx x KV width x 2 bytes (F16),
   * taken from the wasm heap (kiln.memory().used) at its first generation;
   * free() gives it back. */
  session(): Session { return this.gen.newSession(); }

  /** LoRA fine-tuning in the engine worker (finetune.ts): the adapter as GGUF bytes that llama.cpp loads */
  finetune(opts: FinetuneOptions): Promise<FinetuneResult> {
    if (this.freed) return Promise.reject(new KilnError('INVALID_HANDLE', 'the model was freed'));
    return finetune(this.kiln, this.id, opts);
  }

  /** return the model's memory (tensors taken from it keep it until they are freed) */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.kiln.sched.send({ t: 'freeModel', model: this.id });
  }
}
