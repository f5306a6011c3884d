#!/usr/bin/env bash
# OpenCode against an already-running mkserve with a real model: the model must read a file
# through OpenCode's read tool and answer with the secret word in it. Needs node and
# tests/e2e/node_modules (scripts/setup.sh). Prints each request and reply and a pass/fail line
# per check; exits 1 when a check fails. OPENCODE_SMOKE_TIMEOUT_S bounds the run (default 600).
#
#   scripts/opencode_smoke.sh http://127.0.0.1:8000 [API_KEY]
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
  echo "usage: scripts/opencode_smoke.sh URL [API_KEY]" >&2
  exit 2
fi
if [[ ! -x tests/e2e/node_modules/opencode-linux-x64/bin/opencode ]]; then
  echo "opencode_smoke.sh: OpenCode is not installed; run scripts/setup.sh first" >&2
  exit 1
fi
exec node tests/e2e/opencode_smoke.mjs "$@"
