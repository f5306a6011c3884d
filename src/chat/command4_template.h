// The built-in chat template for Cohere's Command-4 format (North Mini Code), used when a
// checkpoint ships no chat_template (e.g. the tiny test model). Its output is byte-identical to
// North's own template rendered by @huggingface/jinja with transformers' settings (trimmed
// blocks, its context) for the cases in tests/chat/fixtures/command4_renders.json
// (tools/chat_fixtures renders them; Python's jinja2 is not run):
// - a first system turn always holds the platform instruction (the kwarg
//   `platform_instruction_override` replaces it) and the "# Available Tools" JSON list, with the
//   document tool first when the kwarg `documents` is set;
// - every system message is its own system turn, in place;
// - tool calls are numbered "0", "1", ... over the conversation and tool results point to them;
//   consecutive tool messages share one <|START_TOOL_RESULT|> block;
// - reasoning is on unless the kwarg `reasoning` is false or `reasoning_effort` is "none"; off
//   closes the thinking block in the generation prompt;
// - every assistant message is a closed turn; an assistant prefill is cut open by the caller
//   (ContinueFinalMessage), as transformers' continue_final_message does.
// Messages use the OpenAI shape; assistant reasoning comes from `reasoning` or
// `reasoning_content`; tool-call `arguments` are printed with tojson (pass the parsed object).
#pragma once

#include <string_view>

#include "chat/chat_template.h"

namespace mkserve::chat {

std::string_view Command4TemplateSource();
// Parsed once; copies share the syntax tree.
const ChatTemplate& Command4Template();

}  // namespace mkserve::chat
