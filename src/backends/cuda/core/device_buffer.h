// DeviceBuffer: one cudaMalloc'd array owned by RAII, typed, with its element count.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "backends/cuda/core/cuda_check.h"

namespace mkserve::cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t count) : count_(count) {
    if (count > 0) {
      MKSERVE_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
    }
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { Release(); }

  T* data() const { return data_; }
  int64_t count() const { return count_; }
  size_t bytes() const { return static_cast<size_t>(count_) * sizeof(T); }

 private:
  void Release() {
    if (data_ != nullptr) cudaFree(data_);  // no throw from a destructor path
    data_ = nullptr;
  }
  T* data_ = nullptr;
  int64_t count_ = 0;
};

}  // namespace mkserve::cuda
