// A static server for the browser benchmark, cross-origin isolated
// (COOP/COEP) so wasm threads are available. Serves the repository root and
// the benchmark's GGUF files under /gguf/<name>.gguf.
import http from 'node:http';
import { createReadStream, mkdtempSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const TYPES = { '.html': 'text/html', '.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json', '.gguf': 'application/octet-stream' };

export function startServer(root, ggufs) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    let file;
    const m = /^\/gguf\/([\w.-]+)$/.exec(url.pathname);
    if (m) file = ggufs[m[1]];
    else file = path.join(root, path.normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, ''));
    let st;
    try { st = file && statSync(file); } catch { st = null; }
    if (!st || !st.isFile()) { res.writeHead(404); res.end('not found'); return; }
    res.writeHead(200, {
      'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
      'Content-Length': st.size,
      'Cross-Origin-Opener-Policy': 'same-origin',
      'Cross-Origin-Embedder-Policy': 'require-corp',
      'Cross-Origin-Resource-Policy': 'same-origin',
      'Cache-Control': 'no-store',
    });
    if (req.method === 'HEAD') { res.end(); return; }
    createReadStream(file).pipe(res);
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` })));
}

// Debian's Chromium, headless, in a fresh profile directory (returned, for
// the caller to remove), with the benchmarks' flags; KILN_CHROMIUM names
// another binary, KILN_CHROMIUM_ARGS adds flags (space-separated).
export async function launchBenchChromium(prefix) {
  const { chromium } = await import('playwright-core');
  const userDir = mkdtempSync(path.join(os.tmpdir(), prefix));
  const context = await chromium.launchPersistentContext(userDir, {
    executablePath: process.env.KILN_CHROMIUM ?? '/usr/bin/chromium', headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage',
      ...(process.env.KILN_CHROMIUM_ARGS ?? '').split(' ').filter(Boolean)],
  });
  return { context, userDir };
}
