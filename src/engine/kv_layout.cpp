#include "engine/kv_layout.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/error.h"

namespace mkserve {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Layers that share attention kind and window share a group, in order of first appearance.
std::vector<KvGroup> GroupLayers(const ModelConfig& config) {
  std::vector<KvGroup> groups;
  for (int32_t i = 0; i < static_cast<int32_t>(config.layers.size()); ++i) {
    const LayerSpec& layer = config.layers[i];
    bool sliding = layer.attention == AttentionKind::kSliding && layer.window_tokens > 0;
    AttentionKind kind = sliding ? AttentionKind::kSliding : AttentionKind::kFull;
    int64_t window = sliding ? layer.window_tokens : 0;
    KvGroup* group = nullptr;
    for (KvGroup& g : groups) {
      if (g.attention == kind && g.window_tokens == window) group = &g;
    }
    if (!group) group = &groups.emplace_back(KvGroup{kind, window, {}, 0});
    group->layer_ids.push_back(i);
  }
  return groups;
}

}  // namespace

int64_t LongestSequenceTokens(const KvLayout& layout) {
  int64_t longest = std::numeric_limits<int64_t>::max();
  for (const KvGroup& group : layout.groups) {
    const bool sliding = group.attention == AttentionKind::kSliding && group.window_tokens > 0;
    if (sliding && group.num_blocks >= CeilDiv(group.window_tokens, kBlockTokens) + 1) continue;
    longest = std::min(longest, group.num_blocks * kBlockTokens);
  }
  return longest;
}

KvLayout PlanKvLayout(const ModelConfig& config, int64_t kv_bytes_budget,
                      int64_t bytes_per_token_per_layer, int64_t max_batch) {
  if (config.layers.empty()) throw Error("PlanKvLayout: the model config has no layers");
  if (bytes_per_token_per_layer <= 0 || max_batch <= 0) {
    throw Error("PlanKvLayout: bytes_per_token_per_layer and max_batch must be positive");
  }
  KvLayout layout{GroupLayers(config)};
  auto block_bytes = [&](const KvGroup& g) {
    return kBlockTokens * bytes_per_token_per_layer * static_cast<int64_t>(g.layer_ids.size());
  };
  bool has_full = false;
  for (const KvGroup& g : layout.groups) has_full |= g.attention == AttentionKind::kFull;
  // Sliding groups: every sequence's whole window. A token's window spans at most
  // CeilDiv(window, kBlockTokens) + 1 blocks; one more of slack.
  int64_t sliding_bytes = 0, sliding_window_bytes = 0, full_token_bytes = 0, longest_window = 0;
  for (KvGroup& g : layout.groups) {
    if (g.attention == AttentionKind::kFull) {
      full_token_bytes += block_bytes(g) / kBlockTokens;
      continue;
    }
    g.num_blocks = max_batch * (CeilDiv(g.window_tokens, kBlockTokens) + 2);
    sliding_bytes += g.num_blocks * block_bytes(g);
    sliding_window_bytes += block_bytes(g) / kBlockTokens * g.window_tokens;
    longest_window = std::max(longest_window, g.window_tokens);
  }
  if (!has_full && layout.num_groups() == 1) {
    layout.groups[0].num_blocks = kv_bytes_budget / block_bytes(layout.groups[0]);
  }
  // When max_batch whole windows would take more than the sliding groups' share of a budget
  // split evenly at the longest window (the full groups then hold as many sequences of that
  // length as the sliding ones: an 80 GB card serving a 60 GB model), every sliding group gets
  // that share instead; a sequence that finds no block waits or is preempted like any other.
  const int64_t sliding_share =
      has_full ? static_cast<int64_t>(static_cast<double>(kv_bytes_budget) * sliding_window_bytes /
                                      (sliding_window_bytes + full_token_bytes * longest_window))
               : sliding_bytes;
  if (sliding_bytes > sliding_share) {
    for (KvGroup& g : layout.groups) {
      if (g.attention == AttentionKind::kFull) continue;
      g.num_blocks =
          static_cast<int64_t>(static_cast<double>(g.num_blocks) * sliding_share / sliding_bytes);
    }
  }
  int64_t left = kv_bytes_budget;
  for (const KvGroup& g : layout.groups) {
    if (g.attention != AttentionKind::kFull) left -= g.num_blocks * block_bytes(g);
  }
  int64_t full_bytes = 0;
  for (const KvGroup& g : layout.groups) {
    if (g.attention == AttentionKind::kFull) full_bytes += block_bytes(g);
  }
  for (KvGroup& g : layout.groups) {
    if (g.attention == AttentionKind::kFull) g.num_blocks = left > 0 ? left / full_bytes : 0;
  }
  for (const KvGroup& g : layout.groups) {
    if (g.num_blocks <= 0) {
      throw Error("KV cache budget of " + std::to_string(kv_bytes_budget) +
                  " bytes is too small: it does not hold one " + std::to_string(kBlockTokens) +
                  "-token block for every layer group (lower --max-batch or give more memory)");
    }
  }
  return layout;
}

}  // namespace mkserve
