/*
 * assets.ts — where the engine's files are, each one named by a literal
 * `new URL('…', import.meta.url)`. That exact pattern is what Vite (build and
 * dev server), webpack 5, Rollup and Parcel look for: they copy every file
 * named this way into their output and rewrite the URL, so an app that
 * bundles kiln-ml needs no configuration. Bundlers emit all variants; a page
 * fetches only the one Kiln.create() picks. Keep one literal per file (no
 * template strings, no computed names), or bundlers stop seeing them.
 *
 * In Node the same expressions are file: URLs into the installed package.
 */

import type { EngineFiles } from './protocol.js';
export type { EngineFiles };

/** @internal the engine worker (worker.ts, a classic script), copied as is by bundlers */
export function engineWorkerUrl(): URL {
  return new URL('./worker.js', import.meta.url);
}

/** @internal the package's own files of a variant ('st', 'mt', 'st-relaxed', 'mt-relaxed') */
export function packagedFiles(variant: string): EngineFiles {
  switch (variant) {
    case 'st': return {
      js: new URL('../../wasm/dist/st/kiln-st.js', import.meta.url).href,
      wasm: new URL('../../wasm/dist/st/kiln-st.wasm', import.meta.url).href,
    };
    case 'st-relaxed': return {
      js: new URL('../../wasm/dist/st-relaxed/kiln-st-relaxed.js', import.meta.url).href,
      wasm: new URL('../../wasm/dist/st-relaxed/kiln-st-relaxed.wasm', import.meta.url).href,
    };
    case 'mt': return {
      js: new URL('../../wasm/dist/mt/kiln-mt.js', import.meta.url).href,
      wasm: new URL('../../wasm/dist/mt/kiln-mt.wasm', import.meta.url).href,
      // ?no-inline: Vite would inline a file this small as a data: URL, from which no pthread can start
      worker: new URL('../../wasm/dist/mt/kiln-mt.worker.js?no-inline', import.meta.url).href,
    };
    case 'mt-relaxed': return {
      js: new URL('../../wasm/dist/mt-relaxed/kiln-mt-relaxed.js', import.meta.url).href,
      wasm: new URL('../../wasm/dist/mt-relaxed/kiln-mt-relaxed.wasm', import.meta.url).href,
      worker: new URL('../../wasm/dist/mt-relaxed/kiln-mt-relaxed.worker.js?no-inline', import.meta.url).href,
    };
    default: throw new Error(`no engine variant '${variant}'`);
  }
}

/** @internal the files of a variant under a folder given as KilnOptions.wasmUrl (holding st/, mt/, …) */
export function filesUnder(base: URL, variant: string): EngineFiles {
  const dir = new URL(`${variant}/`, base);
  const name = `kiln-${variant}`;
  return {
    js: new URL(`${name}.js`, dir).href,
    wasm: new URL(`${name}.wasm`, dir).href,
    worker: variant.startsWith('mt') ? new URL(`${name}.worker.js`, dir).href : undefined,
  };
}

/**
 * @internal
 * Node's modules, imported by a name the bundlers do not follow: the browser
 * build of an app never sees a `node:` import, and Node loads them on demand.
 */
export function nodeImport(name: string): Promise<any> {
  return import(/* webpackIgnore: true */ /* @vite-ignore */ name);
}
