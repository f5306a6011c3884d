// POST /v1/chat/completions.
#include "server/chat_prompt.h"
#include "server/chat_request.h"
#include "server/chat_response.h"
#include "server/generation_response.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/output_grammar.h"
#include "server/output_parser_factory.h"
#include "server/request_limits.h"
#include "server/single_tool_call_parser.h"

namespace mkserve::server {
namespace {

// With `parallel_tool_calls: false` each choice's parser keeps only the first tool call.
std::function<std::unique_ptr<OutputParser>()> ParserFactory(const ServedModel& model,
                                                             bool thinking, bool parallel) {
  auto make = MakeOutputParserFactory(model, thinking);
  if (parallel) return make;
  return [make]() -> std::unique_ptr<OutputParser> {
    return std::make_unique<SingleToolCallParser>(make());
  };
}

}  // namespace

HttpResponse HandleChatCompletions(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  ChatRequest request = ParseChatRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.generation.model);
  bool thinking = request.enable_thinking.value_or(state.options().default_enable_thinking);
  std::vector<int32_t> prompt = RenderChatPrompt(model, request, thinking);
  ApplyModelLimits(model, static_cast<int64_t>(prompt.size()), /*default_to_context=*/true,
                   request.generation);

  EngineRequest engine_request{std::move(prompt), request.generation.sampling, request.generation.n,
                               ChatOutputGrammar(model, request, thinking)};
  std::vector<RequestHandle> handles;
  handles.push_back(model.engine->Submit(std::move(engine_request)));
  auto run = std::make_unique<GenerationRun>(std::move(handles), request.generation.n,
                                             http.is_connection_closed);
  ChatOutputOptions options{ParserFactory(model, thinking, request.parallel_tool_calls),
                            model.tokenizer.get(), request.logprobs,
                            request.generation.include_usage};
  auto choices = std::make_unique<ChatChoices>(
      request.generation.n, NewResponseMeta("chatcmpl-", state.options().model_id), options);
  if (request.generation.stream) return StreamResponse(std::move(run), std::move(choices));
  return CompleteResponse(*run, *choices);
}

}  // namespace mkserve::server
