// Kernel launches with programmatic dependent launch (PDL): the next kernel on the stream may be
// scheduled while this one drains, so its prologue (weight prefetch, index math) overlaps the
// previous kernel's tail; CUDA graphs capture the dependency as a programmatic edge. Kernels
// launched this way call WaitForPrevious() (kernel_common.cuh) before touching data another
// kernel writes or reads. Off unless MKSERVE_PDL=1: on the H200 the programmatic edges made the
// captured decode step slower (docs/performance.md), so the plain launch is the default.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_info.h"

namespace mkserve::cuda {

inline bool PdlEnabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("MKSERVE_PDL");
    return value != nullptr && std::strcmp(value, "1") == 0;
  }();
  return enabled;
}

template <typename... Params, typename... Args>
void LaunchPdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
               cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = PdlEnabled() ? 1 : 0;
  MKSERVE_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// Number of SMs of the current device (DeviceInfo, read once: the backend uses one device).
inline int DeviceSmCount() { return CurrentDeviceInfo().num_sms; }

}  // namespace mkserve::cuda
