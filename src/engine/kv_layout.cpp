#include "engine/kv_layout.h"

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
  int64_t left = kv_bytes_budget;
  for (KvGroup& g : layout.groups) {
    if (g.attention == AttentionKind::kFull) {
      has_full = true;
      continue;
    }
    // A token's window spans at most CeilDiv(window, kBlockTokens) + 1 blocks; one more of slack.
    g.num_blocks = max_batch * (CeilDiv(g.window_tokens, kBlockTokens) + 2);
    if (!has_full && layout.num_groups() == 1) g.num_blocks = left / block_bytes(g);
    left -= g.num_blocks * block_bytes(g);
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
