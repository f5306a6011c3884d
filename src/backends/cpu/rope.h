// Rotary position embedding, interleaved (GPT-J) style as cohere2_moe uses it: the pair
// (x[2j], x[2j+1]) rotates by the angle position * inv_freq[j], inv_freq[j] = theta^(-2j/head_dim),
// over the whole head. Only layers whose LayerSpec::uses_rope is set apply it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mkserve::cpu {

class Rope {
 public:
  Rope(double theta, int64_t head_dim);

  // Rotates one head vector (head_dim values) in place for the given position.
  void Apply(std::span<float> head, int64_t position) const;
  // Rotates each of the num_heads head vectors packed in x.
  void ApplyHeads(std::span<float> x, int64_t num_heads, int64_t position) const;

  std::span<const float> inv_freq() const { return inv_freq_; }

 private:
  int64_t head_dim_ = 0;
  std::vector<float> inv_freq_;  // head_dim / 2 entries, fp32 as HF stores them
};

}  // namespace mkserve::cpu
