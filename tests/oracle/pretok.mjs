// Byte-level BPE pre-tokenizers (tokenizer.ggml.pre) against llama.cpp's
// tokenizer (node-llama-cpp 3.21.1, vocabulary-only loads): for every
// pre-tokenizer name Kiln accepts, the same vocabulary file with that name
// written into tokenizer.ggml.pre is tokenized by kiln-tokenize and by
// llama.cpp, and the ids must be equal, string for string.
//
// Two vocabularies:
//  - GPT-2's real one (tests/data/vocab/ggml-vocab-gpt-2.gguf), over
//    llama.cpp's own tokenizer test strings (its .inp file), adversarial text
//    (digit runs, contractions in both cases, CJK, emoji, combining marks,
//    whitespace runs of every kind) and seeded random strings;
//  - a synthetic one that shows where the words were cut: every string of up
//    to 3 characters of a small alphabet (lower and upper case ASCII, É, 中,
//    an apostrophe and 's', an ASCII and an Arabic-Indic digit, space, CR,
//    LF, tab, NBSP, '!', '/', a combining accent) is one token, reachable by
//    merges, so a word of up to 3 characters becomes one token and a cut
//    inside it two; over all 4096 strings of 3 of those characters and
//    seeded random strings of a wider alphabet.
// A name Kiln does not implement must be refused at load, naming it.
//
//   node tests/oracle/pretok.mjs [--build DIR] [--pre gpt-4o,qwen2]
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { loadOracleLlama } from "./llamacpp.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const opt = (k, d) => (args.includes(`--${k}`) ? args[args.indexOf(`--${k}`) + 1] : d);
const buildDir = path.resolve(opt("build", path.join(root, "build")));
const outDir = path.join(buildDir, "oracle-pretok");
const SEP = "\n__ggml_vocab_test__\n";

// every name in Kiln's table (src/models/tokenizer.c), as llama.cpp spells them
const PRE_NAMES = [
    "default", "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
    "deepseek-llm", "deepseek-coder", "falcon", "mpt", "starcoder", "gpt-2", "phi-2", "olmo", "jais", "exaone4",
    "trillion", "granite-docling", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b",
    "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "solar-open", "grok-2", "dbrx", "smaug-bpe",
    "gpt-4o", "llama4", "minimax-m2",
];
const only = opt("pre", null)?.split(",");

// ---- GGUF (vocabulary-only files: no tensors) read and written back with some keys replaced

const GT = { U8: 0, I8: 1, U16: 2, I16: 3, U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9, U64: 10, I64: 11, F64: 12 };
const SCALAR_SIZE = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

/** the key/value pairs of a tensor-less GGUF as [key, raw value bytes with its type] */
function readKv(file) {
    const b = readFileSync(file);
    if (b.readUInt32LE(0) !== 0x46554747 || b.readUInt32LE(4) !== 3) throw new Error(`${file}: not a GGUF v3 file`);
    if (b.readBigUInt64LE(8) !== 0n) throw new Error(`${file}: has tensors (a vocabulary-only file is expected)`);
    const n = Number(b.readBigUInt64LE(16));
    let o = 24;
    const str = () => { const l = Number(b.readBigUInt64LE(o)); o += 8 + l; return b.subarray(o - l, o).toString("utf8"); };
    const skip = (t) => {
        if (t === GT.STR) str();
        else if (t === GT.ARR) {
            const et = b.readUInt32LE(o), len = Number(b.readBigUInt64LE(o + 4));
            o += 12;
            for (let i = 0; i < len; i++) skip(et);
        } else o += SCALAR_SIZE[t];
    };
    const kv = [];
    for (let i = 0; i < n; i++) {
        const key = str();
        const start = o;
        const type = b.readUInt32LE(o);
        o += 4;
        skip(type);
        kv.push([key, b.subarray(start, o)]);
    }
    return kv;
}

const u32 = (x) => { const v = Buffer.alloc(4); v.writeUInt32LE(x); return v; };
const u64 = (x) => { const v = Buffer.alloc(8); v.writeBigUInt64LE(BigInt(x)); return v; };
const gstr = (s) => { const t = Buffer.from(s, "utf8"); return Buffer.concat([u64(t.length), t]); };
const vStr = (s) => Buffer.concat([u32(GT.STR), gstr(s)]);
const vU32 = (x) => Buffer.concat([u32(GT.U32), u32(x)]);
const vStrArr = (a) => Buffer.concat([u32(GT.ARR), u32(GT.STR), u64(a.length), ...a.map(gstr)]);
const vI32Arr = (a) => { const t = Buffer.alloc(4 * a.length); a.forEach((x, i) => t.writeInt32LE(x, 4 * i)); return Buffer.concat([u32(GT.ARR), u32(GT.I32), u64(a.length), t]); };

/** write kv (with `set` replacing or adding values) as a tensor-less GGUF v3 */
function writeKv(file, kv, set) {
    const m = new Map(kv);
    for (const [k, v] of Object.entries(set)) m.set(k, v);
    const parts = [u32(0x46554747), u32(3), u64(0), u64(m.size)];
    for (const [k, v] of m) parts.push(gstr(k), v);
    let out = Buffer.concat(parts);
    out = Buffer.concat([out, Buffer.alloc((32 - (out.length % 32)) % 32)]);
    writeFileSync(file, out);
}

// ---- GPT-2's byte <-> symbol mapping (the byte-level BPE alphabet)

const BYTE_SYM = (() => {
    const keep = [];
    for (let c = 0x21; c <= 0x7e; c++) keep.push(c);
    for (let c = 0xa1; c <= 0xac; c++) keep.push(c);
    for (let c = 0xae; c <= 0xff; c++) keep.push(c);
    const map = new Array(256);
    let extra = 0;
    for (let b = 0; b < 256; b++) map[b] = String.fromCodePoint(keep.includes(b) ? b : 256 + extra++);
    return map;
})();
const symbols = (s) => [...Buffer.from(s, "utf8")].map((b) => BYTE_SYM[b]);

// ---- the strings

const ALPHABET = ["a", "b", "s", "t", "A", "B", "S", "'", "1", "2", "!", ".", "/", " ", " ", "\t", "\r", "\n", "\u00a0", "É", "é", "中", "\u0663", "\u0301"];
function mulberry32(seed) {
    return () => {
        seed = (seed + 0x6d2b79f5) | 0;
        let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
        t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
function randomStrings(seed, n, alphabet, maxLen) {
    const r = mulberry32(seed);
    const out = [];
    for (let i = 0; i < n; i++) {
        const len = 1 + Math.floor(r() * maxLen);
        let s = "";
        for (let k = 0; k < len; k++) s += alphabet[Math.floor(r() * alphabet.length)];
        out.push(s);
    }
    return out;
}
// words and pieces of real text, to make random strings that look like text
const PIECES = [...ALPHABET, "Hello", "WORLD", "HeLLo", "don't", "I'M", "we'RE", "you'll", "'s", "'Ve", "12345", "1234567", "3.14",
    "ÉCOLE", "Ñandú", "straße", "ΣΊΣΥΦΟΣ", "Привет", "日本語", "한국어", "🦙", "😀👍🏽", "x²", "½", "Ⅻ", "٣٤٥", "e\u0301",
    "  ", "\n\n", "\r\n", " \n ", "\t\t", "   \n", "\u3000", "!!", "...", "//", "#include", "<tag>", "a_b", "$100", "—", "…"];
const ADVERSARIAL = [
    "1", "12", "123", "1234", "12345", "123456", "1234567", "3.14159 2,718 1e-9 0x1F", "٣٤٥٦ ١٢٣٤ 12٣4",
    "don't DON'T Don'T we're WE'RE they've I'm I'M you'll YOU'LL he'd 'tis 's 'S ''s",
    "HELLOworld HeLLo helloWORLD hello_World ÉCOLE École éCOLE ÉcOLE", "Ñandú straße STRASSE ΣΊΣΥΦΟΣ σίσυφος Привет ПРИВЕТ",
    "日本語のテキスト、中文，한국어 中文abc ABC中D 中A", "e\u0301 E\u0301 a\u0301\u0301b \u0301x", "🦙🦙 😀👍🏽 👨‍👩‍👧 🇺🇸 a🦙b",
    " ", "  ", "   ", "\t", "\t\t x", "\n", "\n\n", "\r\n", "\r\n\r\n", " \n", "\n ", " \n \n x", "a \n\tb", "a\u00a0b \u00a0\u00a0c",
    "\u3000x\u3000\u3000y", "x\u2028y\u2029z", "end   ", "   start", "!!\n/x", "a/b//c\n/d", "  !x", " !x", "\t!x", "$+<=>^~|` ",
    "<|endoftext|>", "__init__.py", "http://example.com/a?b=c&d=e#f", "func(x, y) { return x->y; }",
];

// ---- the two engines

function kilnTokenize(file, strings) {
    const r = spawnSync(path.join(buildDir, "bin", "kiln-tokenize"), ["-m", file, "--no-bos", "--each", SEP],
        { input: strings.join(SEP), encoding: "utf8", maxBuffer: 256 << 20 });
    if (r.status !== 0) return { error: r.stderr.trim() || `exit ${r.status}` };
    const lines = r.stdout.split("\n");
    return { ids: strings.map((_, i) => (lines[i] ? lines[i].split(" ").map(Number) : [])) };
}

mkdirSync(outDir, { recursive: true });
const llama = await loadOracleLlama();
let passed = 0, failed = 0;
function check(ok, name, detail = "") {
    ok ? passed++ : failed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${name}${detail ? "  " + detail : ""}`);
}

async function compareOn(vocabName, file, strings) {
    const lm = await llama.loadModel({ modelPath: file, vocabOnly: true });
    const k = kilnTokenize(file, strings);
    if (k.error) {
        check(false, `${vocabName}: kiln-tokenize`, k.error);
    } else {
        const bad = [];
        strings.forEach((s, i) => {
            const want = [...lm.tokenize(s)];
            const got = k.ids[i];
            if (want.length !== got.length || want.some((t, j) => t !== got[j])) bad.push({ s, got, want });
        });
        check(bad.length === 0, `${vocabName}: ${strings.length} strings`, bad.length
            ? `${bad.length} differ, first ${JSON.stringify(bad[0].s)}: kiln [${bad[0].got}] llama.cpp [${bad[0].want}]` : "ids equal");
    }
    await lm.dispose();
}

// GPT-2's vocabulary under every pre-tokenizer name
const gpt2 = path.join(root, "tests/data/vocab/ggml-vocab-gpt-2.gguf");
const gpt2Kv = readKv(gpt2);
const llamaInp = readFileSync(`${gpt2}.inp`, "utf8").split(SEP).slice(0, -1);
const textStrings = [...llamaInp, ...ADVERSARIAL, ...randomStrings(17, 300, PIECES, 12)];
for (const pre of PRE_NAMES.filter((p) => !only || only.includes(p))) {
    const file = path.join(outDir, `gpt-2-${pre}.gguf`);
    writeKv(file, gpt2Kv, { "tokenizer.ggml.pre": vStr(pre) });
    await compareOn(`gpt-2 vocab, pre '${pre}'`, file, textStrings);
}

// the synthetic vocabulary: every string of 1..3 characters of CHARS is one
// token, built by merges at every character boundary (after the merges
// inside multi-byte characters), so a word of up to 3 characters becomes
// exactly one token and a cut inside it shows as two
{
    const CHARS = ["a", "A", "É", "中", "'", "s", "1", "\u0663", " ", "\n", "\r", "\t", "\u00a0", "!", "/", "\u0301"];
    const tokens = [...BYTE_SYM];
    const seen = new Set(tokens);
    const merges = [];
    const add = (t) => { if (!seen.has(t)) { seen.add(t); tokens.push(t); } };
    for (const c of CHARS) { // inside a character: its byte-symbols left to right
        const sy = symbols(c);
        for (let i = 1; i < sy.length; i++) {
            add(sy.slice(0, i + 1).join(""));
            merges.push(`${sy.slice(0, i).join("")} ${sy[i]}`);
        }
    }
    const enc = (cs) => cs.map((c) => symbols(c).join("")).join("");
    for (const len of [2, 3]) {
        const grow = (prefix) => {
            if (prefix.length === len) {
                add(enc(prefix));
                for (let cut = 1; cut < len; cut++) merges.push(`${enc(prefix.slice(0, cut))} ${enc(prefix.slice(cut))}`);
                return;
            }
            for (const c of CHARS) grow([...prefix, c]);
        };
        grow([]);
    }
    tokens.push("<|endoftext|>");
    const eot = tokens.length - 1;
    const types = tokens.map((_, i) => (i === eot ? 3 : 1));
    const base = gpt2Kv.filter(([k]) => !k.startsWith("tokenizer."));
    // every string of 3 characters of CHARS (each word of it one token: the
    // ids show the cuts exactly), then longer random ones over the whole alphabet
    const short = CHARS.flatMap((x) => CHARS.flatMap((y) => CHARS.map((z) => x + y + z)));
    const strings = [...short, ...randomStrings(29, 400, ALPHABET, 16)];
    const distinct = ["default", "llama-bpe", "dbrx", "deepseek-llm", "deepseek-coder", "falcon", "mpt", "starcoder", "gpt-2", "refact", "qwen2", "gpt-4o"];
    for (const pre of distinct.filter((p) => !only || only.includes(p))) {
        const file = path.join(outDir, `synth-${pre}.gguf`);
        writeKv(file, base, {
            "tokenizer.ggml.model": vStr("gpt2"), "tokenizer.ggml.pre": vStr(pre), "tokenizer.ggml.tokens": vStrArr(tokens),
            "tokenizer.ggml.token_type": vI32Arr(types), "tokenizer.ggml.merges": vStrArr(merges),
            "tokenizer.ggml.bos_token_id": vU32(eot), "tokenizer.ggml.eos_token_id": vU32(eot),
        });
        await compareOn(`synthetic vocab (${tokens.length} tokens), pre '${pre}'`, file, strings);
    }
}

// a name Kiln does not implement: refused at load, by name (llama.cpp refuses it too)
{
    const file = path.join(outDir, "gpt-2-unknown.gguf");
    writeKv(file, gpt2Kv, { "tokenizer.ggml.pre": vStr("no-such-pre") });
    const k = kilnTokenize(file, ["x"]);
    check(!!k.error && k.error.includes("no-such-pre"), "unknown pre-tokenizer refused at load", k.error ?? "(accepted)");
    const refused = await llama.loadModel({ modelPath: file, vocabOnly: true }).then((m) => m.dispose().then(() => false), () => true);
    check(refused, "llama.cpp refuses it too");
}

console.log(`\n${passed} passed, ${failed} failed`);
await llama.dispose();
process.exit(failed ? 1 : 0);
