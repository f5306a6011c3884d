// POST /v1/completions: one engine request per prompt, each with n siblings.
#include <algorithm>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "server/completion_request.h"
#include "server/completion_response.h"
#include "server/generation_response.h"
#include "server/handlers.h"
#include "server/json_fields.h"
#include "server/request_limits.h"

namespace mkserve::server {
namespace {

// Where `text_ids` (the text alone) lie in `ids` (with what the tokenizer adds, a BOS): the
// counts of tokens added before and after them; none when they are not one run of `ids`.
std::pair<int64_t, int64_t> AddedAround(const std::vector<int32_t>& ids,
                                        const std::vector<int32_t>& text_ids) {
  const int64_t n = static_cast<int64_t>(ids.size()), m = static_cast<int64_t>(text_ids.size());
  for (int64_t before = 0; before + m <= n; ++before) {
    if (std::equal(text_ids.begin(), text_ids.end(), ids.begin() + before)) {
      return {before, n - m - before};
    }
  }
  return {0, 0};
}

// `echo_scored`: the prompt's tokens come back with logprobs and text offsets into its text.
CompletionPrompt Tokenize(const ServedModel& model, const PromptInput& input, size_t index,
                          bool batched, bool add_special_tokens, bool echo_scored) {
  std::string param = batched ? "prompt[" + std::to_string(index) + "]" : "prompt";
  if (input.is_tokens) {
    CheckTokenIds(model, input.token_ids, param);
    return {model.tokenizer->Decode(input.token_ids, /*skip_special_tokens=*/false),
            input.token_ids};
  }
  std::vector<int32_t> ids;
  try {
    ids = model.tokenizer->Encode(input.text, add_special_tokens);
  } catch (const Error& error) {
    ThrowInvalid(param, error.what());
  }
  if (ids.empty()) ThrowInvalid(param, "the prompt must not be empty");
  CompletionPrompt prompt{input.text, std::move(ids)};
  if (echo_scored) {
    std::tie(prompt.added_before, prompt.added_after) = AddedAround(
        prompt.token_ids, model.tokenizer->Encode(input.text, /*add_special_tokens=*/false));
  }
  return prompt;
}

}  // namespace

HttpResponse HandleCompletions(const ServerState& state, const HttpRequest& http) {
  const ServedModel& model = state.RequireModel();
  CompletionRequest request = ParseCompletionRequest(ParseJsonBody(http.body));
  state.CheckModelName(request.generation.model);
  std::vector<CompletionPrompt> prompts;
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    prompts.push_back(Tokenize(model, request.prompts[i], i, request.prompts.size() > 1,
                               request.add_special_tokens,
                               request.echo && request.generation.sampling.num_logprobs >= 0));
    ApplyModelLimits(model, static_cast<int64_t>(prompts.back().token_ids.size()),
                     kCompletionFields, request.generation);
  }
  auto hidden = request.generation.skip_special_tokens ? model.hidden_special_tokens : nullptr;
  std::vector<RequestHandle> handles;
  for (const CompletionPrompt& prompt : prompts) {
    handles.push_back(model.engine->Submit({prompt.token_ids, request.generation.sampling,
                                            request.generation.n, /*grammar=*/nullptr, hidden}));
  }
  auto run = std::make_unique<GenerationRun>(std::move(handles), request.generation.n,
                                             http.is_connection_closed);
  CompletionOutputOptions options{{model.tokenizer.get(), request.generation.tokens_as_ids},
                                  hidden,
                                  request.generation.n,
                                  request.echo,
                                  request.generation.sampling.num_logprobs >= 0,
                                  request.generation.include_usage};
  auto choices = std::make_unique<CompletionChoices>(
      std::move(prompts), NewResponseMeta("cmpl-", state.options().model_id), options);
  if (request.generation.stream) return StreamResponse(std::move(run), std::move(choices));
  return CompleteResponse(*run, *choices);
}

}  // namespace mkserve::server
