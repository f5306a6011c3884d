// `mkserve bench --random-weights [--model DIR] [--layers N] --batch 1,8,64 --context 1024,8192
// --decode NAME [--prefill 1024,8192] [--json FILE]`: the decode benchmark of
// docs/speed-of-light.md on the CUDA backend. Measures the streaming-read bandwidth first, then
// the decode step per (batch, context) over a randomly filled KV cache, then prefill
// tokens/s, and prints a markdown table last. --breakdown adds, per (batch, context), the eager
// step's GPU time per op class with the bytes each must read and its achieved GB/s.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "common/args.h"
#include "common/error.h"

#ifdef MKSERVE_HAS_CUDA
#include "backends/cuda/core/device_info.h"
#include "backends/cuda/decode/decode_path_registry.h"
#include "backends/cuda/tools/decode_bench.h"
#include "backends/cuda/tools/read_bandwidth.h"
#include "backends/cuda/tools/step_breakdown.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "cli/megakernel_policy_flag.h"
#include "cli/report_path_flag.h"
#include "model/presets.h"
#endif

namespace mkserve::cli {
namespace {

constexpr char kUsage[] =
    "usage: mkserve bench --random-weights [--model DIR] [--layers N] [--batch 1,8,64]\n"
    "                     [--context 1024,8192] [--decode layered,NAME...] [--prefill 1024,8192]\n"
    "                     [--steps 20] [--gpu-memory-fraction 0.9] [--seed 0] [--json FILE]\n"
    "                     [--breakdown] [--sampling greedy|sampled] [--tokens distinct|same]\n"
    "                     [--grouped-moe-min-tokens N] [--megakernel-policy FILE]\n"
    "\n"
    "Random weights at North Mini Code geometry (or --model DIR's config.json geometry;\n"
    "--layers keeps the layer pattern with fewer layers, preset geometry only). Prints\n"
    "step ms, tok/s, bytes/step, distinct experts per layer, SoL tok/s and % SoL.\n"
    "--decode: a comma list, run in turn in one process: layered (default: eager kernels, then\n"
    "graphs where they apply) or decode paths by name (eager, graph, megakernel). Rows are\n"
    "labelled with the path that ran; \"vs layered\" divides by layered+graphs at the same point "
    "and\n"
    "mode, whose routed experts also set the SoL bytes of the other paths (same weights, same "
    "inputs).\n"
    "--breakdown: per-op GPU time of eager decode steps (CUDA events), bytes and GB/s.\n"
    "--sampling sampled: decode with temperature 0.7, top-p 0.95, seeded (the GPU sampler)\n"
    "instead of greedy argmax.\n"
    "--tokens same: every row of a decode step gets the same token at the same position, so the\n"
    "whole batch routes to the same experts (the most skewed MoE load); distinct (default) "
    "spreads\n"
    "the rows over the experts.\n"
    "--grouped-moe-min-tokens N: steps of at least N tokens run the experts as tensor-core "
    "grouped\n"
    "GEMMs instead of the decode GEMV (CudaBackendOptions::grouped_moe_min_tokens).\n"
    "--megakernel-policy FILE: the megakernel's schedule policy (wave order, placement, tile\n"
    "shapes; docs/megakernel.md) from a JSON file, for the megakernel rows.\n";

#ifdef MKSERVE_HAS_CUDA

constexpr int64_t kReadBufferBytes = int64_t{4} << 30;
constexpr int kReadRuns = 10;
constexpr int kWarmupSteps = 3;
constexpr int kPrefillRuns = 3;
constexpr float kKvStd = 0.01f;
constexpr int kBreakdownSteps = 5;

struct BenchOptions {
  std::string model_dir;
  int64_t layers = 0;
  std::vector<int64_t> batches, contexts, prefills;
  int steps = 20;
  double gpu_memory_fraction = 0.9;
  uint64_t seed = 0;
  std::string json_path;
  bool breakdown = false;
  bool sampled = false;     // decode with BenchSampledParams() through the GPU sampler
  bool same_token = false;  // every decode row the same token: the whole batch on top-k experts
  int64_t grouped_moe_min_tokens = 0;     // 0: the backend's default
  std::vector<std::string> decode_paths;  // CudaBackendOptions::decode_path values, in turn
  std::string megakernel_policy;          // CudaBackendOptions::megakernel_policy (JSON text)
};

BenchOptions ParseOptions(Args& args) {
  BenchOptions o;
  if (!args.Switch("random-weights")) {
    throw Error("bench needs --random-weights (checkpoint weights are not benchmarked yet)");
  }
  o.model_dir = args.String("model", "");
  o.layers = args.Int("layers", 0);
  o.batches = args.IntList("batch", {1, 8, 64});
  o.contexts = args.IntList("context", {1024, 8192});
  o.prefills = args.IntList("prefill", {1024, 8192});
  o.steps = static_cast<int>(args.Int("steps", 20));
  o.gpu_memory_fraction = args.Double("gpu-memory-fraction", 0.9);
  o.seed = static_cast<uint64_t>(args.Int("seed", 0));
  o.json_path = args.String("json", "");
  o.breakdown = args.Switch("breakdown");
  const std::vector<std::string> decode = args.StringList("decode", {"layered"});
  const std::string sampling = args.String("sampling", "greedy");
  const std::string tokens = args.String("tokens", "distinct");
  o.grouped_moe_min_tokens = args.Int("grouped-moe-min-tokens", 0);
  const std::string policy_file = MegakernelPolicyPath(args);
  args.Finish();
  if (!policy_file.empty()) {
    if (std::find(decode.begin(), decode.end(), "megakernel") == decode.end()) {
      throw Error("--megakernel-policy needs megakernel in --decode");
    }
    o.megakernel_policy = MegakernelPolicyJson(policy_file);
  }
  if (tokens != "distinct" && tokens != "same") {
    throw Error("--tokens must be distinct or same, got " + tokens);
  }
  o.same_token = tokens == "same";
  if (sampling != "greedy" && sampling != "sampled") {
    throw Error("--sampling must be greedy or sampled, got " + sampling);
  }
  o.sampled = sampling == "sampled";
  // "layered" measures the eager kernels and the graphs where they apply, as before the paths.
  for (const std::string& name : decode) {
    cuda::CheckDecodePathChoice(name);
    if (name == cuda::kLayeredDecode) {
      o.decode_paths.insert(o.decode_paths.end(), {"eager", "layered"});
    } else {
      o.decode_paths.push_back(name);
    }
  }
  if (o.steps < 1 || o.steps > 100000) throw Error("--steps must be 1..100000");
  if (o.layers < 0) throw Error("--layers must not be negative (0: the preset's layer count)");
  if (!(o.gpu_memory_fraction > 0.0 && o.gpu_memory_fraction < 1.0)) {
    throw Error("--gpu-memory-fraction must be in (0, 1)");
  }
  for (int64_t b : o.batches) {
    if (b < 1 || b > 64) throw Error("--batch values must be in 1..64, got " + std::to_string(b));
  }
  // Bounded again by the model's positions once it is loaded (CheckTokenCounts).
  for (int64_t c : o.contexts) {
    if (c < 1) throw Error("--context values must be at least 1, got " + std::to_string(c));
  }
  for (int64_t t : o.prefills) {
    if (t < 1) throw Error("--prefill values must be at least 1, got " + std::to_string(t));
  }
  CheckReportPath("--json", o.json_path);
  return o;
}

// Every context and prompt the run would measure fits the model's positions (a decode step at
// context c writes position c), checked before the first measurement rather than after the
// others have run.
void CheckTokenCounts(const BenchOptions& o, const ModelConfig& config) {
  const int64_t positions = config.max_position_embeddings;
  if (positions <= 0) return;
  for (int64_t c : o.contexts) {
    if (c >= positions) {
      throw Error("--context " + std::to_string(c) + " is past the model's " +
                  std::to_string(positions) + " positions (max_position_embeddings)");
    }
  }
  for (int64_t t : o.prefills) {
    if (t > positions) {
      throw Error("--prefill " + std::to_string(t) + " is past the model's " +
                  std::to_string(positions) + " positions (max_position_embeddings)");
    }
  }
}

std::unique_ptr<cuda::CudaBackend> LoadBench(const BenchOptions& o, int64_t max_batch,
                                             std::shared_ptr<cuda::ToolHooks> hooks) {
  cuda::CudaBackendOptions options;
  options.hooks = std::move(hooks);
  options.random_weights = true;
  options.seed = o.seed;
  options.gpu_memory_fraction = o.gpu_memory_fraction;
  options.max_batch = max_batch;
  options.max_num_tokens = 8192;
  if (o.grouped_moe_min_tokens > 0) options.grouped_moe_min_tokens = o.grouped_moe_min_tokens;
  options.megakernel_policy = o.megakernel_policy;
  // The paths switch in turn after the KV pool exists: start with the megakernel when it is among
  // them, so the pool leaves room for its panel copies (DecodePathBytes).
  if (std::find(o.decode_paths.begin(), o.decode_paths.end(), "megakernel") !=
      o.decode_paths.end()) {
    options.decode_path = "megakernel";
  }
  if (o.layers > 0) {
    if (!o.model_dir.empty()) throw Error("--layers works with the preset geometry only");
    ModelConfig config = NmcPreset(o.layers);
    cuda::DeviceWeights weights = cuda::DeviceWeights::Random(config, o.seed);
    return std::make_unique<cuda::CudaBackend>(std::move(config), std::move(weights), options);
  }
  return cuda::LoadCudaBackend(o.model_dir, options);
}

// The layered+graphs point of the same mode (`reference`, e.g. "layered+graphs+sampled") at the
// same batch and context: the reference of the other paths.
const cuda::DecodePoint* LayeredPoint(const std::vector<cuda::DecodePoint>& decode,
                                      const std::string& reference, const cuda::DecodePoint& p) {
  for (const auto& q : decode) {
    if (q.path == reference && q.batch == p.batch && q.context_tokens == p.context_tokens) {
      return &q;
    }
  }
  return nullptr;
}

// Other paths route like the layered one (same weights, same inputs) but leave no routing where
// CountDistinctExperts reads it: their SoL bytes come from the layered point of the run, or, in a
// run without one, from one step of the same batch on the backend's path (a layered one here).
void SetOtherPathsSpeedOfLight(std::vector<cuda::DecodePoint>& decode, const std::string& reference,
                               cuda::CudaBackend& backend, const SamplingParams& sampling,
                               bool same_token, double read_bw) {
  for (auto& p : decode) {
    if (p.path.rfind("layered", 0) == 0) continue;
    const cuda::DecodePoint* layered = LayeredPoint(decode, reference, p);
    const int64_t experts = layered != nullptr
                                ? layered->distinct_experts
                                : cuda::CountRoutedExperts(backend, p, sampling, same_token);
    cuda::SetSpeedOfLight(p, backend.config(), experts, read_bw);
  }
}

// tok/s over the layered+graphs tok/s at the same point; 0 when there is none.
double VsLayered(const std::vector<cuda::DecodePoint>& decode, const std::string& reference,
                 const cuda::DecodePoint& p) {
  const cuda::DecodePoint* layered = LayeredPoint(decode, reference, p);
  return layered != nullptr ? p.tokens_per_second / layered->tokens_per_second : 0.0;
}

void PrintTable(const std::vector<cuda::DecodePoint>& decode, const std::string& reference,
                const std::vector<cuda::PrefillPoint>& prefill, double read_bw) {
  std::printf("\nstreaming read: %.2f TB/s\n\n", read_bw / 1e12);
  std::printf(
      "| path | batch | context | step ms | ahead step ms | tok/s | MB/step | experts/layer "
      "| SoL tok/s | %% SoL | vs layered |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& p : decode) {
    std::printf("| %s | %lld | %lld | %.3f | %.3f | %.1f | %.1f | %lld | %.1f | %.1f | %.2fx |\n",
                p.path.c_str(), static_cast<long long>(p.batch),
                static_cast<long long>(p.context_tokens), p.step_ms, p.ahead_step_ms,
                p.tokens_per_second, p.bytes_per_step / 1e6,
                static_cast<long long>(p.distinct_experts), p.sol_tokens_per_second,
                p.percent_of_sol, VsLayered(decode, reference, p));
  }
  std::printf("\n| prefill tokens | ms | tok/s |\n|---|---|---|\n");
  for (const auto& p : prefill) {
    std::printf("| %lld | %.1f | %.0f |\n", static_cast<long long>(p.prompt_tokens), p.ms,
                p.tokens_per_second);
  }
}

void PrintBreakdown(const cuda::StepBreakdown& b) {
  std::printf(
      "\nbreakdown batch %lld context %lld: eager wall %.3f ms/step, GPU %.3f ms/step, "
      "%lld experts/layer\n\n| op | us/step | share | MB read | GB/s |\n"
      "|---|---|---|---|---|\n",
      static_cast<long long>(b.batch), static_cast<long long>(b.context_tokens), b.wall_ms,
      b.gpu_ms, static_cast<long long>(b.distinct_experts));
  for (const cuda::OpShare& op : b.ops) {
    std::printf("| %s | %.1f | %.1f%% | %.2f | %.0f |\n", cuda::StepOpName(op.op), op.us_per_step,
                100.0 * op.share, op.bytes / 1e6, op.gb_per_second);
  }
}

nlohmann::json BreakdownJson(const std::vector<cuda::StepBreakdown>& breakdowns) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& b : breakdowns) {
    nlohmann::json ops = nlohmann::json::object();
    for (const cuda::OpShare& op : b.ops) {
      ops[cuda::StepOpName(op.op)] = {{"us_per_step", op.us_per_step},
                                      {"share", op.share},
                                      {"bytes", op.bytes},
                                      {"gb_s", op.gb_per_second}};
    }
    j.push_back({{"batch", b.batch},
                 {"context", b.context_tokens},
                 {"wall_ms", b.wall_ms},
                 {"gpu_ms", b.gpu_ms},
                 {"distinct_experts", b.distinct_experts},
                 {"ops", ops}});
  }
  return j;
}

std::vector<cuda::StepBreakdown> RunBreakdowns(cuda::CudaBackend& backend, cuda::ToolHooks& hooks,
                                               const BenchOptions& o) {
  std::vector<cuda::StepBreakdown> breakdowns;
  if (!o.breakdown) return breakdowns;
  for (int64_t context : o.contexts) {
    for (int64_t batch : o.batches) {
      breakdowns.push_back(
          cuda::BenchBreakdown(backend, hooks, batch, context, kWarmupSteps, kBreakdownSteps));
    }
  }
  return breakdowns;
}

nlohmann::json ToJson(const std::vector<cuda::DecodePoint>& decode, const std::string& reference,
                      const std::vector<cuda::PrefillPoint>& prefill, double read_bw) {
  nlohmann::json j = {{"read_bytes_per_second", read_bw},
                      {"decode", nlohmann::json::array()},
                      {"prefill", nlohmann::json::array()}};
  for (const auto& p : decode) {
    j["decode"].push_back({{"path", p.path},
                           {"batch", p.batch},
                           {"context", p.context_tokens},
                           {"step_ms", p.step_ms},
                           {"ahead_step_ms", p.ahead_step_ms},
                           {"tok_s", p.tokens_per_second},
                           {"bytes_per_step", p.bytes_per_step},
                           {"distinct_experts", p.distinct_experts},
                           {"sol_tok_s", p.sol_tokens_per_second},
                           {"pct_sol", p.percent_of_sol},
                           {"vs_layered", VsLayered(decode, reference, p)}});
  }
  for (const auto& p : prefill) {
    j["prefill"].push_back(
        {{"tokens", p.prompt_tokens}, {"ms", p.ms}, {"tok_s", p.tokens_per_second}});
  }
  return j;
}

int RunBench(std::span<const std::string> argv) {
  Args args(argv);
  const BenchOptions o = ParseOptions(args);
  cuda::CurrentDeviceInfo();  // no GPU: a reason to act on, not the first failed cudaMalloc
  const double read_bw = cuda::MeasureReadBandwidth(kReadBufferBytes, kReadRuns).bytes_per_second;
  std::fprintf(stderr, "streaming read bandwidth: %.2f TB/s\n", read_bw / 1e12);
  const int64_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  auto hooks = std::make_shared<cuda::ToolHooks>();
  auto backend = LoadBench(o, max_batch, hooks);
  CheckTokenCounts(o, backend->config());
  backend->kv_pool().FillRandom(o.seed + 1, kKvStd);
  const SamplingParams sampling = o.sampled ? cuda::BenchSampledParams() : cuda::GreedyParams();
  // Every row of a run shares its mode, so the reference is layered+graphs in that mode.
  const std::string reference = "layered+graphs" + cuda::DecodeModeSuffix(sampling, o.same_token);
  std::vector<cuda::DecodePoint> decode;
  for (const std::string& path : o.decode_paths) {
    backend->set_decode_path(path);
    for (int64_t context : o.contexts) {
      for (int64_t batch : o.batches) {
        decode.push_back(cuda::BenchDecode(*backend, batch, context, kWarmupSteps, o.steps, read_bw,
                                           sampling, o.same_token));
        std::fprintf(stderr, "%s batch %lld context %lld: %.3f ms\n", decode.back().path.c_str(),
                     static_cast<long long>(batch), static_cast<long long>(context),
                     decode.back().step_ms);
      }
    }
  }
  backend->set_decode_path("eager");
  SetOtherPathsSpeedOfLight(decode, reference, *backend, sampling, o.same_token, read_bw);
  const std::vector<cuda::StepBreakdown> breakdowns = RunBreakdowns(*backend, *hooks, o);
  std::vector<cuda::PrefillPoint> prefill;
  for (int64_t tokens : o.prefills)
    prefill.push_back(cuda::BenchPrefill(*backend, tokens, kPrefillRuns));
  nlohmann::json j = ToJson(decode, reference, prefill, read_bw);
  if (o.breakdown) j["breakdown"] = BreakdownJson(breakdowns);
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path);
    if (!out) throw Error("--json: cannot write " + o.json_path);
    out << j.dump(2) << "\n";
  }
  PrintTable(decode, reference, prefill, read_bw);
  for (const auto& b : breakdowns) PrintBreakdown(b);
  return 0;
}

#else

int RunBench(std::span<const std::string>) {
  throw Error("mkserve was built without the CUDA backend (configure with -DMKSERVE_CUDA=ON)");
}

#endif

const CommandRegistration kRegistration(
    {"bench", "decode/prefill benchmark on the CUDA backend (--random-weights ...)", kUsage,
     RunBench});

}  // namespace
}  // namespace mkserve::cli
