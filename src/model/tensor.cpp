#include "model/tensor.h"

#include <cstring>

#include "common/error.h"
#include "common/float_convert.h"

namespace mkserve {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16:
      return 2;
    case DType::kF32:
      return 4;
    case DType::kF8E4M3:
      return 1;
  }
  return 0;
}

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF32:
      return "F32";
    case DType::kF8E4M3:
      return "F8_E4M3";
  }
  return "?";
}

std::optional<DType> ParseDType(const std::string& name) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3}) {
    if (DTypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

int64_t TensorView::num_elements() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

TensorView TensorView::SliceRows(int64_t first_row, int64_t num_rows) const {
  if (shape.empty()) throw Error("tensor \"" + name + "\": cannot slice rows of a scalar");
  if (first_row < 0 || num_rows < 0 || first_row + num_rows > shape[0]) {
    throw Error("tensor \"" + name + "\": rows [" + std::to_string(first_row) + ", " +
                std::to_string(first_row + num_rows) + ") are outside its " +
                std::to_string(shape[0]) + " rows");
  }
  size_t row_bytes = DTypeSize(dtype);
  for (size_t i = 1; i < shape.size(); ++i) row_bytes *= static_cast<size_t>(shape[i]);
  TensorView slice = *this;
  slice.shape[0] = num_rows;
  slice.bytes = bytes.subspan(static_cast<size_t>(first_row) * row_bytes,
                              static_cast<size_t>(num_rows) * row_bytes);
  return slice;
}

float TensorView::At(int64_t i) const {
  size_t offset = static_cast<size_t>(i) * DTypeSize(dtype);
  switch (dtype) {
    case DType::kBF16:
    case DType::kF16: {
      uint16_t bits;
      std::memcpy(&bits, bytes.data() + offset, sizeof(bits));  // data may be unaligned
      return dtype == DType::kBF16 ? Bf16ToFloat(bits) : F16ToFloat(bits);
    }
    case DType::kF32: {
      float value;
      std::memcpy(&value, bytes.data() + offset, sizeof(value));
      return value;
    }
    case DType::kF8E4M3:
      return Fp8E4M3ToFloat(static_cast<uint8_t>(bytes[offset]));
  }
  return 0.0f;
}

std::vector<float> TensorView::ToFloat() const {
  int64_t count = static_cast<int64_t>(bytes.size() / DTypeSize(dtype));
  std::vector<float> values(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) values[static_cast<size_t>(i)] = At(i);
  return values;
}

}  // namespace mkserve
