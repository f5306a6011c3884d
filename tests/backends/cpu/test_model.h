// Small random cohere2_moe models held in memory, for CPU backend tests: a ModelConfig built field
// by field plus fp32 weights owned by the TestModel, one variant per config branch.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv_layout.h"
#include "model/model_config.h"
#include "model/model_weights.h"

namespace mkserve::testing {

enum class TestVariant {
  kNorth,                // RMSNorm, sigmoid top-k without renormalisation, dense layer 0 with RoPE
  kLayerNorm,            // Cohere LayerNorm instead of RMSNorm
  kSoftmaxRouter,        // softmax over the top-k logits
  kRenormalisedSigmoid,  // sigmoid weights divided by their sum
  kSharedAverage,        // one shared expert, (routed + shared) / 2
  kSharedSum,            // one shared expert, routed + shared
  kDensePrefix,          // three dense prefix layers
};

std::string VariantName(TestVariant variant);

// Geometry: vocab 96, hidden 32, 4 query heads and 2 KV heads of 12 (q width 48 != hidden),
// 6 layers with full attention where layer % 4 == 0 and a sliding window of 8 elsewhere, 6
// experts of width 16, top 2, dense width 24.
ModelConfig MakeTestConfig(TestVariant variant);

struct TestModel {
  ModelConfig config;
  ModelWeights weights;
  std::deque<std::vector<float>> storage;  // the bytes the weight views point into
};

// Weights depend only on (seed, tensor name), so variants with the same tensors share values.
std::unique_ptr<TestModel> MakeTestModel(TestVariant variant, uint64_t seed = 7);

// One block table per KV group: logical block i -> physical block i, enough for num_tokens.
std::vector<std::vector<int32_t>> ContiguousBlockTables(const KvLayout& layout, int64_t num_tokens);

// Spans over `tables`, for SequenceStep::block_tables.
std::vector<std::span<const int32_t>> TableSpans(const std::vector<std::vector<int32_t>>& tables);

}  // namespace mkserve::testing
