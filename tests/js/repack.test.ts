// Quantized weights in kiln-st / kiln-mt: the engine interleaves q4_0 / q8_0
// weights in its own copy of the file for faster mat-vecs (src/cpu/repack.h).
// The greedy text equals the text from an untouched copy of the same file
// (read a weight first: then nothing is rearranged), and a rearranged weight
// is refused by model.tensor() with a clear error while the others still read.
// Fixtures: scripts/test-js.sh makes build/js-fixtures/stories260K-pad-{q8_0,q4_0}.gguf
// with kiln-llama-pad and kiln-quantize.
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KilnError, type Kiln } from '../../js/dist/index.js';
import { BUILDS, engine } from './helpers.js';

const FIX = new URL('../../build/js-fixtures/', import.meta.url).pathname;
const GREEDY = { maxTokens: 48, temperature: 0 };

describe.each(BUILDS)('repacked quantized weights (%s)', (build) => {
  let kiln: Kiln;
  beforeAll(async () => { kiln = await engine(build, build === 'mt' ? 2 : 1); });
  afterAll(() => kiln?.destroy());

  it.each(['q8_0', 'q4_0'])('%s: same greedy text repacked and not; rearranged weights refused by tensor()', async (type) => {
    const file = `${FIX}stories260K-pad-${type}.gguf`;
    expect(existsSync(file), `${file} (made by scripts/test-js.sh)`).toBe(true);
    // untouched: a weight handle first keeps the bytes in file layout
    const plain = await kiln.loadModel(file);
    const w0 = plain.tensor('blk.0.ffn_up.weight');
    const wBytes = await w0.data();
    const textPlain = (await plain.complete('Once upon a time', GREEDY)).text;
    expect((await plain.tensor('blk.0.ffn_up.weight').data())).toEqual(wBytes);
    plain.free();
    // generating first: the matmul weights are interleaved in place
    const fast = await kiln.loadModel(file);
    const out = await fast.complete('Once upon a time', GREEDY);
    expect(out.text).toBe(textPlain);
    expect(out.tokens.length).toBeGreaterThan(10);
    const err = await fast.tensor('blk.0.ffn_up.weight').data().then(() => null, (e) => e);
    expect(err).toBeInstanceOf(KilnError);
    expect(String(err.message)).toMatch(/rearranged/);
    // the token embedding is read by get_rows and never rearranged
    const emb = await fast.tensor('token_embd.weight').info();
    expect(emb.shape).toEqual([64, 512]);
    // the model keeps working after the refusal
    expect((await fast.complete('Once upon a time', GREEDY)).text).toBe(textPlain);
    fast.free();
  });
});
