// The built-in chat template for Cohere's Command-4 format (North Mini Code), used when a
// checkpoint ships no chat_template (e.g. the tiny test model). It reproduces the rendered
// form of North's own template (north-mini-code-facts.md §4.2):
// - a system turn is always present and ends with the "# Available Tools" JSON block;
// - tool-call ids are re-generated as "0", "1", ... across the conversation and tool results
//   point to them; consecutive tool messages merge into one <|START_TOOL_RESULT|> block;
// - reasoning is on unless the kwarg `reasoning` (or `enable_thinking`) is false or
//   `reasoning_effort` is "none"; off closes the thinking block in the generation prompt;
// - a final assistant message without tool calls is left open (<|START_TEXT|>partial) as a
//   prefill, and no generation prompt follows it.
// Messages use the OpenAI shape; assistant reasoning comes from `reasoning_content` (or
// `reasoning`); tool-call `arguments` may be an object or a JSON string.
#pragma once

#include <string_view>

#include "chat/chat_template.h"

namespace mkserve::chat {

std::string_view Command4TemplateSource();
// Parsed once; copies share the syntax tree.
const ChatTemplate& Command4Template();

}  // namespace mkserve::chat
