#!/usr/bin/env bash
# Installs every build and test dependency of mkserve on a fresh Debian 12 machine, as root.
# Idempotent: packages already present are skipped, npm installs only when package-lock changed.
# --serve-only skips the npm test clients (scripts/run.sh: building and serving need none).
set -euo pipefail
cd "$(dirname "$0")/.."
serve_only=false
[[ ${1:-} == --serve-only ]] && serve_only=true

packages=(
  build-essential cmake ninja-build ccache git pkg-config
  libgtest-dev libgmock-dev googletest
  nlohmann-json3-dev libcpp-httplib-dev libboost1.81-dev libpcre2-dev libicu-dev
  clang-format nodejs npm curl
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$package")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup.sh: missing packages ${missing[*]}; run as root to install them" >&2
    exit 1
  fi
  # nodejs/npm may already come from outside Debian (NodeSource); do not fight over them.
  if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs/}")
    missing=("${missing[@]/npm/}")
  fi
  missing=(${missing[@]})
  if ((${#missing[@]})); then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi
$serve_only && exit 0  # scripts/run.sh: serving needs no npm client

# Test clients from npm (official openai SDK, reference tokenizers and jinja), one folder each.
# tests/e2e also holds the OpenCode CLI's linux-x64 build (opencode-linux-x64, the binary the
# opencode-ai wrapper installs): a 60 MB download, 177 MB on disk.
for dir in tests/e2e tests/tokenizer/compare tests/chat/compare; do
  [[ -f $dir/package.json ]] || continue
  stamp=$dir/node_modules/.mkserve-stamp
  if [[ ! -f $stamp || $dir/package-lock.json -nt $stamp ]]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    touch "$stamp"
  fi
  # The tests run the packages' compiled JavaScript, never their TypeScript sources or type
  # declarations: those go. The openai SDK's sources import its own src/resources/shared.ts by
  # a relative path one folder up, which reads like a path out of this repository.
  find "$dir/node_modules" \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' \) -delete
  rm -rf "$dir/node_modules/openai/src"
done
