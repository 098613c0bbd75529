/*
 * worker.ts — the engine's thread. Owns the wasm module; everything the
 * caller asks for arrives as a message, in order.
 *
 * This file is a classic script (no import/export): browsers load it as a
 * classic Web Worker so that importScripts() can load emscripten's factory,
 * and Node loads it with worker_threads (as ESM; a script is valid there
 * too) and requires the factory through createRequire.
 *
 * Messages in: init, op, free, data, load, abort, memory, info, modelTensor,
 * backward, grad, zeroGrad, optimStep, optimFree (autograd.ts),
 * train, trainEvaluate, trainClassify, trainGGUF, trainFree,
 * tokenize, detokenize, tokenPiece, meta, llmInfo, generate (streams 'piece').
 * Messages out: {t:'reply', id, ok, value|error} and {t:'progress', id, ...}.
 */

/* eslint-disable @typescript-eslint/no-explicit-any */
declare function importScripts(...urls: string[]): void;
declare const self: any;
declare const process: any;
declare const console: any;
declare const fetch: any;
declare const AbortController: any;
declare const TextEncoder: any;
declare const TextDecoder: any;
declare const setTimeout: any;

(function () {
  const KW_CODES: Record<number, string> = {
    [-1]: 'INVALID_ARGUMENT', [-2]: 'OUT_OF_MEMORY', [-3]: 'INVALID_HANDLE', [-4]: 'UNSUPPORTED',
    [-5]: 'ABORTED', [-6]: 'COMPUTE_FAILED', [-7]: 'BAD_MODEL',
  };
  const TYPE_SIZE: Record<number, number> = { 0: 4, 1: 2, 24: 1, 25: 2, 26: 4, 27: 8, 28: 8, 30: 2 };

  class WErr extends Error {
    code: string;
    constructor(code: string, message: string) { super(message); this.code = code; }
  }

  const isNode = typeof process === 'object' && !!process.versions?.node && typeof importScripts !== 'function';
  let post: (msg: any, transfer?: any[]) => void;
  let onMessage: (fn: (msg: any) => void) => void;
  let nodePort: any = null;

  let M: any = null;               // the emscripten module
  let crashed: string | null = null;
  let abortWord: Int32Array | null = null; // st: separate SAB; mt: inside wasm memory
  const aborted = new Set<number>();       // async jobs (loads) cancelled by message
  const cancelers = new Map<number, () => void>(); // interrupt a load waiting on its source
  const tensors = new Map<number, number | WErr>(); // client id -> handle or build error
  const models = new Map<number, number>();
  const modelOpts = new Map<number, { vocabOnly: boolean; nCtx: number }>();
  const llms = new Map<number, number>(); // model id -> kw_llm handle (generate.ts)
  let unaryIdx: Record<string, number> = {};
  let binaryIdx: Record<string, number> = {};
  let logLevel = 2;

  const mem = (): ArrayBuffer => M.kilnMemory().buffer;
  const u8 = (ptr: number, n: number) => new Uint8Array(mem(), ptr >>> 0, n);
  const lastError = (): string => M.UTF8ToString(M._kw_last_error());
  const fail = (rc: number): never => { throw new WErr(KW_CODES[rc] ?? 'COMPUTE_FAILED', lastError() || `error ${rc}`); };
  const check = (rc: number): number => (rc < 0 ? fail(rc) : rc);

  function guard<T>(fn: () => T): T {
    if (crashed) throw new WErr('ENGINE_CRASHED', crashed);
    try {
      return fn();
    } catch (e: any) {
      if (e instanceof WErr) throw e;
      // a trap inside wasm: the module state cannot be trusted any more
      crashed = `the engine crashed: ${e?.message ?? e}`;
      throw new WErr('ENGINE_CRASHED', crashed);
    }
  }

  function withString<T>(s: string, fn: (p: number) => T): T {
    const n = M.lengthBytesUTF8(s) + 1;
    const p = M._kw_malloc(n);
    if (!p) fail(-2);
    try { M.stringToUTF8(s, p, n); return fn(p); } finally { M._kw_free_ptr(p); }
  }

  /* ---------------------------------------------------------- init */

  async function init(a: any) {
    logLevel = a.logLevel;
    const print = (s: string) => { if (logLevel <= 2) console.log(`[kiln] ${s}`); };
    const printErr = (s: string) => { if (logLevel <= 3) console.warn(`[kiln] ${s}`); };
    // the first variant whose files load (kiln.ts lists relaxed, then SIMD128 for 'auto')
    let factory: any = null, wasmBinary: Uint8Array | null = null, locate: (p: string) => string = (p) => p, name = '';
    let firstErr: unknown = null;
    for (const v of a.variants as { name: string; base: string }[]) {
      try {
        ({ factory, wasmBinary, locate } = await loadVariant(v.name, v.base));
        name = v.name;
        break;
      } catch (e) {
        firstErr ??= e;
        if (logLevel <= 1) console.warn(`[kiln] ${v.name}: ${(e as Error)?.message ?? e}`);
      }
    }
    if (!factory || !wasmBinary) throw firstErr;
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
    for (let i = 0; i < M._kw_unary_count(); i++) unaryIdx[M.UTF8ToString(M._kw_unary_name(i))] = i;
    for (let i = 0; i < M._kw_binary_count(); i++) binaryIdx[M.UTF8ToString(M._kw_binary_name(i))] = i;
    return {
      info: info(),
      // mt: the caller cancels by storing a job id straight into wasm memory
      abortMemory: a.build === 'mt' ? mem() : null,
      abortPtr: a.build === 'mt' ? M._kw_abort_flag() >>> 0 : 0,
    };
  }

  async function loadVariant(name: string, base: string) {
    if (isNode) {
      const { createRequire } = await import('node:module' as any);
      const path = await import('node:path' as any);
      const fs = await import('node:fs' as any);
      const dir: string = base;
      // the .wasm first: a missing variant fails before its loader runs
      const wasmBinary: Uint8Array = fs.readFileSync(path.join(dir, `${name}.wasm`));
      const req = createRequire(path.join(dir, `${name}.js`));
      const factory = req(path.join(dir, `${name}.js`));
      return { factory, wasmBinary, locate: (p: string) => path.join(dir, p) };
    }
    const r = await fetch(base + `${name}.wasm`);
    if (!r.ok) throw new WErr('BAD_SOURCE', `cannot fetch ${base}${name}.wasm: HTTP ${r.status}`);
    const wasmBinary = new Uint8Array(await r.arrayBuffer());
    (self as any).createKilnModule = undefined;
    importScripts(base + `${name}.js`);
    return { factory: self.createKilnModule, wasmBinary, locate: (p: string) => base + p };
  }

  function info() {
    return {
      build: M._kw_is_mt() ? 'mt' : 'st',
      threads: M._kw_n_threads(),
      simd: !!M._kw_simd(),
      simdFlavor: M.UTF8ToString(M._kw_isa()) === 'wasm_relaxed' ? 'relaxed' : 'simd128',
      version: M.UTF8ToString(M._kw_version()),
      isa: M.UTF8ToString(M._kw_isa()),
      ops: [...Object.keys(unaryIdx).filter((k) => M._kw_unary_built(unaryIdx[k])),
            ...Object.keys(binaryIdx).filter((k) => M._kw_binary_built(binaryIdx[k]))],
    };
  }

  /* ---------------------------------------------------------- tensors */

  function handleOf(id: number): number {
    const h = tensors.get(id);
    if (h === undefined) throw new WErr('INVALID_HANDLE', `tensor ${id} was freed or belongs to another engine`);
    if (h instanceof WErr) throw h;
    return h;
  }

  function newTensor(a: any): number {
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

  const PARAM_OPS: Record<string, (p: number[], h: number[]) => number> = {
    scale: (p, h) => M._kw_op_scale(h[0], p[0]),
    norm: (p, h) => M._kw_op_norm(h[0], p[0]),
    rmsNorm: (p, h) => M._kw_op_rms_norm(h[0], p[0]),
    groupNorm: (p, h) => M._kw_op_group_norm(h[0], p[0], p[1]),
    leakyRelu: (p, h) => M._kw_op_leaky_relu(h[0], p[0]),
    clamp: (p, h) => M._kw_op_clamp(h[0], p[0], p[1]),
    softmaxExt: (p, h) => M._kw_op_soft_max_ext(h[0], h[1] ?? 0, p[0], p[1]),
    rope: (p, h) => M._kw_op_rope_ext(h[0], h[1], h[2] ?? 0, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]),
    reshape: (p, h) => M._kw_op_reshape(h[0], p[0] ?? 1, p[1] ?? 1, p[2] ?? 1, p[3] ?? 1),
    permute: (p, h) => M._kw_op_permute(h[0], p[0], p[1], p[2], p[3]),
    view: (p, h) => M._kw_op_view(h[0], p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]),
    cast: (p, h) => M._kw_op_cast(h[0], p[0]),
    concat: (p, h) => M._kw_op_concat(h[0], h[1], p[0]),
    diagMaskInf: (p, h) => M._kw_op_diag_mask_inf(h[0], p[0]),
    diagMaskZero: (p, h) => M._kw_op_diag_mask_zero(h[0], p[0]),
    argsort: (p, h) => M._kw_op_argsort(h[0], p[0]),
    topK: (p, h) => M._kw_op_top_k(h[0], p[0]),
    pad: (p, h) => M._kw_op_pad(h[0], p[0], p[1], p[2], p[3]),
    flashAttnExt: (p, h) => M._kw_op_flash_attn_ext(h[0], h[1], h[2], h[3] ?? 0, p[0], p[1], p[2]),
    conv2d: (p, h) => M._kw_op_conv_2d(h[0], h[1], p[0], p[1], p[2], p[3], p[4], p[5]),
    pool2d: (p, h) => M._kw_op_pool_2d(h[0], p[0], p[1], p[2], p[3], p[4], p[5], p[6]),
    arange: (p) => M._kw_op_arange(p[0], p[1], p[2]),
  };

  // which parameters of each op are C ints
  const INT_PARAMS: Record<string, number[]> = {
    groupNorm: [0], rope: [0, 1, 2], permute: [0, 1, 2, 3], cast: [0], concat: [0], diagMaskInf: [0], diagMaskZero: [0],
    argsort: [0], topK: [0], pad: [0, 1, 2, 3], conv2d: [0, 1, 2, 3, 4, 5], pool2d: [0, 1, 2, 3, 4],
  };

  function buildOp(a: any): number {
    // optional inputs are sent as 0
    const hs: number[] = (a.inputs as number[]).map((id) => (id === 0 ? 0 : handleOf(id)));
    const params: number[] = a.params ?? [];
    for (const v of params) {
      if (typeof v !== 'number' || Number.isNaN(v)) throw new WErr('INVALID_ARGUMENT', `${a.op}: parameter ${String(v)} is not a number`);
    }
    // parameters that C takes as int must be int32: JS would wrap them
    const ints = INT_PARAMS[a.op];
    if (ints) for (const i of ints) {
      const v = params[i];
      if (v !== undefined && !(Number.isInteger(v) && v >= -2147483648 && v <= 2147483647)) {
        throw new WErr('INVALID_ARGUMENT', `${a.op}: parameter ${i} = ${v} is not a 32-bit integer`);
      }
    }
    if (a.op in unaryIdx) return check(M._kw_op_unary(unaryIdx[a.op], hs[0]));
    if (a.op in binaryIdx) return check(M._kw_op_binary(binaryIdx[a.op], hs[0], hs[1]));
    const f = PARAM_OPS[a.op];
    if (!f) throw new WErr('UNSUPPORTED', `no op named '${a.op}'`);
    return check(f(params, hs));
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

  async function load(id: number, a: any) {
    const src = a.source;
    const isAborted = () => aborted.has(id) || (abortWord !== null && Atomics.load(abortWord, 0) === id);
    const abortNow = () => { throw new WErr('ABORTED', 'model load aborted'); };
    let m = 0;
    let loaded = 0;
    let total = 0;
    let lastReport = 0;
    let ptr = 0;
    const progress = (force = false) => {
      if (force || loaded - lastReport >= (1 << 20)) {
        lastReport = loaded;
        post({ t: 'progress', id, loaded, total });
      }
    };
    // The header is checked before any allocation so a wrong file fails
    // fast; then one allocation of the whole size, filled in place.
    const checkHeader = (b: Uint8Array) => {
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
        throw new WErr(rc === -2 ? 'MODEL_TOO_LARGE' : (KW_CODES[rc] ?? 'BAD_MODEL'), msg);
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
          if (isAborted()) abortNow();
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
          post({ t: 'fill', id, memory: mem(), ptr, total });
          const msg = await inbox.next();
          if (msg.error) throw new WErr('BAD_SOURCE', `model: ${msg.error}`);
          if (msg.t !== 'filled') throw new WErr('BAD_SOURCE', 'model: the bytes did not arrive');
          loaded = total;
        } else {
          post({ t: 'fill', id, loaded: 0, total });
          while (loaded < total) {
            const msg = await inbox.next();
            if (isAborted()) abortNow();
            if (msg.error) throw new WErr('BAD_SOURCE', `model: ${msg.error}`);
            if (msg.t !== 'fillData' || !(msg.buffer instanceof ArrayBuffer)) throw new WErr('BAD_SOURCE', 'model: the bytes did not arrive');
            put(new Uint8Array(msg.buffer, 0, Math.min(msg.byteLength, msg.buffer.byteLength)));
            post({ t: 'fill', id, loaded, total, buffer: msg.buffer }, [msg.buffer]); // for the next slice
          }
        }
      } else if (src.kind === 'path') {
        if (!isNode) throw new WErr('BAD_SOURCE', 'file paths can only be loaded in Node');
        const fs = await import('node:fs' as any);
        let fh: any;
        try { fh = await fs.promises.open(src.path, 'r'); } catch (e: any) { throw new WErr('BAD_SOURCE', `cannot open ${src.path}: ${e.message}`); }
        try {
          const size = (await fh.stat()).size;
          const head = new Uint8Array(8);
          await fh.read(head, 0, 8, 0);
          checkHeader(size < 8 ? head.subarray(0, size) : head);
          allocate(size);
          while (loaded < total) {
            if (isAborted()) abortNow();
            const n = Math.min(4 << 20, total - loaded);
            // read straight into wasm memory
            const { bytesRead } = await fh.read(u8(ptr + loaded, n), 0, n, loaded);
            if (bytesRead <= 0) throw new WErr('BAD_SOURCE', `${src.path}: file ended at ${loaded} of ${total} bytes`);
            loaded += bytesRead;
            progress();
          }
        } finally { await fh.close(); }
      } else if (src.kind === 'url' || src.kind === 'blob' || src.kind === 'stream') {
        let reader: any;
        let size: number;
        if (src.kind === 'url') {
          const ctl = new AbortController();
          cancelers.set(id, () => ctl.abort());
          let r: any;
          try { r = await fetch(src.url, { signal: ctl.signal }); } catch (e: any) { throw new WErr('BAD_SOURCE', `cannot fetch ${src.url}: ${e.message}`); }
          if (!r.ok || !r.body) throw new WErr('BAD_SOURCE', `cannot fetch ${src.url}: HTTP ${r.status}`);
          size = Number(r.headers.get('content-length') ?? NaN);
          reader = r.body.getReader();
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
            if (isAborted()) abortNow();
          }
          const head = new Uint8Array(Math.min(8, pendingBytes));
          { let o = 0; for (const c of pending) { const k = Math.min(c.byteLength, head.byteLength - o); head.set(c.subarray(0, k), o); o += k; if (o >= head.byteLength) break; } }
          checkHeader(head);
          if (!Number.isFinite(size)) {
            // no length announced: gather first, then one allocation
            for (;;) {
              if (isAborted()) abortNow();
              const { done, value } = await reader.read();
              if (done) break;
              pending.push(value); pendingBytes += value.byteLength;
            }
            size = pendingBytes;
          }
          allocate(size);
          for (const c of pending) put(c);
          for (;;) {
            if (isAborted()) abortNow();
            const { done, value } = await reader.read();
            if (done) break;
            put(value);
          }
        } catch (e) {
          try { await reader.cancel(); } catch { /* already closed */ }
          if (isAborted()) abortNow();
          throw e;
        }
        if (loaded !== total) throw new WErr('BAD_SOURCE', `model: the source ended at ${loaded} of ${total} bytes`);
      } else {
        throw new WErr('BAD_SOURCE', 'model: unknown source');
      }
      if (isAborted()) abortNow();
      progress(true);
      guard(() => check(M._kw_model_parse(m)));
      models.set(id, m);
      modelOpts.set(id, { vocabOnly: !!a.vocabOnly, nCtx: a.nCtx ?? 0 });
      const names: string[] = [];
      const n = M._kw_model_n_tensors(m);
      for (let i = 0; i < n; i++) names.push(M.UTF8ToString(M._kw_model_tensor_name(m, i)));
      // scalars and strings as values; arrays (vocabularies...) by type and length only
      const metadata: Record<string, unknown> = {};
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
      return { modelId: id, size: total, version: M._kw_model_version(m), nKv, tensors: names, metadata };
    } catch (e) {
      if (m > 0) M._kw_model_free(m);
      if (isAborted() && !(e instanceof WErr && e.code === 'ABORTED')) throw new WErr('ABORTED', 'model load aborted');
      throw e;
    } finally {
      aborted.delete(id);
      cancelers.delete(id);
      inboxes.delete(id);
    }
  }

  /* messages for a running load from the caller's side ('fillData', 'filled'), in order */
  const inboxes = new Map<number, (msg: any) => void>();
  function openInbox(id: number) {
    const queue: any[] = [];
    let wake: ((m: any) => void) | null = null;
    let stop: ((e: any) => void) | null = null;
    let cancelled = false;
    inboxes.set(id, (m) => { if (wake) { const w = wake; wake = stop = null; w(m); } else queue.push(m); });
    // an 'abort' message ends the wait
    cancelers.set(id, () => { cancelled = true; if (stop) { const s = stop; wake = stop = null; s(new WErr('ABORTED', 'model load aborted')); } });
    return {
      next(): Promise<any> {
        if (cancelled) return Promise.reject(new WErr('ABORTED', 'model load aborted'));
        if (queue.length > 0) return Promise.resolve(queue.shift());
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

  async function train(id: number, a: any) {
    const isAborted = () => aborted.has(id) || (abortWord !== null && Atomics.load(abortWord, 0) === id);
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
          if (isAborted()) throw new WErr('ABORTED', 'training aborted');
          guard(() => check(M._kw_train_step(s, d, b)));
          post({ t: 'progress', id, train: { epoch, batch: b, batches, loss: M._kw_train_loss(s), accuracy: M._kw_train_accuracy(s) } });
          // let 'abort' messages in (st builds without shared memory), and wait while paused
          if (Date.now() - last > 30 || (pauseWord && Atomics.load(pauseWord, 0) !== 0)) {
            do { await new Promise((r) => setTimeout(r, pauseWord && Atomics.load(pauseWord, 0) !== 0 ? 50 : 0)); }
            while (pauseWord && Atomics.load(pauseWord, 0) !== 0 && !isAborted());
            last = Date.now();
          }
        }
      }
      const value: any = { modelId: id };
      if (a.testImages && a.testLabels) {
        const r = guard(() => evalOn(s, new Uint8Array(a.testImages), new Uint8Array(a.testLabels)));
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

  function trainRequest(a: any): any {
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
      default: throw new WErr('INVALID_ARGUMENT', `unknown request ${a.t}`);
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
  function backward(a: any) {
    const h = handleOf(a.tensor);
    return guard(() => {
      const n = check(M._kw_backward(h, a.id));
      const ids: number[] = [];
      for (let i = 0; i < n; i++) {
        const id = paramIds.get(M._kw_backward_param(i));
        if (id !== undefined) ids.push(id);
      }
      return { params: ids };
    });
  }

  function optimStep(a: any) {
    const hs: number[] = (a.params as number[]).map((id) => handleOf(id));
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
        const n = check(M._kw_optim_step(o, p, hs.length, a.lr, a.beta1, a.beta2, a.eps, a.weightDecay, a.momentum, a.id));
        return { updated: n };
      } finally { M._kw_free_ptr(p); }
    });
  }

  function autogradRequest(a: any): any {
    switch (a.t) {
      case 'backward': return backward(a);
      case 'grad':
        try { tensors.set(a.out, guard(() => check(M._kw_param_grad(handleOf(a.tensor))))); } catch (e: any) { tensors.set(a.out, e instanceof WErr ? e : new WErr('INVALID_ARGUMENT', String(e))); }
        return undefined;
      case 'zeroGrad':
        // a freed parameter has nothing left to zero
        for (const id of a.tensors as number[]) {
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
      default: throw new WErr('INVALID_ARGUMENT', `unknown request ${a.t}`);
    }
  }

  /* ---------------------------------------------------------- text generation (generate.ts, kw_llm_*) */

  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  // wasm memory may be shared (mt): TextDecoder wants a copy
  const textAt = (ptr: number, n: number): string => (n > 0 ? decoder.decode(u8(ptr, n).slice()) : '');

  function llmOf(modelId: number): number {
    const have = llms.get(modelId);
    if (have) return have;
    const m = models.get(modelId);
    if (!m) throw new WErr('INVALID_HANDLE', 'the model was freed');
    const o = modelOpts.get(modelId) ?? { vocabOnly: false, nCtx: 0 };
    const g = check(M._kw_llm_new(m, o.vocabOnly ? 1 : 0, o.nCtx));
    llms.set(modelId, g);
    return g;
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

  function textOp(a: any): any {
    const g = llmOf(a.model);
    switch (a.t) {
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
      default: throw new WErr('INVALID_ARGUMENT', `unknown request ${a.t}`);
    }
  }

  // enum kiln_gen_stop
  const STOP_REASONS = ['', 'eos', 'maxTokens', 'stop', 'context'];
  const GEN_EOG = 1;

  // the prompt (text, tokenized in wasm, or ids), the stop strings and the
  // options go to C in one call, which checks them (messages name the option)
  function startGeneration(g: number, a: any) {
    const stops = a.stop ?? [];
    const parts = stops.map((s: string) => encoder.encode(String(s)));
    const joined = new Uint8Array(parts.reduce((n: number, b: Uint8Array) => n + b.byteLength + 1, 0));
    let o = 0;
    for (const b of parts) { joined.set(b, o); o += b.byteLength + 1; }
    const start = (text: number, textLen: number, ids: number, nIds: number) => withBytes(joined, (sp) => check(M._kw_llm_start(
      g, text, textLen, ids, nIds, a.addBos !== false ? 1 : 0, a.parseSpecial ? 1 : 0, sp, stops.length,
      a.maxTokens, a.seed, a.temperature, a.topK, a.topP, a.minP, a.repeatPenalty, a.frequencyPenalty, a.presencePenalty, a.penaltyLastN)));
    if (Array.isArray(a.promptIds)) return withIds(a.promptIds, (p, n) => start(0, 0, p, n));
    const b = encoder.encode(String(a.prompt));
    return withBytes(b, (p) => start(p, b.byteLength, 0, 0));
  }

  async function generate(id: number, a: any) {
    const isAborted = () => aborted.has(id) || (abortWord !== null && Atomics.load(abortWord, 0) === id);
    try {
      const g = guard(() => llmOf(a.model));
      guard(() => startGeneration(g, a));
      const info = M._kw_llm_step_info(g) >>> 0; // {token, stop, text address, text length}
      const tokens: number[] = [];
      let text = '';
      let k = 0;
      for (;;) {
        if (isAborted()) throw new WErr('ABORTED', 'generation aborted');
        check(guard(() => M._kw_llm_step(g))); // the one call per token
        const [tok, stop, ptr, n] = new Int32Array(mem(), info, 4);
        if (stop !== GEN_EOG) tokens.push(tok);
        if (n > 0) {
          const piece = textAt(ptr >>> 0, n);
          if (a.stream) post({ t: 'piece', id, text: piece });
          else text += piece;
        }
        if (stop !== 0) break;
        // without a shared abort word, the 'abort' message needs a turn of the event loop
        if (!abortWord && ++k % 8 === 0) await new Promise((r) => setTimeout(r, 0));
      }
      const [pt, gt, ps, gs, stop] = new Float64Array(mem(), M._kw_llm_stats(g) >>> 0, 5);
      return {
        text, tokens, stopReason: STOP_REASONS[stop] ?? '',
        stats: { promptTokens: pt, generatedTokens: gt, promptTokensPerSecond: ps > 0 ? pt / ps : 0, tokensPerSecond: gs > 0 ? gt / gs : 0 },
      };
    } finally {
      aborted.delete(id);
    }
  }

  /* ---------------------------------------------------------- dispatch */

  async function handle(msg: any): Promise<any> {
    const a = msg;
    switch (a.t) {
      case 'init': return init(a);
      case 'tensor':
        try {
          tensors.set(a.out, guard(() => {
            const h = newTensor(a);
            if (a.param) {
              try { markParam(a.out, h); } catch (e) { M._kw_tensor_free(h); throw e; }
            }
            return h;
          }));
        } catch (e: any) { tensors.set(a.out, e instanceof WErr ? e : new WErr('INVALID_ARGUMENT', String(e))); }
        return undefined;
      case 'op':
        try { tensors.set(a.out, guard(() => buildOp(a))); } catch (e: any) { tensors.set(a.out, e instanceof WErr ? e : new WErr('INVALID_ARGUMENT', String(e))); }
        return undefined;
      case 'modelTensor':
        try {
          const m = models.get(a.model);
          if (!m) throw new WErr('INVALID_HANDLE', 'the model was freed');
          tensors.set(a.out, guard(() => withString(a.name, (p) => check(M._kw_model_tensor(m, p)))));
        } catch (e: any) { tensors.set(a.out, e instanceof WErr ? e : new WErr('INVALID_ARGUMENT', String(e))); }
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
        return guard(() => { check(M._kw_compute(h, a.id)); return readOut(h); });
      }
      case 'load': return load(a.id, a);
      case 'freeModel': {
        const m = models.get(a.model);
        models.delete(a.model);
        modelOpts.delete(a.model);
        const g = llms.get(a.model);
        llms.delete(a.model);
        if (g) guard(() => M._kw_llm_free(g));
        if (m) guard(() => M._kw_model_free(m));
        return undefined;
      }
      case 'tokenize': case 'detokenize': case 'tokenPiece': case 'meta': case 'llmInfo':
        return guard(() => textOp(a));
      case 'generate': return generate(a.id, a);
      case 'memory': return guard(() => ({ used: M._kw_mem_used(), total: M._kw_mem_total(), max: M._kw_mem_max(), handles: M._kw_live_handles() }));
      case 'info': return info();
      case 'backward': case 'grad': case 'zeroGrad': case 'optimStep': case 'optimFree': return autogradRequest(a);
      case 'train': return train(a.id, a);
      case 'trainEvaluate': case 'trainClassify': case 'trainGGUF': case 'trainFree': return trainRequest(a);
      default: throw new WErr('INVALID_ARGUMENT', `unknown request ${a.t}`);
    }
  }

  function reply(id: number, p: Promise<any>) {
    p.then((value) => {
      if (id === 0) return;
      const transfer = value && value.buffer instanceof ArrayBuffer ? [value.buffer] : [];
      post({ t: 'reply', id, ok: true, value }, transfer);
    }, (e: any) => {
      const err = e instanceof WErr ? { code: e.code, message: e.message } : { code: 'COMPUTE_FAILED', message: String(e?.message ?? e) };
      if (id === 0) return; // fire-and-forget: errors are kept per tensor
      post({ t: 'reply', id, ok: false, error: err });
    });
  }

  function receive(msg: any) {
    if (msg.t === 'abort') { aborted.add(msg.job); cancelers.get(msg.job)?.(); return; }
    if (msg.t === 'fillData' || msg.t === 'filled') { inboxes.get(msg.job)?.(msg); return; }
    reply(msg.id ?? 0, (async () => handle(msg))());
  }

  async function start() {
    if (isNode) {
      const wt = await import('node:worker_threads' as any);
      nodePort = wt.parentPort;
      post = (m, tr) => nodePort.postMessage(m, tr);
      onMessage = (fn) => nodePort.on('message', fn);
    } else {
      post = (m, tr) => self.postMessage(m, tr ?? []);
      onMessage = (fn) => { self.onmessage = (ev: any) => fn(ev.data); };
    }
    onMessage(receive);
    post({ t: 'started' });
  }
  void start();
})();
