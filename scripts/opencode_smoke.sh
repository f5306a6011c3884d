#!/usr/bin/env bash
# OpenCode against an already-running mkserve with a real model: the model must read a file
# through OpenCode's read tool and answer with the secret word in it. Prints each request and
# reply and a pass/fail line per check; exits 1 when a check fails. OPENCODE_SMOKE_TIMEOUT_S
# bounds the run (default 600); OPENCODE_SMOKE_OUTPUT_TOKENS caps each answer (default half the
# served context, at most 32000).
#
#   scripts/opencode_smoke.sh http://127.0.0.1:8000 [API_KEY]
#
# Needs only the OpenCode binary, tests/e2e/node_modules/opencode-linux-x64 (scripts/setup.sh):
# the check runs on node when it is on PATH, else on the bun runtime inside that binary. For a
# machine without npm, carry that folder packed (about 43 MB as tar.xz):
#   tar -C tests/e2e -cJf opencode.tar.xz node_modules/opencode-linux-x64   # here
#   tar -C tests/e2e -xJf opencode.tar.xz                                    # there
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 ]]; then
  echo "usage: scripts/opencode_smoke.sh URL [API_KEY]" >&2
  exit 2
fi
opencode=tests/e2e/node_modules/opencode-linux-x64/bin/opencode
if [[ ! -x $opencode ]]; then
  echo "opencode_smoke.sh: no $opencode; run scripts/setup.sh (or unpack it, see above)" >&2
  exit 1
fi
if command -v node > /dev/null; then
  exec node tests/e2e/opencode_smoke.mjs "$@"
fi
BUN_BE_BUN=1 exec "$opencode" tests/e2e/opencode_smoke.mjs "$@"
