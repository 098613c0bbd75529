// Chromium (playwright-core, /usr/bin/chromium, headless): the same as
// run.mjs in a page, timed by performance.now (wall time); X4KERN_WASM as there.
//   node bench/peers/x4kern/page.mjs [TYPE (iq4_nl)] [ROUNDS (7)] [COLS (24)] [K (2048)] [N (5632)] [ISA (best; wasm_simd128)]
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
const dir = path.dirname(fileURLToPath(import.meta.url));
const [type = 'iq4_nl', rounds = 7, NC = 24, K = 2048, N = 5632, isa = ''] = process.argv.slice(2);
const b64 = readFileSync(process.env.X4KERN_WASM ?? path.join(dir, '../../../build/x4kern/x4kern.wasm')).toString('base64');
const core = readFileSync(path.join(dir, 'core.js'), 'utf8');
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage();
await page.setContent('<!doctype html><title>x4kern</title>');
await page.addScriptTag({ content: core });
const res = await page.evaluate(async ({ b64, o }) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  return globalThis.x4kernRun(bytes, () => performance.now(), o);
}, { b64, o: { type, rounds: +rounds, NC: +NC, K: +K, N: +N, isa } });
const ua = await page.evaluate(() => navigator.userAgent.match(/Chrome\/[\d.]+/)?.[0] ?? navigator.userAgent);
for (const r of res) console.log(JSON.stringify({ engine: ua, clock: 'wall', ...r }));
await browser.close();
