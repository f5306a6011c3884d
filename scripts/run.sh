#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, build, write the tiny built-in model once,
# then serve it on the OpenAI API (CPU reference backend) at http://127.0.0.1:8000/v1.
# Extra arguments go to `mkserve serve` (e.g. --port 9000 --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
model_dir=${MODEL_DIR:-build/models/tiny}
[[ -f $model_dir/config.json ]] || ./build/mkserve make-model --preset tiny --out "$model_dir"
exec ./build/mkserve serve --model "$model_dir" "$@"
