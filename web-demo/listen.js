// The Listen page: microphone (getUserMedia + an AudioWorklet) -> the VAD
// stream in the engine worker -> a live probability plot and the speech
// segments as playable clips; or an audio file, decoded and run whole.
import { $, nav, startEngine } from './common.js';
import { startCapture, wavBlob } from './capture.js';

const MODEL = '/tests/data/audio/ggml-silero-v6.2.0.bin';
const plot = $('#plot');
const g = plot.getContext('2d');
const probs = [];
const found = []; // {start, end, source} for tests
let vad = null;

function draw() {
  const w = plot.width, h = plot.height, n = Math.min(probs.length, w / 2);
  g.clearRect(0, 0, w, h);
  const thr = Number($('#thr').value);
  g.strokeStyle = '#c33'; g.beginPath(); g.moveTo(0, h - thr * h); g.lineTo(w, h - thr * h); g.stroke();
  g.strokeStyle = '#36c'; g.beginPath();
  for (let i = 0; i < n; i++) {
    const p = probs[probs.length - n + i];
    const x = i * 2, y = h - p * (h - 4) - 2;
    if (i === 0) g.moveTo(x, y); else g.lineTo(x, y);
  }
  g.stroke();
  plot.dataset.points = String(probs.length);
}

function addSegment(seg, samples, rate, source) {
  found.push({ start: seg.start, end: seg.end, source });
  const li = document.createElement('li');
  li.dataset.testid = 'listen-segment';
  li.dataset.start = String(seg.start); li.dataset.end = String(seg.end); li.dataset.source = source;
  li.textContent = `${source}: ${seg.start.toFixed(2)} – ${seg.end.toFixed(2)} s (${(seg.end - seg.start).toFixed(2)} s) `;
  const audio = document.createElement('audio');
  audio.controls = true;
  audio.src = URL.createObjectURL(wavBlob(samples, rate));
  li.append(audio);
  $('#segments').append(li);
}

let mic = null;
async function startMic() {
  let s = null;
  const cap = await startCapture((chunk) => { s.push(chunk).catch((err) => { $('#vad-status').textContent = `error: ${err.message}`; }); });
  s = vad.stream({
    sampleRate: cap.sampleRate,
    threshold: Number($('#thr').value),
    onProbability: (p) => { probs.push(p); },
    onSpeechStart: (t) => { $('#vad-status').textContent = `speech at ${t.toFixed(2)} s…`; },
    onSpeechEnd: (samples, seg) => { addSegment(seg, samples, cap.sampleRate, 'mic'); $('#vad-status').textContent = 'listening'; },
  });
  mic = { cap, s };
  $('#vad-status').textContent = `listening (${cap.sampleRate} Hz)`;
  $('#mic').textContent = 'Stop the microphone';
}

async function stopMic() {
  const m = mic; mic = null;
  await m.cap.stop();
  await m.s.end();
  $('#mic').textContent = 'Start the microphone';
  $('#vad-status').textContent = 'stopped';
}

async function runFile(file) {
  const ctx = new AudioContext({ sampleRate: 16000 });
  const buf = await ctx.decodeAudioData(await file.arrayBuffer());
  await ctx.close();
  const t0 = performance.now();
  const r = await vad.detect(buf, undefined, { threshold: Number($('#thr').value) });
  probs.length = 0; probs.push(...r.probs);
  draw(); // the plot (and its data-points) shows this file's windows before its segments are listed
  const data = buf.getChannelData(0);
  for (const seg of r.segments) addSegment(seg, data.subarray(Math.round(seg.start * buf.sampleRate), Math.round(seg.end * buf.sampleRate)), buf.sampleRate, file.name);
  $('#vad-status').textContent = `${file.name}: ${r.probs.length} windows, ${r.segments.length} segments in ${(performance.now() - t0).toFixed(0)} ms`;
}

async function main() {
  nav();
  const { kiln } = await startEngine();
  vad = await kiln.loadVad(MODEL);
  $('#vad-status').textContent = 'ready';
  $('#mic').disabled = false;
  $('#mic').onclick = () => (mic ? stopMic() : startMic()).catch((e) => { $('#vad-status').textContent = `microphone: ${e.message}`; });
  $('#file').onchange = (e) => { const f = e.target.files[0]; if (f) runFile(f).catch((err) => { $('#vad-status').textContent = `could not read ${f.name}: ${err.message}`; }); };
  setInterval(draw, 100);
  window.__kilnDemo = { ready: true, kiln, vad, found };
}

main().catch((e) => { $('#vad-status').textContent = `failed: ${e.message}`; });
