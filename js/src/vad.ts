/*
 * vad.ts — kiln.loadVad(): Silero VAD (whisper.cpp's ggml-silero-*.bin
 * model files) running in the engine worker.
 *
 *   const vad = await kiln.loadVad(url | path | bytes | Blob);
 *   const { probs, segments } = await vad.detect(samples, sampleRate, opts);
 *   const s = vad.stream({ sampleRate, onSpeechStart, onSpeechEnd, onProbability });
 *   s.push(chunk); ...; await s.end();
 *
 * detect() gives whisper.cpp's probabilities and segments. Audio at any rate
 * (Float32Array + sampleRate, or an AudioBuffer, mixed to mono) is resampled
 * to 16 kHz in the worker. The stream feeds chunks of any size to the same
 * model (state carried window to window) and turns probabilities into
 * speech start / end events as they arrive (the hysteresis, minimum silence,
 * 200 ms merging, minimum speech and padding of the whole-recording
 * segmenter, decided online: speech ends once the silence is long enough;
 * a start that turns out shorter than minSpeechMs is reported as a misfire).
 */
import { KilnError } from './errors.js';
import { smallSourceBytes } from './bytes.js';
import type { Kiln } from './kiln.js';

export type VadSource = string | URL | Uint8Array | ArrayBuffer | Blob;

export interface VadOptions {
  /** speech probability threshold (0.5); speech ends below threshold - 0.15 */
  threshold?: number;
  /** shortest speech kept, ms (250) */
  minSpeechMs?: number;
  /** silence that ends speech, ms (100) */
  minSilenceMs?: number;
  /** segments longer than this are split, s (no limit) */
  maxSpeechS?: number;
  /** padding around segments, ms (30) */
  speechPadMs?: number;
}

export interface VadSegment {
  /** seconds, rounded to centiseconds as whisper.cpp does */
  start: number;
  end: number;
}

export interface VadResult {
  /** one speech probability per 512-sample window at 16 kHz (32 ms) */
  probs: Float32Array;
  segments: VadSegment[];
}

/** what an AudioBuffer offers (so Node needs no DOM types) */
export interface AudioBufferLike {
  sampleRate: number;
  numberOfChannels: number;
  length: number;
  getChannelData(channel: number): Float32Array;
}

export interface VadStreamOptions extends VadOptions {
  /** rate of the pushed samples (required) */
  sampleRate: number;
  /** speech began (seconds from the start of the stream, padding included) */
  onSpeechStart?: (time: number) => void;
  /** speech ended: its samples at the stream's rate, padding included, and its times */
  onSpeechEnd?: (samples: Float32Array, segment: VadSegment) => void;
  /** speech that began (onSpeechStart) ended shorter than minSpeechMs */
  onMisfire?: () => void;
  /** every window's probability, with the window's start time */
  onProbability?: (prob: number, time: number) => void;
}

export const WINDOW = 512;
export const RATE = 16000;

function params(o: VadOptions = {}) {
  const num = (v: unknown, d: number, lo: number, hi: number, what: string) => {
    if (v === undefined) return d;
    if (typeof v !== 'number' || !(v >= lo && v <= hi)) throw new KilnError('INVALID_ARGUMENT', `vad: ${what} ${String(v)} must be a number in ${lo}..${hi}`);
    return v;
  };
  return {
    threshold: num(o.threshold, 0.5, 0, 1, 'threshold'),
    minSpeechMs: Math.round(num(o.minSpeechMs, 250, 0, 3.6e6, 'minSpeechMs')),
    minSilenceMs: Math.round(num(o.minSilenceMs, 100, 0, 3.6e6, 'minSilenceMs')),
    maxSpeechS: num(o.maxSpeechS, 0, 0, 1e9, 'maxSpeechS'), // 0: no limit
    speechPadMs: Math.round(num(o.speechPadMs, 30, 0, 3.6e6, 'speechPadMs')),
  };
}

/** @internal a copy of the samples, mono (an AudioBuffer's channels averaged), and their checked rate */
export function mono(input: Float32Array | AudioBufferLike, sampleRate: number | undefined, who = 'vad'): { x: Float32Array; rate: number } {
  if (input instanceof Float32Array) {
    if (!Number.isInteger(sampleRate) || sampleRate! < 1000 || sampleRate! > 1000000) {
      throw new KilnError('INVALID_ARGUMENT', `${who}: sampleRate ${String(sampleRate)} must be an integer in 1000..1000000`);
    }
    return { x: input.slice(), rate: sampleRate! };
  }
  if (input && typeof input === 'object' && typeof (input as AudioBufferLike).getChannelData === 'function') {
    const b = input as AudioBufferLike;
    const x = new Float32Array(b.length);
    for (let c = 0; c < b.numberOfChannels; c++) {
      const d = b.getChannelData(c);
      for (let i = 0; i < x.length; i++) x[i] += d[i] / b.numberOfChannels;
    }
    return mono(x, Math.round(b.sampleRate), who);
  }
  throw new KilnError('INVALID_ARGUMENT', `${who}: samples must be a Float32Array (with a sampleRate) or an AudioBuffer`);
}

let nextVadId = 1;

export async function loadVad(kiln: Kiln, source: VadSource): Promise<Vad> {
  const bytes = await smallSourceBytes(source, 'loadVad');
  const id = nextVadId++;
  await kiln.sched.job({ t: 'vadLoad', vad: id, bytes: bytes.buffer as ArrayBuffer }, { transfer: [bytes.buffer as ArrayBuffer] });
  return new Vad(kiln, id);
}

export class Vad {
  private freed = false;
  private streaming = false;
  /** @internal */
  constructor(private kiln: Kiln, private id: number) {}

  private live() { if (this.freed) throw new KilnError('INVALID_HANDLE', 'the VAD model was freed'); }

  /** @internal the engine's id of this model (a transcription that cuts speech with it: whisper.ts) */
  engineId(): number { this.live(); return this.id; }

  /** probabilities and whisper.cpp's segments of a whole recording */
  async detect(samples: Float32Array | AudioBufferLike, sampleRate?: number, opts: VadOptions = {}): Promise<VadResult> {
    this.live();
    if (this.streaming) throw new KilnError('INVALID_ARGUMENT', 'vad: detect() while a stream is open (one model carries one state)');
    const { x, rate } = mono(samples, sampleRate);
    const r = await this.kiln.sched.job({ t: 'vadDetect', vad: this.id, samples: x.buffer as ArrayBuffer, rate, opts: params(opts) }, { transfer: [x.buffer] });
    const segments: VadSegment[] = [];
    for (let i = 0; i < r.segs.length; i += 4) segments.push({ start: r.segs[i] / 100, end: r.segs[i + 1] / 100 });
    return { probs: new Float32Array(r.buffer), segments };
  }

  /** a stream of chunks (a microphone); see VadStreamOptions */
  stream(opts: VadStreamOptions): VadStream {
    this.live();
    if (this.streaming) throw new KilnError('INVALID_ARGUMENT', 'vad: a stream is already open on this model');
    const p = params(opts);
    const { rate } = mono(new Float32Array(0), opts.sampleRate);
    this.streaming = true;
    this.kiln.sched.send({ t: 'vadStreamBegin', vad: this.id, rate });
    return new VadStream(this.kiln, this.id, rate, p, opts, () => { this.streaming = false; });
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.kiln.sched.send({ t: 'vadFree', vad: this.id });
  }
}

/** speech events from pushed chunks; push() and end() resolve when the engine has taken the samples in */
export class VadStream {
  private windows = 0;          // windows seen
  private triggered = false;
  private startWin = 0;
  private tempEnd = -1;         // first silent window after speech, -1: none
  private chunks: Float32Array[] = [];
  private base = 0;             // stream sample index of chunks[0][0]
  private total = 0;            // samples pushed
  private closed = false;

  /** @internal */
  constructor(private kiln: Kiln, private id: number, private rate: number, private p: ReturnType<typeof params>,
              private cb: VadStreamOptions, private done: () => void) {}

  push(chunk: Float32Array): Promise<void> {
    if (this.closed) return Promise.reject(new KilnError('INVALID_ARGUMENT', 'vad: push() after end()'));
    if (!(chunk instanceof Float32Array)) return Promise.reject(new KilnError('INVALID_ARGUMENT', 'vad: push() takes a Float32Array'));
    const c = chunk.slice();
    this.chunks.push(c);
    this.total += c.length;
    const x = c.slice();
    return this.kiln.sched.job({ t: 'vadStreamPush', vad: this.id, samples: x.buffer as ArrayBuffer }, { transfer: [x.buffer] })
      .then((r) => this.onProbs(new Float32Array(r.buffer), false));
  }

  /** the last partial window, and the end of speech still open */
  end(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    return this.kiln.sched.job({ t: 'vadStreamEnd', vad: this.id })
      .then((r) => this.onProbs(new Float32Array(r.buffer), true))
      .finally(() => this.done());
  }

  private sec(win: number) { return (win * WINDOW) / RATE; }

  private emitEnd(endWin: number) {
    const padS = this.p.speechPadMs / 1000;
    const start = Math.max(0, this.sec(this.startWin) - padS);
    const end = Math.min(this.total / this.rate, this.sec(endWin) + padS);
    this.triggered = false;
    this.tempEnd = -1;
    if (this.sec(endWin) - this.sec(this.startWin) < this.p.minSpeechMs / 1000) {
      try { this.cb.onMisfire?.(); } catch { /* the caller's */ }
      return;
    }
    const a = Math.round(start * this.rate), b = Math.round(end * this.rate);
    const out = new Float32Array(Math.max(0, b - a));
    let pos = this.base;
    for (const c of this.chunks) {
      const lo = Math.max(a, pos), hi = Math.min(b, pos + c.length);
      if (hi > lo) out.set(c.subarray(lo - pos, hi - pos), lo - a);
      pos += c.length;
    }
    try { this.cb.onSpeechEnd?.(out, { start: Math.round(start * 100) / 100, end: Math.round(end * 100) / 100 }); } catch { /* the caller's */ }
  }

  private onProbs(probs: Float32Array, last: boolean) {
    const thr = this.p.threshold, neg = Math.max(0.01, thr - 0.15);
    // whisper.cpp merges segments less than 200 ms apart: speech ends after
    // that much silence even when minSilenceMs is shorter
    const endSilence = Math.max(this.p.minSilenceMs / 1000, 0.2) * RATE;
    for (const pr of probs) {
      const i = this.windows++;
      try { this.cb.onProbability?.(pr, this.sec(i)); } catch { /* the caller's */ }
      if (pr >= thr && this.tempEnd >= 0) this.tempEnd = -1;
      if (pr >= thr && !this.triggered) {
        this.triggered = true;
        this.startWin = i;
        try { this.cb.onSpeechStart?.(Math.max(0, this.sec(i) - this.p.speechPadMs / 1000)); } catch { /* the caller's */ }
        continue;
      }
      if (this.triggered && this.p.maxSpeechS > 0 && this.sec(i - this.startWin) > this.p.maxSpeechS) { this.emitEnd(i); continue; }
      if (pr < neg && this.triggered) {
        if (this.tempEnd < 0) this.tempEnd = i;
        if ((i - this.tempEnd) * WINDOW >= endSilence) this.emitEnd(this.tempEnd);
      }
    }
    if (last && this.triggered) this.emitEnd(this.tempEnd >= 0 ? this.tempEnd : this.windows);
    // keep the audio a later segment can still reach (its start minus the padding)
    const keepFrom = Math.floor(Math.max(0, (this.triggered ? this.sec(this.startWin) : this.sec(this.windows)) - this.p.speechPadMs / 1000 - 0.1) * this.rate);
    while (this.chunks.length > 1 && this.base + this.chunks[0].length < keepFrom) { this.base += this.chunks[0].length; this.chunks.shift(); }
  }
}
