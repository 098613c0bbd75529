/*
 * finetune.ts — model.finetune(): LoRA fine-tuning of a loaded decoder in the
 * engine worker (wasm/kiln_wasm_finetune.c over src/models/finetune*.c), one
 * optimizer step per progress event, abortable between steps. The result is
 * the adapter as a GGUF file in llama.cpp's LoRA layout (general.type =
 * adapter, <base tensor>.lora_a / .lora_b), which llama.cpp, wllama, Ollama
 * and LM Studio load.
 *
 * The base weights are read where they lie in the engine's memory and never
 * copied to f32; a model whose Q4_0 / Q8_0 weights were already rearranged
 * for generation (the first generate() call does that) cannot be trained:
 * fine-tune before generating, or load the model again.
 */
import { KilnAbortError, KilnError } from './errors.js';
import type { Kiln } from './kiln.js';
import type { FinetuneProgressMsg, RequestMsg } from './protocol.js';

export type FinetuneProgress = FinetuneProgressMsg;

export interface FinetuneOptions {
  /** plain text (one document per line) or, with chat, JSONL {"messages": [...]} lines */
  data: string;
  /** JSONL conversations; only assistant turns are scored (ChatML rendering, src/models/finetune_data.c) */
  chat?: boolean;
  /** LoRA rank (default 8) */
  rank?: number;
  /** LoRA alpha: the adapter is scaled by alpha / rank (default 16) */
  alpha?: number;
  /** projections to adapt among q, k, v, o, gate, up, down (default ['q', 'v']); on mixture-of-experts
   * models (qwen2moe, qwen3moe) gate, up and down adapt every routed expert (one A/B pair per expert,
   * as llama.cpp applies adapters to expert tensors) and the shared expert; the routers are not targets */
  targets?: string[];
  /** tokens per training sequence (default 64, at most the model's training context) */
  nCtx?: number;
  /** sequences per step (default 4) */
  batchSize?: number;
  epochs?: number;
  /** peak learning rate of the AdamW cosine schedule (default 1e-3) */
  lr?: number;
  seed?: number;
  /** share of the sequences held out to report a validation loss (default 0.1) */
  valFraction?: number;
  /** LoRA dropout on the adapters' inputs during training, as PEFT's lora_dropout (default 0: off);
   * the masks follow from the seed, so a run is still reproducible */
  dropout?: number;
  signal?: AbortSignal;
  onProgress?: (p: FinetuneProgress) => void;
}

export interface FinetuneResult {
  /** the adapter file (GGUF) */
  adapter: Uint8Array;
  steps: number;
  /** validation loss before training and after the last step */
  valLossBefore: number;
  valLoss: number;
}

const TARGETS = ['q', 'k', 'v', 'o', 'gate', 'up', 'down'];

function intIn(what: string, v: number, lo: number, hi: number): number {
  if (!Number.isInteger(v) || v < lo || v > hi) throw new KilnError('INVALID_ARGUMENT', `finetune: ${what} ${String(v)} must be an integer in ${lo}..${hi}`);
  return v;
}

/** @internal */
export async function finetune(kiln: Kiln, model: number, o: FinetuneOptions): Promise<FinetuneResult> {
  if (!o || typeof o !== 'object') throw new KilnError('INVALID_ARGUMENT', 'finetune: options missing');
  if (typeof o.data !== 'string' || o.data.length === 0) throw new KilnError('INVALID_ARGUMENT', 'finetune: data must be a non-empty string');
  const targets = o.targets ?? ['q', 'v'];
  if (!Array.isArray(targets) || targets.length === 0 || targets.some((t) => !TARGETS.includes(t))) {
    throw new KilnError('INVALID_ARGUMENT', `finetune: targets must be among ${TARGETS.join(', ')}`);
  }
  const alpha = o.alpha ?? 16, lr = o.lr ?? 1e-3, valFraction = o.valFraction ?? 0.1, dropout = o.dropout ?? 0;
  if (typeof alpha !== 'number' || !(alpha > 0 && alpha < 1e6)) throw new KilnError('INVALID_ARGUMENT', `finetune: alpha ${String(alpha)} must be positive`);
  if (typeof lr !== 'number' || !(lr > 0 && lr < 10)) throw new KilnError('INVALID_ARGUMENT', `finetune: lr ${String(lr)} must be in (0, 10)`);
  if (typeof valFraction !== 'number' || !(valFraction >= 0 && valFraction < 1)) throw new KilnError('INVALID_ARGUMENT', `finetune: valFraction ${String(valFraction)} must be in [0, 1)`);
  if (typeof dropout !== 'number' || !(dropout >= 0 && dropout < 1)) throw new KilnError('INVALID_ARGUMENT', `finetune: dropout ${String(dropout)} must be in [0, 1)`);
  const msg: RequestMsg<'finetune'> = {
    t: 'finetune', model, data: o.data, chat: !!o.chat,
    rank: intIn('rank', o.rank ?? 8, 1, 4096), alpha, targets: targets.join(','),
    nCtx: intIn('nCtx', o.nCtx ?? 64, 1, 1 << 20), batchSize: intIn('batchSize', o.batchSize ?? 4, 1, 4096),
    epochs: intIn('epochs', o.epochs ?? 1, 1, 100000), lr, seed: intIn('seed', o.seed ?? 42, 0, 2 ** 53 - 1), valFraction, dropout,
  };
  if (o.signal?.aborted) throw new KilnAbortError();
  const onProgress = o.onProgress;
  const r = await kiln.sched.job(msg, {
    signal: o.signal,
    onProgress: onProgress ? (p: FinetuneProgress) => { try { onProgress(p); } catch { /* a throwing callback must not stop training */ } } : undefined,
  });
  return { adapter: new Uint8Array(r.buffer), steps: r.steps, valLossBefore: r.valLossBefore, valLoss: r.valLoss };
}
