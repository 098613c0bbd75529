/*
 * train.ts — kiln.train(): the (Fashion-)MNIST example models (fully
 * connected 784-500-10, small CNN) trained in the engine worker with AdamW,
 * one batch per step, progress per batch. The caller's thread never blocks:
 * training is one job in the engine's queue; other requests wait behind it.
 */
import { KilnAbortError, KilnError } from './errors.js';
import type { Kiln } from './kiln.js';
import type { RequestMsg } from './protocol.js';

export interface TrainProgress { epoch: number; batch: number; batches: number; loss: number; accuracy: number }

/** pause()/resume() a running kiln.train() (needs SharedArrayBuffer) */
export class TrainController {
  /** @internal */ readonly sab: SharedArrayBuffer | null;
  private word: Int32Array | null;
  constructor() {
    this.sab = typeof SharedArrayBuffer === 'function' ? new SharedArrayBuffer(4) : null;
    this.word = this.sab ? new Int32Array(this.sab) : null;
  }
  get supported(): boolean { return this.word !== null; }
  get paused(): boolean { return this.word !== null && Atomics.load(this.word, 0) !== 0; }
  pause(): void {
    if (!this.word) throw new KilnError('UNSUPPORTED', 'pausing needs SharedArrayBuffer (a cross-origin isolated page)');
    Atomics.store(this.word, 0, 1);
  }
  resume(): void { if (this.word) Atomics.store(this.word, 0, 0); }
}

export interface TrainOptions {
  model?: 'fc' | 'cnn';
  /** n images of 28x28 bytes, row-major */
  images: Uint8Array;
  /** n labels, 0..9 */
  labels: Uint8Array;
  testImages?: Uint8Array;
  testLabels?: Uint8Array;
  epochs?: number;
  batchSize?: number;
  learningRate?: number;
  seed?: number;
  signal?: AbortSignal;
  controller?: TrainController;
  onBatch?: (p: TrainProgress) => void;
}

const NPIX = 784;

function checkImages(what: string, images: unknown, labels: unknown): number {
  if (!(images instanceof Uint8Array)) throw new KilnError('INVALID_ARGUMENT', `${what}: images must be a Uint8Array`);
  if (!(labels instanceof Uint8Array)) throw new KilnError('INVALID_ARGUMENT', `${what}: labels must be a Uint8Array`);
  const n = labels.length;
  if (n < 1) throw new KilnError('INVALID_ARGUMENT', `${what}: no labels`);
  if (images.length !== n * NPIX) throw new KilnError('INVALID_ARGUMENT', `${what}: ${images.length} image bytes for ${n} labels (needs ${n * NPIX})`);
  for (let i = 0; i < n; i++) if (labels[i] > 9) throw new KilnError('INVALID_ARGUMENT', `${what}: label ${labels[i]} of image ${i} is not a class 0..9`);
  return n;
}

function intIn(what: string, v: number, lo: number, hi: number): number {
  if (!Number.isInteger(v) || v < lo || v > hi) throw new KilnError('INVALID_ARGUMENT', `train: ${what} ${v} must be an integer in ${lo}..${hi}`);
  return v;
}

/** copy (the worker gets its own buffer; the caller's stays usable) */
const copy = (a: Uint8Array): ArrayBuffer => a.slice().buffer;

/** a model trained by kiln.train(); its weights live in the engine worker */
export class TrainedModel {
  private freed = false;
  /** @internal */
  constructor(private kiln: Kiln, private id: number, readonly arch: 'fc' | 'cnn',
              /** accuracy on testImages/testLabels after training (when given) */ readonly testAccuracy?: number,
              readonly testLoss?: number) {}

  private live() { if (this.freed) throw new KilnError('INVALID_HANDLE', 'the trained model was freed'); }

  /** mean cross-entropy loss and accuracy over the images */
  async evaluate(images: Uint8Array, labels: Uint8Array): Promise<{ loss: number; accuracy: number; n: number }> {
    this.live();
    checkImages('evaluate', images, labels);
    const im = copy(images), lb = copy(labels);
    return this.kiln.sched.job({ t: 'trainEvaluate', model: this.id, images: im, labels: lb }, { transfer: [im, lb] });
  }

  /** class probabilities of one 28x28 image (784 bytes) */
  async classify(image: Uint8Array): Promise<Float32Array> {
    this.live();
    if (!(image instanceof Uint8Array) || image.length !== NPIX) throw new KilnError('INVALID_ARGUMENT', `classify: the image must be a Uint8Array of ${NPIX} bytes`);
    const im = copy(image);
    const r = await this.kiln.sched.job({ t: 'trainClassify', model: this.id, image: im }, { transfer: [im] });
    return new Float32Array(r.buffer);
  }

  /** the weights as a GGUF file (readable by `kiln-mnist eval`) */
  async toGGUF(): Promise<Uint8Array> {
    this.live();
    const r = await this.kiln.sched.job({ t: 'trainGGUF', model: this.id });
    return new Uint8Array(r.buffer);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.kiln.sched.send({ t: 'trainFree', model: this.id });
  }
}

/** @internal */
export async function train(kiln: Kiln, o: TrainOptions): Promise<TrainedModel> {
  if (!o || typeof o !== 'object') throw new KilnError('INVALID_ARGUMENT', 'train: options missing');
  const arch = o.model ?? 'fc';
  if (arch !== 'fc' && arch !== 'cnn') throw new KilnError('INVALID_ARGUMENT', `train: model '${String(arch)}' is neither 'fc' nor 'cnn'`);
  const n = checkImages('train', o.images, o.labels);
  const epochs = intIn('epochs', o.epochs ?? 1, 1, 100000);
  const batchSize = intIn('batchSize', o.batchSize ?? 32, 1, 4096);
  if (batchSize > n) throw new KilnError('INVALID_ARGUMENT', `train: batchSize ${batchSize} is larger than the ${n} images`);
  const seed = intIn('seed', o.seed ?? 1, 0, Number.MAX_SAFE_INTEGER);
  const lr = o.learningRate ?? 1e-3;
  if (typeof lr !== 'number' || !(lr > 0 && lr < 10)) throw new KilnError('INVALID_ARGUMENT', `train: learningRate ${String(lr)} must be in (0, 10)`);
  const hasTest = o.testImages !== undefined || o.testLabels !== undefined;
  if (hasTest) checkImages('train (test set)', o.testImages, o.testLabels);
  if (o.signal?.aborted) throw new KilnAbortError();
  const msg: RequestMsg<'train'> = {
    t: 'train', arch: arch === 'fc' ? 0 : 1, epochs, batchSize, seed, learningRate: lr,
    images: copy(o.images), labels: copy(o.labels), pauseSab: o.controller?.sab ?? null,
  };
  const transfer: ArrayBuffer[] = [msg.images, msg.labels];
  if (hasTest) {
    msg.testImages = copy(o.testImages!); msg.testLabels = copy(o.testLabels!);
    transfer.push(msg.testImages, msg.testLabels);
  }
  const onBatch = o.onBatch;
  const r = await kiln.sched.job(msg, {
    signal: o.signal, transfer,
    onProgress: onBatch ? (p: TrainProgress) => { try { onBatch(p); } catch { /* a throwing callback must not stop training */ } } : undefined,
  });
  return new TrainedModel(kiln, r.modelId, arch, r.testAccuracy, r.testLoss);
}
