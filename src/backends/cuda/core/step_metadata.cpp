#include "backends/cuda/core/step_metadata.h"

#include <algorithm>

#include "backends/cuda/core/cuda_check.h"
#include "engine/kv_layout.h"

namespace mkserve::cuda {

PackedMetadata PackMetadata(const StepPlan& plan) {
  PackedMetadata packed;
  auto append = [&packed](const std::vector<int32_t>& values) {
    packed.offsets.push_back(packed.values.size());
    packed.values.insert(packed.values.end(), values.begin(), values.end());
    packed.values.resize((packed.values.size() + 3) / 4 * 4, 0);  // 16-byte aligned starts
  };
  append(plan.token_ids);
  append(plan.positions);
  append(plan.seq_of_token);
  std::vector<int32_t> logit_tokens;
  for (const LogitRow& row : plan.logit_rows) logit_tokens.push_back(row.token_index);
  append(logit_tokens);
  for (const auto& slots : plan.slots) append(slots);
  for (const auto& table : plan.block_tables) append(table);
  return packed;
}

DeviceMetadata PointMetadata(const int32_t* base, const PackedMetadata& packed, size_t num_groups) {
  const auto& at = packed.offsets;
  DeviceMetadata meta{base + at[0], base + at[1], base + at[2], base + at[3], {}, {}};
  for (size_t g = 0; g < num_groups; ++g) {
    meta.slots.push_back(base + at[4 + g]);
    meta.block_tables.push_back(base + at[4 + num_groups + g]);
  }
  return meta;
}

DeviceMetadata UploadMetadata(const StepPlan& plan, DeviceBuffer<int32_t>& buffer,
                              cudaStream_t stream) {
  return UploadMetadata(std::span<const StepPlan>(&plan, 1), buffer, stream).front();
}

std::vector<DeviceMetadata> UploadMetadata(std::span<const StepPlan> plans,
                                           DeviceBuffer<int32_t>& buffer, cudaStream_t stream) {
  std::vector<PackedMetadata> packed;
  std::vector<int32_t> values;  // every plan's, each a multiple of 16 bytes long
  for (const StepPlan& plan : plans) {
    packed.push_back(PackMetadata(plan));
    values.insert(values.end(), packed.back().values.begin(), packed.back().values.end());
  }
  const int64_t count = static_cast<int64_t>(values.size());
  if (count > buffer.count()) {
    MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old buffer may still be read
    buffer = DeviceBuffer<int32_t>(count * 2);
  }
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), values.data(), count * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream));
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));  // `values` is pageable and local
  std::vector<DeviceMetadata> metas;
  size_t at = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    metas.push_back(PointMetadata(buffer.data() + at, packed[i], plans[i].slots.size()));
    at += packed[i].values.size();
  }
  return metas;
}

int64_t PagesBucket(int64_t pages) {
  int64_t bucket = 1;
  while (bucket < pages) bucket *= 2;
  return bucket;
}

StepPlan BucketPlan(const StepPlan& plan) {
  StepPlan bucketed = plan;
  int64_t widest = 1;
  for (size_t g = 0; g < plan.max_pages.size(); ++g) {
    const int64_t pages = plan.max_pages[g], bucket = PagesBucket(pages);
    std::vector<int32_t> tables(plan.num_sequences * bucket, -1);
    for (int64_t s = 0; s < plan.num_sequences; ++s) {
      std::copy(plan.block_tables[g].begin() + s * pages,
                plan.block_tables[g].begin() + (s + 1) * pages, tables.begin() + s * bucket);
    }
    bucketed.block_tables[g] = std::move(tables);
    bucketed.max_pages[g] = bucket;
    widest = std::max(widest, bucket);
  }
  bucketed.max_context_tokens = widest * kBlockTokens;  // split counts follow the bucket
  return bucketed;
}

}  // namespace mkserve::cuda
