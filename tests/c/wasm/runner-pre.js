// The test that runner.c runs: `node kiln-tests.js <name>` -> getenv("KILN_TEST").
// (Emscripten's getenv reads its ENV object, not process.env.)
Module['preRun'] = [function () { ENV['KILN_TEST'] = process['argv'][2] || ''; }];
