// The Train page: kiln.train() runs the FC model in the engine worker; this
// thread only draws the curves from the per-batch progress events.
import { TrainController } from '/js/dist/index.js';
import { $, nav, startEngine } from './common.js';

const CLASSES = ['T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot'];
const DATA = '/tests/data/fashion-mnist/';

nav();
const status = $('[data-testid=train-status]');
const chart = $('#chart');
let kiln, data, model = null, ctl = null, abort = null;
const points = []; // {loss, accuracy} per batch

async function idx(name, header) {
  const r = await fetch(DATA + name);
  if (!r.ok) throw new Error(`${name}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer()).subarray(header);
}

function draw() {
  const g = chart.getContext('2d');
  const W = chart.width, H = chart.height, pad = 30;
  g.clearRect(0, 0, W, H);
  g.strokeStyle = '#ccc'; g.strokeRect(pad, 8, W - pad - 8, H - pad - 8);
  g.fillStyle = '#666'; g.font = '11px sans-serif';
  g.fillText('loss (0–2.5)', pad + 6, 20); g.fillStyle = '#0f766e'; g.fillText('accuracy (0–1)', pad + 90, 20);
  const n = points.length;
  if (n < 1) return;
  const x = (i) => pad + (W - pad - 8) * (n === 1 ? 0 : i / (n - 1));
  const line = (key, max, color) => {
    g.strokeStyle = color; g.beginPath();
    // a running mean over 10 batches keeps the per-batch noise readable
    for (let i = 0, s = 0; i < n; i++) {
      s += points[i][key]; if (i >= 10) s -= points[i - 10][key];
      const v = s / Math.min(i + 1, 10);
      const y = 8 + (H - pad - 8) * (1 - Math.min(v, max) / max);
      i ? g.lineTo(x(i), y) : g.moveTo(x(i), y);
    }
    g.stroke();
  };
  line('loss', 2.5, '#c2410c');
  line('accuracy', 1, '#0f766e');
  chart.dataset.points = String(n);
}

async function showPick() {
  const i = Math.max(0, Math.min(data.testLabels.length - 1, Number($('#pick').value) | 0));
  const img = data.testImages.subarray(i * 784, i * 784 + 784);
  const c = $('#digit').getContext('2d');
  const id = c.createImageData(28, 28);
  for (let k = 0; k < 784; k++) { id.data.set([255 - img[k], 255 - img[k], 255 - img[k], 255], k * 4); }
  const tmp = new OffscreenCanvas(28, 28); tmp.getContext('2d').putImageData(id, 0, 0);
  c.imageSmoothingEnabled = false; c.drawImage(tmp, 0, 0, 112, 112);
  if (!model) { $('#pred').textContent = `true class: ${CLASSES[data.testLabels[i]]} — train a model first`; return; }
  const p = await model.classify(img);
  let best = 0; for (let k = 1; k < 10; k++) if (p[k] > p[best]) best = k;
  $('#pred').textContent = `predicted: ${CLASSES[best]} (${(p[best] * 100).toFixed(1)} %) · true: ${CLASSES[data.testLabels[i]]}`;
}

async function train() {
  const epochs = Number($('#epochs').value) | 0, batchSize = Number($('#batch').value) | 0, learningRate = Number($('#lr').value);
  model?.free(); model = null;
  points.length = 0; draw();
  $('#test-acc').textContent = '–';
  ctl = new TrainController(); abort = new AbortController();
  $('#start').disabled = true; $('#stop').disabled = false; $('#pause').disabled = !ctl.supported; $('#pause').textContent = 'Pause';
  const t0 = performance.now();
  let frame = 0;
  try {
    model = await kiln.train({
      model: 'fc', images: data.images, labels: data.labels, testImages: data.testImages, testLabels: data.testLabels,
      epochs, batchSize, learningRate, seed: 1, signal: abort.signal, controller: ctl,
      onBatch: (p) => {
        points.push({ loss: p.loss, accuracy: p.accuracy });
        const rate = points.length * batchSize / ((performance.now() - t0) / 1000);
        status.textContent = `epoch ${p.epoch + 1}/${epochs} · batch ${p.batch + 1}/${p.batches} · loss ${p.loss.toFixed(3)} · accuracy ${(p.accuracy * 100).toFixed(1)} % · ${rate.toFixed(0)} images/s`;
        if (!frame) frame = requestAnimationFrame(() => { frame = 0; draw(); });
      },
    });
    draw();
    $('#test-acc').textContent = `${(model.testAccuracy * 100).toFixed(1)} % on ${data.testLabels.length} test images`;
    status.textContent = `done: ${points.length} batches in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    await showPick();
  } catch (e) {
    draw();
    status.textContent = e?.code === 'ABORTED' ? `stopped after ${points.length} batches` : `training failed: ${e?.message ?? e}`;
  } finally {
    $('#start').disabled = false; $('#stop').disabled = true; $('#pause').disabled = true;
  }
}

startEngine().then(async ({ kiln: k }) => {
  kiln = k;
  const [images, labels, testImages, testLabels] = await Promise.all([
    idx('train-images-idx3-ubyte', 16), idx('train-labels-idx1-ubyte', 8), idx('t10k-images-idx3-ubyte', 16), idx('t10k-labels-idx1-ubyte', 8)]);
  data = { images, labels, testImages, testLabels };
  $('#ndata').textContent = `${labels.length} training, ${testLabels.length} test images`;
  $('#pick').max = String(testLabels.length - 1);
  status.textContent = 'ready';
  $('#start').disabled = false;
  $('#start').onclick = () => { void train(); };
  $('#stop').onclick = () => { ctl?.resume(); abort?.abort(); };
  $('#pause').onclick = () => {
    if (!ctl) return;
    if (ctl.paused) { ctl.resume(); $('#pause').textContent = 'Pause'; } else { ctl.pause(); $('#pause').textContent = 'Resume'; status.textContent += ' · paused'; }
  };
  $('#pick').oninput = () => { void showPick(); };
  await showPick();
  window.__kilnDemo = { ready: true, kiln };
}, (e) => { $('[data-testid=status]').textContent = `the engine could not start: ${e?.message ?? e}`; });
