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
  // Tokens the tokenizer added at each end of `text` (a BOS): scored, not in the echoed text.
  int64_t added_before = 0, added_after = 0;
};

struct CompletionOutputOptions {
  LogprobNames logprob_names;
  std::shared_ptr<const HiddenTokens> hidden_tokens;  // skip_special_tokens (text_offset)
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
    size_t sent_chars = 0;  // streaming: how much of `text` has gone out
    CompletionLogprobs logprobs;
    std::string finish_reason;
    bool finish_sent = false;
    // Siblings after the first: prompt positions still to come from the first sibling (the engine
    // scores the prompt once), and their own events held back until then, so each choice's
    // positions stay in prompt-then-output order.
    int64_t prompt_positions_missing = 0;
    std::vector<ChoiceEvent> held;
  };

  // Applies the event and appends to `touched` every choice it changed.
  void Apply(const ChoiceEvent& event, std::vector<int32_t>& touched);
  void ApplyOwn(int32_t index, const ChoiceEvent& event);
  void ShareWithSiblings(int32_t first, const std::vector<PositionLogprobs>& prompt_logprobs,
                         std::vector<int32_t>& touched);
  void Release(int32_t index, std::vector<int32_t>& touched);
  // The chunk with what the choice has not yet streamed; empty when nothing is new.
  std::string PendingChunk(int32_t index);
  Json Chunk(int32_t index, const std::string& text, Json logprobs, Json finish_reason) const;
  Json TakeLogprobs(Choice& choice);

  std::vector<CompletionPrompt> prompts_;
  ResponseMeta meta_;
  CompletionOutputOptions options_;
  std::vector<Choice> choices_;
};

}  // namespace mkserve::server
