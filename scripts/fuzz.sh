#!/usr/bin/env bash
# Builds one libFuzzer target (clang; ASan, and UBSan for the runtime ones)
# and runs it.
# Usage: scripts/fuzz.sh [TARGET=import] [SECONDS=60] [extra libFuzzer flags...]
#   import    kiln-import-fuzzer: the ONNX importer (needs MLIR; build-fuzz/)
#   plan      kiln-plan-fuzzer: Program::load on any bytes, small plans run
#   npy       kiln-npy-fuzzer: parseNpy, readTensorBytes, readSafetensorsBytes
#   manifest  kiln-manifest-fuzzer: kiln-train's checkpoint manifest parser,
#             with a write/parse round trip
# The runtime targets are built by the runtime project alone, with
# -DKILN_RUNTIME_FUZZ=ON, in build-fuzz-rt/ (BUILD_FUZZ_RT overrides); they
# are seeded from runtime/fuzz/corpus/TARGET/ (runtime/fuzz/make_seeds.py
# writes plan/ and npy/, kiln-manifest-seeds manifest/).
# Crashes land in BUILD/fuzz-artifacts[/TARGET]/; the growing corpus in
# BUILD/fuzz-corpus[/TARGET]/. A crash reproduces with
#   build-fuzz-rt/bin/kiln-TARGET-fuzzer ARTIFACT
# Examples (on a shared machine: nice, one fuzzer at a time, JOBS=1):
#   JOBS=1 nice -n 19 scripts/fuzz.sh plan 900
#   scripts/fuzz.sh npy 60 -jobs=2
# scripts/fuzz-import.sh SECONDS ... is scripts/fuzz.sh import SECONDS ...
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET=import
case "${1:-}" in
  import|plan|npy|manifest) TARGET=$1; shift ;;
  ''|[0-9]*) ;; # the old usage: SECONDS first
  *) echo "usage: $0 [import|plan|npy|manifest] [SECONDS] [libFuzzer flags...]" >&2
     exit 2 ;;
esac
SECONDS_TO_RUN=${1:-60}
shift || true
JOBS=${JOBS:-2}

if [ "$TARGET" = import ]; then
  BUILD=${BUILD_FUZZ:-build-fuzz}
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
fi

BUILD=${BUILD_FUZZ_RT:-build-fuzz-rt}
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S runtime -B "$BUILD" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKILN_RUNTIME_FUZZ=ON
fi
ninja -C "$BUILD" -j "$JOBS" "kiln-$TARGET-fuzzer"

CORPUS="$BUILD/fuzz-corpus/$TARGET"
ARTIFACTS="$BUILD/fuzz-artifacts/$TARGET"
SEEDS=runtime/fuzz/corpus/$TARGET
mkdir -p "$CORPUS" "$ARTIFACTS"
DICT=()
[ -f "runtime/fuzz/$TARGET.dict" ] && DICT=(-dict="runtime/fuzz/$TARGET.dict")
case "$TARGET" in
  plan|manifest) MAX_LEN=16384 ;;
  *) MAX_LEN=8192 ;;
esac

# Everything the fuzzers reach is instrumented but oneDNN, OpenMP and
# protobuf; one OpenMP thread keeps runs reproducible (and the machine free).
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# The committed seeds are read, never written: new inputs go to $CORPUS.
exec "$BUILD/bin/kiln-$TARGET-fuzzer" "$CORPUS" "$SEEDS" "${DICT[@]}" \
  -artifact_prefix="$ARTIFACTS/" -max_total_time="$SECONDS_TO_RUN" \
  -max_len="$MAX_LEN" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "$@"
