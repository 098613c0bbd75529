#!/usr/bin/env node
/*
 * make-chat-gguf.mjs — a test fixture: a copy of a GGUF file (by default
 * models/stories260K.gguf) with one more metadata key,
 * tokenizer.chat_template, so model.chat() has a real template to render.
 * Tensors, tensor infos and every other key are copied byte for byte; only
 * the key count, the added key and the padding before the tensor data change.
 *
 *   node scripts/make-chat-gguf.mjs OUT.gguf [IN.gguf]
 *   import { withChatTemplate, CHAT_TEMPLATE } from '../../scripts/make-chat-gguf.mjs'
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SOURCE = path.join(ROOT, 'models/stories260K.gguf');

/**
 * A Zephyr-like template that exercises what real ones use: bos_token,
 * a loop with loop.first, a filter, raise_exception, add_generation_prompt.
 */
export const CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}" +
  "{% if message['role'] not in ['system', 'user', 'assistant'] %}{{ raise_exception('unknown role ' + message['role']) }}{% endif %}" +
  "{% if loop.first and message['role'] != 'system' %}{{ '<|system|>\\nYou tell short stories.' + eos_token + '\\n' }}{% endif %}" +
  "{{ '<|' + message['role'] + '|>\\n' + (message['content'] | trim) + eos_token + '\\n' }}" +
  "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}";

const TYPE_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8, ARRAY = 9;

/** the bytes of `gguf` with `key` = `value` (a string) added to its metadata */
export function withStringKey(gguf, key, value) {
  const b = Buffer.from(gguf.buffer, gguf.byteOffset, gguf.byteLength);
  if (b.toString('latin1', 0, 4) !== 'GGUF') throw new Error('not a GGUF file');
  const version = b.readUInt32LE(4);
  if (version !== 3 && version !== 2) throw new Error(`GGUF version ${version}`);
  const nTensors = b.readBigUInt64LE(8), nKv = b.readBigUInt64LE(16);
  let o = 24;
  let alignment = 32;
  const str = () => { const n = Number(b.readBigUInt64LE(o)); o += 8; const s = b.toString('utf8', o, o + n); o += n; return s; };
  const skipValue = (type) => {
    if (type === STRING) { str(); return; }
    if (type === ARRAY) {
      const et = b.readUInt32LE(o); const n = Number(b.readBigUInt64LE(o + 4)); o += 12;
      if (et === STRING || et === ARRAY) { for (let i = 0; i < n; i++) skipValue(et); return; }
      if (!(et in TYPE_SIZE)) throw new Error(`GGUF array type ${et}`);
      o += n * TYPE_SIZE[et];
      return;
    }
    if (!(type in TYPE_SIZE)) throw new Error(`GGUF type ${type}`);
    o += TYPE_SIZE[type];
  };
  for (let i = 0n; i < nKv; i++) {
    const k = str();
    const type = b.readUInt32LE(o); o += 4;
    if (k === key) throw new Error(`the file already has ${key}`);
    if (k === 'general.alignment') alignment = b.readUInt32LE(o);
    skipValue(type);
  }
  const kvEnd = o;
  for (let i = 0n; i < nTensors; i++) {
    str();
    const nd = b.readUInt32LE(o); o += 4 + nd * 8 + 4 + 8;
  }
  const infoEnd = o;
  const dataStart = Math.ceil(infoEnd / alignment) * alignment;

  const kb = Buffer.from(key, 'utf8'), vb = Buffer.from(value, 'utf8');
  const kv = Buffer.alloc(8 + kb.length + 4 + 8 + vb.length);
  let p = 0;
  kv.writeBigUInt64LE(BigInt(kb.length), p); p += 8; kb.copy(kv, p); p += kb.length;
  kv.writeUInt32LE(STRING, p); p += 4;
  kv.writeBigUInt64LE(BigInt(vb.length), p); p += 8; vb.copy(kv, p);

  const head = Buffer.concat([b.subarray(0, 24), b.subarray(24, kvEnd), kv, b.subarray(kvEnd, infoEnd)]);
  head.writeBigUInt64LE(nKv + 1n, 16);
  const pad = Buffer.alloc(Math.ceil(head.length / alignment) * alignment - head.length);
  return new Uint8Array(Buffer.concat([head, pad, b.subarray(dataStart)]));
}

export function withChatTemplate(gguf = readFileSync(SOURCE), template = CHAT_TEMPLATE) {
  return withStringKey(gguf, 'tokenizer.chat_template', template);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [out, input] = process.argv.slice(2);
  if (!out) { console.error('usage: node scripts/make-chat-gguf.mjs OUT.gguf [IN.gguf]'); process.exit(2); }
  const bytes = withChatTemplate(readFileSync(input ?? SOURCE));
  writeFileSync(out, bytes);
  console.log(`${out}: ${bytes.byteLength} bytes, tokenizer.chat_template added`);
}
