// A/B of Kiln wasm builds in Chromium, generation only: one page per engine
// (bench/peers/web, its open({wasmUrl})), rounds alternate the engines, so
// the builds compared ran next to each other. A build is a directory laid
// out as wasm/dist/ (copy wasm/dist of the other tree under the repository,
// e.g. build/abA/). Prints each round and a JSON line of medians.
//   node bench/peers/ab.mjs MODEL.gguf [ROUNDS (4)] [TOKENS (32)] [ENGINES JSON]
//   ENGINES: [{"name":"A2","threads":2,"wasmUrl":"/build/abA/"},{"name":"B2","threads":2,"wasmUrl":"/wasm/dist/"}, ...]
//   (an engine may also give "build": "st" and "simd": "simd128" / "relaxed"; default mt, auto)
import { rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { launchBenchChromium, startServer } from './server.mjs';
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const model = process.argv[2] ?? path.join(root, 'bench/peers/data/synth-q4_0.gguf');
const rounds = +(process.argv[3] ?? 4), nGen = +(process.argv[4] ?? 32);
const engines = JSON.parse(process.argv[5] ?? '[{"name":"A2","threads":2,"wasmUrl":"/build/abA/"},{"name":"B2","threads":2,"wasmUrl":"/build/abB/"},{"name":"A1","threads":1,"wasmUrl":"/build/abA/"}]');
const { server, url } = await startServer(root, { 'm.gguf': model });
const { context, userDir } = await launchBenchChromium('kiln-ab-');
const pages = [];
for (const e of engines) {
  const page = await context.newPage();
  await page.goto(`${url}/bench/peers/web/index.html`);
  await page.waitForFunction(() => window.__peers?.ready);
  const r = await page.evaluate((o) => window.__peers.open(o), { engine: 'kiln', url: '/gguf/m.gguf', threads: e.threads, build: e.build ?? 'mt', simd: e.simd, ctx: 256, warmup: 1, wasmUrl: e.wasmUrl });
  console.error(e.name, 'loaded', Math.round(r.loadMs), 'ms', r.info.isa, r.info.build, r.info.threads);
  pages.push(page);
}
const res = Object.fromEntries(engines.map((e) => [e.name, []]));
const prompt = 'Once upon a time, there was a little girl named Lily. She loved to play outside.';
for (let r = 0; r < rounds; r++) {
  for (let i = 0; i < engines.length; i++) {
    const o = await pages[i].evaluate((o) => window.__peers.gen(o), { prompt, nGen, reps: 1 });
    res[engines[i].name].push(o.reps[0].tg);
  }
  console.error('round', r, engines.map((e) => `${e.name} ${res[e.name][r].toFixed(1)}`).join('  '));
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s[s.length >> 1]; };
console.log(JSON.stringify({ what: 'ab', model: path.basename(model), nGen, medians: Object.fromEntries(engines.map((e) => [e.name, med(res[e.name])])), all: res }));
await context.close(); server.close(); rmSync(userDir, { recursive: true, force: true }); process.exit(0);
