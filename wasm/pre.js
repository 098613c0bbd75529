// Runs inside the module factory: hands the JS package the live memory
// object (its .buffer changes when memory grows, from any thread).
Module['kilnMemory'] = function () { return wasmMemory; };
