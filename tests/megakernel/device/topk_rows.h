// Router rows for the top-k's test and probe, and the exact ranking they are held to.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace mkserve::megakernel::topk_rows {

// Rows of random logits; every fourth row with planted ties, a NaN, and near-ties one float ulp
// apart (which a key that drops low bits may rank by id instead).
inline std::vector<float> RandomRows(int experts, int rows, uint32_t seed = 11) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> logits(static_cast<size_t>(experts) * rows);
  for (int r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<size_t>(r) * experts;
    for (int e = 0; e < experts; ++e) row[e] = normal(rng);
    if (r % 4 == 0) {
      row[(r * 7) % experts] = 3.0f;
      row[(r * 7 + 33) % experts] = 3.0f;
      row[(r * 5 + 1) % experts] = NAN;
      row[(r * 3 + 2) % experts] = std::nextafter(3.0f, 4.0f);
    }
  }
  return logits;
}

// The exact ranking: a NaN as -inf, ties to the lower id; top_k ids a row.
inline std::vector<int32_t> CpuTopK(const std::vector<float>& logits, int experts, int top_k,
                                    int rows) {
  std::vector<int32_t> ids;
  for (int r = 0; r < rows; ++r) {
    std::vector<int> order(experts);
    std::iota(order.begin(), order.end(), 0);
    auto value = [&](int e) {
      const float v = logits[static_cast<size_t>(r) * experts + e];
      return std::isnan(v) ? -INFINITY : v;
    };
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return value(a) > value(b); });
    ids.insert(ids.end(), order.begin(), order.begin() + top_k);
  }
  return ids;
}

}  // namespace mkserve::megakernel::topk_rows
