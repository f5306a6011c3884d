#!/bin/bash
# The OpenAI SDK end-to-end suite (tests/e2e/tiny.test.mjs) through the CUDA backend, on the GPU
# machine: the same tests CI runs on the CPU backend, with `serve --backend cuda`.
#   scripts/gpu_e2e.sh MKSERVE_BIN [SERVE_FLAGS...]
#   MEGAKERNEL=1 scripts/gpu_e2e.sh MKSERVE_BIN [SERVE_FLAGS...]
# SERVE_FLAGS go to every server the suite starts. The tiny model's head_dim (16) is not one the
# megakernel runs, so serve decodes it on the layered path; MEGAKERNEL=1 instead writes a tiny
# model whose config.json says head_dim 128 and hidden_size 128 (the tiny tokenizer, random
# weights from --random-weights) and serves it with --decode megakernel.
# Needs node >= 18 on PATH and tests/e2e/node_modules (`npm ci` there, or carried from a machine
# that ran scripts/setup.sh). Prints the node test summary; exits non-zero when a test fails.
set -u
bin=$(readlink -f "${1:?usage: scripts/gpu_e2e.sh MKSERVE_BIN [SERVE_FLAGS...]}")
shift
[[ -x "$bin" ]] || { echo "no executable $bin" >&2; exit 2; }
command -v node > /dev/null || { echo "node is not on PATH" >&2; exit 2; }
[[ -d tests/e2e/node_modules/openai ]] || { echo "tests/e2e/node_modules is missing" >&2; exit 2; }
flags=("$@")
if [[ "${MEGAKERNEL:-0}" == 1 ]]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  "$bin" make-model --preset tiny --out "$work/tiny" > /dev/null || exit 1
  node -e '
    const fs = require("fs");
    const file = process.argv[1];
    const config = JSON.parse(fs.readFileSync(file, "utf8"));
    Object.assign(config, { head_dim: 128, hidden_size: 128 });
    fs.writeFileSync(file, JSON.stringify(config, null, 1));
  ' "$work/tiny/config.json" || exit 1
  export MKSERVE_TINY_MODEL=$work/tiny
  flags+=(--random-weights --decode megakernel)
fi
cd tests/e2e
MKSERVE_BIN=$bin MKSERVE_E2E_BACKEND=cuda MKSERVE_E2E_SERVE_ARGS="${flags[*]}" \
  node --test --test-concurrency=1 tiny.test.mjs
