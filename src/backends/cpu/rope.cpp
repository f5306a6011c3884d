#include "backends/cpu/rope.h"

#include <cassert>
#include <cmath>

namespace mkserve::cpu {

Rope::Rope(double theta, int64_t head_dim) : head_dim_(head_dim) {
  assert(head_dim % 2 == 0);
  for (int64_t j = 0; j < head_dim / 2; ++j) {
    double exponent = static_cast<double>(2 * j) / static_cast<double>(head_dim);
    inv_freq_.push_back(static_cast<float>(1.0 / std::pow(theta, exponent)));
  }
}

void Rope::Apply(std::span<float> head, int64_t position) const {
  assert(static_cast<int64_t>(head.size()) == head_dim_);
  for (size_t j = 0; j < inv_freq_.size(); ++j) {
    // The angle is formed in fp32 like HF's position * inv_freq, which matters at long contexts.
    float angle = static_cast<float>(position) * inv_freq_[j];
    float cos_angle = static_cast<float>(std::cos(static_cast<double>(angle)));
    float sin_angle = static_cast<float>(std::sin(static_cast<double>(angle)));
    float even = head[2 * j];
    float odd = head[2 * j + 1];
    head[2 * j] = even * cos_angle - odd * sin_angle;
    head[2 * j + 1] = odd * cos_angle + even * sin_angle;
  }
}

void Rope::ApplyHeads(std::span<float> x, int64_t num_heads, int64_t position) const {
  assert(static_cast<int64_t>(x.size()) == num_heads * head_dim_);
  for (int64_t h = 0; h < num_heads; ++h) Apply(x.subspan(h * head_dim_, head_dim_), position);
}

}  // namespace mkserve::cpu
