// Matrix and Linear: fp32 weights in the nn.Linear convention (weight [out_features, in_features])
// and the product y = x W^T over a run of tokens.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"

namespace mkserve::cpu {

struct Matrix {
  std::vector<float> values;  // row-major [rows, cols]
  int64_t rows = 0;
  int64_t cols = 0;

  std::span<const float> Row(int64_t row) const {
    return std::span<const float>(values).subspan(row * cols, cols);
  }
};

float Dot(std::span<const float> a, std::span<const float> b);

// y[t, o] = sum_i x[t, i] * w[o, i] for every token t; x is [num_tokens, w.cols], y is
// [num_tokens, w.rows]. Each output is one Dot, so a token's result does not depend on how many
// tokens share the call.
void Linear(std::span<const float> x, int64_t num_tokens, const Matrix& w, std::span<float> y,
            ThreadPool& pool);

}  // namespace mkserve::cpu
