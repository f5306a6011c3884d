// Flash-style attention for prefill chunks on tensor cores (mma.sync bf16 -> fp32) over the paged
// KV cache. One CTA takes 32 consecutive tokens of the step and one kv head; each warp is one
// query head of that kv head's group (two m16 tiles), so a K/V page loaded into shared memory
// serves all of the group's heads (GQA) and each K/V fragment feeds two mmas. Same semantics as
// PagedAttention (attention.h): causal, sliding window per FirstKeyInWindow, online softmax in fp32
// in the log2 domain; probabilities are rounded to bf16 for the P.V product. A 32-token tile that
// spans sequences runs one pass per sequence.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/decode/attention.h"

namespace mkserve::cuda {

inline constexpr int64_t kPrefillQueryTile = 32;  // tokens per CTA (two m16 tiles per warp)

// A pass over more pages than this runs as several launches, each taking the next
// kPrefillPagesPerLaunch pages of every pass, with each row's online-softmax state carried between
// them in fp32 (the result is bitwise that of one launch). So no CTA holds its SM for long: at 32K
// context one CTA over the whole range ran ~1.4 ms, and a decode step on a second stream waits
// for SMs as long as such CTAs run (prefill/chunk_stream.h). 80 pages keep North's sliding
// layers (a 4096-token window spans at most 66 pages) in one launch.
inline constexpr int64_t kPrefillPagesPerLaunch = 80;

// Where the state goes between launches; both null when every pass fits one launch.
inline constexpr int64_t kPrefillCarryStats = 5;  // running max (log2), 4 lanes' partial sums
struct PrefillCarry {
  float* acc = nullptr;    // [num_tokens][num_heads][head_dim]: unnormalised output
  float* stats = nullptr;  // [num_tokens][num_heads][kPrefillCarryStats]
};

// Head_dim 16, 32, 64 or 128 and at most 8 query heads per kv head.
bool PrefillAttentionSupports(const AttentionArgs& args);

// Whether the tensor-core kernel pays off for a step: at least 64 tokens and 16 per sequence on
// average (decode rows stay on PagedAttention's split-KV path).
bool PreferPrefillAttention(int64_t num_tokens, int64_t num_sequences);

// Launches PrefillAttention makes for `args` (1 unless a pass may span more than
// kPrefillPagesPerLaunch pages).
int64_t PrefillAttentionLaunches(const AttentionArgs& args);

// Writes args.out; ignores num_splits and the partial buffers. Throws mkserve::Error on an
// unsupported shape, or when several launches are needed and `carry` is empty.
void PrefillAttention(const AttentionArgs& args, const PrefillCarry& carry, cudaStream_t stream);

}  // namespace mkserve::cuda
