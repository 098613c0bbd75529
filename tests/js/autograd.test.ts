// Autograd through the JS tensor API (requiresGrad / backward / grad /
// kiln.optim), st and mt builds. Gradients are checked against central
// finite differences (step 1e-6) of a plain double-precision forward pass
// written here, by NMSE < 1e-10 (the engine computes in f32; seen: 1e-14);
// optimizer
// steps against the update rules evaluated in double, to 2e-6 relative.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Kiln, KilnError, type Tensor } from '../../js/dist/index.js';
import { BUILDS, engine, nmse, rand } from './helpers.js';

type Vec = Float64Array;
const GRAD_NMSE = 1e-10;

/** central differences of f at xs, every element of every input */
function fdGrad(f: (xs: Vec[]) => number, xs0: Float32Array[], h = 1e-6): Vec[] {
  const xs = xs0.map((x) => Float64Array.from(x));
  return xs.map((x) => {
    const g = new Float64Array(x.length);
    for (let i = 0; i < x.length; i++) {
      const v = x[i];
      x[i] = v + h; const fp = f(xs);
      x[i] = v - h; const fm = f(xs);
      x[i] = v;
      g[i] = (fp - fm) / (2 * h);
    }
    return g;
  });
}

/* ggml order: shape[0] is the contiguous dimension */
/** a [K, N] x b [K, M] -> [N, M] */
function matmul(a: Vec, b: Vec, K: number, N: number, M: number): Vec {
  const out = new Float64Array(N * M);
  for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
    let s = 0;
    for (let k = 0; k < K; k++) s += a[k + K * n] * b[k + K * m];
    out[n + N * m] = s;
  }
  return out;
}
const map = (x: Vec, f: (v: number, i: number) => number) => x.map(f);
const sum = (x: ArrayLike<number>) => { let s = 0; for (let i = 0; i < x.length; i++) s += x[i]; return s; };
const dot = (x: ArrayLike<number>, y: ArrayLike<number>) => { let s = 0; for (let i = 0; i < x.length; i++) s += x[i] * y[i]; return s; };
function softmaxRows(z: Vec, C: number): Vec {
  const out = new Float64Array(z.length);
  for (let r = 0; r < z.length / C; r++) {
    let mx = -Infinity;
    for (let c = 0; c < C; c++) mx = Math.max(mx, z[r * C + c]);
    let s = 0;
    for (let c = 0; c < C; c++) s += Math.exp(z[r * C + c] - mx);
    for (let c = 0; c < C; c++) out[r * C + c] = Math.exp(z[r * C + c] - mx) / s;
  }
  return out;
}
function crossEntropy(z: Vec, t: ArrayLike<number>, C: number): number {
  const p = softmaxRows(z, C);
  const R = z.length / C;
  let l = 0;
  for (let i = 0; i < z.length; i++) l -= t[i] * Math.log(p[i]);
  return l / R;
}
const silu = (v: number) => v / (1 + Math.exp(-v));
const sigm = (v: number) => 1 / (1 + Math.exp(-v));
function oneHot(labels: number[], C: number): Float32Array {
  const t = new Float32Array(labels.length * C);
  labels.forEach((l, r) => { t[r * C + l] = 1; });
  return t;
}

describe.each(BUILDS)('autograd (%s)', (build) => {
  let kiln: Kiln;
  let other: Kiln;
  beforeAll(async () => { kiln = await engine(build, 2); other = await engine('st', 1); });
  afterAll(() => { kiln?.destroy(); other?.destroy(); });

  /** builds the loss from params in the engine, backpropagates, compares loss and every gradient with f's */
  async function check(data: Float32Array[], shapes: number[][], build: (ps: Tensor[]) => Tensor, f: (xs: Vec[]) => number, tol = GRAD_NMSE) {
    const ps = data.map((d, i) => kiln.param(d, shapes[i]));
    const loss = build(ps);
    expect(loss.requiresGrad).toBe(true);
    for (const p of ps) expect(p.grad).toBeNull();
    await loss.backward();
    const l = (await loss.data())[0] as number;
    const ref = f(data.map((d) => Float64Array.from(d)));
    expect(Math.abs(l - ref)).toBeLessThanOrEqual(1e-5 * Math.max(1, Math.abs(ref)));
    const fd = fdGrad(f, data);
    for (let i = 0; i < ps.length; i++) {
      const g = ps[i].grad;
      expect(g, `param ${i} has a gradient`).not.toBeNull();
      const got = (await g!.data()) as Float32Array;
      expect((await g!.info()).shape).toEqual((await ps[i].info()).shape);
      const e = nmse(got, fd[i]);
      expect(e, `param ${i}: nmse ${e}`).toBeLessThan(tol);
    }
    for (const p of ps) p.free();
    loss.free();
  }

  it('MLP: matmul + add (broadcast bias) + relu + matmul + cross-entropy', async () => {
    // x [4 features, 6 samples], W1 [4, 5], b1 [5], W2 [5, 3 classes]
    const K = 4, H = 5, C = 3, R = 6;
    const x = rand(K * R, 11);
    const t = oneHot([0, 2, 1, 1, 0, 2], C);
    const xt = kiln.tensor(x, [K, R]), tt = kiln.tensor(t, [C, R]);
    await check([rand(K * H, 12), rand(H, 13), rand(H * C, 14)], [[K, H], [H], [H, C]],
      ([w1, b1, w2]) => w2.matmul(w1.matmul(xt).add(b1).relu()).crossEntropyLoss(tt),
      ([w1, b1, w2]) => {
        const h = map(matmul(w1, Float64Array.from(x), K, H, R), (v, i) => Math.max(0, v + b1[i % H]));
        return crossEntropy(matmul(w2, h, H, C, R), t, C);
      });
  });

  it('silu + tanh + softmax (rows) weighted sum', async () => {
    const K = 5, N = 4, M = 3;
    const x = rand(K * M, 21), c = rand(N * M, 22);
    const xt = kiln.tensor(x, [K, M]), ct = kiln.tensor(c, [N, M]);
    await check([rand(K * N, 23)], [[K, N]],
      ([w]) => w.matmul(xt).silu().tanh().softmax().mul(ct).sum(),
      ([w]) => dot(softmaxRows(map(matmul(w, Float64Array.from(x), K, N, M), (v) => Math.tanh(silu(v))), N), c));
  });

  it('mul / div / add with broadcasting, reshape, mean', async () => {
    // a [4, 3]; b [4] broadcast over rows (used twice); c [1, 3] broadcast along rows
    const a = rand(12, 31), b = rand(4, 32), c = rand(3, 33).map((v) => 1.5 + 0.5 * v);
    await check([a, b, c], [[4, 3], [4], [1, 3]],
      ([A, B, Cc]) => A.mul(B).div(Cc).add(B).sqr().reshape([12]).mean(),
      ([A, B, Cc]) => {
        let s = 0;
        for (let r = 0; r < 3; r++) for (let i = 0; i < 4; i++) { const v = A[i + 4 * r] * B[i] / Cc[r] + B[i]; s += v * v; }
        return s / 12;
      });
  });

  it('permute / cont / reshape / transpose', async () => {
    // a [3, 4, 2] -> permute(2, 0, 1, 3) -> [4, 2, 3]; * c; reshape [8, 3]; transpose [3, 8]; * d; sqr; sum
    const a = rand(24, 41), c = rand(24, 42), d = rand(24, 43);
    const ct = kiln.tensor(c, [4, 2, 3]), dt = kiln.tensor(d, [3, 8]);
    await check([a], [[3, 4, 2]],
      ([A]) => A.permute(2, 0, 1, 3).mul(ct).reshape([8, 3]).transpose().mul(dt).sqr().sum(),
      ([A]) => {
        // q[j0, j1, j2] = a[i0 = j2, i1 = j0, i2 = j1]; r = q * c as [8, 3]; t[k, m] = r[m, k]
        const r = new Float64Array(24);
        for (let j2 = 0; j2 < 3; j2++) for (let j1 = 0; j1 < 2; j1++) for (let j0 = 0; j0 < 4; j0++) {
          const q = j0 + 4 * (j1 + 2 * j2);
          r[q] = A[j2 + 3 * (j0 + 4 * j1)] * c[q];
        }
        let s = 0;
        for (let m = 0; m < 8; m++) for (let k = 0; k < 3; k++) { const v = r[m + 8 * k] * d[k + 3 * m]; s += v * v; }
        return s;
      });
  });

  it('getRows (repeated and unused rows)', async () => {
    const D = 4, V = 6;
    const idx = [0, 3, 3, 5, 1];
    const w = rand(D * idx.length, 52);
    const it_ = kiln.tensor(new Int32Array(idx), [idx.length]), wt = kiln.tensor(w, [D, idx.length]);
    const emb = rand(D * V, 51);
    await check([emb], [[D, V]],
      ([E]) => E.getRows(it_).sqr().mul(wt).sum(),
      ([E]) => { let s = 0; idx.forEach((row, j) => { for (let i = 0; i < D; i++) s += E[i + D * row] ** 2 * w[i + D * j]; }); return s; });
    // unused rows get exactly zero
    const p = kiln.param(emb, [D, V]);
    await p.getRows(it_).sum().backward();
    const g = (await p.grad!.data()) as Float32Array;
    expect(Array.from(g.subarray(2 * D, 3 * D))).toEqual([0, 0, 0, 0]);
    expect(Array.from(g.subarray(3 * D, 4 * D))).toEqual([2, 2, 2, 2]);
  });

  it('norm and rmsNorm', async () => {
    const a = rand(8 * 3, 61), w = rand(8 * 3, 62), w2 = rand(8 * 3, 63);
    const wt = kiln.tensor(w, [8, 3]), w2t = kiln.tensor(w2, [8, 3]);
    await check([a], [[8, 3]],
      ([A]) => A.rmsNorm(1e-5).mul(wt).sum().add(A.norm(1e-5).mul(w2t).sum()),
      ([A]) => {
        let s = 0;
        for (let r = 0; r < 3; r++) {
          const row = A.subarray(r * 8, r * 8 + 8);
          const ms = sum(map(row, (v) => v * v)) / 8;
          const mean = sum(row) / 8;
          const vr = sum(map(row, (v) => (v - mean) ** 2)) / 8;
          for (let i = 0; i < 8; i++) s += row[i] / Math.sqrt(ms + 1e-5) * w[r * 8 + i] + (row[i] - mean) / Math.sqrt(vr + 1e-5) * w2[r * 8 + i];
        }
        return s;
      });
  });

  const UNARY: [string, (t: Tensor) => Tensor, (v: number) => number, (v: number) => number][] = [
    ['sqr', (t) => t.sqr(), (v) => v * v, (v) => v],
    ['sqrt', (t) => t.sqrt(), Math.sqrt, (v) => 1.2 + v],
    ['log', (t) => t.log(), Math.log, (v) => 1.2 + v],
    ['sin', (t) => t.sin(), Math.sin, (v) => 2 * v],
    ['cos', (t) => t.cos(), Math.cos, (v) => 2 * v],
    ['exp', (t) => t.exp(), Math.exp, (v) => v],
    ['tanh', (t) => t.tanh(), Math.tanh, (v) => 2 * v],
    ['sigmoid', (t) => t.sigmoid(), sigm, (v) => 3 * v],
    ['silu', (t) => t.silu(), silu, (v) => 3 * v],
    ['relu', (t) => t.relu(), (v) => Math.max(0, v), (v) => v],
    ['abs', (t) => t.abs(), Math.abs, (v) => v],
    ['neg', (t) => t.neg(), (v) => -v, (v) => v],
    ['scale', (t) => t.scale(0.7), (v) => 0.7 * v, (v) => v],
    ['gelu', (t) => t.gelu(), (v) => 0.5 * v * (1 + Math.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3))), (v) => 3 * v],
    ['geluQuick', (t) => t.geluQuick(), (v) => v * sigm(1.702 * v), (v) => 3 * v],
    ['elu', (t) => t.elu(), (v) => (v > 0 ? v : Math.exp(v) - 1), (v) => 2 * v],
    ['leakyRelu', (t) => t.leakyRelu(0.1), (v) => (v > 0 ? v : 0.1 * v), (v) => 2 * v],
  ];
  it.each(UNARY)('unary %s', async (_name, op, f, dom) => {
    const a = rand(7 * 3, 71).map(dom), w = rand(7 * 3, 72);
    const wt = kiln.tensor(w, [7, 3]);
    await check([a], [[7, 3]], ([A]) => op(A).mul(wt).sum(), ([A]) => dot(map(A, f), w));
  });

  it('a deep graph (1,500 ops) retries with a bigger backward graph', async () => {
    const a = rand(5, 141);
    await check([a], [[5]],
      // A is used 751 times: 751 contributions summed into one gradient
      ([A]) => { let t = A; for (let i = 0; i < 750; i++) t = t.scale(0.99).add(A); return t.sqr().sum(); },
      ([A]) => sum(map(A, (a) => { let v = a; for (let i = 0; i < 750; i++) v = 0.99 * v + a; return v * v; })), 1e-8);
  });

  it('gradients accumulate until zeroGrad; a second backward on the same loss adds again', async () => {
    const p = kiln.param([1, -2, 3], [3]);
    const q = kiln.param([5, 5], [2]); // never used by the loss
    const loss = p.mul(p).sum(); // p used twice in one op: d/dp = 2p
    expect(p.grad).toBeNull();
    await loss.backward();
    expect(Array.from(await p.grad!.data())).toEqual([2, -4, 6]);
    const g = p.grad!;
    expect(p.grad).toBe(g); // the same tensor each time
    await loss.backward();
    expect(Array.from(await g.data())).toEqual([4, -8, 12]); // a live view: reads the current gradient
    await p.scale(3).sum().backward(); // another loss adds too
    expect(Array.from(await g.data())).toEqual([7, -5, 15]);
    expect(q.grad).toBeNull();
    p.zeroGrad();
    expect(Array.from(await p.grad!.data())).toEqual([0, 0, 0]);
    await loss.backward();
    expect(Array.from(await p.grad!.data())).toEqual([2, -4, 6]);
    kiln.zeroGrad([p, q]);
    expect(Array.from(await p.grad!.data())).toEqual([0, 0, 0]);
    // tensors without requiresGrad have no gradient and compute no requiresGrad
    const c = kiln.tensor([1, 2, 3], [3]);
    expect(c.requiresGrad).toBe(false);
    expect(c.grad).toBeNull();
    expect(c.add(p).requiresGrad).toBe(true);
    expect(c.add(p).grad).toBeNull(); // only leaves keep gradients
  });

  it('backward does not leak: memory is the same after 50 more passes', async () => {
    const p = kiln.param(rand(64, 81), [8, 8]);
    const x = kiln.tensor(rand(8 * 4, 82), [8, 4]);
    const loss = p.matmul(x).tanh().sqr().sum();
    await loss.backward();
    const m0 = await kiln.memory();
    for (let i = 0; i < 50; i++) await loss.backward();
    const m1 = await kiln.memory();
    expect(m1.handles).toBe(m0.handles);
    expect(m1.used).toBe(m0.used);
    p.free(); x.free(); loss.free();
  });

  /* ------------------------------------------------------------ optimizers */

  /** three steps on loss = Σ c p² (grad 2 c p), zeroGrad between steps */
  async function runSteps(opt: ReturnType<Kiln['optim']['sgd']>, p: Tensor, c: Tensor, steps = 3) {
    const out: Float32Array[] = [];
    for (let s = 0; s < steps; s++) {
      opt.zeroGrad([p]);
      await p.sqr().mul(c).sum().backward();
      expect(await opt.step([p])).toBe(1);
      out.push((await p.data()) as Float32Array);
    }
    return out;
  }
  const close = (got: ArrayLike<number>, ref: ArrayLike<number>, rel = 2e-6) => {
    for (let i = 0; i < ref.length; i++) expect(Math.abs(got[i] - ref[i]), `element ${i}: ${got[i]} vs ${ref[i]}`).toBeLessThanOrEqual(rel * Math.max(1, Math.abs(ref[i])));
  };

  it('SGD with momentum and weight decay matches the update rule (momentum persists between steps)', async () => {
    const p0 = rand(10, 91), c = rand(10, 92);
    const p = kiln.param(p0, [10]), ct = kiln.tensor(c, [10]);
    const lr = 0.1, mu = 0.9, wd = 0.05;
    const opt = kiln.optim.sgd({ lr, momentum: mu, weightDecay: wd });
    const got = await runSteps(opt, p, ct);
    const x = Float64Array.from(p0), b = new Float64Array(10);
    for (let s = 0; s < 3; s++) {
      for (let i = 0; i < 10; i++) {
        const d = 2 * c[i] * x[i] + wd * x[i];
        b[i] = mu * b[i] + d;
        x[i] -= lr * b[i];
      }
      close(got[s], x);
    }
    // plain SGD (no state) too
    const q = kiln.param(p0, [10]);
    const plain = await runSteps(kiln.optim.sgd({ lr }), q, ct, 1);
    close(plain[0], Array.from(p0, (v, i) => v - lr * 2 * c[i] * v));
    opt.free();
  });

  it('AdamW matches the update rule (moments and step count persist; lr can change between steps)', async () => {
    const p0 = rand(10, 93), c = rand(10, 94);
    const p = kiln.param(p0, [10]), ct = kiln.tensor(c, [10]);
    const o = { lr: 0.05, beta1: 0.8, beta2: 0.95, eps: 1e-6, weightDecay: 0.1 };
    const opt = kiln.optim.adamw({ ...o, params: [p] });
    const lrs = [0.05, 0.05, 0.02, 0.02];
    const got: Float32Array[] = [];
    for (let s = 0; s < 4; s++) {
      opt.lr = lrs[s];
      opt.zeroGrad();
      await p.sqr().mul(ct).sum().backward();
      expect(await opt.step()).toBe(1);
      got.push((await p.data()) as Float32Array);
    }
    const x = Float64Array.from(p0), m = new Float64Array(10), v = new Float64Array(10);
    for (let s = 0; s < 4; s++) {
      const t = s + 1;
      for (let i = 0; i < 10; i++) {
        const g = 2 * c[i] * x[i];
        m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
        v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
        const mh = m[i] / (1 - o.beta1 ** t), vh = v[i] / (1 - o.beta2 ** t);
        x[i] = x[i] * (1 - lrs[s] * o.weightDecay) - lrs[s] * mh / (Math.sqrt(vh) + o.eps);
      }
      close(got[s], x, 1e-5);
    }
    // defaults are PyTorch's
    const d = kiln.optim.adamw();
    expect([d.lr, d.beta1, d.beta2, d.eps, d.weightDecay]).toEqual([1e-3, 0.9, 0.999, 1e-8, 0.01]);
    // a parameter without a gradient is skipped
    const fresh = kiln.param([1, 2], [2]);
    expect(await opt.step([fresh])).toBe(0);
    expect(Array.from(await fresh.data())).toEqual([1, 2]);
    opt.free();
    await expect(opt.step()).rejects.toMatchObject({ code: 'INVALID_HANDLE' });
  });

  it('trains a 2-layer MLP on a synthetic XOR-like dataset: loss 0.69 -> < 0.01 in 100 AdamW steps, deterministically', async () => {
    // 64 points in [-1, 1]^2, class = (x0 * x1 > 0), kept away from the axes
    const R = 64;
    const pts = rand(2 * R, 101).map((v) => Math.sign(v) * (0.2 + 0.8 * Math.abs(v)));
    const labels = Array.from({ length: R }, (_, r) => (pts[2 * r] * pts[2 * r + 1] > 0 ? 1 : 0));
    const x = kiln.tensor(pts, [2, R]), y = kiln.tensor(oneHot(labels, 2), [2, R]);
    const run = async () => {
      const w1 = kiln.param(rand(2 * 16, 102), [2, 16]), b1 = kiln.param(new Float32Array(16), [16]);
      const w2 = kiln.param(rand(16 * 2, 103).map((v) => v * 0.5), [16, 2]), b2 = kiln.param(new Float32Array(2), [2]);
      const opt = kiln.optim.adamw({ lr: 0.05, weightDecay: 0, params: [w1, b1, w2, b2] });
      const losses: number[] = [];
      for (let s = 0; s < 100; s++) {
        opt.zeroGrad();
        const loss = w2.matmul(w1.matmul(x).add(b1).relu()).add(b2).crossEntropyLoss(y);
        await loss.backward();
        await opt.step();
        losses.push(((await loss.data()) as Float32Array)[0]);
        loss.free();
      }
      const logits = (await w2.matmul(w1.matmul(x).add(b1).relu()).add(b2).data()) as Float32Array;
      let correct = 0;
      for (let r = 0; r < R; r++) correct += Number((logits[2 * r + 1] > logits[2 * r] ? 1 : 0) === labels[r]);
      opt.free();
      return { losses, correct };
    };
    const a = await run();
    // (the loss read after step() is the one of the updated weights: the forward runs again)
    expect(a.losses[0]).toBeGreaterThan(0.5);
    expect(a.losses[99]).toBeLessThan(0.01);
    expect(a.correct).toBe(R);
    const b = await run();
    expect(b.losses).toEqual(a.losses);
  });

  it('trains logistic regression (sigmoid + binary cross-entropy from ops) with SGD + momentum: loss 0.64 -> < 0.02 in 100 steps', async () => {
    // two overlapping-free blobs around (-1, -1) and (1, 1)
    const R = 48;
    const noise = rand(2 * R, 121);
    const labels = Array.from({ length: R }, (_, r) => r % 2);
    const pts = noise.map((v, i) => 0.6 * v + (labels[i >> 1] ? 1 : -1));
    const x = kiln.tensor(pts, [2, R]);
    const y = kiln.tensor(Float32Array.from(labels), [1, R]);
    const one = kiln.tensor([1], [1]);
    const w = kiln.param([0.1, -0.1], [2, 1]), b = kiln.param([0], [1]);
    const opt = kiln.optim.sgd({ lr: 0.1, momentum: 0.9, params: [w, b] });
    const lossOf = () => {
      const p = w.matmul(x).add(b).sigmoid(); // [1, R]
      // -(y log p + (1 - y) log(1 - p)), mean over samples (ggml broadcasts the second operand only)
      return y.mul(p.log()).add(y.neg().add(one).mul(p.neg().add(one).log())).reshape([R]).mean().neg();
    };
    const losses: number[] = [];
    for (let s = 0; s < 100; s++) {
      opt.zeroGrad();
      const loss = lossOf();
      await loss.backward();
      await opt.step();
      losses.push(((await loss.data()) as Float32Array)[0]);
      loss.free();
    }
    expect(losses[0]).toBeGreaterThan(0.5);
    expect(losses[99]).toBeLessThan(0.02);
    // the same loss in double from the trained weights
    const W = (await w.data()) as Float32Array, B = ((await b.data()) as Float32Array)[0];
    let ref = 0;
    for (let r = 0; r < R; r++) {
      const p = sigm(W[0] * pts[2 * r] + W[1] * pts[2 * r + 1] + B);
      ref -= labels[r] ? Math.log(p) : Math.log(1 - p);
    }
    expect(Math.abs(losses[99] - ref / R)).toBeLessThan(1e-5);
    opt.free();
  });

  /* ------------------------------------------------------------ errors */

  async function usable() {
    const p = kiln.param([1, 2], [2]);
    await p.sqr().sum().backward();
    expect(Array.from(await p.grad!.data())).toEqual([2, 4]);
    p.free();
  }

  it('bad input gives typed errors and the engine stays usable', async () => {
    const p = kiln.param(rand(6, 111), [3, 2]);
    const codeOf = async (f: () => Promise<unknown>) => { try { await f(); return 'ok'; } catch (e) { expect(e).toBeInstanceOf(KilnError); return `${(e as KilnError).code}: ${(e as KilnError).message}`; } };
    // non-scalar loss
    expect(await codeOf(() => p.sqr().backward())).toMatch(/^INVALID_ARGUMENT: .*scalar/);
    // non-f32 loss (argmax is i32, one element)
    expect(await codeOf(() => p.reshape([6]).argmax().backward())).toMatch(/^INVALID_ARGUMENT: .*f32/);
    // a loss that depends on no tensor with requiresGrad
    expect(await codeOf(() => kiln.tensor([1, 2], [2]).sum().backward())).toMatch(/^INVALID_ARGUMENT: .*requiresGrad/);
    // an op without a backward rule on the path: named
    expect(await codeOf(() => p.hardswish().sum().backward())).toMatch(/^UNSUPPORTED: .*HARDSWISH.*backward rule/i);
    expect(await codeOf(() => p.reshape([6]).clamp(-0.5, 0.5).sum().backward())).toMatch(/^UNSUPPORTED: .*clamp.*backward rule/i);
    expect(p.grad).toBeNull(); // failed passes add nothing
    // a freed loss
    const l = p.sum();
    l.free();
    expect(await codeOf(() => l.backward())).toMatch(/^INVALID_HANDLE/);
    // a loss whose op failed to build
    expect(await codeOf(() => p.add(kiln.param([1, 2, 3, 4, 5], [5])).sum().backward())).toMatch(/^INVALID_ARGUMENT: .*add/);
    // requiresGrad on non-f32 data
    const bad = kiln.tensor(new Int32Array([1, 2]), [2], { requiresGrad: true });
    expect(await codeOf(() => bad.data())).toMatch(/^INVALID_ARGUMENT: .*only f32/);
    // tensors of another engine, tensors without requiresGrad, freed parameters
    const opt = kiln.optim.sgd({ lr: 0.1 });
    const foreign = other.param([1, 2], [2]);
    expect(await codeOf(() => opt.step([foreign]))).toMatch(/^INVALID_HANDLE: .*another engine/);
    expect(await codeOf(() => opt.step([kiln.tensor([1], [1])]))).toMatch(/^INVALID_ARGUMENT: .*requiresGrad/);
    expect(() => kiln.zeroGrad([kiln.tensor([1], [1])])).toThrow(KilnError);
    expect(await codeOf(() => opt.step([p, p]))).toBe('ok'); // listed twice: stepped once
    const gone = kiln.param([1], [1]);
    gone.free();
    expect(await codeOf(() => opt.step([gone]))).toMatch(/^INVALID_HANDLE/);
    expect(gone.grad).toBeNull();
    // bad hyper-parameters
    expect(() => kiln.optim.sgd({ lr: -1 })).toThrow(/lr/);
    expect(() => kiln.optim.sgd({} as any)).toThrow(/lr/);
    expect(() => kiln.optim.adamw({ beta1: 1 })).toThrow(/beta1/);
    expect(() => kiln.optim.adamw({ eps: NaN })).toThrow(/eps/);
    opt.lr = Infinity;
    expect(await codeOf(() => opt.step([p]))).toMatch(/^INVALID_ARGUMENT: .*lr/);
    opt.free();
    // a parameter freed while a loss still uses it: the loss keeps it alive
    const q = kiln.param([3, 4], [2]);
    const lq = q.sqr().sum();
    q.free();
    await lq.backward();
    expect(q.grad).toBeNull();
    expect(Array.from(await lq.data())).toEqual([25]);
    await usable();
  });

  it('a one-element parameter can be its own loss (gradient 1)', async () => {
    const p = kiln.param([4], [1]);
    await p.backward();
    await p.backward();
    expect(Array.from(await p.grad!.data())).toEqual([2]);
  });

  it('400 random autograd calls, good and bad, only ever give results or KilnErrors', async () => {
    let s = 24681357;
    const rnd = (n: number) => { s = (Math.imul(s, 1103515245) + 12345) >>> 0; return s % n; };
    const ps = [kiln.param(rand(6, 131), [3, 2]), kiln.param(rand(2, 132), [2]), kiln.param(rand(3, 133), [3])];
    const freed = kiln.param([1, 2], [2]);
    freed.free();
    const foreign = other.param([1, 2], [2]);
    const plain = kiln.tensor(rand(6, 134), [3, 2]);
    const opts = [kiln.optim.sgd({ lr: 0.01, momentum: 0.5 }), kiln.optim.adamw({ lr: 0.01 })];
    const losses: (() => Tensor)[] = [
      () => ps[0].matmul(ps[2].reshape([3, 1])).add(ps[1].reshape([2, 1])).sqr().sum(), // good
      () => ps[0].tanh().sum(),                       // good
      () => ps[0].sqr(),                              // not a scalar
      () => ps[0].hardswish().sum(),                  // no backward rule
      () => plain.sum(),                              // no requiresGrad
      () => ps[0].add(ps[1]).sum(),                   // shapes do not broadcast
      () => ps[rnd(3)].add(foreign).sum(),            // another engine's tensor
      () => freed.sum(),                              // freed input
      () => ps[0].reshape([6]).argmax(),              // i32
    ];
    let ok = 0, errs = 0;
    for (let i = 0; i < 400; i++) {
      const op = rnd(5);
      try {
        if (op === 0 || op === 1) { const l = losses[rnd(losses.length)](); await l.backward(); if (rnd(2)) l.free(); }
        else if (op === 2) { const pick = [ps[rnd(3)], freed, foreign, plain][rnd(4)]; await opts[rnd(2)].step([pick]); }
        else if (op === 3) { const pick = [ps[rnd(3)], freed, foreign, plain][rnd(4)]; kiln.zeroGrad([pick]); }
        else { const g = ps[rnd(3)].grad; if (g) expect((await g.data()).length).toBeGreaterThan(0); }
        ok++;
      } catch (e) {
        expect(e).toBeInstanceOf(KilnError);
        expect((e as KilnError).code).not.toBe('ENGINE_CRASHED');
        errs++;
      }
    }
    expect(ok).toBeGreaterThan(50);
    expect(errs).toBeGreaterThan(50);
    for (const p of ps) for (const v of (await p.data()) as Float32Array) expect(Number.isFinite(v)).toBe(true);
    await usable();
  });
});
