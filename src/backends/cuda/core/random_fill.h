// Seeded normal random fill on the GPU, counter-based (element i of stream s depends only on
// (seed, s, i)), so random weights and random KV are reproducible whatever the launch shape.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mkserve::cuda {

void FillNormal(__nv_bfloat16* dst, int64_t count, float mean, float stddev, uint64_t seed,
                uint64_t stream_id, cudaStream_t stream);

// The same draw on the host (for tests): element `index` of (seed, stream_id).
float NormalAt(uint64_t seed, uint64_t stream_id, int64_t index);

}  // namespace mkserve::cuda
