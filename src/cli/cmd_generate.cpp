// `mkserve generate --model DIR --prompt-ids 1,2,3 [--max-tokens N] [--temperature T] [--seed S]
// [--ignore-eos] [--threads N]`: runs one prompt on the CPU reference backend and prints the
// generated token ids. The loop drives Backend::Step directly with one contiguous run of blocks
// per KV group; the engine's scheduler and block manager are not involved.
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/load_cpu_backend.h"
#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"

namespace mkserve::cli {
namespace {

constexpr int64_t kDefaultMaxTokens = 16;

constexpr char kUsage[] =
    "usage: mkserve generate --model DIR --prompt-ids 1,2,3 [--max-tokens N] [--temperature T]\n"
    "                        [--seed S] [--ignore-eos] [--threads N]\n"
    "\n"
    "Runs the prompt on the CPU reference backend and prints the generated token ids on one\n"
    "line, separated by single spaces (an end-of-sequence token that stops generation is\n"
    "printed too). Greedy unless --temperature > 0; --seed makes sampling repeatable. Stops at\n"
    "the config's eos_token_id unless --ignore-eos, and after --max-tokens (default 16).\n"
    "Text prompts (--prompt, --chat) need the tokenizer and are not supported yet.\n";

struct GenerateOptions {
  std::filesystem::path model_dir;
  std::vector<int32_t> prompt_ids;
  int64_t max_tokens = kDefaultMaxTokens;
  SamplingParams sampling;
  int num_threads = 0;
};

std::vector<int32_t> ToTokenIds(const std::vector<int64_t>& values) {
  std::vector<int32_t> ids;
  for (int64_t value : values) {
    if (value < 0 || value > std::numeric_limits<int32_t>::max()) {
      throw Error("--prompt-ids: " + std::to_string(value) + " is not a token id");
    }
    ids.push_back(static_cast<int32_t>(value));
  }
  return ids;
}

GenerateOptions ParseOptions(Args& args) {
  if (args.Value("prompt") || args.Value("chat")) {
    throw Error(
        "text prompts (--prompt, --chat) need the tokenizer, which generate does not use "
        "yet; pass token ids with --prompt-ids 1,2,3");
  }
  GenerateOptions options;
  options.model_dir = args.RequiredString("model");
  options.prompt_ids = ToTokenIds(args.IntList("prompt-ids", {}));
  options.max_tokens = args.Int("max-tokens", kDefaultMaxTokens);
  options.sampling.temperature = static_cast<float>(args.Double("temperature", 0.0));
  if (auto seed = args.Value("seed")) options.sampling.seed = args.Int("seed", 0);
  options.sampling.ignore_eos = args.Switch("ignore-eos");
  options.num_threads = static_cast<int>(args.Int("threads", 0));
  args.Finish();
  if (options.prompt_ids.empty()) throw Error("missing required flag --prompt-ids");
  if (options.max_tokens < 1) throw Error("--max-tokens must be at least 1");
  if (options.sampling.temperature < 0.0f) throw Error("--temperature must be >= 0");
  if (options.num_threads < 0) throw Error("--threads must be >= 0");
  options.sampling.max_tokens = static_cast<int32_t>(options.max_tokens);
  return options;
}

bool IsEos(const ModelConfig& config, int32_t token_id) {
  for (int32_t eos : config.eos_token_ids) {
    if (eos == token_id) return true;
  }
  return false;
}

// Prefill, then one decode step per generated token, each over the same contiguous blocks.
std::vector<int32_t> GenerateIds(Backend& backend, const GenerateOptions& options) {
  const int64_t prompt_tokens = static_cast<int64_t>(options.prompt_ids.size());
  const int64_t num_blocks = (prompt_tokens + options.max_tokens + kBlockTokens - 1) / kBlockTokens;
  std::vector<int32_t> table(num_blocks);
  for (int64_t i = 0; i < num_blocks; ++i) table[i] = static_cast<int32_t>(i);
  std::vector<int32_t> output;
  std::vector<int32_t> next_input;
  while (static_cast<int64_t>(output.size()) < options.max_tokens) {
    SequenceStep step;
    step.token_ids = output.empty() ? std::span<const int32_t>(options.prompt_ids)
                                    : std::span<const int32_t>(next_input);
    step.start_position =
        output.empty() ? 0 : prompt_tokens + static_cast<int64_t>(output.size()) - 1;
    step.block_tables.assign(backend.kv_layout().num_groups(), table);
    step.sample = true;
    step.sampling = &options.sampling;
    step.prompt_token_ids = options.prompt_ids;
    step.output_token_ids = output;
    step.sample_index = static_cast<int64_t>(output.size());
    int32_t token = backend.Step(StepInputs{{step}}).results.at(0).token_id;
    output.push_back(token);
    if (!options.sampling.ignore_eos && IsEos(backend.config(), token)) break;
    next_input = {token};
  }
  return output;
}

int RunGenerate(std::span<const std::string> argv) {
  for (const std::string& word : argv) {
    if (word == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  Args args(argv);
  GenerateOptions options = ParseOptions(args);
  CpuBackendOptions backend_options;
  int64_t total_tokens = static_cast<int64_t>(options.prompt_ids.size()) + options.max_tokens;
  backend_options.num_blocks = (total_tokens + kBlockTokens - 1) / kBlockTokens;
  backend_options.num_threads = options.num_threads;
  auto backend = LoadCpuBackend(options.model_dir, backend_options);
  const int64_t max_positions = backend->config().max_position_embeddings;
  if (max_positions > 0 && total_tokens > max_positions) {
    throw Error("prompt + --max-tokens = " + std::to_string(total_tokens) +
                " tokens exceeds max_position_embeddings " + std::to_string(max_positions));
  }
  std::vector<int32_t> ids = GenerateIds(*backend, options);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
  std::printf("%s\n", line.c_str());
  return 0;
}

const CommandRegistration kRegistration(
    {"generate", "generate token ids on the CPU backend (--model DIR --prompt-ids 1,2,3)",
     RunGenerate});

}  // namespace
}  // namespace mkserve::cli
