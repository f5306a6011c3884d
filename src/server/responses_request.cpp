#include "server/responses_request.h"

#include <limits>
#include <set>

#include "server/chat_request.h"
#include "server/generation_request.h"
#include "server/json_fields.h"

namespace mkserve::server {
namespace {

ChatMessage Message(std::string role, std::string content, std::string tool_call_id = "") {
  ChatMessage message;
  message.role = std::move(role);
  message.content = std::move(content);
  message.tool_call_id = std::move(tool_call_id);
  return message;
}

// Text given as a string or as an array of input_text / output_text parts, joined. Images, files
// and audio are refused by name: the model reads text only.
std::string ParseText(const Json& value, const std::string& param) {
  if (value.is_string()) return value.get<std::string>();
  if (!value.is_array()) {
    ThrowInvalid(param,
                 "expected a string or an array of content parts, got " + JsonTypeName(value));
  }
  std::string text;
  for (size_t i = 0; i < value.size(); ++i) {
    JsonFields part(value[i], param + "[" + std::to_string(i) + "]");
    const std::string type = part.String("type").value_or("");
    if (type != "input_text" && type != "output_text") {
      ThrowInvalid(part.Param("type"),
                   "only 'input_text' and 'output_text' parts are supported, got '" + type + "'");
    }
    std::optional<std::string> part_text = part.String("text");
    if (!part_text) ThrowInvalid(part.Param("text"), "a text part needs 'text'");
    text += *part_text;
  }
  return text;
}

// The item's `field`, which must be there, as text.
std::string RequiredText(const JsonFields& item, const std::string& field) {
  const Json* value = item.Get(field);
  if (value == nullptr) ThrowInvalid(item.Param(field), "is required");
  return ParseText(*value, item.Param(field));
}

// A reasoning item's text: its `content` (reasoning_text parts), else its `summary`.
std::string ParseReasoningItem(const JsonFields& item) {
  std::string text;
  for (const char* field : {"content", "summary"}) {
    const Json* parts = item.Array(field);
    if (parts == nullptr) continue;
    for (size_t i = 0; i < parts->size(); ++i) {
      JsonFields part((*parts)[i], item.Param(field) + "[" + std::to_string(i) + "]");
      std::optional<std::string> part_text = part.String("text");
      if (!part_text) ThrowInvalid(part.Param("text"), "a reasoning part needs 'text'");
      text += *part_text;
    }
    if (!text.empty()) break;
  }
  return text;
}

// Input items as chat messages. Consecutive assistant-side items (reasoning, assistant
// messages, function calls) make one assistant turn, as the chat template renders a turn; a
// function_call_output is a tool message. `call_id_params[i]` names the call id of the item
// message i came from, for CheckToolResults.
class InputItemReader {
 public:
  InputItemReader(std::vector<ChatMessage>& messages, std::vector<std::string>& call_id_params)
      : messages_(messages), call_id_params_(call_id_params) {}

  // One item; `at` names it in errors.
  void Read(const Json& value, const std::string& at) {
    static const std::set<std::string> kRoles = {"user", "system", "developer", "assistant"};
    JsonFields item(value, at);
    item.String("id");  // typed: a stored item is listed, and paged after, by it
    const std::string type = item.String("type").value_or("message");
    if (type == "message") {
      std::optional<std::string> role = item.String("role");
      if (!role || !kRoles.count(*role)) {
        ThrowInvalid(item.Param("role"), "must be one of user, system, developer, assistant");
      }
      std::string text = RequiredText(item, "content");
      if (*role == "assistant") {
        ChatMessage& turn = AssistantTurn(at);
        turn.content = turn.content.value_or("") + text;
        return;
      }
      Push(Message(*role, std::move(text)), at);
    } else if (type == "reasoning") {
      AssistantTurn(at).reasoning_content += ParseReasoningItem(item);
    } else if (type == "function_call") {
      ToolCall call;
      std::optional<std::string> call_id = item.NonEmptyString("call_id");
      if (!call_id) ThrowInvalid(item.Param("call_id"), "a function_call item needs 'call_id'");
      std::optional<std::string> name = item.NonEmptyString("name");
      if (!name) ThrowInvalid(item.Param("name"), "a function_call item needs 'name'");
      call.id = *call_id;
      call.name = *name;
      call.arguments = item.String("arguments").value_or("{}");
      AssistantTurn(at).tool_calls.push_back(std::move(call));
    } else if (type == "function_call_output") {
      std::optional<std::string> call_id = item.String("call_id");
      Push(Message("tool", RequiredText(item, "output"), call_id.value_or("")), at);
    } else {
      ThrowInvalid(item.Param("type"), "input items of type '" + type +
                                           "' are not supported (message, reasoning, "
                                           "function_call, function_call_output)");
    }
  }

 private:
  void Push(ChatMessage message, const std::string& at) {
    messages_.push_back(std::move(message));
    call_id_params_.push_back(at + ".call_id");
    assistant_open_ = false;
  }
  ChatMessage& AssistantTurn(const std::string& at) {
    if (!assistant_open_) {
      ChatMessage turn;
      turn.role = "assistant";
      Push(std::move(turn), at);
      assistant_open_ = true;
    }
    return messages_.back();
  }

  std::vector<ChatMessage>& messages_;
  std::vector<std::string>& call_id_params_;
  bool assistant_open_ = false;  // the last message is an assistant turn items may still join
};

std::vector<ToolDefinition> ParseTools(const JsonFields& fields) {
  std::vector<ToolDefinition> tools;
  const Json* list = fields.Array("tools");
  if (list == nullptr) return tools;
  for (size_t i = 0; i < list->size(); ++i) {
    JsonFields tool((*list)[i], "tools[" + std::to_string(i) + "]");
    const std::string type = tool.String("type").value_or("");
    if (type != "function") {
      ThrowInvalid(tool.Param("type"), "only 'function' tools are supported, got '" + type +
                                           "' (this server has no hosted tools)");
    }
    tools.push_back(ParseFunctionTool(tool, tools));
  }
  return tools;
}

// Named: {"type": "function", "name": ...}.
ToolChoice ParseToolChoice(const JsonFields& fields, const std::vector<ToolDefinition>& tools) {
  return ParseToolChoiceField(
      fields, tools,
      [](const JsonFields& named) {
        if (named.String("type").value_or("") != "function") {
          ThrowInvalid("tool_choice.type", "a tool_choice object must be {\"type\": \"function\"}");
        }
        std::optional<std::string> name = named.NonEmptyString("name");
        if (!name) ThrowInvalid("tool_choice.name", "a named tool_choice needs a name");
        return *name;
      },
      "tool_choice.name");
}

// text.format: {"type": "text" | "json_object" | "json_schema", name, schema, strict}.
ResponseFormat ParseTextFormat(const JsonFields& fields) {
  ResponseFormat format;
  const Json* text = fields.Object("text");
  if (text == nullptr) return format;
  JsonFields text_fields(*text, "text");
  if (std::optional<std::string> verbosity = text_fields.String("verbosity")) {
    if (*verbosity != "medium") {
      ThrowInvalid("text.verbosity",
                   "this model has no verbosity control; send 'medium' or leave it out");
    }
  }
  const Json* value = text_fields.Object("format");
  if (value == nullptr) return format;
  JsonFields format_fields(*value, "text.format");
  const std::string type = format_fields.String("type").value_or("");
  if (type == "text") return format;
  if (type == "json_object") {
    format.type = ResponseFormat::Type::kJsonObject;
  } else if (type == "json_schema") {
    format.type = ResponseFormat::Type::kJsonSchema;
    format.schema = ParseJsonSchemaFields(format_fields);
    format.schema_param = "text.format.schema";
  } else {
    ThrowInvalid("text.format.type",
                 "unknown format type '" + type + "'; supported: text, json_object, json_schema");
  }
  return format;
}

// reasoning.effort: "none" turns thinking off, any other effort on; absent: the server default.
std::optional<bool> ParseReasoningEffort(const JsonFields& fields) {
  const Json* reasoning = fields.Object("reasoning");
  if (reasoning == nullptr) return std::nullopt;
  JsonFields reasoning_fields(*reasoning, "reasoning");
  reasoning_fields.String("summary");  // typed; the reasoning comes back whole, not summarised
  std::optional<std::string> effort = reasoning_fields.String("effort");
  if (!effort) return std::nullopt;
  static const std::set<std::string> kEfforts = {"none", "minimal", "low", "medium", "high"};
  if (!kEfforts.count(*effort)) {
    ThrowInvalid("reasoning.effort", "must be one of none, minimal, low, medium, high");
  }
  return *effort != "none";
}

// include: the answer's logprobs ("message.output_text.logprobs"; top_logprobs alternatives a
// token), and "reasoning.encrypted_content", which asks nothing: the reasoning comes back as
// plain reasoning_text. Other values name outputs of hosted tools or images.
void ParseInclude(const JsonFields& fields, ChatRequest& chat) {
  bool logprobs = false;
  if (const Json* include = fields.Array("include")) {
    for (size_t i = 0; i < include->size(); ++i) {
      const Json& value = (*include)[i];
      if (value == "message.output_text.logprobs") {
        logprobs = true;
      } else if (value != "reasoning.encrypted_content") {
        ThrowInvalid("include[" + std::to_string(i) + "]",
                     "only \"message.output_text.logprobs\" and \"reasoning.encrypted_content\" "
                     "can be included, got " +
                         value.dump());
      }
    }
  }
  std::optional<int64_t> top = fields.Integer("top_logprobs", 0, kMaxTopLogprobs);
  if (top && !logprobs) {
    ThrowInvalid("top_logprobs", "requires 'include': [\"message.output_text.logprobs\"]");
  }
  chat.logprobs = logprobs;
  if (logprobs) chat.generation.sampling.num_logprobs = static_cast<int32_t>(top.value_or(0));
}

// What needs a hosted tool, a stored prompt or another output than text is refused by name.
void RejectUnhonouredFields(const JsonFields& fields) {
  if (fields.Get("prompt") != nullptr) {
    ThrowInvalid("prompt", "stored prompt templates are not supported; send 'input'");
  }
  if (std::optional<std::string> truncation = fields.String("truncation")) {
    if (*truncation != "disabled") {
      ThrowInvalid("truncation",
                   "input is never truncated (an input over the context is refused); send "
                   "'disabled'");
    }
  }
  if (std::optional<std::string> tier = fields.String("service_tier")) {
    if (*tier != "auto" && *tier != "default") {
      ThrowInvalid("service_tier", "this server has one tier; send 'auto' or 'default'");
    }
  }
  if (const Json* n = fields.Get("n"); n != nullptr && *n != 1) {
    ThrowInvalid("n", "a response has one output; send several requests for several");
  }
}

// The input as items: a string is one user message.
Json InputItems(const Json& input) {
  if (input.is_string()) {
    return Json::array({{{"type", "message"}, {"role", "user"}, {"content", input}}});
  }
  if (!input.is_array()) {
    ThrowInvalid("input", "expected a string or an array of items, got " + JsonTypeName(input));
  }
  if (input.empty()) ThrowInvalid("input", "must contain at least one item");
  return input;
}

// The input items a conversation will hold after this turn: an id it holds already, or one sent
// twice, would make two items of one id (listed, paged and deleted by it).
void CheckNewItemIds(const Json& items, const Json& conversation) {
  std::set<std::string> ids;
  for (const Json& item : conversation) {
    if (item.contains("id") && item["id"].is_string()) ids.insert(item["id"].get<std::string>());
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const auto id = items[i].find("id");
    if (id == items[i].end() || !id->is_string()) continue;
    if (!ids.insert(id->get<std::string>()).second) {
      ThrowInvalid("input[" + std::to_string(i) + "].id",
                   "the conversation already holds an item '" + id->get<std::string>() +
                       "' (or the input names it twice); leave it out of 'input': the "
                       "conversation gives it");
    }
  }
}

}  // namespace

std::optional<std::string> PreviousResponseId(const Json& body) {
  return JsonFields(body, "").NonEmptyString("previous_response_id");
}

std::optional<std::string> ConversationId(const Json& body) {
  JsonFields fields(body, "");
  const Json* value = fields.Get("conversation");
  if (value == nullptr || value->is_null()) return std::nullopt;
  std::optional<std::string> id = value->is_object()
                                      ? JsonFields(*value, "conversation").NonEmptyString("id")
                                      : fields.NonEmptyString("conversation");
  if (!id) ThrowInvalid("conversation", "must be a conversation id or {\"id\": ...}");
  if (fields.Get("previous_response_id") != nullptr) {
    ThrowInvalid("conversation",
                 "a request continues a conversation or a previous response, "
                 "not both; leave out 'previous_response_id'");
  }
  return id;
}

void CheckInputItems(const Json& items, const std::string& param, const Json& before) {
  if (!items.is_array())
    ThrowInvalid(param, "expected an array of items, got " + JsonTypeName(items));
  std::vector<ChatMessage> messages;
  std::vector<std::string> call_id_params;
  InputItemReader reader(messages, call_id_params);
  for (const Json& item : before) reader.Read(item, "conversation");
  for (size_t i = 0; i < items.size(); ++i)
    reader.Read(items[i], param + "[" + std::to_string(i) + "]");
  CheckToolResults(messages, call_id_params);
}

Json ListedItem(Json item, const std::string& id) {
  const bool message = item.value("type", "message") == "message";
  if (!item.contains("id")) item["id"] = id;
  if (message && !item.contains("type")) item["type"] = "message";
  if (message && item["content"].is_string()) {
    const bool assistant = item.value("role", "") == "assistant";
    item["content"] = Json::array(
        {{{"type", assistant ? "output_text" : "input_text"}, {"text", item["content"]}}});
  }
  return item;
}

ResponsesRequest ParseResponsesRequest(const Json& body, const Json& context) {
  JsonFields fields(body, "");
  ResponsesRequest request;
  ChatRequest& chat = request.chat;
  std::vector<std::string> call_id_params;  // CheckToolResults' names of the messages' call ids
  std::optional<std::string> instructions = fields.String("instructions");
  if (instructions) {
    chat.messages.push_back(Message("system", *instructions));
    call_id_params.push_back("instructions");
  }
  const Json* input = fields.Get("input");
  if (input == nullptr) ThrowInvalid("input", "is required");
  request.input_items = InputItems(*input);
  InputItemReader reader(chat.messages, call_id_params);
  // The context's items came from the conversation (named by their place in it, to be fixed
  // there), or the previous response's chain.
  const bool conversation = ConversationId(body).has_value();
  for (size_t i = 0; i < context.size(); ++i) {
    reader.Read(context[i], conversation ? "conversation.items[" + std::to_string(i) + "]"
                                         : "previous_response_id");
  }
  for (size_t i = 0; i < request.input_items.size(); ++i) {
    reader.Read(request.input_items[i],
                input->is_string() ? "input" : "input[" + std::to_string(i) + "]");
  }
  CheckToolResults(chat.messages, call_id_params);
  if (conversation) CheckNewItemIds(request.input_items, context);
  RejectUnhonouredFields(fields);
  chat.generation = ParseGenerationFields(fields, /*min_max_tokens=*/1);
  if (std::optional<int64_t> max =
          fields.Integer("max_output_tokens", 1, std::numeric_limits<int32_t>::max())) {
    chat.generation.sampling.max_tokens = static_cast<int32_t>(*max);
    chat.generation.has_max_tokens = true;
  }
  chat.tools = ParseTools(fields);
  chat.tool_choice = ParseToolChoice(fields, chat.tools);
  chat.parallel_tool_calls = fields.Bool("parallel_tool_calls").value_or(true);
  chat.response_format = ParseTextFormat(fields);
  chat.enable_thinking = ParseReasoningEffort(fields);
  ParseInclude(fields, chat);
  request.store = fields.Bool("store").value_or(true);
  request.background = fields.Bool("background").value_or(false);
  if (request.background && !request.store) {
    ThrowInvalid("background", "a background response is stored for polling; send store: true");
  }
  fields.String("previous_response_id");  // typed; its context came in `context`
  request.conversation_id = ConversationId(body).value_or("");

  Json& echo = request.echo;
  echo["instructions"] = instructions ? Json(*instructions) : Json(nullptr);
  echo["max_output_tokens"] =
      chat.generation.has_max_tokens ? Json(chat.generation.sampling.max_tokens) : Json(nullptr);
  echo["tools"] = fields.Get("tools") != nullptr ? *fields.Get("tools") : Json::array();
  echo["tool_choice"] = fields.Get("tool_choice") != nullptr
                            ? *fields.Get("tool_choice")
                            : Json(chat.tools.empty() ? "none" : "auto");
  const Json* text = fields.Get("text");
  const Json* format = text != nullptr && text->contains("format") ? &(*text)["format"] : nullptr;
  echo["text"] = {
      {"format", format != nullptr && format->is_object() ? *format : Json{{"type", "text"}}}};
  const Json* reasoning = fields.Get("reasoning");
  const Json* effort =
      reasoning != nullptr && reasoning->contains("effort") ? &(*reasoning)["effort"] : nullptr;
  echo["reasoning"] = {{"effort", effort != nullptr ? *effort : Json(nullptr)},
                       {"summary", nullptr}};
  echo["top_logprobs"] = chat.logprobs ? chat.generation.sampling.num_logprobs : 0;
  echo["temperature"] = chat.generation.sampling.temperature;
  echo["top_p"] = chat.generation.sampling.top_p;
  echo["parallel_tool_calls"] = chat.parallel_tool_calls;
  echo["metadata"] = fields.Metadata("metadata");
  echo["user"] = chat.generation.user.empty() ? Json(nullptr) : Json(chat.generation.user);
  const Json* previous = fields.Get("previous_response_id");
  echo["previous_response_id"] = previous != nullptr ? *previous : Json(nullptr);
  echo["conversation"] =
      request.conversation_id.empty() ? Json(nullptr) : Json{{"id", request.conversation_id}};
  echo["store"] = request.store;
  echo["background"] = request.background;
  return request;
}

}  // namespace mkserve::server
