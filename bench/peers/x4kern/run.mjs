// Node: node [--experimental-wasm-relaxed-simd] bench/peers/x4kern/run.mjs [TYPE (iq4_nl)] [ROUNDS (7)] [COLS (24)] [K (2048)] [N (5632)] [ISA (the best; or wasm_simd128)]
// Times CPU time (process.cpuUsage: the machine is shared); JSON lines on stdout.
// X4KERN_WASM=FILE: another build of x4kern.wasm (an A/B of two kernel versions).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
const dir = path.dirname(fileURLToPath(import.meta.url));
await import('./core.js');
const [type = 'iq4_nl', rounds = 7, NC = 24, K = 2048, N = 5632, isa = ''] = process.argv.slice(2);
const now = () => { const u = process.cpuUsage(); return (u.user + u.system) / 1000; };
const res = await globalThis.x4kernRun(readFileSync(process.env.X4KERN_WASM ?? path.join(dir, '../../../build/x4kern/x4kern.wasm')), now,
  { type, rounds: +rounds, NC: +NC, K: +K, N: +N, isa });
for (const r of res) console.log(JSON.stringify({ engine: `node ${process.version}`, clock: 'cpu', ...(process.env.X4KERN_WASM ? { wasm: process.env.X4KERN_WASM } : {}), ...r }));
