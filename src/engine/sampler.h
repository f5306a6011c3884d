// The CPU sampler: the definition of SamplingParams' semantics, used by the CPU backend and the
// reference for GPU samplers.
//
// Order: penalties (repetition, then frequency/presence over output tokens) -> logit_bias ->
// greedy argmax, or temperature -> top-k -> top-p -> min-p -> draw. The draw uses a counter-based
// random number keyed on (seed, sample_index), so it does not depend on the batch or the slot.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend.h"

namespace mkserve {

// Uniform in [0, 1) from (seed, sample_index); the same function on every backend.
double SampleUniform(uint64_t seed, int64_t sample_index);

// Samples from `logits` (already multiplied by logit_scale) and fills the sampled token's logprobs.
SequenceResult SampleFromLogits(std::span<const float> logits, const SequenceStep& step);

// Log-softmax of `logits` at `token_id` plus the top `k` entries, best first.
PositionLogprobs ComputeLogprobs(std::span<const float> logits, int32_t token_id, int32_t k);

}  // namespace mkserve
