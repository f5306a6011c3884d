// The key range of one split-KV CTA (blockIdx.z of num_splits), shared by the decode attention
// kernels so their partial states line up for the one combine kernel (attention.cu).
#pragma once

#include <cstdint>

#include "backends/cuda/decode/attention.h"
#include "engine/kv_layout.h"
#include "model/model_config.h"

namespace mkserve::cuda {

struct KeyRange {
  int64_t first_key, last_key, first_page, end_page;
};

// Keys [first_key, last_key] are visible to the token; the split owns pages
// [first_page, end_page) of the window's pages (possibly none).
__device__ inline KeyRange SplitRange(const AttentionArgs& a, int32_t position) {
  constexpr int64_t kPageKeys = kBlockTokens;
  KeyRange r;
  r.last_key = position;
  r.first_key = a.window_tokens > 0 ? FirstKeyInWindow(position, a.window_tokens) : 0;
  const int64_t first_page = r.first_key / kPageKeys;
  const int64_t num_pages = position / kPageKeys - first_page + 1;
  const int64_t per_split = (num_pages + a.num_splits - 1) / a.num_splits;
  r.first_page = first_page + blockIdx.z * per_split;
  r.end_page = min(first_page + num_pages, r.first_page + per_split);
  return r;
}

}  // namespace mkserve::cuda
