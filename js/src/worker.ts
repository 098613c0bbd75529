/*
 * worker.ts — the engine's thread. Owns the wasm module; everything the
 * caller asks for arrives as a message, in order.
 *
 * This file is a classic script (no import/export): browsers load it as a
 * classic Web Worker so that importScripts() can load emscripten's factory,
 * and Node loads it with worker_threads (as ESM; a script is valid there
 * too) and requires the factory through createRequire.
 *
 * The messages in and out, and what each request's reply carries, are the
 * types of protocol.ts (read here with import() type queries, which keep
 * this file a script).
 */

type ToWorker = import('./protocol.js').ToWorker;
type FromWorker = import('./protocol.js').FromWorker;
type RequestMsg<K extends import('./protocol.js').RequestKind = import('./protocol.js').RequestKind> = import('./protocol.js').RequestMsg<K>;
type ReplyOf<K extends import('./protocol.js').RequestKind> = import('./protocol.js').ReplyOf<K>;
type ControlMsg = import('./protocol.js').ControlMsg;
type MetadataValue = import('./protocol.js').MetadataValue;
type StoredMsg = import('./protocol.js').StoredMsg;
type ModelSourceMsg = import('./protocol.js').ModelSourceMsg;
type KilnErrorCode = import('./errors.js').KilnErrorCode;
type EngineFiles = import('./protocol.js').EngineFiles;
type StopReason = import('./protocol.js').StopReason;
type TokenLogprob = import('./protocol.js').TokenLogprob;
type VadRequestKind = import('./protocol.js').VadRequestKind;
type WhisperRequestKind = import('./protocol.js').WhisperRequestKind;
type WhisperSegmentMsg = import('./protocol.js').WhisperSegmentMsg;
type FinetuneProgressMsg = import('./protocol.js').FinetuneProgressMsg;

/* Node, where the worker runs under worker_threads: only what is used */
declare const process: { versions?: { node?: string } } | undefined;
interface NodeFileHandle {
  stat(): Promise<{ size: number }>;
  read(buf: Uint8Array, off: number, len: number, pos: number): Promise<{ bytesRead: number }>;
  close(): Promise<void>;
}
interface NodeFs { readFileSync(p: string): Uint8Array; promises: { open(p: string, flags: string): Promise<NodeFileHandle> } }
interface NodePath { join(...parts: string[]): string }
interface NodeModule { createRequire(p: string): (id: string) => unknown }
interface NodeUrl { fileURLToPath(u: string): string }
interface NodePort { postMessage(m: FromWorker, t?: Transferable[]): void; on(ev: 'message', fn: (m: ToWorker) => void): void }

/* The emscripten module: the kw_* exports of wasm/ take and return numbers
 * (handles, sizes, wasm addresses, status codes), plus the runtime helpers
 * the build exports. */
interface KilnModule {
  [fn: `_kw_${string}`]: (...args: number[]) => number;
  kilnMemory(): WebAssembly.Memory;
  kilnAbortWord?: () => number;
  /* a running transcription's hooks (wasm/library.js) */
  kilnWhisperSegment?: (i: number) => void;
  kilnWhisperProgress?: (percent: number) => void;
  UTF8ToString(ptr: number): string;
  stringToUTF8(s: string, ptr: number, max: number): void;
  lengthBytesUTF8(s: string): number;
}
type KilnFactory = (opts: object) => Promise<KilnModule>;

(function () {
  class WErr extends Error {
    code: KilnErrorCode;
    constructor(code: KilnErrorCode, message: string) { super(message); this.code = code; }
  }

  const isNode = typeof process === 'object' && !!process?.versions?.node && typeof importScripts !== 'function';
  let post: (msg: FromWorker, transfer?: Transferable[]) => void;
  let onMessage: (fn: (msg: ToWorker) => void) => void;

  // set by init before any other request runs
  let M: KilnModule = null as unknown as KilnModule;
  let crashed: string | null = null;
  let abortWord: Int32Array | null = null; // st: separate SAB; mt: inside wasm memory
  const aborted = new Set<number>();       // async jobs (loads) cancelled by message
  const cancelers = new Map<number, () => void>(); // interrupt a load waiting on its source
  const tensors = new Map<number, number | WErr>(); // client id -> handle or build error
  const models = new Map<number, number>();
  const modelOpts = new Map<number, { vocabOnly: boolean; nCtx: number; lora?: { bytes: Uint8Array; scale: number }[] }>();
  const llms = new Map<number, number>(); // model id -> kw_llm handle of its default session (generate.ts)
  const sessions = new Map<number, { model: number; g: number }>(); // session id -> its own kw_llm handle
  // the op table of wasm/kiln_wasm_ops.c (KW_OPS): index, inputs (t/o), params (i/f/d)
  const ops = new Map<string, { index: number; inputs: string; params: string }>();
  let opArgs = 0; // scratch in wasm memory: 8 input handles, then 16 parameters
  let logLevel = 2;

  const mem = (): ArrayBuffer => M.kilnMemory().buffer;
  const u8 = (ptr: number, n: number) => new Uint8Array(mem(), ptr >>> 0, n);
  const lastError = (): string => M.UTF8ToString(M._kw_last_error());
  // the error code names come from the engine (kw_code_name, wasm/kiln_wasm.c)
  const codeOf = (rc: number) => M.UTF8ToString(M._kw_code_name(rc)) as KilnErrorCode;
  const fail = (rc: number): never => { throw new WErr(codeOf(rc), lastError() || `error ${rc}`); };
  // a job stops when the caller aborted it: by message, or through the shared abort word
  const isAborted = (id: number) => aborted.has(id) || (abortWord !== null && Atomics.load(abortWord, 0) === id);
  const check = (rc: number): number => (rc < 0 ? fail(rc) : rc);

  function guard<T>(fn: () => T): T {
    if (crashed) throw new WErr('ENGINE_CRASHED', crashed);
    try {
      return fn();
    } catch (e) {
      if (e instanceof WErr) throw e;
      // a trap inside wasm: the module state cannot be trusted any more
      crashed = `the engine crashed: ${errText(e)}`;
      throw new WErr('ENGINE_CRASHED', crashed);
    }
  }

  function errText(e: unknown): string { return e instanceof Error ? e.message : String(e); }

  /* a tensor request's outcome is kept per tensor: its handle, or the error
   * its data() / info() will reject with */
  function capture(out: number, build: () => number) {
    try { tensors.set(out, guard(build)); } catch (e) { tensors.set(out, e instanceof WErr ? e : new WErr('INVALID_ARGUMENT', errText(e))); }
  }

  function withString<T>(s: string, fn: (p: number) => T): T {
    const n = M.lengthBytesUTF8(s) + 1;
    const p = M._kw_malloc(n);
    if (!p) fail(-2);
    try { M.stringToUTF8(s, p, n); return fn(p); } finally { M._kw_free_ptr(p); }
  }

  /* ---------------------------------------------------------- init */

  async function init(a: RequestMsg<'init'>): Promise<ReplyOf<'init'>> {
    logLevel = a.logLevel;
    const print = (s: string) => { if (logLevel <= 2) console.log(`[kiln] ${s}`); };
    const printErr = (s: string) => { if (logLevel <= 3) console.warn(`[kiln] ${s}`); };
    // the first variant whose files load (kiln.ts lists relaxed, then SIMD128 for 'auto')
    let factory: KilnFactory | null = null, wasmBinary: Uint8Array | null = null, locate: (p: string) => string = (p) => p, name = '';
    const failures: string[] = [];
    for (const v of a.variants) {
      try {
        ({ factory, wasmBinary, locate } = await loadVariant(v.name, v.files));
        name = v.name;
        break;
      } catch (e) {
        failures.push((e as Error)?.message ?? String(e));
        if (logLevel <= 1) console.warn(`[kiln] ${v.name}: ${(e as Error)?.message ?? e}`);
      }
    }
    if (!factory || !wasmBinary) {
      throw new WErr('BAD_SOURCE', `cannot load the engine: ${failures.join('; ')}. ` + (a.wasmUrlGiven
        ? 'The folder given as wasmUrl must hold the package\'s wasm/dist/ (st/, mt/, st-relaxed/, mt-relaxed/).'
        : 'If your bundler did not copy kiln-ml\'s wasm files into its output, serve node_modules/kiln-ml/wasm/dist/ ' +
          'yourself (or use a CDN) and pass its URL: Kiln.create({ wasmUrl: \'/kiln-wasm/\' }).'));
    }
    M = await factory({
      wasmBinary,
      locateFile: locate,
      mainScriptUrlOrBlob: locate(`${name}.js`),
      kilnPoolSize: Math.max(1, a.threads - 1),
      print, printErr,
    });
    check(M._kw_init(a.threads));
    if (a.build === 'mt') {
      abortWord = new Int32Array(mem(), M._kw_abort_flag() >>> 0, 1);
    } else if (a.abortSab) {
      abortWord = new Int32Array(a.abortSab, 0, 1);
      const w = abortWord;
      M.kilnAbortWord = () => Atomics.load(w, 0);
    }
    for (let i = 0; i < M._kw_op_count(); i++) {
      ops.set(M.UTF8ToString(M._kw_op_name(i)), { index: i, inputs: M.UTF8ToString(M._kw_op_inputs(i)), params: M.UTF8ToString(M._kw_op_params(i)) });
    }
    opArgs = M._kw_malloc(8 * 4 + 16 * 8);
    if (!opArgs) fail(-2);
    return {
      info: info(),
      // mt: the caller cancels by storing a job id straight into wasm memory
      abortMemory: a.build === 'mt' ? mem() : null,
      abortPtr: a.build === 'mt' ? M._kw_abort_flag() >>> 0 : 0,
    };
  }

  // Node's modules are imported by literal name: this file is copied, not bundled, and Vite's dev
  // server leaves a literal node: import alone (a computed one would get a static import of its
  // client injected, which a classic worker cannot run)

  /** one variant's loader and wasm bytes; files are URLs (file: URLs in Node, see assets.ts) */
  async function loadVariant(name: string, files: EngineFiles): Promise<{ factory: KilnFactory; wasmBinary: Uint8Array; locate: (p: string) => string }> {
    const locate = (p: string) => (p.endsWith('.worker.js') && files.worker) || (p.endsWith('.wasm') ? files.wasm : p.endsWith('.js') ? files.js : p);
    if (isNode) {
      const { createRequire } = await (import('node:module' as string) as Promise<NodeModule>);
      const { fileURLToPath } = await (import('node:url' as string) as Promise<NodeUrl>);
      const fs = await (import('node:fs' as string) as Promise<NodeFs>);
      const js = fileURLToPath(files.js);
      // the .wasm first: a missing variant fails before its loader runs
      let wasmBinary: Uint8Array;
      try { wasmBinary = fs.readFileSync(fileURLToPath(files.wasm)); } catch (e) { throw new WErr('BAD_SOURCE', `${name}: ${errText(e)}`); }
      const factory = createRequire(js)(js) as KilnFactory;
      return { factory, wasmBinary, locate: (p: string) => fileURLToPath(locate(p)) };
    }
    let r: Response;
    try { r = await fetch(files.wasm); } catch (e) { throw new WErr('BAD_SOURCE', `${files.wasm}: ${errText(e)}`); }
    if (!r.ok) throw new WErr('BAD_SOURCE', `${files.wasm}: HTTP ${r.status}`);
    const wasmBinary = new Uint8Array(await r.arrayBuffer());
    // emscripten's MODULARIZE script defines this global
    const g = self as unknown as { createKilnModule?: KilnFactory };
    g.createKilnModule = undefined;
    try { importScripts(files.js); } catch (e) { throw new WErr('BAD_SOURCE', `${files.js}: ${errText(e)}`); }
    if (!g.createKilnModule) throw new WErr('BAD_SOURCE', `${files.js} did not define the engine`);
    return { factory: g.createKilnModule, wasmBinary, locate };
  }

  function info(): ReplyOf<'info'> {
    return {
      build: M._kw_is_mt() ? 'mt' : 'st',
      threads: M._kw_n_threads(),
      simd: !!M._kw_simd(),
      simdFlavor: M.UTF8ToString(M._kw_isa()) === 'wasm_relaxed' ? 'relaxed' : 'simd128',
      version: M.UTF8ToString(M._kw_version()),
      isa: M.UTF8ToString(M._kw_isa()),
      ops: [...ops.keys()],
    };
  }

  /* ---------------------------------------------------------- tensors */

  function handleOf(id: number): number {
    const h = tensors.get(id);
    if (h === undefined) throw new WErr('INVALID_HANDLE', `tensor ${id} was freed or belongs to another engine`);
    if (h instanceof WErr) throw h;
    return h;
  }

  function newTensor(a: RequestMsg<'tensor'>): number {
    const shape: number[] = a.shape;
    if (!Array.isArray(shape) || shape.length < 1 || shape.length > 4) throw new WErr('INVALID_ARGUMENT', `tensor: shape [${String(shape)}] must have 1 to 4 dimensions`);
    const dims = [shape[0] ?? 1, shape[1] ?? 1, shape[2] ?? 1, shape[3] ?? 1];
    // size checked before anything is allocated
    const nbytes = check(M._kw_tensor_bytes_for(a.type, shape.length, ...dims));
    if (a.byteLength !== nbytes) {
      throw new WErr('INVALID_ARGUMENT', `tensor: ${a.byteLength} bytes of data for shape [${shape.join(', ')}] which needs ${nbytes}`);
    }
    const h = check(M._kw_tensor_new(a.type, shape.length, ...dims));
    u8(M._kw_tensor_data(h), nbytes).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
    return h;
  }

  // every op through kw_op(): the C table says how many inputs and
  // parameters it takes and which parameters are integers (checked there)
  function buildOp(a: RequestMsg<'op'>): number {
    const d = ops.get(a.op);
    if (!d) throw new WErr('UNSUPPORTED', `no op named '${a.op}'`);
    const inputs = a.inputs ?? [];
    const params = a.params ?? [];
    if (inputs.length > d.inputs.length) throw new WErr('INVALID_ARGUMENT', `${a.op}: ${inputs.length} inputs, at most ${d.inputs.length}`);
    if (params.length !== d.params.length) throw new WErr('INVALID_ARGUMENT', `${a.op}: ${params.length} parameters, not ${d.params.length}`);
    for (const v of params) {
      if (typeof v !== 'number') throw new WErr('INVALID_ARGUMENT', `${a.op}: parameter ${String(v)} is not a number`);
    }
    // optional inputs are sent as 0
    const hs = Array.from(d.inputs, (_, i) => (inputs[i] ?? 0) === 0 ? 0 : handleOf(inputs[i]));
    new Int32Array(mem(), opArgs >>> 0, 8).set(hs);
    new Float64Array(mem(), (opArgs >>> 0) + 32, 16).set(params);
    return check(M._kw_op(d.index, opArgs, (opArgs >>> 0) + 32));
  }

  function describe(h: number) {
    const n = M._kw_tensor_n_dims(h);
    const shape: number[] = [];
    for (let i = 0; i < n; i++) shape.push(M._kw_tensor_ne(h, i));
    return { shape, type: M._kw_tensor_type(h), nbytes: M._kw_tensor_nbytes(h) };
  }

  function readOut(h: number) {
    const d = describe(h);
    const buf = new ArrayBuffer(d.nbytes);
    if (M._kw_tensor_is_contiguous(h) === 1) {
      new Uint8Array(buf).set(u8(M._kw_tensor_data(h), d.nbytes));
    } else {
      const tmp = M._kw_malloc(d.nbytes);
      if (!tmp) fail(-2);
      try {
        check(M._kw_tensor_read(h, tmp, d.nbytes));
        new Uint8Array(buf).set(u8(tmp, d.nbytes));
      } finally { M._kw_free_ptr(tmp); }
    }
    return { ...d, buffer: buf };
  }

  /* ---------------------------------------------------------- models */

  /**
   * A model file's bytes from any source into one buffer of wasm memory
   * (kw_model_alloc), streamed: a URL or Blob is read as it arrives and,
   * with a store file, written to the model cache on the way. format picks
   * the header check: GGUF (loadModel) or whisper.cpp's ggml (loadWhisper).
   * The caller owns the returned buffer (kw_model_free).
   */
  async function readModel(id: number, src: ModelSourceMsg, format: 'gguf' | 'whisper'): Promise<{ m: number; total: number; stored?: StoredMsg }> {
    const abortNow = () => { throw new WErr('ABORTED', 'model load aborted'); };
    let m = 0;
    let loaded = 0;
    let total = 0;
    let lastReport = 0;
    let ptr = 0;
    let stored: StoredMsg | undefined;
    const progress = (force = false) => {
      if (force || loaded - lastReport >= (1 << 20)) {
        lastReport = loaded;
        post({ t: 'progress', id, loaded, total });
      }
    };
    // The header is checked before any allocation so a wrong file fails
    // fast; then one allocation of the whole size, filled in place.
    const checkHeader = (b: Uint8Array) => {
      if (format === 'whisper') {
        if (b.byteLength < 4) throw new WErr('BAD_MODEL', `whisper: ${b.byteLength} bytes is not a model file`);
        const magic = (b[0] | (b[1] << 8) | (b[2] << 16) | (b[3] << 24)) >>> 0;
        if (magic !== 0x67676d6c) throw new WErr('BAD_MODEL', `whisper: bad magic 0x${magic.toString(16).padStart(8, '0')} (not a whisper.cpp ggml model)`);
        return;
      }
      if (b.byteLength < 8) throw new WErr('BAD_MODEL', `model: ${b.byteLength} bytes is too small for a GGUF file`);
      if (b[0] !== 0x47 || b[1] !== 0x47 || b[2] !== 0x55 || b[3] !== 0x46) throw new WErr('BAD_MODEL', 'model: not a GGUF file (bad magic)');
      const v = b[4] | (b[5] << 8) | (b[6] << 16) | (b[7] << 24);
      if (v !== 2 && v !== 3) throw new WErr('BAD_MODEL', `model: GGUF version ${v} is not supported (2, 3)`);
    };
    const allocate = (size: number) => {
      m = guard(() => M._kw_model_alloc(size));
      if (m < 0) {
        const rc = m; m = 0;
        const msg = lastError();
        throw new WErr(rc === -2 ? 'MODEL_TOO_LARGE' : codeOf(rc), msg);
      }
      ptr = M._kw_model_buffer(m) >>> 0;
      total = size;
    };
    const put = (chunk: Uint8Array) => {
      if (loaded + chunk.byteLength > total) throw new WErr('BAD_SOURCE', `model: the source delivered more than its ${total} bytes`);
      u8(ptr + loaded, chunk.byteLength).set(chunk);
      loaded += chunk.byteLength;
      progress();
    };
    try {
      if (src.kind === 'bytes') {
        const b = new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
        checkHeader(b.subarray(0, 8));
        allocate(b.byteLength);
        for (let off = 0; off < b.byteLength; off += 4 << 20) {
          if (isAborted(id)) abortNow();
          put(b.subarray(off, Math.min(b.byteLength, off + (4 << 20))));
        }
      } else if (src.kind === 'fill') {
        // bytes still on the caller's side (bytes.ts): checked and sized here,
        // then filled in place (mt: 'shared') or sent in slices ('slices')
        checkHeader(new Uint8Array(src.head));
        if (src.mode === 'shared' && !(mem() instanceof SharedArrayBuffer)) throw new WErr('BAD_SOURCE', 'model: wasm memory is not shared in this build');
        allocate(src.byteLength);
        const inbox = openInbox(id);
        if (src.mode === 'shared') {
          const memory = mem();
          if (!(memory instanceof SharedArrayBuffer)) throw new WErr('BAD_SOURCE', 'model: wasm memory is not shared in this build');
          post({ t: 'fill', id, memory, ptr, total });
          const msg = await inbox.next();
          if (msg.error) throw new WErr('BAD_SOURCE', `model: ${msg.error}`);
          if (msg.t !== 'filled') throw new WErr('BAD_SOURCE', 'model: the bytes did not arrive');
          loaded = total;
        } else {
          post({ t: 'fill', id, loaded: 0, total });
          while (loaded < total) {
            const msg = await inbox.next();
            if (isAborted(id)) abortNow();
            if (msg.error) throw new WErr('BAD_SOURCE', `model: ${msg.error}`);
            if (msg.t !== 'fillData' || !(msg.buffer instanceof ArrayBuffer)) throw new WErr('BAD_SOURCE', 'model: the bytes did not arrive');
            put(new Uint8Array(msg.buffer, 0, Math.min(msg.byteLength, msg.buffer.byteLength)));
            post({ t: 'fill', id, loaded, total, buffer: msg.buffer }, [msg.buffer]); // for the next slice
          }
        }
      } else if (src.kind === 'path') {
        if (!isNode) throw new WErr('BAD_SOURCE', 'file paths can only be loaded in Node');
        const fs = await (import('node:fs' as string) as Promise<NodeFs>);
        let fh: NodeFileHandle;
        try { fh = await fs.promises.open(src.path, 'r'); } catch (e) { throw new WErr('BAD_SOURCE', `cannot open ${src.path}: ${errText(e)}`); }
        try {
          const size = (await fh.stat()).size;
          const head = new Uint8Array(8);
          await fh.read(head, 0, 8, 0);
          checkHeader(size < 8 ? head.subarray(0, size) : head);
          allocate(size);
          while (loaded < total) {
            if (isAborted(id)) abortNow();
            const n = Math.min(4 << 20, total - loaded);
            // read straight into wasm memory
            const { bytesRead } = await fh.read(u8(ptr + loaded, n), 0, n, loaded);
            if (bytesRead <= 0) throw new WErr('BAD_SOURCE', `${src.path}: file ended at ${loaded} of ${total} bytes`);
            loaded += bytesRead;
            progress();
          }
        } finally { await fh.close(); }
      } else if (src.kind === 'url' || src.kind === 'blob' || src.kind === 'stream') {
        let reader: ReadableStreamDefaultReader<Uint8Array>;
        let size: number;
        // a cached download (cache.ts): the bytes also go to the cache's file,
        // written here so that no chunk passes through the page's thread
        let store: { w: FileSystemWritableFileStream | null; bytes: number; queued: number; chain: Promise<void>; error: string; etag: string | null } | null = null;
        const keep = (c: Uint8Array) => {
          put(c);
          const s = store, w = s?.w;
          if (!s || !w || s.error) return;
          s.queued += c.byteLength;
          // chunks come from fetch or a Blob: never a SharedArrayBuffer view
          s.chain = s.chain.then(() => s.error ? undefined : w.write(c as Uint8Array<ArrayBuffer>)).then(
            () => { s.bytes += c.byteLength; s.queued -= c.byteLength; },
            (e) => { s.error ||= `storage failed: ${errText(e)}`; s.queued -= c.byteLength; });
        };
        if (src.kind === 'url') {
          const ctl = new AbortController();
          cancelers.set(id, () => ctl.abort());
          let r: Response;
          try { r = await fetch(src.url, { signal: ctl.signal }); } catch (e) { throw new WErr('BAD_SOURCE', `cannot fetch ${src.url}: ${errText(e)}`); }
          if (!r.ok || !r.body) throw new WErr('BAD_SOURCE', `cannot fetch ${src.url}: HTTP ${r.status}`);
          size = Number(r.headers.get('content-length') ?? NaN);
          reader = r.body.getReader();
          if (src.store) {
            store = { w: null, bytes: 0, queued: 0, chain: Promise.resolve(), error: '', etag: r.headers.get('etag') };
            try { store.w = await src.store.createWritable({ keepExistingData: false }); } catch (e) { store.error = `storage refused: ${errText(e)}`; }
          }
        } else if (src.kind === 'stream') {
          size = Number(src.size);
          reader = src.stream.getReader();
        } else {
          size = src.blob.size;
          reader = src.blob.stream().getReader();
        }
        const pending: Uint8Array[] = [];
        let pendingBytes = 0;
        cancelers.set(id, () => { reader.cancel().catch(() => undefined); });
        try {
          // read until the header can be checked
          while (pendingBytes < 8) {
            const { done, value } = await reader.read();
            if (done) break;
            pending.push(value); pendingBytes += value.byteLength;
            if (isAborted(id)) abortNow();
          }
          const head = new Uint8Array(Math.min(8, pendingBytes));
          { let o = 0; for (const c of pending) { const k = Math.min(c.byteLength, head.byteLength - o); head.set(c.subarray(0, k), o); o += k; if (o >= head.byteLength) break; } }
          checkHeader(head);
          if (!Number.isFinite(size)) {
            // no length announced: gather first, then one allocation
            for (;;) {
              if (isAborted(id)) abortNow();
              const { done, value } = await reader.read();
              if (done) break;
              pending.push(value); pendingBytes += value.byteLength;
            }
            size = pendingBytes;
          }
          allocate(size);
          for (const c of pending) keep(c);
          for (;;) {
            if (isAborted(id)) abortNow();
            const { done, value } = await reader.read();
            if (done) break;
            keep(value);
            // storage slower than the download: wait rather than hold it all
            if (store && store.queued > (64 << 20)) await store.chain;
          }
          if (loaded !== total) throw new WErr('BAD_SOURCE', `model: the source ended at ${loaded} of ${total} bytes`);
          if (store) {
            await store.chain;
            if (store.w && !store.error) await store.w.close().catch((e: unknown) => { store!.error = `storage failed: ${errText(e)}`; });
            else if (store.w) await store.w.abort().catch(() => undefined);
            stored = { bytes: store.bytes, etag: store.etag, ...(store.error ? { error: store.error } : {}) };
          }
        } catch (e) {
          try { await reader.cancel(); } catch { /* already closed */ }
          if (store?.w && !stored) { await store.chain; await store.w.abort().catch(() => undefined); }
          if (isAborted(id)) abortNow();
          throw e;
        }
      } else {
        throw new WErr('BAD_SOURCE', 'model: unknown source');
      }
      if (isAborted(id)) abortNow();
      progress(true);
      return { m, total, ...(stored ? { stored } : {}) };
    } catch (e) {
      if (m > 0) M._kw_model_free(m);
      if (isAborted(id) && !(e instanceof WErr && e.code === 'ABORTED')) throw new WErr('ABORTED', 'model load aborted');
      throw e;
    } finally {
      aborted.delete(id);
      cancelers.delete(id);
      inboxes.delete(id);
    }
  }

  async function load(id: number, a: RequestMsg<'load'>): Promise<ReplyOf<'load'>> {
    const { m, total, stored } = await readModel(id, a.source, 'gguf');
    try {
      guard(() => check(M._kw_model_parse(m)));
      models.set(id, m);
      const lora = (a.lora ?? []).map((l) => ({ bytes: new Uint8Array(l.bytes), scale: l.scale }));
      modelOpts.set(id, { vocabOnly: !!a.vocabOnly, nCtx: a.nCtx ?? 0, lora });
      // adapters are checked against the model now, so that a bad one fails the load
      if (lora.length) {
        try { guard(() => llmOf(id)); } catch (e) { modelOpts.delete(id); models.delete(id); throw e; }
      }
      const names: string[] = [];
      const n = M._kw_model_n_tensors(m);
      for (let i = 0; i < n; i++) names.push(M.UTF8ToString(M._kw_model_tensor_name(m, i)));
      // scalars and strings as values; arrays (vocabularies...) by type and length only
      const metadata: Record<string, MetadataValue> = {};
      const GT = ['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'f32', 'bool', 'string', 'array', 'u64', 'i64', 'f64'];
      const nKv = M._kw_model_n_kv(m);
      for (let i = 0; i < nKv; i++) {
        const key = M.UTF8ToString(M._kw_model_kv_key(m, i));
        const ty = M._kw_model_kv_type(m, i);
        if (ty === 8) metadata[key] = M.UTF8ToString(M._kw_model_kv_str(m, i));
        else if (ty === 9) metadata[key] = { array: GT[M._kw_model_kv_arr_type(m, i)] ?? 'unknown', length: M._kw_model_kv_arr_n(m, i) };
        else if (ty === 7) metadata[key] = M._kw_model_kv_num(m, i) !== 0;
        else metadata[key] = M._kw_model_kv_num(m, i);
      }
      return { modelId: id, size: total, version: M._kw_model_version(m), nKv, tensors: names, metadata, ...(stored ? { stored } : {}) };
    } catch (e) {
      M._kw_model_free(m);
      throw e;
    }
  }

  /* messages for a running load from the caller's side ('fillData', 'filled'), in order */
  type FillReply = Exclude<ControlMsg, { t: 'abort' }>;
  const inboxes = new Map<number, (msg: FillReply) => void>();
  function openInbox(id: number) {
    const queue: FillReply[] = [];
    let wake: ((m: FillReply) => void) | null = null;
    let stop: ((e: WErr) => void) | null = null;
    let cancelled = false;
    inboxes.set(id, (m) => { if (wake) { const w = wake; wake = stop = null; w(m); } else queue.push(m); });
    // an 'abort' message ends the wait
    cancelers.set(id, () => { cancelled = true; if (stop) { const s = stop; wake = stop = null; s(new WErr('ABORTED', 'model load aborted')); } });
    return {
      next(): Promise<FillReply> {
        if (cancelled) return Promise.reject(new WErr('ABORTED', 'model load aborted'));
        if (queue.length > 0) return Promise.resolve(queue.shift()!);
        return new Promise((res, rej) => { wake = res; stop = rej; });
      },
    };
  }

  /* ---------------------------------------------------------- training (train.ts) */

  const trainSessions = new Map<number, number>(); // client id -> kw session handle

  function trainDataset(images: Uint8Array, labels: Uint8Array, n: number): number {
    const pi = M._kw_malloc(n * 784), pl = M._kw_malloc(n);
    try {
      if (!pi || !pl) fail(-2);
      u8(pi, n * 784).set(images.subarray(0, n * 784));
      u8(pl, n).set(labels.subarray(0, n));
      return check(M._kw_train_dataset(pi, pl, n));
    } finally { if (pi) M._kw_free_ptr(pi); if (pl) M._kw_free_ptr(pl); }
  }

  function sessionOf(id: number): number {
    const s = trainSessions.get(id);
    if (s === undefined) throw new WErr('INVALID_HANDLE', 'the trained model was freed');
    return s;
  }

  function evalOn(s: number, images: Uint8Array, labels: Uint8Array) {
    const n = labels.byteLength;
    const d = trainDataset(images, labels, n);
    try { check(M._kw_train_evaluate(s, d)); } finally { M._kw_train_dataset_free(d); }
    return { loss: M._kw_train_loss(s), accuracy: M._kw_train_accuracy(s), n };
  }

  async function train(id: number, a: RequestMsg<'train'>): Promise<ReplyOf<'train'>> {
    const pauseWord: Int32Array | null = a.pauseSab ? new Int32Array(a.pauseSab, 0, 1) : null;
    const images = new Uint8Array(a.images), labels = new Uint8Array(a.labels);
    const n = labels.byteLength;
    const s = guard(() => check(M._kw_train_new(a.arch, a.seed, a.batchSize, a.learningRate)));
    let d = 0;
    try {
      d = guard(() => trainDataset(images, labels, n));
      let last = Date.now();
      for (let epoch = 0; epoch < a.epochs; epoch++) {
        const batches = guard(() => check(M._kw_train_shuffle(s, d, a.seed + epoch)));
        if (batches < 1) throw new WErr('INVALID_ARGUMENT', `train: ${n} images make no batch of ${a.batchSize}`);
        for (let b = 0; b < batches; b++) {
          if (isAborted(id)) throw new WErr('ABORTED', 'training aborted');
          guard(() => check(M._kw_train_step(s, d, b)));
          post({ t: 'progress', id, train: { epoch, batch: b, batches, loss: M._kw_train_loss(s), accuracy: M._kw_train_accuracy(s) } });
          // let 'abort' messages in (st builds without shared memory), and wait while paused
          if (Date.now() - last > 30 || (pauseWord && Atomics.load(pauseWord, 0) !== 0)) {
            do { await new Promise((r) => setTimeout(r, pauseWord && Atomics.load(pauseWord, 0) !== 0 ? 50 : 0)); }
            while (pauseWord && Atomics.load(pauseWord, 0) !== 0 && !isAborted(id));
            last = Date.now();
          }
        }
      }
      const value: ReplyOf<'train'> = { modelId: id };
      const { testImages, testLabels } = a;
      if (testImages && testLabels) {
        const r = guard(() => evalOn(s, new Uint8Array(testImages), new Uint8Array(testLabels)));
        value.testLoss = r.loss; value.testAccuracy = r.accuracy;
      }
      trainSessions.set(id, s);
      return value;
    } catch (e) {
      M._kw_train_free(s);
      throw e;
    } finally {
      if (d > 0) M._kw_train_dataset_free(d);
      aborted.delete(id);
    }
  }

  /* ---------------------------------------------------------- LoRA fine-tuning (finetune.ts) */

  async function finetune(id: number, a: RequestMsg<'finetune'>): Promise<ReplyOf<'finetune'>> {
    const m = models.get(a.model);
    if (m === undefined) throw new WErr('INVALID_HANDLE', 'the model was freed');
    const text = new TextEncoder().encode(a.data);
    const h = guard(() => withBytes(text, (p) => withString(a.targets, (pt) =>
      check(M._kw_ft_new(m, p, text.byteLength, a.chat ? 1 : 0, a.rank, a.alpha, pt, a.nCtx, a.batchSize, a.epochs, a.lr, a.seed, a.valFraction, a.dropout)))));
    try {
      const info = () => new Float64Array(mem(), M._kw_ft_info(h) >>> 0, 8).slice();
      const steps = info()[1];
      guard(() => check(M._kw_ft_validate(h)));
      const valLossBefore = info()[7];
      let valLoss = valLossBefore;
      const perEpoch = Math.max(1, Math.round(steps / a.epochs));
      let last = Date.now();
      for (let s = 0; s < steps; s++) {
        if (isAborted(id)) throw new WErr('ABORTED', 'fine-tuning aborted');
        guard(() => check(M._kw_ft_step(h)));
        const [step, n, epoch, loss, lr, gradNorm, tokens] = info();
        const p: FinetuneProgressMsg = { step, steps: n, epoch, loss, lr, gradNorm, tokens };
        if (step % perEpoch === 0 || step === n) {
          guard(() => check(M._kw_ft_validate(h)));
          valLoss = p.valLoss = info()[7];
        }
        post({ t: 'progress', id, finetune: p });
        // let 'abort' messages in (st builds have no shared abort word)
        if (Date.now() - last > 30) { await new Promise((r) => setTimeout(r, 0)); last = Date.now(); }
      }
      const size = guard(() => check(M._kw_ft_adapter(h)));
      const buffer = u8(M._kw_ft_adapter_ptr(h), size).slice().buffer;
      return { buffer, steps, valLossBefore, valLoss };
    } finally {
      M._kw_ft_free(h);
      aborted.delete(id);
    }
  }

  function trainRequest(a: RequestMsg<'trainEvaluate' | 'trainClassify' | 'trainGGUF' | 'trainFree'>) {
    switch (a.t) {
      case 'trainEvaluate': {
        const s = sessionOf(a.model);
        return guard(() => evalOn(s, new Uint8Array(a.images), new Uint8Array(a.labels)));
      }
      case 'trainClassify': {
        const s = sessionOf(a.model);
        return guard(() => {
          const pi = M._kw_malloc(784), po = M._kw_malloc(40);
          try {
            if (!pi || !po) fail(-2);
            u8(pi, 784).set(new Uint8Array(a.image));
            check(M._kw_train_classify(s, pi, po));
            const out = new Float32Array(10);
            new Uint8Array(out.buffer).set(u8(po, 40));
            return { buffer: out.buffer };
          } finally { if (pi) M._kw_free_ptr(pi); if (po) M._kw_free_ptr(po); }
        });
      }
      case 'trainGGUF': {
        const s = sessionOf(a.model);
        return guard(() => {
          const n = check(M._kw_train_gguf(s));
          const out = new Uint8Array(n);
          out.set(u8(M._kw_train_gguf_data(s), n));
          return { buffer: out.buffer };
        });
      }
      case 'trainFree': {
        const s = trainSessions.get(a.model);
        trainSessions.delete(a.model);
        if (s !== undefined) guard(() => M._kw_train_free(s));
        return undefined;
      }
    }
  }

  /* ---------------------------------------------------------- autograd (autograd.ts, kw_param_* / kw_backward / kw_optim_*) */

  const paramIds = new Map<number, number>(); // handle of a tensor with requiresGrad -> client id
  const optims = new Map<number, number>();   // client optimizer id -> kw optimizer handle

  function markParam(id: number, h: number) {
    check(M._kw_param_set(h));
    paramIds.set(h, id);
  }

  // returns the client ids of the parameters the pass reached
  function backward(a: RequestMsg<'backward'> & { id?: number }): ReplyOf<'backward'> {
    const h = handleOf(a.tensor);
    return guard(() => {
      const n = check(M._kw_backward(h, a.id ?? 0));
      const ids: number[] = [];
      for (let i = 0; i < n; i++) {
        const id = paramIds.get(M._kw_backward_param(i));
        if (id !== undefined) ids.push(id);
      }
      return { params: ids };
    });
  }

  function optimStep(a: RequestMsg<'optimStep'> & { id?: number }): ReplyOf<'optimStep'> {
    const hs = a.params.map((id) => handleOf(id));
    return guard(() => {
      let o = optims.get(a.optim);
      if (o === undefined) {
        o = check(M._kw_optim_new(a.kind === 'adamw' ? 1 : 0));
        optims.set(a.optim, o);
      }
      const p = M._kw_malloc(Math.max(4, hs.length * 4));
      if (!p) fail(-2);
      try {
        new Int32Array(mem(), p >>> 0, hs.length).set(hs);
        const n = check(M._kw_optim_step(o, p, hs.length, a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.momentum, a.id ?? 0));
        return { updated: n };
      } finally { M._kw_free_ptr(p); }
    });
  }

  function autogradRequest(a: RequestMsg<'backward' | 'grad' | 'zeroGrad' | 'optimStep' | 'optimFree'> & { id?: number }) {
    switch (a.t) {
      case 'backward': return backward(a);
      case 'grad':
        capture(a.out, () => check(M._kw_param_grad(handleOf(a.tensor))));
        return undefined;
      case 'zeroGrad':
        // a freed parameter has nothing left to zero
        for (const id of a.tensors) {
          const h = tensors.get(id);
          if (typeof h === 'number') guard(() => M._kw_param_zero_grad(h));
        }
        return undefined;
      case 'optimStep': return optimStep(a);
      case 'optimFree': {
        const o = optims.get(a.optim);
        optims.delete(a.optim);
        if (o !== undefined) guard(() => M._kw_optim_free(o));
        return undefined;
      }
    }
  }

  /* ---------------------------------------------------------- text generation (generate.ts, kw_llm_*) */

  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  // wasm memory may be shared (mt): TextDecoder wants a copy
  const textAt = (ptr: number, n: number): string => (n > 0 ? decoder.decode(u8(ptr, n).slice()) : '');

  // a session is a kw_llm of its own over the model's shared weights: its
  // own KV cache and the record of the ids it holds (prompt caching)
  function llmOf(modelId: number, session = 0): number {
    const have = session ? sessions.get(session)?.g : llms.get(modelId);
    if (have) return have;
    const m = models.get(modelId);
    if (!m) throw new WErr('INVALID_HANDLE', 'the model was freed');
    const o = modelOpts.get(modelId) ?? { vocabOnly: false, nCtx: 0 };
    const g = check(M._kw_llm_new(m, o.vocabOnly ? 1 : 0, o.nCtx));
    try {
      // every generator of the model (sessions too) applies its adapters
      for (const l of o.lora ?? []) withBytes(l.bytes, (p) => check(M._kw_llm_lora_add(g, p, l.bytes.byteLength, l.scale)));
    } catch (e) {
      guard(() => M._kw_llm_free(g));
      throw e;
    }
    if (session) sessions.set(session, { model: modelId, g });
    else llms.set(modelId, g);
    return g;
  }

  function freeSession(session: number) {
    const s = sessions.get(session);
    sessions.delete(session);
    if (s) { pieceCache.delete(s.g); guard(() => M._kw_llm_free(s.g)); }
  }

  function withBytes<T>(b: Uint8Array, fn: (p: number) => T): T {
    const p = M._kw_malloc(Math.max(1, b.byteLength));
    if (!p) fail(-2);
    try { u8(p, b.byteLength).set(b); return fn(p); } finally { M._kw_free_ptr(p); }
  }

  function withIds<T>(ids: ArrayLike<number>, fn: (p: number, n: number) => T): T {
    const n = ids.length;
    for (let i = 0; i < n; i++) {
      const v = ids[i];
      if (!Number.isInteger(v) || v < 0 || v > 2147483647) throw new WErr('INVALID_ARGUMENT', `token id ${String(v)} at ${i} is not a token`);
    }
    const p = M._kw_malloc(Math.max(4, n * 4));
    if (!p) fail(-2);
    try { new Int32Array(mem(), p >>> 0, n).set(Array.from(ids)); return fn(p, n); } finally { M._kw_free_ptr(p); }
  }

  function tokenizeText(g: number, text: string, addBos: boolean, special: boolean): Int32Array {
    const b = encoder.encode(text);
    const n = withBytes(b, (p) => check(M._kw_llm_tokenize(g, p, b.byteLength, addBos ? 1 : 0, special ? 1 : 0)));
    return new Int32Array(mem(), M._kw_llm_ids(g) >>> 0, n).slice();
  }

  function textOp(a: RequestMsg<'tokenize' | 'detokenize' | 'tokenPiece' | 'meta' | 'llmInfo' | 'chatBuiltin'>) {
    const g = llmOf(a.model);
    switch (a.t) {
      case 'chatBuiltin': {
        // role and content of each message, NUL-terminated, one after another
        const packed = a.messages.map((m) => `${m.role}\0${m.content}\0`).join('');
        const n = withString(packed, (p) => (a.template == null ? M._kw_llm_chat_builtin(g, 0, p, a.messages.length)
          : withString(a.template, (tp) => M._kw_llm_chat_builtin(g, tp, p, a.messages.length))));
        return textAt(M._kw_llm_text(g) >>> 0, check(n));
      }
      case 'tokenize': return Array.from(tokenizeText(g, String(a.text), a.addBos !== false, !!a.special));
      case 'detokenize': {
        const n = withIds(a.ids, (p, k) => check(M._kw_llm_detokenize(g, p, k, a.removeSpecial ? 1 : 0, a.unparseSpecial ? 1 : 0)));
        return textAt(M._kw_llm_text(g) >>> 0, n);
      }
      case 'tokenPiece': {
        const n = withIds([a.token], () => check(M._kw_llm_token_to_piece(g, a.token, a.special ? 1 : 0)));
        return textAt(M._kw_llm_text(g) >>> 0, n);
      }
      case 'meta': {
        const n = withString(String(a.key), (p) => M._kw_llm_meta(g, p));
        if (n === -1) return null;
        return textAt(M._kw_llm_text(g) >>> 0, check(n));
      }
      case 'llmInfo': {
        // the text buffer may move while the piece is made: its address after
        const piece = (t: number) => { if (t < 0) return ''; const n = check(M._kw_llm_token_to_piece(g, t, 1)); return textAt(M._kw_llm_text(g) >>> 0, n); };
        const bos = M._kw_llm_bos(g), eos = M._kw_llm_eos(g);
        return { nCtx: check(M._kw_llm_n_ctx(g)), nVocab: check(M._kw_llm_n_vocab(g)), bos, eos, bosText: piece(bos), eosText: piece(eos) };
      }
    }
  }

  // embeddings (wasm/kiln_wasm_embed.c): each text in turn, the floats copied out
  function embed(a: RequestMsg<'embed'>): ReplyOf<'embed'> {
    const g = llmOf(a.model);
    const parts: Float32Array[] = [];
    for (const text of a.texts) {
      const b = encoder.encode(String(text));
      const n = withBytes(b, (p) => check(M._kw_llm_embed(g, p, b.byteLength, a.pooling, a.normalize ? 1 : 0)));
      parts.push(new Float32Array(mem(), M._kw_embed_out() >>> 0, n).slice());
    }
    const out = new Float32Array(parts.reduce((k, x) => k + x.length, 0));
    let o = 0;
    for (const x of parts) { out.set(x, o); o += x.length; }
    return { buffer: out.buffer, counts: parts.map((x) => x.length), nEmbd: check(M._kw_llm_n_embd(g)) };
  }

  // enum kiln_gen_stop
  // enum kiln_gen_stop: 0 is 'still running', never a finished generation's reason
  const STOP_REASONS: Record<number, StopReason> = { 1: 'eos', 2: 'maxTokens', 3: 'stop', 4: 'context' };
  const GEN_EOG = 1;
  /** streamed pieces: the shortest time between two messages to the page */
  const PIECE_INTERVAL_MS = 50;
  const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());

  // the prompt (text, tokenized in wasm, or ids), the stop strings and the
  // options go to C in one call, which checks them (messages name the option)
  function startGeneration(g: number, a: RequestMsg<'generate'>) {
    const stops = a.stop ?? [];
    const parts = stops.map((s) => encoder.encode(String(s)));
    const joined = new Uint8Array(parts.reduce((n, b) => n + b.byteLength + 1, 0));
    let o = 0;
    for (const b of parts) { joined.set(b, o); o += b.byteLength + 1; }
    const start = (text: number, textLen: number, ids: number, nIds: number) => withBytes(joined, (sp) => check(M._kw_llm_start(
      g, text, textLen, ids, nIds, a.addBos !== false ? 1 : 0, a.parseSpecial ? 1 : 0, sp, stops.length,
      a.maxTokens, a.seed, a.temperature, a.topK, a.topP, a.minP, a.repeatPenalty, a.frequencyPenalty, a.presencePenalty, a.penaltyLastN,
      a.contextShift ? 1 : 0, a.nKeep, a.cachePrompt ? 1 : 0)));
    if (Array.isArray(a.promptIds)) return withIds(a.promptIds, (p, n) => start(0, 0, p, n));
    const b = encoder.encode(String(a.prompt));
    return withBytes(b, (p) => start(p, b.byteLength, 0, 0));
  }

  // the grammar (or JSON Schema), the logit biases (texts tokenized here,
  // without BOS, each token biased) and logprobs go to C before the start,
  // which checks them (a bad grammar names its line and column)
  function constrain(g: number, a: RequestMsg<'generate'>) {
    const ids: number[] = [], vals: number[] = [];
    for (const [k, v] of a.logitBias ?? []) {
      const toks = typeof k === 'string' ? Array.from(tokenizeText(g, k, false, false)) : [k];
      for (const t of toks) { ids.push(t); vals.push(v); }
    }
    const grammar = a.jsonSchema ?? a.grammar;
    const withGrammar = (fn: (p: number) => number) => (grammar === undefined ? fn(0) : withString(grammar, fn));
    const n = ids.length;
    const p = M._kw_malloc(Math.max(8, n * 8));
    if (!p) fail(-2);
    try {
      new Int32Array(mem(), p >>> 0, n).set(ids);
      new Float32Array(mem(), (p >>> 0) + n * 4, n).set(vals);
      check(withGrammar((gp) => M._kw_llm_constrain(g, gp, a.jsonSchema !== undefined ? 1 : 0, p, p + n * 4, n, a.logprobs ?? 0)));
    } finally { M._kw_free_ptr(p); }
  }

  // token texts for logprobs, per generator (a vocabulary's pieces do not change)
  const pieceCache = new Map<number, Map<number, string>>();
  function pieceOf(g: number, t: number): string {
    let c = pieceCache.get(g);
    if (!c) { c = new Map(); pieceCache.set(g, c); }
    let s = c.get(t);
    if (s === undefined) {
      const n = check(M._kw_llm_token_to_piece(g, t, 1)); // the text buffer may move: its address after
      s = textAt(M._kw_llm_text(g) >>> 0, n);
      c.set(t, s);
    }
    return s;
  }
  // the last step's struct kw_logprobs: n, chosen {token, logprob}, top[64] {token, logprob}
  function stepLogprobs(g: number): TokenLogprob | null {
    const at = M._kw_llm_logprobs(g) >>> 0;
    const n = new Int32Array(mem(), at, 1)[0];
    if (n < 0) return null;
    const i32 = new Int32Array(mem(), at, 2 + 2 * n + 2), f32 = new Float32Array(mem(), at, 2 + 2 * n + 2);
    const top = [];
    for (let i = 0; i < n; i++) top.push({ token: i32[3 + 2 * i], text: pieceOf(g, i32[3 + 2 * i]), logprob: f32[4 + 2 * i] });
    return { token: i32[1], text: pieceOf(g, i32[1]), logprob: f32[2], top };
  }

  async function generate(id: number, a: RequestMsg<'generate'>): Promise<ReplyOf<'generate'>> {
    try {
      const g = guard(() => llmOf(a.model, a.session));
      guard(() => constrain(g, a));
      guard(() => startGeneration(g, a));
      const info = M._kw_llm_step_info(g) >>> 0; // {token, stop, text address, text length}
      const tokens: number[] = [];
      const logprobs: TokenLogprob[] = [];
      let text = '';
      let k = 0;
      // streamed pieces go out together, at most one message per interval
      // (the first at once): every message is a task on the page's thread
      let pieces: string[] = [];
      let pieceLps: (TokenLogprob | null)[] = [];
      let lastPost = -Infinity;
      const flush = () => {
        if (!pieces.length) return;
        post({ t: 'piece', id, texts: pieces, ...(pieceLps.length ? { logprobs: pieceLps } : {}) });
        pieces = []; pieceLps = []; lastPost = now();
      };
      for (;;) {
        if (isAborted(id)) throw new WErr('ABORTED', 'generation aborted');
        check(guard(() => M._kw_llm_step(g))); // the one call per token
        const [tok, stop, ptr, n] = new Int32Array(mem(), info, 4);
        const lp = a.logprobs > 0 && stop !== GEN_EOG ? guard(() => stepLogprobs(g)) : null;
        if (stop !== GEN_EOG) tokens.push(tok);
        if (lp) logprobs.push(lp);
        if (n > 0 || lp) {
          const piece = textAt(ptr >>> 0, n);
          text += piece; // the Completion has the whole text, a stream's too
          // logprobs go out with every token (a complete() sends them with empty text)
          if (a.stream || lp) {
            pieces.push(a.stream ? piece : '');
            if (a.logprobs > 0) pieceLps.push(lp);
            if (now() - lastPost >= PIECE_INTERVAL_MS) flush();
          }
        }
        if (stop !== 0) { flush(); break; }
        // without a shared abort word, the 'abort' message needs a turn of the event loop
        if (!abortWord && ++k % 8 === 0) await new Promise((r) => setTimeout(r, 0));
      }
      const [pt, gt, ps, gs, stop, ct] = new Float64Array(mem(), M._kw_llm_stats(g) >>> 0, 6);
      return {
        text, tokens, stopReason: STOP_REASONS[stop] ?? 'eos', ...(a.logprobs > 0 ? { logprobs } : {}),
        stats: { promptTokens: pt, cachedTokens: ct, generatedTokens: gt, promptTokensPerSecond: ps > 0 ? (pt - ct) / ps : 0, tokensPerSecond: gs > 0 ? gt / gs : 0 },
      };
    } finally {
      aborted.delete(id);
    }
  }

  /* ---------------------------------------------------------- dispatch */

  async function handle(a: RequestMsg & { id?: number }): Promise<unknown> {
    const id = a.id ?? 0;
    switch (a.t) {
      case 'init': return init(a);
      case 'tensor':
        capture(a.out, () => {
          const h = newTensor(a);
          if (a.param) {
            try { markParam(a.out, h); } catch (e) { M._kw_tensor_free(h); throw e; }
          }
          return h;
        });
        return undefined;
      case 'op':
        capture(a.out, () => buildOp(a));
        return undefined;
      case 'modelTensor':
        capture(a.out, () => {
          const m = models.get(a.model);
          if (!m) throw new WErr('INVALID_HANDLE', 'the model was freed');
          return withString(a.name, (p) => check(M._kw_model_tensor(m, p)));
        });
        return undefined;
      case 'free': {
        const h = tensors.get(a.tensor);
        tensors.delete(a.tensor);
        if (typeof h === 'number') { paramIds.delete(h); guard(() => M._kw_tensor_free(h)); }
        return undefined;
      }
      case 'ready': { const h = handleOf(a.tensor); return guard(() => describe(h)); }
      case 'data': {
        const h = handleOf(a.tensor);
        return guard(() => { check(M._kw_compute(h, id)); return readOut(h); });
      }
      case 'load': return load(id, a);
      case 'freeModel': {
        const m = models.get(a.model);
        models.delete(a.model);
        modelOpts.delete(a.model);
        const g = llms.get(a.model);
        llms.delete(a.model);
        if (g) { pieceCache.delete(g); guard(() => M._kw_llm_free(g)); }
        for (const [k, v] of sessions) if (v.model === a.model) freeSession(k);
        if (m) guard(() => M._kw_model_free(m));
        return undefined;
      }
      case 'freeSession': freeSession(a.session); return undefined;
      case 'lastLogits': {
        const g = llmOf(a.model, a.session);
        const n = check(M._kw_llm_n_vocab(g));
        const p = M._kw_llm_logits(g) >>> 0;
        if (!p) fail(-1);
        return { buffer: new Float32Array(mem(), p, n).slice().buffer };
      }
      case 'saveState': return guard(() => {
        const g = llmOf(a.model, a.session);
        const n = M._kw_llm_state_size(g);
        if (n < 0) check(n);
        const p = M._kw_malloc(Math.max(1, n));
        if (!p) fail(-2);
        try { check(M._kw_llm_state_save(g, p, n)); return { buffer: u8(p, n).slice().buffer }; } finally { M._kw_free_ptr(p); }
      });
      case 'loadState': return guard(() => {
        const g = llmOf(a.model, a.session);
        const b = new Uint8Array(a.buffer);
        withBytes(b, (p) => check(M._kw_llm_state_load(g, p, b.byteLength)));
        return undefined;
      });
      case 'tokenize': case 'detokenize': case 'tokenPiece': case 'meta': case 'llmInfo': case 'chatBuiltin':
        return guard(() => textOp(a));
      case 'generate': return generate(id, a);
      case 'embed': return guard(() => embed(a));
      case 'memory': return guard(() => ({ used: M._kw_mem_used(), total: M._kw_mem_total(), max: M._kw_mem_max(), handles: M._kw_live_handles() }));
      case 'info': return info();
      case 'backward': case 'grad': case 'zeroGrad': case 'optimStep': case 'optimFree': return autogradRequest(a);
      case 'train': return train(id, a);
      case 'finetune': return finetune(id, a);
      case 'trainEvaluate': case 'trainClassify': case 'trainGGUF': case 'trainFree': return trainRequest(a);
      case 'vadLoad': case 'vadDetect': case 'vadStreamBegin': case 'vadStreamPush': case 'vadStreamEnd': case 'vadFree': return vadRequest(a);
      case 'whisperLoad': return whisperLoad(id, a);
      case 'whisperTranscribe': case 'whisperFree': return whisperRequest(id, a);
      default: throw new WErr('INVALID_ARGUMENT', `unknown request ${(a as { t?: unknown }).t}`);
    }
  }

  /* ---------------------------------------------------------- Silero VAD (vad.ts, wasm/kiln_wasm_audio.c) */

  const vads = new Map<number, number>(); // client id -> kw_vad handle

  function vadRequest(a: RequestMsg<VadRequestKind>): ReplyOf<VadRequestKind> {
    const h = a.t === 'vadLoad' ? 0 : vads.get(a.vad);
    if (h === undefined) throw new WErr('INVALID_HANDLE', 'the VAD model was freed');
    const withF32 = <T>(x: Float32Array, fn: (p: number) => T): T => withBytes(new Uint8Array(x.buffer, x.byteOffset, x.byteLength), fn);
    const probsOut = (n: number) => new Float32Array(mem(), M._kw_vad_probs_ptr(h) >>> 0, n).slice();
    return guard(() => {
      switch (a.t) {
        case 'vadLoad': vads.set(a.vad, check(withBytes(new Uint8Array(a.bytes), (p) => M._kw_vad_load(p, a.bytes.byteLength)))); return undefined;
        case 'vadDetect': {
          const x = new Float32Array(a.samples);
          const n = check(withF32(x, (p) => M._kw_vad_detect(h, p, x.length, a.rate)));
          const o = a.opts;
          const ns = check(M._kw_vad_segments(h, n, o.threshold, o.minSpeechMs, o.minSilenceMs, o.maxSpeechS, o.speechPadMs));
          const segs = Array.from(new Int32Array(mem(), M._kw_vad_segments_ptr(h) >>> 0, ns * 4));
          return { buffer: probsOut(n).buffer, segs };
        }
        case 'vadStreamBegin': check(M._kw_vad_stream_begin(h, a.rate)); return undefined;
        case 'vadStreamPush': case 'vadStreamEnd': {
          const x = new Float32Array(a.t === 'vadStreamPush' ? a.samples : new ArrayBuffer(0));
          const n = check(a.t === 'vadStreamEnd' ? M._kw_vad_stream_end(h) : withF32(x, (p) => M._kw_vad_stream_push(h, p, x.length)));
          return { buffer: probsOut(n).buffer };
        }
        case 'vadFree': vads.delete(a.vad); M._kw_vad_free(h); return undefined;
      }
    });
  }

  /* ---------------------------------------------------------- Whisper (whisper.ts, wasm/kiln_wasm_whisper.c) */

  const whispers = new Map<number, number>(); // client id -> kw_whisper handle

  // a NUL-terminated string as UTF-8 (invalid bytes become U+FFFD, as in the native JSON read by JSON.parse)
  const cString = (ptr: number) => {
    const b = u8(ptr, mem().byteLength - (ptr >>> 0));
    let n = 0;
    while (b[n] !== 0) n++;
    return textAt(ptr, n);
  };

  function whisperSegment(h: number, i: number, scratch: number): WhisperSegmentMsg {
    check(M._kw_whisper_segment(h, i, scratch));
    const [t0, t1, noSpeechProb, nTok] = new Float64Array(mem(), scratch >>> 0, 4);
    const text = cString(M._kw_whisper_segment_text(h, i));
    const tp = M._kw_whisper_segment_tokens(h, i) >>> 0;
    const dv = new DataView(mem(), tp, nTok * 32);
    const tokens = [];
    for (let k = 0; k < nTok; k++) {
      const id = dv.getInt32(32 * k, true);
      const len = check(M._kw_whisper_token_len(h, id));
      tokens.push({ id, text: textAt(M._kw_whisper_token_text(h, id), len), p: dv.getFloat32(32 * k + 8, true), logprob: dv.getFloat32(32 * k + 12, true) });
    }
    return { start: t0 / 100, end: t1 / 100, text, tokens, noSpeechProb };
  }

  /* the file streams into wasm memory as a GGUF model does (readModel); the model copies what it keeps */
  async function whisperLoad(id: number, a: RequestMsg<'whisperLoad'>): Promise<ReplyOf<'whisperLoad'>> {
    const { m, total, stored } = await readModel(id, a.source, 'whisper');
    let w: number;
    try { w = guard(() => check(M._kw_whisper_load(M._kw_model_buffer(m), total))); } finally { M._kw_model_free(m); }
    return guard(() => {
      const p = M._kw_malloc(12 * 4);
      if (!p) { M._kw_whisper_free(w); fail(-2); }
      try {
        check(M._kw_whisper_info(w, p));
        const v = new Int32Array(mem(), p >>> 0, 12);
        whispers.set(a.whisper, w);
        return { nVocab: v[0], nAudioCtx: v[1], nAudioState: v[2], nAudioHead: v[3], nAudioLayer: v[4], nTextCtx: v[5], nTextState: v[6],
          nTextHead: v[7], nTextLayer: v[8], nMels: v[9], ftype: v[10], multilingual: v[11] !== 0, ...(stored ? { stored } : {}) };
      } finally { M._kw_free_ptr(p); }
    });
  }

  function whisperRequest(id: number, a: RequestMsg<'whisperTranscribe' | 'whisperFree'>): ReplyOf<'whisperTranscribe' | 'whisperFree'> {
    const h = whispers.get(a.whisper);
    if (h === undefined) throw new WErr('INVALID_HANDLE', 'the Whisper model was freed');
    return guard(() => {
      switch (a.t) {
        case 'whisperTranscribe': {
          let vad = 0;
          if (a.vad) {
            const v = vads.get(a.vad);
            if (v === undefined) throw new WErr('INVALID_HANDLE', 'whisper: the VAD model was freed');
            vad = v;
          }
          if (isAborted(id)) throw new WErr('ABORTED', 'transcription aborted');
          const x = new Float32Array(a.samples);
          const o = new Float64Array(a.opts);
          const scratch = M._kw_malloc(4 * 8);
          if (!scratch) fail(-2);
          // called from inside kw_whisper_full: nothing may throw back through the C frames
          M.kilnWhisperSegment = (i) => { try { post({ t: 'segment', id, segment: whisperSegment(h, i, scratch) }); } catch { /* the reply has it */ } };
          M.kilnWhisperProgress = (percent) => { try { post({ t: 'progress', id, transcribe: percent }); } catch { /* closed */ } };
          try {
            const n = withString(a.language, (lang) => withString(a.prompt, (prompt) =>
              withBytes(new Uint8Array(o.buffer), (op) => withBytes(new Uint8Array(x.buffer, x.byteOffset, x.byteLength), (xp) =>
                check(M._kw_whisper_full(h, xp, x.length, a.rate, op, o.length, lang, prompt, vad, id))))));
            const segments = [];
            for (let i = 0; i < n; i++) segments.push(whisperSegment(h, i, scratch));
            const lid = M._kw_whisper_lang(h);
            const language = lid >= 0 ? M.UTF8ToString(M._kw_whisper_lang_str(lid)) : '';
            let languageProbs: Record<string, number> | null = null;
            if (a.language === 'auto') {
              const nl = M._kw_whisper_lang_count();
              const pr = new Float32Array(mem(), M._kw_whisper_lang_probs(h) >>> 0, nl).slice();
              languageProbs = {};
              for (let i = 0; i < nl; i++) languageProbs[M.UTF8ToString(M._kw_whisper_lang_str(i))] = pr[i];
            }
            return { segments, language, languageProbs };
          } finally {
            M.kilnWhisperSegment = undefined;
            M.kilnWhisperProgress = undefined;
            M._kw_free_ptr(scratch);
          }
        }
        case 'whisperFree': whispers.delete(a.whisper); M._kw_whisper_free(h); return undefined;
      }
    });
  }

  function reply(id: number, p: Promise<unknown>) {
    p.then((value) => {
      if (id === 0) return;
      const buffer = typeof value === 'object' && value !== null && 'buffer' in value ? value.buffer : null;
      const transfer = buffer instanceof ArrayBuffer ? [buffer] : [];
      post({ t: 'reply', id, ok: true, value }, transfer);
    }, (e: unknown) => {
      const err = e instanceof WErr ? { code: e.code, message: e.message } : { code: 'COMPUTE_FAILED' as const, message: errText(e) };
      if (id === 0) return; // fire-and-forget: errors are kept per tensor
      post({ t: 'reply', id, ok: false, error: err });
    });
  }

  function receive(msg: ToWorker) {
    if (msg.t === 'abort') { aborted.add(msg.job); cancelers.get(msg.job)?.(); return; }
    if (msg.t === 'fillData' || msg.t === 'filled') { inboxes.get(msg.job)?.(msg); return; }
    reply(msg.id ?? 0, (async () => handle(msg))());
  }

  async function start() {
    if (isNode) {
      const port = (await (import('node:worker_threads' as string) as Promise<{ parentPort: NodePort }>)).parentPort;
      post = (m, tr) => port.postMessage(m, tr);
      onMessage = (fn) => port.on('message', fn);
    } else {
      post = (m, tr) => self.postMessage(m, tr ?? []);
      onMessage = (fn) => { self.onmessage = (ev: MessageEvent<ToWorker>) => fn(ev.data); };
    }
    onMessage(receive);
    post({ t: 'started' });
  }
  void start();
})();
