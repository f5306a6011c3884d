#!/bin/bash
# Builds the libFuzzer targets (clang, AddressSanitizer, UBSan) in build-fuzz/ and runs each for
# SECONDS_EACH seconds (default 300), starting from the seeds in fuzz/corpus/<name> (with the
# dictionary fuzz/<name>.dict where there is one); what it finds goes to build-fuzz/corpus/<name>.
# A crash leaves its input as build-fuzz/crash-* and fails the script.
#   bash scripts/fuzz.sh [target ...]    (default: every target)
set -euo pipefail
cd "$(dirname "$0")/.."
TARGETS=("$@")
[[ ${#TARGETS[@]} -gt 0 ]] || TARGETS=(request_fuzz json_schema_fuzz command4_parser_fuzz chat_template_fuzz tokenizer_fuzz
  tokenizer_json_fuzz model_config_fuzz safetensors_fuzz)
SECONDS_EACH=${SECONDS_EACH:-300}
command -v clang++ > /dev/null || apt-get install -y clang
CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DMKSERVE_FUZZ=ON -DMKSERVE_TESTS=OFF \
  -DMKSERVE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
ninja -C build-fuzz "${TARGETS[@]}"
for target in "${TARGETS[@]}"; do
  name=${target%_fuzz}
  mkdir -p "build-fuzz/corpus/$name"
  echo "== $target, ${SECONDS_EACH} s"
  dict=()
  [[ -f fuzz/$name.dict ]] && dict=(-dict="../fuzz/$name.dict")
  (cd build-fuzz && "./fuzz/$target" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 "${dict[@]}" "corpus/$name" "../fuzz/corpus/$name")
done
