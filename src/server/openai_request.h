// OpenAI requests as C++ structs. Handlers parse the JSON body into these at once (chat_request.h,
// completion_request.h) and validate every field; nothing past the handler sees JSON, except tool
// schemas, which are passed through to the chat template untouched.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "server/json.h"

#include "engine/sampling_params.h"

namespace mkserve::server {

// Fields shared by /v1/chat/completions and /v1/completions.
struct GenerationRequest {
  std::string model;  // empty: the served model
  SamplingParams sampling;
  bool has_max_tokens =
      false;  // false: generate up to the context limit (chat) or 16 (completions)
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::string user;
  // vLLM's extensions: special tokens left out of the text (chat keeps its format's markers,
  // which its parser reads), and logprobs naming tokens "token_id:<id>" instead of by text.
  bool skip_special_tokens = false;
  bool tokens_as_ids = false;
};

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as OpenAI sends it
};

struct ChatMessage {
  std::string role;                    // system, developer, user, assistant, tool
  std::optional<std::string> content;  // text parts joined; nullopt for a null content
  std::string reasoning_content;       // earlier turns' reasoning, if a client sends it back
  std::vector<ToolCall> tool_calls;    // assistant turns
  std::string tool_call_id;            // tool turns
  std::string name;
};

struct ToolDefinition {
  std::string name;
  std::string description;
  Json parameters = Json::object();  // JSON schema, passed to the template
  std::string parameters_param;      // names the schema in errors ("tools[0].function.parameters")
};

struct ToolChoice {
  enum class Mode { kNone, kAuto, kRequired, kNamed };
  Mode mode = Mode::kAuto;
  std::string name;  // kNamed only
};

// response_format: free text, any JSON object, or JSON matching a schema.
struct ResponseFormat {
  enum class Type { kText, kJsonObject, kJsonSchema };
  Type type = Type::kText;
  Json schema;  // json_schema.schema (json_schema.name and .strict are checked, not kept: the
                // schema is enforced either way)
  std::string schema_param;  // names the schema in errors ("response_format.json_schema.schema")
};

struct ChatRequest {
  GenerationRequest generation;
  std::vector<ChatMessage> messages;
  std::vector<ToolDefinition> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  ResponseFormat response_format;
  bool logprobs = false;
  std::optional<bool> enable_thinking;  // chat_template_kwargs / reasoning_effort; nullopt: default
  Json chat_template_kwargs = Json::object();
  // vLLM's: the tokenizer's special tokens (North's BOS) on top of those the template writes.
  bool add_special_tokens = false;
  // vLLM's `documents`: objects (or strings) the template grounds the answer in; empty: none.
  Json documents = Json::array();
};

// One prompt of /v1/completions: text, or token ids when the client sent them.
struct PromptInput {
  std::string text;
  std::vector<int32_t> token_ids;
  bool is_tokens = false;
};

struct CompletionRequest {
  GenerationRequest generation;
  std::vector<PromptInput> prompts;  // a batch: one choice group per prompt
  bool echo = false;
  bool add_special_tokens = true;  // vLLM's: the tokenizer's BOS before each text prompt
};

struct TokenizeRequest {
  std::string model;
  std::string prompt;               // used when `chat` is empty
  std::optional<ChatRequest> chat;  // `messages` sent: the chat request whose prompt is counted
  bool add_special_tokens = true;
};

struct DetokenizeRequest {
  std::string model;
  std::vector<int32_t> token_ids;
};

}  // namespace mkserve::server
