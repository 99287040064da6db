#!/usr/bin/env bash
# The README's main command: export the bundled MLP with PyTorch, import it
# into the onnx dialect, convert it to the kiln dialect, and print the IR.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
scripts/setup.sh
[ -f "$BUILD/build.ninja" ] || cmake -S . -B "$BUILD" -G Ninja
cmake --build "$BUILD" --target kiln-opt kiln-translate
OUT=$BUILD/example
mkdir -p "$OUT"
/usr/bin/python3 test/Models/export_models.py "$OUT" mlp
"$BUILD/bin/kiln-translate" --import-onnx "$OUT/mlp.onnx" -o "$OUT/mlp.onnx.mlir"
"$BUILD/bin/kiln-opt" "$OUT/mlp.onnx.mlir" --convert-onnx-to-kiln -o "$OUT/mlp.kiln.mlir"
echo "== onnx dialect ($OUT/mlp.onnx.mlir): $(grep -c 'onnx.node' "$OUT/mlp.onnx.mlir") nodes"
echo "== kiln dialect ($OUT/mlp.kiln.mlir):"
cat "$OUT/mlp.kiln.mlir"
