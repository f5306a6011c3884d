#!/bin/bash
# A checkpoint-less North Mini Code folder for `serve --random-weights` on the GPU machine:
# North's config.json (all 49 layers) beside the tiny model's tokenizer, its vocabulary padded to
# North's with words no merge produces. Encoding is unchanged, and every id the random model
# samples decodes to text, so each token is a chunk of the stream.
#   scripts/random_north_model.sh MKSERVE_BIN DIR       (DIR/config.json exists afterwards)
set -eu
bin=$(readlink -f "${1:?usage: scripts/random_north_model.sh MKSERVE_BIN DIR}")
dir=${2:?usage: scripts/random_north_model.sh MKSERVE_BIN DIR}
[[ -f $dir/config.json ]] && exit 0
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$bin" make-model --preset tiny --out "$scratch/tiny" > /dev/null
"$bin" make-model --preset nmc --layers 1 --out "$scratch/nmc1" > /dev/null
mkdir -p "$dir"
python3 - "$scratch" "$dir" <<'PY'
import json, shutil, sys
scratch, out = sys.argv[1], sys.argv[2]
config = json.load(open(f"{scratch}/nmc1/config.json"))
config["num_hidden_layers"] = 49
for key in ("layer_types", "mlp_layer_types"):  # derived again from the pattern keys
    config.pop(key, None)
json.dump(config, open(f"{out}/config.json", "w"), indent=1)
for name in ("tokenizer_config.json", "special_tokens_map.json"):
    try:
        shutil.copy(f"{scratch}/tiny/{name}", f"{out}/{name}")
    except FileNotFoundError:
        pass
tokenizer = json.load(open(f"{scratch}/tiny/tokenizer.json"))
vocab = tokenizer["model"]["vocab"]
for i in range(len(vocab), config["vocab_size"]):
    vocab["\u0120w%d" % i] = i
json.dump(tokenizer, open(f"{out}/tokenizer.json", "w"))
PY
