#!/usr/bin/env node
// kiln — the package's command line.
//   kiln generate -m FILE -p PROMPT [-n N --temp T --top-k K --top-p P --min-p P
//                 --repeat-penalty R --seed S --threads N --ctx N --stop STR]
// stdout carries the prompt followed by the generated text and nothing else;
// timings go to stderr.
import { Kiln, KilnError } from '../js/dist/index.js';

const USAGE = `usage: kiln generate -m FILE -p PROMPT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
                     [--repeat-penalty R] [--seed S] [--threads N] [--ctx N] [--stop STR]...`;

function die(msg, code = 1) {
  process.stderr.write(`kiln: ${msg}\n`);
  process.exit(code);
}

function parse(argv) {
  const o = { stop: [] };
  const num = (flag, v, int) => {
    const x = Number(v);
    if (v === undefined || !Number.isFinite(x) || (int && !Number.isInteger(x))) die(`${flag} needs ${int ? 'an integer' : 'a number'}, not ${v ?? 'nothing'}`);
    return x;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    const take = () => { i++; return v; };
    switch (a) {
      case '-m': case '--model': o.model = take(); break;
      case '-p': case '--prompt': o.prompt = take(); break;
      case '-n': case '--n-predict': o.maxTokens = num(a, take(), true); break;
      case '--temp': o.temperature = num(a, take()); break;
      case '--top-k': o.topK = num(a, take(), true); break;
      case '--top-p': o.topP = num(a, take()); break;
      case '--min-p': o.minP = num(a, take()); break;
      case '--repeat-penalty': o.repeatPenalty = num(a, take()); break;
      case '--seed': o.seed = num(a, take(), true); break;
      case '-t': case '--threads': o.threads = num(a, take(), true); break;
      case '-c': case '--ctx': o.nCtx = num(a, take(), true); break;
      case '--stop': o.stop.push(take()); break;
      case '-h': case '--help': process.stdout.write(USAGE + '\n'); process.exit(0); break;
      default: die(`unknown argument ${a}\n${USAGE}`, 2);
    }
  }
  return o;
}

async function main() {
  const [cmd, ...rest] = process.argv.slice(2);
  if (cmd === '-h' || cmd === '--help') { process.stdout.write(USAGE + '\n'); return; }
  if (cmd !== 'generate') die(`${cmd ? `unknown command ${cmd}` : 'no command'}\n${USAGE}`, 2);
  const o = parse(rest);
  if (!o.model) die(`-m FILE is required\n${USAGE}`, 2);
  if (o.prompt === undefined) die(`-p PROMPT is required\n${USAGE}`, 2);
  const kiln = await Kiln.create({ threads: o.threads, build: o.threads === 1 ? 'st' : undefined, logLevel: 'error' });
  try {
    const model = await kiln.loadModel(o.model, { nCtx: o.nCtx });
    process.stdout.write(o.prompt);
    const opts = { maxTokens: o.maxTokens, temperature: o.temperature, topK: o.topK, topP: o.topP, minP: o.minP,
      repeatPenalty: o.repeatPenalty, seed: o.seed, stop: o.stop };
    for (const k of Object.keys(opts)) if (opts[k] === undefined) delete opts[k];
    for await (const piece of model.generate(o.prompt, opts)) process.stdout.write(piece);
    process.stdout.write('\n');
    const s = model.lastStats;
    const info = kiln.info();
    if (s) {
      process.stderr.write(`kiln (${info.build}, ${info.threads} thread${info.threads > 1 ? 's' : ''}): prompt ${s.promptTokens} tokens, ` +
        `${s.promptTokensPerSecond.toFixed(1)} tok/s; generated ${s.generatedTokens} tokens, ${s.tokensPerSecond.toFixed(1)} tok/s\n`);
    }
    model.free();
  } finally {
    kiln.destroy();
  }
}

main().catch((e) => die(e instanceof KilnError ? `${e.code}: ${e.message}` : String(e?.stack ?? e)));
