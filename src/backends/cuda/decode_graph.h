// CudaBackend's internal structs, shared by its .cpp files: the device view of one step's
// metadata, and a captured decode step with the metadata buffer its kernels read.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/device_buffer.h"

namespace mkserve::cuda {

struct CudaBackend::DeviceMetadata {
  const int32_t* token_ids = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* seq_of_token = nullptr;
  const int32_t* logit_tokens = nullptr;
  std::vector<const int32_t*> slots;         // per KV group
  std::vector<const int32_t*> block_tables;  // per KV group
};

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
