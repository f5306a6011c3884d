#include "backends/cpu/mlp.h"

#include <cmath>
#include <vector>

namespace mkserve::cpu {

float Silu(float x) { return x / (1.0f + std::exp(-x)); }

void SwiGlu(const MlpMatrices& mlp, std::span<const float> x, int64_t num_tokens,
            std::span<float> out, ThreadPool& pool) {
  std::vector<float> gate(num_tokens * mlp.gate.rows);
  std::vector<float> up(num_tokens * mlp.up.rows);
  Linear(x, num_tokens, mlp.gate, gate, pool);
  Linear(x, num_tokens, mlp.up, up, pool);
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = Silu(gate[i]) * up[i];
  Linear(gate, num_tokens, mlp.down, out, pool);
}

}  // namespace mkserve::cpu
