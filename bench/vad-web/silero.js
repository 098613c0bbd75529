// What the VAD benchmarks (bench/vad-peers.mjs in Node, vad.js in the page)
// share. tileWav: a 16-bit PCM wav's samples (its "data" chunk, found by walking the RIFF chunks: jfk.wav has a
// LIST chunk before it) as floats, tiled to n samples.
export function tileWav(wav, n) {
  const dv = new DataView(wav.buffer, wav.byteOffset, wav.byteLength);
  let off = 12;
  while (off + 8 <= wav.length && String.fromCharCode(...wav.subarray(off, off + 4)) !== 'data') off += 8 + dv.getUint32(off + 4, true) + (dv.getUint32(off + 4, true) & 1);
  if (off + 8 > wav.length) throw new Error('wav: no data chunk');
  const len = Math.min(dv.getUint32(off + 4, true), wav.length - off - 8) >> 1;
  const pcm = new Int16Array(wav.slice(off + 8, off + 8 + 2 * len).buffer);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = pcm[i % pcm.length] / 32768;
  return out;
}

// One pass of onnxruntime (node or web: the module is passed in) over the
// first len samples of x, one session.run per 512-sample window with the 64
// samples before it as context and the recurrent state carried over
// (Silero's streaming use of its ONNX export).
export async function ortPass(ort, session, x, len) {
  const WIN = 512, CTX = 64;
  const sr = new ort.Tensor('int64', BigInt64Array.from([16000n]));
  let state = new Float32Array(256);
  const ctx = new Float32Array(CTX);
  let speech = 0, windows = 0;
  for (let i = 0; i + WIN <= len; i += WIN) {
    const inp = new Float32Array(CTX + WIN);
    inp.set(ctx); inp.set(x.subarray(i, i + WIN), CTX);
    const r = await session.run({ input: new ort.Tensor('float32', inp, [1, CTX + WIN]), state: new ort.Tensor('float32', state, [2, 1, 128]), sr });
    state = r.stateN.data; ctx.set(x.subarray(i + WIN - CTX, i + WIN));
    speech += r.output.data[0] >= 0.5; windows++;
  }
  return { speech_windows: speech, windows };
}
