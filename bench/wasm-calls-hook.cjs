// Counts calls into the wasm module's kw_* exports inside the engine worker
// (bench/wasm-calls.mjs): node --require ./bench/wasm-calls-hook.cjs SCRIPT.
// Prints {"what":"kw_calls",...} after each generation (kw_llm_stats).
const Module = require('module');
const load = Module._load;
Module._load = function (request, parent, isMain) {
  const r = load.apply(this, arguments);
  if (typeof r === 'function' && /kiln-(st|mt)(-relaxed)?\.js$/.test(request)) {
    return (opts) => r(opts).then((M) => {
      let counts = {};
      for (const k of Object.keys(M)) {
        if (!k.startsWith('_kw_') || typeof M[k] !== 'function') continue;
        // emscripten's lazy stubs store the real export over themselves on
        // first use: a setter keeps the counting wrapper in place
        let real = M[k];
        const wrapper = (...a) => {
          if (k === '_kw_llm_start') counts = {};
          counts[k] = (counts[k] || 0) + 1;
          const v = real(...a);
          if (k === '_kw_llm_stats') console.log(JSON.stringify({ what: 'kw_calls', ...counts }));
          return v;
        };
        Object.defineProperty(M, k, { get: () => wrapper, set: (v) => { real = v; }, configurable: true });
      }
      return M;
    });
  }
  return r;
};
