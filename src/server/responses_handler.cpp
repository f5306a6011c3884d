// POST /v1/responses: the chat pipeline (prompt, limits, output grammar, engine run) with the
// Responses API's request and output shapes (responses_request.h, responses_output.h), and the
// count of a request's input tokens. Finished responses are kept in the ResponseStore (unless
// the request sends store: false) for previous_response_id and the paths that read and delete
// them: GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items. A background
// response (background_responses.h) is answered "in_progress" at once and polled with GET;
// POST /v1/responses/{id}/cancel stops it. One sent with stream: true as well streams from its
// event log (response_event_log.h), which GET /v1/responses/{id}?stream=true resumes.
#include <chrono>
#include <map>

#include "server/chat_prompt.h"
#include "server/generation_response.h"
#include "server/handlers.h"
#include "server/item_list.h"
#include "server/json_fields.h"
#include "server/output_grammar.h"
#include "server/output_parser_factory.h"
#include "server/request_limits.h"
#include "server/responses_output.h"
#include "server/responses_request.h"
#include "server/url_query.h"

namespace mkserve::server {
namespace {

// Runs a step of the chat pipeline, whose errors name the conversation `messages`: here the
// client sent it as `input`.
template <class Step>
auto NamingInput(Step step) {
  try {
    return step();
  } catch (const ApiError& error) {
    if (error.param() == "messages") throw ApiError(error.kind(), error.message(), "input");
    throw;
  }
}

[[noreturn]] void ThrowNotStored(const std::string& id, const std::string& param,
                                 const std::string& advice = "") {
  throw ApiError(ErrorKind::kNotFound,
                 "no stored response '" + id +
                     "': it was sent with store: false, deleted, evicted (the server keeps the "
                     "most recent ones in memory, --response-store-mb) or made before a restart" +
                     advice,
                 param);
}

// The context a request continues: its conversation's items, or the context previous_response_id
// names (StoredResponse::context), or none.
Json ContinuedContext(const ServerState& state, const Json& body) {
  if (std::optional<std::string> conversation = ConversationId(body)) {
    return ConversationItems(state, *conversation, "conversation");
  }
  std::optional<std::string> id = PreviousResponseId(body);
  if (!id) return Json::array();
  if (!state.responses().enabled()) {
    ThrowInvalid("previous_response_id",
                 "this server stores no responses (--response-store-mb 0); send the whole "
                 "conversation in 'input'");
  }
  std::unique_ptr<const StoredResponse> previous = state.responses().Get(*id);
  if (!previous) {
    ThrowNotStored(*id, "previous_response_id", "; send the whole conversation in 'input'");
  }
  if (previous->response.value("status", "") == "in_progress") {
    ThrowInvalid("previous_response_id",
                 "response '" + *id + "' is still in progress; continue it once it has finished");
  }
  return previous->context;
}

// Input items as stored and listed (ListedItem), ids made from the response's.
Json StoredInputItems(Json items, const std::string& response_id) {
  const std::string suffix = response_id.substr(response_id.find('_') + 1);
  for (size_t i = 0; i < items.size(); ++i) {
    const bool message = items[i].value("type", "message") == "message";
    items[i] = ListedItem(std::move(items[i]),
                          (message ? "msg_" : "item_") + suffix + "_in" + std::to_string(i));
  }
  return items;
}

// Adds a finished response's input items (as stored, ids given) and output items to its
// conversation; not those of one that failed or was cancelled: its turn did not happen.
FinishedResponseSink ConversationAppender(ConversationStore& conversations, std::string id,
                                          Json input_items) {
  return [&conversations, id = std::move(id),
          input_items = std::move(input_items)](const Json& response) {
    const std::string status = response.value("status", "");
    if (status != "completed" && status != "incomplete") return;
    conversations.Update(id, [&](Conversation& conversation) {
      for (const Json& item : input_items) conversation.items.push_back(item);
      for (const Json& item : response.at("output")) conversation.items.push_back(item);
    });
  };
}

// Both sinks, either of which may be null.
FinishedResponseSink BothSinks(FinishedResponseSink first, FinishedResponseSink second) {
  if (!first) return second;
  if (!second) return first;
  return [first = std::move(first), second = std::move(second)](const Json& response) {
    first(response);
    second(response);
  };
}

// Keeps a finished response: it, its input items, and the context a follow-up continues.
FinishedResponseSink Keeper(ResponseStore& store, Json input_items, Json context) {
  return [&store, input_items = std::move(input_items),
          context = std::move(context)](const Json& response) {
    StoredResponse stored{response, input_items, context};
    for (const Json& item : input_items) stored.context.push_back(item);
    for (const Json& item : response["output"]) stored.context.push_back(item);
    store.Put(std::move(stored));
  };
}

// Streams a background response's events after sequence number `after` as the log has them,
// until the log ends or the client goes away (which does not stop the run).
HttpResponse EventLogStream(std::shared_ptr<const ResponseEventLog> log, int64_t after,
                            ConnectionWatch watch) {
  HttpResponse response = TextResponse("", "text/event-stream");
  response.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  response.next = [log = std::move(log), after,
                   watch = std::move(watch)](std::string& chunk) mutable {
    for (;;) {
      ResponseEventLog::Read read = log->After(after, std::chrono::milliseconds(200));
      if (read.lost) {
        chunk += SseErrorEvent(ApiError(
            ErrorKind::kInvalidRequest,
            "the events after " + std::to_string(after) + " are no longer kept (a stream keeps " +
                std::to_string(kMaxEventLogBytes >> 20) + " MiB of its latest events)",
            "starting_after"));
        return false;
      }
      after = read.last;
      chunk += read.events;
      if (read.ended) return false;
      if (!chunk.empty()) return true;
      if (watch() || watch.stop_requested()) return false;
    }
  };
  return response;
}

// GET /v1/responses/{id}?stream=true[&starting_after=N]: a streamed background response's
// events, from the first or after N.
HttpResponse ResumedStream(const ServerState& state, const std::string& id,
                           const std::multimap<std::string, std::string>& query,
                           const HttpRequest& http) {
  int64_t after = -1;
  if (const std::optional<std::string> text = QueryValue(query, "starting_after")) {
    const std::optional<int64_t> value = QueryInteger(*text);
    if (!value || *value < 0) {
      ThrowInvalid("starting_after",
                   "must be an event's sequence number (0 or more), got '" + *text + "'");
    }
    after = *value;
  }
  std::shared_ptr<const ResponseEventLog> log = state.background().Log(id);
  if (!log) {
    if (!state.responses().Get(id)) ThrowNotStored(id, "response_id");
    ThrowInvalid("stream", "response '" + id +
                               "' was not made with background and stream both true, or its "
                               "events are no longer kept; GET it without 'stream'");
  }
  return EventLogStream(std::move(log), after, http.is_connection_closed);
}

// The response id of /v1/responses/{id}[/rest], and the rest ("" / "input_items" / "cancel").
std::pair<std::string, std::string> StoredPath(const HttpRequest& http) {
  constexpr std::string_view kPrefix = "/v1/responses/";
  const std::string tail = http.path.substr(kPrefix.size());
  const size_t slash = tail.find('/');
  if (slash == std::string::npos) return {PercentDecoded(tail), ""};
  return {PercentDecoded(tail.substr(0, slash)), tail.substr(slash + 1)};
}

}  // namespace

HttpResponse HandleResponses(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  const Json body = ParseJsonBody(http.body);
  Json context = ContinuedContext(state, body);
  ResponsesRequest request = ParseResponsesRequest(body, context);
  ChatRequest& chat = request.chat;
  state.CheckModelName(chat.generation.model);
  ChatPrompt prompt = NamingInput(
      [&] { return BuildChatPrompt(model, chat, state.options().default_enable_thinking); });
  const auto prompt_tokens = static_cast<int64_t>(prompt.token_ids.size());
  ApplyModelLimits(model, prompt_tokens, kResponsesFields, chat.generation);

  std::unique_ptr<OutputParser> parser = MakeOutputParserFactory(model, chat, prompt)();
  auto grammar = NamingInput([&] { return ChatOutputGrammar(model, chat, prompt); });
  EngineRequest engine_request{
      std::move(prompt.token_ids), chat.generation.sampling, 1, std::move(grammar),
      chat.generation.skip_special_tokens ? model.chat_hidden_special_tokens : nullptr};
  if (request.background && !state.responses().enabled()) {
    ThrowInvalid("background",
                 "this server stores no responses (--response-store-mb 0), and a background "
                 "response is stored for polling");
  }
  std::vector<RequestHandle> handles;
  handles.push_back(model.engine->Submit(std::move(engine_request)));
  // A background run's hang-up is its cancel flag: it outlives the connection.
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto run = std::make_unique<GenerationRun>(
      std::move(handles), 1,
      request.background
          ? http.is_connection_closed.Detached([cancelled] { return cancelled->load(); })
          : http.is_connection_closed);
  ResponseMeta meta = NewResponseMeta("resp_", state.options().model_id);
  const bool store = request.store && state.responses().enabled();
  request.echo["store"] = store;
  Json input_items = StoredInputItems(std::move(request.input_items), meta.id);
  const Json input_so_far = request.background ? input_items : Json();
  FinishedResponseSink appender =
      request.conversation_id.empty()
          ? nullptr
          : ConversationAppender(state.conversations(), request.conversation_id, input_items);
  FinishedResponseSink keeper = BothSinks(
      store ? Keeper(state.responses(), std::move(input_items), std::move(context)) : nullptr,
      std::move(appender));
  auto output = std::make_unique<ResponsesOutput>(
      std::move(meta), std::move(request.echo), std::move(parser),
      LogprobNames{chat.logprobs ? model.tokenizer.get() : nullptr, chat.generation.tokens_as_ids},
      std::move(keeper));
  if (request.background) {
    Json in_progress = output->InProgress();
    auto log = chat.generation.stream ? std::make_shared<ResponseEventLog>() : nullptr;
    state.background().Start({in_progress, input_so_far, Json::array()}, cancelled, std::move(run),
                             std::move(output), prompt_tokens, log);
    if (log) return EventLogStream(std::move(log), -1, http.is_connection_closed);
    return JsonResponse(DumpJson(in_progress));
  }
  if (chat.generation.stream) return StreamResponse(std::move(run), std::move(output));
  return CompleteResponse(*run, *output);
}

HttpResponse HandleResponsesInputTokens(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  const Json body = ParseJsonBody(http.body);
  ResponsesRequest request = ParseResponsesRequest(body, ContinuedContext(state, body));
  state.CheckModelName(request.chat.generation.model);
  ChatPrompt prompt = NamingInput([&] {
    return BuildChatPrompt(model, request.chat, state.options().default_enable_thinking);
  });
  Json result = {{"object", "response.input_tokens"},
                 {"input_tokens", static_cast<int64_t>(prompt.token_ids.size())}};
  return JsonResponse(DumpJson(result));
}

HttpResponse HandleStoredResponse(const ServerState& state, const HttpRequest& http) {
  const auto [id, rest] = StoredPath(http);
  ResponseStore& store = state.responses();
  if (http.method == "DELETE" && rest.empty()) {
    state.background().Cancel(id);  // a running background response stops first
    state.background().Forget(id);
    if (!store.Erase(id)) ThrowNotStored(id, "response_id");
    return JsonResponse(DumpJson({{"id", id}, {"object", "response"}, {"deleted", true}}));
  }
  const std::multimap<std::string, std::string> query = ParseQuery(http.query);
  if (http.method == "GET" && rest.empty()) {
    const std::optional<std::string> stream = QueryValue(query, "stream");
    if (stream && *stream != "true" && *stream != "false") {
      ThrowInvalid("stream", "must be true or false, got '" + *stream + "'");
    }
    if (stream == "true") return ResumedStream(state, id, query, http);  // the log, not the store
  }
  std::unique_ptr<const StoredResponse> stored = store.Get(id);
  if (http.method == "GET" && rest.empty()) {
    if (!stored) ThrowNotStored(id, "response_id");
    if (query.count("starting_after") != 0) {
      ThrowInvalid("starting_after", "resumes a stream: send it with stream=true");
    }
    return JsonResponse(DumpJson(stored->response));
  }
  if (http.method == "GET" && rest == "input_items") {
    if (!stored) ThrowNotStored(id, "response_id");
    return JsonResponse(DumpJson(ItemListPage(stored->input_items, http.query)));
  }
  if (http.method == "POST" && rest == "cancel") {
    if (state.background().Cancel(id)) stored = store.Get(id);  // now cancelled
    if (!stored) ThrowNotStored(id, "response_id");
    const std::string status = stored->response.value("status", "");
    if (!stored->response.value("background", false)) {
      ThrowInvalid("response_id", "only background responses can be cancelled");
    }
    if (status != "cancelled") {
      ThrowInvalid("response_id", "this background response has finished (" + status +
                                      "); there is nothing to cancel");
    }
    return JsonResponse(DumpJson(stored->response));
  }
  throw ApiError(ErrorKind::kNotFound, "no route for " + http.method + " " + http.path);
}

}  // namespace mkserve::server
