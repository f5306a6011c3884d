// Helpers for model tests: tensors with known values and raw safetensors images.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/float_convert.h"
#include "model/safetensors_writer.h"

namespace mkserve::testing_util {

// A BF16 tensor whose element i is `start + step * i` (exact in bf16 for small integers/steps).
inline TensorData Bf16Ramp(const std::string& name, std::vector<int64_t> shape, float start,
                           float step) {
  TensorData tensor;
  tensor.spec = {.name = name, .dtype = DType::kBF16, .shape = std::move(shape)};
  size_t count = tensor.spec.size_bytes() / 2;
  tensor.bytes.resize(count * 2);
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits = FloatToBf16(start + step * static_cast<float>(i));
    std::memcpy(tensor.bytes.data() + 2 * i, &bits, 2);
  }
  return tensor;
}

inline TensorData F32Values(const std::string& name, std::vector<int64_t> shape,
                            const std::vector<float>& values) {
  TensorData tensor;
  tensor.spec = {.name = name, .dtype = DType::kF32, .shape = std::move(shape)};
  tensor.bytes.resize(values.size() * 4);
  std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

// 8-byte little-endian `header_length`, then `header`, then `data`: any combination, valid or not.
inline std::vector<std::byte> RawFile(uint64_t header_length, const std::string& header,
                                      const std::string& data) {
  std::vector<std::byte> bytes(8);
  for (size_t i = 0; i < 8; ++i)
    bytes[i] = static_cast<std::byte>((header_length >> (8 * i)) & 0xff);
  for (char c : header + data) bytes.push_back(static_cast<std::byte>(c));
  return bytes;
}

inline std::vector<std::byte> RawFile(const std::string& header, const std::string& data) {
  return RawFile(header.size(), header, data);
}

}  // namespace mkserve::testing_util
