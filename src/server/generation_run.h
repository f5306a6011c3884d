// GenerationRun: the engine side of one HTTP request. It owns the RequestHandles of its prompts
// (one per prompt; each with n siblings), pulls their events in arrival order, and numbers the
// choices as OpenAI does (prompt_index * n + sibling). Dropping the run cancels every handle, so
// a disconnect, an error or an early return all free the KV blocks. When the server shuts down
// past its drain timeout, every unfinished choice ends with finish reason "abort".
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/connection_watch.h"

namespace mkserve::server {

struct ChoiceEvent {
  int32_t choice_index = 0;
  std::variant<TokensEvent, FinishedEvent> event;
};

class GenerationRun {
 public:
  // `connection` is polled every few ms, events flowing or not: a hang-up cancels the run; a
  // server stop cancels it and ends each unfinished choice with FinishReason::kAbort.
  GenerationRun(std::vector<RequestHandle> handles, int32_t n, ConnectionWatch connection);

  // The next event of any choice; nullopt once every choice is finished or the client went away
  // (then aborted() is true). Throws ApiError for an engine ErrorEvent.
  std::optional<ChoiceEvent> Next();

  bool aborted() const { return aborted_; }
  // True once the server stopped the run (its unfinished choices got kAbort events).
  bool stopped_by_server() const { return stopped_by_server_; }
  int32_t num_choices() const { return static_cast<int32_t>(handles_.size()) * n_; }
  // Prompt tokens counted once per prompt (known once a choice of it has finished); completion
  // tokens summed over choices, those received so far for an unfinished one.
  Usage TotalUsage() const;
  // Seconds since the run was created, for time-to-first-token.
  double ElapsedSeconds() const;

 private:
  std::optional<ChoiceEvent> Translate(size_t handle_index, EngineEvent event);
  // Cancels every handle once the client hung up or the server stops; true then.
  bool ConnectionEnded();
  void QueueAbortEvents();

  std::vector<RequestHandle> handles_;
  int32_t n_ = 1;
  ConnectionWatch connection_;
  std::vector<Usage> prompt_usage_;     // per prompt: prompt and cached tokens
  std::vector<int64_t> choice_tokens_;  // per choice: tokens received so far
  std::vector<bool> choice_finished_;   // per choice
  std::deque<ChoiceEvent> abort_events_;
  int64_t completion_tokens_ = 0;
  std::shared_ptr<ReadyHandles> ready_ = std::make_shared<ReadyHandles>();
  std::vector<bool> handle_done_;  // per handle: its end was seen
  size_t handles_left_ = 0;
  bool aborted_ = false;
  bool stopped_by_server_ = false;
  std::chrono::steady_clock::time_point last_connection_check_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace mkserve::server
