#!/bin/sh
# Byte-for-byte comparison with llama.cpp's ggml (developer check, not CI).
# Needs a libggml-base.so; one ships in the npm package @node-llama-cpp/linux-x64:
#   (cd /tmp && npm pack @node-llama-cpp/linux-x64 && tar xzf node-llama-cpp-linux-x64-*.tgz)
#   GGML_BASE_SO=/tmp/package/bins/linux-x64/libggml-base.so scripts/quant-ggml-compare/run.sh
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$root/build" -j2 --target kiln >/dev/null
cc -O2 -o /tmp/kiln-quant-compare "$root/scripts/quant-ggml-compare/compare.c" \
   -I"$root/src/include" -I"$root/src/quant" -I"$root/src" "$root/build/libkiln.a" -ldl -lm -lpthread
/tmp/kiln-quant-compare
