// Chat request -> prompt token ids: the template context (messages, tools, reasoning switch,
// special tokens), rendered with the model's chat template and tokenized.
#pragma once

#include <cstdint>
#include <vector>

#include "server/json.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace mkserve::server {

// The variables the template sees. Thinking is on unless the request or the server default
// turns it off; both `enable_thinking` and `reasoning` carry it, as templates differ in the name.
Json BuildTemplateContext(const ChatRequest& request, const tokenizer::Tokenizer& tokenizer,
                          bool enable_thinking);

// Renders and tokenizes. Template errors (raise_exception, e.g. roles out of order) are 400s.
std::vector<int32_t> RenderChatPrompt(const ServedModel& model, const ChatRequest& request,
                                      bool enable_thinking);

std::vector<ChatMessage> NoMessages();

}  // namespace mkserve::server
