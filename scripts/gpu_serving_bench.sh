#!/bin/bash
# Serving benchmark on the GPU machine: `mkserve serve --backend cuda --random-weights` on North
# Mini Code's geometry, driven by `mkserve bench-serve`, next to `mkserve bench` at the same batch.
#   scripts/gpu_serving_bench.sh MKSERVE_BIN [CONFIG...]     (default config: layered)
# A CONFIG is a decode path (`default`: serve without --decode) followed by comma-separated
# choices: `cap=N` (serve --max-prefill-tokens-while-decoding N), `chunk=N` (serve
# --prompt-chunk-tokens N; 0: long prompts inside steps only), `temp=T` (bench-serve
# --temperature T), `ahead=MODE` (serve --decode-lookahead MODE); e.g. `layered,cap=768,temp=0`.
# Per config (PHASES, default "c1 c8 c32 c64 arrival"): start-up time, concurrency 1 / 8 / 32 / 64 with
# distinct ~550-token chat prompts (256 output tokens, ignore_eos), then ITL with 8 streams
# decoding while three distinct 32K-token prompts arrive, against the same 8 streams alone, and a
# 32K prompt prefilled alone. Each phase's engine steps (decode-only, mixed, prefill-only: count,
# mean step and backend ms, from /metrics) are printed in a second table.
# MODE=grammar instead prints, per config, ITL p50 with and without response_format json_object
# at batch 1 and 64 (constrained decoding's cost per token).
# The weights are random, the tokenizer is the tiny model's padded to North's vocabulary (prompt
# lengths are counted with the server's own /tokenize). JSON per run and the server logs go to $OUT; a table is printed last.
set -u
bin=$(readlink -f "${1:?usage: scripts/gpu_serving_bench.sh MKSERVE_BIN [CONFIG...]}")
shift
configs=("${@:-layered}")
phases=" ${PHASES:-c1 c8 c32 c64 arrival} "
OUT=${OUT:-/tmp/out}
work=${WORK:-/tmp/serving-bench}
port=8100
url=http://127.0.0.1:$port/v1
mkdir -p "$OUT" "$work"
cd "$(dirname "$0")/.."

# North's geometry with random weights and the tiny tokenizer (scripts/random_north_model.sh).
scripts/random_north_model.sh "$bin" "$work/nmc" || exit 1

wait_healthy() {  # pid -> 0 when /health answers 200
  for _ in $(seq 1 600); do
    kill -0 "$1" 2> /dev/null || return 1
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health") == 200 ]] && return 0
    sleep 0.5
  done
  return 1
}

# Prompt files: `count` distinct prompts of a target length measured by the running server's
# /tokenize. Each is the shipped coding prompts' lines in its own shuffled order, so requests
# share neither a prefix (the prefix cache) nor most of their context, as different users'
# requests would.
make_prompts() {  # out_file count target_tokens
  python3 - "$1" "$2" "$3" "$url" <<'EOF'
import json, random, sys, urllib.request
out, count, target, url = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
lines = [line for record in open("data/bench/coding_prompts.jsonl")
         for line in json.loads(record)["prompt"].splitlines() if line.strip()]
def tokens(text):
    body = json.dumps({"prompt": text}).encode()
    request = urllib.request.Request(url.replace("/v1", "") + "/tokenize", body,
                                     {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(request))["count"]
def shuffled(seed, chars):  # the lines in the seed's order, repeated to `chars` characters
    text, round = "", 0
    while len(text) < chars:
        order = lines[:]
        random.Random(seed * 1000 + round).shuffle(order)
        text += "\n".join(order) + "\n"
        round += 1
    return text[:chars]
sample = shuffled(0, 20000)
chars = int(target * len(sample) / tokens(sample))
with open(out, "w") as f:
    for i in range(count):
        f.write(json.dumps({"prompt": f"Request {i}: review this.\n" + shuffled(i + 1, chars)}) + "\n")
EOF
}

declare -A ROW STEPS
if [[ ${MODE:-serving} == grammar ]]; then
  echo "| decode | batch | ITL p50 free ms | ITL p50 json_object ms | difference | failed free / json |"
  echo "|---|---|---|---|---|---|"
fi
for config in "${configs[@]}"; do
  IFS=, read -r path choices <<< "$config"
  serve_args=() client_args=()
  for choice in ${choices//,/ }; do
    case $choice in
      cap=*) serve_args+=(--max-prefill-tokens-while-decoding "${choice#cap=}") ;;
      chunk=*) serve_args+=(--prompt-chunk-tokens "${choice#chunk=}") ;;
      temp=*) client_args+=(--temperature "${choice#temp=}") ;;
      ahead=*) serve_args+=(--decode-lookahead "${choice#ahead=}") ;;
      *) echo "unknown choice $choice in $config" >&2; exit 2 ;;
    esac
  done
  label=${config//,/-}
  decode_args=(--decode "$path")
  [[ $path == default ]] && decode_args=()
  start=$(date +%s.%N)
  "$bin" serve --model "$work/nmc" --backend cuda --random-weights "${decode_args[@]}" --port $port \
    --max-batch 64 "${serve_args[@]}" > "$OUT/serve-$label.log" 2>&1 &
  pid=$!
  if ! wait_healthy $pid; then
    echo "serve $config did not become healthy" >&2
    tail -20 "$OUT/serve-$label.log" >&2
    kill $pid 2> /dev/null
    continue
  fi
  ready=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
  make_prompts "$work/chat550.jsonl" 400 550
  make_prompts "$work/long32k.jsonl" 4 32768
  head -3 "$work/long32k.jsonl" > "$work/long32k-3.jsonl"
  tail -1 "$work/long32k.jsonl" > "$work/long32k-1.jsonl"
  metrics() { curl -s "http://127.0.0.1:$port/metrics" > "$1"; }
  bench() {  # name args...
    local name=$1
    shift
    metrics "$OUT/$label-$name.metrics-before"
    "$bin" bench-serve --url "$url" --ignore-eos --json "$OUT/$label-$name.json" "${client_args[@]}" "$@" \
      > "$OUT/$label-$name.txt" 2>&1
    metrics "$OUT/$label-$name.metrics-after"
  }
  if [[ ${MODE:-serving} == grammar ]]; then
    # Constrained decoding's cost: the same requests with and without response_format json_object
    # (no ignore_eos: the server refuses it with a constraint), batch 1 and 64.
    for b in 1 64; do
      "$bin" bench-serve --url "$url" --json "$OUT/$label-free$b.json" \
        --prompts "$work/chat550.jsonl" --concurrency $b --requests $((2 * b + 2)) \
        --max-tokens 128 > "$OUT/$label-free$b.txt" 2>&1
      "$bin" bench-serve --url "$url" --json "$OUT/$label-json$b.json" \
        --prompts "$work/chat550.jsonl" --concurrency $b --requests $((2 * b + 2)) \
        --max-tokens 128 --response-format json_object > "$OUT/$label-json$b.txt" 2>&1
    done
    kill -TERM $pid
    wait $pid
    python3 - "$OUT" "$label" <<'EOF'
import json, sys
out, path = sys.argv[1:3]
for b in ("1", "64"):
    free = json.load(open(f"{out}/{path}-free{b}.json"))
    constrained = json.load(open(f"{out}/{path}-json{b}.json"))
    print(f"| {path} | {b} | {free['itl_ms']['p50']:.2f} | {constrained['itl_ms']['p50']:.2f} | "
          f"{constrained['itl_ms']['p50'] - free['itl_ms']['p50']:+.2f} | "
          f"{free['requests_failed']} / {constrained['requests_failed']} |")
EOF
    continue
  fi
  [[ $phases == *" c1 "* ]] &&
    bench c1 --prompts "$work/chat550.jsonl" --concurrency 1 --requests 6 --max-tokens 256
  [[ $phases == *" c8 "* ]] &&
    bench c8 --prompts "$work/chat550.jsonl" --concurrency 8 --requests 24 --max-tokens 256
  [[ $phases == *" c32 "* ]] &&
    bench c32 --prompts "$work/chat550.jsonl" --concurrency 32 --requests 96 --max-tokens 256
  [[ $phases == *" c64 "* ]] &&
    bench c64 --prompts "$work/chat550.jsonl" --concurrency 64 --requests 192 --max-tokens 256
  if [[ $phases == *" arrival "* ]]; then
    bench steady8 --prompts "$work/chat550.jsonl" --concurrency 8 --requests 8 --max-tokens 768
    bench alone32k --prompts "$work/long32k-1.jsonl" --concurrency 1 --requests 1 --max-tokens 1
    bench loaded8 --prompts "$work/chat550.jsonl" --concurrency 8 --requests 8 --max-tokens 768 &
    loaded=$!
    sleep 3
    bench arrive32k --prompts "$work/long32k-3.jsonl" --concurrency 3 --requests 3 --max-tokens 1
    wait $loaded
  fi
  kill -TERM $pid
  wait $pid
  STEPS[$label]=$(python3 - "$OUT" "$label" <<'EOF'
import os, re, sys
out, label = sys.argv[1:3]
def read(path):
    values = {}
    for line in open(path):
        m = re.match(r'mkserve_step_(duration_seconds_sum|duration_seconds_count|backend_seconds_total|prefill_tokens_total|decode_rows_total)\{kind="(\w+)"\} (\S+)', line)
        if m:
            values[(m[1], m[2])] = float(m[3])
        m = re.match(r'mkserve_prompt_chunk_tokens_total (\S+)', line)
        if m:
            values[("chunk_tokens", "")] = float(m[1])
    return values
for phase in ("c1", "c8", "c32", "c64", "steady8", "arrive32k"):
    before, after = f"{out}/{label}-{phase}.metrics-before", f"{out}/{label}-{phase}.metrics-after"
    if not (os.path.exists(before) and os.path.exists(after)):
        continue
    b, a = read(before), read(after)
    d = lambda key, kind: a.get((key, kind), 0) - b.get((key, kind), 0)
    cells = [label, phase]
    for kind in ("decode", "mixed", "prefill"):
        n = d("duration_seconds_count", kind)
        if n == 0:
            cells.append("-")
            continue
        cells.append(f"{n:.0f} x {1000 * d('duration_seconds_sum', kind) / n:.1f} ms "
                     f"(backend {1000 * d('backend_seconds_total', kind) / n:.1f}; "
                     f"{d('decode_rows_total', kind) / n:.0f} rows, "
                     f"{d('prefill_tokens_total', kind) / n:.0f} prompt tok)")
    cells.append(f"{d('chunk_tokens', ''):.0f}")
    print("| " + " | ".join(cells) + " |")
EOF
)
  ROW[$label]=$(python3 - "$OUT" "$label" "$ready" <<'EOF'
import json, sys
out, path, ready = sys.argv[1:4]
def load(name):
    try:
        return json.load(open(f"{out}/{path}-{name}.json"))
    except Exception:
        return None
cells = [path, ready]
for c in ("c1", "c8", "c32", "c64"):
    r = load(c)
    cells.append("-" if r is None else
                 f"{r['output_tok_s']:.0f} (ITL p50 {r['itl_ms']['p50']:.1f}, fail {r['requests_failed']})")
r = load("c1")
cells.append("-" if r is None else f"{r['ttft_ms']['p50']:.0f}")
steady, loaded, alone, arrive = load("steady8"), load("loaded8"), load("alone32k"), load("arrive32k")
if None in (steady, loaded, alone, arrive):
    cells += ["-", "-"]
else:
    cells.append(f"{steady['itl_ms']['p99']:.1f} -> {loaded['itl_ms']['p99']:.1f} "
                 f"({loaded['itl_ms']['p99'] / steady['itl_ms']['p99']:.2f}x)")
    # Three 32K prompts arrived together: their prefill speed is 3 prompts over the run's
    # duration, against one prompt alone over its TTFT.
    alone_s = alone["ttft_ms"]["p50"] / 1000
    cells.append(f"{3 * alone_s / arrive['duration_s'] * 100:.0f} %")
print("| " + " | ".join(cells) + " |")
EOF
)
done

[[ ${MODE:-serving} == grammar ]] && exit 0
echo
echo "| config | start-up s | c=1 tok/s | c=8 tok/s | c=32 tok/s | c=64 tok/s | TTFT c=1 p50 ms | ITL p99 steady -> 32K arrivals | 32K prefill vs alone |"
echo "|---|---|---|---|---|---|---|---|---|"
for config in "${configs[@]}"; do echo "${ROW[${config//,/-}]:-| $config | failed |}"; done
echo
echo "| config | phase | decode-only steps | mixed steps | prefill-only steps | prompt tokens in chunks beside |"
echo "|---|---|---|---|---|---|"
for config in "${configs[@]}"; do echo "${STEPS[${config//,/-}]:-}"; done
