#include "backends/cuda/tools/decode_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/started_step.h"
#include "common/error.h"

namespace mkserve::cuda {
namespace {

constexpr int64_t kBf16Bytes = 2;

double MedianMs(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <typename F>
double TimeMs(F&& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

// Steps as the engine's decode lookahead runs steady decode (docs/request-flow.md): every row
// decodes the token the step before sampled, and each step is started before the previous one is
// read, so the host's part of a step overlaps the device's. A step's time is the interval between
// two reads. `ahead` says whether the backend started the steps (StartedStep) or ran them whole.
std::vector<double> TimeStepsAhead(CudaBackend& backend, const StepInputs& inputs, int warmup,
                                   int timed, bool& ahead) {
  static constexpr int32_t kSampledBefore[1] = {kTokenSampledBefore};
  StepInputs chained = inputs;
  for (SequenceStep& step : chained.sequences) step.token_ids = kSampledBefore;
  std::unique_ptr<PendingStep> previous = backend.StartStep(inputs, nullptr);
  ahead = dynamic_cast<StartedStep*>(previous.get()) != nullptr;
  std::vector<double> ms;
  auto last = std::chrono::steady_clock::now();
  for (int i = 0; i < warmup + timed; ++i) {
    std::unique_ptr<PendingStep> next = backend.StartStep(chained, previous.get());
    ahead = ahead && dynamic_cast<StartedStep*>(next.get()) != nullptr;
    previous->Wait();
    const auto now = std::chrono::steady_clock::now();
    if (i >= warmup) ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
    previous = std::move(next);
  }
  previous->Wait();
  return ms;
}

// Block tables for `num_seqs` sequences of `tokens` positions. Pages before a sliding window are
// released (-1); when the pool is smaller than the request, blocks are reused modulo its size
// (the same bytes are read, only the values alias).
std::vector<std::vector<std::vector<int32_t>>> BenchTables(const KvLayout& layout, int64_t num_seqs,
                                                           int64_t tokens,
                                                           bool release_before_window) {
  const int64_t pages = (tokens + kBlockTokens - 1) / kBlockTokens;
  std::vector<std::vector<std::vector<int32_t>>> tables(num_seqs);
  for (int64_t s = 0; s < num_seqs; ++s) {
    for (const KvGroup& group : layout.groups) {
      const bool sliding = group.attention == AttentionKind::kSliding && release_before_window;
      const int64_t first_live =
          sliding ? FirstKeyInWindow(tokens - 1, group.window_tokens) / kBlockTokens : 0;
      std::vector<int32_t> table(pages, -1);
      for (int64_t p = first_live; p < pages; ++p) {
        table[p] = static_cast<int32_t>((s * pages + p) % group.num_blocks);
      }
      tables[s].push_back(std::move(table));
    }
  }
  return tables;
}

std::vector<int32_t> BenchTokens(int64_t count, int64_t vocab, int64_t salt) {
  std::vector<int32_t> ids(count);
  for (int64_t i = 0; i < count; ++i)
    ids[i] = static_cast<int32_t>((i * 7919 + salt * 104729 + 11) % vocab);
  return ids;
}

}  // namespace

double DecodeStepBytes(const ModelConfig& config, int64_t batch, int64_t context_tokens,
                       int64_t distinct_experts) {
  const double hidden = static_cast<double>(config.hidden_size);
  double bytes = static_cast<double>(config.vocab_size) * hidden * kBf16Bytes;  // LM head
  const double attended_full = static_cast<double>(context_tokens + 1);
  for (const LayerSpec& spec : config.layers) {
    bytes += (config.q_width() + 2 * config.kv_width() + config.q_width()) * hidden * kBf16Bytes;
    if (spec.ffn == FfnKind::kDense) {
      bytes += 3.0 * spec.ffn_intermediate_size * hidden * kBf16Bytes;
    } else {
      bytes += config.num_experts * hidden * kBf16Bytes;
      bytes += distinct_experts * 3.0 * spec.ffn_intermediate_size * hidden * kBf16Bytes;
      bytes +=
          3.0 * config.expert_intermediate_size * config.num_shared_experts * hidden * kBf16Bytes;
    }
    const double attended = spec.attention == AttentionKind::kSliding
                                ? std::min(attended_full, static_cast<double>(spec.window_tokens))
                                : attended_full;
    bytes += batch * 2.0 * config.kv_width() * kBf16Bytes * attended;
  }
  return bytes;
}

std::string DecodeModeSuffix(const SamplingParams& sampling, bool same_token) {
  return std::string(sampling.is_greedy() ? "" : "+sampled") + (same_token ? "+same-token" : "");
}

SamplingParams BenchSampledParams() {
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_p = 0.95f;
  params.seed = 1;
  return params;
}

std::unique_ptr<DecodeBatch> MakeDecodeBatch(const CudaBackend& backend, int64_t batch,
                                             int64_t context_tokens, const SamplingParams& sampling,
                                             bool same_token) {
  auto b = std::make_unique<DecodeBatch>();
  b->tables = BenchTables(backend.kv_layout(), batch, context_tokens + 1, true);
  b->tokens = BenchTokens(batch, backend.config().vocab_size, context_tokens);
  if (same_token) b->tokens.assign(batch, b->tokens.front());
  b->sampling = sampling;
  for (int64_t s = 0; s < batch; ++s) {
    SequenceStep step;
    step.sequence_id = s;
    step.token_ids = std::span<const int32_t>(b->tokens).subspan(s, 1);
    step.start_position = context_tokens;
    for (const auto& table : b->tables[s]) step.block_tables.push_back(table);
    step.sample = true;
    step.sampling = &b->sampling;
    b->inputs.sequences.push_back(std::move(step));
  }
  return b;
}

DecodePoint BenchDecode(CudaBackend& backend, int64_t batch, int64_t context_tokens,
                        int warmup_steps, int timed_steps, double read_bytes_per_second,
                        const SamplingParams& sampling, bool same_token) {
  const ModelConfig& config = backend.config();
  const auto decode_batch = MakeDecodeBatch(backend, batch, context_tokens, sampling, same_token);
  const StepInputs& inputs = decode_batch->inputs;
  for (int i = 0; i < warmup_steps; ++i) backend.Step(inputs);
  std::vector<double> ms;
  for (int i = 0; i < timed_steps; ++i) ms.push_back(TimeMs([&] { backend.Step(inputs); }));
  DecodePoint point;
  bool started_ahead = false;
  const std::vector<double> ahead =
      TimeStepsAhead(backend, inputs, warmup_steps, timed_steps, started_ahead);
  if (started_ahead) point.ahead_step_ms = MedianMs(ahead);
  // The path that ran, not the one asked for (a path may decline a step), under the labels of
  // docs/performance.md: the eager kernels are "layered", graphs "layered+graphs".
  const std::string path(backend.DecodePathFor(inputs));
  point.path = path == "eager" ? "layered" : path == "graph" ? "layered+graphs" : path;
  point.path += DecodeModeSuffix(sampling, same_token);
  point.batch = batch;
  point.context_tokens = context_tokens;
  point.step_ms = MedianMs(ms);
  point.tokens_per_second = batch / (point.step_ms / 1e3);
  SetSpeedOfLight(point, config, CountDistinctExperts(backend, batch), read_bytes_per_second);
  return point;
}

void SetSpeedOfLight(DecodePoint& point, const ModelConfig& config, int64_t distinct_experts,
                     double read_bytes_per_second) {
  point.distinct_experts = distinct_experts;
  point.bytes_per_step =
      DecodeStepBytes(config, point.batch, point.context_tokens, point.distinct_experts);
  point.sol_tokens_per_second = point.batch / (point.bytes_per_step / read_bytes_per_second);
  point.percent_of_sol = 100.0 * point.tokens_per_second / point.sol_tokens_per_second;
}

int64_t CountRoutedExperts(CudaBackend& backend, const DecodePoint& point,
                           const SamplingParams& sampling, bool same_token) {
  const auto decode_batch =
      MakeDecodeBatch(backend, point.batch, point.context_tokens, sampling, same_token);
  backend.Step(decode_batch->inputs);
  return CountDistinctExperts(backend, point.batch);
}

PrefillPoint BenchPrefill(CudaBackend& backend, int64_t prompt_tokens, int timed_runs) {
  const ModelConfig& config = backend.config();
  const int64_t chunk = backend.max_num_tokens();
  const auto tables = BenchTables(backend.kv_layout(), 1, prompt_tokens, false);
  const std::vector<int32_t> prompt = BenchTokens(prompt_tokens, config.vocab_size, 1);
  const SamplingParams greedy = GreedyParams();
  auto run_prompt = [&] {
    for (int64_t first = 0; first < prompt_tokens; first += chunk) {
      const int64_t count = std::min(chunk, prompt_tokens - first);
      StepInputs inputs;
      SequenceStep step;
      step.token_ids = std::span<const int32_t>(prompt).subspan(first, count);
      step.start_position = first;
      for (const auto& table : tables[0]) step.block_tables.push_back(table);
      step.sample = first + count == prompt_tokens;
      step.sampling = &greedy;
      inputs.sequences.push_back(std::move(step));
      backend.Step(inputs);
    }
  };
  run_prompt();  // warm-up: cuBLAS heuristics, first-touch
  std::vector<double> ms;
  for (int i = 0; i < timed_runs; ++i) ms.push_back(TimeMs(run_prompt));
  PrefillPoint point;
  point.prompt_tokens = prompt_tokens;
  point.ms = MedianMs(ms);
  point.tokens_per_second = prompt_tokens / (point.ms / 1e3);
  return point;
}

int64_t CountDistinctExperts(const CudaBackend& backend, int64_t num_tokens) {
  const ModelConfig& config = backend.config();
  if (config.num_moe_layers() == 0 || num_tokens <= 0) return 0;
  std::vector<int32_t> counts(config.num_experts);
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(counts.data(), backend.workspace().moe.counts,
                                     counts.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                     backend.stream()));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(backend.stream()));
  return std::count_if(counts.begin(), counts.end(), [](int32_t c) { return c > 0; });
}

}  // namespace mkserve::cuda
