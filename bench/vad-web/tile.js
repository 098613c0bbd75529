// The VAD benchmarks' audio, in Node and in the page: a 16-bit PCM wav's
// samples (its "data" chunk, found by walking the RIFF chunks: jfk.wav has a
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
