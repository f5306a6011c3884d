// BackgroundResponses: the /v1/responses runs sent with background: true. Each runs on a thread
// of its own, detached from its connection, draining its GenerationRun into its
// ResponsesOutput while the client polls GET /v1/responses/{id}. The ResponseStore holds what a
// poll sees: the "in_progress" object from the start, then the run's end in its place (completed
// or incomplete as any response, "failed" with the engine's error, "cancelled" after Cancel).
// A run sent with stream: true also writes its events to a ResponseEventLog, which streams read
// (the request's own and any resuming one); logs of finished runs are kept, the most recent
// first, within a bound of bytes. At most kMaxBackgroundResponses run at once. Destroying it
// cancels every run and joins its thread, so it must go before the engine does.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "server/generation_run.h"
#include "server/recent_by_bytes.h"
#include "server/response_event_log.h"
#include "server/response_store.h"
#include "server/responses_output.h"

namespace mkserve::server {

inline constexpr size_t kMaxBackgroundResponses = 256;

class BackgroundResponses {
 public:
  // `finished_log_bytes`: what the logs of finished streamed runs may hold together.
  BackgroundResponses(ResponseStore& store, int64_t finished_log_bytes)
      : store_(store), finished_logs_(finished_log_bytes) {}
  ~BackgroundResponses();
  BackgroundResponses(const BackgroundResponses&) = delete;
  BackgroundResponses& operator=(const BackgroundResponses&) = delete;

  // Stores `in_progress` and runs `run` into `output` on a thread. `cancelled` is the flag the
  // run's ConnectionWatch reads (ConnectionWatch::Detached). Throws ApiError(kUnavailable) when
  // kMaxBackgroundResponses are running; then nothing is stored and dropping `run` cancels it.
  // `prompt_tokens` is the usage a run cut short reports (the engine tells it at a finish).
  // `log` (may be null): where a streamed run writes its events, from response.created on.
  void Start(StoredResponse in_progress, std::shared_ptr<std::atomic<bool>> cancelled,
             std::unique_ptr<GenerationRun> run, std::unique_ptr<ResponsesOutput> output,
             int64_t prompt_tokens, std::shared_ptr<ResponseEventLog> log = nullptr);
  // Cancels response `id` if it is running and returns once its cancelled response is stored;
  // false when it is not running.
  bool Cancel(const std::string& id);
  // The event log of streamed response `id`, running or finished and still kept; else null.
  std::shared_ptr<const ResponseEventLog> Log(const std::string& id);
  // Drops the log of response `id` (deleted).
  void Forget(const std::string& id);
  size_t running() const;

 private:
  struct Run {
    std::string id;
    std::shared_ptr<std::atomic<bool>> cancelled;
    std::shared_ptr<std::atomic<bool>> done;  // the thread has stored the end
    std::shared_ptr<ResponseEventLog> log;    // closed once done
    std::thread thread;
  };
  // Joins the runs whose thread is done, their logs joining the finished ones.
  void ReapLocked();

  ResponseStore& store_;
  mutable std::mutex mutex_;
  std::list<Run> runs_;
  RecentByBytes<std::shared_ptr<const ResponseEventLog>> finished_logs_;
};

}  // namespace mkserve::server
