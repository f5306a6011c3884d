#include "backends/cpu/kv_cache.h"

#include <cassert>
#include <string>

#include "common/error.h"

namespace mkserve::cpu {

KvCache::KvCache(const KvLayout& layout, int64_t num_layers, int64_t kv_width)
    : layout_(layout),
      kv_width_(kv_width),
      layer_group_(num_layers, -1),
      layer_index_(num_layers, -1) {
  for (int64_t g = 0; g < layout.num_groups(); ++g) {
    const KvGroup& group = layout.groups[g];
    for (size_t i = 0; i < group.layer_ids.size(); ++i) {
      int32_t layer = group.layer_ids[i];
      if (layer < 0 || layer >= num_layers || layer_group_[layer] != -1) {
        throw Error("KV layout: layer " + std::to_string(layer) +
                    " is out of range or in two groups");
      }
      layer_group_[layer] = g;
      layer_index_[layer] = static_cast<int64_t>(i);
    }
    if (group.layer_ids.empty() || group.num_blocks <= 0) {
      throw Error("KV layout: group " + std::to_string(g) + " has no layers or no blocks");
    }
    const size_t floats = group.layer_ids.size() * group.num_blocks * kBlockTokens * 2 * kv_width;
    pools_.emplace_back(static_cast<float*>(std::calloc(floats, sizeof(float))));
    if (pools_.back() == nullptr) {
      throw Error("KV cache: cannot allocate " + std::to_string(floats * sizeof(float)) +
                  " bytes for group " + std::to_string(g) + "; lower --kv-bytes");
    }
  }
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (layer_group_[layer] == -1) {
      throw Error("KV layout: layer " + std::to_string(layer) + " belongs to no group");
    }
  }
}

std::span<float> KvCache::Slot(int64_t layer, int32_t block, int64_t offset, int kv) {
  int64_t group = layer_group_[layer];
  assert(block >= 0 && block < num_blocks(group) && offset >= 0 && offset < kBlockTokens);
  int64_t slot = (layer_index_[layer] * num_blocks(group) + block) * kBlockTokens + offset;
  return std::span<float>(pools_[group].get() + (slot * 2 + kv) * kv_width_, kv_width_);
}

std::span<float> KvCache::Key(int64_t layer, int32_t block, int64_t offset) {
  return Slot(layer, block, offset, 0);
}

std::span<float> KvCache::Value(int64_t layer, int32_t block, int64_t offset) {
  return Slot(layer, block, offset, 1);
}

int32_t KvCache::BlockOf(int64_t layer, std::span<const int32_t> block_table,
                         int64_t position) const {
  int64_t logical = position / kBlockTokens;
  int64_t group = layer_group_[layer];
  std::string where =
      "KV group " + std::to_string(group) + ", position " + std::to_string(position) + ": ";
  if (logical >= static_cast<int64_t>(block_table.size())) {
    throw Error(where + "block table has only " + std::to_string(block_table.size()) + " blocks");
  }
  int32_t block = block_table[logical];
  if (block < 0) throw Error(where + "logical block " + std::to_string(logical) + " is released");
  if (block >= num_blocks(group)) {
    throw Error(where + "physical block " + std::to_string(block) + " is beyond the pool of " +
                std::to_string(num_blocks(group)));
  }
  return block;
}

}  // namespace mkserve::cpu
