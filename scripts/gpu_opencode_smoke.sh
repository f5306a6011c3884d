#!/bin/bash
# OpenCode against a GPU server, as a smoke test: `serve --backend cuda --random-weights` on North
# Mini Code's geometry (scripts/random_north_model.sh; the megakernel decodes unless SERVE_FLAGS
# say otherwise), then scripts/opencode_smoke.sh against it. Random weights cannot call OpenCode's
# read tool, so the checks on the tool call and the answer fail by design; what this shows is that
# OpenCode's own requests (its ~10k-token prompt, its tools, streaming) are answered 200 by the
# GPU server, and what the server logged about them. With a real checkpoint, point
# scripts/opencode_smoke.sh at `serve --model DIR` instead: then every check must pass.
#   scripts/gpu_opencode_smoke.sh MKSERVE_BIN [SERVE_FLAGS...]
# Needs tests/e2e/node_modules/opencode-linux-x64 (see scripts/opencode_smoke.sh for carrying it).
# Logs go to $OUT (default /tmp/out).
set -u
bin=$(readlink -f "${1:?usage: scripts/gpu_opencode_smoke.sh MKSERVE_BIN [SERVE_FLAGS...]}")
shift
OUT=${OUT:-/tmp/out}
work=${WORK:-/tmp/opencode-smoke}
port=8300
mkdir -p "$OUT" "$work"
cd "$(dirname "$0")/.."
# MODEL_DIR (a checkpoint) and BACKEND replace the random North model and cuda, e.g. for a dry run
# of this script on the tiny model and the CPU backend.
model_flags=()
if [[ -z ${MODEL_DIR:-} ]]; then
  MODEL_DIR=$work/nmc
  scripts/random_north_model.sh "$bin" "$MODEL_DIR" || exit 1
  model_flags=(--random-weights)
fi
"$bin" serve --model "$MODEL_DIR" --backend "${BACKEND:-cuda}" "${model_flags[@]}" --port $port "$@" \
  > "$OUT/opencode-serve.log" 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null; wait $pid 2> /dev/null' EXIT
for _ in $(seq 1 600); do
  kill -0 $pid 2> /dev/null || { echo "serve exited:"; tail -20 "$OUT/opencode-serve.log"; exit 1; }
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health") == 200 ]] && break
  sleep 0.5
done
grep -iE 'decode path|megakernel|layered' "$OUT/opencode-serve.log" | head -3
# Random weights never end an answer: each is capped at 256 tokens unless a checkpoint is served.
[[ -n ${model_flags[*]} ]] && export OPENCODE_SMOKE_OUTPUT_TOKENS=${OPENCODE_SMOKE_OUTPUT_TOKENS:-256}
OPENCODE_SMOKE_TIMEOUT_S=${OPENCODE_SMOKE_TIMEOUT_S:-180} scripts/opencode_smoke.sh \
  "http://127.0.0.1:$port" > "$OUT/opencode-smoke.txt" 2>&1
echo "opencode_smoke.sh rc $? (1 expected with random weights: the tool-call checks fail)"
cat "$OUT/opencode-smoke.txt"
# The recorded exchanges come back with $OUT; the fields OpenCode sent, to compare with the ones
# docs/clients.md lists as ignored.
log=$(sed -n 's/^full log: //p' "$OUT/opencode-smoke.txt")
if [[ -f $log ]]; then
  cp "$log" "$OUT/opencode-exchanges.json"
  python3 - "$log" <<'PY'
import json, sys
fields = set()
for exchange in json.load(open(sys.argv[1]))["exchanges"]:
    if isinstance(exchange.get("body"), dict):
        fields.update(exchange["body"])
print("request fields OpenCode sent:", ", ".join(sorted(fields)))
PY
fi
grep -iE 'warn|error' "$OUT/opencode-serve.log" | sort | uniq -c | head -10
