#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, build only the `mkserve` binary, optimised
# (Release, in its own build folder, so the test build in build/ is left alone), write the tiny
# built-in model once (or take MODEL_DIR), then serve it on the OpenAI API at
# http://127.0.0.1:8000/v1 and print how long it took from the start of this script until the
# server listened with the model loaded. Extra arguments go to `mkserve serve`
# (e.g. --port 9000 --api-key KEY, or --backend cuda with MODEL_DIR=/path/to/checkpoint).
# MKSERVE_CUDA=OFF builds without the CUDA backend (default AUTO: with it where nvcc is found).
set -euo pipefail
start=$EPOCHREALTIME
cd "$(dirname "$0")/.."
bash scripts/setup.sh --serve-only
build_dir=${RUN_BUILD_DIR:-build-release}
BUILD_DIR=$build_dir TARGET=mkserve bash scripts/build.sh -DCMAKE_BUILD_TYPE=Release \
  -DMKSERVE_TESTS=OFF -DMKSERVE_CUDA="${MKSERVE_CUDA:-AUTO}"
model_dir=${MODEL_DIR:-$build_dir/models/tiny}
[[ -f $model_dir/config.json ]] || "./$build_dir/mkserve" make-model --preset tiny --out "$model_dir"

# Copies the server's stderr through and notes the moment its start-up summary says "listening".
report_listening() {
  local line
  while IFS= read -r line; do
    printf '%s\n' "$line" >&2
    if [[ $line == *"listening    http"* ]]; then
      awk -v from="$start" -v to="$EPOCHREALTIME" \
        'BEGIN { printf "run.sh: listening %.1f s after start (setup, build, model, load)\n", to - from }' >&2
    fi
  done
}
exec "./$build_dir/mkserve" serve --model "$model_dir" "$@" 2> >(report_listening)
