// CudaBackend::DecodeGraph (internal to the backend's .cpp files): one captured decode step,
// with the metadata buffer its kernels were captured reading.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_buffer.h"

namespace mkserve::cuda {

struct CudaBackend::DecodeGraph {
  cudaGraphExec_t exec = nullptr;
  DeviceBuffer<int32_t> metadata;
  DecodeGraph() = default;
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;
  ~DecodeGraph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
  }
};

}  // namespace mkserve::cuda
