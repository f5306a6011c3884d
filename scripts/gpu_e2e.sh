#!/bin/bash
# The OpenAI SDK end-to-end suite (tests/e2e/tiny.test.mjs) through the CUDA backend, on the GPU
# machine: the same tests CI runs on the CPU backend, with `serve --backend cuda`.
#   scripts/gpu_e2e.sh MKSERVE_BIN [SERVE_FLAGS...]
# SERVE_FLAGS go to every server the suite starts, e.g. `--decode megakernel` (the megakernel's op
# bodies need head_dim 128: with it, also pass --random-weights and point MKSERVE_TINY_MODEL at a
# tiny model whose config.json says head_dim 128 and hidden_size 128).
# Needs node >= 18 on PATH and tests/e2e/node_modules (`npm ci` there, or carried from a machine
# that ran scripts/setup.sh). Prints the node test summary; exits non-zero when a test fails.
set -u
bin=$(readlink -f "${1:?usage: scripts/gpu_e2e.sh MKSERVE_BIN [SERVE_FLAGS...]}")
shift
[[ -x "$bin" ]] || { echo "no executable $bin" >&2; exit 2; }
command -v node > /dev/null || { echo "node is not on PATH" >&2; exit 2; }
[[ -d tests/e2e/node_modules/openai ]] || { echo "tests/e2e/node_modules is missing" >&2; exit 2; }
cd tests/e2e
MKSERVE_BIN=$bin MKSERVE_E2E_BACKEND=cuda MKSERVE_E2E_SERVE_ARGS="$*" \
  node --test --test-concurrency=1 tiny.test.mjs
