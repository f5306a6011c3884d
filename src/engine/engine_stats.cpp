#include "engine/engine_stats.h"

#include <algorithm>

namespace mkserve {

Histogram::Histogram(std::vector<double> bounds)
    : upper_bounds(std::move(bounds)), counts(upper_bounds.size() + 1, 0) {}

void Histogram::Observe(double value) {
  size_t bucket =
      std::lower_bound(upper_bounds.begin(), upper_bounds.end(), value) - upper_bounds.begin();
  ++counts[bucket];
  sum += value;
  ++count;
}

std::vector<double> LatencyBucketsSeconds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1,  0.25,
          0.5,   0.75,   1.0,   2.5,  5.0,   10.0, 20.0,  40.0, 60.0};
}

const char* StepKindName(StepKind kind) {
  switch (kind) {
    case StepKind::kDecode:
      return "decode";
    case StepKind::kPrefill:
      return "prefill";
    case StepKind::kMixed:
      return "mixed";
  }
  return "unknown";
}

std::vector<double> BatchSizeBuckets() { return {1, 2, 4, 8, 16, 24, 32, 48, 64, 128, 256, 512}; }

}  // namespace mkserve
