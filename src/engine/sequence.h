// Sequence: the engine's state for one generated continuation (a request with n > 1 has n).
// Counters plus block tables; everything else is derived. Only the engine thread touches it, and
// only Engine::Postprocess changes its tokens and counters after a step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampling_params.h"

namespace mkserve {

enum class SequenceStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  int64_t id = 0;
  int64_t request_id = 0;
  int32_t index = 0;  // among the request's n siblings
  SequenceStatus status = SequenceStatus::kWaiting;
  SamplingParams sampling;  // per sibling: the engine derives each sibling's seed

  std::vector<int32_t> token_ids;  // prompt, then generated tokens
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;   // tokens whose KV is in the cache
  int64_t num_scheduled_tokens = 0;  // tokens the current step computes
  int64_t num_cached_tokens = 0;     // prompt tokens taken from the prefix cache (first admission)
  int64_t num_prompt_logprobs_done = 0;  // prompt positions whose logprobs were reported
  bool was_admitted = false;
  // Its next num_scheduled_tokens prompt tokens run as a chunk beside the steps (Scheduler):
  // not scheduled, not preempted, its blocks held until the chunk finishes.
  bool chunk_in_flight = false;
  bool use_prefix_cache = true;  // off when prompt logprobs need every position's logits

  // Per KV group: logical block -> physical block, -1 once a sliding group released it.
  std::vector<std::vector<int32_t>> block_tables;
  // Chain hash of each full block whose KV is computed (block i covers tokens [64i, 64i + 64)).
  std::vector<uint64_t> block_hashes;
  // Siblings wait until the first sibling's prompt is in the prefix cache, then attach to it.
  std::shared_ptr<bool> prompt_ready;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int64_t num_uncomputed_tokens() const { return num_tokens() - num_computed_tokens; }
  bool is_decoding() const { return num_computed_tokens == num_tokens() - 1 && num_tokens() > 0; }
  bool is_finished() const { return status == SequenceStatus::kFinished; }
};

}  // namespace mkserve
