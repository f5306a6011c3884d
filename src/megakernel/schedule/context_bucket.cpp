#include "megakernel/schedule/context_bucket.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "engine/kv_layout.h"

namespace mkserve::megakernel {

namespace {
int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

ContextBucket BucketForContext(const ModelConfig& config, int64_t max_context_tokens) {
  if (max_context_tokens < 1) {
    throw Error("a context bucket needs at least 1 token, got " +
                std::to_string(max_context_tokens));
  }
  ContextBucket bucket;
  bucket.max_context_tokens = max_context_tokens;
  bucket.max_full_pages = CeilDiv(max_context_tokens, kBlockTokens);
  int64_t window = 0;
  for (const LayerSpec& layer : config.layers) {
    if (layer.attention == AttentionKind::kSliding) window = std::max(window, layer.window_tokens);
  }
  if (window > 0) {
    bucket.max_sliding_pages = std::min(bucket.max_full_pages, CeilDiv(window, kBlockTokens) + 1);
  }
  return bucket;
}

std::vector<int64_t> DefaultBucketBounds(int64_t max_context_tokens) {
  if (max_context_tokens < 1) {
    throw Error("max context must be at least 1 token, got " + std::to_string(max_context_tokens));
  }
  std::vector<int64_t> bounds;
  int64_t bound = 1024;
  while (bound < max_context_tokens) {
    bounds.push_back(bound);
    bound = bound < 16384 ? bound * 2 : bound + 16384;
  }
  bounds.push_back(max_context_tokens);
  return bounds;
}

}  // namespace mkserve::megakernel
