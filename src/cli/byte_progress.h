// A progress bar for work counted in bytes (the weight upload): on a terminal one line redrawn
// with percent, bytes and rate; redirected to a file, one line per tenth so logs stay short.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace mkserve::cli {

class ByteProgress {
 public:
  explicit ByteProgress(std::string label);
  ~ByteProgress();  // ends the line if anything was drawn
  ByteProgress(const ByteProgress&) = delete;
  ByteProgress& operator=(const ByteProgress&) = delete;

  void Update(int64_t done_bytes, int64_t total_bytes);

 private:
  std::string label_;
  bool is_terminal_ = false;
  bool drawn_ = false;
  int last_tenth_ = -1;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace mkserve::cli
