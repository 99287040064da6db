#!/usr/bin/env bash
# The character-level transformer example: build, make the dataset from the
# licence texts in /usr/share/common-licenses, export a 2-layer, d=64, 4-head,
# context-32 decoder with PyTorch, compile it into a training executable and
# train it for 300 steps (a little over one epoch), printing the loss as it
# falls. Everything lands in $BUILD/example/charlm/ (BUILD defaults to build).
# Sample from the result: /usr/bin/python3 examples/charlm/sample.py \
#   $BUILD/example/charlm/charlm.trained.onnx
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3
STEPS=${STEPS:-300}
scripts/setup.sh
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja
cmake --build "$BUILD" --target kiln-compile kiln-runtime
[ -x "$BUILD/bin/kiln-train" ] || {
  echo "run-charlm: $BUILD/bin/kiln-train is missing (the kiln-runtime target builds it)" >&2
  exit 1
}

OUT=$BUILD/example/charlm
mkdir -p "$OUT"
start=$(date +%s)
$PY examples/charlm/make_data.py "$OUT"
$PY examples/charlm/model.py "$OUT"

# Logits [32, 32, V], labels [32, 32]: cross-entropy over the last axis, mean
# over every position. Adam at lr 0.01 (faster than 0.003-0.005 over 300 steps).
"$BUILD/bin/kiln-compile" "$OUT/charlm.onnx" -o "$OUT/charlm.train" \
  --batch-size 32 --loss cross-entropy --optimizer adam --lr 0.01

rm -f "$OUT/charlm.metrics.jsonl"
"$OUT/charlm.train" \
  --data idx="$OUT/train_idx.npy" --data labels="$OUT/train_labels.npy" \
  --steps "$STEPS" --log-every 25 --metrics "$OUT/charlm.metrics.jsonl" \
  --export-onnx "$OUT/charlm.trained.onnx" 2>&1 | tee "$OUT/charlm.log"

$PY scripts/train_summary.py charlm "$OUT/charlm.log" "$OUT/charlm.metrics.jsonl" \
  --seconds $(( $(date +%s) - start ))
