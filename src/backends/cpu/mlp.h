// SwiGLU MLP, the block shared by dense layers, routed experts and the shared expert:
// down(silu(gate x) * up x).
#pragma once

#include <cstdint>
#include <span>

#include "backends/cpu/linear.h"
#include "common/thread_pool.h"

namespace mkserve::cpu {

struct MlpMatrices {
  Matrix gate;  // [intermediate, hidden]
  Matrix up;    // [intermediate, hidden]
  Matrix down;  // [hidden, intermediate]
};

float Silu(float x);

// out = down(silu(gate x) * up x) for each of num_tokens rows of x ([num_tokens, hidden]).
void SwiGlu(const MlpMatrices& mlp, std::span<const float> x, int64_t num_tokens,
            std::span<float> out, ThreadPool& pool);

}  // namespace mkserve::cpu
