#!/usr/bin/env node
// Part of `npm run build:ts`: copies @huggingface/jinja's ESM build (one
// self-contained file) and its license into js/dist/vendor/jinja/, so that
// model.chat() imports it by a relative URL and works in a plain browser
// page (no bundler, no import map). generate.ts falls back to the bare
// specifier when the copy is missing.
import { createRequire } from 'node:module';
import { copyFileSync, mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(ROOT, 'js/dist/vendor/jinja');
const require = createRequire(path.join(ROOT, 'package.json'));

let dist;
try {
  // the package's exports map only has '.': its CommonJS entry tells where dist/ is
  dist = path.dirname(require.resolve('@huggingface/jinja'));
} catch (e) {
  console.error(`vendor-jinja: @huggingface/jinja is not installed (npm ci): ${e.message}`);
  process.exit(1);
}
const pkgDir = path.dirname(dist);
const esm = path.join(dist, 'index.js');
const license = path.join(pkgDir, 'LICENSE');
for (const f of [esm, license]) {
  if (!existsSync(f)) { console.error(`vendor-jinja: ${f} is missing`); process.exit(1); }
}
const src = readFileSync(esm, 'utf8');
// the copy must stand alone: a browser cannot resolve bare imports
if (/^\s*(import|export)\s[^;]*?\sfrom\s*['"][^./]/m.test(src)) {
  console.error('vendor-jinja: this @huggingface/jinja build imports other packages; it cannot be vendored as one file');
  process.exit(1);
}
const version = JSON.parse(readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
mkdirSync(OUT, { recursive: true });
copyFileSync(esm, path.join(OUT, 'index.js'));
copyFileSync(license, path.join(OUT, 'LICENSE'));
writeFileSync(path.join(OUT, 'README.md'),
  `@huggingface/jinja ${version} (MIT, see LICENSE), copied unchanged from its dist/index.js by scripts/vendor-jinja.mjs.\n` +
  'kiln-ml imports it for chat templates (model.chat) so that they work in browsers without a bundler.\n');
console.log(`vendor-jinja: @huggingface/jinja ${version} -> js/dist/vendor/jinja/`);
