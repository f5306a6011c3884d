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

namespace mkserve::server {

HttpResponse HandleChatCompletions(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  ChatRequest request = ParseChatRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.generation.model);
  ChatPrompt prompt = BuildChatPrompt(model, request, state.options().default_enable_thinking);
  ApplyModelLimits(model, static_cast<int64_t>(prompt.token_ids.size()), kChatFields,
                   request.generation);

  ChatOutputOptions options{MakeOutputParserFactory(model, request, prompt),
                            {model.tokenizer.get(), request.generation.tokens_as_ids},
                            request.logprobs,
                            request.generation.include_usage};
  auto grammar = ChatOutputGrammar(model, request, prompt);
  EngineRequest engine_request{
      std::move(prompt.token_ids), request.generation.sampling, request.generation.n,
      std::move(grammar),
      request.generation.skip_special_tokens ? model.chat_hidden_special_tokens : nullptr};
  std::vector<RequestHandle> handles;
  handles.push_back(model.engine->Submit(std::move(engine_request)));
  auto run = std::make_unique<GenerationRun>(std::move(handles), request.generation.n,
                                             http.is_connection_closed);
  auto choices = std::make_unique<ChatChoices>(
      request.generation.n, NewResponseMeta("chatcmpl-", state.options().model_id), options);
  if (request.generation.stream) return StreamResponse(std::move(run), std::move(choices));
  return CompleteResponse(*run, *choices);
}

}  // namespace mkserve::server
