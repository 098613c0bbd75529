#!/usr/bin/env node
/*
 * server.mjs — the web demo's static server (no dependencies).
 *
 *   node web-demo/server.mjs [--port N] [--no-isolation]     (npm run demo)
 *
 * Serves web-demo/ at /, and the package's js/dist, wasm/dist and the
 * embedded models/ from the repository root at the same paths, so the
 * package finds its worker and wasm files relative to itself.
 *
 * By default every response carries COOP/COEP (the page is cross-origin
 * isolated, SharedArrayBuffer exists, kiln-mt runs with threads).
 * --no-isolation (or KILN_DEMO_NO_ISOLATION=1) leaves them out, which is how
 * the single-thread fallback is tested.
 *
 * A model URL with ?slow=1 is sent in small chunks with pauses, so a test
 * (or a person) can abort a download halfway.
 */
import { createServer } from 'node:http';
import { createReadStream, promises as fsp } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DEMO = path.join(ROOT, 'web-demo');
// URL prefixes served from the repository root (everything else: web-demo/)
const FROM_ROOT = ['/js/dist/', '/wasm/dist/', '/models/', '/tests/data/fashion-mnist/', '/tests/data/audio/'];

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.json': 'application/json', '.wasm': 'application/wasm', '.svg': 'image/svg+xml',
  '.png': 'image/png', '.ico': 'image/x-icon', '.map': 'application/json', '.ts': 'text/plain; charset=utf-8',
  '.gguf': 'application/octet-stream', '.md': 'text/plain; charset=utf-8', '.gz': 'application/gzip',
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function resolvePath(urlPath, mounts = {}) {
  let p;
  try { p = decodeURIComponent(urlPath); } catch { return null; }
  if (p.includes('\0')) return null;
  const mount = Object.keys(mounts).find((pre) => p.startsWith(pre));
  if (mount) return inside(path.resolve(mounts[mount]), p.slice(mount.length - 1));
  const fromRoot = FROM_ROOT.some((pre) => p.startsWith(pre));
  return inside(fromRoot ? ROOT : DEMO, p);
}

function inside(base, p) {
  if (p.endsWith('/')) p += 'index.html';
  const full = path.resolve(base, '.' + p);
  // no way out of the served folders
  if (full !== base && !full.startsWith(base + path.sep)) return null;
  return full;
}

/**
 * Start the server. Returns {server, url, requests, close()}; `requests`
 * records every request's method and path (tests count model downloads).
 * `mounts` ({'/fixtures/': '/tmp/dir'}) serves more folders (tests' pages).
 */
export async function startServer({ port = 8080, host = '127.0.0.1', isolation = true, quiet = false, mounts = {} } = {}) {
  const requests = [];
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, 'http://localhost');
    requests.push({ method: req.method, path: url.pathname, search: url.search });
    const headers = {
      'Cross-Origin-Resource-Policy': 'same-origin',
      'X-Content-Type-Options': 'nosniff',
      // the model cache is the package's business, not the HTTP cache's
      'Cache-Control': 'no-store',
    };
    if (isolation) {
      headers['Cross-Origin-Opener-Policy'] = 'same-origin';
      headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...headers, Allow: 'GET, HEAD' }).end();
      return;
    }
    const file = resolvePath(url.pathname, mounts);
    let st = null;
    if (file) { try { st = await fsp.stat(file); } catch { st = null; } }
    if (!st || !st.isFile()) {
      res.writeHead(404, { ...headers, 'Content-Type': 'text/plain; charset=utf-8' }).end(`not found: ${url.pathname}\n`);
      return;
    }
    const type = TYPES[path.extname(file).toLowerCase()] ?? 'application/octet-stream';
    const etag = `"${st.size.toString(16)}-${Math.floor(st.mtimeMs).toString(16)}"`;
    res.writeHead(200, { ...headers, 'Content-Type': type, 'Content-Length': String(st.size), ETag: etag });
    if (req.method === 'HEAD') { res.end(); return; }
    if (url.searchParams.get('slow') === '1') {
      // 16 KiB every 40 ms: a ~1 MB model takes ~3 s
      const fh = await fsp.open(file, 'r');
      let closed = false;
      res.on('close', () => { closed = true; });
      try {
        const buf = Buffer.alloc(16384);
        for (let off = 0; off < st.size && !closed; off += buf.length) {
          const { bytesRead } = await fh.read(buf, 0, buf.length, off);
          if (bytesRead <= 0) break;
          res.write(Buffer.from(buf.subarray(0, bytesRead)));
          await sleep(40);
        }
      } finally { await fh.close(); }
      res.end();
      return;
    }
    createReadStream(file).on('error', () => res.destroy()).pipe(res);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, resolve);
  });
  const addr = server.address();
  const url = `http://${host}:${addr.port}/`;
  if (!quiet) {
    console.log(`Kiln web demo: ${url}  (${isolation ? 'cross-origin isolated: threads on' : 'NOT isolated: single-thread fallback'})`);
  }
  return {
    server, url, requests,
    close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }),
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  let port = Number(process.env.PORT ?? 8080);
  let isolation = !/^(1|true|yes)$/i.test(process.env.KILN_DEMO_NO_ISOLATION ?? '');
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--port') port = Number(args[++i]);
    else if (args[i] === '--no-isolation') isolation = false;
    else if (args[i] === '--help' || args[i] === '-h') {
      console.log('usage: node web-demo/server.mjs [--port N] [--no-isolation]\n  env: PORT, KILN_DEMO_NO_ISOLATION=1');
      process.exit(0);
    } else { console.error(`unknown argument ${args[i]}`); process.exit(2); }
  }
  try {
    await fsp.access(path.join(ROOT, 'js/dist/index.js'));
    await fsp.access(path.join(ROOT, 'wasm/dist/st/kiln-st.wasm'));
  } catch {
    console.warn('note: js/dist or wasm/dist is missing; run `npm run build` (or npm run build:ts + scripts/build-wasm.sh) first');
  }
  await startServer({ port, isolation });
}
