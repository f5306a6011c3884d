#include "server/background_responses.h"

#include <algorithm>

#include "server/error.h"

namespace mkserve::server {
namespace {

// The run to its end, told to the output, which stores it (its on_finished keeper), and its
// events to `log` when it streams (may be null). Nothing may escape a thread: an error that is
// not the engine's ends the run as failed as well.
void Drain(GenerationRun& run, ResponsesOutput& output, int64_t prompt_tokens,
           ResponseEventLog* log) {
  auto write = [&](const std::string& events) {
    if (log != nullptr) log->Append(events);
  };
  auto usage = [&] {
    Usage usage = run.TotalUsage();
    if (usage.prompt_tokens == 0) usage.prompt_tokens = prompt_tokens;
    return usage;
  };
  try {
    write(output.StreamStart());
    try {
      while (std::optional<ChoiceEvent> event = run.Next()) write(output.StreamEvent(*event));
    } catch (const ApiError& error) {
      write(output.EndedEarly("failed", usage(),
                              {{"code", "server_error"}, {"message", error.message()}}));
      return;
    }
    // Cancelled: the run saw its flag as a hang-up. A server stop ends the choice with finish
    // reason "abort", which the output reports as incomplete (interrupted), as for any request.
    if (run.aborted()) {
      write(output.EndedEarly("cancelled", usage()));
    } else {
      write(output.StreamEnd(run.TotalUsage()));
    }
  } catch (const std::exception& error) {
    try {
      write(output.EndedEarly("failed", usage(),
                              {{"code", "server_error"}, {"message", error.what()}}));
    } catch (...) {
    }
  }
}

}  // namespace

BackgroundResponses::~BackgroundResponses() {
  std::lock_guard lock(mutex_);
  for (Run& run : runs_) run.cancelled->store(true);
  for (Run& run : runs_) run.thread.join();
}

void BackgroundResponses::Start(StoredResponse in_progress,
                                std::shared_ptr<std::atomic<bool>> cancelled,
                                std::unique_ptr<GenerationRun> run,
                                std::unique_ptr<ResponsesOutput> output, int64_t prompt_tokens,
                                std::shared_ptr<ResponseEventLog> log) {
  std::lock_guard lock(mutex_);
  ReapLocked();
  if (runs_.size() >= kMaxBackgroundResponses) {
    throw ApiError(ErrorKind::kUnavailable,
                   std::to_string(kMaxBackgroundResponses) +
                       " background responses are running; wait for one to finish or cancel one",
                   "background");
  }
  const std::string id = in_progress.response.value("id", "");
  store_.Put(std::move(in_progress));  // before the thread, whose end replaces it
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread thread([run = std::move(run), output = std::move(output), done, prompt_tokens, log] {
    Drain(*run, *output, prompt_tokens, log.get());
    if (log) log->Close();
    done->store(true, std::memory_order_release);
  });
  runs_.push_back({id, std::move(cancelled), std::move(done), std::move(log), std::move(thread)});
}

bool BackgroundResponses::Cancel(const std::string& id) {
  std::lock_guard lock(mutex_);
  auto it = std::find_if(runs_.begin(), runs_.end(), [&](const Run& run) { return run.id == id; });
  if (it == runs_.end() || it->done->load(std::memory_order_acquire)) return false;
  it->cancelled->store(true);
  it->thread.join();  // a few ms: the run polls its flag as it would a connection
  ReapLocked();
  return true;
}

std::shared_ptr<const ResponseEventLog> BackgroundResponses::Log(const std::string& id) {
  std::lock_guard lock(mutex_);
  ReapLocked();
  for (const Run& run : runs_) {
    if (run.id == id) return run.log;
  }
  std::shared_ptr<const ResponseEventLog>* finished = finished_logs_.Find(id);
  return finished != nullptr ? *finished : nullptr;
}

void BackgroundResponses::Forget(const std::string& id) {
  std::lock_guard lock(mutex_);
  ReapLocked();
  finished_logs_.Erase(id);
}

size_t BackgroundResponses::running() const {
  std::lock_guard lock(mutex_);
  return static_cast<size_t>(std::count_if(runs_.begin(), runs_.end(), [](const Run& run) {
    return !run.done->load(std::memory_order_acquire);
  }));
}

void BackgroundResponses::ReapLocked() {
  for (auto it = runs_.begin(); it != runs_.end();) {
    if (it->done->load(std::memory_order_acquire)) {
      if (it->thread.joinable()) it->thread.join();  // Cancel joined its own
      if (it->log) finished_logs_.Put(it->id, it->log, it->log->bytes());
      it = runs_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace mkserve::server
