#!/usr/bin/env bash
# The README's main command: build kiln-compile and the training runtime,
# make the digits data (scikit-learn's bundled 8x8 digits), export a
# 64-128-64-10 MLP with PyTorch, compile it into a training executable, train
# it for 10 epochs, evaluate it on the held-out 20%, and print a summary line.
# Everything lands in $BUILD/example/ (BUILD defaults to build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PY=/usr/bin/python3
scripts/setup.sh
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja
cmake --build "$BUILD" --target kiln-compile kiln-runtime
[ -x "$BUILD/bin/kiln-train" ] || {
  echo "run-example: $BUILD/bin/kiln-train is missing (the kiln-runtime target builds it)" >&2
  exit 1
}

OUT=$BUILD/example
DATA=$OUT/digits
mkdir -p "$DATA"
start=$(date +%s)
$PY examples/digits/make_data.py "$DATA"
$PY examples/digits/model.py "$DATA"

# Static shapes for batch 32; cross-entropy appended on "logits" with a
# "labels" input; Adam at lr 0.01 (best of 0.001-0.03 for 10 epochs here).
"$BUILD/bin/kiln-compile" "$DATA/digits_mlp.onnx" -o "$OUT/digits.train" \
  --batch-size 32 --loss cross-entropy --optimizer adam --lr 0.01

rm -f "$OUT/digits.metrics.jsonl"
"$OUT/digits.train" \
  --data x="$DATA/train_x.npy" --data labels="$DATA/train_y.npy" \
  --epochs 10 --log-every 20 --metrics "$OUT/digits.metrics.jsonl" \
  --eval-data x="$DATA/test_x.npy" --eval-data labels="$DATA/test_y.npy" 2>&1 | tee "$OUT/digits.log"

$PY scripts/train_summary.py digits "$OUT/digits.log" "$OUT/digits.metrics.jsonl" \
  --seconds $(( $(date +%s) - start ))
