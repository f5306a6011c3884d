// RequestHandle: the caller's end of one submitted request. Events are pulled with Next(); the
// destructor (or Cancel) cancels the request, and the engine frees its KV at the next step
// boundary. A handle may outlive the Engine: cancelling then does nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include "engine/engine_events.h"

namespace mkserve {

// Shared between the engine thread (producer) and the handle (consumer).
class RequestChannel {
 public:
  void Push(EngineEvent event);
  void Close();  // no more events will come
  std::optional<EngineEvent> Pop(std::chrono::milliseconds timeout);
  bool is_done() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<EngineEvent> events_;
  bool closed_ = false;
};

class CancelSink {
 public:
  virtual ~CancelSink() = default;
  virtual void CancelRequest(int64_t request_id) = 0;
};

class RequestHandle {
 public:
  RequestHandle() = default;
  RequestHandle(int64_t id, std::shared_ptr<RequestChannel> channel,
                std::weak_ptr<CancelSink> engine);
  RequestHandle(RequestHandle&& other) noexcept = default;
  RequestHandle& operator=(RequestHandle&& other) noexcept;
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;
  ~RequestHandle() { Cancel(); }

  // The next event, waiting up to `timeout`; nullopt on timeout or once the request is done.
  std::optional<EngineEvent> Next(std::chrono::milliseconds timeout);
  // True once every event has been taken and no more will come.
  bool is_done() const { return !channel_ || channel_->is_done(); }
  // Stops the request; idempotent, and a no-op once it is done.
  void Cancel();
  int64_t id() const { return id_; }

 private:
  int64_t id_ = -1;
  std::shared_ptr<RequestChannel> channel_;
  std::weak_ptr<CancelSink> engine_;
};

}  // namespace mkserve
