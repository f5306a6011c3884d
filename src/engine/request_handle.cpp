#include "engine/request_handle.h"

#include <utility>

namespace mkserve {

void ReadyHandles::Push(size_t tag) {
  {
    std::lock_guard lock(mutex_);
    tags_.push_back(tag);
  }
  ready_.notify_one();
}

std::optional<size_t> ReadyHandles::Pop(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ready_.wait_for(lock, timeout, [&] { return !tags_.empty(); });
  if (tags_.empty()) return std::nullopt;
  const size_t tag = tags_.front();
  tags_.pop_front();
  return tag;
}

void RequestChannel::Push(EngineEvent event) {
  std::shared_ptr<ReadyHandles> notify;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    events_.push_back(std::move(event));
    notify = notify_;
  }
  ready_.notify_all();
  if (notify) notify->Push(tag_);
}

void RequestChannel::Close() {
  std::shared_ptr<ReadyHandles> notify;
  {
    std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    notify = notify_;
  }
  ready_.notify_all();
  if (notify) notify->Push(tag_);
}

void RequestChannel::NotifyReady(std::shared_ptr<ReadyHandles> ready, size_t tag) {
  size_t pending = 0;
  {
    std::lock_guard lock(mutex_);
    notify_ = ready;
    tag_ = tag;
    pending = events_.size() + (closed_ ? 1 : 0);
  }
  for (size_t i = 0; i < pending; ++i) ready->Push(tag);
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

void RequestHandle::NotifyReady(std::shared_ptr<ReadyHandles> ready, size_t tag) {
  if (channel_) {
    channel_->NotifyReady(std::move(ready), tag);
  } else {
    ready->Push(tag);
  }
}

void RequestHandle::Cancel() {
  if (!channel_ || channel_->is_done()) return;
  if (auto engine = engine_.lock()) engine->CancelRequest(id_);
  engine_.reset();
}

}  // namespace mkserve
