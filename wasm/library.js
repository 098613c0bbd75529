// JS functions the C side imports (a --js-library): the abort word of st
// builds, read from the SharedArrayBuffer the worker hands in (pre.js).
mergeInto(LibraryManager.library, {
  kw_js_abort_word: function () {
    return Module['kilnAbortWord'] ? Module['kilnAbortWord']() : 0;
  },
});
