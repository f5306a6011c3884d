// Conversions between the checkpoint dtypes and float. Round-to-nearest-even when narrowing,
// as torch does, so files we write read back the way HF would write them.
#pragma once

#include <cstdint>
#include <span>

namespace mkserve {

float Bf16ToFloat(uint16_t bits);
uint16_t FloatToBf16(float value);
float F16ToFloat(uint16_t bits);
uint16_t FloatToF16(float value);
// OCP FP8 E4M3 (the "fn" variant: no infinities, 0x7f/0xff are NaN).
float Fp8E4M3ToFloat(uint8_t bits);

}  // namespace mkserve
