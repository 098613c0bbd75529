// The Transcribe page: a whisper.cpp model file (file or URL, or ?model=URL;
// a URL is kept in the persistent model cache) streamed into the engine
// worker; then the microphone (getUserMedia + the AudioWorklet of
// capture.js) cut into speech by the VAD stream, each piece transcribed as
// it ends; or an audio file (WAV read here in slices, other formats decoded
// by the browser) transcribed whole (only its speech with the VAD box
// ticked). Segments stream in with their times; SRT / VTT export; Stop
// aborts. All compute is in the worker: this thread only renders.
import { $, cacheNoteOf, fmtBytes, nav, startEngine } from './common.js';
import { startCapture, wavSamples } from './capture.js';

const VAD_MODEL = '/tests/data/audio/ggml-silero-v6.2.0.bin';
// what tests read: every transcription with its segments (tokens as ids) and, for the microphone, its samples
const demo = window.__kilnDemo = { ready: false, loaded: false, busy: 0, transcripts: [], errors: [], cacheEvents: [] };
let kiln = null, whisper = null, vad = null, mic = null;
const running = new Set(); // AbortControllers of transcriptions in flight
const all = [];            // every segment with times from the start of its source, for export

const state = (t) => { $('#state').textContent = t; };
const fmt = (s, sep) => {
  const ms = Math.round(s * 1000), h = Math.floor(ms / 3600000), m = Math.floor(ms / 60000) % 60, sec = Math.floor(ms / 1000) % 60;
  return `${String(h).padStart(2, '0')}:${String(m).padStart(2, '0')}:${String(sec).padStart(2, '0')}${sep}${String(ms % 1000).padStart(3, '0')}`;
};

function options() {
  return { language: $('#language').value.trim() || 'en', translate: $('#translate').checked, beamSize: Number($('#beam').value) || 1,
    ...($('#fallback').checked ? {} : { temperatureInc: 0 }) };
}

function showSegment(source, offset, s) {
  all.push({ start: offset + s.start, end: offset + s.end, text: s.text.trim() });
  const li = document.createElement('li');
  li.dataset.testid = 'segment';
  li.textContent = `[${fmt(offset + s.start, '.')} → ${fmt(offset + s.end, '.')}] ${source}: ${s.text.trim()}`;
  $('#segments').append(li);
  $('#srt').disabled = $('#vtt').disabled = false;
}

/** transcribes samples (Float32Array at rate, or an AudioBuffer); times shown from offset seconds */
async function transcribe(source, audio, rate, offset, opts = {}) {
  const ac = new AbortController();
  running.add(ac);
  demo.busy++;
  $('#stop').disabled = false;
  const t0 = performance.now();
  const entry = { source, offset, segments: null, samples: source === 'mic' ? audio : null, rate };
  try {
    const r = await whisper.transcribe(audio, rate, {
      ...options(), ...opts, signal: ac.signal,
      onSegment: (s) => showSegment(source, offset, s),
      onProgress: (p) => state(`${source}: ${p}%`),
    });
    entry.segments = r.segments.map((s) => ({ start: s.start, end: s.end, text: s.text, tokens: s.tokens.map((t) => t.id) }));
    entry.language = r.language;
    state(`${source}: ${r.segments.length} segments in ${(performance.now() - t0).toFixed(0)} ms${r.languageProbs ? ` (language ${r.language})` : ''}`);
  } catch (e) {
    entry.error = e.message;
    demo.errors.push(e.message);
    state(`${source}: ${e.name === 'KilnAbortError' ? 'stopped' : e.message}`);
  } finally {
    running.delete(ac);
    demo.busy--;
    demo.transcripts.push(entry);
    $('#stop').disabled = running.size === 0 && !mic;
  }
}

async function load() {
  const file = $('#model-file').files[0];
  const src = file ?? $('#model-url').value.trim();
  if (!src) { $('#model-info').textContent = 'choose a model file or URL'; return; }
  whisper?.free();
  whisper = null;
  demo.loaded = false;
  $('#mic').disabled = $('#file').disabled = true;
  const t0 = performance.now();
  let cacheNote = '';
  try {
    whisper = await kiln.loadWhisper(src, {
      onProgress: (p) => { $('#progress').value = p.total ? (100 * p.loaded) / p.total : 0; },
      // a URL is kept in the persistent model cache (the Generate page's): a second load reads it from there
      cache: !file && $('#use-cache').checked,
      onCache: (e) => {
        demo.cacheEvents.push(e.state);
        cacheNote = cacheNoteOf(e);
      },
    });
  } catch (e) {
    $('#model-info').textContent = `could not load: ${e.message}`;
    return;
  }
  const i = whisper.info;
  $('#progress').value = 100;
  $('#model-info').textContent = `${file ? file.name : src}: ${i.multilingual ? 'multilingual' : 'English-only'}, ${i.nAudioLayer} + ${i.nTextLayer} layers, ` +
    `width ${i.nAudioState}, ftype ${i.ftype}${file ? `, ${fmtBytes(file.size)}` : ''}; loaded in ${(performance.now() - t0).toFixed(0)} ms${cacheNote}`;
  $('#mic').disabled = $('#file').disabled = false;
  demo.loaded = true;
  state('ready');
}

async function runFile(file) {
  const opts = $('#use-vad').checked ? { vad } : {};
  const bytes = await file.arrayBuffer();
  const wav = await wavSamples(bytes);
  if (wav) { await transcribe(file.name, wav.samples, wav.rate, 0, opts); return; }
  // other formats: the browser's decoders, at 16 kHz; an OfflineAudioContext starts no audio device
  const buf = await new OfflineAudioContext(1, 1, 16000).decodeAudioData(bytes);
  await transcribe(file.name, buf, undefined, 0, opts);
}

async function startMic() {
  const useVad = $('#use-vad').checked;
  let s = null;
  const chunks = [];
  const cap = await startCapture((chunk) => {
    if (s) s.push(chunk).catch((err) => state(`microphone: ${err.message}`));
    else chunks.push(chunk);
  });
  if (useVad) {
    s = vad.stream({
      sampleRate: cap.sampleRate,
      onSpeechStart: (t) => state(`speech at ${t.toFixed(2)} s…`),
      onSpeechEnd: (samples, seg) => { void transcribe('mic', samples, cap.sampleRate, seg.start); },
    });
  }
  mic = { cap, s, chunks };
  $('#mic').textContent = 'Stop the microphone';
  $('#stop').disabled = false;
  state(`listening (${cap.sampleRate} Hz)${useVad ? '' : ': the recording is transcribed when it stops'}`);
}

async function stopMic() {
  const m = mic;
  mic = null;
  await m.cap.stop();
  $('#mic').textContent = 'Start the microphone';
  if (m.s) await m.s.end();
  else if (m.chunks.length) {
    const x = new Float32Array(m.chunks.reduce((n, c) => n + c.length, 0));
    let o = 0;
    for (const c of m.chunks) { x.set(c, o); o += c.length; }
    await transcribe('mic', x, m.cap.sampleRate, 0);
  }
}

function exportSubs(vtt) {
  const body = all.map((s, i) => `${vtt ? '' : `${i + 1}\n`}${fmt(s.start, vtt ? '.' : ',')} --> ${fmt(s.end, vtt ? '.' : ',')}\n${s.text}\n`).join('\n');
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([(vtt ? 'WEBVTT\n\n' : '') + body], { type: vtt ? 'text/vtt' : 'application/x-subrip' }));
  a.download = vtt ? 'transcript.vtt' : 'transcript.srt';
  a.click();
}

async function main() {
  nav();
  ({ kiln } = await startEngine());
  vad = await kiln.loadVad(VAD_MODEL);
  $('#load').onclick = () => void load();
  $('#model-file').onchange = () => void load();
  $('#mic').onclick = () => (mic ? stopMic() : startMic()).catch((e) => state(`microphone: ${e.message}`));
  $('#file').onchange = (e) => { const f = e.target.files[0]; if (f) runFile(f).catch((err) => state(`could not read ${f.name}: ${err.message}`)); };
  $('#stop').onclick = () => { for (const ac of running) ac.abort(); if (mic) void stopMic(); };
  $('#srt').onclick = () => exportSubs(false);
  $('#vtt').onclick = () => exportSubs(true);
  Object.assign(demo, { kiln, vad, ready: true });
  const q = new URLSearchParams(location.search).get('model');
  if (q) { $('#model-url').value = q; await load(); }
  demo.whisper = () => whisper;
}

main().catch((e) => { state(`failed: ${e.message}`); demo.errors.push(e.message); });
