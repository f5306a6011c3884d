// A decode batch of 64 rows with 64 different contexts at full North width (5 layers: the dense
// RoPE layer 0, sliding and full NoPE layers; random bf16 weights): every row's logits must match
// the same sequence run alone. Two of the contexts cross the 4096-token sliding window, the rest
// spread over 1..1500 tokens, so block tables are ragged in every KV group.
//
// Batch and alone runs differ in GEMM tiling, so a router near-tie may flip between them (as
// against HF: docs/cuda-backend.md, "Correctness against HF"). The alone run is therefore forced
// onto the batch's expert choice (RoutingOverride) and must then match; where its free choice
// differs, the batch's router gap it inverts must be a near-tie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "backend_test_util.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/tools/router_override.h"
#include "backends/cuda/tools/tool_hooks.h"
#include "gpu_test_util.h"
#include "model/presets.h"

namespace mkserve::cuda::testing {
namespace {

constexpr int64_t kBatch = 64;
constexpr int64_t kLayers = 5;
constexpr int64_t kStepTokens = 8192;
// The per-position bar against HF; batch and alone runs differ only in GEMM tiling.
constexpr double kMinCosine = 0.999;

int64_t ContextOf(int64_t row) {
  if (row == 0) return 4100;  // just past the window
  if (row == 1) return 5000;
  return 1 + (row * 397) % 1500;
}

std::vector<int32_t> Tokens(int64_t length, int64_t row, int32_t vocab) {
  std::vector<int32_t> ids(length);
  for (int64_t i = 0; i < length; ++i) {
    ids[i] = static_cast<int32_t>((i * 7919 + row * 104729) % (vocab - 16) + 8);
  }
  return ids;
}

class RaggedFullWidthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RequireGpu();
    ModelConfig config = NmcPreset(kLayers);
    DeviceWeights weights = DeviceWeights::Random(config, /*seed=*/2026);
    CudaBackendOptions options;
    options.max_batch = kBatch;
    options.max_num_tokens = kStepTokens;
    options.gpu_memory_fraction = 0.5;
    options.hooks = hooks_;
    backend_ = std::make_unique<CudaBackend>(std::move(config), std::move(weights), options);
  }

  // Prefills every prompt, whole sequences packed into steps of at most kStepTokens.
  void Prefill(const std::vector<std::vector<int32_t>>& prompts,
               const std::vector<std::vector<std::vector<int32_t>>>& tables) {
    StepInputs step;
    int64_t tokens = 0;
    for (size_t s = 0; s < prompts.size(); ++s) {
      const int64_t length = static_cast<int64_t>(prompts[s].size());
      if (tokens + length > kStepTokens) {
        backend_->Step(step);
        step.sequences.clear();
        tokens = 0;
      }
      step.sequences.push_back(MakeStep(static_cast<int64_t>(s), prompts[s], 0, tables[s],
                                        /*sampling=*/nullptr, /*return_logits=*/false));
      tokens += length;
    }
    if (!step.sequences.empty()) backend_->Step(step);
  }

  std::shared_ptr<ToolHooks> hooks_ = std::make_shared<ToolHooks>();
  std::unique_ptr<CudaBackend> backend_;
};

// The batch's traced routing of one row, as the reference for that row run alone.
ReferenceRouting RowRouting(const ModelConfig& config, const RoutingOverride& batch, int64_t row) {
  ReferenceRouting ref;
  ref.num_moe_layers = config.num_moe_layers();
  ref.num_rows = 1;
  ref.top_k = config.num_experts_per_token;
  ref.num_experts = config.num_experts;
  const std::vector<int32_t> ids = batch.TracedIds();
  const std::vector<float> logits = batch.TracedLogits();
  for (int64_t l = 0; l < ref.num_moe_layers; ++l) {
    const auto id = ids.begin() + (l * kBatch + row) * ref.top_k;
    ref.expert_ids.insert(ref.expert_ids.end(), id, id + ref.top_k);
    const auto logit = logits.begin() + (l * kBatch + row) * ref.num_experts;
    ref.router_logits.insert(ref.router_logits.end(), logit, logit + ref.num_experts);
  }
  return ref;
}

TEST_F(RaggedFullWidthTest, EveryRowOfABatchOf64MatchesItsSequenceAlone) {
  const int32_t vocab = static_cast<int32_t>(backend_->config().vocab_size);
  SimpleBlocks blocks(backend_->kv_layout());
  std::vector<std::vector<int32_t>> prompts, next;
  std::vector<std::vector<std::vector<int32_t>>> tables;
  for (int64_t row = 0; row < kBatch; ++row) {
    prompts.push_back(Tokens(ContextOf(row), row, vocab));
    next.push_back({static_cast<int32_t>(5 + row)});
    tables.push_back(blocks.Allocate(ContextOf(row) + 1));
  }
  Prefill(prompts, tables);

  const SamplingParams greedy = GreedyParams();
  StepInputs batch;
  for (int64_t row = 0; row < kBatch; ++row) {
    batch.sequences.push_back(
        MakeStep(row, next[row], ContextOf(row), tables[row], &greedy, /*return_logits=*/true));
  }
  RoutingOverride batch_routing(backend_->config(), kBatch, {});  // trace only
  hooks_->set_routing_override(&batch_routing);
  const StepOutputs together = backend_->Step(batch);
  ASSERT_EQ(together.results.size(), static_cast<size_t>(kBatch));
  int64_t rows_routed_differently = 0;
  for (int64_t row = 0; row < kBatch; ++row) {
    const ReferenceRouting ref = RowRouting(backend_->config(), batch_routing, row);
    RoutingOverride forced(backend_->config(), 1, ref.expert_ids);
    hooks_->set_routing_override(&forced);
    StepInputs alone;
    alone.sequences.push_back(MakeStep(row, next[row], ContextOf(row), tables[row], &greedy, true));
    const StepOutputs single = backend_->Step(alone);
    const std::vector<float>& a = together.results[row].logits.at(0);
    const std::vector<float>& b = single.results[0].logits.at(0);
    const std::string where =
        "row " + std::to_string(row) + " (context " + std::to_string(ContextOf(row)) + ")";
    EXPECT_GE(Cosine(a, b), kMinCosine) << where;
    ExpectSameGreedy(together.results[row].token_id, single.results[0].token_id, b, where);
    const RoutingComparison c =
        CompareRouting(ref, forced.TracedIds(), forced.TracedLogits(), 1, /*roots_only=*/false);
    for (const std::string& problem : c.problems) ADD_FAILURE() << where << ": " << problem;
    rows_routed_differently += c.num_different > 0 ? 1 : 0;
  }
  hooks_->set_routing_override(nullptr);
  std::printf("rows whose free routing alone differs from the batch (near-ties): %lld of %lld\n",
              static_cast<long long>(rows_routed_differently), static_cast<long long>(kBatch));
}

}  // namespace
}  // namespace mkserve::cuda::testing
