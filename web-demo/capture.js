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
