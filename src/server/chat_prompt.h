// Chat request -> prompt token ids: the template context (messages, tools, reasoning switch,
// special tokens), rendered with the model's chat template and tokenized. /v1/chat/completions
// and /tokenize both build their prompt here, so their token counts agree.
#pragma once

#include <cstdint>
#include <vector>

#include "server/json.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace mkserve::server {

struct ChatPrompt {
  std::vector<int32_t> token_ids;
  bool thinking = false;  // the prompt opened a reasoning block
  bool prefill = false;   // the prompt ends inside the final assistant message's text
};

// Renders and tokenizes. Template errors (raise_exception, e.g. roles out of order) are 400s.
ChatPrompt BuildChatPrompt(const ServedModel& model, const ChatRequest& request,
                           bool default_enable_thinking);

}  // namespace mkserve::server
