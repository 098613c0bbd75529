/*
 * scheduler.ts — the caller's side of the engine worker: an ordered queue of
 * requests. Fire-and-forget requests (build an op, free a tensor) go out as
 * soon as nothing before them is waiting; a job (compute, load, ...) goes out
 * alone and the next request waits for its reply, so a job still in the
 * queue can be cancelled by just dropping it, and a running one through the
 * shared abort word (the C side checks it between graph nodes) plus an
 * 'abort' message (loads check it between chunks).
 */
import { KilnAbortError, KilnError, fromWire } from './errors.js';
import type { ControlMsg, FillMsg, FinetuneProgressMsg, FromWorker, ReplyOf, RequestMsg, TokenLogprob, TrainProgressMsg, WhisperSegmentMsg } from './protocol.js';

export interface Progress { loaded: number; total: number }

/** a load reports bytes, a training run batches, a transcription a percentage */
type OnProgress = ((p: Progress) => void) | ((p: TrainProgressMsg) => void) | ((p: FinetuneProgressMsg) => void) | ((p: number) => void);

/** @internal */
export interface JobOptions {
  signal?: AbortSignal;
  onProgress?: OnProgress;
  /** streamed output of a running job (generated text pieces) */
  onPiece?: (text: string, logprobs?: TokenLogprob[]) => void;
  /** a running transcription's new segment */
  onSegment?: (segment: WhisperSegmentMsg) => void;
  /** a running load asks for its bytes (bytes.ts); live() is false once the job is over or aborted */
  onFill?: (msg: FillMsg, live: () => boolean) => void;
  transfer?: Transferable[];
}

interface Job {
  id: number;
  msg: RequestMsg;
  transfer: Transferable[];
  resolve: (v: unknown) => void;
  reject: (e: unknown) => void;
  onProgress?: OnProgress;
  onPiece?: (text: string, logprobs?: TokenLogprob[]) => void;
  onSegment?: (segment: WhisperSegmentMsg) => void;
  onFill?: (msg: FillMsg, live: () => boolean) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
  running: boolean;
  settled: boolean;
}

type Item = { kind: 'send'; msg: RequestMsg; transfer: Transferable[] } | { kind: 'job'; job: Job };

/** @internal */
export interface Port {
  post(msg: unknown, transfer?: Transferable[]): void;
  terminate(): void;
}

/** @internal */
export class Scheduler {
  private queue: Item[] = [];
  private current: Job | null = null;
  private nextId = 1;
  private closed: KilnError | null = null;
  private abortWord: Int32Array | null = null;

  constructor(private port: Port) {}

  setAbortWord(w: Int32Array | null) { this.abortWord = w; }

  /** called by the engine for every message from the worker */
  receive(msg: FromWorker) {
    const job = this.current;
    if (!job || msg.t === 'started' || msg.id !== job.id) return; // a reply to a job already given up on
    if (msg.t === 'progress') {
      // the job's own kind decides which of the two it is
      const p = 'train' in msg ? msg.train : 'finetune' in msg ? msg.finetune : 'transcribe' in msg ? msg.transcribe : { loaded: msg.loaded, total: msg.total };
      job.onProgress?.(p as Progress & TrainProgressMsg & FinetuneProgressMsg & number);
      return;
    }
    if (msg.t === 'segment') {
      if (!job.settled) job.onSegment?.(msg.segment);
      return;
    }
    if (msg.t === 'piece') {
      msg.texts.forEach((t, i) => { const lp = msg.logprobs?.[i]; if (!job.settled) job.onPiece?.(t, lp ? [lp] : undefined); });
      return;
    }
    if (msg.t === 'fill') {
      if (!job.settled) job.onFill?.(msg, () => this.current === job && !job.settled && !job.signal?.aborted && !this.closed);
      return;
    }
    if (msg.t !== 'reply') return;
    this.finish(job);
    if (job.settled) { this.pump(); return; } // the caller was already told it was aborted
    if (msg.ok) job.resolve(msg.value);
    else job.reject(fromWire(msg.error));
    this.pump();
  }

  /** the worker died: everything pending fails */
  fail(err: KilnError) {
    this.closed = err;
    const pending = [...this.queue];
    this.queue = [];
    const cur = this.current;
    this.current = null;
    if (cur) { this.detach(cur); cur.reject(err); }
    for (const it of pending) if (it.kind === 'job') { this.detach(it.job); it.job.reject(err); }
  }

  send(msg: RequestMsg, transfer: Transferable[] = []) {
    if (this.closed) return;
    this.queue.push({ kind: 'send', msg, transfer });
    this.pump();
  }

  /** a message for the running job, past the queue (the bytes of a load: bytes.ts) */
  direct(msg: ControlMsg, transfer: Transferable[] = []) {
    if (!this.closed) this.port.post(msg, transfer);
  }

  /** a request answered by one reply, typed by its kind (protocol.ts) */
  job<M extends RequestMsg>(msg: M, opts: JobOptions = {}): Promise<ReplyOf<M['t']>> {
    if (this.closed) return Promise.reject(this.closed);
    if (opts.signal?.aborted) return Promise.reject(new KilnAbortError());
    return new Promise<ReplyOf<M['t']>>((resolve, reject) => {
      const job: Job = {
        // the worker answers a request of kind M['t'] with ReplyOf<M['t']>
        id: this.nextId++, msg, transfer: opts.transfer ?? [], resolve: resolve as (v: unknown) => void, reject,
        onProgress: opts.onProgress, onPiece: opts.onPiece, onSegment: opts.onSegment, onFill: opts.onFill, signal: opts.signal, running: false, settled: false,
      };
      if (job.signal) {
        job.onAbort = () => this.abort(job);
        job.signal.addEventListener('abort', job.onAbort, { once: true });
      }
      this.queue.push({ kind: 'job', job });
      this.pump();
    });
  }

  private abort(job: Job) {
    if (!job.running) {
      const i = this.queue.findIndex((it) => it.kind === 'job' && it.job === job);
      if (i >= 0) this.queue.splice(i, 1);
      this.detach(job);
      job.reject(new KilnAbortError());
      return;
    }
    // running: the worker stops at the next node / chunk and replies ABORTED
    if (this.abortWord) Atomics.store(this.abortWord, 0, job.id);
    this.port.post({ t: 'abort', job: job.id });
    if (!this.abortWord) {
      // no shared memory (a page that is not cross-origin isolated): a
      // running compute cannot be interrupted; the caller is released now
      // and the result dropped when it comes
      job.settled = true;
      this.detach(job);
      job.reject(new KilnAbortError());
    }
  }

  private detach(job: Job) {
    if (job.signal && job.onAbort) job.signal.removeEventListener('abort', job.onAbort);
  }

  private finish(job: Job) {
    this.detach(job);
    this.current = null;
    if (this.abortWord && Atomics.load(this.abortWord, 0) === job.id) Atomics.store(this.abortWord, 0, 0);
  }

  private pump() {
    while (!this.current && this.queue.length > 0) {
      const it = this.queue.shift()!;
      if (it.kind === 'send') { this.port.post(it.msg, it.transfer); continue; }
      const job = it.job;
      job.running = true;
      this.current = job;
      this.port.post({ ...job.msg, id: job.id }, job.transfer);
    }
  }

  close(err: KilnError) {
    this.fail(err);
    this.port.terminate();
  }
}
