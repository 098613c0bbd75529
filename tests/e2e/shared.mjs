// What the browser tests share: Debian's chromium started headless by
// playwright-core, and llama.cpp's reference text for the embedded model.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';

export function launchChromium() {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

/** llama.cpp's greedy 200 tokens from "Once upon a time" (models/README.md), prompt included, BOS piece left out; null when absent */
export function referenceText() {
  const md = readFileSync(path.join(ROOT, 'models/README.md'), 'utf8');
  const m = md.match(/BOS prepended, 200 tokens[^\n]*\n+```\n([\s\S]*?)\n```/);
  return m ? m[1].replace(/^<s> /, '') : null;
}
