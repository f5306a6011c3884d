#include "backends/cuda/core/kv_pool.h"

#include <string>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/random_fill.h"
#include "common/error.h"

namespace mkserve::cuda {

int64_t KvPool::BytesPerTokenPerLayer(const ModelConfig& config) {
  return 2 * config.kv_width() * static_cast<int64_t>(sizeof(__nv_bfloat16));
}

KvPool KvPool::Create(const ModelConfig& config, const KvLayout& layout) {
  KvPool pool;
  pool.layout_ = layout;
  pool.block_elements_ = kBlockTokens * 2 * config.kv_width();
  pool.group_of_layer_.assign(config.num_layers, -1);
  pool.index_in_group_.assign(config.num_layers, -1);
  for (int32_t g = 0; g < layout.num_groups(); ++g) {
    const KvGroup& group = layout.groups[g];
    if (group.num_blocks <= 0) {
      throw Error("KV group " + std::to_string(g) + " has no blocks: raise --gpu-memory-fraction");
    }
    for (size_t i = 0; i < group.layer_ids.size(); ++i) {
      pool.group_of_layer_[group.layer_ids[i]] = g;
      pool.index_in_group_[group.layer_ids[i]] = static_cast<int32_t>(i);
    }
    pool.group_storage_.emplace_back(static_cast<int64_t>(group.layer_ids.size()) *
                                     group.num_blocks * pool.block_elements_);
  }
  for (int64_t l = 0; l < config.num_layers; ++l) {
    if (pool.group_of_layer_[l] < 0) {
      throw Error("KV layout leaves layer " + std::to_string(l) + " without a group");
    }
  }
  return pool;
}

KvPool KvPool::CreateForBudget(const ModelConfig& config, double gpu_memory_fraction,
                               int64_t max_batch, int64_t reserved_bytes) {
  if (!(gpu_memory_fraction > 0.0 && gpu_memory_fraction <= 1.0)) {
    throw Error("--gpu-memory-fraction must be in (0, 1], got " +
                std::to_string(gpu_memory_fraction));
  }
  size_t free_bytes = 0, total_bytes = 0;
  MKSERVE_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double used = static_cast<double>(total_bytes - free_bytes);
  const double budget = gpu_memory_fraction * static_cast<double>(total_bytes) - used -
                        static_cast<double>(reserved_bytes);
  const int64_t min_bytes = config.num_layers * kBlockTokens * BytesPerTokenPerLayer(config) * 2;
  if (budget < static_cast<double>(min_bytes)) {
    throw Error("--gpu-memory-fraction " + std::to_string(gpu_memory_fraction) + " leaves " +
                std::to_string(static_cast<int64_t>(budget) >> 20) +
                " MiB for the KV cache after weights, scratch and the decode path's " +
                std::to_string(reserved_bytes >> 20) + " MiB; raise it");
  }
  KvLayout layout =
      PlanKvLayout(config, static_cast<int64_t>(budget), BytesPerTokenPerLayer(config), max_batch);
  return Create(config, layout);
}

__nv_bfloat16* KvPool::layer_cache(int64_t layer_id) const {
  const int32_t g = group_of_layer_[layer_id];
  return group_storage_[g].data() +
         index_in_group_[layer_id] * layout_.groups[g].num_blocks * block_elements_;
}

void KvPool::FillRandom(uint64_t seed, float stddev) {
  for (size_t g = 0; g < group_storage_.size(); ++g) {
    FillNormal(group_storage_[g].data(), group_storage_[g].count(), 0.0f, stddev, seed, g, 0);
  }
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
}

int64_t KvPool::total_bytes() const {
  int64_t bytes = 0;
  for (const auto& storage : group_storage_) bytes += static_cast<int64_t>(storage.bytes());
  return bytes;
}

}  // namespace mkserve::cuda
