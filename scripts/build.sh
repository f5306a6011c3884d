#!/usr/bin/env bash
# Configures and builds mkserve into ${BUILD_DIR:-build}: every target, or only ${TARGET} when
# set. Extra arguments go to cmake.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" ${TARGET:+--target "$TARGET"} --parallel "${JOBS:-$(nproc)}"
