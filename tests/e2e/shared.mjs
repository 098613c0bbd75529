// What the browser tests share: Debian's chromium started headless by
// playwright-core, and llama.cpp's reference text for the embedded model.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const CHROMIUM = process.env.KILN_CHROMIUM ?? '/usr/bin/chromium';

const ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

export function launchChromium() {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
}

/** Chromium flags for a fake microphone that plays WAV once */
export function fakeMicArgs(wav) {
  return ['--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream', `--use-file-for-fake-audio-capture=${wav}%noloop`,
    '--autoplay-policy=no-user-gesture-required'];
}

/**
 * A persistent context in userDir (IndexedDB, OPFS and the Cache API outlive
 * a page), with extra flags; with longTasks every page records its main-thread
 * tasks over 50 ms (PerformanceObserver 'longtask') in window.__longTasks from
 * its first script on.
 */
export async function launchContext(userDir, { args = [], longTasks = false } = {}) {
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: CHROMIUM, headless: true, args: [...ARGS, ...args], viewport: { width: 1100, height: 900 },
  });
  if (longTasks) {
    await context.addInitScript(() => {
      window.__longTasks = [];
      try {
        new PerformanceObserver((list) => { for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration }); })
          .observe({ type: 'longtask', buffered: true });
      } catch { /* not supported */ }
    });
  }
  return context;
}

/** llama.cpp's greedy 200 tokens from "Once upon a time" (models/README.md), prompt included, BOS piece left out; null when absent */
export function referenceText() {
  const md = readFileSync(path.join(ROOT, 'models/README.md'), 'utf8');
  const m = md.match(/BOS prepended, 200 tokens[^\n]*\n+```\n([\s\S]*?)\n```/);
  return m ? m[1].replace(/^<s> /, '') : null;
}

// A main-thread task's duration is wall time: on a machine with more runnable
// threads than cores it includes waiting for a core. `machineLoad()` is the
// "; load average … on N cores" suffix printed beside long tasks ('' off Linux).
export function machineLoad() {
  try { return `; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')} on ${availableParallelism()} cores`; } catch { return ''; }
}

// The pages other than Generate (whose test asserts on every run): no task
// over 50 ms, asserted while the load average is at most twice the cores,
// printed above that.
export function assertNoLongTasksUnlessLoaded(tasks, what) {
  const load = loadavg()[0];
  if (load <= 2 * availableParallelism()) assert.deepEqual(tasks, [], `${what}: long tasks ${JSON.stringify(tasks)} ms${machineLoad()}`);
  else console.log(`# load average ${load.toFixed(1)} on ${availableParallelism()} cores: ${tasks.length} long tasks (${what}) not asserted`);
}
