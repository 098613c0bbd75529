// A random-weight whisper.cpp model file made to decode a fixed, confident,
// non-repeating token sequence, so that whisper.cpp's temperature fallback
// (avg log-prob < -1, or the last 32 tokens' entropy < 2.4) never triggers
// and two engines decoding it do the same work: one greedy pass per window.
//
// How: the decoder's learned positional embedding is rewritten so that the
// residual stream at position 2 + j is dominated by `scale` x (the unit
// direction of the token embedding of target j) x sqrt(width); the random
// layers add O(1) per channel on top, so the final layer norm points at
// that token's embedding and the tied output projection gives it a logit
// far above every other (~ logit_std x sqrt(width) against a max of the
// rest ~ 4.5 x logit_std). Positions 0..2 hold the prompt <|sot|> <|en|>
// <|transcribe|> (whisper.cpp's first window at temperature 0), so the
// logits at position 2 + j choose generated token j. The targets:
// <|0.00|>, `count` distinct plain-word text tokens, <|30.00|>: one segment
// covering the 30 s window; the trailing timestamp ends the audio, so the
// whole input (up to 30 s) is one window and one decode of count + 2 steps.
// Everything else (encoder, cross-attention, all the matrices) stays the
// random model's, so the compute is that of the shape.
//
//   node bench/whisper-scripted-model.mjs IN.bin OUT.bin [--count 96] [--scale 30]
// or import { scriptWhisperModel } and call it (returns the target ids).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

function f16ToF32(h) {
  const s = h & 0x8000 ? -1 : 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  if (e === 0) return s * m * 2 ** -24;
  if (e === 31) return m ? NaN : s * Infinity;
  return s * (1 + m / 1024) * 2 ** (e - 15);
}

export function scriptWhisperModel(inFile, outFile, { count = 96, scale = 30 } = {}) {
  const b = Buffer.from(fs.readFileSync(inFile));
  let off = 0;
  const i32 = () => { const v = b.readInt32LE(off); off += 4; return v; };
  if (i32() !== 0x67676d6c) throw new Error(`${inFile}: not a whisper.cpp ggml file`);
  const hp = {};
  for (const k of ['n_vocab', 'n_audio_ctx', 'n_audio_state', 'n_audio_head', 'n_audio_layer', 'n_text_ctx', 'n_text_state',
    'n_text_head', 'n_text_layer', 'n_mels', 'ftype']) hp[k] = i32();
  const nMel = i32(), nFft = i32();
  off += 4 * nMel * nFft;
  const nFile = i32();
  const vocab = [];
  for (let i = 0; i < nFile; i++) { const len = i32(); vocab.push(b.toString('latin1', off, off + len)); off += len; }
  const S = hp.n_text_state;
  // the special tokens as whisper.cpp numbers them (multilingual: eot 50257, beg = eot + 107)
  const eot = hp.n_vocab >= 51865 ? 50257 : 50256;
  const beg = hp.n_vocab >= 51865 ? 50364 : 50363;
  const tsEnd = beg + 1500; // <|30.00|>: 1500 steps of 0.02 s
  if (tsEnd >= hp.n_vocab) throw new Error(`no <|30.00|> token in a vocabulary of ${hp.n_vocab}`);
  // plain lower-case words with a leading space (BPE's 'Ġ' is the byte 0x20 here): printable, JSON-safe
  const words = [];
  for (let id = 1000, step = 0; words.length < count && step < eot; step++, id = 1000 + ((step * 7919) % (eot - 1000))) {
    if (/^ [a-z]{3,9}$/.test(vocab[id] ?? '') && !words.includes(id)) words.push(id);
  }
  if (words.length < count) throw new Error(`only ${words.length} plain word tokens found`);
  const targets = [beg, ...words, tsEnd];
  if (2 + targets.length > hp.n_text_ctx) throw new Error(`${targets.length} targets do not fit n_text_ctx ${hp.n_text_ctx}`);
  // walk the tensors: n_dims, name length, type, dims, name, data
  const tensors = {};
  while (off < b.length) {
    const nd = i32(), nl = i32(), type = i32();
    const ne = []; for (let k = 0; k < nd; k++) ne.push(i32());
    const name = b.toString('latin1', off, off + nl); off += nl;
    const n = ne.reduce((p, q) => p * q, 1);
    const esize = type === 0 ? 4 : type === 1 ? 2 : null;
    tensors[name] = { type, ne, off };
    if (esize === null) throw new Error(`${name}: type ${type}: only f32 / f16 files are handled`);
    off += n * esize;
  }
  const te = tensors['decoder.token_embedding.weight'], pe = tensors['decoder.positional_embedding'];
  if (!te || !pe || pe.type !== 0) throw new Error('decoder token / positional embedding not found (or not f32 positions)');
  const row = (id) => {
    const v = new Float64Array(S);
    for (let c = 0; c < S; c++) v[c] = te.type === 1 ? f16ToF32(b.readUInt16LE(te.off + 2 * (id * S + c))) : b.readFloatLE(te.off + 4 * (id * S + c));
    return v;
  };
  targets.forEach((id, j) => {
    const e = row(id);
    const norm = Math.hypot(...e);
    for (let c = 0; c < S; c++) b.writeFloatLE(scale * Math.sqrt(S) * e[c] / norm, pe.off + 4 * ((2 + j) * S + c));
  });
  fs.writeFileSync(outFile, b);
  return { targets, words: words.map((id) => vocab[id]), eot, beg };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const a = process.argv.slice(2);
  const opt = (k, d) => (a.includes(k) ? Number(a[a.indexOf(k) + 1]) : d);
  if (a.length < 2) { console.error('usage: node bench/whisper-scripted-model.mjs IN.bin OUT.bin [--count 96] [--scale 30]'); process.exit(2); }
  const r = scriptWhisperModel(a[0], a[1], { count: opt('--count', 96), scale: opt('--scale', 30) });
  console.log(JSON.stringify({ targets: r.targets, text: r.words.join('') }));
}
