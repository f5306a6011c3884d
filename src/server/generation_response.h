// Turns a GenerationRun into an HTTP response, for chat and completions alike (`Choices` is
// ChatChoices or CompletionChoices). Streaming waits for the first event before committing to
// SSE, so an engine refusal still goes out as a JSON error with its status; after that the body
// is a pull generator that owns the run, so a hang-up (a failed write, or the run's own poll)
// drops the run and cancels the request. A server stop ends a stream with finish reason "abort"
// and [DONE].
#pragma once

#include <memory>
#include <optional>

#include "server/error.h"
#include "server/generation_run.h"
#include "server/http_types.h"
#include "server/sse.h"

namespace mkserve::server {

// An error after the stream started: OpenAI clients read an `error` object in a data event.
std::string SseErrorEvent(const ApiError& error);

template <typename Choices>
HttpResponse StreamResponse(std::unique_ptr<GenerationRun> run, std::unique_ptr<Choices> choices) {
  struct State {
    std::unique_ptr<GenerationRun> run;
    std::unique_ptr<Choices> choices;
    std::optional<ChoiceEvent> first;
    bool started = false;
  };
  auto state = std::make_shared<State>();
  state->first = run->Next();  // throws ApiError before any byte is sent
  state->run = std::move(run);
  state->choices = std::move(choices);
  HttpResponse response = TextResponse("", "text/event-stream");
  response.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  response.next = [state](std::string& chunk) {
    if (!state->started) {
      state->started = true;
      chunk = state->choices->StreamStart();
      if (state->first) chunk += state->choices->StreamEvent(*state->first);
      if (state->first || state->run->aborted()) return state->first.has_value();
    }
    try {
      while (std::optional<ChoiceEvent> event = state->run->Next()) {
        chunk += state->choices->StreamEvent(*event);
        if (!chunk.empty()) return true;
      }
    } catch (const ApiError& error) {
      chunk += SseErrorEvent(error);
      return false;
    }
    if (!state->run->aborted()) chunk += state->choices->StreamEnd(state->run->TotalUsage());
    return false;
  };
  return response;
}

// Non-streaming: collects every event, then one JSON body. Returns a 499 (nginx's "client closed
// request") when the client hung up, in the error shape for a client that only half-closed and
// still reads (the run has already been cancelled), and a 503
// when the server stopped the run (shutdown): a partial answer is not passed off as a whole one.
template <typename Choices>
HttpResponse CompleteResponse(GenerationRun& run, Choices& choices) {
  while (std::optional<ChoiceEvent> event = run.Next()) choices.Accumulate(*event);
  if (run.aborted()) {
    HttpResponse closed = ErrorResponse(
        ApiError(ErrorKind::kInvalidRequest,
                 "the client closed its side of the connection before the answer, so the "
                 "request was cancelled; keep the connection open until the response arrives"));
    closed.status = 499;
    return closed;
  }
  if (run.stopped_by_server()) {
    throw ApiError(ErrorKind::kUnavailable,
                   "the server is shutting down and ended this request unfinished when its "
                   "--drain-timeout passed; retry it");
  }
  return JsonResponse(DumpJson(choices.FinalResponse(run.TotalUsage())));
}

}  // namespace mkserve::server
