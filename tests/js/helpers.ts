import { Kiln, type Build, type Tensor } from '../../js/dist/index.js';

export const BUILDS: Build[] = ['st', 'mt'];
export const MODEL = new URL('../../models/stories260K.gguf', import.meta.url).pathname;

export async function engine(build: Build, threads = 4): Promise<Kiln> {
  return Kiln.create({ build, threads, logLevel: 'error' });
}

/** deterministic values in [-1, 1) */
export function rand(n: number, seed = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    out[i] = (s / 4294967296) * 2 - 1;
  }
  return out;
}

export function nmse(out: ArrayLike<number>, ref: ArrayLike<number>): number {
  let num = 0, den = 0;
  for (let i = 0; i < ref.length; i++) { const d = out[i] - ref[i]; num += d * d; den += ref[i] * ref[i]; }
  return den === 0 ? num : num / den;
}

/** computes t and reads its values as f32 */
export async function f32(t: Tensor): Promise<Float32Array> {
  return (await t.data()) as Float32Array;
}
