// Whole-model test helpers: a trivial block allocator and one-sequence steps, shared by the
// golden-fixture and CPU-comparison tests of CudaBackend.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda::testing {

// Hands out consecutive physical blocks per KV group; each sequence owns its tables.
class SimpleBlocks {
 public:
  explicit SimpleBlocks(const KvLayout& layout) : layout_(layout), next_(layout.num_groups(), 0) {}

  // Tables covering `tokens` positions for a new sequence.
  std::vector<std::vector<int32_t>> Allocate(int64_t tokens) {
    std::vector<std::vector<int32_t>> tables(layout_.num_groups());
    const int64_t pages = (tokens + kBlockTokens - 1) / kBlockTokens;
    for (int64_t g = 0; g < layout_.num_groups(); ++g) {
      for (int64_t p = 0; p < pages; ++p) tables[g].push_back(next_[g]++);
    }
    return tables;
  }

 private:
  KvLayout layout_;
  std::vector<int32_t> next_;
};

inline SequenceStep MakeStep(int64_t id, const std::vector<int32_t>& tokens, int64_t start,
                             const std::vector<std::vector<int32_t>>& tables,
                             const SamplingParams* sampling, bool return_logits) {
  SequenceStep step;
  step.sequence_id = id;
  step.token_ids = tokens;
  step.start_position = start;
  for (const auto& table : tables) step.block_tables.push_back(table);
  step.sample = sampling != nullptr;
  step.sampling = sampling;
  step.return_logits = return_logits;
  return step;
}

}  // namespace mkserve::cuda::testing
