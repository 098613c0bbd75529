// Silero VAD weights between Silero's ONNX export and whisper.cpp's ggml VAD
// format, so that Kiln and onnxruntime can be compared on the same weights:
//
//  - onnxInitializers(buf): the float initializers of an ONNX model's main
//    graph, read with a minimal protobuf decoder (ModelProto.graph = 7,
//    GraphProto.initializer = 5; TensorProto dims = 1, data_type = 2,
//    float_data = 4, name = 8, raw_data = 9), with the byte range of each
//    raw_data so that it can be overwritten in place.
//  - ggmlVadFromOnnx(buf, opts): a whisper.cpp-format VAD file holding the
//    ONNX model's weights, laid out as whisper.cpp's
//    models/convert-silero-vad-to-ggml.py writes them from the PyTorch
//    state dict: the same header, tensor order, names ("_model." + the
//    state-dict key), dims (numpy shape squeezed, then reversed; the STFT
//    basis keeps its 3 dims) and types (f16 for the STFT basis and the
//    convolution kernels, f32 for the rest). The LSTM tensors are the
//    PyTorch LSTMCell ones (gates i, f, g, o; bias_ih and bias_hh kept
//    apart): Silero's op15 export keeps them as initializers with those
//    names and reorders them for ONNX's LSTM op inside the graph, so they
//    are copied unchanged. With { f32Conv: true } the kernels stay f32
//    (Kiln reads that; whisper.cpp's loader takes f16 kernels only).
//  - readGgmlVad(buf): the tensors of a whisper.cpp-format VAD file (f16
//    widened to f32).
//  - onnxWithWeights(onnxBuf, tensors): a copy of the ONNX model whose
//    initializers are replaced by the given ggml tensors (same element
//    counts, raw f32 data of the same byte length).
//  - onnxVadProbs(ort, session, x): one probability per 512-sample window of
//    x (16 kHz, the last window zero-padded), the state carried, with the
//    input whisper.cpp's graph sees. whisper.cpp reflect-pads each window by
//    64 on both sides where the ONNX graph takes 64 samples of context and
//    reflect-pads only on the right, so the context given here is the
//    window's first 64 samples mirrored: the same 640 samples.
import { Buffer } from 'node:buffer';

// ---------------------------------------------------------------- protobuf

function* pbFields(b, start, end) {
  let o = start;
  const varint = () => {
    let v = 0, mul = 1;
    for (;;) {
      if (o >= end) throw new Error(`onnx: truncated varint at byte ${o}`);
      const c = b[o++];
      v += (c & 0x7f) * mul;
      if (!(c & 0x80)) return v;
      mul *= 128;
    }
  };
  while (o < end) {
    const key = varint(), field = Math.floor(key / 8), wt = key % 8;
    if (wt === 0) yield { field, wt, value: varint() };
    else if (wt === 1 || wt === 5) { const n = wt === 1 ? 8 : 4; yield { field, wt, start: o, end: o + n }; o += n; }
    else if (wt === 2) { const n = varint(); if (o + n > end) throw new Error(`onnx: field ${field} overruns its message at byte ${o}`); yield { field, wt, start: o, end: o + n }; o += n; }
    else throw new Error(`onnx: unsupported wire type ${wt} at byte ${o}`);
  }
}

const ONNX_FLOAT = 1;

function onnxTensor(b, start, end) {
  const t = { name: '', dims: [], dataType: 0, rawStart: -1, rawEnd: -1, floats: [] };
  for (const f of pbFields(b, start, end)) {
    if (f.field === 1) {
      if (f.wt === 0) t.dims.push(f.value);
      else t.dims.push(...unpackVarints(b, f.start, f.end));
    } else if (f.field === 2) t.dataType = f.value;
    else if (f.field === 8) t.name = b.toString('utf8', f.start, f.end);
    else if (f.field === 9) { t.rawStart = f.start; t.rawEnd = f.end; }
    else if (f.field === 4) {
      if (f.wt === 5) t.floats.push(b.readFloatLE(f.start));
      else for (let o = f.start; o + 4 <= f.end; o += 4) t.floats.push(b.readFloatLE(o));
    }
  }
  return t;
}

// a packed repeated int64 field: one length-delimited run of varints
function unpackVarints(b, start, end) {
  const dims = [];
  let o = start;
  while (o < end) {
    let v = 0, mul = 1;
    for (;;) { const c = b[o++]; v += (c & 0x7f) * mul; if (!(c & 0x80)) break; mul *= 128; }
    dims.push(v);
  }
  return dims;
}

export function onnxInitializers(buf) {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength);
  const out = new Map();
  for (const m of pbFields(b, 0, b.length)) {
    if (m.field !== 7 || m.wt !== 2) continue;
    for (const g of pbFields(b, m.start, m.end)) {
      if (g.field !== 5 || g.wt !== 2) continue;
      const t = onnxTensor(b, g.start, g.end);
      if (t.dataType !== ONNX_FLOAT) continue;
      const n = t.dims.reduce((a, d) => a * d, 1);
      let values;
      if (t.rawStart >= 0) {
        if (t.rawEnd - t.rawStart !== 4 * n) throw new Error(`onnx: initializer ${t.name} has ${t.rawEnd - t.rawStart} bytes of raw_data for ${n} floats`);
        values = new Float32Array(n);
        for (let i = 0; i < n; i++) values[i] = b.readFloatLE(t.rawStart + 4 * i);
      } else {
        if (t.floats.length !== n) throw new Error(`onnx: initializer ${t.name} has ${t.floats.length} floats for dims [${t.dims}]`);
        values = Float32Array.from(t.floats);
      }
      out.set(t.name, { dims: t.dims, values, rawStart: t.rawStart, rawEnd: t.rawEnd });
    }
  }
  return out;
}

// ------------------------------------------------------------------- f16

const f32b = new Float32Array(1), u32b = new Uint32Array(f32b.buffer);

// IEEE binary16 bits of x, rounded to nearest even (numpy's astype(float16))
export function f32ToF16(x) {
  f32b[0] = x;
  const u = u32b[0], sign = (u >>> 16) & 0x8000, exp = (u >>> 23) & 0xff;
  let mant = u & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  const e = exp - 112;                       // rebiased exponent (127 -> 15)
  if (e >= 0x1f) return sign | 0x7c00;
  let h, rem, halfway;
  if (e <= 0) {                              // a subnormal half (or zero)
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    h = mant >>> shift; rem = mant & ((1 << shift) - 1); halfway = 1 << (shift - 1);
  } else {
    h = (e << 10) | (mant >>> 13); rem = mant & 0x1fff; halfway = 0x1000;
  }
  if (rem > halfway || (rem === halfway && (h & 1))) h++;  // a carry into the exponent is correct
  return sign | h;
}

export function f16ToF32(h) {
  const sign = h & 0x8000 ? -1 : 1, exp = (h >>> 10) & 0x1f, mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

// ------------------------------------------------------------ ggml format

const GGML_MAGIC = 0x67676d6c;
const N_LAYERS = 4;
const ENC_IN = [129, 128, 64, 64], ENC_OUT = [128, 64, 64, 128];
const BASIS = '_model.stft.forward_basis_buffer';

// whisper.cpp's converter order: encoder weight/bias pairs, LSTM, final conv, STFT basis last
export const GGML_VAD_TENSORS = [
  ...Array.from({ length: N_LAYERS }, (_, i) => [`_model.encoder.${i}.reparam_conv.weight`, `_model.encoder.${i}.reparam_conv.bias`]).flat(),
  '_model.decoder.rnn.weight_ih', '_model.decoder.rnn.weight_hh', '_model.decoder.rnn.bias_ih', '_model.decoder.rnn.bias_hh',
  '_model.decoder.decoder.2.weight', '_model.decoder.decoder.2.bias',
  BASIS,
];

// the converter's f16 tensors: the STFT basis and the convolution kernels
const isConvKernel = (name) => name === BASIS || (name.endsWith('weight') && (name.includes('encoder') || name.includes('decoder.decoder.2')));

// ONNX initializer name for a ggml tensor name ("model.X" in Silero's export)
const onnxName = (ggmlName) => ggmlName.replace(/^_model\./, 'model.');

export function ggmlVadFromOnnx(onnxBuf, { f32Conv = false, version = [6, 0, 0] } = {}) {
  const init = onnxInitializers(onnxBuf);
  const parts = [];
  const i32 = (...v) => { const b = Buffer.alloc(4 * v.length); v.forEach((x, k) => b.writeInt32LE(x, 4 * k)); parts.push(b); };
  i32(GGML_MAGIC);
  const type = Buffer.from('silero-16k');
  i32(type.length); parts.push(type);
  i32(...version, 512, 64, N_LAYERS);
  for (let l = 0; l < N_LAYERS; l++) i32(ENC_IN[l], ENC_OUT[l], 3);
  i32(128, 128, 128, 1);
  for (const name of GGML_VAD_TENSORS) {
    const t = init.get(onnxName(name));
    if (!t) throw new Error(`onnx: the model has no initializer ${onnxName(name)}`);
    const ne = name === BASIS ? [...t.dims].reverse() : t.dims.filter((d) => d !== 1).reverse();
    const f16 = isConvKernel(name) && !f32Conv;
    const nameBytes = Buffer.from(name);
    i32(ne.length, nameBytes.length, f16 ? 1 : 0, ...ne);
    parts.push(nameBytes);
    const data = Buffer.alloc(t.values.length * (f16 ? 2 : 4));
    t.values.forEach((v, k) => (f16 ? data.writeUInt16LE(f32ToF16(v), 2 * k) : data.writeFloatLE(v, 4 * k)));
    parts.push(data);
  }
  return Buffer.concat(parts);
}

export function readGgmlVad(buf) {
  const b = Buffer.isBuffer(buf) ? buf : Buffer.from(buf);
  let o = 0;
  const i32 = () => { if (o + 4 > b.length) throw new Error(`ggml vad: truncated at byte ${o}`); const v = b.readInt32LE(o); o += 4; return v; };
  if (i32() !== GGML_MAGIC) throw new Error('ggml vad: bad magic');
  const typeLen = i32();
  o += typeLen;                             // model type string
  const version = [i32(), i32(), i32()];
  o += 8;                                   // n_window, n_context
  const nLayers = i32();
  o += nLayers * 12 + 16;                   // encoder layers, lstm and final conv sizes
  const tensors = new Map();
  while (o < b.length) {
    const nd = i32(), len = i32(), type = i32();
    const ne = Array.from({ length: nd }, i32);
    const name = b.toString('utf8', o, o + len); o += len;
    const n = ne.reduce((a, d) => a * d, 1), es = type === 1 ? 2 : 4;
    if (type !== 0 && type !== 1) throw new Error(`ggml vad: tensor ${name} has type ${type}`);
    if (o + n * es > b.length) throw new Error(`ggml vad: tensor ${name} truncated`);
    const values = new Float32Array(n);
    for (let k = 0; k < n; k++) values[k] = type === 1 ? f16ToF32(b.readUInt16LE(o + 2 * k)) : b.readFloatLE(o + 4 * k);
    o += n * es;
    tensors.set(name, { ne, type, values });
  }
  return { version, tensors };
}

export function onnxWithWeights(onnxBuf, tensors) {
  const out = Buffer.from(onnxBuf);
  const init = onnxInitializers(out);
  for (const [name, t] of tensors) {
    const dst = init.get(onnxName(name));
    if (!dst) throw new Error(`onnx: the model has no initializer ${onnxName(name)}`);
    if (dst.values.length !== t.values.length) throw new Error(`onnx: ${name} has ${t.values.length} values, the initializer ${dst.values.length}`);
    if (dst.rawStart < 0) throw new Error(`onnx: initializer ${onnxName(name)} has no raw_data to overwrite`);
    t.values.forEach((v, k) => out.writeFloatLE(v, dst.rawStart + 4 * k));
  }
  return out;
}

export async function onnxVadProbs(ort, session, x) {
  const n = Math.ceil(x.length / 512);
  let state = new Float32Array(256);
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]));
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const win = new Float32Array(512);
    win.set(x.subarray(i * 512, Math.min(x.length, i * 512 + 512)));
    const inp = new Float32Array(576);
    for (let k = 0; k < 64; k++) inp[k] = win[64 - k];
    inp.set(win, 64);
    const r = await session.run({ input: new ort.Tensor('float32', inp, [1, 576]), state: new ort.Tensor('float32', state, [2, 1, 128]), sr });
    out[i] = r.output.data[0];
    state = Float32Array.from(r.stateN.data);
  }
  return out;
}
