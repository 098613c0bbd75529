/*
 * protocol.ts — the messages between the package (kiln.ts, generate.ts,
 * autograd.ts, train.ts, bytes.ts through scheduler.ts) and the engine
 * worker (worker.ts). Types only: worker.ts is a classic script and reads
 * them with import('./protocol.js') type queries, so nothing here is code.
 *
 * A request is { t: kind, ...fields }; a job also carries the id the
 * scheduler gives it, and the worker answers with one 'reply'.
 */
import type { WireError } from './errors.js';

export type Build = 'st' | 'mt';

/** @internal what the worker reports about the engine (KilnInfo in kiln.ts) */
export interface EngineInfo {
  build: Build;
  simdFlavor: 'relaxed' | 'simd128';
  threads: number;
  simd: boolean;
  version: string;
  isa: string;
  /** the ops of the op table (wasm/kiln_wasm_ops.c, KW_OPS) */
  ops: string[];
}

/** @internal where a model's bytes come from */
export type ModelSourceMsg =
  | { kind: 'bytes'; buffer: ArrayBuffer | SharedArrayBuffer; byteOffset: number; byteLength: number }
  /** bytes still on the caller's side (bytes.ts): 'shared' copies into wasm memory, 'slices' sends them */
  | { kind: 'fill'; mode: 'shared' | 'slices'; byteLength: number; head: ArrayBuffer }
  | { kind: 'path'; path: string }
  /** store: an OPFS file the worker also writes the downloaded bytes to (the model cache) */
  | { kind: 'url'; url: string; store?: FileSystemFileHandle }
  | { kind: 'blob'; blob: Blob }
  | { kind: 'stream'; stream: ReadableStream<Uint8Array>; size: number };

/** @internal what a load with a store file wrote: the bytes, the response's ETag, or why it stopped */
export interface StoredMsg { bytes: number; etag: string | null; error?: string }

export type MetadataValue = string | number | boolean | { array: string; length: number };

/** @internal */
export interface TensorDesc { shape: number[]; type: number; nbytes: number }
/** @internal */
export interface LlmInfo { nCtx: number; nVocab: number; bos: number; eos: number; bosText: string; eosText: string }
export interface GenerationStats {
  /** the prompt's length in tokens, cached ones included */
  promptTokens: number;
  /** prompt tokens taken from the session's KV cache (the longest common prefix with what it holds), not evaluated */
  cachedTokens: number;
  generatedTokens: number;
  /** evaluated prompt tokens (promptTokens - cachedTokens) per second */
  promptTokensPerSecond: number;
  tokensPerSecond: number;
}
export interface Completion {
  /** the generated text (without the prompt) */
  text: string;
  /** the generated token ids (the end-of-text token excluded) */
  tokens: number[];
  stats: GenerationStats;
  stopReason: StopReason;
  /** with the option logprobs: one entry per generated token (as tokens) */
  logprobs?: TokenLogprob[];
}
/** a generated token's log-probability and the most likely tokens at its position */
export interface TokenLogprob {
  token: number;
  /** the token's text (control tokens as their text) */
  text: string;
  logprob: number;
  /** the most likely tokens, most likely first (as many as the option logprobs asks) */
  top: { token: number; text: string; logprob: number }[];
}
/** why a generation ended: end-of-text token, maxTokens reached, a stop string, or the context is full */
export type StopReason = 'eos' | 'maxTokens' | 'stop' | 'context';

/** @internal a generation; the engine checks the ranges of the numbers (kiln_sampler_params_check) */
export interface GenerateReq {
  model: number;
  /** 0: the model's default session; else one of model.session()'s (its own KV cache) */
  session: number;
  stream: boolean;
  prompt?: string;
  promptIds?: number[];
  maxTokens: number;
  temperature: number;
  topK: number;
  topP: number;
  minP: number;
  repeatPenalty: number;
  frequencyPenalty: number;
  presencePenalty: number;
  penaltyLastN: number;
  seed: number;
  stop: string[];
  addBos: boolean;
  parseSpecial: boolean;
  /** a full context drops the older half after the first nKeep tokens and goes on */
  contextShift: boolean;
  nKeep: number;
  /** reuse the session's cached tokens the prompt starts with */
  cachePrompt: boolean;
  /** GBNF text, or a JSON Schema's JSON text (turned into GBNF in the engine) */
  grammar?: string;
  jsonSchema?: string;
  /** [token id or text (tokenized without BOS), bias] */
  logitBias: Array<[number | string, number]>;
  /** top-N log-probabilities per token (0: off) */
  logprobs: number;
}

/** @internal */
export interface TrainReq {
  arch: number;
  epochs: number;
  batchSize: number;
  seed: number;
  learningRate: number;
  images: ArrayBuffer;
  labels: ArrayBuffer;
  testImages?: ArrayBuffer;
  testLabels?: ArrayBuffer;
  pauseSab: SharedArrayBuffer | null;
}

/** @internal every request: its fields and what its reply carries (void: fire and forget) */
export interface Requests {
  init: {
    req: { build: Build; threads: number; logLevel: number; abortSab: SharedArrayBuffer | null; variants: { name: string; files: EngineFiles }[]; wasmUrlGiven: boolean };
    reply: { info: EngineInfo; abortMemory: ArrayBuffer | SharedArrayBuffer | null; abortPtr: number };
  };
  info: { req: object; reply: EngineInfo };
  memory: { req: object; reply: { used: number; total: number; max: number; handles: number } };
  /** type -1: data that is not a tensor (the error is kept for the tensor) */
  tensor: { req: { out: number; type: number; shape: number[]; buffer: ArrayBuffer; byteOffset: number; byteLength: number; param?: boolean }; reply: void };
  /** inputs: tensor ids, 0 for an absent optional input, -1 for a foreign one */
  op: { req: { out: number; op: string; inputs: number[]; params: number[] }; reply: void };
  modelTensor: { req: { out: number; model: number; name: string }; reply: void };
  free: { req: { tensor: number }; reply: void };
  ready: { req: { tensor: number }; reply: TensorDesc };
  data: { req: { tensor: number }; reply: TensorDesc & { buffer: ArrayBuffer } };
  load: {
    /** lora: adapter files (llama.cpp's GGUF LoRA format) applied in order, each at its scale */
    req: { source: ModelSourceMsg; vocabOnly: boolean; nCtx: number; lora?: { bytes: ArrayBuffer; scale: number }[] };
    reply: { modelId: number; size: number; version: number; nKv: number; tensors: string[]; metadata: Record<string, MetadataValue>; stored?: StoredMsg };
  };
  freeModel: { req: { model: number }; reply: void };
  /** the session's ids and KV cache as bytes (kiln_gen_state_save's format, src/include/kiln-llama.h) */
  saveState: { req: { model: number; session: number }; reply: { buffer: ArrayBuffer } };
  /** checked whole first: a bad state changes nothing */
  loadState: { req: { model: number; session: number; buffer: ArrayBuffer }; reply: void };
  /** a session's KV cache and generator go (model.session().free()) */
  freeSession: { req: { model: number; session: number }; reply: void };
  /** the logits of the session's last evaluated position (tests check logprobs against them) */
  lastLogits: { req: { model: number; session: number }; reply: { buffer: ArrayBuffer } };
  tokenize: { req: { model: number; text: string; addBos: boolean; special: boolean }; reply: number[] };
  detokenize: { req: { model: number; ids: number[]; removeSpecial: boolean; unparseSpecial: boolean }; reply: string };
  tokenPiece: { req: { model: number; token: number; special: boolean }; reply: string };
  meta: { req: { model: number; key: string }; reply: string | null };
  /** messages through a built-in chat template (a name, or template text whose family is recognised; null: the model's) */
  chatBuiltin: { req: { model: number; messages: { role: string; content: string }[]; template: string | null }; reply: string };
  llmInfo: { req: { model: number }; reply: LlmInfo };
  /** one vector (or, pooling none, one per token) per text, back to back in buffer; counts: floats per text */
  embed: { req: { model: number; texts: string[]; pooling: number; normalize: boolean }; reply: { buffer: ArrayBuffer; counts: number[]; nEmbd: number } };
  /** streams 'piece' messages while it runs */
  generate: { req: GenerateReq; reply: Completion };
  backward: { req: { tensor: number }; reply: { params: number[] } };
  grad: { req: { out: number; tensor: number }; reply: void };
  zeroGrad: { req: { tensors: number[] }; reply: void };
  optimStep: {
    req: { optim: number; kind: 'sgd' | 'adamw'; params: number[]; lr: number; beta1: number; beta2: number; eps: number; weightDecay: number; momentum: number };
    reply: { updated: number };
  };
  optimFree: { req: { optim: number }; reply: void };
  /** reports 'progress' with a train field after every batch */
  train: { req: TrainReq; reply: { modelId: number; testLoss?: number; testAccuracy?: number } };
  trainEvaluate: { req: { model: number; images: ArrayBuffer; labels: ArrayBuffer }; reply: { loss: number; accuracy: number; n: number } };
  trainClassify: { req: { model: number; image: ArrayBuffer }; reply: { buffer: ArrayBuffer } };
  trainGGUF: { req: { model: number }; reply: { buffer: ArrayBuffer } };
  trainFree: { req: { model: number }; reply: void };
  /** LoRA fine-tuning of a loaded model (finetune.ts); reports 'progress' with a finetune field after every step */
  finetune: { req: FinetuneReq; reply: { buffer: ArrayBuffer; steps: number; valLossBefore: number; valLoss: number } };
  /** Silero VAD (vad.ts, wasm/kiln_wasm_audio.c); vad: the client's id for a loaded model */
  vadLoad: { req: { vad: number; bytes: ArrayBuffer }; reply: undefined };
  vadDetect: { req: { vad: number; samples: ArrayBuffer; rate: number; opts: VadParams }; reply: { buffer: ArrayBuffer; segs: number[] } };
  vadStreamBegin: { req: { vad: number; rate: number }; reply: undefined };
  vadStreamPush: { req: { vad: number; samples: ArrayBuffer }; reply: { buffer: ArrayBuffer } };
  vadStreamEnd: { req: { vad: number }; reply: { buffer: ArrayBuffer } };
  vadFree: { req: { vad: number }; reply: undefined };
  /** Whisper (whisper.ts, wasm/kiln_wasm_whisper.c); whisper: the client's id for a loaded model */
  whisperLoad: { req: { whisper: number; source: ModelSourceMsg }; reply: WhisperInfoMsg & { stored?: StoredMsg } };
  /** streams 'segment' messages and 'progress' with a transcribe field while it runs */
  whisperTranscribe: { req: WhisperTranscribeReq; reply: WhisperResultMsg };
  whisperFree: { req: { whisper: number }; reply: undefined };
}
/** @internal */
export type VadRequestKind = 'vadLoad' | 'vadDetect' | 'vadStreamBegin' | 'vadStreamPush' | 'vadStreamEnd' | 'vadFree';
/** @internal */
export type WhisperRequestKind = 'whisperLoad' | 'whisperTranscribe' | 'whisperFree';

/** @internal a transcription; opts: the numbers of wasm/kiln_wasm_whisper.c's enum kw_whisper_opt, in its order */
export interface WhisperTranscribeReq {
  whisper: number;
  samples: ArrayBuffer;
  rate: number;
  opts: number[];
  /** a language code, or 'auto' */
  language: string;
  prompt: string;
  /** the client id of a loaded VAD model (vad.ts), 0: none */
  vad: number;
}

/** a Whisper model file's header (whisper.cpp's hparams) and whether its vocabulary is multilingual */
export interface WhisperInfoMsg {
  nVocab: number; nAudioCtx: number; nAudioState: number; nAudioHead: number; nAudioLayer: number;
  nTextCtx: number; nTextState: number; nTextHead: number; nTextLayer: number; nMels: number; ftype: number;
  multilingual: boolean;
}

/** one token of a transcript segment */
export interface WhisperTokenMsg {
  id: number;
  /** the token's text (a token can hold part of a UTF-8 character: then it shows as U+FFFD) */
  text: string;
  /** its probability and log-probability when it was chosen */
  p: number;
  logprob: number;
}

/** one segment of a transcript */
export interface WhisperSegmentMsg {
  /** seconds from the start of the audio (centisecond steps, as whisper.cpp) */
  start: number;
  end: number;
  text: string;
  /** the segment's tokens: text tokens and the timestamp tokens that bound it */
  tokens: WhisperTokenMsg[];
  /** the probability of no speech in the 30 s window this segment came from */
  noSpeechProb: number;
}

/** @internal */
export interface WhisperResultMsg {
  segments: WhisperSegmentMsg[];
  language: string;
  /** language detection's probabilities (when the language was 'auto'): code -> probability */
  languageProbs: Record<string, number> | null;
}

/** one engine variant's files as URLs (file: URLs in Node; see assets.ts) */
export interface EngineFiles {
  /** emscripten's loader (a classic script) */
  js: string;
  wasm: string;
  /** kiln-mt: the pthread worker's script */
  worker?: string;
}

/** @internal VAD segmentation parameters, checked by vad.ts */
export interface VadParams { threshold: number; minSpeechMs: number; minSilenceMs: number; maxSpeechS: number; speechPadMs: number }

/** @internal */
export type RequestKind = keyof Requests;
/** @internal a request of one kind (or of any kind) as the package sends it */
export type RequestMsg<K extends RequestKind = RequestKind> = K extends RequestKind ? { t: K } & Requests[K]['req'] : never;
/** @internal what a job of kind K resolves to */
export type ReplyOf<K extends RequestKind> = Requests[K]['reply'];

/** @internal messages for a running job past the queue */
export type ControlMsg =
  | { t: 'abort'; job: number }
  | { t: 'fillData'; job: number; buffer: ArrayBuffer; byteLength: number; error?: string }
  | { t: 'filled'; job: number; error?: string };

/** @internal everything the worker receives: a request (with the job id the scheduler gave it), or control */
export type ToWorker = (RequestMsg & { id?: number }) | ControlMsg;

export interface TrainProgressMsg { epoch: number; batch: number; batches: number; loss: number; accuracy: number }

/** @internal model.finetune() (finetune.ts, wasm/kiln_wasm_finetune.c) */
export interface FinetuneReq {
  model: number;
  data: string;
  chat: boolean;
  rank: number;
  alpha: number;
  targets: string;
  nCtx: number;
  batchSize: number;
  epochs: number;
  lr: number;
  seed: number;
  valFraction: number;
  dropout: number;
}

/** one optimizer step of model.finetune(); valLoss after the last step of an epoch */
export interface FinetuneProgressMsg { step: number; steps: number; epoch: number; loss: number; lr: number; gradNorm: number; tokens: number; valLoss?: number }

/** everything the worker sends */
export type FromWorker =
  | { t: 'started' }
  | { t: 'reply'; id: number; ok: true; value: unknown }
  | { t: 'reply'; id: number; ok: false; error: WireError }
  | { t: 'progress'; id: number; loaded: number; total: number }
  | { t: 'progress'; id: number; train: TrainProgressMsg }
  | { t: 'progress'; id: number; finetune: FinetuneProgressMsg }
  /** a transcription's progress: the percentage of the audio decoded */
  | { t: 'progress'; id: number; transcribe: number }
  /** a transcription's new segment, as soon as it is decoded */
  | { t: 'segment'; id: number; segment: WhisperSegmentMsg }
  /** generated text: the pieces of one or more tokens, in order (the worker sends
   *  the first at once, then at most one message per 50 ms: the page's thread wakes
   *  ~20 times a second however fast tokens come); with logprobs asked for, each
   *  piece's entry at the same index (null for a step without one) */
  | { t: 'piece'; id: number; texts: string[]; logprobs?: (TokenLogprob | null)[] }
  /** a 'fill' load asks for its bytes: into shared wasm memory, or the next slice */
  | { t: 'fill'; id: number; memory: SharedArrayBuffer; ptr: number; total: number }
  | { t: 'fill'; id: number; loaded: number; total: number; buffer?: ArrayBuffer };

export type FillMsg = Extract<FromWorker, { t: 'fill' }>;
