// The demo's Generate page (web-demo/index.html), a chat, in Chromium, cross-origin
// isolated (kiln-mt): a three-turn conversation keeps its KV cache (each
// turn's "cached" count equals the longest common prefix of its prompt with
// what the cache holds, computed here in Node), every reply equals a fresh
// session's reply to the same conversation in Node, token for token; JSON
// mode replies parse and ajv validates them against the page's schema; and a
// reload restores the session state from IndexedDB so that the third turn
// continues with the same cached count and the same greedy reply as without
// the reload. Stop ends a turn midway: nothing of it is kept but the cache,
// and the next turn goes on.
// Run: node --test --test-concurrency=1 tests/e2e/  (scripts/test-e2e.sh)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { startServer } from '../../web-demo/server.mjs';
import { Kiln } from '../../js/dist/index.js';
import { ROOT, launchChromium } from './shared.mjs';

const USER = ['Tell me a story.', 'What did the cat do?', 'And then?'];
const MAX_TOKENS = 48; // set on the page by the tests
// the page's other sampling defaults (index.html)
const PAGE_OPTS = { maxTokens: MAX_TOKENS, temperature: 0, topK: 40, topP: 0.95, seed: 42 };

let server, browser, node;

/** what the page does for a turn, in Node on a fresh session: the reply, and the ids the page's cache then holds */
async function nodeTurns(model) {
  const messages = [], turns = [];
  let cache = [];
  for (const u of USER) {
    messages.push({ role: 'user', content: u });
    const t = await model.applyChatTemplate(messages);
    const ids = await model.tokenize(t.text, { addBos: t.addBos, special: true });
    const s = model.session();
    const r = await s.complete(t.text, { ...PAGE_OPTS, addBos: t.addBos, parseSpecial: true, stop: t.stop, contextShift: true });
    s.free();
    let lcp = 0;
    while (lcp < cache.length && lcp < ids.length - 1 && cache[lcp] === ids[lcp]) lcp++;
    turns.push({ text: r.text, tokens: r.tokens, promptTokens: ids.length, cached: lcp });
    // the reply's last token is evaluated only when an end-of-text token followed it
    cache = [...ids, ...(r.stopReason === 'eos' ? r.tokens : r.tokens.slice(0, -1))];
    messages.push({ role: 'assistant', content: r.text });
  }
  return turns;
}

before(async () => {
  server = await startServer({ port: 0, isolation: true, quiet: true });
  browser = await launchChromium();
  const kiln = await Kiln.create({ build: 'st', logLevel: 'error' });
  try {
    const model = await kiln.loadModel(path.join(ROOT, 'models/stories260K.gguf'));
    node = await nodeTurns(model);
    model.free();
  } finally { kiln.destroy(); }
});

after(async () => {
  await browser?.close();
  await server?.close();
});

/** the page's model is loaded (and a saved conversation restored) */
async function waitReady(p) {
  await p.waitForFunction(() => window.__kilnDemo?.loaded || window.__kilnDemo?.lastError, null, { timeout: 60000 });
  assert.equal(await p.evaluate(() => window.__kilnDemo.lastError), '', p.logs.join('\n'));
}

async function openChat(ctx) {
  const p = await ctx.newPage();
  const logs = [];
  p.on('console', (m) => logs.push(`${m.type()}: ${m.text()}`));
  p.on('pageerror', (e) => logs.push(`pageerror: ${e.message}`));
  p.logs = logs;
  await p.goto(server.url + 'index.html');
  await waitReady(p);
  await p.fill('[data-testid=max-tokens]', String(MAX_TOKENS));
  return p;
}

async function turn(p, text) {
  const n = await p.evaluate(() => window.__kilnDemo.turns.length);
  await p.fill('[data-testid=prompt]', text);
  await p.click('[data-testid=generate]');
  // a turn is over when the page is no longer busy (its state saved to IndexedDB)
  await p.waitForFunction((k) => (window.__kilnDemo.turns.length > k && !window.__kilnDemo.busy) || window.__kilnDemo.lastError, n, { timeout: 60000 });
  const r = await p.evaluate(() => ({ error: window.__kilnDemo.lastError, turn: window.__kilnDemo.turns.at(-1) }));
  assert.equal(r.error, '', p.logs.join('\n'));
  // the page shows what it measured
  const shown = await p.locator('[data-testid=turn-stats]').last().textContent();
  assert.match(shown, new RegExp(`cached ${r.turn.stats.cachedTokens} `));
  return r.turn;
}

test('Generate page (chat): three turns reuse the KV cache; replies equal a fresh session\'s in Node', async () => {
  const ctx = await browser.newContext();
  const p = await openChat(ctx);
  assert.equal(await p.evaluate(() => window.__kilnDemo.restored), null);
  for (let k = 0; k < USER.length; k++) {
    const t = await turn(p, USER[k]);
    assert.equal(t.text, node[k].text, `turn ${k + 1}`);
    assert.deepEqual(t.tokens, node[k].tokens, `turn ${k + 1}`);
    assert.equal(t.stats.promptTokens, node[k].promptTokens);
    assert.equal(t.stats.cachedTokens, node[k].cached, `turn ${k + 1} cached`);
    if (k > 0) assert.ok(t.stats.cachedTokens >= node[k - 1].promptTokens, `turn ${k + 1} reuses the previous prompt`);
  }
  await p.screenshot({ path: path.join(ROOT, 'test-artifacts', 'chat.png'), fullPage: true });
  console.log(`# chat page: cached ${node.map((t) => `${t.cached}/${t.promptTokens}`).join(', ')} (cached/prompt tokens per turn)`);
  await ctx.close();
});

test('Generate page (chat): JSON mode replies parse and validate against the schema in the box', async () => {
  const ctx = await browser.newContext();
  const p = await openChat(ctx);
  await p.check('[data-testid=json-mode]');
  const schema = JSON.parse(await p.inputValue('[data-testid=json-schema]'));
  const validate = new Ajv2020({ strict: false }).compile(schema);
  for (const u of ['Who is the hero?', 'Another one, please.']) {
    const t = await turn(p, u);
    assert.equal(t.stopReason, 'eos', t.text);
    const value = JSON.parse(t.text);
    assert.ok(validate(value), `${t.text} ${JSON.stringify(validate.errors)}`);
  }
  // a schema that is not JSON: the page says so and sends nothing
  await p.fill('[data-testid=json-schema]', '{ nope');
  await p.fill('[data-testid=prompt]', 'x');
  await p.click('[data-testid=generate]');
  assert.match(await p.textContent('[data-testid=note]'), /not JSON/);
  assert.equal(await p.evaluate(() => window.__kilnDemo.turns.length), 2);
  await ctx.close();
});

test('Generate page (chat): saveState to IndexedDB, reload, loadState: the third turn is cached and the same as without the reload', async () => {
  const ctx = await browser.newContext();
  let p = await openChat(ctx);
  for (let k = 0; k < 2; k++) assert.equal((await turn(p, USER[k])).text, node[k].text);
  const saved = await p.evaluate(() => window.__kilnDemo.savedBytes);
  assert.ok(saved > 0);
  await p.reload();
  await waitReady(p);
  assert.deepEqual(await p.evaluate(() => window.__kilnDemo.restored), { messages: 4, bytes: saved });
  assert.equal(await p.locator('[data-testid=chat-log] .msg').count(), 4);
  assert.equal(await p.inputValue('[data-testid=format]'), 'chat');
  await p.fill('[data-testid=max-tokens]', String(MAX_TOKENS));
  const t = await turn(p, USER[2]);
  assert.equal(t.stats.cachedTokens, node[2].cached);
  assert.ok(t.stats.cachedTokens >= node[1].promptTokens);
  assert.equal(t.text, node[2].text);
  assert.deepEqual(t.tokens, node[2].tokens);
  // "New chat" forgets it: a reload starts empty
  await p.click('[data-testid=new-chat]');
  await p.waitForFunction(() => window.__kilnDemo.resets === 1);
  await p.reload();
  await waitReady(p);
  assert.equal(await p.evaluate(() => window.__kilnDemo.restored), null);
  await ctx.close();
});

test('Generate page (chat): Stop ends a turn midway; the message returns to the box and the next turn works', async () => {
  const ctx = await browser.newContext();
  const p = await openChat(ctx);
  await p.fill('[data-testid=max-tokens]', '400');
  // the test's hook clicks Stop once the reply has a few characters
  await p.evaluate(() => {
    window.__kilnDemo.onPiece = (text) => {
      if (text.length >= 8 && !window.__stopClicked) { window.__stopClicked = true; document.querySelector('[data-testid=stop]').click(); }
    };
  });
  await p.fill('[data-testid=prompt]', USER[0]);
  await p.click('[data-testid=generate]');
  await p.waitForFunction(() => window.__kilnDemo.stopped === 1 && !window.__kilnDemo.busy, null, { timeout: 60000 });
  assert.equal(await p.textContent('[data-testid=note]'), 'stopped');
  assert.equal(await p.evaluate(() => window.__kilnDemo.turns.length), 0);
  assert.equal(await p.inputValue('[data-testid=prompt]'), USER[0]);
  assert.equal(await p.locator('[data-testid=chat-log] .msg').count(), 0);
  await p.evaluate(() => { window.__kilnDemo.onPiece = null; });
  await p.fill('[data-testid=max-tokens]', String(MAX_TOKENS));
  const t = await turn(p, USER[0]);
  // the same reply as a fresh session's; the prompt was cached from the stopped turn
  assert.deepEqual(t.tokens, node[0].tokens);
  assert.equal(t.stats.cachedTokens, node[0].promptTokens - 1);
  await ctx.close();
});
