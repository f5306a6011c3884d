#include "server/response_event_log.h"

#include <algorithm>

namespace mkserve::server {

void ResponseEventLog::Append(std::string_view events) {
  {
    std::lock_guard lock(mutex_);
    size_t begin = 0;
    while (begin < events.size()) {
      size_t end = events.find("\n\n", begin);
      end = end == std::string_view::npos ? events.size() : end + 2;
      events_.emplace_back(events.substr(begin, end - begin));
      bytes_ += static_cast<int64_t>(end - begin);
      begin = end;
    }
    while (bytes_ > max_bytes_ && events_.size() > 1) {
      bytes_ -= static_cast<int64_t>(events_.front().size());
      events_.pop_front();
      ++first_;
    }
  }
  appended_.notify_all();
}

void ResponseEventLog::Close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  appended_.notify_all();
}

ResponseEventLog::Read ResponseEventLog::After(int64_t after,
                                               std::chrono::milliseconds wait) const {
  std::unique_lock lock(mutex_);
  auto end = [&] { return first_ + static_cast<int64_t>(events_.size()); };
  appended_.wait_for(lock, wait, [&] { return closed_ || end() > after + 1; });
  Read read;
  read.last = after;
  if (after + 1 < first_) {
    read.lost = true;
    return read;
  }
  for (int64_t i = after + 1; i < end(); ++i) read.events += events_[i - first_];
  read.last = std::max(after, end() - 1);
  read.ended = closed_ && read.last >= end() - 1;
  return read;
}

int64_t ResponseEventLog::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

}  // namespace mkserve::server
