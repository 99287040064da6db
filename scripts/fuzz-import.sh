#!/usr/bin/env bash
# Builds kiln-import-fuzzer (libFuzzer + ASan, clang) in build-fuzz/ and runs it.
# Usage: scripts/fuzz-import.sh [SECONDS=60] [extra libFuzzer flags...]
# Crashes land in build-fuzz/fuzz-artifacts/; the corpus in build-fuzz/fuzz-corpus/.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-60}
shift || true
BUILD=${BUILD_FUZZ:-build-fuzz}
JOBS=${JOBS:-2}

if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_ENABLE_FUZZER=ON \
    -DCMAKE_C_FLAGS="-fsanitize=address,fuzzer-no-link" \
    -DCMAKE_CXX_FLAGS="-fsanitize=address,fuzzer-no-link"
fi
ninja -C "$BUILD" -j "$JOBS" kiln-import-fuzzer

CORPUS="$BUILD/fuzz-corpus"
ARTIFACTS="$BUILD/fuzz-artifacts"
mkdir -p "$CORPUS" "$ARTIFACTS"
if [ -z "$(ls -A "$CORPUS")" ]; then
  # Seed with small models of the ONNX test suite (under 4 KiB each).
  n=0
  for f in /usr/share/libonnx-testdata/data/node/*/model.onnx; do
    [ "$(stat -c %s "$f")" -le 4096 ] || continue
    cp "$f" "$CORPUS/$(basename "$(dirname "$f")").onnx"
    n=$((n + 1))
    [ "$n" -lt 200 ] || break
  done
fi

# protobuf and libonnx are not instrumented; leaks there are not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
exec "$BUILD/bin/kiln-import-fuzzer" "$CORPUS" \
  -artifact_prefix="$ARTIFACTS/" -max_total_time="$SECONDS_TO_RUN" \
  -max_len=65536 -rss_limit_mb=4096 -timeout=30 "$@"
