import { defineConfig } from 'vitest/config';

// Runs against the built package (js/dist) and the real wasm builds
// (wasm/dist): scripts/test-js.sh builds both first.
export default defineConfig({
  test: {
    include: ['tests/js/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    // each file starts its own engines (workers + pthreads): keep it to two
    // files at a time on small CI machines
    maxWorkers: 2,
    pool: 'forks',
    // KILN_TEST_SIMD=relaxed (scripts/test-js.sh, second pass): Node 20 runs
    // relaxed SIMD behind a V8 flag; with it every engine the tests start
    // picks kiln-st-relaxed / kiln-mt-relaxed ('auto'), without it SIMD128
    execArgv: process.env.KILN_TEST_SIMD === 'relaxed' ? ['--experimental-wasm-relaxed-simd'] : [],
  },
});
