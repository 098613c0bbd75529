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
  },
});
