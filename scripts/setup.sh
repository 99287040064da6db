#!/usr/bin/env bash
# Installs every Debian package Kiln needs to build, test and run, idempotently.
# Usage: scripts/setup.sh   (as root, or with sudo available)
set -euo pipefail

PKGS=(
  # build
  cmake ninja-build g++ lld clang libclang-rt-14-dev libgtest-dev
  # MLIR / LLVM 22 and the lit tools
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  # ONNX (protobuf classes, checker, shape inference, version converter) and its test data
  libonnx-dev libonnx-testdata protobuf-compiler libprotobuf-dev
  # CPU math, MPI
  libdnnl-dev libopenblas-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev libgtest-dev
  # runtime tools' flag parser (header-only), SHA-256 (libcrypto)
  libcli11-dev libssl-dev
  # the reference oracle and test-model exporters (Debian's /usr/bin/python3);
  # matplotlib draws kiln-logs --plot
  python3 python3-numpy python3-onnx python3-torch python3-torchvision python3-matplotlib
  # format schemas (plan, training config) checked in the round-trip tests
  python3-jsonschema
  # the portable-baseline check: kiln-train under an emulated CPU without AVX-512
  qemu-user
  # the bundled examples' data (examples/digits: sklearn's load_digits)
  python3-sklearn
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
