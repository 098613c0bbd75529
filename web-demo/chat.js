// Chat page: a multi-turn conversation on one session of the embedded model.
// The session keeps its KV cache between turns, so a turn evaluates only the
// tokens the cache does not hold (shown as "cached N"). After every turn the
// session's state (tokens + KV cache, session.saveState()) and the messages
// go to IndexedDB; a reload loads them back (session.loadState()) and the
// next turn continues from the cache instead of evaluating the conversation
// again. JSON mode constrains the reply to a JSON Schema (option jsonSchema).
import { nav, $, fmtBytes, startEngine } from './common.js';

nav();
const MODEL = new URL('/models/stories260K.gguf', location.href).href;
const el = {
  log: $('#chat-log'), input: $('#chat-input'), send: $('#send'), stop: $('#chat-stop'), reset: $('#new-chat'),
  maxTokens: $('#chat-max-tokens'), temperature: $('#chat-temperature'), note: $('#chat-note'),
  jsonMode: $('#json-mode'), schema: $('#json-schema'), modelInfo: $('#chat-model'),
};
// read by the browser tests: one entry per finished turn
const demo = window.__kilnChat = { ready: false, busy: false, turns: [], restored: null, lastError: '' };

let kiln, refreshMemory, model = null, session = null, messages = [], busy = null;

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

/* ---- rendering */
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
function setBusy(ctl) {
  busy = ctl;
  demo.busy = !!ctl;
  el.stop.disabled = !ctl;
  el.send.disabled = !!ctl || !session;
  el.reset.disabled = !!ctl || !session;
}

/* ---- a turn: the template applied to all messages, then a streamed reply */
async function send() {
  if (!session || busy) return;
  const text = el.input.value;
  if (!text.trim()) return;
  let jsonSchema;
  if (el.jsonMode.checked) {
    try { jsonSchema = JSON.parse(el.schema.value); } catch (e) { el.note.textContent = `the JSON Schema is not JSON: ${e.message}`; el.note.classList.add('err'); return; }
  }
  el.note.textContent = '';
  el.note.classList.remove('err');
  messages.push({ role: 'user', content: text });
  bubble('user', text);
  el.input.value = '';
  const out = bubble('assistant', '');
  const body = document.createTextNode('');
  out.append(body);
  const ctl = new AbortController();
  setBusy(ctl);
  demo.lastError = '';
  let reply = '', result, dirty = false;
  const flush = () => { dirty = false; body.data = reply; };
  try {
    const t = await model.applyChatTemplate(messages);
    const opts = {
      addBos: t.addBos, parseSpecial: true, stop: t.stop, contextShift: true, signal: ctl.signal,
      maxTokens: Math.max(1, Math.floor(Number(el.maxTokens.value) || 48)), temperature: Number(el.temperature.value) || 0, seed: 42,
      ...(jsonSchema ? { jsonSchema } : {}),
    };
    const it = session.generate(t.text, opts);
    for (;;) {
      const r = await it.next();
      if (r.done) { result = r.value; break; }
      reply += r.value;
      demo.onPiece?.(reply); // tests: act at an exact point of the stream
      if (!dirty) { dirty = true; requestAnimationFrame(flush); }
    }
    flush();
    messages.push({ role: 'assistant', content: result.text });
    let extra = '';
    if (jsonSchema) {
      try { JSON.parse(result.text); extra = ' · valid JSON'; } catch { extra = ' · not complete JSON (maxTokens?)'; }
    }
    statsLine(out, result.stats, extra);
    // the conversation and the cache behind it, for a reload; the turn counts
    // as done (demo.turns) once it is saved
    const state = await session.saveState();
    await saveConversation({ messages, state, model: MODEL });
    demo.savedBytes = state.byteLength;
    demo.turns.push({ text: result.text, tokens: result.tokens, stats: result.stats, stopReason: result.stopReason, json: !!jsonSchema });
  } catch (e) {
    flush();
    messages.pop(); // the user's message goes back into the box
    el.input.value = text;
    if (e?.name === 'KilnAbortError' || ctl.signal.aborted) el.note.textContent = 'stopped';
    else { demo.lastError = String(e?.message ?? e); el.note.textContent = `error: ${e?.message ?? e}`; el.note.classList.add('err'); }
    out.remove();
    el.log.lastElementChild?.remove();
    demo.stopped = (demo.stopped ?? 0) + 1;
  } finally {
    setBusy(null);
    void refreshMemory();
  }
}

async function newChat() {
  if (busy) return;
  messages = [];
  demo.turns = [];
  session?.free();
  session = model.session();
  await clearConversation();
  render();
  el.note.textContent = 'new conversation';
  setBusy(null);
  demo.resets = (demo.resets ?? 0) + 1;
}

el.send.onclick = send;
el.stop.onclick = () => busy?.abort();
el.reset.onclick = newChat;
el.input.onkeydown = (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) send(); };

try {
  ({ kiln, refreshMemory } = await startEngine());
  const t0 = performance.now();
  model = await kiln.loadModel(MODEL);
  el.modelInfo.textContent = `· stories260K (embedded), ${fmtBytes(model.size)}, loaded in ${(performance.now() - t0).toFixed(0)} ms`;
  session = model.session();
  // a conversation from before a reload: its messages and its KV cache
  const saved = await readConversation().catch(() => undefined);
  if (saved && saved.model === MODEL && Array.isArray(saved.messages)) {
    try {
      await session.loadState(saved.state);
      messages = saved.messages;
      demo.restored = { messages: messages.length, bytes: saved.state.byteLength };
      el.note.textContent = `restored ${messages.length} messages and their KV cache (${fmtBytes(saved.state.byteLength)}) from IndexedDB`;
    } catch (e) {
      el.note.textContent = `the saved conversation could not be restored: ${e?.message ?? e}`;
      await clearConversation();
    }
  }
  render();
  setBusy(null);
  demo.ready = true;
  void refreshMemory();
} catch (e) {
  demo.lastError = String(e?.message ?? e);
  $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`;
  $('[data-testid=status]').classList.add('err');
}
