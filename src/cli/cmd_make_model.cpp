// `mkserve make-model --preset tiny|nmc [--layers N] [--seed S] [--shard-mb M] [--fused-experts]
// [--force] --out DIR`: writes a seeded random checkpoint (config.json, generation_config.json,
// safetensors shards; the tiny preset also gets the tiny tokenizer, whose ids it uses).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"
#include "model/presets.h"
#include "model/random_checkpoint.h"
#include "tokenizer/tiny_tokenizer.h"

namespace mkserve::cli {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kDefaultShardMb = 4096;
constexpr uint64_t kBytesPerMb = 1ull << 20;
constexpr int64_t kMaxShardMb = int64_t{1} << 40;

constexpr char kUsage[] =
    "usage: mkserve make-model --preset tiny|nmc --out DIR [--layers N] [--seed S]\n"
    "                          [--shard-mb M] [--fused-experts] [--force]\n"
    "\n"
    "Writes a seeded random checkpoint: config.json, generation_config.json and safetensors\n"
    "shards; the tiny preset also gets the tiny tokenizer, whose ids it uses.\n"
    "  --preset tiny|nmc  the built-in tiny model, or North Mini Code's geometry\n"
    "  --out DIR          the folder to write (made if missing; a non-empty one needs --force)\n"
    "  --layers N         the preset's layer pattern with N layers\n"
    "  --seed S           weight seed (default 0)\n"
    "  --shard-mb M       safetensors shard size in MiB (default 4096)\n"
    "  --fused-experts    store each layer's experts as fused tensors\n"
    "  --force            overwrite the model files in a non-empty DIR\n";

// A non-empty DIR is only reused with --force, so a typo cannot clobber a real checkpoint.
void CheckOutputDir(const fs::path& dir, bool force) {
  if (!fs::exists(dir)) return;
  if (!fs::is_directory(dir)) throw Error(dir.string() + " exists and is not a directory");
  if (!fs::is_empty(dir) && !force) {
    throw Error(dir.string() + " is not empty; pass --force to overwrite the model files in it");
  }
}

// The tiny model's ids (vocab, bos, eos, pad) are the tiny tokenizer's; check they still agree.
void WriteTinyTokenizer(const ModelConfig& config, const fs::path& dir) {
  if (config.vocab_size != tokenizer::kTinyVocabSize ||
      config.bos_token_id != tokenizer::kTinyBosId ||
      config.pad_token_id != tokenizer::kTinyPadId ||
      config.eos_token_ids != std::vector<int32_t>{tokenizer::kTinyEosId}) {
    throw Error("internal: the tiny preset's token ids disagree with the tiny tokenizer");
  }
  tokenizer::WriteTinyTokenizer(dir);
}

int RunMakeModel(std::span<const std::string> argv) {
  Args args(argv);
  std::string preset = args.RequiredString("preset");
  std::optional<int64_t> num_layers;
  if (auto layers = args.Value("layers")) num_layers = args.Int("layers", 0);
  int64_t seed = args.Int("seed", 0);
  // Past 2^40 MB the byte count would wrap (2^44 MB read as 0 bytes: a shard per tensor).
  const int64_t shard_mb = args.Int("shard-mb", kDefaultShardMb, 1, kMaxShardMb);
  bool fused = args.Switch("fused-experts");
  bool force = args.Switch("force");
  fs::path out = args.RequiredString("out");
  args.Finish();
  if (seed < 0) throw Error("--seed must be >= 0, got " + std::to_string(seed));

  ModelConfig config = PresetByName(preset, num_layers);
  RandomCheckpointOptions options{
      .seed = static_cast<uint64_t>(seed),
      .max_shard_bytes = static_cast<uint64_t>(shard_mb) * kBytesPerMb,
      .expert_layout = fused ? ExpertLayout::kFused : ExpertLayout::kPerExpert};
  bool fresh = false;  // the folder was absent or empty: a failed write empties it again
  try {
    CheckOutputDir(out, force);
    std::error_code absent;
    fresh = !fs::exists(out, absent) || fs::is_empty(out, absent);
    WriteRandomCheckpoint(config, options, out);
    if (preset == "tiny") WriteTinyTokenizer(config, out);
  } catch (const std::exception& error) {
    // A full disk used to leave a truncated checkpoint that a later run refused as "not empty"
    // or failed to parse; a path the system refuses is the user's mistake, not an internal one.
    std::error_code ignored;
    if (fresh) {
      for (const fs::directory_entry& entry : fs::directory_iterator(out, ignored)) {
        fs::remove_all(entry.path(), ignored);
      }
    }
    if (dynamic_cast<const Error*>(&error) != nullptr) throw;
    throw Error("cannot write the model to '" + out.string() + "': " + error.what());
  }
  std::printf("wrote %s model (%lld layers, seed %lld) to %s\n", preset.c_str(),
              static_cast<long long>(config.num_layers), static_cast<long long>(seed),
              out.string().c_str());
  return 0;
}

const CommandRegistration kRegistration(
    {"make-model", "write a seeded random checkpoint (--preset tiny|nmc --out DIR)", kUsage,
     RunMakeModel});

}  // namespace
}  // namespace mkserve::cli
