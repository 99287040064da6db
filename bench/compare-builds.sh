#!/bin/bash
# Training step time of the runtime built for this host (-march=native)
# against the portable baseline (runtime/CMakeLists.txt's KILN_CPU_ARCH
# default, x86-64-v3 with AVX-512 clones): builds the runtime twice, into
# separate directories, and runs bench/train.py on each, alternating, ROUNDS
# times, so that both see the same machine. The compiler (kiln-compile) is
# the one in build/bin; it takes each variant's kiln-train through
# KILN_TRAIN_RUNTIME.
#
#   bench/compare-builds.sh [--out DIR] [--jobs N] [--rounds N]
#       [--archs "native x86-64-v3"] [-- bench/train.py flags...]
#
# e.g. a quick check that it works:
#   bench/compare-builds.sh --rounds 1 -- --models mlp --steps 12 --batch 16
# Run it on an otherwise idle machine: the figures are step times.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=$ROOT/build-compare
JOBS=2
ROUNDS=3
ARCHS="native x86-64-v3"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --archs) ARCHS=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "compare-builds.sh: unknown flag '$1' (see --help)" >&2; exit 1 ;;
  esac
done
PY=/usr/bin/python3
[ -x "$ROOT/build/bin/kiln-compile" ] ||
  { echo "compare-builds.sh: build kiln-compile first ($ROOT/build/bin)" >&2; exit 1; }

for arch in $ARCHS; do
  dir=$OUT/$arch
  echo "== building the runtime with -march=$arch in $dir" >&2
  cmake -S "$ROOT/runtime" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DKILN_CPU_ARCH="$arch" -DKILN_RUNTIME_OUTPUT_DIR="$dir/bin" >/dev/null
  cmake --build "$dir" -j"$JOBS" --target kiln-train kiln-runtime-tests >/dev/null
  ln -sf "$ROOT/build/bin/kiln-compile" "$dir/bin/kiln-compile"
done

for round in $(seq 1 "$ROUNDS"); do
  for arch in $ARCHS; do
    echo "== round $round/$ROUNDS: -march=$arch"
    KILN_TRAIN_RUNTIME=$OUT/$arch/bin/kiln-train \
      $PY "$ROOT/bench/train.py" --bin "$OUT/$arch/bin" "$@"
  done
done
