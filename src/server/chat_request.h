// Parses and validates a /v1/chat/completions body (and the chat form of /tokenize).
#pragma once

#include <string>
#include <vector>

#include "server/json.h"
#include "server/json_fields.h"
#include "server/openai_request.h"

namespace mkserve::server {

ChatRequest ParseChatRequest(const Json& body);

// The checks /v1/chat/completions and /v1/responses share, whatever the field names.
// A function tool's name (non-empty, unlike the `earlier` ones), description and parameters.
ToolDefinition ParseFunctionTool(const JsonFields& function,
                                 const std::vector<ToolDefinition>& earlier);
// A tool_choice string: none, auto or required.
ToolChoice::Mode ToolChoiceMode(const std::string& mode);
// That a tool_choice names an existing tool, and that required / named choices have tools.
void CheckToolChoice(const ToolChoice& choice, const std::vector<ToolDefinition>& tools,
                     const std::string& name_param);
// A json_schema format's `schema` (an object or a boolean; `name` and `strict` typed).
Json ParseJsonSchemaFields(const JsonFields& fields);
// Every tool message answers a call an earlier assistant turn made; `tool_call_id_params[i]`
// names message i's call id in errors.
void CheckToolResults(const std::vector<ChatMessage>& messages,
                      const std::vector<std::string>& tool_call_id_params);

}  // namespace mkserve::server
