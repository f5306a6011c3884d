#include "backends/cuda/core/device_info.h"

#include <cuda_runtime.h>

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

std::string GpuUnavailableReason(cudaError_t status, int device_count) {
  constexpr const char* kWhatToDo =
      ": check that nvidia-smi lists the GPU and that CUDA_VISIBLE_DEVICES does not hide it (the "
      "CPU backend, serve --backend cpu, needs none)";
  if (status != cudaSuccess) {
    return std::string("no usable NVIDIA GPU for the CUDA backend (") + cudaGetErrorName(status) +
           ": " + cudaGetErrorString(status) + ")" + kWhatToDo;
  }
  if (device_count < 1) return std::string("no CUDA device is visible to this process") + kWhatToDo;
  return {};
}

DeviceInfo DeviceInfo::Query() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  const std::string reason = GpuUnavailableReason(status, count);
  if (!reason.empty()) {
    cudaGetLastError();  // not sticky: leave the runtime's error state clean
    throw Error(reason);
  }
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
