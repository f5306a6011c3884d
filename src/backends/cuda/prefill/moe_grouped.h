// The MoE forward for large token counts (prefill chunks): the same bucketing as MoeForward, then
// two grouped GEMMs on tensor cores over the expert-sorted assignment rows (grouped_gemm.h):
// gate/up with SiLU*up fused into the epilogue (x rows gathered on load), and down; then the same
// deterministic weighted combine. The bucket offsets stay on the device, so the layer needs no
// host sync and can run inside a CUDA graph. Shapes the grouped GEMM does not take (hidden or
// expert width not a multiple of 32) fall back to one cuBLAS GEMM per active expert, which reads
// the offsets back (one sync) and so refuses to run inside a capture.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/decode/moe.h"

namespace mkserve::cuda {

inline constexpr int64_t kGroupedMoeMinTokens = 128;  // above the largest decode batch

void MoeForwardGrouped(const MoeArgs& args, const MoeWorkspace& workspace, cublasHandle_t cublas,
                       cudaStream_t stream);

}  // namespace mkserve::cuda
