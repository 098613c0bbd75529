// The machine's read bandwidth, 1 and 2 threads: bench-kernels' own
// measurement (its first lines); the process is stopped once they are out.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { emit } from './common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export function runBandwidth({ want = 2, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve) => {
    const p = spawn(path.join(root, 'build/bin/bench-kernels'), [], { env: { ...process.env, KILN_BENCH_QUICK: '1', KILN_BENCH_ONLY: 'matvec' } });
    const bw = {}; let buf = '';
    const done = () => { clearTimeout(timer); p.kill('SIGTERM'); resolve(bw); };
    const timer = setTimeout(done, timeoutMs);
    p.stdout.on('data', (d) => {
      buf += d; let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        try {
          const o = JSON.parse(line);
          if (o.what === 'read_bandwidth') { bw[o.threads] = o.GBps; emit({ what: 'peers_read_bandwidth', threads: o.threads, GBps: o.GBps, source: 'bench-kernels' }); }
        } catch { /* not JSON */ }
        if (Object.keys(bw).length >= want) return done();
      }
    });
    p.on('exit', () => { clearTimeout(timer); resolve(bw); });
  });
}
