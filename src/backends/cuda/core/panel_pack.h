// Row-major weights into panels (weight_panels.h) on the GPU: the uploader's and the
// megakernel's one way of producing the read order.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/core/weight_panels.h"

namespace mkserve::cuda {

// `count` matrices of shape m, row-major and back to back at `src`, into panels at `dst`
// (count * m.Elements(), padding zeroed). src and dst must not overlap.
void PackPanels(const __nv_bfloat16* src, const PanelMatrix& m, int64_t count, __nv_bfloat16* dst,
                cudaStream_t stream);

}  // namespace mkserve::cuda
