// The package's .d.ts as a user's TypeScript sees them: emitted fresh from
// js/src, they must equal the checked-in API report (js/api/kiln-ml.api.d.ts,
// so that API changes are deliberate), and a consumer program must compile
// with --strict and skipLibCheck off in a page project (lib es2022 + dom) and
// in a Node project (lib es2022 + @types/node, no DOM), where the documented
// unions are exact (a wrong literal is a compile error).
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync, readFileSync, copyFileSync, symlinkSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-ignore: a plain .mjs script
import { apiReport, SNAPSHOT } from '../../scripts/api-report.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');

const CONSUMER = `
import { Kiln, KilnError, KilnAbortError, type Completion, type StopReason, type LogLevel, type KilnErrorCode,
  type DType, type KilnOptions, type GenerateOptions, type ChatMessage, type Progress, type ModelSource } from 'kiln-ml';

const level: LogLevel = 'silent';
const opts: KilnOptions = { threads: 2, logLevel: level, simd: 'auto', wasmUrl: new URL('https://cdn.example/kiln/') };
const kiln = await Kiln.create(opts);
const source: ModelSource = 'https://host/model.gguf';
const model = await kiln.loadModel(source, { onProgress: (p: Progress) => console.log(p.loaded / p.total) });
const g: GenerateOptions = { maxTokens: 8, temperature: 0, stop: ['\\n'] };
for await (const piece of model.generate('Once upon a time', g)) console.log(piece.toUpperCase());
const c: Completion = await model.complete('Once', g);
const why: StopReason = c.stopReason;
switch (why) { case 'eos': case 'maxTokens': case 'stop': case 'context': break; default: { const never: never = why; console.log(never); } }
const messages: ChatMessage[] = [{ role: 'user', content: 'Hi' }];
console.log((await model.chat(messages)).text);
const t = kiln.tensor(new Float32Array(4), [2, 2], 'f32').matmul(kiln.tensor(new Float32Array(4), [2, 2]));
const d: DType = (await t.info()).type;
try { await t.data(); } catch (e) {
  if (e instanceof KilnAbortError) console.log('aborted');
  else if (e instanceof KilnError) { const code: KilnErrorCode = e.code; console.log(code); }
}
// @ts-expect-error: not a stop reason
const bad: StopReason = 'length';
// @ts-expect-error: not an error code
const badCode: KilnErrorCode = 'NOT_FOUND';
// @ts-expect-error: not a dtype
const badType: DType = 'q7_0';
// @ts-expect-error: not a log level
const badLevel: LogLevel = 'verbose';
// @ts-expect-error: internal members are not part of the types
kiln.sched;
// @ts-expect-error: internal
kiln.newTensor();
// @ts-expect-error: internal
kiln.op('add', []);
console.log(d, bad, badCode, badType, badLevel);
model.free();
kiln.destroy();
`;

let dir = '';
let dts = '';

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-types-'));
  dts = path.join(dir, 'dts');
  execFileSync(process.execPath, [TSC, '-p', path.join(ROOT, 'js/tsconfig.json'), '--outDir', dts, '--emitDeclarationOnly'], { stdio: 'pipe' });
  // an installed package: package.json + js/dist/*.d.ts
  const pkg = path.join(dir, 'node_modules/kiln-ml');
  mkdirSync(path.join(pkg, 'js/dist'), { recursive: true });
  copyFileSync(path.join(ROOT, 'package.json'), path.join(pkg, 'package.json'));
  for (const f of readdirSync(dts)) copyFileSync(path.join(dts, f), path.join(pkg, 'js/dist', f));
  mkdirSync(path.join(dir, 'node_modules/@types'), { recursive: true });
  symlinkSync(path.join(ROOT, 'node_modules/@types/node'), path.join(dir, 'node_modules/@types/node'));
  writeFileSync(path.join(dir, 'package.json'), '{"type":"module"}\n');
  writeFileSync(path.join(dir, 'use.ts'), CONSUMER);
});
afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

function compile(lib: string[], types: string[]): string {
  const cfg = path.join(dir, `tsconfig.${lib.join('-')}.json`);
  writeFileSync(cfg, JSON.stringify({
    compilerOptions: { target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', lib, types,
      strict: true, noEmit: true, skipLibCheck: false },
    files: ['use.ts'],
  }));
  try {
    execFileSync(process.execPath, [TSC, '-p', cfg], { stdio: 'pipe', cwd: dir });
    return '';
  } catch (e: any) {
    return String(e.stdout || e.stderr || e.message);
  }
}

describe('types', () => {
  it('the emitted .d.ts equal the checked-in API report (js/api/kiln-ml.api.d.ts)', () => {
    const fresh = apiReport(dts);
    const kept = readFileSync(SNAPSHOT, 'utf8');
    if (fresh !== kept) {
      const a = fresh.split('\n'), b = kept.split('\n');
      const i = a.findIndex((l, k) => l !== b[k]);
      throw new Error(`public types changed (first difference at line ${i + 1}: emitted ${JSON.stringify(a[i])}, ` +
        `report ${JSON.stringify(b[i])}); if meant: npm run build:ts && node scripts/api-report.mjs --write`);
    }
  });

  it('compile with --strict in a page project (lib es2022 + dom, no @types/node)', () => {
    expect(compile(['es2022', 'dom'], [])).toBe('');
  });

  it('compile with --strict in a Node project (lib es2022 + @types/node, no DOM)', () => {
    expect(compile(['es2022'], ['node'])).toBe('');
  });
});
