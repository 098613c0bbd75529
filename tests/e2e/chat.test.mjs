// model.chat() in a plain browser page: no bundler, no import map. The page
// imports kiln-ml from /js/dist/ and chats with a model whose GGUF carries
// tokenizer.chat_template (stories260K plus the key, made by
// scripts/make-chat-gguf.mjs); the rendered prompt, its tokens and the
// greedy reply must equal what Node produces from the same file.
// Also: a model loaded in the page from bytes (fetch -> ArrayBuffer) with
// and without {transfer: true} is the same model.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startServer } from '../../web-demo/server.mjs';
import { withChatTemplate } from '../../scripts/make-chat-gguf.mjs';
import { Kiln } from '../../js/dist/index.js';

const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';
const MESSAGES = [
  { role: 'user', content: '  Tell me a story about a cat.  ' },
  { role: 'assistant', content: 'Once upon a time, there was a cat.' },
  { role: 'user', content: 'What happened next?' },
];
const OPTS = { maxTokens: 24, temperature: 0 };

// the page: everything it does is a function the test calls
const PAGE = `<!doctype html>
<meta charset="utf-8"><title>kiln chat</title>
<script type="module">
import { Kiln } from '/js/dist/index.js';
let kiln = null;
window.kilnChat = async (messages, opts) => {
  try {
    kiln ??= await Kiln.create({ logLevel: 'error' });
    const model = await kiln.loadModel('/fixtures/chat.gguf');
    const rendered = await model.applyChatTemplate(messages);
    const ids = await model.tokenize(rendered.text, { addBos: rendered.addBos, special: true });
    const reply = await model.chat(messages, opts);
    const bad = await model.chat([{ role: 'robot', content: 'hi' }], opts).then(() => null, (e) => ({ code: e.code, message: e.message }));
    model.free();
    return { build: kiln.info().build, rendered, ids, text: reply.text, tokens: reply.tokens, bad };
  } catch (e) {
    return { error: String(e && (e.stack || e.message) || e), code: e && e.code };
  }
};
window.kilnBytes = async (opts) => {
  try {
    kiln ??= await Kiln.create({ logLevel: 'error' });
    const buf = await (await fetch('/fixtures/chat.gguf')).arrayBuffer();
    const size = buf.byteLength;
    const events = [];
    const model = await kiln.loadModel(new Uint8Array(buf), { ...opts, onProgress: (p) => events.push(p.loaded) });
    const r = await model.complete('Once upon a time', { maxTokens: 24, temperature: 0 });
    model.free();
    return { size, after: buf.byteLength, last: events[events.length - 1], text: r.text };
  } catch (e) {
    return { error: String(e && (e.stack || e.message) || e), code: e && e.code };
  }
};
window.kilnReady = true;
</script>`;

let dir, isolated, plain, browser, node;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'kiln-chat-'));
  writeFileSync(path.join(dir, 'chat.gguf'), withChatTemplate());
  writeFileSync(path.join(dir, 'chat.html'), PAGE);
  const mounts = { '/fixtures/': dir };
  isolated = await startServer({ port: 0, isolation: true, quiet: true, mounts });
  plain = await startServer({ port: 0, isolation: false, quiet: true, mounts });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  // what Node makes of the same file and messages
  const kiln = await Kiln.create({ build: 'st', logLevel: 'error' });
  try {
    const model = await kiln.loadModel(path.join(dir, 'chat.gguf'));
    const rendered = await model.applyChatTemplate(MESSAGES);
    const ids = await model.tokenize(rendered.text, { addBos: rendered.addBos, special: true });
    const reply = await model.chat(MESSAGES, OPTS);
    const plainText = (await model.complete('Once upon a time', { maxTokens: 24, temperature: 0 })).text;
    node = { rendered, ids, text: reply.text, tokens: reply.tokens, plainText };
    model.free();
  } finally { kiln.destroy(); }
});

after(async () => {
  await browser?.close();
  await isolated?.close();
  await plain?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function openChat(server) {
  const p = await browser.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  p.logs = logs;
  await p.goto(server.url + 'fixtures/chat.html');
  await p.waitForFunction(() => window.kilnReady === true, null, { timeout: 30000 });
  return p;
}

test('Node: the fixture renders through the template (the reference for the browser)', () => {
  const t = node.rendered.text;
  assert.ok(t.startsWith('<s><|system|>\nYou tell short stories.</s>\n<|user|>\nTell me a story about a cat.</s>\n'), t);
  assert.ok(t.endsWith('<|user|>\nWhat happened next?</s>\n<|assistant|>\n'), t);
  assert.equal(node.rendered.addBos, false); // the template writes BOS itself
  assert.equal(node.ids[0], 1);
  assert.ok(node.ids.filter((i) => i === 2).length === 4, 'each </s> became the EOS token');
  assert.ok(node.tokens.length > 0);
});

for (const [name, server, build] of [['cross-origin isolated (kiln-mt)', () => isolated, 'mt'], ['not isolated (kiln-st)', () => plain, 'st']]) {
  test(`browser, ${name}: model.chat renders, tokenizes and replies exactly as in Node`, async () => {
    const s = server();
    const p = await openChat(s);
    const before = s.requests.length;
    const r = await p.evaluate(([m, o]) => window.kilnChat(m, o), [MESSAGES, OPTS]);
    assert.equal(r.error, undefined, `${r.error}\n${p.logs.join('\n')}`);
    assert.equal(r.build, build);
    assert.deepEqual(r.rendered, node.rendered);
    assert.deepEqual(r.ids, node.ids);
    assert.equal(r.text, node.text);
    assert.deepEqual(r.tokens, node.tokens);
    // raise_exception in the template is a typed error in the page too
    assert.equal(r.bad?.code, 'INVALID_ARGUMENT');
    assert.match(r.bad.message, /unknown role robot/);
    // Jinja came from the package's vendored copy, by a relative URL
    const paths = s.requests.slice(before).map((q) => q.path);
    assert.ok(paths.includes('/js/dist/vendor/jinja/index.js'), paths.join(' '));
    assert.ok(!paths.some((q) => q.includes('@huggingface')), paths.join(' '));
    await p.close();
  });
}

test('browser, kiln-mt and kiln-st: loadModel(bytes) with and without {transfer: true} is the same model; only transfer detaches', async () => {
  for (const s of [isolated, plain]) {
    const p = await openChat(s);
    for (const transfer of [false, true]) {
      const r = await p.evaluate((o) => window.kilnBytes(o), { transfer });
      assert.equal(r.error, undefined, `${r.error}\n${p.logs.join('\n')}`);
      assert.equal(r.text, node.plainText);
      assert.equal(r.last, r.size);
      assert.equal(r.after, transfer ? 0 : r.size);
    }
    await p.close();
  }
});
