// RequestHandle: the caller's end of one submitted request. Events are pulled with Next(); the
// destructor (or Cancel) cancels the request, and the engine frees its KV at the next step
// boundary. A handle may outlive the Engine: cancelling then does nothing. A caller reading
// several handles waits on one ReadyHandles instead of on each handle in turn.
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

// The tags of the handles that got something to read (an event, or their end), in arrival order:
// a handle told to NotifyReady puts its tag here once for each event and once when it ends.
class ReadyHandles {
 public:
  void Push(size_t tag);
  // The next tag, waiting up to `timeout`; nullopt on timeout.
  std::optional<size_t> Pop(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<size_t> tags_;
};

// Shared between the engine thread (producer) and the handle (consumer).
class RequestChannel {
 public:
  void Push(EngineEvent event);
  void Close();  // no more events will come
  std::optional<EngineEvent> Pop(std::chrono::milliseconds timeout);
  bool is_done() const;
  // From now on every Push and the Close also put `tag` into `ready`; what came before is put
  // there at once (one tag for each event waiting, one for the end).
  void NotifyReady(std::shared_ptr<ReadyHandles> ready, size_t tag);

 private:
  mutable std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<EngineEvent> events_;
  bool closed_ = false;
  std::shared_ptr<ReadyHandles> notify_;
  size_t tag_ = 0;
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
  // Tags `ready` with `tag` for each event and for the end (RequestChannel::NotifyReady); a
  // handle without a request is tagged once at once.
  void NotifyReady(std::shared_ptr<ReadyHandles> ready, size_t tag);
  // Stops the request; idempotent, and a no-op once it is done.
  void Cancel();
  int64_t id() const { return id_; }

 private:
  int64_t id_ = -1;
  std::shared_ptr<RequestChannel> channel_;
  std::weak_ptr<CancelSink> engine_;
};

}  // namespace mkserve
