#include "backends/cpu/linear.h"

#include <cassert>

namespace mkserve::cpu {
namespace {

// Rows below this many multiply-adds per share are not worth a thread hand-off.
constexpr int64_t kMinMultiplyAddsPerShare = 1 << 15;

}  // namespace

float Dot(std::span<const float> a, std::span<const float> b) {
  assert(a.size() == b.size());
  float sum = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

void Linear(std::span<const float> x, int64_t num_tokens, const Matrix& w, std::span<float> y,
            ThreadPool& pool) {
  assert(static_cast<int64_t>(x.size()) == num_tokens * w.cols);
  assert(static_cast<int64_t>(y.size()) == num_tokens * w.rows);
  int64_t work_per_row = num_tokens * w.cols;
  int64_t min_grain = kMinMultiplyAddsPerShare / (work_per_row > 0 ? work_per_row : 1) + 1;
  pool.ParallelFor(w.rows, min_grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      std::span<const float> weights = w.Row(row);
      for (int64_t t = 0; t < num_tokens; ++t) {
        y[t * w.rows + row] = Dot(x.subspan(t * w.cols, w.cols), weights);
      }
    }
  });
}

}  // namespace mkserve::cpu
