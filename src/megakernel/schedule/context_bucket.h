// ContextBucket: the longest context a schedule must serve, in KV pages per row of each KV group.
// A schedule built for a bucket serves every step whose longest live row fits in it.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace mkserve::megakernel {

struct ContextBucket {
  int64_t max_context_tokens = 0;  // the bucket's upper bound, including the token being decoded
  int64_t max_full_pages = 0;      // pages per row of the full-attention group
  int64_t max_sliding_pages = 0;   // pages per row of a sliding group (0 when the model has none)

  bool operator==(const ContextBucket&) const = default;
};

// The bucket for contexts up to `max_context_tokens` (>= 1). A sliding window of W tokens spans at
// most ceil(W / page) + 1 pages, because the window need not start on a page boundary.
ContextBucket BucketForContext(const ModelConfig& config, int64_t max_context_tokens);

// The upper bounds the server selects from: powers of two from 1024 up to 16384, then 16384 apart,
// and the last one is `max_context_tokens` itself.
std::vector<int64_t> DefaultBucketBounds(int64_t max_context_tokens);

}  // namespace mkserve::megakernel
