// StepPlan: one Step's sequences flattened into the per-token arrays the kernels read (token id,
// position, owning sequence, KV slot per group), the padded block tables per group, and which
// tokens need logits. Everything the engine passed in is validated here, on the host, so a bad
// block table is an mkserve::Error naming the sequence, never a GPU fault.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/kv_layout.h"
#include "model/model_config.h"

namespace mkserve::cuda {

// What the step does with one logits row.
struct RowNeeds {
  bool sample = false;       // the next token is sampled from this row
  bool gpu_sample = false;   // ... by the GpuSampler (neither flag: the GPU argmax)
  bool host_sample = false;  // ... on the host from the copied row (SampleFromLogits)
  bool prompt_logprob = false;
  bool host_logits = false;  // the row is copied to the host
};

struct LogitRow {
  int32_t token_index = 0;     // row of the flattened step
  int32_t sequence_index = 0;  // StepInputs::sequences index
  int32_t token_in_sequence = 0;
  RowNeeds needs;
};

struct StepPlan {
  int64_t num_tokens = 0;
  int64_t num_sequences = 0;
  int64_t max_context_tokens = 0;  // longest position + 1 of the step
  bool decode_only = false;        // every sequence runs exactly one token
  std::vector<int32_t> token_ids;
  std::vector<int32_t> positions;
  std::vector<int32_t> seq_of_token;
  std::vector<std::vector<int32_t>> slots;         // [group][token]
  std::vector<int64_t> max_pages;                  // [group]
  std::vector<std::vector<int32_t>> block_tables;  // [group][sequence * max_pages], -1 padded
  std::vector<LogitRow> logit_rows;                // tokens whose logits are needed, step order
};

// Greedy sampling parameters (temperature 0), for benchmarks and tests.
inline SamplingParams GreedyParams() {
  SamplingParams params;
  params.temperature = 0.0f;
  return params;
}

StepPlan BuildStepPlan(const ModelConfig& config, const KvLayout& layout, const StepInputs& inputs,
                       int64_t max_num_tokens);

}  // namespace mkserve::cuda
