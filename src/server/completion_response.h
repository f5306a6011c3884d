// Builds /v1/completions output (text_completion objects) from engine events, streaming or not,
// with echo and legacy-shape logprobs.
#pragma once

#include <string>
#include <vector>

#include "server/generation_run.h"
#include "server/logprobs_json.h"
#include "server/response_meta.h"

namespace mkserve::server {

struct CompletionPrompt {
  std::string text;  // for echo
  std::vector<int32_t> token_ids;
};

struct CompletionOutputOptions {
  const tokenizer::Tokenizer* tokenizer = nullptr;
  int32_t n = 1;
  bool echo = false;
  bool logprobs = false;
  bool include_usage = false;
};

class CompletionChoices {
 public:
  CompletionChoices(std::vector<CompletionPrompt> prompts, ResponseMeta meta,
                    CompletionOutputOptions options);

  std::string StreamStart();  // echoed prompts, when asked for
  std::string StreamEvent(const ChoiceEvent& event);
  std::string StreamEnd(const Usage& usage) const;

  void Accumulate(const ChoiceEvent& event);
  Json FinalResponse(const Usage& usage);

 private:
  struct Choice {
    std::string text;
    CompletionLogprobs logprobs;
    std::string finish_reason;
  };

  // Appends the event to the choice; returns the text it added.
  std::string Apply(const ChoiceEvent& event);
  Json Chunk(int32_t index, const std::string& text, Json logprobs, Json finish_reason) const;
  Json TakeLogprobs(Choice& choice);

  std::vector<CompletionPrompt> prompts_;
  ResponseMeta meta_;
  CompletionOutputOptions options_;
  std::vector<Choice> choices_;
};

}  // namespace mkserve::server
