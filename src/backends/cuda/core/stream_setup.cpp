#include "backends/cuda/core/stream_setup.h"

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

namespace {
constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;
}  // namespace

cudaStream_t CreateStream(StreamPriority priority) {
  int least = 0, greatest = 0;
  MKSERVE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t stream = nullptr;
  MKSERVE_CUDA_CHECK(cudaStreamCreateWithPriority(
      &stream, cudaStreamNonBlocking, priority == StreamPriority::kHighest ? greatest : least));
  return stream;
}

cublasHandle_t CreateCublas(DeviceBuffer<uint8_t>& workspace) {
  workspace = DeviceBuffer<uint8_t>(kCublasWorkspaceBytes);
  cublasHandle_t handle = nullptr;
  MKSERVE_CUBLAS_CHECK(cublasCreate(&handle));
  const cublasStatus_t bound = cublasSetWorkspace(handle, workspace.data(), workspace.bytes());
  if (bound != CUBLAS_STATUS_SUCCESS) cublasDestroy(handle);
  MKSERVE_CUBLAS_CHECK(bound);
  return handle;
}

}  // namespace mkserve::cuda
