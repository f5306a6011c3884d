// Constrained decoding on the GPU: the engine's allowed-token bitmask of a row (bit id % 32 of word
// id / 32) applied inside the sampling kernel, after the edits and before the draw, as the CPU
// sampler does. Masked logits become -inf in place; the top logprobs were taken before, and the
// chosen token is always allowed, so reported logprobs stay the model's own.
#pragma once

#include <cstdint>

#include "backends/cuda/sampling/row_scan.cuh"
#include "backends/cuda/sampling/sample_rows.h"

namespace mkserve::cuda {

template <class Team>
__device__ inline void ApplyAllowedTokens(const sampling::Slice& slice, const SampleRowParams& p,
                                          const uint32_t* allowed_masks) {
  if (p.allowed_begin < 0) return;
  const uint32_t* mask = allowed_masks + p.allowed_begin;
  for (int32_t id = slice.begin + static_cast<int32_t>(threadIdx.x); id < slice.end;
       id += Team::kThreads) {
    const int32_t word = id >> 5;
    const bool allowed = word < p.allowed_words && ((mask[word] >> (id & 31)) & 1u);
    if (!allowed) slice.row[id] = -INFINITY;
  }
  Team::Sync();  // the slice's writes are visible to the whole CTA after this
}

}  // namespace mkserve::cuda
