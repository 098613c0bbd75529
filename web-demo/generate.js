// Generate page. Everything heavy (loading, tokenizing, sampling) runs in
// the engine's worker; this thread only updates the DOM, at most once a frame.
import { nav, $, fmtBytes, startEngine } from './common.js';

nav();
const EMBEDDED = new URL('/models/stories260K.gguf', location.href).href;
const el = {
  load: $('#load'), progress: $('#progress'), progressText: $('#progress-text'), info: $('#model-info'),
  prompt: $('#prompt'), generate: $('#generate'), stop: $('#stop'), tps: $('#tps'), output: $('#output'),
  note: $('#gen-note'), file: $('#file'), url: $('#url'), useCache: $('#use-cache'),
  cacheList: $('#cache-list'), cacheClear: $('#cache-clear'), cacheBackend: $('#cache-backend'),
};
// read by the browser tests
const demo = window.__kilnDemo = { ready: false, loaded: false, generating: false, tokens: 0, tokensAtStop: -1, canGenerate: false, lastError: '', cacheEvents: [] };

let kiln, refreshMemory, model = null, busy = null; // busy: AbortController of what runs

function setBusy(ctl) {
  busy = ctl;
  el.stop.disabled = !ctl;
  el.load.disabled = !!ctl;
  el.generate.disabled = !!ctl || !model || !demo.canGenerate;
}

// progress reports come per downloaded chunk; the bar is drawn once a frame
let shownProgress = null, progressFrame = 0;
function drawProgress() {
  progressFrame = 0;
  const [loaded, total] = shownProgress;
  const pct = total > 0 ? Math.min(100, Math.round((loaded / total) * 100)) : 0;
  el.progress.value = pct;
  el.progressText.textContent = `${pct} % · ${fmtBytes(loaded)} of ${fmtBytes(total)}`;
}
function showProgress(loaded, total, now = false) {
  shownProgress = [loaded, total];
  if (now) { if (progressFrame) cancelAnimationFrame(progressFrame); drawProgress(); }
  else if (!progressFrame) progressFrame = requestAnimationFrame(drawProgress);
}

function chosenSource() {
  const kind = document.querySelector('input[name=src]:checked').value;
  if (kind === 'file') {
    const f = el.file.files?.[0];
    if (!f) throw new Error('choose a .gguf file first');
    return { src: f, label: f.name };
  }
  if (kind === 'url') {
    const u = el.url.value.trim();
    if (!u) throw new Error('enter a model URL first');
    return { src: new URL(u, location.href).href, label: u };
  }
  return { src: EMBEDDED, label: 'stories260K (embedded)' };
}

async function loadModel() {
  let chosen;
  try { chosen = chosenSource(); } catch (e) { el.info.textContent = e.message; el.info.classList.add('err'); return; }
  el.info.classList.remove('err');
  if (model) { model.free(); model = null; }
  demo.loaded = false;
  const ctl = new AbortController();
  setBusy(ctl);
  showProgress(0, 1, true);
  el.info.textContent = `loading ${chosen.label}…`;
  const t0 = performance.now();
  let cacheNote = '';
  try {
    const isUrl = typeof chosen.src === 'string';
    model = await kiln.loadModel(chosen.src, {
      signal: ctl.signal,
      cache: isUrl && el.useCache.checked,
      onProgress: (p) => showProgress(p.loaded, p.total),
      onCache: (e) => {
        demo.cacheEvents.push(e.state);
        cacheNote = e.state === 'hit' ? ' · from the cache' : e.state === 'stored' ? ' · stored in the cache' : e.state === 'not-stored' ? ` · not cached (${e.reason})` : '';
      },
    });
    showProgress(model.size, model.size, true);
    const ms = performance.now() - t0;
    demo.canGenerate = typeof model.generate === 'function';
    el.info.textContent = `${chosen.label}: ${fmtBytes(model.size)}, ${model.tensorNames.length} tensors, GGUF v${model.version}, loaded in ${ms.toFixed(0)} ms${cacheNote}`;
    el.note.textContent = demo.canGenerate ? '' : 'text generation (model.generate) is not in this build of kiln-ml yet';
    demo.loaded = true;
  } catch (e) {
    model = null;
    demo.lastError = String(e?.message ?? e);
    el.info.textContent = e?.name === 'KilnAbortError' ? 'loading stopped' : `could not load: ${e?.message ?? e}`;
    el.info.classList.add('err');
  } finally {
    setBusy(null);
    void refreshMemory();
    void renderCache();
  }
}

function num(input, fallback) { const v = Number(input.value); return Number.isFinite(v) ? v : fallback; }

async function generate() {
  if (!model || !demo.canGenerate) return;
  const ctl = new AbortController();
  setBusy(ctl);
  const prompt = el.prompt.value;
  el.output.textContent = '';
  const p = document.createElement('span');
  p.className = 'prompt';
  p.textContent = prompt;
  const gen = document.createTextNode('');
  el.output.append(p, gen);
  demo.generating = true;
  demo.tokens = 0;
  demo.tokensAtStop = -1;
  demo.lastError = '';
  let text = '', dirty = false, first = 0, last = 0;
  const flush = () => {
    dirty = false;
    gen.data = text;
    const secs = (last - first) / 1000;
    el.tps.textContent = demo.tokens > 1 && secs > 0 ? `${(((demo.tokens - 1) / secs)).toFixed(1)} tok/s · ${demo.tokens} tokens` : `${demo.tokens} tokens`;
  };
  const opts = {
    maxTokens: Math.max(1, Math.floor(num($('#max-tokens'), 200))),
    temperature: num($('#temperature'), 0), topK: Math.floor(num($('#top-k'), 40)), topP: num($('#top-p'), 0.95),
    seed: Math.floor(num($('#seed'), 42)), signal: ctl.signal,
  };
  try {
    for await (const piece of model.generate(prompt, opts)) {
      const now = performance.now();
      if (!first) first = now;
      last = now;
      demo.tokens++;
      text += piece;
      demo.onToken?.(demo.tokens); // tests: act at an exact token
      if (!dirty) { dirty = true; requestAnimationFrame(flush); }
    }
    el.note.textContent = '';
  } catch (e) {
    if (e?.name === 'KilnAbortError' || ctl.signal.aborted) el.note.textContent = 'stopped';
    else { demo.lastError = String(e?.message ?? e); el.note.textContent = `error: ${e?.message ?? e}`; }
  } finally {
    flush();
    demo.generating = false;
    demo.tokensPerSecond = last > first ? (demo.tokens - 1) / ((last - first) / 1000) : 0;
    setBusy(null);
    void refreshMemory();
  }
}

function stop() {
  if (!busy) return;
  demo.tokensAtStop = demo.tokens;
  busy.abort();
}

async function renderCache() {
  const entries = await kiln.cache.list().catch(() => []);
  el.cacheBackend.textContent = `(${(await kiln.cache.backend()) ?? 'not available'})`;
  el.cacheList.replaceChildren(...entries.map((e) => {
    const tr = document.createElement('tr');
    tr.dataset.url = e.url;
    for (const v of [e.url, fmtBytes(e.size), e.etag ?? '–', new Date(e.storedAt).toLocaleString()]) {
      const td = document.createElement('td'); td.textContent = v; tr.append(td);
    }
    const td = document.createElement('td');
    const b = document.createElement('button');
    b.textContent = 'Delete';
    b.onclick = async () => { await kiln.cache.delete(e.url); await renderCache(); };
    td.append(b); tr.append(td);
    return tr;
  }));
  if (!entries.length) el.cacheList.innerHTML = '<tr><td colspan="5" class="muted">empty</td></tr>';
  demo.cacheEntries = entries.length;
}

el.load.onclick = loadModel;
el.generate.onclick = generate;
el.stop.onclick = stop;
el.cacheClear.onclick = async () => { await kiln.cache.clear(); await renderCache(); };
el.file.onchange = () => { document.querySelector('input[name=src][value=file]').checked = true; };
el.url.oninput = () => { document.querySelector('input[name=src][value=url]').checked = true; };
el.prompt.onkeydown = (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) generate(); };

try {
  ({ kiln, refreshMemory } = await startEngine());
  demo.kiln = kiln;
  demo.ready = true;
  await renderCache();
  await loadModel();
} catch (e) {
  demo.lastError = String(e?.message ?? e);
  $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`;
  $('[data-testid=status]').classList.add('err');
}
