// Whisper speed in Chromium (Debian's, headless, driven by playwright-core):
// Kiln's npm package (kiln.loadWhisper + whisper.transcribe; build 'st' with
// 1 thread, 'mt' with 2) beside @transcribe/shout (an emscripten build of
// whisper.cpp: SIMD128, pthreads) at 1 and 2 threads, on the same ggml model
// file and the same 30 s of audio (jfk.wav x 3 cut at 30 s, as
// bench/whisper-rtf.mjs). Model: tiny's real shapes (384 wide, 6 heads,
// 4 + 4 layers, F16) with random weights (kiln-whisper-random, seed 10,
// logit_std 3) on the vocabulary and filterbank of whisper.cpp's weight-less
// for-tests-ggml-tiny.bin.
// Both decode with whisper.cpp's greedy defaults: shout's bindings cannot turn
// the temperature fallback off, so Kiln keeps it on too. Two models:
//   --model scripted (default): the random model with its decoder positions
//     rewritten (bench/whisper-scripted-model.mjs) so that greedy decoding
//     emits <|0.00|> + 96 distinct words + <|30.00|> with log-probs ~0: no
//     fallback in either engine, one window, one greedy decode; both engines
//     must print the same token ids (checked: same_tokens_*), so the times
//     compare the same work;
//   --model random: the plain random model, on which every window falls back
//     through all temperatures (best-of 5 sampled decoders each, drawn
//     differently by the two engines): not the same work, kept as the
//     default-parameters row.
// One page (bench/whisper-web/) holds all engines, served cross-origin
// isolated by bench/peers/server.mjs; each round times one whole
// transcription per engine, the order reversed every other round, so that
// compared passes ran next to each other. Prints one JSON line per engine
// (best and median pass, RTF, tokens, mean log-prob of the kept tokens),
// then per-round ratios shout ms / Kiln ms (above 1: Kiln faster) at 1 and
// 2 threads, with the load average.
// Needs js/dist (npm run build:ts), wasm/dist/{st,mt} (scripts/build-wasm.sh)
// and build/bin/kiln-whisper-random (scripts/build-native.sh).
//
//   node bench/whisper-chromium.mjs [--rounds 3] [--seconds 30] [--simd auto|relaxed|simd128] [--build build]
//        [--shape tiny|w64] [--model scripted|random] [--engines kiln-st,shout-1t,kiln-mt,shout-2t]
//
// @transcribe/shout is a devDependency; KILN_SHOUT_FROM=DIR takes it from
// DIR/node_modules instead. KILN_CHROMIUM: the browser (/usr/bin/chromium).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBenchChromium, startServer } from './peers/server.mjs';
import { scriptWhisperModel } from './whisper-scripted-model.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(k) ? args[args.indexOf(k) + 1] : d);
const rounds = Number(opt('--rounds', '3'));
const modelKind = opt('--model', 'scripted');
if (!['scripted', 'random'].includes(modelKind)) throw new Error(`--model: ${modelKind} is not scripted or random`);
const seconds = Number(opt('--seconds', '30'));
const simd = opt('--simd', 'auto');
const build = path.resolve(root, opt('--build', 'build'));
const median = (a) => { const s = [...a].sort((p, q) => p - q); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
const load = () => os.loadavg().map((v) => +v.toFixed(2));
const cpu = os.cpus()[0]?.model ?? 'unknown';

const from = process.env.KILN_SHOUT_FROM ? path.resolve(process.env.KILN_SHOUT_FROM) + '/' : import.meta.url;
const shoutPkg = path.dirname(createRequire(from).resolve('@transcribe/shout/package.json'));
const shoutVersion = JSON.parse(fs.readFileSync(path.join(shoutPkg, 'package.json'), 'utf8')).version;
const shoutJs = path.join(shoutPkg, 'src/shout/shout.wasm.js');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-whisper-chromium-'));
const sh = (cmd, a) => execFileSync(cmd, a, { stdio: ['ignore', 'pipe', 'pipe'] });
// --shape w64: the test suites' small shape (64 wide, 2 heads, 2 + 3 layers), a quick check of the harness
const shape = opt('--shape', 'tiny');
const SHAPES = { tiny: ['--state', '384', '--head', '6', '--audio-layer', '4', '--text-layer', '4'],
  w64: ['--state', '64', '--head', '2', '--audio-layer', '2', '--text-layer', '3'] };
if (!SHAPES[shape]) throw new Error(`--shape: ${shape} is not one of ${Object.keys(SHAPES).join(', ')}`);
const model = path.join(tmp, 'tiny-real-f16.bin');
sh(path.join(build, 'bin/kiln-whisper-random'), [path.join(root, 'tests/data/audio/for-tests-ggml-tiny.bin'), model,
  ...SHAPES[shape], '--ftype', '1', '--seed', '10', '--logit-std', '3']);
const script = modelKind === 'scripted' ? scriptWhisperModel(model, model) : null;
const jfk = path.join(root, 'tests/data/audio/jfk.wav');
const wav = path.join(tmp, 'a30.wav');
sh('sox', [jfk, jfk, jfk, wav, 'trim', '0', String(seconds)]);
// the model, the audio and shout's single-file build (wasm inlined; its pthread workers load the same URL) served by name
const { server, url } = await startServer(root, { 'tiny-real-f16.bin': model, 'a30.wav': wav, 'shout.wasm.js': shoutJs });
const { context, userDir } = await launchBenchChromium('kiln-whisper-chr-');
// this browser's processes (those under the one started with our profile folder) sampled every 2 s:
// the largest one's RSS (the renderer holds the page, its workers and every wasm memory), peak per pass
function chromiumRssMb() {
  try {
    const rows = execFileSync('ps', ['-eo', 'pid=,ppid=,rss=,args='], { maxBuffer: 16 << 20 }).toString().trim().split('\n')
      .map((l) => { const m = /^\s*(\d+)\s+(\d+)\s+(\d+)\s+(.*)$/.exec(l); return m && { pid: +m[1], ppid: +m[2], rss: +m[3], args: m[4] }; }).filter(Boolean);
    const ours = new Set(rows.filter((r) => r.args.includes(userDir)).map((r) => r.pid));
    for (let grew = true; grew;) { grew = false; for (const r of rows) if (!ours.has(r.pid) && ours.has(r.ppid)) { ours.add(r.pid); grew = true; } }
    return Math.max(0, ...rows.filter((r) => ours.has(r.pid)).map((r) => r.rss)) / 1024;
  } catch { return null; }
}
let rssPeak = 0;
const rssTimer = setInterval(() => { const v = chromiumRssMb(); if (v != null) rssPeak = Math.max(rssPeak, v); }, 2000);
try {
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('crash', () => { errors.push(`renderer crashed (largest browser process peaked at ${rssPeak.toFixed(0)} MB RSS this pass)`); console.error(`  renderer crashed: ${errors.slice(-1)[0]} (load ${load().join(' ')})`); });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); else if (m.text().startsWith('[whisper-web]')) console.error(`  ${m.text()} (load ${load().join(' ')})`); });
  await page.goto(`${url}/bench/whisper-web/index.html`);
  await page.waitForFunction(() => window.__whisper?.ready, null, { timeout: 60_000 });
  const call = (fn, o) => page.evaluate(([f, a]) => window.__whisper[f](a), [fn, o]).catch((e) => {
    throw new Error(`${fn}: ${String(e.message ?? e).split('\n')[0]} ${errors.slice(0, 3).join(' | ')}`);
  });
  const order = opt('--engines', 'kiln-st,shout-1t,kiln-mt,shout-2t').split(',');
  console.error(`opening (load ${load().join(' ')}) ...`);
  const opened = await call('open', { model: '/gguf/tiny-real-f16.bin', wav: '/gguf/a30.wav', seconds, simd, shoutUrl: '/gguf/shout.wasm.js', warmS: 3, engines: order });
  const browser = context.browser()?.version() ?? null;
  const engines = {
    'kiln-st': { engine: 'kiln-st', threads: 1, impl: 'kiln-wasm-st-chromium' },
    'shout-1t': { engine: 'shout', threads: 1, impl: `@transcribe/shout@${shoutVersion}` },
    'kiln-mt': { engine: 'kiln-mt', threads: 2, impl: 'kiln-wasm-mt-chromium' },
    'shout-2t': { engine: 'shout', threads: 2, impl: `@transcribe/shout@${shoutVersion}` },
  };
  for (const n of order) if (!engines[n]) throw new Error(`--engines: ${n} is not one of ${Object.keys(engines).join(', ')}`);
  for (const n of Object.keys(engines)) if (!order.includes(n)) delete engines[n];
  for (const e of Object.values(engines)) { e.ms = []; e.load = []; }
  for (let r = 0; r < rounds; r++) {
    for (const name of r % 2 ? [...order].reverse() : order) {
      const e = engines[name];
      rssPeak = 0;
      const res = await call('run', { engine: e.engine, threads: e.threads });
      e.ms.push(res.ms); e.load.push(load()[0]); e.rss = Math.max(e.rss ?? 0, rssPeak);
      e.segments = res.segments; e.meanLogp = res.meanLogp; e.tokens = res.ids ? res.ids.reduce((s, v) => s + v.length, 0) : null; e.ids = res.ids; e.text = res.text;
      console.error(`  round ${r + 1} ${name}: ${(res.ms / 1e3).toFixed(1)} s, ${res.segments} segments, ${e.tokens} tokens, mean log-p ${res.meanLogp?.toFixed(4)}, browser peak ${rssPeak.toFixed(0)} MB (load ${load().join(' ')})`);
    }
  }
  for (const [name, e] of Object.entries(engines)) {
    const best = Math.min(...e.ms), med = median(e.ms);
    console.log(JSON.stringify({ bench: 'whisper-chromium', cpu, browser, engine: name, impl: e.impl, threads: e.threads,
      ...(e.engine === 'shout' ? { simd: 'simd128' } : opened.info[name]),
      model: `${shape}-shape f16 (random weights${script ? ', scripted decoder' : ''})`, audio_s: seconds, rounds, best_s: +(best / 1e3).toFixed(2), median_s: +(med / 1e3).toFixed(2),
      rtf_median: +(med / 1e3 / seconds).toFixed(4), s_all: e.ms.map((v) => +(v / 1e3).toFixed(2)), load1_at_each: e.load,
      segments: e.segments, tokens: e.tokens, rss_peak_mb: Math.round(e.rss), mean_logp: e.meanLogp == null ? null : +e.meanLogp.toFixed(4),
      ...(script ? { scripted_sequence: e.ids ? e.ids.flat().join() === script.targets.join() : null } : {}) }));
  }
  // same work? the token ids of the last pass of each engine, Kiln's against shout's at the same threads
  // (null: shout's result did not reach the page, see bench/whisper-web/whisper.js)
  const ratio = (k, s) => (engines[k] && engines[s] ? engines[k].ms.map((v, i) => engines[s].ms[i] / v) : []);
  const same = (a, b) => (a?.ids && b?.ids ? a.ids.flat().join() === b.ids.flat().join() : null);
  const firstDiff = (a, b) => { if (!a?.ids || !b?.ids) return null; const x = a.ids.flat(), y = b.ids.flat(); let i = 0; while (i < x.length && x[i] === y[i]) i++; return i; };
  console.log(JSON.stringify({
    bench: 'whisper-chromium-ratio', model: modelKind, what: 'shout ms / Kiln ms per round (above 1: Kiln faster)', cross_origin_isolated: opened.crossOriginIsolated,
    hardware_concurrency: opened.hardwareConcurrency,
    st_1t: { per_round: ratio('kiln-st', 'shout-1t').map((v) => +v.toFixed(3)), median: +(median(ratio('kiln-st', 'shout-1t')) ?? NaN).toFixed(3) },
    mt_1t: { per_round: ratio('kiln-mt', 'shout-1t').map((v) => +v.toFixed(3)), median: +(median(ratio('kiln-mt', 'shout-1t')) ?? NaN).toFixed(3) },
    mt_2t: { per_round: ratio('kiln-mt', 'shout-2t').map((v) => +v.toFixed(3)), median: +(median(ratio('kiln-mt', 'shout-2t')) ?? NaN).toFixed(3) },
    same_tokens_1t: same(engines['kiln-st'], engines['shout-1t']), same_tokens_2t: same(engines['kiln-mt'], engines['shout-2t']),
    same_tokens_st_mt: same(engines['kiln-st'], engines['kiln-mt']),
    first_differing_token_1t: firstDiff(engines['kiln-st'], engines['shout-1t']),
    tokens: Object.fromEntries(Object.entries(engines).map(([n, e]) => [n, e.tokens])),
    load_end: load(),
  }));
  await call('close', {}).catch(() => {});
} finally {
  clearInterval(rssTimer);
  await context.close(); server.close();
  fs.rmSync(userDir, { recursive: true, force: true }); fs.rmSync(tmp, { recursive: true, force: true });
}
