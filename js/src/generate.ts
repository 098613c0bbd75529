/*
 * generate.ts — text generation on a loaded model: tokenize, detokenize,
 * generate (streamed pieces), complete, chat. The work runs in the engine
 * worker (worker.ts, kw_llm_* in wasm/kiln_wasm_generate.c over the C
 * generation core kiln_gen); pieces arrive as the worker posts them, each
 * made of whole UTF-8 characters.
 */
import { KilnAbortError, KilnError, errorText } from './errors.js';
import type { Scheduler } from './scheduler.js';
import type { Completion, GenerationStats, LlmInfo, RequestMsg, StopReason, TokenLogprob } from './protocol.js';

export interface GenerateOptions {
  /** tokens to generate at most (default 256; 0: until end of text or a full context) */
  maxTokens?: number;
  /** 0: greedy (default 0.8) */
  temperature?: number;
  /** default 40; 0: off */
  topK?: number;
  /** default 0.95; 1: off */
  topP?: number;
  /** default 0.05; 0: off */
  minP?: number;
  /** default 1 (off) */
  repeatPenalty?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** how many recent tokens the penalties look at (default 64; -1: all) */
  penaltyLastN?: number;
  /** same seed, same settings, same prompt: same text (default: random) */
  seed?: number;
  /** generation ends before the first of these that appears (it is not part of the text) */
  stop?: string | string[];
  signal?: AbortSignal;
  /** add BOS as the vocabulary asks (default true) */
  addBos?: boolean;
  /** text of control tokens in the prompt becomes those tokens (default false) */
  parseSpecial?: boolean;
  /** when the context fills, drop the older half of the tokens after the first nKeep and go on,
   * the kept keys' RoPE turned instead of re-evaluated (llama.cpp's context shift); default false,
   * true for chat(); false ends with stopReason 'context' */
  contextShift?: boolean;
  /** tokens at the start a context shift keeps (default 1: BOS) */
  nKeep?: number;
  /** reuse the session's KV cache for the tokens the prompt shares with it (default true;
   * false evaluates the whole prompt, as benchmarks of prompt speed want) */
  cachePrompt?: boolean;
  /** a grammar in llama.cpp's GBNF syntax (start rule `root`): only tokens that keep the text
   * inside the grammar are sampled, and end of text only once the text is a whole sentence.
   * A bad grammar: KilnError naming the line and column */
  grammar?: string;
  /** a JSON Schema (an object or its JSON text), turned into a grammar in the engine as
   * llama.cpp's json-schema-to-grammar does: the text is JSON valid for the schema. Not with `grammar` */
  jsonSchema?: object | string;
  /** added to a token's logit before sampling; -Infinity bans it. An object maps token ids to
   * biases (OpenAI's logit_bias); a list of [id or text, bias] pairs also takes text, whose
   * tokens (tokenized without BOS) each get the bias, as llama.cpp's server does */
  logitBias?: Record<number, number> | Array<[number | string, number]>;
  /** report the log-probability of each generated token and of the N most likely tokens at its
   * position (1..64; 0: off, the default), log-softmax of the logits after bias, grammar and
   * penalties, before top-k/top-p/min-p and temperature: in Completion.logprobs and onLogprobs */
  logprobs?: number;
  /** called with each generated token's log-probabilities as it is sampled (needs logprobs > 0) */
  onLogprobs?: (entry: TokenLogprob) => void;
}

export type { Completion, GenerationStats, StopReason, TokenLogprob };

export interface ChatMessage { role: string; content: string }
export interface ChatOptions extends GenerateOptions {
  /** a Jinja chat template to use instead of the model's tokenizer.chat_template */
  template?: string;
}

/**
 * @huggingface/jinja: the copy that `npm run build:ts` puts beside this file
 * (scripts/vendor-jinja.mjs), found by a relative URL in a plain browser
 * page and by bundlers; else the package by name (Node, import maps).
 */
let jinjaModule: Promise<any> | null = null;
function loadJinja(): Promise<any> {
  jinjaModule ??= (async () => {
    try {
      // @ts-ignore: copied into js/dist/vendor/ at build time
      return await import('./vendor/jinja/index.js');
    } catch (vendored) {
      const name = '@huggingface/jinja';
      try { return await import(/* webpackIgnore: true */ /* @vite-ignore */ name); } catch (e) {
        throw new Error(`${errorText(vendored)}; ${errorText(e)}`);
      }
    }
  })();
  jinjaModule.catch(() => { jinjaModule = null; });
  return jinjaModule;
}


// the engine checks every option's range (wasm/kiln_wasm_generate.c, kiln_sampler_params_check):
// here only that a number is a number, so that nothing is coerced on the way
function num(name: string, v: unknown, def: number): number {
  if (v === undefined) return def;
  if (typeof v !== 'number') throw new KilnError('INVALID_ARGUMENT', `${name} must be a number, not ${String(v)}`);
  return v;
}

/** @internal the worker's request for a generation */
export function generateRequest(model: number, session: number, prompt: string | number[], o: GenerateOptions, stream: boolean): RequestMsg<'generate'> {
  if (typeof prompt !== 'string' && !Array.isArray(prompt)) throw new KilnError('INVALID_ARGUMENT', 'generate: the prompt must be a string or an array of token ids');
  const stop = o.stop === undefined ? [] : Array.isArray(o.stop) ? o.stop : [o.stop];
  for (const s of stop) if (typeof s !== 'string' || s.length === 0 || s.includes('\0')) throw new KilnError('INVALID_ARGUMENT', 'stop strings must be non-empty strings without NUL characters');
  if (o.grammar !== undefined && typeof o.grammar !== 'string') throw new KilnError('INVALID_ARGUMENT', `grammar must be a GBNF string, not ${typeof o.grammar}`);
  if (o.grammar !== undefined && o.jsonSchema !== undefined) throw new KilnError('INVALID_ARGUMENT', 'grammar and jsonSchema cannot both be given');
  let jsonSchema: string | undefined;
  if (o.jsonSchema !== undefined) {
    if (typeof o.jsonSchema === 'string') jsonSchema = o.jsonSchema;
    else if (o.jsonSchema !== null && typeof o.jsonSchema === 'object') {
      try { jsonSchema = JSON.stringify(o.jsonSchema); } catch (e) { throw new KilnError('INVALID_ARGUMENT', `jsonSchema cannot be written as JSON: ${errorText(e)}`); }
    } else throw new KilnError('INVALID_ARGUMENT', `jsonSchema must be an object or a JSON string, not ${o.jsonSchema === null ? 'null' : typeof o.jsonSchema}`);
  }
  for (const [name, v] of [['grammar', o.grammar], ['jsonSchema', jsonSchema]] as const) {
    if (v !== undefined && v.includes('\0')) throw new KilnError('INVALID_ARGUMENT', `${name} must not contain NUL characters`);
  }
  const logprobs = num('logprobs', o.logprobs, 0);
  if (!Number.isInteger(logprobs) || logprobs < 0 || logprobs > 64) throw new KilnError('INVALID_ARGUMENT', `logprobs must be an integer in 0..64, not ${logprobs}`);
  if (o.onLogprobs !== undefined && typeof o.onLogprobs !== 'function') throw new KilnError('INVALID_ARGUMENT', 'onLogprobs must be a function');
  return {
    t: 'generate', model, session, stream,
    grammar: o.grammar, jsonSchema, logitBias: logitBias(o.logitBias), logprobs,
    prompt: typeof prompt === 'string' ? prompt : undefined,
    promptIds: Array.isArray(prompt) ? prompt : undefined,
    maxTokens: num('maxTokens', o.maxTokens, 256),
    temperature: num('temperature', o.temperature, 0.8),
    topK: num('topK', o.topK, 40),
    topP: num('topP', o.topP, 0.95),
    minP: num('minP', o.minP, 0.05),
    repeatPenalty: num('repeatPenalty', o.repeatPenalty, 1),
    frequencyPenalty: num('frequencyPenalty', o.frequencyPenalty, 0),
    presencePenalty: num('presencePenalty', o.presencePenalty, 0),
    penaltyLastN: num('penaltyLastN', o.penaltyLastN, 64),
    seed: num('seed', o.seed, Math.floor(Math.random() * 2 ** 32)),
    stop,
    addBos: o.addBos !== false,
    parseSpecial: !!o.parseSpecial,
    contextShift: !!o.contextShift,
    nKeep: num('nKeep', o.nKeep, 1),
    cachePrompt: o.cachePrompt !== false,
  };
}

// logitBias as [id or text, bias] pairs; ids and texts are checked here, texts tokenized in the worker
function logitBias(b: GenerateOptions['logitBias']): Array<[number | string, number]> {
  if (b === undefined) return [];
  const bad = (what: string) => new KilnError('INVALID_ARGUMENT', `logitBias: ${what}`);
  let pairs: Array<[unknown, unknown]>;
  if (Array.isArray(b)) {
    pairs = b.map((e, i) => {
      if (!Array.isArray(e) || e.length !== 2) throw bad(`entry ${i} must be a pair [token id or text, bias]`);
      return [e[0], e[1]];
    });
  } else if (b !== null && typeof b === 'object') {
    pairs = Object.entries(b).map(([k, v]) => {
      if (!/^(0|[1-9][0-9]*)$/.test(k)) throw bad(`the key "${k}" is not a token id (text goes in a list of [text, bias] pairs)`);
      return [Number(k), v];
    });
  } else throw bad('must be an object {tokenId: bias} or a list of [token id or text, bias] pairs');
  return pairs.map(([k, v]) => {
    if (typeof k === 'number') {
      if (!Number.isInteger(k) || k < 0 || k > 2147483647) throw bad(`${k} is not a token id`);
    } else if (typeof k === 'string') {
      if (k.length === 0 || k.includes('\0')) throw bad('a text must be non-empty, without NUL characters');
    } else throw bad(`${String(k)} is neither a token id nor a text`);
    if (typeof v !== 'number' || Number.isNaN(v) || v === Infinity) throw bad(`the bias of ${JSON.stringify(k)} must be a number or -Infinity, not ${String(v)}`);
    return [k, v];
  });
}

let nextSession = 1;

/** A conversation with its own KV cache over the model's weights (model.session()):
 * a prompt that starts with what the cache holds evaluates only the rest. */
export interface Session {
  /** stats of the last finished generate() / complete() */
  readonly lastStats: GenerationStats | null;
  generate(prompt: string | number[], opts?: GenerateOptions): AsyncGenerator<string, Completion | undefined>;
  complete(prompt: string | number[], opts?: GenerateOptions): Promise<Completion>;
  chat(messages: ChatMessage[], opts?: ChatOptions): Promise<Completion>;
  /** the ids the cache holds and the cache itself, as bytes for loadState() (kiln_gen_state_save's format, version 1) */
  saveState(): Promise<Uint8Array>;
  loadState(bytes: Uint8Array): Promise<void>;
  /** give back this session's KV cache */
  free(): void;
}

/** @internal Text generation bound to one model of one engine (used by Model in kiln.ts)
 * and one session: a KV cache and the record of the token ids it holds, so
 * that a prompt starting with what the cache holds evaluates only the rest.
 * session 0 is the model's default; newSession() makes an independent one. */
export class TextGen implements Session {
  private info: LlmInfo | null = null;
  private freed = false;
  /** stats of the last finished generate() / complete() */
  lastStats: GenerationStats | null = null;

  constructor(private sched: Scheduler, private model: number, private session = 0) {}

  /** a session with its own KV cache over the same weights */
  newSession(): TextGen { return new TextGen(this.sched, this.model, nextSession++); }

  /** give back this session's KV cache (the default session goes with the model) */
  free(): void {
    if (this.freed || this.session === 0) return;
    this.freed = true;
    this.sched.send({ t: 'freeSession', model: this.model, session: this.session });
  }

  /** the ids this session's KV cache holds and the cache itself, as bytes to keep (OPFS,
   * IndexedDB) and give to loadState() later, on this model loaded again; format in
   * src/include/kiln-llama.h (kiln_gen_state_save), version 1 */
  async saveState(): Promise<Uint8Array> {
    if (this.freed) throw new KilnError('INVALID_HANDLE', 'the session was freed');
    const r = await this.sched.job({ t: 'saveState', model: this.model, session: this.session });
    return new Uint8Array(r.buffer);
  }

  /** a saved state back into this session: a prompt that starts with its ids evaluates only the
   * rest. Another model's, another version's or truncated bytes: KilnError, the session unchanged */
  async loadState(bytes: Uint8Array): Promise<void> {
    if (this.freed) throw new KilnError('INVALID_HANDLE', 'the session was freed');
    if (!(bytes instanceof Uint8Array)) throw new KilnError('INVALID_ARGUMENT', 'loadState: the state must be a Uint8Array');
    const buffer = bytes.slice().buffer;
    await this.sched.job({ t: 'loadState', model: this.model, session: this.session, buffer }, { transfer: [buffer] });
  }

  /** @internal the logits of this session's last evaluated position (tests compare logprobs with them) */
  async lastLogits(): Promise<Float32Array> {
    if (this.freed) throw new KilnError('INVALID_HANDLE', 'the session was freed');
    return new Float32Array((await this.sched.job({ t: 'lastLogits', model: this.model, session: this.session })).buffer);
  }

  private request(prompt: string | number[], opts: GenerateOptions, stream: boolean): RequestMsg<'generate'> {
    if (this.freed) throw new KilnError('INVALID_HANDLE', 'the session was freed');
    return generateRequest(this.model, this.session, prompt, opts, stream);
  }

  async tokenize(text: string, opts: { addBos?: boolean; special?: boolean } = {}): Promise<number[]> {
    if (typeof text !== 'string') throw new KilnError('INVALID_ARGUMENT', 'tokenize: the text must be a string');
    return this.sched.job({ t: 'tokenize', model: this.model, text, addBos: opts.addBos !== false, special: !!opts.special });
  }

  async detokenize(ids: ArrayLike<number>, opts: { removeSpecial?: boolean; unparseSpecial?: boolean } = {}): Promise<string> {
    if (!ids || typeof ids.length !== 'number') throw new KilnError('INVALID_ARGUMENT', 'detokenize: ids must be an array of token ids');
    return this.sched.job({ t: 'detokenize', model: this.model, ids: Array.from(ids), removeSpecial: !!opts.removeSpecial, unparseSpecial: !!opts.unparseSpecial });
  }

  async tokenToPiece(token: number, opts: { special?: boolean } = {}): Promise<string> {
    return this.sched.job({ t: 'tokenPiece', model: this.model, token, special: !!opts.special });
  }

  /** a GGUF metadata value as text, null when absent */
  async meta(key: string): Promise<string | null> {
    return this.sched.job({ t: 'meta', model: this.model, key: String(key) });
  }

  async llmInfo(): Promise<LlmInfo> {
    if (!this.info) this.info = await this.sched.job({ t: 'llmInfo', model: this.model });
    return this.info;
  }

  /** generated text as it comes, in pieces of whole characters */
  async *generate(prompt: string | number[], opts: GenerateOptions = {}): AsyncGenerator<string, Completion | undefined> {
    const req = this.request(prompt, opts, true);
    if (opts.signal?.aborted) throw new KilnAbortError();
    // our own controller: a consumer that stops iterating cancels the job
    const ctl = new AbortController();
    const onAbort = () => ctl.abort();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    const queue: string[] = [];
    let wake: (() => void) | null = null;
    let finished = false;
    let error: unknown = null;
    let result: Completion | undefined;
    const p = this.sched.job(req, { signal: ctl.signal, onPiece: (t, lp) => { if (lp) this.logprobsOut(opts, lp); if (t) { queue.push(t); wake?.(); } } });
    p.then((r) => { result = r; finished = true; wake?.(); }, (e) => { error = e; finished = true; wake?.(); });
    try {
      for (;;) {
        // nothing more after an abort, even pieces already here
        if (opts.signal?.aborted) throw new KilnAbortError();
        if (queue.length > 0) { yield queue.shift()!; continue; }
        if (finished) {
          if (error) throw error;
          if (result) this.lastStats = result.stats;
          return result;
        }
        await new Promise<void>((r) => { wake = r; });
        wake = null;
      }
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
      if (!finished) { ctl.abort(); await p.catch(() => undefined); }
    }
  }

  /** the whole generation at once, with token ids and speed */
  async complete(prompt: string | number[], opts: GenerateOptions = {}): Promise<Completion> {
    const onPiece = opts.onLogprobs ? (_t: string, lp?: TokenLogprob[]) => { if (lp) this.logprobsOut(opts, lp); } : undefined;
    const r = await this.sched.job(this.request(prompt, opts, false), { signal: opts.signal, onPiece });
    this.lastStats = r.stats;
    return r;
  }

  private logprobsOut(opts: GenerateOptions, lp: TokenLogprob[]) {
    for (const e of lp) opts.onLogprobs?.(e);
  }

  /** the messages as the model's chat template renders them (with the assistant's turn opened) */
  async applyChatTemplate(messages: ChatMessage[], template?: string): Promise<{ text: string; stop: string[]; addBos: boolean }> {
    if (!Array.isArray(messages) || messages.some((m) => !m || typeof m.role !== 'string' || typeof m.content !== 'string')) {
      throw new KilnError('INVALID_ARGUMENT', 'chat: messages must be an array of {role, content} strings');
    }
    const info = await this.llmInfo();
    const tpl = template ?? await this.meta('tokenizer.chat_template');
    if (!tpl) {
      // no template in the file: ChatML, which many small models were tuned on
      const text = messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join('') + '<|im_start|>assistant\n';
      return { text, stop: ['<|im_end|>', '<|im_start|>'], addBos: true };
    }
    // llama.cpp's built-in templates (src/models/chat_template.c): a name
    // such as 'chatml', 'llama3', 'gemma', 'phi3' given as the template, or
    // the family of the file's template where no Jinja engine can be loaded
    const builtin = async (t: string | null) => {
      if (messages.some((m) => m.role.includes('\0') || m.content.includes('\0'))) {
        throw new KilnError('INVALID_ARGUMENT', 'chat: a message contains a NUL character');
      }
      const text = await this.sched.job({ t: 'chatBuiltin', model: this.model, messages: messages.map((m) => ({ role: m.role, content: m.content })), template: t });
      return { text, stop: [], addBos: !(info.bosText && text.startsWith(info.bosText)) };
    };
    if (!tpl.includes('{{') && !tpl.includes('{%')) return builtin(tpl);
    let jinja: any;
    try { jinja = await loadJinja(); } catch (e) {
      try { return await builtin(tpl); } catch {
        throw new KilnError('UNSUPPORTED', `chat: the model's chat template needs the package @huggingface/jinja, which cannot be loaded here (${errorText(e)}), and is none of the built-in templates`);
      }
    }
    let text: string;
    try {
      text = new jinja.Template(tpl).render({ messages, add_generation_prompt: true, bos_token: info.bosText, eos_token: info.eosText });
    } catch (e) {
      throw new KilnError('INVALID_ARGUMENT', `chat: the chat template failed: ${errorText(e)}`);
    }
    // the template usually writes BOS itself
    return { text, stop: [], addBos: !(info.bosText && text.startsWith(info.bosText)) };
  }

  /** reply to a conversation: the chat template applied, then complete() */
  async chat(messages: ChatMessage[], opts: ChatOptions = {}): Promise<Completion> {
    const { template, ...rest } = opts;
    const c = await this.applyChatTemplate(messages, template);
    const stop = [...c.stop, ...(rest.stop === undefined ? [] : Array.isArray(rest.stop) ? rest.stop : [rest.stop])];
    return this.complete(c.text, { addBos: c.addBos, parseSpecial: true, contextShift: true, ...rest, stop });
  }
}
