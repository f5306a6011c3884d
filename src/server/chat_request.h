// Parses and validates a /v1/chat/completions body (and the chat form of /tokenize).
#pragma once

#include <functional>
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
// tool_choice: absent (auto with tools, else none), "none", "auto", "required", or an object
// whose tool name `named_tool` reads (the endpoints spell it differently); a required or named
// choice needs tools, a named one an existing tool (`name_param` names it in errors).
ToolChoice ParseToolChoiceField(const JsonFields& fields, const std::vector<ToolDefinition>& tools,
                                const std::function<std::string(const JsonFields&)>& named_tool,
                                const std::string& name_param);
// A json_schema format's `schema` (an object or a boolean; `name` and `strict` typed).
Json ParseJsonSchemaFields(const JsonFields& fields);
// Every tool message answers a call an earlier assistant turn made; `tool_call_id_params[i]`
// names message i's call id in errors.
void CheckToolResults(const std::vector<ChatMessage>& messages,
                      const std::vector<std::string>& tool_call_id_params);

}  // namespace mkserve::server
