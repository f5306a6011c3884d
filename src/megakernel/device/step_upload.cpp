#include "megakernel/device/step_upload.h"

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::megakernel {

StepUpload::~StepUpload() {
  if (host_ != nullptr) cudaFreeHost(host_);
}

size_t StepUpload::Reserve(size_t bytes) {
  const size_t offset = size_;
  size_ += (bytes + 15) / 16 * 16;
  return offset;
}

void StepUpload::Allocate(cudaStream_t stream) {
  const bool host_short = size_ > host_capacity_;
  const bool device_short = static_cast<int64_t>(size_) > device_.count();
  if (!host_short && !device_short) return;
  MKSERVE_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old buffers may still be in use
  if (host_short) {
    if (host_ != nullptr) MKSERVE_CUDA_CHECK(cudaFreeHost(host_));
    host_ = nullptr;
    host_capacity_ = 0;
    MKSERVE_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), size_ * 2));
    host_capacity_ = size_ * 2;
  }
  if (device_short) device_ = cuda::DeviceBuffer<uint8_t>(static_cast<int64_t>(size_) * 2);
}

void StepUpload::Send(cudaStream_t stream) const {
  if (size_ == 0) return;
  MKSERVE_CUDA_CHECK(cudaMemcpyAsync(device_.data(), host_, size_, cudaMemcpyHostToDevice, stream));
}

}  // namespace mkserve::megakernel
