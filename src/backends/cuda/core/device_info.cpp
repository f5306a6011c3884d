#include "backends/cuda/core/device_info.h"

#include <cuda_runtime.h>

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

DeviceInfo DeviceInfo::Query() {
  DeviceInfo info;
  MKSERVE_CUDA_CHECK(cudaGetDevice(&info.device));
  cudaDeviceProp prop{};
  MKSERVE_CUDA_CHECK(cudaGetDeviceProperties(&prop, info.device));
  info.num_sms = prop.multiProcessorCount;
  info.shared_memory_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  info.shared_memory_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  return info;
}

const DeviceInfo& CurrentDeviceInfo() {
  static const DeviceInfo info = DeviceInfo::Query();
  return info;
}

}  // namespace mkserve::cuda
