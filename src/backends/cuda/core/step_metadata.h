// Step metadata: a StepPlan's per-token arrays and block tables packed into one int32 buffer (one
// H2D copy per step), the device pointers into that buffer the kernels read, and the bucketed
// plan a captured decode step is keyed by.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "backends/cuda/core/device_buffer.h"
#include "backends/cuda/core/step_plan.h"

namespace mkserve::cuda {

// The plan's arrays back to back, each starting 16-byte aligned: token ids, positions, owning
// sequence, token index of each logits row, then the KV slots of every group, then the block
// tables of every group. `offsets` are the element offsets of those arrays, in that order.
struct PackedMetadata {
  std::vector<int32_t> values;
  std::vector<size_t> offsets;
};

// Device pointers into a packed metadata buffer for one plan.
struct DeviceMetadata {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* seq_of_token = nullptr;
  const int32_t* logit_tokens = nullptr;     // token index of each logits row
  std::vector<const int32_t*> slots;         // per KV group
  std::vector<const int32_t*> block_tables;  // per KV group
};

PackedMetadata PackMetadata(const StepPlan& plan);

// `base` holds `packed.values` (on the device); `num_groups` KV groups.
DeviceMetadata PointMetadata(const int32_t* base, const PackedMetadata& packed, size_t num_groups);

// Packs `plan` into `buffer` (grown, after the stream's pending reads, when too small) and waits
// for the copy: the packed host values are pageable and local.
DeviceMetadata UploadMetadata(const StepPlan& plan, DeviceBuffer<int32_t>& buffer,
                              cudaStream_t stream);
// The same for several plans back to back in one copy (a chunk's pieces); one entry per plan.
std::vector<DeviceMetadata> UploadMetadata(std::span<const StepPlan> plans,
                                           DeviceBuffer<int32_t>& buffer, cudaStream_t stream);

// Each KV group's block tables padded (-1) to a power-of-two page count, and the context length
// set to the widest bucket so attention split counts follow the bucket: one captured step then
// serves every context inside it.
StepPlan BucketPlan(const StepPlan& plan);

// Smallest power of two >= pages (at least 1).
int64_t PagesBucket(int64_t pages);

}  // namespace mkserve::cuda
