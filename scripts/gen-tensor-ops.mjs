#!/usr/bin/env node
// The op methods of class Tensor (js/src/kiln.ts), written from the one op
// table the engine exports, KW_OPS in wasm/kiln_wasm_ops.c: each row's name
// is the method's op, its inputs (t/o) the tensors the method passes after
// `this`, its parameters (i/f/d) the numbers, in that order and count. What
// C cannot say lives in METHODS below: the method's JS parameter names and
// defaults, its doc line, the order of the methods, and a conversion where a
// JS argument is not the number itself (a boolean, a type name, an options
// object). A row of KW_OPS without a method must be listed in NOT_METHODS.
//
//   node scripts/gen-tensor-ops.mjs           rewrite the block in kiln.ts
//   node scripts/gen-tensor-ops.mjs --check   exit 1 when it is not up to date (tests/js/ops.test.ts)
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OPS_C = path.join(ROOT, 'wasm/kiln_wasm_ops.c');
const KILN_TS = path.join(ROOT, 'js/src/kiln.ts');
const BEGIN = '  // ---- op methods: generated from KW_OPS (wasm/kiln_wasm_ops.c) by scripts/gen-tensor-ops.mjs; edit there';
const END = '  // ---- end of the generated op methods';

/** KW_OPS rows: { name, inputs, params } in table order */
export function readOpTable(text = readFileSync(OPS_C, 'utf8')) {
  const start = text.indexOf('#define KW_OPS(X)');
  if (start < 0) throw new Error('gen-tensor-ops: no KW_OPS in wasm/kiln_wasm_ops.c');
  const body = text.slice(start, text.indexOf('\n\n', start));
  return [...body.matchAll(/X\((\w+), "([to]*)", "([ifd]*)"\)/g)].map((m) => ({ name: m[1], inputs: m[2], params: m[3] }));
}

// [op, JS parameters, { doc, inputs, params, body }]: inputs / params: JS
// expressions for the op's inputs after `this` / its parameters (default:
// the JS parameters by name, inputs first); body: the whole method body
const METHODS = [
  ['add', 'b: Tensor'], ['sub', 'b: Tensor'], ['mul', 'b: Tensor'], ['div', 'b: Tensor'],
  ['matmul', 'b: Tensor', { doc: 'ggml mul_mat: this [k, n], b [k, m] -> [n, m]' }],
  ['outProd', 'b: Tensor'], ['getRows', 'rows: Tensor'], ['repeat', 'like: Tensor'], ['cpy', 'dst: Tensor'],
  ['concat', 'b: Tensor, dim: number'], ['scale', 's: number'], ['softmax', ''],
  ['softmaxExt', 'mask: Tensor | undefined, scale = 1, maxBias = 0'],
  ['norm', 'eps = 1e-5'], ['rmsNorm', 'eps = 1e-5'], ['groupNorm', 'nGroups: number, eps = 1e-6'],
  ['rope', 'pos: Tensor, nDims: number, o: RopeOptions = {}', {
    doc: 'rotary embedding; pos: I32 [shape[2]]',
    inputs: ['pos', 'o.freqFactors'],
    params: ['nDims', 'o.mode ?? 0', 'o.nCtxOrig ?? 0', 'o.freqBase ?? 10000', 'o.freqScale ?? 1', 'o.extFactor ?? 0',
      'o.attnFactor ?? 1', 'o.betaFast ?? 32', 'o.betaSlow ?? 1'],
  }],
  ['reshape', 'shape: number[]', {
    body: [
      "if (!Array.isArray(shape) || shape.length < 1 || shape.length > 4) return this.kiln.op('reshape', [this], [NaN, 1, 1, 1]);",
      "return this.kiln.op('reshape', [this], [1, 1, 1, 1].map((d, i) => shape[i] ?? d));",
    ],
  }],
  ['permute', 'a0: number, a1: number, a2 = 2, a3 = 3'], ['transpose', ''], ['cont', ''],
  ['cast', 'type: DType', { params: ['TYPE_IDS[type] ?? -1'] }],
  ['view', 'shape: number[], strides: number[], offset = 0', {
    body: [
      'const ne = [1, 1, 1, 1].map((d, i) => shape[i] ?? d);',
      'const nb = [0, 0, 0].map((d, i) => strides[i] ?? d);',
      "return this.kiln.op('view', [this], [...ne, ...nb, offset]);",
    ],
  }],
  ['crossEntropyLoss', 'targets: Tensor', { doc: 'mean over rows of -Σ targets * log_softmax(this); this: logits [classes, rows], targets: probabilities of the same shape -> f32 [1]' }],
  ...['sum', 'sumRows', 'mean', 'argmax', 'sqr', 'sqrt', 'log', 'sin', 'cos', 'exp', 'abs', 'sgn', 'neg', 'step', 'tanh', 'elu',
    'relu', 'sigmoid', 'gelu', 'geluQuick', 'silu', 'hardswish', 'hardsigmoid'].map((n) => [n, '']),
  ['leakyRelu', 'slope = 0.01'], ['clamp', 'min: number, max: number'],
  ['diagMaskInf', 'nPast = 0'], ['diagMaskZero', 'nPast = 0'],
  ['argsort', 'descending = false', { params: ['descending ? 1 : 0'] }],
  ['topK', 'k: number'], ['pad', 'p0: number, p1 = 0, p2 = 0, p3 = 0'], ['diag', ''],
];
// rows of KW_OPS that are not Tensor methods (autograd's helpers, Kiln.arange, ops without a JS surface yet)
const NOT_METHODS = ['repeatBack', 'countEqual', 'siluBack', 'add1', 'dup', 'flashAttnExt', 'conv2d', 'pool2d', 'arange'];

const argNames = (sig) => (sig ? sig.split(/,(?![^{]*})/).map((p) => p.trim().split(/[:=?\s]/)[0]) : []);

/** the generated block (without the markers) */
export function generate(table = readOpTable()) {
  const byName = new Map(table.map((r) => [r.name, r]));
  const problems = [];
  for (const r of table) if (!METHODS.some((m) => m[0] === r.name) && !NOT_METHODS.includes(r.name)) problems.push(`KW_OPS row ${r.name} has no Tensor method (add it to METHODS or NOT_METHODS)`);
  for (const n of NOT_METHODS) if (!byName.has(n)) problems.push(`NOT_METHODS lists ${n}, which KW_OPS does not have`);
  const lines = [];
  for (const [name, sig, o = {}] of METHODS) {
    const row = byName.get(name);
    if (!row) { problems.push(`METHODS has ${name}, which KW_OPS does not have`); continue; }
    if (o.doc) lines.push(`  /** ${o.doc} */`);
    if (o.body) {
      lines.push(`  ${name}(${sig}) {`, ...o.body.map((l) => `    ${l}`), '  }');
      continue;
    }
    if (row.inputs[0] !== 't') { problems.push(`${name}: its first input is not a tensor, so it cannot be a Tensor method`); continue; }
    const names = argNames(sig);
    const nIn = row.inputs.length - 1, nPar = row.params.length;
    const inputs = o.inputs ?? names.slice(0, nIn);
    const params = o.params ?? names.slice(nIn);
    if (inputs.length !== nIn) problems.push(`${name}: KW_OPS gives ${nIn} tensor inputs after this, the method passes ${inputs.length}`);
    if (params.length !== nPar) problems.push(`${name}: KW_OPS gives ${nPar} parameters (${row.params}), the method passes ${params.length}`);
    let body;
    if (nIn === 0 && nPar === 0) body = `this.u('${name}')`;
    else if (nIn === 1 && nPar === 0 && row.inputs[1] === 't') body = `this.b('${name}', ${inputs[0]})`;
    else body = `this.kiln.op('${name}', [${['this', ...inputs].join(', ')}]${nPar ? `, [${params.join(', ')}]` : ''})`;
    lines.push(`  ${name}(${sig}) { return ${body}; }`);
  }
  if (problems.length) throw new Error(`gen-tensor-ops:\n  ${problems.join('\n  ')}`);
  return lines.join('\n');
}

/** kiln.ts with the block replaced */
export function rewrite(source = readFileSync(KILN_TS, 'utf8')) {
  const a = source.indexOf(BEGIN), b = source.indexOf(END);
  if (a < 0 || b < a) throw new Error('gen-tensor-ops: the markers of the generated block are missing in js/src/kiln.ts');
  return source.slice(0, a) + BEGIN + '\n' + generate() + '\n' + source.slice(b);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const old = readFileSync(KILN_TS, 'utf8');
  const text = rewrite(old);
  if (process.argv.includes('--check')) {
    if (text !== old) { console.error('js/src/kiln.ts: the Tensor op methods differ from KW_OPS; run node scripts/gen-tensor-ops.mjs'); process.exit(1); }
    console.log('Tensor op methods: up to date with KW_OPS');
  } else if (text !== old) { writeFileSync(KILN_TS, text); console.log('wrote js/src/kiln.ts'); }
  else console.log('js/src/kiln.ts: unchanged');
}
