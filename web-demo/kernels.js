// Kernels page: f32/f16/bf16/quantized matmul GFLOPS in the engine's worker,
// drawn as an SVG bar chart.
import { nav, $, startEngine } from './common.js';

nav();
const TYPES = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_1', 'q5_0', 'q5_1', 'q4_k', 'q5_k', 'q6_k'];
const demo = window.__kilnDemo = { ready: false, running: false, results: [] };
let kiln, refreshMemory;

function random(n, seed) {
  const a = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) { s = (Math.imul(s, 1664525) + 1013904223) >>> 0; a[i] = (s / 4294967296) * 2 - 1; }
  return a;
}

/** weights of `type`: quantized once (a cast computed by the engine), then held as a plain tensor */
async function weights(type, k, n) {
  const w32 = kiln.tensor(random(k * n, 7), [k, n]);
  if (type === 'f32') return w32;
  const cast = w32.cast(type);
  const bytes = await cast.data();
  cast.free(); w32.free();
  return kiln.tensor(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), [k, n], type);
}

async function benchType(type, size) {
  const k = size, n = size, m = size;
  const x = kiln.tensor(random(k * m, 11), [k, m]);
  let w;
  try {
    w = await weights(type, k, n);
    let best = Infinity, runs = 0;
    const started = performance.now();
    // at least 3 runs, then until ~0.4 s are spent
    while (runs < 3 || (performance.now() - started < 400 && runs < 50)) {
      const y = w.matmul(x);
      const t0 = performance.now();
      await y.data();
      best = Math.min(best, performance.now() - t0);
      y.free();
      runs++;
    }
    return { type, gflops: (2 * k * n * m) / (best / 1000) / 1e9, ms: best, runs };
  } catch (e) {
    return { type, gflops: 0, ms: 0, runs: 0, error: e?.message ?? String(e) };
  } finally {
    x.free(); w?.free();
  }
}

function draw(results) {
  const svg = $('#chart');
  const W = 900, H = 320, left = 60, bottom = 40, top = 30;
  const ok = results.filter((r) => !r.error);
  const max = Math.max(1e-9, ...ok.map((r) => r.gflops));
  const bw = (W - left - 10) / Math.max(1, results.length);
  const y = (v) => top + (H - top - bottom) * (1 - v / max);
  const parts = [`<line x1="${left}" y1="${H - bottom}" x2="${W - 10}" y2="${H - bottom}" stroke="#999"/>`,
    `<text x="8" y="14">GFLOPS</text>`];
  for (let i = 0; i <= 4; i++) {
    const v = (max * i) / 4;
    parts.push(`<line x1="${left}" x2="${W - 10}" y1="${y(v)}" y2="${y(v)}" stroke="#eee"/><text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v.toFixed(v < 10 ? 1 : 0)}</text>`);
  }
  results.forEach((r, i) => {
    const x = left + i * bw + bw * 0.15, w = bw * 0.7;
    if (r.error) {
      parts.push(`<text x="${x + w / 2}" y="${H - bottom - 6}" text-anchor="middle" fill="#999">n/a</text>`);
    } else {
      parts.push(`<rect data-type="${r.type}" x="${x}" y="${y(r.gflops)}" width="${w}" height="${H - bottom - y(r.gflops)}" fill="${r.type.startsWith('q') ? '#0f766e' : '#c2410c'}"><title>${r.type}: ${r.gflops.toFixed(2)} GFLOPS</title></rect>`,
        `<text x="${x + w / 2}" y="${y(r.gflops) - 4}" text-anchor="middle">${r.gflops.toFixed(1)}</text>`);
    }
    parts.push(`<text x="${x + w / 2}" y="${H - bottom + 16}" text-anchor="middle">${r.type}</text>`);
  });
  svg.innerHTML = parts.join('');
}

function table(results) {
  $('#results').replaceChildren(...results.map((r) => {
    const tr = document.createElement('tr');
    tr.dataset.type = r.type;
    const cells = r.error ? [r.type, 'n/a', '', r.error] : [r.type, r.gflops.toFixed(2), r.ms.toFixed(2), String(r.runs)];
    for (const c of cells) { const td = document.createElement('td'); td.textContent = c; tr.append(td); }
    return tr;
  }));
}

async function run() {
  const size = Number($('#size').value);
  $('#run').disabled = true;
  demo.running = true;
  demo.done = false;
  const results = TYPES.map((type) => ({ type, gflops: 0, ms: 0, runs: 0, error: 'waiting' }));
  draw(results); table(results);
  for (let i = 0; i < TYPES.length; i++) {
    $('#bench-note').textContent = `running ${TYPES[i]} (${size}×${size}×${size})…`;
    results[i] = await benchType(TYPES[i], size);
    draw(results); table(results);
  }
  demo.results = results;
  demo.running = false;
  demo.done = true;
  $('#bench-note').textContent = `done: ${results.filter((r) => !r.error).length} of ${results.length} types available in this build`;
  $('#run').disabled = false;
  void refreshMemory();
}

$('#run').onclick = run;
try {
  ({ kiln, refreshMemory } = await startEngine());
  demo.kiln = kiln;
  demo.ready = true;
  draw(TYPES.map((type) => ({ type, gflops: 0, error: 'not run' })));
} catch (e) {
  $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`;
}
