// The MoE forward for large token counts (prefill chunks): tokens gathered into expert order,
// then one cuBLAS GEMM per expert that received tokens for gate/up and for down, SiLU*up between,
// and the same weighted combine as MoeForward. It reads the bucket sizes back to the host (one
// sync per layer), so it never runs inside a CUDA graph capture.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/moe.h"

namespace mkserve::cuda {

inline constexpr int64_t kGroupedMoeMinTokens = 128;  // above the largest decode batch

void MoeForwardGrouped(const MoeArgs& args, const MoeWorkspace& workspace, cublasHandle_t cublas,
                       cudaStream_t stream);

}  // namespace mkserve::cuda
