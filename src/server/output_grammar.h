// The grammar a chat completion's output must follow, built from response_format and tool_choice:
//
// - tool_choice "required" or a named function: the output is a Command-4 action block whose
//   calls name the offered tools (only the named one; exactly one call when named or when
//   parallel_tool_calls is false) and whose "parameters" match each tool's JSON schema;
// - response_format json_object / json_schema: the answer is a JSON object / a value of the
//   schema, inside a <|START_TEXT|> block for Command-4 (an action block stays possible when
//   tools are offered with tool_choice "auto");
// - otherwise nothing is constrained (null).
// With reasoning on, free reasoning text and <|END_THINKING|> come first. The output then ends
// with the model's EOS (<|END_OF_TURN_TOKEN|> for Command-4).
#pragma once

#include <memory>

#include "grammar/grammar_matcher.h"
#include "server/chat_prompt.h"
#include "server/openai_request.h"
#include "server/server_state.h"

namespace mkserve::server {

// What ServedModel::grammar_cache keeps: recent grammars, and their cached positions in all
// (32 KB each for a 262K vocabulary: 128 MB).
inline constexpr size_t kCachedGrammars = 64;
inline constexpr size_t kCachedGrammarPositions = 4096;

// Throws ApiError (400) for a schema it cannot enforce, naming the field and the feature, and for
// a constraint on a prompt that ends inside an assistant prefill.
std::shared_ptr<const grammar::CompiledGrammar> ChatOutputGrammar(const ServedModel& model,
                                                                  const ChatRequest& request,
                                                                  const ChatPrompt& prompt);

}  // namespace mkserve::server
