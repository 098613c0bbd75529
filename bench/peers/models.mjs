// The GGUF files the benchmark runs on and the weight bytes one generated
// token reads (every matrix once; of the token embedding only one row,
// unless it doubles as the output matrix).
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';

// ggml type id -> [bytes per block, elements per block]
const TYPE = { 0: [4, 1], 1: [2, 1], 2: [18, 32], 3: [20, 32], 6: [22, 32], 7: [24, 32], 8: [34, 32], 10: [84, 256], 11: [110, 256], 12: [144, 256], 13: [176, 256], 14: [210, 256], 30: [2, 1] };

export async function weightBytesPerToken(readGgufFileInfo, file) {
  const info = await readGgufFileInfo(file, { readTensorInfo: true });
  let total = 0; let hasOutput = false; let embd = 0; let embdRow = 0;
  for (const t of info.fullTensorInfo ?? info.tensorInfo ?? []) {
    const n = t.dimensions.reduce((a, b) => a * Number(b), 1);
    const [bs, be] = TYPE[t.ggmlType] ?? [4, 1];
    const bytes = (n / be) * bs;
    if (t.name === 'token_embd.weight') { embd = bytes; embdRow = bytes / Number(t.dimensions[1] ?? 1); continue; }
    if (t.name === 'output.weight') hasOutput = true;
    total += bytes;
  }
  return total + (hasOutput ? embdRow : embd);
}

export function findModels(root, which) {
  const all = [
    { name: 'stories260K', path: '/work/shared/models/stories260K.gguf', key: 'stories' },
    { name: 'synth-q4_0', path: path.join(root, 'bench/peers/data/synth-q4_0.gguf'), key: 'q4_0' },
    { name: 'synth-q8_0', path: path.join(root, 'bench/peers/data/synth-q8_0.gguf'), key: 'q8_0' },
    { name: 'synth-q4_K_M', path: path.join(root, 'bench/peers/data/synth-q4_K_M.gguf'), key: 'q4_k_m' },
    { name: 'synth-q5_K_M', path: path.join(root, 'bench/peers/data/synth-q5_K_M.gguf'), key: 'q5_k_m' },
  ];
  const local = path.join(root, 'models/stories260K.gguf');
  if (existsSync(local)) all[0].path = local;
  return all.filter((m) => which.includes(m.key) && existsSync(m.path) && statSync(m.path).size > 0);
}
