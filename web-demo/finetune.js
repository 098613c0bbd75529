// The Fine-tune page: model.finetune() trains a LoRA adapter in the engine
// worker; this thread only keeps the numbers of the progress events and
// draws the curves once a frame. Afterwards the same prompt runs greedily on
// the base model and on the base model loaded again with the adapter.
import { nav, $, fmtBytes, startEngine } from './common.js';

nav();
const EMBEDDED = new URL('/models/stories260K.gguf', location.href).href;
const el = {
  file: $('#ft-file'), modelInfo: $('#ft-model-info'), data: $('#ft-data'), dataFile: $('#ft-data-file'), chat: $('#ft-chat'),
  dataInfo: $('#ft-data-info'), train: $('#ft-train'), stop: $('#ft-stop'), download: $('#ft-download'),
  progress: $('#ft-progress'), chart: $('#ft-chart'), prompt: $('#ft-prompt'), maxTokens: $('#ft-max-tokens'),
  scale: $('#ft-scale'), compare: $('#ft-compare'), baseOut: $('#ft-base-out'), tunedOut: $('#ft-tuned-out'),
};
// read by the browser test (tests/e2e/finetune.test.mjs)
const demo = window.__kilnFinetune = {
  ready: false, phase: 'starting', steps: 0, totalSteps: 0, trainLoss: [], valLoss: [], valLossBefore: NaN,
  adapterBytes: 0, baseText: '', tunedText: '', longTasks: [], lastError: '',
  handlerMs: 0, // the longest this page's own code ran for one progress event or one chart frame while training
};
function timed(fn) {
  const t0 = performance.now();
  fn();
  if (demo.phase === 'training') demo.handlerMs = Math.max(demo.handlerMs, performance.now() - t0);
}

// every main-thread task over 50 ms (the page must stay responsive while the worker trains)
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) demo.longTasks.push({ phase: demo.phase, start: Math.round(e.startTime), ms: Math.round(e.duration) });
  }).observe({ type: 'longtask', buffered: false });
} catch { /* no Long Tasks API in this browser */ }

let kiln, refreshMemory;
let base = null, baseKey = null;   // the loaded base model and what it was loaded from
let tuned = null, tunedKey = null; // the base model + adapter, loaded for the comparison
let adapter = null;                // the last adapter's GGUF bytes
let abort = null;

function source() {
  if (document.querySelector('input[name=ft-src]:checked').value === 'file') {
    const f = el.file.files?.[0];
    if (!f) throw new Error('choose a .gguf file first');
    return { src: f, label: f.name, key: `file:${f.name}:${f.size}:${f.lastModified}` };
  }
  return { src: EMBEDDED, label: 'stories260K (embedded)', key: 'embedded' };
}

function setPhase(phase) {
  demo.phase = phase;
  const busy = phase !== 'idle';
  el.train.disabled = busy;
  el.stop.disabled = phase !== 'training';
  el.compare.disabled = busy || !adapter;
  el.download.disabled = busy || !adapter;
}

/* ---- the chart: training loss per step, validation loss at each epoch end */
let frame = 0;
function scheduleDraw() { if (!frame) frame = requestAnimationFrame(() => { frame = 0; timed(draw); }); }
function draw() {
  const c = el.chart, g = c.getContext('2d');
  const W = c.width, H = c.height, L = 44, R = 10, T = 10, B = 26;
  g.clearRect(0, 0, W, H);
  g.strokeStyle = '#ccc';
  g.strokeRect(L, T, W - L - R, H - T - B);
  const tl = demo.trainLoss, vl = demo.valLoss;
  const n = Math.max(demo.totalSteps, tl.length, 1);
  const all = [...tl, ...vl.map((v) => v.loss)].filter(Number.isFinite);
  const hi = all.length ? Math.max(...all) * 1.05 : 1;
  const x = (step) => L + (W - L - R) * (step / n);
  const y = (v) => T + (H - T - B) * (1 - Math.min(v, hi) / hi);
  g.fillStyle = '#666';
  g.font = '11px sans-serif';
  for (let k = 0; k <= 4; k++) g.fillText((hi * k / 4).toFixed(2), 4, y(hi * k / 4) + 4);
  g.fillText(`step (of ${n})`, W / 2 - 20, H - 8);
  g.fillStyle = '#c2410c'; g.fillText('training loss', L + 8, T + 14);
  g.fillStyle = '#0f766e'; g.fillText('validation loss', L + 100, T + 14);
  const line = (pts, color, dots) => {
    if (!pts.length) return;
    g.strokeStyle = color; g.fillStyle = color; g.lineWidth = 1.5; g.beginPath();
    pts.forEach(([s, v], i) => (i ? g.lineTo(x(s), y(v)) : g.moveTo(x(s), y(v))));
    g.stroke();
    if (dots) for (const [s, v] of pts) { g.beginPath(); g.arc(x(s), y(v), 3, 0, 2 * Math.PI); g.fill(); }
  };
  line(tl.map((v, i) => [i + 1, v]), '#c2410c', false);
  line(vl.map((v) => [v.step, v.loss]), '#0f766e', true);
  c.dataset.steps = String(tl.length);
  c.dataset.vals = String(vl.length);
}

/* ---- data: pasted, or a dropped / chosen file */
function showDataInfo() {
  const t = el.data.value;
  el.dataInfo.textContent = t ? `${t.split('\n').filter((s) => s.trim()).length} lines · ${fmtBytes(new Blob([t]).size)}` : '';
}
async function takeFile(f) {
  if (!f) return;
  el.data.value = await f.text();
  if (/\.jsonl?$/i.test(f.name)) el.chat.checked = true;
  showDataInfo();
}
el.data.addEventListener('input', showDataInfo);
el.data.addEventListener('dragover', (e) => { e.preventDefault(); });
el.data.addEventListener('drop', (e) => { e.preventDefault(); void takeFile(e.dataTransfer?.files?.[0]); });
el.dataFile.addEventListener('change', () => { void takeFile(el.dataFile.files?.[0]); });
el.file.addEventListener('change', () => { document.querySelector('input[name=ft-src][value=file]').checked = true; });

function num(id) { return Number($(id).value); }

async function ensureBase() {
  const s = source();
  if (base && baseKey === s.key) return base;
  base?.free(); base = null; tuned?.free(); tuned = null; tunedKey = null;
  el.modelInfo.textContent = `loading ${s.label}…`;
  base = await kiln.loadModel(s.src, { signal: abort.signal });
  baseKey = s.key;
  const arch = base.metadata['general.architecture'];
  el.modelInfo.textContent = `${s.label} · ${fmtBytes(base.size)}${typeof arch === 'string' ? ` · ${arch}` : ''}`;
  return base;
}

async function train() {
  const data = el.data.value;
  if (!data.trim()) { el.progress.textContent = 'paste some text first'; return; }
  abort = new AbortController();
  demo.trainLoss = []; demo.valLoss = []; demo.steps = 0; demo.totalSteps = 0; demo.valLossBefore = NaN; demo.lastError = '';
  demo.handlerMs = 0; demo.longTasks = [];
  demo.baseText = ''; demo.tunedText = '';
  el.baseOut.textContent = ''; el.tunedOut.textContent = '';
  adapter = null; demo.adapterBytes = 0;
  tuned?.free(); tuned = null; tunedKey = null;
  draw();
  setPhase('loading');
  const t0 = performance.now();
  let tokens = 0;
  try {
    const m = await ensureBase();
    setPhase('training');
    el.progress.textContent = 'measuring the validation loss…';
    const dropout = num('#ft-dropout');
    const r = await m.finetune({
      data, chat: el.chat.checked, rank: num('#ft-rank'), alpha: num('#ft-alpha'),
      targets: $('#ft-targets').value.split(',').map((t) => t.trim()).filter(Boolean),
      nCtx: num('#ft-ctx'), batchSize: num('#ft-batch'), epochs: num('#ft-epochs'), lr: num('#ft-lr'),
      seed: num('#ft-seed'), valFraction: num('#ft-val'), ...(dropout > 0 ? { dropout } : {}),
      signal: abort.signal,
      onProgress: (p) => timed(() => {
        demo.trainLoss.push(p.loss);
        demo.steps = p.step; demo.totalSteps = p.steps;
        tokens += p.tokens;
        if (p.valLoss !== undefined) demo.valLoss.push({ step: p.step, loss: p.valLoss });
        const rate = tokens / ((performance.now() - t0) / 1000);
        el.progress.textContent = `step ${p.step}/${p.steps} · epoch ${p.epoch + 1} · loss ${p.loss.toFixed(3)}` +
          `${demo.valLoss.length ? ` · validation ${demo.valLoss.at(-1).loss.toFixed(3)}` : ''} · ${rate.toFixed(0)} tokens/s`;
        scheduleDraw();
      }),
    });
    adapter = r.adapter;
    demo.adapterBytes = adapter.byteLength;
    demo.valLossBefore = r.valLossBefore;
    demo.valLoss.unshift({ step: 0, loss: r.valLossBefore });
    draw();
    el.progress.textContent = `done: ${r.steps} steps in ${((performance.now() - t0) / 1000).toFixed(1)} s · validation loss ` +
      `${r.valLossBefore.toFixed(3)} → ${r.valLoss.toFixed(3)} · adapter ${fmtBytes(adapter.byteLength)}`;
    setPhase('idle');
    void refreshMemory();
    await compare();
  } catch (e) {
    draw();
    demo.lastError = e?.message ?? String(e);
    el.progress.textContent = e?.code === 'ABORTED' ? `stopped after ${demo.trainLoss.length} steps` : `training failed: ${demo.lastError}`;
    setPhase('idle');
  }
}

async function compare() {
  if (!adapter || !base) return;
  setPhase('generating');
  const prompt = el.prompt.value, maxTokens = num('#ft-max-tokens') | 0, scale = num('#ft-scale');
  try {
    const s = source();
    const key = `${baseKey}:${scale}`;
    if (!tuned || tunedKey !== key) {
      tuned?.free(); tuned = null;
      // copy the bytes: the adapter stays here for the download button
      tuned = await kiln.loadModel(s.src, { lora: [{ source: adapter.slice(), scale }] });
      tunedKey = key;
    }
    const opts = { maxTokens, temperature: 0 };
    el.baseOut.textContent = el.tunedOut.textContent = '…';
    const a = await base.complete(prompt, opts);
    el.baseOut.textContent = prompt + a.text;
    demo.baseText = a.text;
    const b = await tuned.complete(prompt, opts);
    el.tunedOut.textContent = prompt + b.text;
    demo.tunedText = b.text;
  } catch (e) {
    demo.lastError = e?.message ?? String(e);
    el.tunedOut.textContent = `generation failed: ${demo.lastError}`;
  } finally {
    setPhase('idle');
    void refreshMemory();
  }
}

function download() {
  if (!adapter) return;
  const url = URL.createObjectURL(new Blob([adapter], { type: 'application/octet-stream' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = 'lora-adapter.gguf';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

startEngine().then((r) => {
  kiln = r.kiln; refreshMemory = r.refreshMemory;
  el.train.onclick = () => { void train(); };
  el.stop.onclick = () => abort?.abort();
  el.compare.onclick = () => { void compare(); };
  el.download.onclick = download;
  draw();
  setPhase('idle');
  demo.ready = true;
}, (e) => { $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`; demo.lastError = String(e?.message ?? e); });
