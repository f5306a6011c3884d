// The CPU sampler: the definition of SamplingParams' semantics, used by the CPU backend and the
// reference for GPU samplers.
//
// Order: penalties (repetition over prompt + output tokens: positive logits divided, negative
// multiplied; then frequency/presence over output tokens, as OpenAI) -> logit_bias -> min_tokens
// masking -> the grammar's allowed tokens (others -inf) -> greedy argmax (ties: lowest id), or
// temperature -> top-k -> top-p (smallest prefix whose mass reaches top_p, at least one) -> min-p
// (drop p < min_p * p_max) -> draw. The draw walks the CDF of the kept tokens sorted by
// (probability desc, id asc) with u = SampleUniform(seed, sample_index), so it does not depend on
// the batch or the slot. Without a seed the stream is derived from sequence_id (the engine always
// sets one). Out-of-range ids in bias/penalty lists are ignored here; the server rejects them.
#pragma once

#include <cstdint>
#include <span>

#include "engine/backend.h"

namespace mkserve {

// Uniform in [0, 1) from (seed, sample_index); the same function on every backend:
// x = Mix64(Mix64(seed + G) ^ Mix64(index * G + 1)), G = 0x9e3779b97f4a7c15, Mix64 = splitmix64's
// finaliser; the result is the top 53 bits of x times 2^-53.
double SampleUniform(uint64_t seed, int64_t sample_index);

// The request's random stream: its seed, or (unseeded) one derived from the sequence id, so it
// never depends on the batch slot.
uint64_t SamplingSeed(const SamplingParams& params, int64_t sequence_id);

// Samples from `logits` (already multiplied by logit_scale) and fills the sampled token's logprobs.
SequenceResult SampleFromLogits(std::span<const float> logits, const SequenceStep& step);

// Log-softmax of `logits` at `token_id` plus the top `k` entries, best first.
PositionLogprobs ComputeLogprobs(std::span<const float> logits, int32_t token_id, int32_t k);

}  // namespace mkserve
