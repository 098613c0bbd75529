// CommonJS entry of kiln-ml (`require('kiln-ml')`). The package is ES
// modules; Node 20.19+ and 22.12+ load them through require(), older Node
// versions cannot, and this says so instead of failing on a syntax error.
'use strict';
try {
  module.exports = require('./dist/index.js');
} catch (e) {
  if (e && (e.code === 'ERR_REQUIRE_ESM' || e.code === 'ERR_REQUIRE_ASYNC_MODULE')) {
    const err = new Error('kiln-ml is an ES module package: use `import { Kiln } from \'kiln-ml\'` or ' +
      '`const { Kiln } = await import(\'kiln-ml\')`; require() of it needs Node 20.19+ or 22.12+ (this is ' + process.version + ')');
    err.code = 'ERR_REQUIRE_ESM';
    err.cause = e;
    throw err;
  }
  throw e;
}
