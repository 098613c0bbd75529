// Microphone capture shared by the Listen and Transcribe pages:
// getUserMedia -> an AudioWorklet that posts ~20 ms chunks of mono samples
// to this thread; and a 16-bit WAV blob of samples (for <audio> clips).

// the worklet posts 128-sample render quanta in batches of ~20 ms
const WORKLET = `
class Tap extends AudioWorkletProcessor {
  constructor() { super(); this.buf = []; this.n = 0; }
  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (ch) { this.buf.push(ch.slice()); this.n += ch.length; }
    if (this.n >= sampleRate / 50) {
      const out = new Float32Array(this.n); let o = 0;
      for (const b of this.buf) { out.set(b, o); o += b.length; }
      this.port.postMessage(out, [out.buffer]); this.buf = []; this.n = 0;
    }
    return true;
  }
}
registerProcessor('kiln-tap', Tap);`;

/** starts the microphone; onChunk(Float32Array) gets its samples at the returned sampleRate; stop() ends it */
export async function startCapture(onChunk) {
  const stream = await navigator.mediaDevices.getUserMedia({ audio: { echoCancellation: false, noiseSuppression: false, autoGainControl: false } });
  const ctx = new AudioContext();
  await ctx.audioWorklet.addModule(URL.createObjectURL(new Blob([WORKLET], { type: 'text/javascript' })));
  const src = ctx.createMediaStreamSource(stream);
  const tap = new AudioWorkletNode(ctx, 'kiln-tap');
  tap.port.onmessage = (e) => onChunk(e.data);
  src.connect(tap);
  return {
    sampleRate: ctx.sampleRate,
    async stop() {
      stream.getTracks().forEach((t) => t.stop());
      await ctx.close();
    },
  };
}

/** samples in [-1, 1] as a 16-bit mono WAV file */
export function wavBlob(samples, rate) {
  const b = new DataView(new ArrayBuffer(44 + samples.length * 2));
  const s = (o, t) => { for (let i = 0; i < t.length; i++) b.setUint8(o + i, t.charCodeAt(i)); };
  s(0, 'RIFF'); b.setUint32(4, 36 + samples.length * 2, true); s(8, 'WAVE'); s(12, 'fmt ');
  b.setUint32(16, 16, true); b.setUint16(20, 1, true); b.setUint16(22, 1, true); b.setUint32(24, rate, true);
  b.setUint32(28, rate * 2, true); b.setUint16(32, 2, true); b.setUint16(34, 16, true); s(36, 'data'); b.setUint32(40, samples.length * 2, true);
  for (let i = 0; i < samples.length; i++) b.setInt16(44 + 2 * i, Math.max(-1, Math.min(1, samples[i])) * 32767, true);
  return new Blob([b.buffer], { type: 'audio/wav' });
}

/**
 * The samples of a PCM (8/16/24/32-bit) or float (32/64-bit) WAV file, mixed
 * to mono, at the file's rate; null for anything else. Read here instead of
 * with decodeAudioData: that needs an AudioContext (starting one can block
 * this thread) and finishes with a task on this thread that measured
 * 50-240 ms for 11 s of audio. Long files are converted in slices with a
 * turn of the event loop between them, so no task here runs long either.
 */
export async function wavSamples(buf) {
  const v = new DataView(buf);
  const tag = (o) => String.fromCharCode(v.getUint8(o), v.getUint8(o + 1), v.getUint8(o + 2), v.getUint8(o + 3));
  if (buf.byteLength < 12 || tag(0) !== 'RIFF' || tag(8) !== 'WAVE') return null;
  let fmt = null;
  for (let off = 12; off + 8 <= buf.byteLength;) {
    const id = tag(off), len = v.getUint32(off + 4, true), body = off + 8;
    if (id === 'fmt ' && len >= 16) {
      let format = v.getUint16(body, true);
      if (format === 0xfffe && len >= 40) format = v.getUint16(body + 24, true); // WAVE_FORMAT_EXTENSIBLE: the sub-format's first 2 bytes
      fmt = { format, channels: v.getUint16(body + 2, true), rate: v.getUint32(body + 4, true), bits: v.getUint16(body + 14, true) };
    } else if (id === 'data' && fmt) {
      const { format, channels, rate, bits } = fmt;
      const bytes = bits / 8;
      const ok = channels >= 1 && rate > 0 && ((format === 1 && [8, 16, 24, 32].includes(bits)) || (format === 3 && (bits === 32 || bits === 64)));
      if (!ok) return null;
      const frames = Math.floor(Math.min(len, buf.byteLength - body) / (bytes * channels));
      // the common layouts through typed arrays (a copy when the data is not aligned for them)
      const n = frames * channels;
      const typed = (T) => (body % T.BYTES_PER_ELEMENT === 0 ? new T(buf, body, n) : new T(buf.slice(body, body + n * T.BYTES_PER_ELEMENT)));
      const src = format === 3 ? typed(bits === 32 ? Float32Array : Float64Array)
        : bits === 16 ? typed(Int16Array) : bits === 32 ? typed(Int32Array) : bits === 8 ? new Uint8Array(buf, body, n) : null;
      const scale = format === 3 ? 1 : bits === 8 ? 1 / 128 : bits === 16 ? 1 / 32768 : bits === 24 ? 1 / 8388608 : 1 / 2147483648;
      const bias = bits === 8 ? 128 : 0;
      const at = src ? (i) => src[i] - bias : (i) => v.getUint8(body + 3 * i) | (v.getUint8(body + 3 * i + 1) << 8) | (v.getInt8(body + 3 * i + 2) << 16);
      const x = new Float32Array(frames);
      const SLICE = 1 << 14;
      for (let f0 = 0; f0 < frames; f0 += SLICE) {
        const f1 = Math.min(frames, f0 + SLICE);
        if (channels === 1) for (let f = f0; f < f1; f++) x[f] = at(f) * scale;
        else {
          for (let f = f0; f < f1; f++) {
            let s = 0;
            for (let c = 0; c < channels; c++) s += at(f * channels + c);
            x[f] = (s * scale) / channels;
          }
        }
        if (f1 < frames) await new Promise((r) => setTimeout(r, 0));
      }
      return { samples: x, rate };
    }
    off = body + len + (len & 1);
  }
  return null;
}
