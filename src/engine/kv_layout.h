// KvLayout: how the paged KV cache is divided. Layers of the same attention kind form one KV group
// and share one block table per sequence; a block holds kBlockTokens tokens of every layer in its
// group. Sliding groups release blocks that fall out of the window.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model_config.h"

namespace mkserve {

inline constexpr int64_t kBlockTokens = 64;

struct KvGroup {
  AttentionKind attention = AttentionKind::kFull;
  int64_t window_tokens = 0;       // sliding groups only
  std::vector<int32_t> layer_ids;  // model layers whose KV lives in this group's blocks
  int64_t num_blocks = 0;          // capacity of this group's pool
};

struct KvLayout {
  std::vector<KvGroup> groups;
  int64_t num_groups() const { return static_cast<int64_t>(groups.size()); }
};

// The most tokens one sequence can ever hold in `layout`'s pools, alone: each full group's
// capacity, and a sliding group's too when it cannot hold one window (plus one block, the one
// being filled); INT64_MAX when nothing bounds it.
int64_t LongestSequenceTokens(const KvLayout& layout);

// Groups the layers of `config` and sizes each pool so that `kv_bytes_budget` is used, given the
// bytes one token of one layer takes. Sliding groups get only what `max_batch` sequences can hold
// inside their window (plus one block of slack each); the rest goes to the full group.
KvLayout PlanKvLayout(const ModelConfig& config, int64_t kv_bytes_budget,
                      int64_t bytes_per_token_per_layer, int64_t max_batch);

}  // namespace mkserve
