#include "common/float_convert.h"

#include <bit>
#include <cmath>
#include <limits>

namespace mkserve {

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16); }

uint16_t FloatToBf16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);  // keep it a quiet NaN
  uint32_t rounding_bias = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

float F16ToFloat(uint16_t bits) {
  uint32_t sign = (bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: value = mantissa * 2^-24
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) {
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t FloatToF16(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  float magnitude = std::fabs(value);
  if (std::isnan(value)) return sign | 0x7e00;
  if (magnitude >= 65520.0f) return sign | 0x7c00;  // rounds to infinity
  if (magnitude < 6.103515625e-05f) {               // subnormal range: units of 2^-24
    return sign | static_cast<uint16_t>(std::nearbyint(magnitude * 16777216.0f));
  }
  uint32_t abs_bits = bits & 0x7fffffffu;
  uint32_t rounding_bias = 0xfff + ((abs_bits >> 13) & 1);
  abs_bits += rounding_bias;
  return sign | static_cast<uint16_t>(((abs_bits >> 13) - (112u << 10)));
}

float Fp8E4M3ToFloat(uint8_t bits) {
  bool negative = bits & 0x80;
  uint32_t exponent = (bits >> 3) & 0xf;
  uint32_t mantissa = bits & 0x7;
  float magnitude;
  if (exponent == 0xf && mantissa == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m/8 * 2^-6
  } else {
    magnitude =
        std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, static_cast<int>(exponent) - 7);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace mkserve
