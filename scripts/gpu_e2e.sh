#!/bin/bash
# The OpenAI SDK end-to-end suite (tests/e2e/tiny.test.mjs) through the CUDA backend, on the GPU
# machine: the same tests CI runs on the CPU backend, with `serve --backend cuda`.
#   scripts/gpu_e2e.sh MKSERVE_BIN
# Needs node >= 18 on PATH and tests/e2e/node_modules (`npm ci` there, or carried from a machine
# that ran scripts/setup.sh). Prints the node test summary; exits non-zero when a test fails.
set -u
bin=$(readlink -f "${1:?usage: scripts/gpu_e2e.sh MKSERVE_BIN}")
[[ -x "$bin" ]] || { echo "no executable $bin" >&2; exit 2; }
command -v node > /dev/null || { echo "node is not on PATH" >&2; exit 2; }
[[ -d tests/e2e/node_modules/openai ]] || { echo "tests/e2e/node_modules is missing" >&2; exit 2; }
cd tests/e2e
MKSERVE_BIN=$bin MKSERVE_E2E_BACKEND=cuda node --test --test-concurrency=1 tiny.test.mjs
