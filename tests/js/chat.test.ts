// model.chat() through a GGUF tokenizer.chat_template (stories260K with the
// key added by scripts/make-chat-gguf.mjs), st and mt: bos_token/eos_token
// render as the vocabulary's texts, the rendered prompt tokenizes with
// control tokens, the reply is the greedy completion of that prompt.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Kiln, Model } from '../../js/dist/index.js';
// @ts-ignore: a plain .mjs fixture script
import { withChatTemplate } from '../../scripts/make-chat-gguf.mjs';
import { BUILDS, engine } from './helpers.js';

const MESSAGES = [{ role: 'user', content: ' Tell me a story. ' }];

describe.each(BUILDS)('chat templates (%s)', (build) => {
  let kiln: Kiln;
  let model: Model;
  beforeAll(async () => {
    kiln = await engine(build, build === 'mt' ? 2 : 1);
    model = await kiln.loadModel(withChatTemplate() as Uint8Array);
  });
  afterAll(() => { model?.free(); kiln?.destroy(); });

  it('renders the file\'s template with the vocabulary\'s BOS/EOS texts', async () => {
    expect(String(model.metadata['tokenizer.chat_template'])).toMatch(/^\{\{ bos_token \}\}/);
    const r = await model.applyChatTemplate(MESSAGES);
    expect(r.text).toBe('<s><|system|>\nYou tell short stories.</s>\n<|user|>\nTell me a story.</s>\n<|assistant|>\n');
    expect(r.addBos).toBe(false);
    const ids = await model.tokenize(r.text, { addBos: r.addBos, special: true });
    expect(ids[0]).toBe(1);
    expect(ids.filter((i) => i === 2).length).toBe(2);
  });

  it('chat() = complete() of the rendered prompt; a template error is INVALID_ARGUMENT; options.template wins', async () => {
    const opts = { maxTokens: 16, temperature: 0 };
    const r = await model.chat(MESSAGES, opts);
    const t = await model.applyChatTemplate(MESSAGES);
    const c = await model.complete(t.text, { ...opts, addBos: t.addBos, parseSpecial: true });
    expect(r.text).toBe(c.text);
    expect(r.tokens).toEqual(c.tokens);
    await expect(model.chat([{ role: 'robot', content: 'x' }], opts)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/unknown role robot/) });
    const own = await model.applyChatTemplate(MESSAGES, '{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}{{ eos_token }}');
    expect(own.text).toBe('[user]  Tell me a story. </s>');
    expect(own.addBos).toBe(true);
  });
});
