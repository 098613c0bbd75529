// Shared by every page: navigation, the engine (kiln-ml runs it in a Web
// Worker; this thread only renders) and the status line.
import { Kiln } from '/js/dist/index.js';

const PAGES = [['index.html', 'Generate'], ['kernels.html', 'Kernels'], ['train.html', 'Train'], ['finetune.html', 'Fine-tune'], ['listen.html', 'Listen'], ['transcribe.html', 'Transcribe']];

export function nav() {
  const here = location.pathname.split('/').pop() || 'index.html';
  const header = document.createElement('header');
  header.innerHTML = `<div class="brand">Kiln<span>·</span>ml</div><nav>${PAGES.map(([href, name]) =>
    `<a href="${href}"${href === here ? ' aria-current="page"' : ''}>${name}</a>`).join('')}</nav>`;
  document.body.prepend(header);
}

export const $ = (sel) => document.querySelector(sel);
/** a load's model-cache event (onCache) as a note after its time */
export const cacheNoteOf = (e) => e.state === 'hit' ? ' · from the cache' : e.state === 'stored' ? ' · stored in the cache'
  : e.state === 'not-stored' ? ` · not cached (${e.reason})` : '';
export const fmtBytes = (n) => n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB` : n >= 1 << 20 ? `${(n / (1 << 20)).toFixed(1)} MiB` : `${(n / 1024).toFixed(0)} KiB`;

/** why threads are off in this page, or '' */
export function singleThreadReason() {
  if (!globalThis.crossOriginIsolated) return 'the page is not cross-origin isolated (no COOP/COEP headers), so there is no SharedArrayBuffer';
  if (typeof SharedArrayBuffer === 'undefined') return 'SharedArrayBuffer is not available';
  return '';
}

/** create the engine and keep #status (data-testid=status) up to date */
export async function startEngine() {
  const status = $('[data-testid=status]');
  status.textContent = 'starting the engine…';
  const kiln = await Kiln.create({ logLevel: 'warn' });
  const info = kiln.info();
  const why = info.build === 'st' ? singleThreadReason() : '';
  let mem = '';
  const render = () => {
    const build = info.build === 'mt'
      ? 'build: kiln-mt (threads)'
      : `build: kiln-st (single-thread${why ? `: ${why}; serve with COOP/COEP headers to enable threads` : ''})`;
    status.textContent = `${build} · threads: ${info.threads} · SIMD: ${info.simd ? info.isa : 'no'} · kiln ${info.version}${mem ? ` · memory: ${mem}` : ''}`;
    status.classList.toggle('warn', info.build === 'st');
    status.dataset.build = info.build;
    status.dataset.threads = String(info.threads);
  };
  render();
  const refreshMemory = async () => {
    try {
      const m = await kiln.memory();
      mem = `${fmtBytes(m.used)} used of ${fmtBytes(m.total)}`;
      render();
    } catch { /* the engine is busy or gone */ }
  };
  await refreshMemory();
  return { kiln, info, refreshMemory };
}
