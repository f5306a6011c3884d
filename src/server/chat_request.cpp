#include "server/chat_request.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

#include "grammar/schema_shape.h"
#include "server/error.h"
#include "server/generation_request.h"
#include "server/json_fields.h"

namespace mkserve::server {

ToolDefinition ParseFunctionTool(const JsonFields& function,
                                 const std::vector<ToolDefinition>& earlier) {
  ToolDefinition definition;
  std::optional<std::string> name = function.NonEmptyString("name");
  if (!name) ThrowInvalid(function.Param("name"), "a function tool needs a name");
  for (const ToolDefinition& tool : earlier) {
    if (tool.name == *name) {
      ThrowInvalid(function.Param("name"),
                   "a second tool named '" + *name + "': tool names must be unique");
    }
  }
  // OpenAI's rule for names; a name is also written into the prompt and matched in the output.
  const bool plain = name->size() <= 64 && std::all_of(name->begin(), name->end(), [](char c) {
                       return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
                     });
  if (!plain) {
    ThrowInvalid(function.Param("name"),
                 "a tool name is 1 to 64 letters, digits, underscores or dashes");
  }
  definition.name = *name;
  definition.description = function.String("description").value_or("");
  definition.parameters_param = function.Param("parameters");
  if (const Json* parameters = function.Object("parameters")) {
    // A call's parameters are an object: a schema of another type could only be generated as
    // something the call parser then refuses (the call would come back as text).
    definition.parameters = *parameters;
    const auto type = parameters->find("type");
    if (type != parameters->end() && *type != "object") {
      ThrowInvalid(definition.parameters_param + ".type",
                   "a function's parameters are an object: 'type' must be 'object'");
    }
    if (type == parameters->end() && !parameters->empty()) {
      if (parameters->contains("$ref") || parameters->contains("anyOf")) {
        ThrowInvalid(definition.parameters_param,
                     "a function's parameters are an object: give the schema 'type': 'object'");
      }
      definition.parameters["type"] = "object";
    }
    // Checked whether or not a call is forced: the template shows the schema to the model.
    try {
      grammar::CheckSchemaShape(*parameters, definition.parameters_param);
    } catch (const grammar::SchemaError& e) {
      throw ApiError(ErrorKind::kInvalidRequest, e.what(), e.where());
    }
  }
  function.Bool("strict");  // typed; the schema binds whenever the output is constrained
  return definition;
}

ToolChoice ParseToolChoiceField(const JsonFields& fields, const std::vector<ToolDefinition>& tools,
                                const std::function<std::string(const JsonFields&)>& named_tool,
                                const std::string& name_param) {
  ToolChoice choice;
  choice.mode = tools.empty() ? ToolChoice::Mode::kNone : ToolChoice::Mode::kAuto;
  const Json* value = fields.Get("tool_choice");
  if (value == nullptr) return choice;
  if (value->is_string()) {
    const std::string mode = value->get<std::string>();
    if (mode == "none") {
      choice.mode = ToolChoice::Mode::kNone;
    } else if (mode == "auto") {
      choice.mode = ToolChoice::Mode::kAuto;
    } else if (mode == "required") {
      choice.mode = ToolChoice::Mode::kRequired;
    } else {
      ThrowInvalid("tool_choice", "must be 'none', 'auto', 'required' or a named function");
    }
  } else {
    choice.mode = ToolChoice::Mode::kNamed;
    choice.name = named_tool(JsonFields(*value, "tool_choice"));
  }
  const bool needs_tools =
      choice.mode == ToolChoice::Mode::kRequired || choice.mode == ToolChoice::Mode::kNamed;
  if (needs_tools && tools.empty()) ThrowInvalid("tool_choice", "requires 'tools'");
  if (choice.mode == ToolChoice::Mode::kNamed) {
    bool known = false;
    for (const ToolDefinition& tool : tools) known = known || tool.name == choice.name;
    if (!known) ThrowInvalid(name_param, "no tool named '" + choice.name + "' in 'tools'");
  }
  return choice;
}

Json ParseJsonSchemaFields(const JsonFields& fields) {
  fields.String("name");  // typed when present; nothing depends on them
  fields.Bool("strict");
  const Json* schema = fields.Get("schema");
  if (schema == nullptr) ThrowInvalid(fields.Param("schema"), "is required");
  if (!schema->is_object() && !schema->is_boolean()) {
    ThrowInvalid(fields.Param("schema"),
                 "expected a JSON schema object, got " + JsonTypeName(*schema));
  }
  return *schema;
}

void CheckToolResults(const std::vector<ChatMessage>& messages,
                      const std::vector<std::string>& tool_call_id_params) {
  std::set<std::string> call_ids;  // of the assistant turns so far
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& message = messages[i];
    for (const ToolCall& call : message.tool_calls) call_ids.insert(call.id);
    // A result the template cannot attach to a call would reach the model as a result of
    // nothing: refused, as OpenAI refuses it.
    if (message.role != "tool") continue;
    if (message.tool_call_id.empty()) {
      ThrowInvalid(tool_call_id_params[i], "a tool result needs the id of the call it answers");
    }
    if (!call_ids.count(message.tool_call_id)) {
      ThrowInvalid(tool_call_id_params[i], "no earlier assistant turn has a tool call with id '" +
                                               message.tool_call_id + "'");
    }
  }
}

namespace {

// String content, or an array of {"type": "text", "text": ...} parts joined. Images and audio
// are refused by name: the model reads text only.
std::optional<std::string> ParseContent(const JsonFields& fields) {
  const Json* content = fields.Get("content");
  if (content == nullptr) return std::nullopt;
  if (content->is_string()) return content->get<std::string>();
  std::string param = fields.Param("content");
  if (!content->is_array()) {
    ThrowInvalid(param,
                 "expected a string or an array of content parts, got " + JsonTypeName(*content));
  }
  std::string text;
  for (size_t i = 0; i < content->size(); ++i) {
    JsonFields part((*content)[i], param + "[" + std::to_string(i) + "]");
    std::string type = part.String("type").value_or("");
    if (type != "text") {
      ThrowInvalid(part.Param("type"),
                   "only 'text' content parts are supported, got '" + type + "'");
    }
    std::optional<std::string> part_text = part.String("text");
    if (!part_text) ThrowInvalid(part.Param("text"), "a text part needs 'text'");
    text += *part_text;
  }
  return text;
}

ToolCall ParseToolCall(const Json& value, const std::string& param) {
  JsonFields fields(value, param);
  const Json* function = fields.Object("function");
  if (function == nullptr) ThrowInvalid(fields.Param("function"), "a tool call needs 'function'");
  JsonFields function_fields(*function, fields.Param("function"));
  ToolCall call;
  call.id = fields.String("id").value_or("");
  std::optional<std::string> name = function_fields.NonEmptyString("name");
  if (!name) ThrowInvalid(function_fields.Param("name"), "a tool call needs a function name");
  call.name = *name;
  call.arguments = function_fields.String("arguments").value_or("{}");
  return call;
}

ChatMessage ParseMessage(const Json& value, const std::string& param) {
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  JsonFields fields(value, param);
  ChatMessage message;
  std::optional<std::string> role = fields.String("role");
  if (!role || !kRoles.count(*role)) {
    ThrowInvalid(fields.Param("role"), "must be one of system, developer, user, assistant, tool");
  }
  message.role = *role;
  message.content = ParseContent(fields);
  message.name = fields.String("name").value_or("");
  message.tool_call_id = fields.String("tool_call_id").value_or("");
  message.reasoning_content = fields.String("reasoning_content").value_or("");
  if (const Json* calls = fields.Array("tool_calls")) {
    if (message.role != "assistant") {
      ThrowInvalid(fields.Param("tool_calls"), "only assistant messages carry tool calls");
    }
    for (size_t i = 0; i < calls->size(); ++i) {
      message.tool_calls.push_back(
          ParseToolCall((*calls)[i], fields.Param("tool_calls") + "[" + std::to_string(i) + "]"));
    }
  }
  if (!message.content && message.tool_calls.empty() && message.role != "assistant") {
    ThrowInvalid(fields.Param("content"), "a " + message.role + " message needs content");
  }
  return message;
}

std::vector<ToolDefinition> ParseTools(const JsonFields& fields) {
  std::vector<ToolDefinition> tools;
  const Json* list = fields.Array("tools");
  if (list == nullptr) return tools;
  for (size_t i = 0; i < list->size(); ++i) {
    JsonFields tool((*list)[i], "tools[" + std::to_string(i) + "]");
    if (tool.String("type").value_or("function") != "function") {
      ThrowInvalid(tool.Param("type"), "only 'function' tools are supported");
    }
    const Json* function = tool.Object("function");
    if (function == nullptr) ThrowInvalid(tool.Param("function"), "a tool needs 'function'");
    tools.push_back(ParseFunctionTool(JsonFields(*function, tool.Param("function")), tools));
  }
  return tools;
}

// Named: {"type": "function", "function": {"name": ...}}.
ToolChoice ParseToolChoice(const JsonFields& fields, const std::vector<ToolDefinition>& tools) {
  return ParseToolChoiceField(
      fields, tools,
      [](const JsonFields& named) {
        const Json* function = named.Object("function");
        if (function == nullptr) {
          ThrowInvalid("tool_choice.function", "a named tool_choice needs 'function'");
        }
        std::optional<std::string> name =
            JsonFields(*function, "tool_choice.function").String("name");
        if (!name) ThrowInvalid("tool_choice.function.name", "a named tool_choice needs a name");
        return *name;
      },
      "tool_choice.function.name");
}

// The JSON schema itself is compiled (and refused by feature) when the output grammar is built.
ResponseFormat ParseResponseFormat(const JsonFields& fields) {
  ResponseFormat format;
  const Json* value = fields.Get("response_format");
  if (value == nullptr || value->is_null()) return format;
  JsonFields format_fields(*value, "response_format");
  std::optional<std::string> type = format_fields.String("type");
  if (!type) ThrowInvalid("response_format.type", "is required (text, json_object or json_schema)");
  if (*type == "text") return format;
  if (*type == "json_object") {
    format.type = ResponseFormat::Type::kJsonObject;
    return format;
  }
  if (*type != "json_schema") {
    ThrowInvalid("response_format.type", "unknown response_format type '" + *type +
                                             "'; supported: text, json_object, json_schema");
  }
  format.type = ResponseFormat::Type::kJsonSchema;
  const Json* json_schema = format_fields.Object("json_schema");
  if (json_schema == nullptr) {
    ThrowInvalid("response_format.json_schema", "is required when the type is 'json_schema'");
  }
  format.schema = ParseJsonSchemaFields(JsonFields(*json_schema, "response_format.json_schema"));
  format.schema_param = "response_format.json_schema.schema";
  return format;
}

// Thinking on/off: chat_template_kwargs.enable_thinking (or .reasoning), else reasoning_effort
// ("none" turns it off, any other effort on).
void ParseReasoning(const JsonFields& fields, ChatRequest& request) {
  if (const Json* kwargs = fields.Object("chat_template_kwargs")) {
    request.chat_template_kwargs = *kwargs;
    JsonFields kwarg_fields(*kwargs, "chat_template_kwargs");
    request.enable_thinking = kwarg_fields.Bool("enable_thinking");
    if (!request.enable_thinking) request.enable_thinking = kwarg_fields.Bool("reasoning");
  }
  std::optional<std::string> effort = fields.String("reasoning_effort");
  if (!effort || request.enable_thinking) return;
  static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high"};
  if (!kEfforts.count(*effort)) {
    ThrowInvalid("reasoning_effort", "must be one of none, minimal, low, medium, high");
  }
  request.enable_thinking = *effort != "none";
}

// vLLM's `documents`: the Command-4 template renders them as the result of a document tool call
// before the first user turn, to ground the answer (Cohere's RAG format). Each is an object of
// string fields (vLLM's shape; the template prints `data` when present, else the whole object)
// or a string; anything else is refused naming the entry or the field, as docs/api.md says.
Json ParseDocuments(const JsonFields& fields) {
  const Json* documents = fields.Array("documents");
  if (documents == nullptr) return Json::array();
  for (size_t i = 0; i < documents->size(); ++i) {
    const Json& document = (*documents)[i];
    const std::string where = "documents[" + std::to_string(i) + "]";
    if (!document.is_object() && !document.is_string()) {
      ThrowInvalid(where, "must be an object or a string, got " + JsonTypeName(document));
    }
    if (!document.is_object()) continue;
    for (const auto& [key, value] : document.items()) {
      if (!value.is_string()) {
        ThrowInvalid(where + "." + key, "must be a string, got " + JsonTypeName(value));
      }
    }
  }
  return *documents;
}

// OpenAI fields whose values mkserve cannot honour are refused by name rather than ignored, so
// a client never gets less than it asked for without knowing. Fields that change nothing in the
// output (metadata, prediction, user, prompt_cache_key, safety_identifier) and unknown fields
// are accepted and ignored, as vLLM does.
void RejectUnhonouredFields(const JsonFields& fields) {
  if (fields.Get("audio") != nullptr) {
    ThrowInvalid("audio", "audio output is not supported: this model writes text only");
  }
  if (const Json* modalities = fields.Array("modalities")) {
    for (const Json& modality : *modalities) {
      if (modality != "text") {
        ThrowInvalid("modalities", "only [\"text\"] is supported: this model writes text only");
      }
    }
  }
  for (const char* legacy : {"functions", "function_call"}) {
    if (fields.Get(legacy) != nullptr) {
      ThrowInvalid(legacy,
                   "the deprecated functions API is not supported; send 'tools' and "
                   "'tool_choice' instead");
    }
  }
  if (fields.Get("web_search_options") != nullptr) {
    ThrowInvalid("web_search_options", "web search is not available on this server");
  }
  // vLLM's chat extensions that would change the prompt or the answer's shape.
  if (fields.Get("chat_template") != nullptr) {
    ThrowInvalid("chat_template",
                 "the model's own chat template is always used; 'chat_template_kwargs' sets its "
                 "options");
  }
  if (fields.Bool("echo").value_or(false)) {
    ThrowInvalid("echo", "chat does not echo the last message; send false or leave it out");
  }
  if (fields.Bool("store").value_or(false)) {
    ThrowInvalid("store", "this server does not store completions; send false or leave it out");
  }
  if (std::optional<std::string> tier = fields.String("service_tier")) {
    if (*tier != "auto" && *tier != "default") {
      ThrowInvalid("service_tier", "this server has one tier; send 'auto' or 'default'");
    }
  }
  if (std::optional<std::string> verbosity = fields.String("verbosity")) {
    if (*verbosity != "medium") {
      ThrowInvalid("verbosity",
                   "this model has no verbosity control; send 'medium' or leave it out");
    }
  }
  fields.Metadata("metadata");  // checked as OpenAI checks it; nothing is stored
  fields.Object("prediction");
}

std::vector<ChatMessage> ParseMessages(const Json& messages, const std::string& param) {
  if (!messages.is_array())
    ThrowInvalid(param, "expected an array of messages, got " + JsonTypeName(messages));
  if (messages.empty()) ThrowInvalid(param, "must contain at least one message");
  std::vector<ChatMessage> parsed;
  std::vector<std::string> tool_call_id_params;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string at = param + "[" + std::to_string(i) + "]";
    parsed.push_back(ParseMessage(messages[i], at));
    tool_call_id_params.push_back(at + ".tool_call_id");
  }
  CheckToolResults(parsed, tool_call_id_params);
  return parsed;
}

}  // namespace

ChatRequest ParseChatRequest(const Json& body) {
  JsonFields fields(body, "");
  ChatRequest request;
  const Json* messages = fields.Get("messages");
  if (messages == nullptr) ThrowInvalid("messages", "is required");
  request.messages = ParseMessages(*messages, "messages");
  request.generation = ParseGenerationFields(fields, /*min_max_tokens=*/1);
  request.tools = ParseTools(fields);
  request.tool_choice = ParseToolChoice(fields, request.tools);
  request.parallel_tool_calls = fields.Bool("parallel_tool_calls").value_or(true);
  request.response_format = ParseResponseFormat(fields);
  request.logprobs = fields.Bool("logprobs").value_or(false);
  std::optional<int64_t> top = fields.Integer("top_logprobs", 0, kMaxTopLogprobs);
  if (top && !request.logprobs) ThrowInvalid("top_logprobs", "requires 'logprobs': true");
  if (request.logprobs)
    request.generation.sampling.num_logprobs = static_cast<int32_t>(top.value_or(0));
  ParseReasoning(fields, request);
  request.add_special_tokens = fields.Bool("add_special_tokens").value_or(false);
  request.documents = ParseDocuments(fields);
  RejectUnhonouredFields(fields);
  return request;
}

}  // namespace mkserve::server
