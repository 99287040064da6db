#!/usr/bin/env bash
# The whole check-kiln suite with the executable code under AddressSanitizer
# and UndefinedBehaviorSanitizer: the runtime (every kernel, the executor,
# tensor I/O, kiln-train) is compiled with -fsanitize=address,undefined and
# kiln-run, kiln-compile and the test binaries link it (-DKILN_SANITIZE=ON,
# in its own build directory). A UB report aborts the process
# (-fno-sanitize-recover), so it fails the test that ran it. Leak checking
# is off: it is not undefined behaviour, and MLIR's and protobuf's
# process-lifetime singletons would be reported.
#
#   scripts/sanitize-check.sh            # build-asan/, about 15 min here
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-asan}
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja -DKILN_SANITIZE=ON
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
cmake --build "$BUILD"
cmake --build "$BUILD" --target check-kiln
