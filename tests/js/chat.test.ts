// model.chat() through a GGUF tokenizer.chat_template (stories260K with the
// key added by scripts/make-chat-gguf.mjs), st and mt: bos_token/eos_token
// render as the vocabulary's texts, the rendered prompt tokenizes with
// control tokens, the reply is the greedy completion of that prompt.
import { readFileSync } from 'node:fs';
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

  it('built-in templates by name render as the models\' own Jinja templates of those families (minus the BOS they write)', async () => {
    const conv = [{ role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi there' }, { role: 'user', content: 'Who are you?' }];
    const file = (f: string) => readFileSync(new URL(`../data/chat-templates/${f}`, import.meta.url), 'utf8');
    for (const [name, f, msgs] of [
      ['gemma', 'google-gemma-2-2b-it.jinja', conv],
      ['phi3', 'microsoft-Phi-3.5-mini-instruct.jinja', [{ role: 'system', content: 'Be brief.' }, ...conv]],
      ['chatml', 'Qwen-Qwen2.5-7B-Instruct.jinja', [{ role: 'system', content: 'Be brief.' }, ...conv]],
    ] as const) {
      const jinja = await model.applyChatTemplate([...msgs], file(f));
      const builtin = await model.applyChatTemplate([...msgs], name);
      expect(builtin.text, name).toBe(jinja.text.replace(/^<s>/, ''));
      expect(builtin.addBos).toBe(true);
    }
    await expect(model.applyChatTemplate(MESSAGES, 'no-such-template')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', message: expect.stringMatching(/built-in/) });
  });
});
