#include "model/tensor.h"

#include <cstring>

#include <gtest/gtest.h>

#include "common/error.h"

namespace mkserve {
namespace {

TensorView View(DType dtype, std::vector<int64_t> shape, const std::vector<uint8_t>& raw) {
  TensorView view;
  view.name = "t";
  view.dtype = dtype;
  view.shape = std::move(shape);
  view.bytes = std::span(reinterpret_cast<const std::byte*>(raw.data()), raw.size());
  return view;
}

TEST(TensorTest, DTypeNamesAndSizes) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32, DType::kF8E4M3}) {
    EXPECT_EQ(ParseDType(DTypeName(dtype)), dtype);
  }
  EXPECT_EQ(DTypeName(DType::kF8E4M3), "F8_E4M3");
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF32), 4u);
  EXPECT_EQ(DTypeSize(DType::kF8E4M3), 1u);
  EXPECT_FALSE(ParseDType("F8_E5M2").has_value());
  EXPECT_FALSE(ParseDType("bf16").has_value());
}

TEST(TensorTest, AtDecodesEveryDType) {
  // Little-endian bit patterns of 1.0 and -2.0 in each format.
  std::vector<uint8_t> bf16 = {0x80, 0x3f, 0x00, 0xc0};
  std::vector<uint8_t> f16 = {0x00, 0x3c, 0x00, 0xc0};
  std::vector<uint8_t> f32 = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  std::vector<uint8_t> f8 = {0x38, 0xc0};  // e4m3: bias 7
  for (auto [dtype, raw] : {std::pair{DType::kBF16, bf16}, std::pair{DType::kF16, f16},
                            std::pair{DType::kF32, f32}, std::pair{DType::kF8E4M3, f8}}) {
    TensorView view = View(dtype, {2}, raw);
    EXPECT_EQ(view.ToFloat(), (std::vector<float>{1.0f, -2.0f})) << DTypeName(dtype);
  }
}

TEST(TensorTest, AtReadsUnalignedData) {
  std::vector<uint8_t> raw = {0xff, 0x00, 0x00, 0x80, 0x3f};  // f32 1.0 at offset 1
  TensorView view = View(DType::kF32, {1}, raw);
  view.bytes = view.bytes.subspan(1);
  EXPECT_EQ(view.At(0), 1.0f);
}

TEST(TensorTest, SliceRows) {
  std::vector<uint8_t> raw(2 * 3 * 2 * 4);
  for (size_t i = 0; i < raw.size() / 4; ++i) {
    float value = static_cast<float>(i);
    std::memcpy(raw.data() + 4 * i, &value, 4);
  }
  TensorView view = View(DType::kF32, {3, 2, 2}, raw);  // 12 floats, 4 per row
  TensorView slice = view.SliceRows(1, 2);
  EXPECT_EQ(slice.shape, (std::vector<int64_t>{2, 2, 2}));
  EXPECT_EQ(slice.num_elements(), 8);
  EXPECT_EQ(slice.At(0), 4.0f);
  EXPECT_EQ(slice.ToFloat().back(), 11.0f);
  EXPECT_EQ(view.SliceRows(3, 0).num_elements(), 0);
  EXPECT_THROW(view.SliceRows(2, 2), Error);
  EXPECT_THROW(view.SliceRows(-1, 1), Error);
  EXPECT_THROW(View(DType::kF32, {}, raw).SliceRows(0, 1), Error);
}

}  // namespace
}  // namespace mkserve
