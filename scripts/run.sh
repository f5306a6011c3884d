#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: set up, build, write the tiny built-in model once,
# then run mkserve on it. Extra arguments go to the mkserve command.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
model_dir=${MODEL_DIR:-build/models/tiny}
[[ -f $model_dir/config.json ]] || ./build/mkserve make-model --preset tiny --out "$model_dir"
exec ./build/mkserve generate --model "$model_dir" --prompt-ids 2,10,11,12 --max-tokens 16 "$@"
