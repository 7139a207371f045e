#!/usr/bin/env bash
# cmake --install, then a project outside the tree finds the package with
# find_package(strata), links strata::strata, and runs an allreduce on 2 ranks.
set -euo pipefail
BUILD_DIR="$1"; SOURCE_DIR="$2"; MPIEXEC="$3"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" > "$WORK/install.log"
cmake -S "$SOURCE_DIR/tests/install/consumer" -B "$WORK/build" -G Ninja -DCMAKE_PREFIX_PATH="$WORK/prefix" > "$WORK/configure.log" \
  || { cat "$WORK/configure.log"; exit 1; }
cmake --build "$WORK/build" > "$WORK/build.log" || { cat "$WORK/build.log"; exit 1; }
out=$("$MPIEXEC" -n 2 "$WORK/build/consumer")
echo "$out"
grep -q "rank 0 of 2: sum 3" <<<"$out" && grep -q "rank 1 of 2: sum 3" <<<"$out"
