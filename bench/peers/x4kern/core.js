// x4kern's driver, shared by run.mjs (Node) and page.mjs (Chromium): loads
// x4kern.wasm, sets up one weight type and times the 5 variants of
// x4kern.c in alternating rounds; returns one object per variant group with
// medians and ratios (old / new time: > 1 is faster). now(): milliseconds.
globalThis.x4kernRun = async (bytes, now, o) => {
  const mod = await WebAssembly.compile(bytes);
  const imports = {};
  for (const i of WebAssembly.Module.imports(mod)) {
    imports[i.module] ??= {};
    if (i.kind === 'function') imports[i.module][i.name] = i.name === 'js_now' ? now : () => 0;
  }
  const inst = await WebAssembly.instantiate(mod, imports);
  const e = inst.exports;
  if (e._initialize) e._initialize();
  const types = { q4_0: 2, q8_0: 8, iq4_nl: 20, q4_K: 12, q6_K: 14 };
  if (o.isa === 'wasm_simd128') e.use_simd128();
  const rc = e.setup(types[o.type], o.K, o.N, o.NC);
  if (rc !== 0) throw new Error(`setup: ${rc}`);
  const mem = new Uint8Array(e.memory.buffer);
  let p = e.isa(), isa = '';
  while (mem[p]) isa += String.fromCharCode(mem[p++]);
  const t = [[], [], [], [], []];
  for (let v = 0; v < 5; v++) e.run(v); // warm-up
  // mat-vec calls repeated inside a timing (Chromium's clock is coarse)
  const inner = (v) => (v < 2 ? o.inner ?? 8 : 1);
  for (let r = 0; r < o.rounds; r++) {
    for (let v = 0; v < 5; v++) {
      const t0 = now();
      for (let q = 0; q < inner(v); q++) e.run(v);
      t[v].push((now() - t0) / inner(v));
    }
  }
  const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
  const m = t.map(med), h = [0, 1, 2, 3, 4].map((v) => e.hash(v) >>> 0);
  const wbytes = e.weight_bytes(), x4 = !!e.has_x4();
  const r3 = (x) => +x.toFixed(3);
  return [
    { what: 'x4kern_matvec', type: o.type, isa, K: o.K, N: o.N, rounds: o.rounds, ms_plain: r3(m[0]), ms_x4: r3(m[1]),
      GBps_plain: r3(wbytes / m[0] / 1e6), GBps_x4: r3(wbytes / m[1] / 1e6), x4_vs_plain: r3(m[0] / m[1]), same_bits: h[0] === h[1], hash: h[1], has_x4: x4 },
    { what: 'x4kern_batch', type: o.type, isa, K: o.K, N: o.N, cols: o.NC, rounds: o.rounds, has_gemm: !!e.has_gemm(),
      us_per_col_plain: r3(m[2] * 1e3 / o.NC), us_per_col_x4: r3(m[3] * 1e3 / o.NC), us_per_col_batched: r3(m[4] * 1e3 / o.NC),
      x4_vs_plain: r3(m[2] / m[3]), batched_vs_plain: r3(m[2] / m[4]), batched_vs_x4: r3(m[3] / m[4]),
      same_bits: h[2] === h[3] && h[3] === h[4], hash: h[4], hash_plain: h[2], has_x4: x4 },
  ];
};
