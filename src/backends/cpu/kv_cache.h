// KvCache: the paged KV pools of the CPU backend, one per KV group of the KvLayout. A group's pool
// is fp32 [layer in group][block][token in block][K, V][kv_head][head_dim]; a block holds
// kBlockTokens consecutive positions of one sequence for every layer of the group.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "engine/kv_layout.h"

namespace mkserve::cpu {

class KvCache {
 public:
  KvCache(const KvLayout& layout, int64_t num_layers, int64_t kv_width);

  const KvLayout& layout() const { return layout_; }
  int64_t group_of_layer(int64_t layer) const { return layer_group_[layer]; }
  int64_t num_blocks(int64_t group) const { return layout_.groups[group].num_blocks; }

  // The K or V row (kv_width values) of one token slot of one layer.
  std::span<float> Key(int64_t layer, int32_t block, int64_t offset);
  std::span<float> Value(int64_t layer, int32_t block, int64_t offset);

  // The physical block holding `position` in a block table of the layer's group. Throws
  // mkserve::Error when the table is too short, the block was released (-1) or is out of range.
  int32_t BlockOf(int64_t layer, std::span<const int32_t> block_table, int64_t position) const;

 private:
  std::span<float> Slot(int64_t layer, int32_t block, int64_t offset, int kv);

  KvLayout layout_;
  int64_t kv_width_ = 0;
  std::vector<int64_t> layer_group_;  // group of each model layer
  std::vector<int64_t> layer_index_;  // index of the layer inside its group
  // One pool per group, from calloc: the OS hands out zero pages as they are first touched, so
  // a large --kv-bytes costs no start-up time and no memory until sequences use it.
  struct FreeDeleter {
    void operator()(float* pool) const { std::free(pool); }
  };
  std::vector<std::unique_ptr<float[], FreeDeleter>> pools_;
};

}  // namespace mkserve::cpu
