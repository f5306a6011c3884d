#include "server/completion_response.h"

#include "server/sse.h"

namespace mkserve::server {

CompletionChoices::CompletionChoices(std::vector<CompletionPrompt> prompts, ResponseMeta meta,
                                     CompletionOutputOptions options)
    : prompts_(std::move(prompts)), meta_(std::move(meta)), options_(options) {
  for (size_t p = 0; p < prompts_.size(); ++p) {
    for (int32_t s = 0; s < options_.n; ++s) {
      choices_.push_back({"",
                          0,
                          CompletionLogprobs(options_.logprob_names, options_.hidden_tokens,
                                             {static_cast<int64_t>(prompts_[p].token_ids.size()),
                                              prompts_[p].added_before, prompts_[p].added_after}),
                          "",
                          false,
                          0,
                          {}});
      Choice& choice = choices_.back();
      if (!options_.echo) continue;
      choice.text = prompts_[p].text;
      if (!options_.logprobs || prompts_[p].token_ids.empty()) continue;
      // The first prompt token has no logprob; the engine sends the others.
      choice.logprobs.AddUnscored(prompts_[p].token_ids.front());
      if (s > 0) {
        choice.prompt_positions_missing = static_cast<int64_t>(prompts_[p].token_ids.size()) - 1;
      }
    }
  }
}

Json CompletionChoices::Chunk(int32_t index, const std::string& text, Json logprobs,
                              Json finish_reason) const {
  Json chunk = ResponseJson(meta_, "text_completion",
                            {{{"index", index},
                              {"text", text},
                              {"logprobs", std::move(logprobs)},
                              {"finish_reason", std::move(finish_reason)}}});
  if (options_.include_usage) chunk["usage"] = nullptr;
  return chunk;
}

Json CompletionChoices::TakeLogprobs(Choice& choice) {
  if (!options_.logprobs || choice.logprobs.empty()) return nullptr;
  return choice.logprobs.Take();
}

void CompletionChoices::Apply(const ChoiceEvent& event, std::vector<int32_t>& touched) {
  int32_t index = event.choice_index;
  Choice& choice = choices_[index];
  if (choice.prompt_positions_missing > 0) {
    choice.held.push_back(event);
    return;
  }
  ApplyOwn(index, event);
  touched.push_back(index);
  if (index % options_.n != 0) return;
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    if (options_.echo && options_.logprobs) {
      ShareWithSiblings(index, tokens->prompt_logprobs, touched);
    }
  } else {
    // The first sibling is done, so no more prompt positions will come: never hold back a
    // sibling's output past this point.
    for (int32_t s = 1; s < options_.n; ++s) Release(index + s, touched);
  }
}

void CompletionChoices::ApplyOwn(int32_t index, const ChoiceEvent& event) {
  Choice& choice = choices_[index];
  if (const auto* tokens = std::get_if<TokensEvent>(&event.event)) {
    if (options_.logprobs) {
      if (options_.echo) {
        for (const PositionLogprobs& position : tokens->prompt_logprobs) {
          choice.logprobs.AddPrompt(position);
        }
      }
      for (const PositionLogprobs& position : tokens->logprobs) choice.logprobs.AddOutput(position);
    }
    choice.text += tokens->text;
    return;
  }
  choice.finish_reason = FinishReasonName(std::get<FinishedEvent>(event.event).reason);
}

// Siblings share the first sibling's prompt scores instead of having the engine recompute them.
void CompletionChoices::ShareWithSiblings(int32_t first,
                                          const std::vector<PositionLogprobs>& prompt_logprobs,
                                          std::vector<int32_t>& touched) {
  if (prompt_logprobs.empty()) return;
  for (int32_t s = 1; s < options_.n; ++s) {
    Choice& sibling = choices_[first + s];
    if (sibling.prompt_positions_missing <= 0) continue;
    for (const PositionLogprobs& position : prompt_logprobs) sibling.logprobs.AddPrompt(position);
    sibling.prompt_positions_missing -= static_cast<int64_t>(prompt_logprobs.size());
    touched.push_back(first + s);
    if (sibling.prompt_positions_missing <= 0) Release(first + s, touched);
  }
}

// Replays the events held back for the choice.
void CompletionChoices::Release(int32_t index, std::vector<int32_t>& touched) {
  Choice& choice = choices_[index];
  choice.prompt_positions_missing = 0;
  std::vector<ChoiceEvent> held = std::move(choice.held);
  choice.held.clear();
  for (const ChoiceEvent& event : held) ApplyOwn(index, event);
  if (!held.empty()) touched.push_back(index);
}

std::string CompletionChoices::PendingChunk(int32_t index) {
  Choice& choice = choices_[index];
  std::string text = choice.text.substr(choice.sent_chars);
  choice.sent_chars = choice.text.size();
  Json logprobs = TakeLogprobs(choice);
  Json finish = nullptr;
  if (!choice.finish_reason.empty() && !choice.finish_sent) {
    finish = choice.finish_reason;
    choice.finish_sent = true;
  }
  if (text.empty() && logprobs.is_null() && finish.is_null()) return "";
  return SseEvent(Chunk(index, text, std::move(logprobs), std::move(finish)));
}

std::string CompletionChoices::StreamStart() {
  std::string events;
  if (!options_.echo) return events;
  for (size_t i = 0; i < choices_.size(); ++i) events += PendingChunk(static_cast<int32_t>(i));
  return events;
}

std::string CompletionChoices::StreamEvent(const ChoiceEvent& event) {
  std::vector<int32_t> touched;
  Apply(event, touched);
  std::string events;
  for (int32_t index : touched) events += PendingChunk(index);
  return events;
}

std::string CompletionChoices::StreamEnd(const Usage& usage) const {
  return StreamEndEvents(meta_, "text_completion", options_.include_usage, usage);
}

void CompletionChoices::Accumulate(const ChoiceEvent& event) {
  std::vector<int32_t> touched;
  Apply(event, touched);
}

Json CompletionChoices::FinalResponse(const Usage& usage) {
  Json choices = Json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    Choice& choice = choices_[i];
    choices.push_back({{"index", i},
                       {"text", choice.text},
                       {"logprobs", TakeLogprobs(choice)},
                       {"finish_reason", choice.finish_reason}});
  }
  Json body = ResponseJson(meta_, "text_completion", std::move(choices));
  body["usage"] = UsageJson(usage);
  return body;
}

}  // namespace mkserve::server
