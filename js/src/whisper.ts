/*
 * whisper.ts — kiln.loadWhisper(): speech to text with whisper.cpp's model
 * files (ggml-tiny.en.bin, ggml-base.bin, ... and their quantized variants),
 * running in the engine worker.
 *
 *   const whisper = await kiln.loadWhisper(url | path | bytes | Blob, { onProgress, cache: true });
 *   const { text, segments } = await whisper.transcribe(samples, sampleRate, {
 *     language: 'en', beamSize: 5, signal, onSegment: (s) => ..., onProgress: (percent) => ... });
 *   whisper.free();
 *
 * transcribe() is whisper.cpp's whisper_full (greedy or beam search, the
 * temperature fallback with best-of sampling, timestamps, initial prompt,
 * translate, language detection) with whisper.cpp's defaults, on audio at
 * any rate (Float32Array + sampleRate, or an AudioBuffer mixed to mono)
 * resampled to 16 kHz in the worker. With `vad` (a model from
 * kiln.loadVad) only the speech is transcribed, and times map back to the
 * input as whisper.cpp's --vad does. Segments stream to onSegment as they
 * are decoded; the signal stops the transcription between graph nodes
 * (where the page is cross-origin isolated; elsewhere the promise rejects
 * at once and the engine finishes the window it is in).
 */
import { KilnError } from './errors.js';
import { loadModelCached, type CacheEvent } from './cache.js';
import { mono, type AudioBufferLike, type Vad, type VadOptions } from './vad.js';
import type { Kiln } from './kiln.js';
import type { Progress } from './scheduler.js';
import type { FillMsg, ModelSourceMsg, WhisperInfoMsg, WhisperSegmentMsg, WhisperTokenMsg } from './protocol.js';

const isNode = typeof process === 'object' && !!process.versions?.node && typeof globalThis.window === 'undefined';

export type WhisperSource = string | URL | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;
export type WhisperInfo = WhisperInfoMsg;
export type WhisperSegment = WhisperSegmentMsg;
export type WhisperToken = WhisperTokenMsg;

export interface WhisperLoadOptions {
  /** bytes read so far */
  onProgress?: (p: Progress) => void;
  signal?: AbortSignal;
  /** URLs in browsers: keep the file in the persistent model cache (kiln.cache, as loadModel's); 'revalidate' checks size/ETag with a HEAD first */
  cache?: boolean | 'revalidate';
  onCache?: (e: CacheEvent) => void;
}

export interface TranscribeOptions {
  /** the spoken language: a code ('en', 'de', ...; 'en' by default) or 'auto' to detect it on the first 30 s */
  language?: string;
  /** translate to English (multilingual models) */
  translate?: boolean;
  /** 1: greedy decoding (the default); 2..8: beam search with that many beams */
  beamSize?: number;
  /** samples per temperature above 0 in the fallback (5) */
  bestOf?: number;
  /** the first temperature (0) */
  temperature?: number;
  /** the fallback's temperature step (0.2); 0: no fallback */
  temperatureInc?: number;
  /** text whose tokens precede the first window (names, spelling, style) */
  prompt?: string;
  /** keep the prompt in front of every window (false) */
  carryPrompt?: boolean;
  /** decode with timestamp tokens and cut segments at them (true); false: one text per window */
  timestamps?: boolean;
  /** one segment per 30 s window (false) */
  singleSegment?: boolean;
  /** tokens of earlier text carried into the next window (16384; 0: none) */
  maxContext?: number;
  /** suppress a blank first token (true) */
  suppressBlank?: boolean;
  /** suppress non-speech tokens: music and sound symbols (false) */
  suppressNonSpeech?: boolean;
  /** fallback thresholds: entropy (2.4), average log-probability (-1), no-speech probability (0.6) */
  entropyThreshold?: number;
  logprobThreshold?: number;
  noSpeechThreshold?: number;
  /** the first timestamp at most this far into a window, s (1) */
  maxInitialTs?: number;
  /** whisper.cpp's length penalty; -1: score = sum of log-probabilities / length (-1) */
  lengthPenalty?: number;
  /** transcribe only the speech this VAD model finds (kiln.loadVad); times stay those of the input */
  vad?: Vad;
  /** the VAD's segmentation (vad.detect()'s options) and the audio kept after each speech segment, s (0.1) */
  vadOptions?: VadOptions & { samplesOverlap?: number };
  signal?: AbortSignal;
  /** each segment as soon as it is decoded (the result holds them all again) */
  onSegment?: (segment: WhisperSegment) => void;
  /** the percentage of the audio decoded (whisper.cpp's progress callback) */
  onProgress?: (percent: number) => void;
}

export interface Transcript {
  /** the segments' text, joined */
  text: string;
  segments: WhisperSegment[];
  /** the language decoded (detected with 'auto') */
  language: string;
  /** with language 'auto' on a multilingual model: each language's detection probability */
  languageProbs: Record<string, number> | null;
}

let nextWhisperId = 1;

export async function loadWhisper(kiln: Kiln, source: WhisperSource, opts: WhisperLoadOptions = {}): Promise<Whisper> {
  const { cache, onCache, signal, onProgress } = opts;
  if (cache && !isNode && (source instanceof URL || typeof source === 'string')) {
    // the model cache of loadModel (cache.ts), with this file's loads
    return loadModelCached<Whisper>({
      loadModel: (src, o) => loadFrom(kiln, src, o),
      async loadModelStoring(url, store, o) {
        const { whisper, stored } = await loadJob(kiln, { kind: 'url', url, store }, [], o);
        return { model: whisper, stored };
      },
    }, source, { signal, onProgress, cache, onCache });
  }
  return loadFrom(kiln, source, { signal, onProgress });
}

/** a file from any source, streamed into the worker as loadModel's are (kiln.modelSource) */
async function loadFrom(kiln: Kiln, source: WhisperSource, opts: { size?: number; signal?: AbortSignal; onProgress?: (p: Progress) => void }) {
  const plan = await kiln.modelSource(source, opts, 'loadWhisper');
  return (await loadJob(kiln, plan.source, plan.transfer, opts, plan.onFill)).whisper;
}

async function loadJob(kiln: Kiln, source: ModelSourceMsg, transfer: Transferable[], opts: { signal?: AbortSignal; onProgress?: (p: Progress) => void },
  onFill?: (msg: FillMsg, live: () => boolean) => void) {
  const id = nextWhisperId++;
  const { stored, ...info } = await kiln.sched.job({ t: 'whisperLoad', whisper: id, source }, { transfer, signal: opts.signal, onProgress: opts.onProgress, onFill });
  return { whisper: new Whisper(kiln, id, info), stored: stored ?? null };
}

/** the option array of wasm/kiln_wasm_whisper.c (enum kw_whisper_opt, same order) */
function optionArray(o: TranscribeOptions): number[] {
  const num = (v: unknown, d: number, lo: number, hi: number, what: string, int = false) => {
    if (v === undefined) return d;
    if (typeof v !== 'number' || !(v >= lo && v <= hi) || (int && !Number.isInteger(v))) {
      throw new KilnError('INVALID_ARGUMENT', `whisper: ${what} ${String(v)} must be ${int ? 'an integer' : 'a number'} in ${lo}..${hi}`);
    }
    return v;
  };
  const flag = (v: unknown, d: boolean, what: string) => {
    if (v === undefined) return d ? 1 : 0;
    if (typeof v !== 'boolean') throw new KilnError('INVALID_ARGUMENT', `whisper: ${what} must be true or false`);
    return v ? 1 : 0;
  };
  const vo = o.vadOptions ?? {};
  return [
    num(o.beamSize, 1, 1, 8, 'beamSize', true),
    num(o.bestOf, 5, 1, 8, 'bestOf', true),
    num(o.temperature, 0, 0, 1, 'temperature'),
    num(o.temperatureInc, 0.2, 0, 1, 'temperatureInc'),
    flag(o.translate, false, 'translate'),
    o.timestamps === undefined ? 0 : 1 - flag(o.timestamps, true, 'timestamps'),
    flag(o.singleSegment, false, 'singleSegment'),
    num(o.maxContext, 16384, 0, 16384, 'maxContext', true),
    flag(o.suppressBlank, true, 'suppressBlank'),
    flag(o.suppressNonSpeech, false, 'suppressNonSpeech'),
    num(o.entropyThreshold, 2.4, -1e9, 1e9, 'entropyThreshold'),
    num(o.logprobThreshold, -1, -1e9, 1e9, 'logprobThreshold'),
    num(o.noSpeechThreshold, 0.6, -1e9, 1e9, 'noSpeechThreshold'),
    num(o.maxInitialTs, 1, 0, 30, 'maxInitialTs'),
    num(o.lengthPenalty, -1, -1, 1e9, 'lengthPenalty'),
    flag(o.carryPrompt, false, 'carryPrompt'),
    num(vo.threshold, 0.5, 0, 1, 'vadOptions.threshold'),
    Math.round(num(vo.minSpeechMs, 250, 0, 3.6e6, 'vadOptions.minSpeechMs')),
    Math.round(num(vo.minSilenceMs, 100, 0, 3.6e6, 'vadOptions.minSilenceMs')),
    num(vo.maxSpeechS, 0, 0, 1e9, 'vadOptions.maxSpeechS'),
    Math.round(num(vo.speechPadMs, 30, 0, 3.6e6, 'vadOptions.speechPadMs')),
    num(vo.samplesOverlap, 0.1, 0, 10, 'vadOptions.samplesOverlap'),
  ];
}

export class Whisper {
  private freed = false;
  /** the model file's header */
  readonly info: WhisperInfo;
  /** @internal */
  constructor(private kiln: Kiln, private id: number, info: WhisperInfo) { this.info = info; }

  private live() { if (this.freed) throw new KilnError('INVALID_HANDLE', 'the Whisper model was freed'); }

  /** the transcript of a recording; see TranscribeOptions */
  async transcribe(samples: Float32Array | AudioBufferLike, sampleRate?: number, opts: TranscribeOptions = {}): Promise<Transcript> {
    this.live();
    const { x, rate } = mono(samples, sampleRate, 'whisper');
    if (x.length === 0) throw new KilnError('INVALID_ARGUMENT', 'whisper: no audio (0 samples)');
    const language = opts.language ?? 'en';
    if (typeof language !== 'string' || !/^([a-z]{2,3}|auto)$/.test(language)) {
      throw new KilnError('INVALID_ARGUMENT', `whisper: language ${JSON.stringify(language)} must be a language code ('en', 'de', ...) or 'auto'`);
    }
    if (opts.prompt !== undefined && typeof opts.prompt !== 'string') throw new KilnError('INVALID_ARGUMENT', 'whisper: prompt must be a string');
    const vad = opts.vad ? opts.vad.engineId() : 0;
    const r = await this.kiln.sched.job({
      t: 'whisperTranscribe', whisper: this.id, samples: x.buffer as ArrayBuffer, rate, opts: optionArray(opts), language, prompt: opts.prompt ?? '', vad,
    }, { transfer: [x.buffer as ArrayBuffer], signal: opts.signal, onSegment: opts.onSegment, onProgress: opts.onProgress });
    return { text: r.segments.map((s) => s.text).join(''), segments: r.segments, language: r.language, languageProbs: r.languageProbs };
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.kiln.sched.send({ t: 'whisperFree', whisper: this.id });
  }
}
