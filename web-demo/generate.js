// Generate page: a chat with the loaded model. Everything heavy (loading,
// tokenizing, sampling) runs in the engine's worker; this thread only updates
// the DOM, at most once a frame.
//
// The conversation runs on one model.session(), whose KV cache stays between
// turns: a turn evaluates only the prompt tokens the cache does not hold
// (shown as "cached N · evaluated M"). Format "chat template" renders the
// messages with the model's template (model.applyChatTemplate); "plain text"
// feeds the messages' text one after the other, so a story model continues
// it. "JSON output" constrains the reply to a JSON Schema (option
// jsonSchema). After every turn the messages and session.saveState() go to
// IndexedDB; when the page is opened again with the same model, they are
// loaded back (session.loadState()) and the next turn goes on from the cache.
import { nav, $, cacheNoteOf, fmtBytes, startEngine } from './common.js';

nav();
const EMBEDDED = new URL('/models/stories260K.gguf', location.href).href;
const el = {
  load: $('#load'), progress: $('#progress'), progressText: $('#progress-text'), info: $('#model-info'),
  prompt: $('#prompt'), generate: $('#generate'), stop: $('#stop'), reset: $('#new-chat'), tps: $('#tps'), log: $('#chat-log'),
  note: $('#gen-note'), file: $('#file'), url: $('#url'), useCache: $('#use-cache'), format: $('#format'),
  jsonMode: $('#json-mode'), schema: $('#json-schema'),
  cacheList: $('#cache-list'), cacheClear: $('#cache-clear'), cacheBackend: $('#cache-backend'),
};
// read by the browser tests; turns: one entry per finished (and saved) turn
const demo = window.__kilnDemo = {
  ready: false, loaded: false, generating: false, busy: false, tokens: 0, tokensAtStop: -1, canGenerate: false,
  lastError: '', cacheEvents: [], turns: [], restored: null, stopped: 0, resets: 0,
};

// busy: AbortController of what runs; modelKey: what the saved conversation belongs to
let kiln, refreshMemory, model = null, session = null, modelKey = '', messages = [], busy = null;

function setBusy(ctl) {
  busy = ctl;
  demo.busy = !!ctl;
  el.stop.disabled = !ctl;
  el.load.disabled = !!ctl;
  el.generate.disabled = !!ctl || !session;
  el.reset.disabled = !!ctl || !session;
}

function note(text, err = false) {
  el.note.textContent = text;
  el.note.classList.toggle('err', err);
}

/* ---- IndexedDB: one record, the conversation and its session state */
const DB = 'kiln-chat', STORE = 'state', KEY = 'conversation';
function idb() {
  return new Promise((resolve, reject) => {
    const r = indexedDB.open(DB, 1);
    r.onupgradeneeded = () => r.result.createObjectStore(STORE);
    r.onsuccess = () => resolve(r.result);
    r.onerror = () => reject(r.error);
  });
}
async function idbDo(mode, fn) {
  const db = await idb();
  try {
    return await new Promise((resolve, reject) => {
      const tx = db.transaction(STORE, mode);
      const req = fn(tx.objectStore(STORE));
      tx.oncomplete = () => resolve(req.result);
      tx.onerror = tx.onabort = () => reject(tx.error);
    });
  } finally { db.close(); }
}
const saveConversation = (value) => idbDo('readwrite', (s) => s.put(value, KEY));
const readConversation = () => idbDo('readonly', (s) => s.get(KEY));
const clearConversation = () => idbDo('readwrite', (s) => s.delete(KEY));

/* ---- model loading: progress reports come per downloaded chunk; the bar is drawn once a frame */
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
    return { src: f, label: f.name, key: `file:${f.name}:${f.size}:${f.lastModified}` };
  }
  if (kind === 'url') {
    const u = el.url.value.trim();
    if (!u) throw new Error('enter a model URL first');
    const href = new URL(u, location.href).href;
    return { src: href, label: u, key: href };
  }
  return { src: EMBEDDED, label: 'stories260K (embedded)', key: EMBEDDED };
}

/** load the chosen model with a new, empty conversation; restore: take the saved one when it belongs to this model */
async function loadModel({ restore = false } = {}) {
  let chosen;
  try { chosen = chosenSource(); } catch (e) { el.info.textContent = e.message; el.info.classList.add('err'); return; }
  el.info.classList.remove('err');
  session?.free();
  session = null;
  if (model) { model.free(); model = null; }
  messages = [];
  demo.turns = [];
  render();
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
        cacheNote = cacheNoteOf(e);
      },
    });
    showProgress(model.size, model.size, true);
    const ms = performance.now() - t0;
    modelKey = chosen.key;
    demo.canGenerate = typeof model.session === 'function';
    el.info.textContent = `${chosen.label}: ${fmtBytes(model.size)}, ${model.tensorNames.length} tensors, GGUF v${model.version}, loaded in ${ms.toFixed(0)} ms${cacheNote}`;
    note(demo.canGenerate ? '' : 'text generation (model.session) is not in this build of kiln-ml yet');
    if (demo.canGenerate) {
      session = model.session();
      if (restore) await restoreConversation();
    }
    demo.loaded = true;
  } catch (e) {
    model?.free();
    model = null;
    session = null;
    demo.lastError = String(e?.message ?? e);
    el.info.textContent = e?.name === 'KilnAbortError' ? 'loading stopped' : `could not load: ${e?.message ?? e}`;
    el.info.classList.add('err');
  } finally {
    setBusy(null);
    void refreshMemory();
    void renderCache();
  }
}

/** the conversation saved after the last turn with this model, its KV cache included */
async function restoreConversation() {
  const saved = await readConversation().catch(() => undefined);
  if (!saved || saved.model !== modelKey || !Array.isArray(saved.messages)) return;
  try {
    await session.loadState(saved.state);
    messages = saved.messages;
    if (saved.format === 'chat' || saved.format === 'text') el.format.value = saved.format;
    demo.restored = { messages: messages.length, bytes: saved.state.byteLength };
    note(`restored ${messages.length} messages and their KV cache (${fmtBytes(saved.state.byteLength)}) from IndexedDB`);
  } catch (e) {
    note(`the saved conversation could not be restored: ${e?.message ?? e}`, true);
    await clearConversation().catch(() => undefined);
  }
  render();
}

/* ---- the conversation */
function bubble(role, text) {
  const d = document.createElement('div');
  d.className = `msg ${role}`;
  d.dataset.role = role;
  d.textContent = text;
  el.log.append(d);
  return d;
}
function statsLine(parent, s, extra = '') {
  const d = document.createElement('div');
  d.className = 'turn-stats';
  d.dataset.testid = 'turn-stats';
  d.textContent = `prompt ${s.promptTokens} tokens · cached ${s.cachedTokens} · evaluated ${s.promptTokens - s.cachedTokens}`
    + ` · generated ${s.generatedTokens} at ${s.tokensPerSecond.toFixed(0)} tok/s${extra}`;
  parent.append(d);
}
function render() {
  el.log.replaceChildren();
  for (const m of messages) bubble(m.role, m.content);
}

function num(input, fallback) { const v = Number(input.value); return Number.isFinite(v) ? v : fallback; }

/** the prompt of the next turn and the options its format needs */
async function turnPrompt() {
  if (el.format.value === 'text') return { prompt: messages.map((m) => m.content).join(''), opts: { contextShift: true } };
  const t = await model.applyChatTemplate(messages);
  return { prompt: t.text, opts: { addBos: t.addBos, parseSpecial: true, stop: t.stop, contextShift: true } };
}

/** a turn: the user's message, then the streamed reply */
async function send() {
  if (!session || busy) return;
  const text = el.prompt.value;
  if (!text.trim()) return;
  let jsonSchema;
  if (el.jsonMode.checked) {
    try { jsonSchema = JSON.parse(el.schema.value); } catch (e) { note(`the JSON Schema is not JSON: ${e.message}`, true); return; }
  }
  note('');
  messages.push({ role: 'user', content: text });
  const asked = bubble('user', text);
  el.prompt.value = '';
  const out = bubble('assistant', '');
  const body = document.createTextNode('');
  out.append(body);
  const ctl = new AbortController();
  setBusy(ctl);
  demo.generating = true;
  demo.tokens = 0;
  demo.tokensAtStop = -1;
  demo.lastError = '';
  let reply = '', result, dirty = false, first = 0, last = 0;
  const flush = () => {
    dirty = false;
    body.data = reply;
    const secs = (last - first) / 1000;
    el.tps.textContent = demo.tokens > 1 && secs > 0 ? `${(((demo.tokens - 1) / secs)).toFixed(1)} tok/s · ${demo.tokens} tokens` : `${demo.tokens} tokens`;
  };
  try {
    const { prompt, opts } = await turnPrompt();
    const it = session.generate(prompt, {
      ...opts, signal: ctl.signal,
      maxTokens: Math.max(1, Math.floor(num($('#max-tokens'), 200))),
      temperature: num($('#temperature'), 0), topK: Math.floor(num($('#top-k'), 40)), topP: num($('#top-p'), 0.95),
      seed: Math.floor(num($('#seed'), 42)),
      ...(jsonSchema ? { jsonSchema } : {}),
    });
    for (;;) {
      const r = await it.next();
      if (r.done) { result = r.value; break; }
      const now = performance.now();
      if (!first) first = now;
      last = now;
      demo.tokens++;
      reply += r.value;
      demo.onToken?.(demo.tokens); // tests: act at an exact token
      demo.onPiece?.(reply); // tests: act at an exact point of the text
      if (!dirty) { dirty = true; requestAnimationFrame(flush); }
    }
    flush();
    demo.generating = false;
    messages.push({ role: 'assistant', content: result.text });
    let extra = '';
    if (jsonSchema) {
      try { JSON.parse(result.text); extra = ' · valid JSON'; } catch { extra = ' · not complete JSON (maxTokens?)'; }
    }
    statsLine(out, result.stats, extra);
    // the conversation and the cache behind it, for a reload; the turn counts
    // as done (demo.turns) once it is saved
    const state = await session.saveState();
    await saveConversation({ messages, state, model: modelKey, format: el.format.value });
    demo.savedBytes = state.byteLength;
    demo.turns.push({ text: result.text, tokens: result.tokens, stats: result.stats, stopReason: result.stopReason, json: !!jsonSchema });
  } catch (e) {
    flush();
    // the unfinished turn is dropped and the message goes back into the box
    if (messages.at(-1)?.role === 'assistant') messages.pop();
    messages.pop();
    el.prompt.value = text;
    out.remove();
    asked.remove();
    if (e?.name === 'KilnAbortError' || ctl.signal.aborted) { note('stopped'); demo.stopped++; }
    else { demo.lastError = String(e?.message ?? e); note(`error: ${e?.message ?? e}`, true); }
  } finally {
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

async function newChat() {
  if (busy || !model) return;
  messages = [];
  demo.turns = [];
  session?.free();
  session = model.session();
  await clearConversation().catch(() => undefined);
  render();
  note('new conversation');
  setBusy(null);
  demo.resets++;
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

el.load.onclick = () => loadModel();
el.generate.onclick = send;
el.stop.onclick = stop;
el.reset.onclick = newChat;
el.cacheClear.onclick = async () => { await kiln.cache.clear(); await renderCache(); };
el.file.onchange = () => { document.querySelector('input[name=src][value=file]').checked = true; };
el.url.oninput = () => { document.querySelector('input[name=src][value=url]').checked = true; };
el.prompt.onkeydown = (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(); };

try {
  ({ kiln, refreshMemory } = await startEngine());
  demo.kiln = kiln;
  demo.ready = true;
  await renderCache();
  await loadModel({ restore: true });
} catch (e) {
  demo.lastError = String(e?.message ?? e);
  $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`;
  $('[data-testid=status]').classList.add('err');
}
