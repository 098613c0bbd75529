// JS functions the C side imports (a --js-library): the abort word of st
// builds, read from the SharedArrayBuffer the worker hands in (pre.js), and
// the hooks of a running transcription.
mergeInto(LibraryManager.library, {
  kw_js_abort_word: function () {
    return Module['kilnAbortWord'] ? Module['kilnAbortWord']() : 0;
  },
  // kw_whisper_full (kiln_wasm_whisper.c): a new segment, a progress step;
  // the worker sets the hooks for the transcription it runs
  kw_js_whisper_segment: function (i) {
    if (Module['kilnWhisperSegment']) Module['kilnWhisperSegment'](i);
  },
  kw_js_whisper_progress: function (percent) {
    if (Module['kilnWhisperProgress']) Module['kilnWhisperProgress'](percent);
  },
});
