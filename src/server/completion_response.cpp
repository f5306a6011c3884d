#include "server/completion_response.h"

#include "server/sse.h"

namespace mkserve::server {

CompletionChoices::CompletionChoices(std::vector<CompletionPrompt> prompts, ResponseMeta meta,
                                     CompletionOutputOptions options)
    : prompts_(std::move(prompts)), meta_(std::move(meta)), options_(options) {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int32_t s = 0; s < options_.n; ++s) {
      choices_.push_back({"", CompletionLogprobs(options_.tokenizer), ""});
      Choice& choice = choices_.back();
      if (!options_.echo) continue;
      choice.text = prompts_[p].text;
      // The first prompt token has no logprob; the engine sends the others.
      if (options_.logprobs && !prompts_[p].token_ids.empty()) {
        choice.logprobs.AddUnscored(prompts_[p].token_ids.front());
      }
    }
  }
}

Json CompletionChoices::Chunk(int32_t index, const std::string& text, Json logprobs,
                              Json finish_reason) const {
  Json chunk = {{"id", meta_.id},
                {"object", "text_completion"},
                {"created", meta_.created_unix_s},
                {"model", meta_.model},
                {"choices",
                 {{{"index", index},
                   {"text", text},
                   {"logprobs", std::move(logprobs)},
                   {"finish_reason", std::move(finish_reason)}}}}};
  if (options_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json CompletionChoices::TakeLogprobs(Choice& choice) {
  if (!options_.logprobs || choice.logprobs.empty()) return nullptr;
  return choice.logprobs.Take();
}

std::string CompletionChoices::Apply(const ChoiceEvent& event) {
  Choice& choice = choices_[event.choice_index];
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    if (options_.logprobs) {
      for (const PositionLogprobs& position : tokens->prompt_logprobs) {
        if (options_.echo) choice.logprobs.Add(position);
      }
      for (const PositionLogprobs& position : tokens->logprobs) choice.logprobs.Add(position);
    }
    choice.text += tokens->text;
    return tokens->text;
  }
  choice.finish_reason = FinishReasonName(std::get<FinishedEvent>(event.event).reason);
  return "";
}

std::string CompletionChoices::StreamStart() {
  std::string events;
  if (!options_.echo) return events;
  for (size_t i = 0; i < choices_.size(); ++i) {
    events += SseEvent(
        Chunk(static_cast<int32_t>(i), choices_[i].text, TakeLogprobs(choices_[i]), nullptr));
  }
  return events;
}

std::string CompletionChoices::StreamEvent(const ChoiceEvent& event) {
  std::string text = Apply(event);
  Choice& choice = choices_[event.choice_index];
  Json logprobs = TakeLogprobs(choice);
  Json finish = choice.finish_reason.empty() ? Json(nullptr) : Json(choice.finish_reason);
  if (text.empty() && logprobs.is_null() && finish.is_null()) return "";
  return SseEvent(Chunk(event.choice_index, text, std::move(logprobs), std::move(finish)));
}

std::string CompletionChoices::StreamEnd(const Usage& usage) const {
  std::string events;
  if (options_.include_usage) {
    events += SseEvent({{"id", meta_.id},
                        {"object", "text_completion"},
                        {"created", meta_.created_unix_s},
                        {"model", meta_.model},
                        {"choices", Json::array()},
                        {"usage", UsageJson(usage)}});
  }
  return events + std::string(kSseDone);
}

void CompletionChoices::Accumulate(const ChoiceEvent& event) { Apply(event); }

Json CompletionChoices::FinalResponse(const Usage& usage) {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    choices.push_back({{"index", i},
                       {"text", choice.text},
                       {"logprobs", TakeLogprobs(choice)},
                       {"finish_reason", choice.finish_reason}});
  }
  return {{"id", meta_.id},       {"object", "text_completion"}, {"created", meta_.created_unix_s},
          {"model", meta_.model}, {"choices", choices},          {"usage", UsageJson(usage)}};
}

}  // namespace mkserve::server
