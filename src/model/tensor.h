// TensorView: a typed, shaped, read-only window onto checkpoint bytes (usually an mmap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mkserve {

enum class DType { kBF16, kF16, kF32, kF8E4M3 };

size_t DTypeSize(DType dtype);
std::string DTypeName(DType dtype);  // the safetensors spelling: "BF16", "F16", "F32", "F8_E4M3"
std::optional<DType> ParseDType(const std::string& name);  // nullopt for any other spelling

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;

  int64_t num_elements() const;
  // Rows [first_row, first_row + num_rows) of dimension 0, still a view (no copy).
  TensorView SliceRows(int64_t first_row, int64_t num_rows) const;
  // Element i converted to float, whatever the dtype.
  float At(int64_t i) const;
  // The whole tensor as float32.
  std::vector<float> ToFloat() const;
};

}  // namespace mkserve
