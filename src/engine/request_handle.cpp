#include "engine/request_handle.h"

#include <utility>

namespace mkserve {

void RequestChannel::Push(EngineEvent event) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(std::move(event));
  }
  ready_.notify_all();
}

void RequestChannel::Close() {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

std::optional<EngineEvent> RequestChannel::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !events_.empty() || closed_; });
  if (events_.empty()) return std::nullopt;
  EngineEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

bool RequestChannel::is_done() const {
  std::lock_guard lock(mutex_);
  return closed_ && events_.empty();
}

RequestHandle::RequestHandle(int64_t id, std::shared_ptr<RequestChannel> channel,
                             std::weak_ptr<CancelSink> engine)
    : id_(id), channel_(std::move(channel)), engine_(std::move(engine)) {}

RequestHandle& RequestHandle::operator=(RequestHandle&& other) noexcept {
  if (this != &other) {
    Cancel();
    id_ = std::exchange(other.id_, -1);
    channel_ = std::move(other.channel_);
    engine_ = std::move(other.engine_);
  }
  return *this;
}

std::optional<EngineEvent> RequestHandle::Next(std::chrono::milliseconds timeout) {
  if (!channel_) return std::nullopt;
  return channel_->Pop(timeout);
}

void RequestHandle::Cancel() {
  if (!channel_ || channel_->is_done()) return;
  if (auto engine = engine_.lock()) engine->CancelRequest(id_);
  engine_.reset();
}

}  // namespace mkserve
