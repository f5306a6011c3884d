#include "server/generation_run.h"

#include "server/error.h"

namespace mkserve::server {
namespace {

// How long one wait on the engine lasts before the connection is checked again: short, so a
// hang-up while queued or prefilling frees the KV promptly.
constexpr std::chrono::milliseconds kPollInterval(20);

ErrorKind KindOf(EngineErrorKind kind) {
  switch (kind) {
    case EngineErrorKind::kInvalidRequest:
      return ErrorKind::kInvalidRequest;
    case EngineErrorKind::kQueueFull:
    case EngineErrorKind::kShutdown:
      return ErrorKind::kUnavailable;
    case EngineErrorKind::kBackend:
      return ErrorKind::kInternal;
  }
  return ErrorKind::kInternal;
}

}  // namespace

GenerationRun::GenerationRun(std::vector<RequestHandle> handles, int32_t n,
                             ConnectionWatch connection)
    : handles_(std::move(handles)),
      n_(n),
      connection_(std::move(connection)),
      prompt_usage_(handles_.size()),
      choice_tokens_(handles_.size() * n),
      choice_finished_(handles_.size() * n),
      handle_done_(handles_.size()),
      handles_left_(handles_.size()) {
  for (size_t i = 0; i < handles_.size(); ++i) handles_[i].NotifyReady(ready_, i);
}

std::optional<ChoiceEvent> GenerationRun::Next() {
  // One wait for all the prompts' handles, in the order their events came: a wait per handle
  // would take as many waits to see a hang-up as there are prompts.
  while (!aborted_ && !stopped_by_server_ && !ConnectionEnded()) {
    if (handles_left_ == 0) return std::nullopt;
    const std::optional<size_t> index = ready_->Pop(kPollInterval);
    if (!index) continue;
    RequestHandle& handle = handles_[*index];
    std::optional<EngineEvent> event = handle.Next(std::chrono::milliseconds(0));
    if (!handle_done_[*index] && handle.is_done()) {
      handle_done_[*index] = true;
      --handles_left_;
    }
    if (event) {
      if (std::optional<ChoiceEvent> choice = Translate(*index, std::move(*event))) return choice;
    }
  }
  if (abort_events_.empty()) return std::nullopt;
  ChoiceEvent event = std::move(abort_events_.front());
  abort_events_.pop_front();
  return event;
}

// Checked on a clock, not only when the engine is quiet: a steady stream of tokens (the whole
// life of a non-streaming request) must not hide a client that has gone.
bool GenerationRun::ConnectionEnded() {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_connection_check_ < kPollInterval) return false;
  last_connection_check_ = now;
  if (connection_()) {
    aborted_ = true;
  } else if (connection_.stop_requested()) {
    QueueAbortEvents();
  } else {
    return false;
  }
  for (RequestHandle& handle : handles_) handle.Cancel();
  return true;
}

// Only unfinished choices are aborted: a run whose choices all finished is not stopped. Usage of
// an aborted choice: the tokens it received; its prompt's (and cached) tokens once the engine
// reported them (with a token or a sibling's finish), else 0.
void GenerationRun::QueueAbortEvents() {
  for (size_t choice = 0; choice < choice_finished_.size(); ++choice) {
    if (choice_finished_[choice]) continue;
    stopped_by_server_ = true;
    FinishedEvent finished;
    finished.index = static_cast<int32_t>(choice) % n_;
    finished.reason = FinishReason::kAbort;
    finished.usage = prompt_usage_[choice / n_];
    finished.usage.completion_tokens = choice_tokens_[choice];
    completion_tokens_ += choice_tokens_[choice];
    choice_finished_[choice] = true;
    abort_events_.push_back({static_cast<int32_t>(choice), std::move(finished)});
  }
}

std::optional<ChoiceEvent> GenerationRun::Translate(size_t handle_index, EngineEvent event) {
  int32_t base = static_cast<int32_t>(handle_index) * n_;
  if (auto* error = std::get_if<ErrorEvent>(&event)) {
    for (RequestHandle& handle : handles_) handle.Cancel();
    throw ApiError(KindOf(error->kind), error->message);
  }
  Usage& usage = prompt_usage_[handle_index];
  if (auto* tokens = std::get_if<TokensEvent>(&event)) {
    choice_tokens_[base + tokens->index] += static_cast<int64_t>(tokens->token_ids.size());
    usage.prompt_tokens = std::max(usage.prompt_tokens, tokens->prompt_tokens);
    usage.cached_tokens = std::max(usage.cached_tokens, tokens->cached_prompt_tokens);
    return ChoiceEvent{base + tokens->index, std::move(*tokens)};
  }
  auto& finished = std::get<FinishedEvent>(event);
  choice_finished_[base + finished.index] = true;
  usage.prompt_tokens = std::max(usage.prompt_tokens, finished.usage.prompt_tokens);
  usage.cached_tokens = std::max(usage.cached_tokens, finished.usage.cached_tokens);
  completion_tokens_ += finished.usage.completion_tokens;
  return ChoiceEvent{base + finished.index, std::move(finished)};
}

Usage GenerationRun::TotalUsage() const {
  Usage total;
  for (const Usage& usage : prompt_usage_) {
    total.prompt_tokens += usage.prompt_tokens;
    total.cached_tokens += usage.cached_tokens;
  }
  total.completion_tokens = completion_tokens_;
  for (size_t choice = 0; choice < choice_tokens_.size(); ++choice) {  // a run cut short
    if (!choice_finished_[choice]) total.completion_tokens += choice_tokens_[choice];
  }
  return total;
}

double GenerationRun::ElapsedSeconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace mkserve::server
