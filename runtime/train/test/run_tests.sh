#!/bin/sh
# Usage: run_tests.sh BUILD/bin/kiln-train [--quick] [--work DIR]
# (see run_tests.py).
here=$(dirname "$0")
bin=$1
shift
exec /usr/bin/python3 "$here/run_tests.py" --kiln-train "$bin" "$@"
