// Picks the OutputParser for the served model's chat format and the request.
#pragma once

#include <functional>
#include <memory>

#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/output_parser.h"
#include "server/server_state.h"

namespace mkserve::server {

// Whether the served model talks in Cohere's Command-4 format (its template writes both block
// markers, the test llama.cpp uses too).
bool IsCommand4Template(const chat::ChatTemplate& chat_template);

// A factory making one parser per choice. Output starts where `prompt` left the model (inside
// reasoning, after it, or inside a prefill's text). Tool calls are parsed only for tools the
// request allows (`tools` minus what tool_choice excludes); anything else comes back as content.
// With `parallel_tool_calls: false` only the first call is kept.
std::function<std::unique_ptr<OutputParser>()> MakeOutputParserFactory(const ServedModel& model,
                                                                       const ChatRequest& request,
                                                                       const ChatPrompt& prompt);

}  // namespace mkserve::server
