// POST /tokenize and /detokenize (vLLM's shapes).
#include "common/error.h"
#include "server/chat_prompt.h"
#include "server/completion_request.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/request_limits.h"
#include "server/sse.h"

namespace mkserve::server {

HttpResponse HandleTokenize(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  TokenizeRequest request = ParseTokenizeRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.model);
  std::vector<int32_t> ids;
  if (request.chat) {
    ids = BuildChatPrompt(model, *request.chat, state.options().default_enable_thinking).token_ids;
  } else {
    try {
      ids = model.tokenizer->Encode(request.prompt, request.add_special_tokens);
    } catch (const Error& error) {
      ThrowInvalid("prompt", error.what());
    }
  }
  Json body = {
      {"count", ids.size()}, {"max_model_len", model.engine->max_model_len()}, {"tokens", ids}};
  return JsonResponse(DumpJson(body));
}

HttpResponse HandleDetokenize(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  DetokenizeRequest request = ParseDetokenizeRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.model);
  CheckTokenIds(model, request.token_ids, "tokens");
  std::string text = model.tokenizer->Decode(request.token_ids, /*skip_special_tokens=*/false);
  return JsonResponse(DumpJson({{"prompt", text}}));
}

}  // namespace mkserve::server
