// Token generation in Chromium (Debian's, driven by playwright-core): Kiln's
// npm package (kiln-mt with N threads, kiln-st) vs @wllama/wllama on the same
// GGUF files, served cross-origin isolated. Engines alternate per rep group
// (wllama, kiln-mt, kiln-st, wllama, ...), each in a fresh page.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stats, emit } from './common.mjs';
import { startServer } from './server.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';

export async function runBrowser({ models, threads = 2, prompt, nGen = 16, rounds = 2, repsPerRound = 1, ctx = 256, bwGBs = {}, nativeText = {}, log = console.error, timeoutMs = 240_000, warmup = 1 }) {
  const { chromium } = await import('playwright-core');
  const ggufs = Object.fromEntries(models.map((m) => [path.basename(m.path), m.path]));
  const { server, url } = await startServer(root, ggufs);
  const userDir = mkdtempSync(path.join(tmpdir(), 'kiln-peers-'));
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM, headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const runIn = async (fn, opts) => {
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    try {
      await page.goto(`${url}/bench/peers/web/index.html`);
      await page.waitForFunction(() => window.__peers?.ready, null, { timeout: 60_000 });
      let timer;
      const timeout = new Promise((_, rej) => { timer = setTimeout(() => rej(new Error(`timed out after ${timeoutMs / 1000} s`)), timeoutMs); });
      try { return await Promise.race([page.evaluate(([f, o]) => window.__peers[f](o), [fn, opts]), timeout]); } finally { clearTimeout(timer); }
    } catch (e) {
      return { error: String(e.message ?? e).split('\n')[0], pageErrors: errors.slice(0, 3) };
    } finally { await page.close(); }
  };
  const engines = [
    { name: 'wllama', fn: 'wllama', threads },
    { name: 'wllama-1t', fn: 'wllama', threads: 1 },
    { name: `kiln-mt`, fn: 'kiln', threads, build: 'mt' },
    { name: 'kiln-st', fn: 'kiln', threads: 1, build: 'st' },
  ];
  const out = [];
  try {
    for (const mdl of models) {
      const res = Object.fromEntries(engines.map((e) => [e.name, { pp: [], tg: [], texts: [], error: null, pending: null }]));
      for (let r = 0; r < rounds; r++) {
        for (const e of engines) {
          const o = res[e.name];
          if (o.error || o.pending) continue;
          const x = await runIn(e.fn, { url: `/gguf/${path.basename(mdl.path)}`, threads: e.threads, build: e.build, prompt, nGen, reps: repsPerRound, warmup: r === 0 ? warmup : 0, ctx });
          if (x.error) { o.error = x.error; log(`  browser ${mdl.name} ${e.name}: error ${x.error} ${x.pageErrors?.join(' | ') ?? ''}`); continue; }
          if (x.pending) { o.pending = x.pending; continue; }
          for (const rr of x.reps) { o.pp.push(rr.pp); o.tg.push(rr.tg); o.texts.push(rr.text); }
          o.info = x.info;
        }
      }
      const bw = bwGBs[threads] ?? null, bw1 = bwGBs[1] ?? null;
      for (const e of engines) {
        const o = res[e.name];
        const b = e.threads > 1 ? bw : bw1;
        const s = stats(o.tg);
        o.tgStats = s; o.ppStats = stats(o.pp);
        o.bw_frac = b && s.median ? (s.median * mdl.bytesPerToken) / (b * 1e9) : null;
      }
      const w = res.wllama;
      const ratio = (k) => (res[k].tg.length && w.tg.length ? stats(res[k].tg.map((x, i) => x / w.tg[i % w.tg.length])) : null);
      const nat = nativeText[mdl.name]; // llama.cpp's detokenize drops the first piece's leading space: compared trimmed
      const rec = emit({
        what: 'peers_browser', model: mdl.name, threads, gen_tokens: nGen, weight_MB_per_token: mdl.bytesPerToken / 1e6, read_bw_GBs: bw,
        engines: Object.fromEntries(engines.map((e) => [e.name, { threads: e.threads, tg: res[e.name].tg, pp: res[e.name].pp, tg_stats: res[e.name].tgStats, pp_stats: res[e.name].ppStats, bw_frac: res[e.name].bw_frac, error: res[e.name].error, pending: res[e.name].pending, text: res[e.name].texts[0] ?? null, info: res[e.name].info ?? null }])),
        ratio_kiln_mt_vs_wllama: ratio('kiln-mt'), ratio_kiln_st_vs_wllama_1t: res['kiln-st'].tg.length && res['wllama-1t'].tg.length ? stats(res['kiln-st'].tg.map((x, i) => x / res['wllama-1t'].tg[i % res['wllama-1t'].tg.length])) : null,
        wllama_text_matches_native: nat != null && w.texts.length ? w.texts.every((t) => { const a = t.trimStart(), b = nat.trimStart(); return a.startsWith(b) || b.startsWith(a); }) : null,
      });
      log(`  browser ${mdl.name}: wllama ${threads}t ${w.tgStats.median?.toFixed(2)} tok/s, 1t ${res['wllama-1t'].tgStats.median?.toFixed(2)}; kiln-mt ${res['kiln-mt'].pending ? 'pending' : res['kiln-mt'].tgStats.median?.toFixed(2)}`);
      out.push(rec);
    }
  } finally {
    await context.close(); server.close(); rmSync(userDir, { recursive: true, force: true });
  }
  return out;
}
