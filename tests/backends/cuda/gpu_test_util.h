// Helpers for the CUDA kernel tests: device arrays filled from host vectors (outputs pre-filled
// with NaN so an unwritten element fails), seeded random inputs, bf16 rounding and comparisons.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/core/cuda_check.h"
#include "backends/cuda/core/device_buffer.h"
#include "common/float_convert.h"

namespace mkserve::cuda::testing {

using bf16 = __nv_bfloat16;

inline float RoundBf16(float v) { return Bf16ToFloat(FloatToBf16(v)); }

inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Random values already rounded to bf16, so host and device see identical inputs.
inline std::vector<float> RandomBf16Values(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::vector<float> v = RandomFloats(n, seed, scale);
  for (auto& x : v) x = RoundBf16(x);
  return v;
}

inline DeviceBuffer<bf16> ToDeviceBf16(const std::vector<float>& host) {
  std::vector<uint16_t> bits(host.size());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = FloatToBf16(host[i]);
  DeviceBuffer<bf16> buffer(static_cast<int64_t>(host.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(buffer.data(), bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return buffer;
}

template <typename T>
DeviceBuffer<T> ToDevice(const std::vector<T>& host) {
  DeviceBuffer<T> buffer(static_cast<int64_t>(host.size()));
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

inline DeviceBuffer<float> NanFloats(int64_t n) {
  return ToDevice(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

inline DeviceBuffer<bf16> NanBf16(int64_t n) {
  return ToDeviceBf16(std::vector<float>(n, std::numeric_limits<float>::quiet_NaN()));
}

template <typename T>
std::vector<T> ToHost(const DeviceBuffer<T>& buffer) {
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<T> host(buffer.count());
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(host.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost));
  return host;
}

inline std::vector<float> ToHostFloat(const DeviceBuffer<bf16>& buffer) {
  MKSERVE_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<uint16_t> bits(buffer.count());
  MKSERVE_CUDA_CHECK(
      cudaMemcpy(bits.data(), buffer.data(), buffer.bytes(), cudaMemcpyDeviceToHost));
  std::vector<float> host(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) host[i] = Bf16ToFloat(bits[i]);
  return host;
}

// Every element within atol + rtol * |expected| (NaN anywhere fails).
inline void ExpectClose(const std::vector<float>& actual, const std::vector<float>& expected,
                        float atol, float rtol, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int64_t bad = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const float tolerance = atol + rtol * std::fabs(expected[i]);
    if (!(std::fabs(actual[i] - expected[i]) <= tolerance)) {
      if (bad++ < 5) {
        ADD_FAILURE() << what << "[" << i << "]: got " << actual[i] << ", want " << expected[i];
      }
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << actual.size() << " elements off";
}

inline double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return dot / std::sqrt(na * nb);
}

// Skips nothing: a machine without a GPU fails the test with the CUDA error.
inline void RequireGpu() {
  int count = 0;
  MKSERVE_CUDA_CHECK(cudaGetDeviceCount(&count));
  ASSERT_GT(count, 0) << "no CUDA device";
}

}  // namespace mkserve::cuda::testing

namespace mkserve::cuda::testing {

// Greedy agreement up to near-ties: bf16 activations may legitimately flip a choice whose two
// best reference logits are closer than `tie_fraction` of the largest logit. Anything else fails.
inline void ExpectSameGreedy(int32_t got, int32_t want, const std::vector<float>& reference_logits,
                             const std::string& where, double tie_fraction = 0.005) {
  ASSERT_GE(got, 0) << where;
  ASSERT_LT(static_cast<size_t>(got), reference_logits.size()) << where;
  if (got == want) return;
  double max_abs = 0;
  for (float v : reference_logits) max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
  const double gap = reference_logits[want] - reference_logits[got];
  EXPECT_LE(gap, tie_fraction * max_abs)
      << where << ": greedy token " << got << " instead of " << want << " (reference gap " << gap
      << ", not a near-tie)";
}

}  // namespace mkserve::cuda::testing
