// Kiln's built-in chat templates (src/models/chat_template.c, through
// kiln-generate --chat --print-prompt) against llama.cpp's own Jinja engine
// (node-llama-cpp 3.21.1's AddonJinjaRenderer, the renderer llama.cpp's
// server uses) on real models' tokenizer.chat_template texts
// (tests/data/chat-templates/): the built-in template detected from the text
// must render the same string as the text itself does, for a conversation
// with a system message, two user turns and an assistant turn, the
// assistant's turn opened.
//
// The built-in templates leave BOS to the tokenizer, so a leading bos_token
// that a template writes is not part of the comparison (bos_token renders
// as ""). A template whose Jinja output the built-in one does not reproduce
// (dates, default system prompts, reasoning switches) is listed in
// DIFFERENT with the reason, and checked to differ.
//
//   node tests/oracle/chat-template.mjs [--build DIR]
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadOracleLlama } from "./llamacpp.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const args = process.argv.slice(2);
const buildDir = args.includes("--build") ? path.resolve(args[args.indexOf("--build") + 1]) : path.join(root, "build");
const dir = path.join(root, "tests/data/chat-templates");

const SYS = { role: "system", content: "You are a helpful assistant." };
const TURNS = [
    { role: "user", content: "Hello" },
    { role: "assistant", content: "Hi there" },
    { role: "user", content: "Who are you?" },
];
// file -> [built-in name expected, conversation has a system message]
const CASES = {
    "Qwen-Qwen2.5-7B-Instruct.jinja": ["chatml", true],
    "Qwen-Qwen3-0.6B.jinja": ["chatml", true],
    "google-gemma-2-2b-it.jinja": ["gemma", false], // raises on a system message
    "microsoft-Phi-3.5-mini-instruct.jinja": ["phi3", true],
    "ibm-granite-granite-3.3-2B-Instruct.jinja": ["granite", true],
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ["mistral-v3-tekken", false],
    "meta-llama-Llama-3.2-3B-Instruct.jinja": ["llama3", true],
    "HuggingFaceTB-SmolLM3-3B.jinja": ["chatml", true],
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": ["deepseek3", true],
};
// what llama.cpp's built-in templates (and so Kiln's) leave out
const DIFFERENT = {
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "the template writes 'Cutting Knowledge Date' and today's date into the system turn",
    "HuggingFaceTB-SmolLM3-3B.jinja": "the template wraps the system message in a metadata block with the reasoning mode (/think)",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "the template opens the reply with '<think>\\n' and joins the system text without a blank line",
};

const llama = await loadOracleLlama();
let failed = 0;
let passed = 0;
for (const [file, [name, withSys]] of Object.entries(CASES)) {
    const tmpl = readFileSync(path.join(dir, file), "utf8");
    const messages = withSys ? [SYS, ...TURNS] : TURNS;
    const ref = new llama._bindings.AddonJinjaRenderer(tmpl).render({ messages, add_generation_prompt: true, bos_token: "", eos_token: "</s>" });
    const argv = ["--chat", "--chat-template", `@${path.join(dir, file)}`, "--print-prompt"];
    for (const m of messages) argv.push("--message", m.role, m.content);
    const r = spawnSync(path.join(buildDir, "bin", "kiln-generate"), argv, { encoding: "utf8" });
    const detected = /chat template (\S+)/.exec(r.stderr)?.[1];
    const same = r.status === 0 && r.stdout === ref;
    const why = DIFFERENT[file];
    const ok = detected === name && (why ? r.status === 0 && !same : same);
    if (!ok) failed++;
    else passed++;
    console.log(`${ok ? "ok  " : "FAIL"} ${file}: detected ${detected} (want ${name}); ` +
        (why ? `differs as listed: ${why}` : `renders as llama.cpp's Jinja engine (${ref.length} bytes)`) +
        (ok ? "" : `\n  llama.cpp jinja: ${JSON.stringify(ref)}\n  kiln built-in:   ${JSON.stringify(r.stdout)} ${r.stderr}`));
}
console.log(`\n${passed} passed, ${failed} failed`);
await llama.dispose();
process.exit(failed ? 1 : 0);
