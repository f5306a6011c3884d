#include "backends/cpu/norm.h"

#include <cassert>
#include <cmath>

namespace mkserve::cpu {

// Sums run in double: torch reduces in fp32 with pairwise blocks, and a double sum is at least as
// close to the exact value as that, so both sit within fp32 rounding of each other.
void RmsNorm(std::span<const float> x, std::span<const float> weight, float eps,
             std::span<float> out) {
  assert(x.size() == weight.size() && out.size() == weight.size());
  double sum_squares = 0.0;
  for (float value : x) sum_squares += static_cast<double>(value) * value;
  float mean_square = static_cast<float>(sum_squares / static_cast<double>(x.size()));
  float inv_rms = 1.0f / std::sqrt(mean_square + eps);
  for (size_t i = 0; i < x.size(); ++i) out[i] = weight[i] * (x[i] * inv_rms);
}

void LayerNorm(std::span<const float> x, std::span<const float> weight, float eps,
               std::span<float> out) {
  assert(x.size() == weight.size() && out.size() == weight.size());
  double sum = 0.0;
  for (float value : x) sum += value;
  float mean = static_cast<float>(sum / static_cast<double>(x.size()));
  double sum_squares = 0.0;
  for (float value : x) sum_squares += static_cast<double>(value - mean) * (value - mean);
  float variance = static_cast<float>(sum_squares / static_cast<double>(x.size()));
  float inv_std = 1.0f / std::sqrt(variance + eps);
  for (size_t i = 0; i < x.size(); ++i) out[i] = weight[i] * ((x[i] - mean) * inv_std);
}

void NormRows(NormKind kind, std::span<const float> x, int64_t num_rows,
              std::span<const float> weight, float eps, std::span<float> out) {
  size_t width = weight.size();
  assert(x.size() == num_rows * width && out.size() == x.size());
  for (int64_t row = 0; row < num_rows; ++row) {
    std::span<const float> in_row = x.subspan(row * width, width);
    std::span<float> out_row = out.subspan(row * width, width);
    if (kind == NormKind::kRmsNorm) {
      RmsNorm(in_row, weight, eps, out_row);
    } else {
      LayerNorm(in_row, weight, eps, out_row);
    }
  }
}

}  // namespace mkserve::cpu
