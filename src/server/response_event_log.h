// ResponseEventLog: the SSE events of a background response sent with stream: true, kept for the
// client that started it and for any that resume it (GET /v1/responses/{id}?stream=true, from
// the first event or after `starting_after`). Event i is the one whose sequence_number is i: the
// run's ResponsesOutput numbers every event it writes, and every one is appended here in order.
// One writer (the run's thread) appends and closes; readers wait for the events past theirs.
// At most kMaxEventLogBytes are held: past that the oldest go, and a reader that needs one of
// them is told so rather than handed a stream with a hole.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

namespace mkserve::server {

// About 40,000 text deltas: a stream longer than that can still be read as it is written.
inline constexpr int64_t kMaxEventLogBytes = int64_t{8} << 20;

class ResponseEventLog {
 public:
  explicit ResponseEventLog(int64_t max_bytes = kMaxEventLogBytes) : max_bytes_(max_bytes) {}

  // `events`: whole SSE events, each ending with its blank line.
  void Append(std::string_view events);
  // Nothing more will be appended; wakes every reader.
  void Close();

  struct Read {
    std::string events;  // those after `after`, concatenated (empty when none came in time)
    int64_t last = -1;   // the sequence number of the last one in `events`, else `after`
    bool ended = false;  // closed, and nothing past `last`
    bool lost = false;   // the event after `after` is no longer held (events stays empty)
  };
  // The events after sequence number `after` (-1: from the first), waiting up to `wait` for one
  // when there is none yet and the log is open.
  Read After(int64_t after, std::chrono::milliseconds wait) const;

  int64_t bytes() const;

 private:
  const int64_t max_bytes_;
  mutable std::mutex mutex_;
  mutable std::condition_variable appended_;
  std::deque<std::string> events_;  // sequence numbers first_ .. first_ + size - 1
  int64_t first_ = 0;
  int64_t bytes_ = 0;
  bool closed_ = false;
};

}  // namespace mkserve::server
