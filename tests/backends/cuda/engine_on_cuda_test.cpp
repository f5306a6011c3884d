// The engine over the CUDA backend at full North width (5 layers, random bf16 weights) with a KV
// pool far smaller than the load: 64 concurrent requests of different lengths, greedy and
// seeded-sampled, must all finish with their full length through chunked prefill, the decode path
// under test, the GPU sampler and preemption by recompute; the KV pool must be empty afterwards,
// and a prompt larger than the whole pool must get a clear error instead of a hang.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/decode/decode_path_registry.h"
#include "engine/engine.h"
#include "engine/kv_layout.h"
#include "gpu_test_util.h"
#include "model/presets.h"

namespace mkserve::cuda::testing {
namespace {

constexpr int64_t kRequests = 64;
constexpr int64_t kMaxTokens = 40;
constexpr int64_t kKvBudgetBytes = int64_t{2} << 30;
constexpr int64_t kFullGroupBlocks = 320;  // 20480 tokens of context for all requests together

struct Outcome {
  int64_t tokens = 0;
  std::optional<FinishedEvent> finished;
  std::optional<ErrorEvent> error;
};

Outcome Drain(RequestHandle& handle) {
  Outcome out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(3);
  while (!handle.is_done() && std::chrono::steady_clock::now() < deadline) {
    std::optional<EngineEvent> event = handle.Next(std::chrono::milliseconds(100));
    if (!event) continue;
    if (auto* tokens = std::get_if<TokensEvent>(&*event)) out.tokens += tokens->token_ids.size();
    if (auto* done = std::get_if<FinishedEvent>(&*event)) out.finished = *done;
    if (auto* error = std::get_if<ErrorEvent>(&*event)) out.error = *error;
  }
  return out;
}

EngineRequest Request(int64_t index, int64_t prompt_tokens) {
  EngineRequest request;
  for (int64_t i = 0; i < prompt_tokens; ++i) {
    // Ids below the vocabulary, away from the special tokens.
    request.prompt_token_ids.push_back(
        static_cast<int32_t>((i * 7919 + index * 104729) % 200000 + 8));
  }
  request.sampling.max_tokens = kMaxTokens;
  request.sampling.ignore_eos = true;
  if (index % 3 == 0) {  // a third sample (GPU sampler after the decode path)
    request.sampling.temperature = 0.8f;
    request.sampling.top_p = 0.9f;
    request.sampling.seed = index;
  } else {
    request.sampling.temperature = 0.0f;
  }
  return request;
}

// Once per registered decode path (the path serves every decode step it accepts), with the
// engine's decode lookahead off and on (where the path starts steps ahead: the megakernel).
class EngineOnCudaTest : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(EngineOnCudaTest, SixtyFourRequestsUnderKvPressureAllFinishAndFreeTheirBlocks) {
  RequireGpu();
  ModelConfig config = NmcPreset(5);
  DeviceWeights weights = DeviceWeights::Random(config, /*seed=*/11);
  CudaBackendOptions options;
  options.max_batch = kRequests;
  options.max_num_tokens = 8192;
  const std::string path = std::get<0>(GetParam());
  options.decode_path = path;
  KvLayout layout = PlanKvLayout(config, kKvBudgetBytes, 2 * config.kv_width() * 2, kRequests);
  for (KvGroup& group : layout.groups) {  // sliding pools as planned; the full one made small
    if (group.attention == AttentionKind::kFull) group.num_blocks = kFullGroupBlocks;
  }
  options.kv_layout = layout;
  auto backend = std::make_unique<CudaBackend>(config, std::move(weights), options);
  EngineOptions engine_options;
  engine_options.max_batch = kRequests;
  engine_options.max_step_tokens = 8192;
  engine_options.decode_lookahead =
      std::get<1>(GetParam()) ? DecodeLookahead::kAuto : DecodeLookahead::kOff;
  Engine engine(std::move(backend), engine_options);
  const int64_t capacity = engine.kv_capacity_tokens();
  // Each request needs 300..1500 + kMaxTokens positions: together several times the pool.
  std::vector<RequestHandle> handles;
  int64_t demand = 0;
  for (int64_t i = 0; i < kRequests; ++i) {
    const int64_t prompt = 300 + (i * 577) % 1200;
    demand += prompt + kMaxTokens;
    handles.push_back(engine.Submit(Request(i, prompt)));
  }
  ASSERT_GT(demand, 2 * capacity) << "the test needs the pool under pressure";
  RequestHandle too_long = engine.Submit(Request(99, capacity + 64));
  for (int64_t i = 0; i < kRequests; ++i) {
    const Outcome out = Drain(handles[i]);
    ASSERT_FALSE(out.error.has_value()) << "request " << i << ": " << out.error->message;
    ASSERT_TRUE(out.finished.has_value()) << "request " << i << " did not finish";
    EXPECT_EQ(out.finished->reason, FinishReason::kLength) << "request " << i;
    EXPECT_EQ(out.finished->usage.completion_tokens, kMaxTokens) << "request " << i;
    EXPECT_EQ(out.tokens, kMaxTokens) << "request " << i;
  }
  const Outcome rejected = Drain(too_long);
  ASSERT_TRUE(rejected.error.has_value()) << "a prompt larger than the KV pool must be refused";
  EXPECT_EQ(rejected.error->kind, EngineErrorKind::kInvalidRequest);
  const EngineSnapshot snapshot = engine.Snapshot();
  EXPECT_GT(snapshot.preemptions_total, 0);
  // The path under test served the decode steps (its name in /metrics' mkserve_decode_steps_total).
  const auto served = snapshot.decode_steps_by_path.find(path);
  ASSERT_NE(served, snapshot.decode_steps_by_path.end()) << path << " ran no decode step";
  EXPECT_GT(served->second, kMaxTokens / 2) << path;
  if (std::get<1>(GetParam()) && path == "megakernel") {
    EXPECT_GT(snapshot.steps_ahead_total, 0);
  }
  for (const KvGroupUsage& group : snapshot.kv_groups) EXPECT_EQ(group.used_blocks, 0);
  std::printf(
      "KV capacity %lld tokens, demand %lld, preemptions %lld, steps ahead %lld (%lld "
      "dropped)\n",
      static_cast<long long>(capacity), static_cast<long long>(demand),
      static_cast<long long>(snapshot.preemptions_total),
      static_cast<long long>(snapshot.steps_ahead_total),
      static_cast<long long>(snapshot.steps_ahead_dropped_total));
}

INSTANTIATE_TEST_SUITE_P(DecodePaths, EngineOnCudaTest,
                         ::testing::Combine(::testing::ValuesIn(DecodePathNames()),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, bool>>& info) {
                           return std::get<0>(info.param) +
                                  (std::get<1>(info.param) ? "_lookahead" : "");
                         });

}  // namespace
}  // namespace mkserve::cuda::testing
