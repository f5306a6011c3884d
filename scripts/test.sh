#!/usr/bin/env bash
# The one command that runs every test on a fresh Debian 12 machine (set-up included).
# GPU tests carry the label "gpu"; they run only where a GPU is present (scripts/gpu_check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -LE gpu --timeout 900 -j "$(nproc)"
