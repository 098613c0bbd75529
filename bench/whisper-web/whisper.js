// Runs in Chromium, driven by bench/whisper-chromium.mjs: whisper_full over
// the same 16 kHz samples and the same ggml model file with Kiln's npm
// package (kiln.loadWhisper + whisper.transcribe; build 'st' with one
// thread and 'mt' with two, each engine in its worker) and with
// @transcribe/shout, an emscripten build of whisper.cpp (SIMD128, pthreads;
// its whisper_full runs on a pthread of its own, the page's thread waits).
// Both decode with whisper.cpp's defaults for greedy decoding (temperature 0,
// fallback step 0.2 with best-of 5, thresholds 2.4 / -1 / 0.6), language en,
// no token timestamps: shout's bindings set nothing else, so Kiln gets the
// same parameters.
//   window.__whisper.open({model, wav, seconds, simd, shoutUrl, warmS, engines}) -> {info}
//   window.__whisper.run({engine: 'kiln-st' | 'kiln-mt' | 'shout', threads}) -> {ms, segments, ids, text, meanLogp}
//   window.__whisper.close()
const RATE = 16000;
let x = null, modelBytes = null, shout = null, warm = null;
const kiln = {};
const t00 = performance.now();
const stage = (what) => console.log(`[whisper-web] ${((performance.now() - t00) / 1e3).toFixed(1)} s: ${what}`);

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

// the samples of a 16-bit PCM mono wav (its "data" chunk, found by walking the RIFF chunks)
function wavSamples(wav) {
  const dv = new DataView(wav.buffer, wav.byteOffset, wav.byteLength);
  let off = 12;
  while (off + 8 <= wav.length && String.fromCharCode(...wav.subarray(off, off + 4)) !== 'data') off += 8 + dv.getUint32(off + 4, true) + (dv.getUint32(off + 4, true) & 1);
  if (off + 8 > wav.length) throw new Error('wav: no data chunk');
  const n = Math.min(dv.getUint32(off + 4, true), wav.length - off - 8) >> 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = dv.getInt16(off + 8 + 2 * i, true) / 32768;
  return out;
}

// shout's bindings: Module.init(file, dtw), Module.transcribe(samples, lang, threads, translate,
// max_len, split_on_word, suppress_nst, token_timestamps); whisper_full runs on a thread of its
// own, which prints "running whisper_full done" when it returns (the pass's end, timed here) and
// then posts the result in whisper.cpp's JSON layout to Module.onTranscribed. That JSON reaches
// the page as script text, so a token whose text holds a control character breaks it: the pass
// then counts from the print alone, without token ids.
async function openShout(url) {
  const createModule = (await import(url)).default;
  const lines = [];
  const M = {
    print: (s) => { if (String(s).includes('running whisper_full done')) M.fullDone?.(performance.now()); },
    printErr: (s) => { lines.push(String(s)); if (lines.length > 20) lines.shift(); },
    onProgress: () => {}, onNewSegment: () => {},
    onTranscribed: (r) => M.result?.(r),
    onCanceled: () => M.result?.(null),
  };
  const mod = await createModule(M);
  mod.FS_createDataFile('/', 'model.bin', modelBytes.slice(), true, true);
  mod.init('model.bin', '');
  return { mod, lines };
}

async function shoutPass(samples, threads) {
  const { mod, lines } = shout;
  const ended = new Promise((resolve) => { mod.fullDone = resolve; });
  const result = new Promise((resolve) => { mod.result = resolve; });
  const t0 = performance.now();
  const rc = mod.transcribe(samples, 'en', threads, false, 0, false, false, false);
  if (rc !== 0) throw new Error(`shout: transcribe returned ${rc}: ${lines.join(' | ')}`);
  const t1 = await ended;
  const r = await Promise.race([result, new Promise((resolve) => setTimeout(() => resolve(undefined), 5000))]);
  mod.fullDone = mod.result = null;
  const segs = r?.transcription ?? null;
  return { ms: t1 - t0, segments: segs ? segs.length : null, ids: segs ? segs.map((s) => s.tokens.map((t) => t.id)) : null,
    meanLogp: segs ? meanLogp(segs.flatMap((s) => s.tokens.map((t) => t.p))) : null,
    text: segs ? segs.map((s) => s.text).join('') : null };
}

// the mean natural log of the kept tokens' probabilities (whisper.cpp's avg_logprobs over a segment's tokens;
// below -1 it falls back to the next temperature)
const meanLogp = (ps) => (ps.length ? ps.reduce((a, p) => a + Math.log(p), 0) / ps.length : null);

async function kilnPass(k, samples) {
  const t0 = performance.now();
  const r = await k.whisper.transcribe(samples, RATE, { language: 'en' });
  const ms = performance.now() - t0;
  return { ms, segments: r.segments.length, ids: r.segments.map((s) => s.tokens.map((t) => t.id)), text: r.text,
    meanLogp: meanLogp(r.segments.flatMap((s) => s.tokens.map((t) => t.p))) };
}

window.__whisper = {
  async open({ model, wav, seconds, simd, shoutUrl, warmS, engines }) {
    modelBytes = await bytes(model);
    x = wavSamples(await bytes(wav)).slice(0, seconds * RATE);
    warm = x.slice(0, warmS * RATE);
    const { Kiln } = await import('/js/dist/index.js');
    for (const [name, build, threads] of [['kiln-st', 'st', 1], ['kiln-mt', 'mt', 2]].filter(([n]) => engines.includes(n))) {
      const k = await Kiln.create({ threads, build, simd, wasmUrl: '/wasm/dist/' });
      kiln[name] = { k, whisper: await k.loadWhisper(modelBytes.slice()), info: k.info() };
      stage(`${name} loaded`);
    }
    const shoutThreads = [1, 2].filter((t) => engines.includes(`shout-${t}t`));
    if (shoutThreads.length) { shout = await openShout(shoutUrl); stage('shout loaded'); }
    // untimed passes over the first warmS seconds, so that V8 has tiered the hot wasm up
    for (const [name, k] of Object.entries(kiln)) { await kilnPass(k, warm); stage(`${name} warmed up`); }
    for (const t of shoutThreads) { await shoutPass(warm, t); stage(`shout ${t} thread(s) warmed up`); }
    const info = Object.fromEntries(Object.entries(kiln).map(([n, k]) => [n, { build: k.info.build, simd: k.info.simdFlavor, isa: k.info.isa, threads: k.info.threads }]));
    return { info, crossOriginIsolated, samples: x.length, hardwareConcurrency: navigator.hardwareConcurrency };
  },
  async run({ engine, threads }) {
    return engine === 'shout' ? shoutPass(x, threads) : kilnPass(kiln[engine], x);
  },
  async close() {
    for (const k of Object.values(kiln)) { k.whisper.free(); k.k.destroy(); }
    try { shout?.mod.free(); } catch { /* the module's own teardown */ }
  },
};
window.__whisper.ready = true;
