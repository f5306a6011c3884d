#include "cli/byte_progress.h"

#include <unistd.h>

#include <cstdio>

namespace mkserve::cli {
namespace {

constexpr int kBarWidth = 30;
constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

}  // namespace

ByteProgress::ByteProgress(std::string label)
    : label_(std::move(label)),
      is_terminal_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {}

ByteProgress::~ByteProgress() {
  if (drawn_ && is_terminal_) std::fprintf(stderr, "\n");
}

void ByteProgress::Update(int64_t done_bytes, int64_t total_bytes) {
  if (total_bytes <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const double fraction = static_cast<double>(done_bytes) / static_cast<double>(total_bytes);
  const double seconds = std::chrono::duration<double>(now - start_).count();
  const double rate = seconds > 0.0 ? static_cast<double>(done_bytes) / seconds : 0.0;
  const bool finished = done_bytes >= total_bytes;
  if (!is_terminal_) {
    const int tenth = static_cast<int>(fraction * 10.0);
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(stderr, "%s %3.0f%% %.2f / %.2f GB, %.1f s\n", label_.c_str(), fraction * 100.0,
                 done_bytes / 1e9, total_bytes / 1e9, seconds);
    drawn_ = true;
    return;
  }
  if (!finished && drawn_ && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(kBarWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %.2f / %.2f GB %.2f GB/s", label_.c_str(), bar.c_str(),
               fraction * 100.0, done_bytes / 1e9, total_bytes / 1e9, rate / 1e9);
  drawn_ = true;
}

}  // namespace mkserve::cli
