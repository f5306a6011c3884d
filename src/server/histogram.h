// A Prometheus histogram: cumulative bucket counts plus sum and count. Not thread-safe on its
// own; ServerMetrics guards it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mkserve::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);
  // The `# TYPE` line, the `_bucket{le=...}` lines (ending with +Inf), `_sum` and `_count`.
  std::string Render(const std::string& name, const std::string& help) const;

  int64_t count() const { return count_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<int64_t> bucket_counts_;  // per bound, not cumulative; cumulated when rendered
  double sum_ = 0.0;
  int64_t count_ = 0;
};

}  // namespace mkserve::server
