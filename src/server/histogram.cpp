#include "server/histogram.h"

#include <algorithm>
#include <sstream>

namespace mkserve::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), bucket_counts_(upper_bounds_.size() + 1, 0) {
  std::sort(upper_bounds_.begin(), upper_bounds_.end());
}

void Histogram::Observe(double value) {
  auto bound = std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value);
  ++bucket_counts_[bound - upper_bounds_.begin()];  // the last slot is +Inf
  sum_ += value;
  ++count_;
}

std::string Histogram::Render(const std::string& name, const std::string& help) const {
  std::ostringstream out;
  out.precision(12);
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
  int64_t cumulative = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    cumulative += bucket_counts_[i];
    out << name << "_bucket{le=\"" << upper_bounds_[i] << "\"} " << cumulative << "\n";
  }
  cumulative += bucket_counts_.back();
  out << name << "_bucket{le=\"+Inf\"} " << cumulative << "\n";
  out << name << "_sum " << sum_ << "\n" << name << "_count " << count_ << "\n";
  return out.str();
}

}  // namespace mkserve::server
