// KvPool: the paged KV cache in GPU memory. One allocation per KV group (KvLayout order), laid
// out [layer in group][block][kBlockTokens][K=0 / V=1][kv_heads][head_dim] bf16, so one token's K
// and V of one layer are adjacent and a block of one layer is one contiguous 64-token page.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "engine/kv_layout.h"
#include "model/model_config.h"

namespace mkserve::cuda {

class KvPool {
 public:
  // Sizes the pool so that the process uses at most `gpu_memory_fraction` of the GPU's memory,
  // counting what is already allocated (weights, scratch) and `reserved_bytes` that will be
  // allocated after the pool (a decode path's own buffers). Throws mkserve::Error when nothing
  // is left for the cache.
  static KvPool CreateForBudget(const ModelConfig& config, double gpu_memory_fraction,
                                int64_t max_batch, int64_t reserved_bytes = 0);
  // Exactly `layout` (tests).
  static KvPool Create(const ModelConfig& config, const KvLayout& layout);

  static int64_t BytesPerTokenPerLayer(const ModelConfig& config);

  const KvLayout& layout() const { return layout_; }
  int32_t group_of_layer(int64_t layer_id) const { return group_of_layer_[layer_id]; }
  // [num_blocks][kBlockTokens][2][kv_heads][head_dim] of one model layer.
  __nv_bfloat16* layer_cache(int64_t layer_id) const;
  int64_t total_bytes() const;
  // Every block of every group filled with normal(0, stddev) (benchmarks: never zeros).
  void FillRandom(uint64_t seed, float stddev);
  // Elements of one block of one layer.
  int64_t block_elements() const { return block_elements_; }

 private:
  KvLayout layout_;
  std::vector<DeviceBuffer<__nv_bfloat16>> group_storage_;
  std::vector<int32_t> group_of_layer_;
  std::vector<int32_t> index_in_group_;
  int64_t block_elements_ = 0;
};

}  // namespace mkserve::cuda
