// POST /v1/responses: the chat pipeline (prompt, limits, output grammar, engine run) with the
// Responses API's request and output shapes (responses_request.h, responses_output.h), and the
// count of a request's input tokens. Nothing is stored, so the paths that read, delete or cancel
// a stored response answer 404.
#include "server/chat_prompt.h"
#include "server/generation_response.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/output_grammar.h"
#include "server/output_parser_factory.h"
#include "server/request_limits.h"
#include "server/responses_output.h"
#include "server/responses_request.h"

namespace mkserve::server {
namespace {

// Runs a step of the chat pipeline, whose errors name the conversation `messages`: here the
// client sent it as `input`.
template <class Step>
auto NamingInput(Step step) {
  try {
    return step();
  } catch (const ApiError& error) {
    if (error.param() == "messages") throw ApiError(error.kind(), error.what(), "input");
    throw;
  }
}

}  // namespace

HttpResponse HandleResponses(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  ResponsesRequest request = ParseResponsesRequest(ParseJsonBody(http.body));
  ChatRequest& chat = request.chat;
  state.CheckModelName(chat.generation.model);
  ChatPrompt prompt = NamingInput(
      [&] { return BuildChatPrompt(model, chat, state.options().default_enable_thinking); });
  ApplyModelLimits(model, static_cast<int64_t>(prompt.token_ids.size()), kResponsesFields,
                   chat.generation);

  std::unique_ptr<OutputParser> parser = MakeOutputParserFactory(model, chat, prompt)();
  auto grammar = NamingInput([&] { return ChatOutputGrammar(model, chat, prompt); });
  EngineRequest engine_request{std::move(prompt.token_ids), chat.generation.sampling, 1,
                               std::move(grammar)};
  std::vector<RequestHandle> handles;
  handles.push_back(model.engine->Submit(std::move(engine_request)));
  auto run = std::make_unique<GenerationRun>(std::move(handles), 1, http.is_connection_closed);
  auto output = std::make_unique<ResponsesOutput>(
      NewResponseMeta("resp_", state.options().model_id), std::move(request.echo),
      std::move(parser), chat.logprobs ? model.tokenizer.get() : nullptr);
  if (chat.generation.stream) return StreamResponse(std::move(run), std::move(output));
  return CompleteResponse(*run, *output);
}

HttpResponse HandleResponsesInputTokens(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  ResponsesRequest request = ParseResponsesRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.chat.generation.model);
  ChatPrompt prompt = NamingInput([&] {
    return BuildChatPrompt(model, request.chat, state.options().default_enable_thinking);
  });
  Json body = {{"object", "response.input_tokens"},
               {"input_tokens", static_cast<int64_t>(prompt.token_ids.size())}};
  return JsonResponse(DumpJson(body));
}

HttpResponse HandleStoredResponse(const ServerState&, const HttpRequest& http) {
  throw ApiError(ErrorKind::kNotFound,
                 "this server does not store responses, so " + http.method + " " + http.path +
                     " finds none; a response is returned only to the request that made it");
}

}  // namespace mkserve::server
