#!/usr/bin/env bash
# The README's test command: configure, build everything, run check-kiln (lit + unit tests)
# and the runtime's own tests.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja
cmake --build "$BUILD"
cmake --build "$BUILD" --target check-kiln
