/*
 * autograd.ts — gradients and optimizers for the tensor API.
 *
 * The engine does the differentiation: loss.backward() asks the worker to
 * build the loss's graph, append the engine's backward graph
 * (kiln_build_backward_expand, with each parameter's gradient accumulator as
 * its grad_acc) and run it (wasm/kiln_wasm_autograd.c). This side only keeps
 * track of which parameters have a gradient and holds optimizer settings.
 *
 * Rules (PyTorch's):
 * - Only tensors made from f32 data can require gradients
 *   (kiln.tensor(data, shape, {requiresGrad: true}) or kiln.param(...)).
 *   A tensor computed from one requires gradients too.
 * - backward() ADDS d(loss)/d(param) into every reached parameter's
 *   gradient; gradients accumulate over calls until zeroGrad(). backward()
 *   may be called any number of times on the same loss (the forward graph
 *   is recomputed each time, nothing is released by a pass).
 * - param.grad is null until a backward pass has reached the parameter;
 *   then it is a tensor that reads the accumulated gradient as it is when
 *   computed (a live view, like PyTorch's in-place .grad). zeroGrad() sets
 *   it to zeros (it stays a tensor).
 * - optimizer.step() updates parameter values in place; ops computed later
 *   (including ones already built but not yet computed) read the new values.
 */
import { KilnError } from './errors.js';
import type { Kiln, Tensor } from './kiln.js';

export interface BackwardOptions { signal?: AbortSignal }

/** @internal loss.backward() */
export async function backward(loss: Tensor, opts: BackwardOptions = {}): Promise<void> {
  const kiln = loss.kiln;
  if (loss.freed) throw new KilnError('INVALID_HANDLE', 'backward: the loss tensor was freed');
  if (!loss.requiresGrad) {
    throw new KilnError('INVALID_ARGUMENT', 'backward: the loss does not depend on any tensor with requiresGrad');
  }
  const r = await kiln.sched.job({ t: 'backward', tensor: loss.id }, { signal: opts.signal });
  for (const id of r.params) {
    const p = kiln.params.get(id)?.deref();
    if (p) p.hasGrad = true;
  }
}

/** @internal param.grad */
export function gradOf(p: Tensor): Tensor | null {
  if (!p.hasGrad || p.freed) return null;
  if (!p.gradTensor || p.gradTensor.freed) {
    const g = p.kiln.newTensor(false);
    p.kiln.sched.send({ t: 'grad', out: g.id, tensor: p.id });
    p.gradTensor = g;
  }
  return p.gradTensor;
}

function checkParams(kiln: Kiln, ps: unknown, fn: string): Tensor[] {
  if (!Array.isArray(ps)) throw new KilnError('INVALID_ARGUMENT', `${fn}: params must be an array of tensors`);
  const seen = new Set<Tensor>();
  ps.forEach((p: any, i) => {
    if (!p || typeof p !== 'object' || typeof p.id !== 'number' || !('requiresGrad' in p)) {
      throw new KilnError('INVALID_ARGUMENT', `${fn}: params[${i}] is not a tensor`);
    }
    if (p.kiln !== kiln) throw new KilnError('INVALID_HANDLE', `${fn}: params[${i}] belongs to another engine`);
    if (p.freed) throw new KilnError('INVALID_HANDLE', `${fn}: params[${i}] was freed`);
    if (!p.isParam) throw new KilnError('INVALID_ARGUMENT', `${fn}: params[${i}] does not require gradients (make it with requiresGrad: true)`);
    seen.add(p);
  });
  return [...seen];
}

/** @internal zero the gradients of parameters (in order with everything queued before) */
export function zeroGrad(kiln: Kiln, ps: Tensor[], fn: string) {
  const list = checkParams(kiln, ps, fn);
  if (list.length) kiln.sched.send({ t: 'zeroGrad', tensors: list.map((p) => p.id) });
}

export interface SGDOptions {
  /** learning rate */
  lr: number;
  /** momentum factor in [0, 1] (default 0: plain SGD) */
  momentum?: number;
  /** L2 penalty added to the gradient, as PyTorch's SGD (default 0) */
  weightDecay?: number;
  /** the parameters step() and zeroGrad() use when given none */
  params?: Tensor[];
}

export interface AdamWOptions {
  /** learning rate (default 1e-3) */
  lr?: number;
  /** default 0.9 */
  beta1?: number;
  /** default 0.999 */
  beta2?: number;
  /** default 1e-8 */
  eps?: number;
  /** decoupled weight decay (default 0.01, as PyTorch's AdamW) */
  weightDecay?: number;
  /** the parameters step() and zeroGrad() use when given none */
  params?: Tensor[];
}

let optimIds = 0;
const optimRegistry = typeof FinalizationRegistry === 'function'
  ? new FinalizationRegistry<{ kiln: Kiln; id: number }>(({ kiln, id }) => kiln.sched.send({ t: 'optimFree', optim: id }))
  : null;

function num(v: unknown, name: string, lo: number, hi: number, hiOpen = false): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (hiOpen && v === hi)) {
    throw new KilnError('INVALID_ARGUMENT', `optimizer: ${name} = ${String(v)} must be a number in [${lo}, ${hi}${hiOpen ? ')' : ']'}`);
  }
  return v;
}

/**
 * An optimizer: updates parameters in place from their gradients. Its state
 * (AdamW moments and step counts, SGD momentum buffers) lives in the engine,
 * per parameter, and persists between steps until free(). The
 * hyper-parameters are plain fields and may be changed between steps
 * (learning-rate schedules).
 */
export class Optimizer {
  readonly kind: 'sgd' | 'adamw';
  lr: number;
  weightDecay: number;
  /** SGD */
  momentum = 0;
  /** AdamW */
  beta1 = 0.9;
  beta2 = 0.999;
  eps = 1e-8;
  /** the parameters step() / zeroGrad() use when called without any */
  params: Tensor[];
  private readonly kiln: Kiln;
  private readonly id = ++optimIds;
  private freed = false;

  /** @internal use kiln.optim.sgd() / kiln.optim.adamw() */
  constructor(kiln: Kiln, kind: 'sgd' | 'adamw', o: SGDOptions | AdamWOptions) {
    this.kiln = kiln;
    this.kind = kind;
    if (!o || typeof o !== 'object') throw new KilnError('INVALID_ARGUMENT', 'optimizer: options must be an object');
    if (kind === 'sgd') {
      const s = o as SGDOptions;
      this.lr = num(s.lr, 'lr', 0, 1e9);
      this.momentum = num(s.momentum ?? 0, 'momentum', 0, 1);
      this.weightDecay = num(s.weightDecay ?? 0, 'weightDecay', 0, 1e9);
    } else {
      const a = o as AdamWOptions;
      this.lr = num(a.lr ?? 1e-3, 'lr', 0, 1e9);
      this.beta1 = num(a.beta1 ?? 0.9, 'beta1', 0, 1, true);
      this.beta2 = num(a.beta2 ?? 0.999, 'beta2', 0, 1, true);
      this.eps = num(a.eps ?? 1e-8, 'eps', 0, 1e9);
      this.weightDecay = num(a.weightDecay ?? 0.01, 'weightDecay', 0, 1e9);
    }
    this.params = o.params === undefined ? [] : checkParams(kiln, o.params, 'optimizer');
    optimRegistry?.register(this, { kiln, id: this.id }, this);
  }

  /**
   * One update of each parameter that has a gradient (those without one are
   * skipped). Resolves to the number of parameters updated. Gradients are
   * not cleared: call zeroGrad() before the next backward pass.
   */
  async step(params: Tensor[] = this.params, opts: { signal?: AbortSignal } = {}): Promise<number> {
    if (this.freed) throw new KilnError('INVALID_HANDLE', 'optimizer: step() after free()');
    const list = checkParams(this.kiln, params, 'optimizer.step');
    if (this.kind === 'sgd') {
      num(this.lr, 'lr', 0, 1e9); num(this.momentum, 'momentum', 0, 1); num(this.weightDecay, 'weightDecay', 0, 1e9);
    } else {
      num(this.lr, 'lr', 0, 1e9); num(this.beta1, 'beta1', 0, 1, true); num(this.beta2, 'beta2', 0, 1, true);
      num(this.eps, 'eps', 0, 1e9); num(this.weightDecay, 'weightDecay', 0, 1e9);
    }
    const r = await this.kiln.sched.job({
      t: 'optimStep', optim: this.id, kind: this.kind, params: list.map((p) => p.id),
      lr: this.lr, beta1: this.beta1, beta2: this.beta2, eps: this.eps, weightDecay: this.weightDecay, momentum: this.momentum,
    }, { signal: opts.signal });
    return r.updated;
  }

  /** set the gradients of params (default: the optimizer's) to zero */
  zeroGrad(params: Tensor[] = this.params): void {
    zeroGrad(this.kiln, params, 'optimizer.zeroGrad');
  }

  /** drop the optimizer's state (moments, momentum buffers, step counts) */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    optimRegistry?.unregister(this);
    this.kiln.sched.send({ t: 'optimFree', optim: this.id });
  }
}

/** kiln.optim */
export interface Optim {
  /** SGD as PyTorch's (no dampening, no Nesterov): d = g + weightDecay*p; with momentum b = momentum*b + d, d = b; p -= lr*d */
  sgd(opts: SGDOptions): Optimizer;
  /** AdamW as PyTorch's (engine op opt_step_adamw): decoupled weight decay, bias correction by each parameter's step count */
  adamw(opts?: AdamWOptions): Optimizer;
}

/** @internal */
export function makeOptim(kiln: Kiln): Optim {
  return {
    sgd: (opts: SGDOptions) => new Optimizer(kiln, 'sgd', opts),
    adamw: (opts: AdamWOptions = {}) => new Optimizer(kiln, 'adamw', opts),
  };
}
