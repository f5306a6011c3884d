#include "common/float_convert.h"

#include <gtest/gtest.h>

#include <cmath>

namespace mkserve {
namespace {

TEST(FloatConvertTest, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 lies exactly between two bf16 values: ties go to the even mantissa (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(NAN))));
}

TEST(FloatConvertTest, F16RoundTripsEveryFiniteValue) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00) continue;  // inf / NaN
    float value = F16ToFloat(static_cast<uint16_t>(bits));
    ASSERT_EQ(FloatToF16(value), bits) << "f16 bits " << bits;
  }
  EXPECT_EQ(F16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(F16ToFloat(0x0001), std::ldexp(1.0f, -24));
}

TEST(FloatConvertTest, Fp8E4M3MatchesTheOcpTable) {
  EXPECT_EQ(Fp8E4M3ToFloat(0x38), 1.0f);
  EXPECT_EQ(Fp8E4M3ToFloat(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(Fp8E4M3ToFloat(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(Fp8E4M3ToFloat(0xb8), -1.0f);
  EXPECT_TRUE(std::isnan(Fp8E4M3ToFloat(0x7f)));
}

}  // namespace
}  // namespace mkserve
