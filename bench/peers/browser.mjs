// Token generation in Chromium (Debian's, driven by playwright-core): Kiln's
// npm package (kiln-mt with N threads, kiln-st) vs @wllama/wllama (N threads
// and 1) on the same GGUF files, served cross-origin isolated. Per model,
// each engine gets its own page and loads the file once; then each round
// runs every engine once, in turn (wllama, kiln-mt, wllama-1t, kiln-st,
// wllama, ...), so the engines compared in a ratio ran next to each other;
// ratios are per round (kiln-mt / wllama, kiln-st / wllama-1t), then their
// median. While all engines sit loaded, the browser's idle CPU use is
// sampled (idle engines must not spin and steal the running one's cores). Checks: Kiln's greedy token ids equal
// llama.cpp's (native, node-llama-cpp), and Kiln's text equals wllama's.
import { rmSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stats, emit } from './common.mjs';
import { launchBenchChromium, startServer } from './server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// llama.cpp's detokenize drops the first piece's leading space: texts are compared trimmed
const sameText = (a, b) => a != null && b != null && a.trimStart() === b.trimStart();
const firstDiff = (a, b) => { const n = Math.min(a.length, b.length); for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i; return a.length === b.length ? -1 : n; };

// CPU cores the browser's processes (those started with our profile dir) use over ms
async function browserCpu(userDir, ms) {
  const tick = 100; // USER_HZ
  const sample = () => {
    const procs = [];
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
        procs.push({ pid: +pid, ppid: +f[1], cpu: (+f[11] + +f[12]) / tick, mine: readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(userDir) });
      } catch { /* gone */ }
    }
    // the processes started with our profile dir and all their descendants
    const inTree = new Set(procs.filter((p) => p.mine).map((p) => p.pid));
    for (let grew = true; grew;) { grew = false; for (const p of procs) if (!inTree.has(p.pid) && inTree.has(p.ppid)) { inTree.add(p.pid); grew = true; } }
    return procs.filter((p) => inTree.has(p.pid)).reduce((t, p) => t + p.cpu, 0);
  };
  try {
    const a = sample(), t0 = Date.now();
    await new Promise((r) => setTimeout(r, ms));
    return Math.round(((sample() - a) / ((Date.now() - t0) / 1e3)) * 100) / 100;
  } catch { return null; }
}

// longPrompt / chatPrompt (on the models whose key is in longModels): after
// the rounds, kiln-mt (N threads), kiln-st and wllama (N threads) evaluate the long prompt once
// each (prompt tokens/s: the pp512 row), then time the first token of the
// chat-formatted one (a one-token greedy completion, wall time in the page).
export async function runBrowser({ models, threads = 2, prompt, nGen = 16, rounds = 2, reps = 1, ctx = 256, bwGBs = {}, reference = {}, log = console.error, timeoutMs = 240_000, warmup = 1, engines: which = null, leftS = () => Infinity, longPrompt = null, chatPrompt = null, longModels = [] }) {
  const ggufs = Object.fromEntries(models.map((m) => [path.basename(m.path), m.path]));
  const { server, url } = await startServer(root, ggufs);
  const { context, userDir } = await launchBenchChromium('kiln-peers-');
  const withTimeout = async (p, what) => {
    let timer;
    const timeout = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`${what} timed out after ${timeoutMs / 1000} s`)), timeoutMs); });
    try { return await Promise.race([p, timeout]); } finally { clearTimeout(timer); }
  };
  // a page with one engine loaded: call(fn, opts) -> result or {error}
  const openEngine = async (opts) => {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const call = async (fn, o) => {
      try { return await withTimeout(page.evaluate(([f, x]) => window.__peers[f](x), [fn, o]), fn); } catch (e) {
        return { error: String(e.message ?? e).split('\n')[0], pageErrors: errors.slice(0, 3) };
      }
    };
    try {
      await page.goto(`${url}/bench/peers/web/index.html`);
      await page.waitForFunction(() => window.__peers?.ready, null, { timeout: 60_000 });
    } catch (e) { return { page, call, opened: { error: String(e.message ?? e).split('\n')[0] } }; }
    return { page, call, opened: await call('open', opts) };
  };
  let engines = [
    { name: 'wllama', fn: 'wllama', threads },
    { name: 'kiln-mt', fn: 'kiln', threads, build: 'mt' },
    { name: 'wllama-1t', fn: 'wllama', threads: 1 },
    { name: 'kiln-st', fn: 'kiln', threads: 1, build: 'st' },
  ];
  // on request only (--engines): Kiln forced to plain SIMD128, beside the
  // default ('auto': relaxed SIMD in Chromium), to show what relaxed SIMD
  // adds; and kiln-mt on one thread, to tell the mt build's kernels from
  // its thread scaling
  const extra = [
    { name: 'kiln-mt-simd128', fn: 'kiln', threads, build: 'mt', simd: 'simd128' },
    { name: 'kiln-st-simd128', fn: 'kiln', threads: 1, build: 'st', simd: 'simd128' },
    { name: 'kiln-mt-1t', fn: 'kiln', threads: 1, build: 'mt' },
  ];
  if (which) engines = [...engines, ...extra].filter((e) => which.includes(e.name));
  const out = [];
  try {
    for (const [mi, mdl] of models.entries()) {
      // this model's share of the time left; rounds after the first run while the last one still fits
      const share = leftS() / (models.length - mi), mStart = Date.now();
      let lastRoundS = 0, roundsRun = 0;
      const res = Object.fromEntries(engines.map((e) => [e.name, { pp: [], tg: [], texts: [], tokens: [], load_ms: [], error: null }]));
      const pages = {};
      let idleCpu = null;
      try {
        for (const e of engines) {
          const o = res[e.name];
          const h = await openEngine({ engine: e.fn, url: `/gguf/${path.basename(mdl.path)}`, threads: e.threads, build: e.build, simd: e.simd, ctx, warmup });
          pages[e.name] = h;
          if (h.opened.error) { o.error = h.opened.error; log(`  browser ${mdl.name} ${e.name}: error ${h.opened.error} ${h.opened.pageErrors?.join(' | ') ?? ''}`); continue; }
          o.load_ms.push(h.opened.loadMs); o.info = h.opened.info;
          log(`  browser ${mdl.name} ${e.name}: loaded in ${(h.opened.loadMs / 1000).toFixed(1)} s`);
        }
        await new Promise((r) => setTimeout(r, 2000)); // background compiles and GC after loading settle
        idleCpu = await browserCpu(userDir, 2000);
        for (let r = 0; r < rounds; r++) {
          if (r > 0 && (Date.now() - mStart) / 1e3 + lastRoundS > share) { log(`  browser ${mdl.name}: ${r} of ${rounds} rounds (time budget)`); break; }
          const rStart = Date.now();
          roundsRun++;
          for (const e of engines) {
            const o = res[e.name];
            if (o.error) { o.pp.push(null); o.tg.push(null); continue; } // keeps rounds aligned
            const t0 = Date.now();
            const x = await pages[e.name].call('gen', { prompt, nGen, reps });
            if (x.error) { o.error = x.error; o.pp.push(null); o.tg.push(null); log(`  browser ${mdl.name} ${e.name}: error ${x.error} ${x.pageErrors?.join(' | ') ?? ''}`); continue; }
            // one value per round (the median of its reps), so rounds pair up across engines
            o.pp.push(stats(x.reps.map((q) => q.pp)).median); o.tg.push(stats(x.reps.map((q) => q.tg)).median);
            for (const q of x.reps) { o.texts.push(q.text); if (q.tokens) o.tokens.push(q.tokens); }
            o.predicted_n = x.reps[0]?.predicted_n; o.prompt_n = x.reps[0]?.prompt_n;
            log(`  browser ${mdl.name} round ${r + 1} ${e.name}: pp ${x.reps[0]?.pp?.toFixed(1)} tg ${x.reps[0]?.tg?.toFixed(2)} tok/s (${((Date.now() - t0) / 1000).toFixed(0)} s)`);
          }
          lastRoundS = (Date.now() - rStart) / 1e3;
        }
        if (longModels.includes(mdl.key) && (longPrompt || chatPrompt)) {
          // Kiln first: a wllama call that times out keeps computing in its page
          for (const name of ['kiln-mt', 'kiln-st', 'wllama']) {
            const o = res[name];
            if (!o || o.error) continue;
            o.long = {};
            if (longPrompt) {
              const x = await pages[name].call('gen', { prompt: longPrompt, nGen: 2, reps: 1 });
              o.long.pp = x.error ? { error: x.error } : { pp: x.reps[0]?.pp ?? null, prompt_n: x.reps[0]?.prompt_n ?? null };
              log(`  browser ${mdl.name} ${name} long prompt: ${x.error ? `error ${x.error}` : `${x.reps[0]?.prompt_n} tokens, pp ${x.reps[0]?.pp?.toFixed(1)} tok/s`}`);
            }
            if (chatPrompt && !o.long.pp?.error) {
              const x = await pages[name].call('first', { prompt: chatPrompt });
              o.long.ttft = x.error ? { error: x.error } : x;
              log(`  browser ${mdl.name} ${name} chat prompt: ${x.error ? `error ${x.error}` : `${x.prompt_n} tokens, first token after ${(x.ms / 1000).toFixed(2)} s`}`);
            }
          }
        }
      } finally {
        for (const h of Object.values(pages)) { await h.call('close', {}).catch(() => {}); await h.page.close().catch(() => {}); }
      }
      const bw = bwGBs[threads] ?? null, bw1 = bwGBs[1] ?? null;
      for (const e of engines) {
        const o = res[e.name];
        const b = e.threads > 1 ? bw : bw1;
        o.tgStats = stats(o.tg); o.ppStats = stats(o.pp);
        o.bw_frac = b && o.tgStats.median && mdl.bytesPerToken ? (o.tgStats.median * mdl.bytesPerToken) / (b * 1e9) : null;
      }
      const ratio = (k, w) => {
        if (!res[k] || !res[w]) return null;
        const rs = res[k].tg.map((x, i) => (x != null && res[w].tg[i] ? x / res[w].tg[i] : NaN));
        const s = stats(rs);
        return s.n ? { ...s, per_round: rs } : null;
      };
      // checks: Kiln's ids vs llama.cpp's (native), Kiln's text vs wllama's and vs llama.cpp's
      const ref = reference[mdl.name] ?? null;
      const wTexts = [...(res.wllama?.texts ?? []), ...(res['wllama-1t']?.texts ?? [])];
      const check = {};
      for (const k of ['kiln-mt', 'kiln-st']) {
        const o = res[k];
        if (!o || !o.tokens.length) continue;
        const d = ref?.ids ? o.tokens.map((t) => firstDiff(t, ref.ids.slice(0, t.length))) : [];
        check[k] = {
          same_tokens_as_llamacpp: ref?.ids ? d.every((x) => x < 0) : null, first_diff: d.find((x) => x >= 0) ?? -1,
          same_text_as_llamacpp: ref?.text != null ? o.texts.every((t) => sameText(t, ref.text)) : null,
          same_text_as_wllama: wTexts.length ? o.texts.every((t) => wTexts.every((w) => sameText(t, w))) : null,
          stable: o.tokens.every((t) => firstDiff(t, o.tokens[0]) < 0),
        };
      }
      const wllamaVsNative = ref?.text != null && wTexts.length ? wTexts.every((t) => sameText(t, ref.text)) : null;
      const rec = emit({
        what: 'peers_browser', model: mdl.name, threads, browser_idle_cpu_cores: idleCpu, gen_tokens: nGen, rounds: roundsRun, rounds_asked: rounds, reps_per_round: reps, weight_MB_per_token: mdl.bytesPerToken ? mdl.bytesPerToken / 1e6 : null, read_bw_GBs: bw,
        engines: Object.fromEntries(engines.map((e) => { const o = res[e.name]; return [e.name, {
          threads: e.threads, tg: o.tg, pp: o.pp, tg_stats: o.tgStats, pp_stats: o.ppStats, bw_frac: o.bw_frac, error: o.error,
          load_ms: o.load_ms, prompt_n: o.prompt_n ?? null, predicted_n: o.predicted_n ?? null, text: o.texts[0] ?? null, tokens: o.tokens[0] ?? null, info: o.info ?? null, long: o.long ?? null }]; })),
        ratio_kiln_mt_vs_wllama: ratio('kiln-mt', 'wllama'), ratio_kiln_st_vs_wllama_1t: ratio('kiln-st', 'wllama-1t'),
        check, wllama_text_matches_llamacpp: wllamaVsNative, llamacpp_ids: ref?.ids ?? null, llamacpp_text: ref?.text ?? null,
      });
      const f = (k) => (res[k] ? (res[k].error ? 'error' : res[k].tgStats.median?.toFixed(2)) : '-');
      log(`  browser ${mdl.name}: tg wllama ${threads}t ${f('wllama')}, 1t ${f('wllama-1t')}; kiln-mt ${f('kiln-mt')}, kiln-st ${f('kiln-st')} tok/s`);
      out.push(rec);
    }
  } finally {
    await context.close(); server.close(); rmSync(userDir, { recursive: true, force: true });
  }
  return out;
}
