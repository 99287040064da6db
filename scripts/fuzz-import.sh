#!/usr/bin/env bash
# Builds kiln-import-fuzzer (libFuzzer + ASan, clang) in build-fuzz/ and runs it.
# Usage: scripts/fuzz-import.sh [SECONDS=60] [extra libFuzzer flags...]
# Crashes land in build-fuzz/fuzz-artifacts/; the corpus in build-fuzz/fuzz-corpus/.
# The same as scripts/fuzz.sh import ...; fuzz.sh also runs the runtime's
# targets (plan, npy, manifest).
exec "$(dirname "$0")/fuzz.sh" import "$@"
