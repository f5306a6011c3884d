#include "server/chat_prompt.h"

#include "chat/continue_final_message.h"
#include "common/error.h"
#include "server/error.h"

namespace mkserve::server {
namespace {

// Templates print tool-call arguments with tojson, so they get the parsed object; text that is
// not JSON is passed on as a string rather than refused.
Json ArgumentsValue(const std::string& arguments) {
  Json parsed = Json::parse(arguments, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? Json(arguments) : parsed;
}

Json MessageJson(const ChatMessage& message) {
  // OpenAI's `developer` role is the newer name of `system`; chat templates know only `system`.
  Json json = {{"role", message.role == "developer" ? "system" : message.role},
               {"content", message.content ? Json(*message.content) : Json(nullptr)}};
  if (!message.name.empty()) json["name"] = message.name;
  if (!message.tool_call_id.empty()) json["tool_call_id"] = message.tool_call_id;
  if (!message.reasoning_content.empty()) json["reasoning_content"] = message.reasoning_content;
  if (message.tool_calls.empty()) return json;
  json["tool_calls"] = Json::array();
  for (const ToolCall& call : message.tool_calls) {
    json["tool_calls"].push_back(
        {{"id", call.id},
         {"type", "function"},
         {"function", {{"name", call.name}, {"arguments", ArgumentsValue(call.arguments)}}}});
  }
  return json;
}

// tool_choice "none" leaves the tools out of the prompt; a named choice offers only that tool.
Json ToolsJson(const ChatRequest& request) {
  if (request.tools.empty() || request.tool_choice.mode == ToolChoice::Mode::kNone) return nullptr;
  Json tools = Json::array();
  for (const ToolDefinition& tool : request.tools) {
    bool named = request.tool_choice.mode == ToolChoice::Mode::kNamed;
    if (named && tool.name != request.tool_choice.name) continue;
    tools.push_back({{"type", "function"},
                     {"function",
                      {{"name", tool.name},
                       {"description", tool.description},
                       {"parameters", tool.parameters}}}});
  }
  return tools;
}

std::string TokenText(const std::optional<tokenizer::NamedToken>& token) {
  return token ? token->text : "";
}

// True when the conversation ends with an assistant message (text, no tool calls) that the
// model should continue rather than answer.
bool EndsWithPrefill(const ChatRequest& request) {
  const ChatMessage& last = request.messages.back();
  return last.role == "assistant" && last.tool_calls.empty() && last.content &&
         last.content->find_first_not_of(" \t\r\n\f\v") != std::string::npos;
}

// The variables the template sees. Both `enable_thinking` and `reasoning` carry the thinking
// switch, as templates differ in the name; `developer` messages are passed as `system`.
Json BuildTemplateContext(const ChatRequest& request, const tokenizer::Tokenizer& tokenizer,
                          const ChatPrompt& prompt) {
  Json context =
      request.chat_template_kwargs.is_object() ? request.chat_template_kwargs : Json::object();
  context["messages"] = Json::array();
  for (const ChatMessage& message : request.messages) {
    context["messages"].push_back(MessageJson(message));
  }
  context["tools"] = ToolsJson(request);
  if (!request.documents.empty()) context["documents"] = request.documents;
  context["add_generation_prompt"] = !prompt.prefill;
  context["bos_token"] = TokenText(tokenizer.bos());
  context["eos_token"] = TokenText(tokenizer.eos());
  context["enable_thinking"] = prompt.thinking;
  context["reasoning"] = prompt.thinking;
  return context;
}

}  // namespace

ChatPrompt BuildChatPrompt(const ServedModel& model, const ChatRequest& request,
                           bool default_enable_thinking) {
  if (!model.chat_template) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   "this model has no chat template; use /v1/completions instead");
  }
  ChatPrompt prompt;
  // The request's switch (chat_template_kwargs, reasoning_effort), else the default.
  prompt.thinking = request.enable_thinking.value_or(default_enable_thinking);
  prompt.prefill = EndsWithPrefill(request);
  try {
    std::string text =
        model.chat_template->Render(BuildTemplateContext(request, *model.tokenizer, prompt));
    // Templates close every assistant turn; a prefill is cut open after its text, as
    // transformers' continue_final_message does.
    if (prompt.prefill) text = chat::ContinueFinalMessage(text, *request.messages.back().content);
    // The template writes BOS itself, as transformers' apply_chat_template expects; vLLM's
    // add_special_tokens asks for the tokenizer's on top.
    prompt.token_ids = model.tokenizer->Encode(text, request.add_special_tokens);
  } catch (const Error& error) {
    throw ApiError(ErrorKind::kInvalidRequest,
                   std::string("could not build the chat prompt: ") + error.what(), "messages");
  }
  return prompt;
}

}  // namespace mkserve::server
